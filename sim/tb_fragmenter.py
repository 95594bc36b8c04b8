"""cocotb regression of the mini-batch fragmenter (:class:`FragmenterUnit`: fragmenter +
popularity CAM) against the golden model.

``fragment_trace`` runs a synthetic trace through the unit:

1. the golden :class:`HotlineModel` learns the first mini-batches and installs its popular
   set; the testbench writes that CAM content into the unit's CAM (``cam_write``);
2. the other mini-batches stream in as framed beats (``golden.framing.frame_lookup_beats``:
   random ``keep`` holes, samples ended by an empty beat, a mini-batch that ends mid-sample),
   with random idle cycles on the input and independent random backpressure on the popular
   output, the non-popular output and the gather stream;
3. the scoreboard (``golden.framing.fragment_stream``) checks every output beat of each
   output in order, every gather request in order, every statistics counter (totals and the
   last mini-batch's), and conservation: every input lookup leaves exactly once, in a beat
   of its own sample;
4. figures: input beats per cycle over each mini-batch (first to last accepted beat) and the
   latency from each sample's last input beat to its first output beat, written as JSON to
   ``$HOTLINE_TB_REPORT`` when set (the benchmark reads it).

Environment: ``HOTLINE_TB_WORKLOAD`` (kaggle, dlrmv2, tiny; default by the key format),
``HOTLINE_TB_BATCHES`` (trained mini-batches, default 50), ``HOTLINE_TB_BATCH_SIZE``
(samples per mini-batch, default 16), ``HOTLINE_TB_LEARN`` (learned mini-batches, 8),
``HOTLINE_TB_IDLE``, ``HOTLINE_TB_BACKPRESSURE`` (probabilities, default 0.2 / 0.3),
``HOTLINE_TB_STALL`` (longest output stall in cycles, default 1: each stall lasts 1..N
cycles, so the outputs stop for a while and then take a burst: see ``StreamSink``),
``HOTLINE_TB_HOLES`` (0/1: framing variety, default 1), ``HOTLINE_TB_HOT`` (share of samples
rebuilt from installed rows so that they are popular, default 0.2), ``HOTLINE_TB_REPEATS``
(samples added to the end of each mini-batch, each a few rows of its earlier samples: their
indices are read back from the de-dup banks after the write queues drained, default 0),
``HOTLINE_TB_REPORT``.
"""

import json
import os
import random

import numpy as np

import cocotb
from cocotb.triggers import ClockCycles, ReadOnly, RisingEdge

from golden import synth
from golden.framing import frame_lookup_beats, fragment_stream
from golden.model import HotlineModel
from sim.lint import Waiver
from sim.streams import StreamMonitor, StreamSink, StreamSource, load_config, reset, start_clock

