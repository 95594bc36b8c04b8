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

**Output** (``m_axis_popular``, ``m_axis_nonpopular``): the input's framing, beat for beat.
Every input beat of a sample becomes one output beat on the sample's output, with the same
``keep`` and, in each kept lane, the translated lookup of that lane's key (unkept lanes are
zero); every beat carries the sample id, ``user`` marks the sample's last beat. ``last`` is
never set on such a beat: each micro-batch ends with one **terminator beat** (``keep == 0``,
``user`` clear, ``last`` set) on both outputs, also when the output got no sample. So an
output beat leaves as soon as its sample's verdict is known (it never waits to learn whether
it is the micro-batch's last), and a one-hot sample of ``n`` lookups takes
``ceil(n / lanes)`` beats in and out.

Beats are dicts ``{"keys" or "lookups": [...lanes], "keep": int, "user": 0/1, "last": 0/1}``
(output beats add ``"sample_id"``); a translated lookup is ``(tag, value)``.
"""

from dataclasses import dataclass

import numpy as np

__all__ = ["LookupFraming", "frame_lookup_beats", "parse_lookup_beats", "output_beats",
           "terminator_beat", "unpack_output_beats", "StreamResult", "fragment_stream",
           "FLUSH_BEAT"]


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


def terminator_beat(lanes):
    """The beat that ends every micro-batch on both outputs."""
    return {"sample_id": 0, "lookups": [(0, 0)] * lanes, "keep": 0, "user": 0, "last": 1}


def output_beats(cfg, beats, res):
    """``(popular_beats, nonpopular_beats)``: the two output streams of one mini-batch.

    ``beats`` are the mini-batch's input beats (the last one has ``last``, see
    :func:`frame_lookup_beats`) and ``res`` the :class:`golden.fragment.FragmentResult` of
    the mini-batch they carry (:func:`parse_lookup_beats` then ``fragment``). Each input beat
    that belongs to a sample becomes one output beat on that sample's output, with the same
    ``keep`` and the translated lookup of each key in the key's lane (``(0, 0)`` in the other
    lanes); ``user`` is set on the beat that ends the sample (also on a ``last`` beat that
    ends the mini-batch inside a sample). Input beats that belong to no sample (``keep == 0``
    and nothing to end) leave nothing. Both outputs then get :func:`terminator_beat`.
    """
    lanes = cfg.lanes
    mask = (1 << cfg.sample_id_bits) - 1
    tags, vals = res.tags.tolist(), res.values.tolist()
    pop = res.sample_popular.tolist()
    outs = ([], [])
    s = i = 0
    opened = False
    for b in beats:
        keep = b["keep"]
        user = bool(b["user"]) or (bool(b["last"]) and (opened or keep != 0))
        if keep == 0 and not user:
            continue
        lk = [(0, 0)] * lanes
        for lane in range(lanes):
            if (keep >> lane) & 1:
                lk[lane] = (int(tags[i]), int(vals[i]))
                i += 1
        outs[0 if pop[s] else 1].append({"sample_id": s & mask, "lookups": lk, "keep": keep,
                                         "user": int(user), "last": 0})
        opened = opened or keep != 0
        if user:
            s, opened = s + 1, False
    assert i == len(tags) and s == len(pop), "beats and result disagree"
    for o in outs:
        o.append(terminator_beat(lanes))
    return outs


def unpack_output_beats(beats, lanes):
    """``[(sample_id, [(tag, value), ...]), ...]`` from the output beats of one
    micro-batch, checking the framing rules (one sample id per sample, empty lanes zero, one
    terminator at the end and nowhere else)."""
    samples, cur, cur_id = [], None, None
    assert beats, "no beats"
    t = beats[-1]
    assert t["last"] and not t["keep"] and not t["user"], "the micro-batch does not end " \
        f"with a terminator beat: {t}"
    for n, b in enumerate(beats[:-1]):
        k = b["keep"]
        assert not b["last"], f"beat {n}: last before the terminator"
        assert k or b["user"], f"beat {n}: a beat with no key that ends no sample"
        if cur is None:
            cur, cur_id = [], b["sample_id"]
        assert b["sample_id"] == cur_id, f"beat {n}: sample id changed within a sample"
        for lane in range(lanes):
            if (k >> lane) & 1:
                cur.append(tuple(b["lookups"][lane]))
            else:
                assert tuple(b["lookups"][lane]) == (0, 0), f"beat {n}: lane {lane} not zero"
        if b["user"]:
            samples.append((cur_id, cur))
            cur = None
    assert cur is None, "the micro-batch ends inside a sample"
    return samples


#: What ``flush`` does to the stream: a beat that ends the open mini-batch.
FLUSH_BEAT = {"keys": None, "keep": 0, "user": 0, "last": 1}


@dataclass
class StreamResult:
    """What the fragmenter emits for a stream of input beats (see :func:`fragment_stream`)."""
    popular: list              # output beats, all mini-batches
    nonpopular: list
    gathers: list              # (key, bank, index), in emission order
    counters: object           # golden.records.BatchCounters, summed
    per_batch: list            # the BatchCounters of each mini-batch
    results: list              # the FragmentResult of each mini-batch


def fragment_stream(cfg, cam, beats, *, first_bank=0, flushed=False):
    """The fragmenter's outputs for ``beats`` (input beats, one or more mini-batches), with
    the CAM ``cam`` (a ``golden.cam.Cam``) unchanged throughout. Mini-batch ``n`` uses
    staging bank ``(first_bank + n) % staging_banks``. ``flushed``: after the beats, ``flush``
    ended the open mini-batch (the beats need not end with ``last``)."""
    from .fragment import fragment
    from .records import BatchCounters
    lanes = cfg.lanes
    beats = [dict(b, keys=b["keys"] or [0] * lanes) for b in beats]
    if flushed and beats and not beats[-1]["last"]:
        beats.append(dict(FLUSH_BEAT, keys=[0] * lanes))
        flush_error = True
    else:
        flush_error = False
    groups, cur = [], []
    for b in beats:
        cur.append(b)
        if b["last"]:
            groups.append(cur)
            cur = []
    assert not cur, "beats after the last `last` (pass flushed=True)"
    out = StreamResult([], [], [], BatchCounters(), [], [])
    for n, g in enumerate(groups):
        parsed = parse_lookup_beats(g, lanes)
        (batch,) = parsed.minibatches
        keys = np.array([k for s in batch for k in s], dtype=np.uint64)
        lengths = np.array([len(s) for s in batch], dtype=np.int64)
        bank = (first_bank + n) % cfg.staging_banks
        r = fragment(cfg, cam, keys, lengths, bank)
        r.counters.framing_errors = parsed.ended_mid_sample
        if flush_error and n == len(groups) - 1:
            # the flush closed the mini-batch: one framing error, whether or not a sample
            # was open (parse counted an open one already)
            r.counters.framing_errors = 1
        pop, npop = output_beats(cfg, g, r)
        out.popular += pop
        out.nonpopular += npop
        out.gathers += [(int(k), bank, int(i)) for k, i in zip(r.gather_keys, r.gather_indices)]
        out.counters += r.counters
        out.per_batch.append(r.counters)
        out.results.append(r)
    return out
