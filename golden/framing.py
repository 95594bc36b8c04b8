"""The stream framing of DESIGN.md A3, beat by beat: lookups in, micro-batches out.

**Input** (``s_axis_lookup``). A beat carries up to ``lanes`` keys of one sample: lane ``i``
holds a key when bit ``i`` of ``keep`` is set (keys are taken in lane order, holes allowed);
``user`` marks the last beat of a sample, ``last`` the last beat of a mini-batch. A beat
with ``keep == 0`` and ``user`` set ends a sample (an empty one if nothing came since the
previous boundary). :func:`parse_lookup_beats` turns beats back into mini-batches and counts
the framing errors the fragmenter flags:

* ``ended_mid_sample``: ``last`` on a beat without ``user``: the open sample is closed
  there (its lookups are kept, nothing is dropped) and the mini-batch ends;
* ``unterminated``: beats after the last ``last`` (the stream stopped mid-mini-batch); they
  are returned as an extra, unterminated mini-batch.

**Output** (``m_axis_popular``, ``m_axis_nonpopular``). A sample's translated lookups leave
densely packed, ``lanes`` per beat, in ``ceil(n / lanes)`` beats, every beat carrying the
sample id; ``user`` marks the sample's last beat and ``last`` the micro-batch's last beat. A
sample with no lookups is one beat with ``keep == 0`` and ``user`` set. A micro-batch with
no sample is one beat with ``keep == 0``, ``user`` clear and ``last`` set, so the consumer
always sees the end of every mini-batch on both outputs.

Beats are dicts ``{"keys" or "lookups": [...lanes], "keep": int, "user": 0/1, "last": 0/1}``
(output beats add ``"sample_id"``); a translated lookup is ``(tag, value)``.
"""

from dataclasses import dataclass

import numpy as np

__all__ = ["LookupFraming", "frame_lookup_beats", "parse_lookup_beats", "pack_output_beats",
           "unpack_output_beats"]


def frame_lookup_beats(samples, lanes, *, rng=None, hole_prob=0.0, empty_end_prob=0.0):
    """Beats of one mini-batch given as a list of samples (lists of keys).

    ``hole_prob``: chance of leaving a lane empty before a key (``keep`` holes);
    ``empty_end_prob``: chance of ending a sample with an extra ``keep == 0`` beat instead
    of marking its last key's beat."""
    rng = rng or np.random.default_rng(0)
    beats = []
    for s, sample in enumerate(samples):
        cur, keep, lane = [0] * lanes, 0, 0
        for k in sample:
            while lane < lanes - 1 and hole_prob and rng.random() < hole_prob:
                lane += 1
            cur[lane] = int(k)
            keep |= 1 << lane
            lane += 1
            if lane == lanes:
                beats.append({"keys": cur, "keep": keep, "user": 0, "last": 0})
                cur, keep, lane = [0] * lanes, 0, 0
        if keep or not sample or (empty_end_prob and rng.random() < empty_end_prob):
            beats.append({"keys": cur, "keep": keep, "user": 1, "last": 0})
        else:
            beats[-1]["user"] = 1
    if not beats:
        beats.append({"keys": [0] * lanes, "keep": 0, "user": 0, "last": 1})
    beats[-1]["last"] = 1
    return beats


@dataclass
class LookupFraming:
    """Mini-batches recovered from input beats, and the framing errors seen."""
    minibatches: list          # each a list of samples (lists of keys)
    ended_mid_sample: int = 0
    unterminated: int = 0


def parse_lookup_beats(beats, lanes):
    """Mini-batches (lists of samples) from input beats; see the module docstring."""
    out = LookupFraming([])
    batch, sample, open_sample = [], [], False
    for b in beats:
        for i in range(lanes):
            if (b["keep"] >> i) & 1:
                sample.append(int(b["keys"][i]))
                open_sample = True
        if b["user"]:
            batch.append(sample)
            sample, open_sample = [], False
        if b["last"]:
            if open_sample:
                out.ended_mid_sample += 1
                batch.append(sample)
                sample, open_sample = [], False
            out.minibatches.append(batch)
            batch = []
    if batch or open_sample:
        if open_sample:
            batch.append(sample)
        out.minibatches.append(batch)
        out.unterminated += 1
    return out


def pack_output_beats(micro, lanes):
    """Output beats of one micro-batch (a :class:`golden.records.MicroBatch`)."""
    beats = []
    off = micro.offsets
    tags, vals = micro.tags.tolist(), micro.values.tolist()
    for i, sid in enumerate(micro.sample_ids.tolist()):
        lk = list(zip(tags[off[i]:off[i + 1]], vals[off[i]:off[i + 1]]))
        chunks = [lk[j:j + lanes] for j in range(0, len(lk), lanes)] or [[]]
        for j, chunk in enumerate(chunks):
            beats.append({"sample_id": sid,
                          "lookups": chunk + [(0, 0)] * (lanes - len(chunk)),
                          "keep": (1 << len(chunk)) - 1,
                          "user": int(j == len(chunks) - 1), "last": 0})
    if not beats:
        beats.append({"sample_id": 0, "lookups": [(0, 0)] * lanes, "keep": 0, "user": 0, "last": 0})
    beats[-1]["last"] = 1
    return beats


def unpack_output_beats(beats, lanes):
    """``[(sample_id, [(tag, value), ...]), ...]`` from the output beats of one
    micro-batch, checking the packing rules (dense lanes, one id per sample, one ``last``)."""
    samples, cur, cur_id = [], None, None
    for n, b in enumerate(beats):
        k = b["keep"]
        assert k & (k + 1) == 0, f"beat {n}: keep {k:b} is not dense"
        assert bool(b["last"]) == (n == len(beats) - 1), f"beat {n}: last misplaced"
        if not b["user"] and not k:
            assert b["last"] and not samples and cur is None, f"beat {n}: stray empty beat"
            continue
        if cur is None:
            cur, cur_id = [], b["sample_id"]
        assert b["sample_id"] == cur_id, f"beat {n}: sample id changed within a sample"
        cur += [tuple(x) for x in b["lookups"][:k.bit_length()]]
        if b["user"]:
            samples.append((cur_id, cur))
            cur = None
        else:
            assert k == (1 << lanes) - 1, f"beat {n}: a sample's beat before its last is not full"
    assert cur is None, "the micro-batch ends inside a sample"
    return samples