# Verilator -Wall findings in the generated Verilog of this unit, each checked in the .v file.
_FRAG = r"fragmenter\.dut(\..*)?"
LINT_WAIVERS = (
    # Amaranth keeps a named wire for every named Signal and struct view (queue entries and
    # pointers `b<N>_in_*`, `b<N>_res_*`, `b<N>_wq_*`, per-lane intermediates `d_*`, `r_*`,
    # `pos<N>`, the resolver's `t`/`diff`, SyncFIFO internals, a de-dup bank's registered
    # table word `w1_word` and set `w1_lset` behind its write port, B2's matching ways
    # `cur_m`, the retire stage's `take` = the beat FIFO's `r_en`, take's per-bank new-row
    # counts `a_nn<N>` and assign's one-hot counts `rp_pre<N>`, B3's result ordinal
    # `b3_ord` into B4's register and compares); the logic reads the
    # nets that drive them, so the alias wire is read by nothing.
    Waiver("UNUSEDSIGNAL", r"^Signal is not used: '(b\d+_(in|res|wq)_\w+|b\d+_batch_start|"
           r"[dr]_(need|rank|idx|nnew|rn|op|sc)\d+|pos\d+|t|idx|diff|scount_next|w_data|w_en|r_en|r_rdy|"
           r"r_data|r_level|w_level|level|produce|consume|ev_minibatch|cam_lookup_keys|"
           r"cam_lookup_valid|lookup_keys|result_valid|result_slot|result_hit|resp|"
           r"resp_valid|port_free|clear|busy|s\d+_set\d+|w1_word|w1_lset|cur_m|take|b\d+_need_pop|"
           r"b\d+_fwd_(step|cnt)|a_nn\d+|rp_pre\d+|b3_ord)(\$\d+)?'$",
           instance=_FRAG, reason="alias wires of named signals, read through their driving nets"),
    # A de-dup bank's `take_ok` register is the reference the amaranth.sim register copy
    # checks the fragmenter's `tk_ok` against (dedup.py); no logic reads it, and Yosys
    # removes it.
    # Likewise B2's touched bit selected in one step, the reference of `b2_touched`, and
    # the set of the write two cycles back (`w2_lset`), the reference of `b2_s2`/`b2_k2`.
    Waiver("UNUSEDSIGNAL", r"^Signal is not used: '(b\d+_take_ok|b2_touched_ref|w2_lset)'$",
           instance=_FRAG, reason="the reference of a register copy checked in amaranth.sim only"),
    # Operands of +, -, <, > narrower than the operation (queue pointers plus counts,
    # ordinals minus `drained`): every signal of the unit is unsigned, and Verilog
    # zero-extends an unsigned operand exactly as Amaranth does.
    Waiver("WIDTHEXPAND", r"^Operator \w+ expects \d+ bits on the [LR]HS, but [LR]HS's "
           r"(VARREF|SEL) '?[\w$\\.\[\]]*'? ?generates \d+ bits", instance=_FRAG,
           reason="unsigned operands zero-extended by Verilog as by Amaranth"),
    # The CAM's result_valid mirrors lookup_valid on every lane; every lane of an accepted
    # beat is looked up, so lane 0's bit alone marks a beat's results.
    Waiver("UNUSEDSIGNAL", r"^Bits of signal are not used: 'cam_result_valid'", instance=_FRAG,
           reason="lane 0's result_valid marks a beat; the other lanes' bits are equal"),
)


def workload_for(cfg):
    if cfg.num_tables >= 26 and cfg.row_bits >= 26 and cfg.max_sample_lookups >= 214:
        return "dlrmv2"
    return "kaggle" if cfg.num_tables >= 26 and cfg.row_bits >= 24 else "tiny"


def out_beat(b, lanes):
    f = b.fields
    return {"sample_id": f["sample_id"],
            "lookups": [(x["tag"], x["value"]) for x in f["lookups"]],
            "keep": f["keep"], "user": f["user"], "last": f["last"]}


def gather_reqs(b, lanes):
    f = b.fields
    return [(f["keys"][i], f["bank"], f["indices"][i]) for i in range(lanes)
            if (f["keep"] >> i) & 1]


def env(name, default):
    return type(default)(os.environ.get(name, default))


