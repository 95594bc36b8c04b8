"""Output records of the fragmenter: micro-batches of translated lookups, and statistics.

A translated lookup is a tagged value:

=========  ===  =====================================================================
tag        code value
=========  ===  =====================================================================
POPULAR    1    CAM slot: the row lives at ``POPULAR_BASE + slot * ROW_BYTES``
STAGED     2    staging index: the row is gathered to ``STAGING_BASE[bank] + index * ROW_BYTES``
OVERFLOW   3    the key itself: the host serves it on the CPU path
=========  ===  =====================================================================

Code 0 marks an unused lane on the wire.
"""

from dataclasses import dataclass, field, fields

import numpy as np

__all__ = ["TAG_POPULAR", "TAG_STAGED", "TAG_OVERFLOW", "TAG_NAMES", "MicroBatch",
           "BatchCounters"]

TAG_POPULAR = 1
TAG_STAGED = 2
TAG_OVERFLOW = 3
TAG_NAMES = {TAG_POPULAR: "POPULAR", TAG_STAGED: "STAGED", TAG_OVERFLOW: "OVERFLOW"}


@dataclass
class MicroBatch:
    """Samples of one output stream, in output order, column-wise.

    ``sample_ids[i]`` and ``lengths[i]`` describe the i-th sample; its translated lookups
    are ``tags[off[i]:off[i+1]]`` / ``values[...]`` with ``off`` the cumulative lengths.
    """
    sample_ids: np.ndarray
    lengths: np.ndarray
    tags: np.ndarray
    values: np.ndarray

    @property
    def n_samples(self):
        return len(self.sample_ids)

    @property
    def offsets(self):
        off = np.zeros(len(self.lengths) + 1, dtype=np.int64)
        np.cumsum(self.lengths, out=off[1:])
        return off

    def samples(self):
        """``[(sample_id, [(tag, value), ...]), ...]``: every record, for scoreboards."""
        off = self.offsets
        tags, vals = self.tags.tolist(), self.values.tolist()
        return [(int(sid), list(zip(tags[off[i]:off[i + 1]], vals[off[i]:off[i + 1]])))
                for i, sid in enumerate(self.sample_ids.tolist())]

    def __eq__(self, other):
        return (isinstance(other, MicroBatch)
                and np.array_equal(self.sample_ids, other.sample_ids)
                and np.array_equal(self.lengths, other.lengths)
                and np.array_equal(self.tags, other.tags)
                and np.array_equal(self.values, other.values))


@dataclass
class BatchCounters:
    """Statistics of one or more mini-batches (the hardware's statistics counters).

    Members
    -------
    lookups: valid lookup slots received (every key with keep set).
    hits: lookups that hit the CAM (bad keys and lookups past ``max_sample_lookups`` are not
        looked up).
    popular_samples, nonpopular_samples: samples sent to each output.
    staged_rows: unique non-popular rows given a staging index (= gather requests).
    overflows: lookups that left as OVERFLOW (any reason).
    bad_keys: lookups whose table id is >= ``num_tables``.
    long_samples: samples longer than ``max_sample_lookups``.
    staging_full: missing lookups (every occurrence) left OVERFLOW because their row came
        after the bank held ``staging_rows`` rows.
    dedup_full: missing lookups (every occurrence) left OVERFLOW because their row's de-dup
        set was full.
    id_wraps: mini-batches with more samples than sample ids.
    framing_errors: mini-batches that ended inside a sample (``last`` without ``user``) or
        were ended by a flush (the stream stopped).
    minibatches: mini-batches fragmented.
    learned_lookups: lookups applied to the counter array.
    """
    lookups: int = 0
    hits: int = 0
    popular_samples: int = 0
    nonpopular_samples: int = 0
    staged_rows: int = 0
    overflows: int = 0
    bad_keys: int = 0
    long_samples: int = 0
    staging_full: int = 0
    dedup_full: int = 0
    id_wraps: int = 0
    framing_errors: int = 0
    minibatches: int = 0
    learned_lookups: int = 0

    def __iadd__(self, other):
        for f in fields(self):
            setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))
        return self

    def as_dict(self):
        return {f.name: getattr(self, f.name) for f in fields(self)}