@cocotb.test()
async def fragment_trace(dut):
    cfg = load_config()
    rng = random.Random(random.getrandbits(32))     # cocotb seeds `random` (replayable)
    workload = os.environ.get("HOTLINE_TB_WORKLOAD") or workload_for(cfg)
    n_train = env("HOTLINE_TB_BATCHES", 50)
    n_learn = env("HOTLINE_TB_LEARN", 8)
    batch = env("HOTLINE_TB_BATCH_SIZE", 16)
    idle = env("HOTLINE_TB_IDLE", 0.2)
    bp = env("HOTLINE_TB_BACKPRESSURE", 0.3)
    stall = env("HOTLINE_TB_STALL", 1)
    variety = env("HOTLINE_TB_HOLES", 1)
    hot = env("HOTLINE_TB_HOT", 0.2)
    repeats = env("HOTLINE_TB_REPEATS", 0)
    trace = synth.generate(workload, batches=n_learn + n_train, batch_size=batch, zipf=1.1,
                           seed=rng.randrange(1 << 30), bad_key_rate=0.005 if variety else 0.0,
                           table_bits=cfg.table_bits)
    keys = trace.keys(cfg)
    loff, soff = trace.batch_lookup_offsets, trace.batch_sample_offsets

    # --- golden: learn, install ----------------------------------------------------------
    model = HotlineModel(cfg)
    model.start_learning()
    for b in range(n_learn):
        model.minibatch(keys[loff[b]:loff[b + 1]], None, learn=True, train=False)
    model.install()
    contents = model.cam.contents()
    nprng = np.random.default_rng(rng.randrange(1 << 30))
    # popular samples are rare in real traces (every lookup must hit): make a share of the
    # samples out of installed rows, table by table, so the popular path is exercised too
    by_table = {}
    for key in contents.values():
        by_table.setdefault(key >> cfg.row_bits, []).append(key)
    beats = []
    for b in range(n_learn, n_learn + n_train):
        samples = trace.samples_of_batch(b, cfg)
        for s in samples:
            if rng.random() < hot:
                s[:] = [rng.choice(by_table[k >> cfg.row_bits]) if (k >> cfg.row_bits) in by_table
                        else k for k in s]
        pool = [k for s in samples for k in s]
        for _ in range(repeats if pool else 0):
            samples.append(rng.sample(pool, min(len(pool), rng.randrange(1, 2 * cfg.lanes + 1))))
        mb = frame_lookup_beats(samples, cfg.lanes, rng=nprng,
                                hole_prob=0.1 if variety else 0.0,
                                empty_end_prob=0.1 if variety else 0.0)
        if variety and rng.random() < 0.1 and mb[-1]["keep"]:
            mb[-1]["user"] = 0                  # `last` closes the open sample
        beats.append(mb)
    flat = [x for mb in beats for x in mb]
    exp = fragment_stream(cfg, model.cam, flat)

    # --- drive ------------------------------------------------------------------------------
    start_clock(dut)
    for name in ("lookups_valid", "popular_ready", "nonpopular_ready", "gather_ready",
                 "cam_write_valid", "flush"):
        getattr(dut, name).value = 0
    await reset(dut)
    for _ in range(100_000):
        await RisingEdge(dut.clk)
        await ReadOnly()
        if not int(dut.cam_busy.value):
            break
    await RisingEdge(dut.clk)
    cw = StreamSource(dut, "cam_write", dut.clk, idle_prob=0.1)
    for slot, key in contents.items():
        cw.send_nowait({"slot": slot, "key": key, "used": 1})
    await cw.wait_idle()
    await ClockCycles(dut.clk, 10)
    dut._log.info("%s: CAM holds %d rows; %d mini-batches, %d beats, %d lookups",
                  workload, len(contents), n_train, len(flat), exp.counters.lookups)

    src = StreamSource(dut, "lookups", dut.clk, idle_prob=idle)
    mon = StreamMonitor(dut, "lookups", dut.clk)
    sinks = {n: StreamSink(dut, n, dut.clk, backpressure_prob=bp, stall_cycles=stall)
             for n in ("popular", "nonpopular", "gather")}
    for x in flat:
        src.send_nowait(x)
    want = {"popular": len(exp.popular), "nonpopular": len(exp.nonpopular)}
    got = {"popular": [], "nonpopular": [], "gather": []}
    gcycles = []
    limit = 200 * len(flat) + 100_000
    for _ in range(limit):
        await RisingEdge(dut.clk)
        for n in ("popular", "nonpopular"):
            while not sinks[n].empty():
                got[n].append(sinks[n].recv_nowait())
        while not sinks["gather"].empty():
            got["gather"] += gather_reqs(sinks["gather"].recv_nowait(), cfg.lanes)
        if (len(got["popular"]) >= want["popular"] and len(got["nonpopular"]) >= want["nonpopular"]
                and len(got["gather"]) >= len(exp.gathers)):
            break
    else:
        raise AssertionError(f"timed out: {({n: len(v) for n, v in got.items()})} of "
                             f"{want}, {len(exp.gathers)} gathers")
    await ClockCycles(dut.clk, 50)              # nothing more may come out
    for n in ("popular", "nonpopular"):
        assert sinks[n].empty(), f"{n}: extra beats after the last mini-batch"
    assert sinks["gather"].empty(), "gather: extra requests"

    # --- scoreboard -------------------------------------------------------------------------
    for n in ("popular", "nonpopular"):
        mine = [out_beat(b, cfg.lanes) for b in got[n]]
        ref = getattr(exp, n)
        for i, (g, w) in enumerate(zip(mine, ref)):
            assert g == w, f"{n} beat {i} (of {len(ref)}): got {g}, golden {w}"
        assert len(mine) == len(ref)
    for i, (g, w) in enumerate(zip(got["gather"], exp.gathers)):
        assert g == w, f"gather request {i}: got {g}, golden {w}"
    assert len(got["gather"]) == len(exp.gathers)
    # conservation: every input lookup leaves exactly once
    n_in = sum(bin(x["keep"]).count("1") for x in flat)
    n_out = sum(bin(b.fields["keep"]).count("1") for n in ("popular", "nonpopular")
                for b in got[n])
    assert n_in == n_out == exp.counters.lookups, (n_in, n_out, exp.counters.lookups)
    want_c = exp.counters.as_dict()
    last_c = exp.per_batch[-1].as_dict()
    for name in ("lookups", "hits", "popular_samples", "nonpopular_samples", "staged_rows",
                 "overflows", "bad_keys", "long_samples", "staging_full", "dedup_full",
                 "id_wraps", "framing_errors", "minibatches"):
        assert int(getattr(dut, "stat_" + name).value) == want_c[name], \
            f"stat_{name}: got {int(getattr(dut, 'stat_' + name).value)}, golden {want_c[name]}"
        assert int(getattr(dut, "last_" + name).value) == last_c[name], f"last_{name}"
    dut._log.info("checked %d + %d output beats, %d gathers; %s", len(got["popular"]),
                  len(got["nonpopular"]), len(got["gather"]),
                  {k: v for k, v in want_c.items() if v})

    # --- figures ----------------------------------------------------------------------------
    acc = []
    while not mon.empty():
        acc.append(mon.recv_nowait().cycle)
    assert len(acc) == len(flat)
    rates, pos = [], 0
    for mb in beats:
        first, last = acc[pos], acc[pos + len(mb) - 1]
        rates.append(len(mb) / (last - first + 1))
        pos += len(mb)
    # latency: last input beat of each sample -> first output beat of the sample
    ends, sample_keys, pos = [], [], 0
    for bi, mb in enumerate(beats):
        opened, sid = False, 0
        for x in mb:
            if x["user"] or (x["last"] and (opened or x["keep"])):
                ends.append(acc[pos])
                sample_keys.append((bi, sid & ((1 << cfg.sample_id_bits) - 1)))
                sid, opened = sid + 1, False
            else:
                opened = opened or bool(x["keep"])
            pos += 1
    first_out = {}
    for n in ("popular", "nonpopular"):
        bidx = 0
        for b in got[n]:
            f = b.fields
            if f["last"]:
                bidx += 1
                continue
            first_out.setdefault((bidx, f["sample_id"]), b.cycle)
    lat = [first_out[k] - ends[i] for i, k in enumerate(sample_keys) if k in first_out]
    pop_keys = set()
    bidx = 0
    for b in got["popular"]:
        if b.fields["last"]:
            bidx += 1
        else:
            pop_keys.add((bidx, b.fields["sample_id"]))
    lat_pop = [first_out[k] - ends[i] for i, k in enumerate(sample_keys) if k in pop_keys]
    report = {"workload": workload, "lanes": cfg.lanes, "beats": len(flat),
              "lookups": exp.counters.lookups, "batches": n_train,
              "beats_per_cycle_min": min(rates), "beats_per_cycle_mean": float(np.mean(rates)),
              "latency_min": min(lat) if lat else None, "latency_max": max(lat) if lat else None,
              "popular_latency_min": min(lat_pop) if lat_pop else None,
              "popular_latency_max": max(lat_pop) if lat_pop else None,
              "counters": want_c}
    dut._log.info("input beats/cycle per mini-batch: min %.3f mean %.3f; latency %s..%s "
                  "(popular samples %s..%s)", report["beats_per_cycle_min"],
                  report["beats_per_cycle_mean"], report["latency_min"], report["latency_max"],
                  report["popular_latency_min"], report["popular_latency_max"])
    path = os.environ.get("HOTLINE_TB_REPORT")
    if path:
        with open(path, "w") as f:
            json.dump(report, f, indent=1)
