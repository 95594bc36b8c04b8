"""cocotb end-to-end regression of the whole accelerator (:class:`HotlineAccelerator`)
against the golden model, on the generated Verilog.

``hotline_flow`` runs the Hotline flow through the real interfaces: ``hotline_hw.driver``
over cocotbext-axi's ``AxiLiteMaster`` on ``s_axil``; memory is cocotbext-axi's RAM on
``m_axi`` (``sim.tb_dma.LatencyAxiRam``: added latency, reads reordered across IDs, random
pauses on all five channels, burst-rule checks); lookups are driven on ``s_axis_lookup`` with
random idle cycles and both outputs taken with random backpressure.

1. LEARN on the first mini-batches (``HOTLINE_TB_LEARN``, default 3), STOP;
2. INSTALL: every CAM slot read back through the registers and the popular region checked;
3. TRAIN ``HOTLINE_TB_BATCHES`` mini-batches (default 20; framed with random ``keep``
   holes and empty sample-ending beats); every beat of both outputs against the golden
   model; after each mini-batch: wait for ``STATUS.gathers_done`` of its bank, the modelled
   GPU adds each row's use count to its words (as ``HotlineModel.gpu_update``),
   SCATTER(bank);
4. EVICT; the **whole memory** (tables, popular region, staging banks) must equal the golden
   model's byte for byte, and the statistics registers its totals.

The trace is Criteo Kaggle-like (26 tables, Kaggle's skew) with tables capped at
``HOTLINE_TB_ROWS`` rows (default 4096) so that host memory stays small; the ``tiny``
configuration uses the ``tiny`` workload.

Knobs (environment variables; the regression's defaults in brackets): ``HOTLINE_TB_LEARN``
[3] and ``HOTLINE_TB_BATCHES`` [20] mini-batches of ``HOTLINE_TB_BATCH_SIZE`` [16] samples;
``HOTLINE_TB_IDLE`` [0.2] idle probability per input beat, ``HOTLINE_TB_STALL`` [0.3]
backpressure per output and cycle, ``HOTLINE_TB_PAUSE`` [0.2] pause probability of every
AXI4 channel of the memory and of the AXI4-Lite master, ``HOTLINE_TB_HOLES`` [0.1]
probability of a ``keep`` hole / an empty sample-ending beat, ``HOTLINE_TB_LATENCY`` [20]
memory latency in cycles, ``HOTLINE_TB_CAM_SLOTS`` [-1 = all] CAM slots read back after
INSTALL (when not all: this many at random, half of them used slots; the popular region in
memory is checked for every slot either way).

``HOTLINE_TB_HOT`` [0.2]: the share of training samples rebuilt from installed rows after
INSTALL (each lookup takes an installed key of its table), so that popular samples occur
(a 26-lookup Criteo sample is popular only if all 26 lookups hit, which random samples
rarely do).

With ``addr_bits < 64`` (host addresses modulo ``2**addr_bits``) the address map is placed so
that it wraps: it starts below ``2**addr_bits`` and the first host table crosses it, so row
addresses overflow the accelerator's adders, and the regions after it start at ``address mod
2**addr_bits`` (the driver refuses a base that does not fit in ``addr_bits``). The memory holds
everything at ``address mod 2**addr_bits`` (as the golden model's does), and a bus monitor
flags any AR or AW address with a bit set at or above ``addr_bits``.

``HOTLINE_TB_REPORT``: a path; the test writes there a JSON report of what it measured (per
trained mini-batch: input beats, cycles from its first input beat to its last, to the last
of its two terminator beats, and to ``gathers_done`` as polled; rows gathered, scattered,
evicted; the statistics registers; the simulated cycles of each phase). ``hotline-hw demo``
and ``bench/e2e_bench.py`` print it.
"""

import dataclasses
import json
import logging
import os
import random

import cocotb
from cocotb.triggers import ClockCycles, FallingEdge, ReadOnly, RisingEdge
from cocotbext.axi import AxiLiteBus, AxiLiteMaster

from golden import synth
from golden.framing import frame_lookup_beats, output_beats
from golden.memory import SparseMemory
from golden.model import HotlineModel, fill_tables
from golden.params import layout
from hotline_hw.driver import AsyncHotlineDriver
from sim.lint import Waiver
from sim.streams import load_config, reset, start_clock

LINT_WAIVERS = (
    # HotlineAccelerator: named registers that drive register-block inputs directly
    # (`sticky_*`, the CAM access results, `frag_cam_busy` into the fragmenter, `learn_go`
    # into the counter array), the fragmenter's CAM lanes forwarded to the CAM, and unit
    # outputs the top has no use for: alias wires read through their driving nets.
    Waiver("UNUSEDSIGNAL", r"^Signal is not used: '(sticky_\w+|cam_(used|rej|key|done)|"
           r"frag_cam_busy|learn_go|cam_lookup_valid|cam_lookup_keys)'$", instance=r"hotline\.dut", reason=
           "alias wires of named signals, read through their driving nets"),
    Waiver("UNUSEDSIGNAL", r"^Signal is not used: '(idle|busy|done|busy\$\d+|popular_base|"
           r"w_level)'$", instance=r"hotline\.dut\.\w+(\.\w+)?", reason=
           "alias wires of unit ports that the top reads through their driving nets"),
    # Each key of s_axis_lookup is padded to whole bytes; the padding bits carry nothing.
    Waiver("UNUSEDSIGNAL", r"^Bits of signal are not used: 's_axis_lookup__tdata'",
           instance=r"hotline\.dut", reason="the byte padding of each key in tdata"),
)


def env(name, default):
    return type(default)(os.environ.get(name, default))


def workload_for(cfg, rows):
    if cfg.num_tables >= 26 and cfg.row_bits >= 24:
        k = synth.WORKLOADS["kaggle"]
        return synth.Workload("kaggle-small", tuple(min(c, rows) for c in k.cardinalities),
                              k.lookups_per_table, 32, "Kaggle skew, tables capped",
                              uniform_below=min(k.uniform_below, rows // 4))
    return synth.WORKLOADS["tiny"]


class Geometry:
    def __init__(self, cfg):
        from hotline_hw.gateware.fragmenter import value_bits
        self.kB = cfg.key_bytes
        self.sB = (cfg.sample_id_bits + 7) // 8
        self.lB = (2 + value_bits(cfg) + 7) // 8
        self.vb = value_bits(cfg)


def decode(cfg, g, tdata, tkeep, tuser, tlast):
    lk, keep = [], 0
    for i in range(cfg.lanes):
        v = (tdata >> (8 * (g.sB + g.lB * i))) & ((1 << (8 * g.lB)) - 1)
        if (tkeep >> (g.sB + g.lB * i)) & 1:
            keep |= 1 << i
        lk.append((v & 3, (v >> 2) & ((1 << g.vb) - 1)))
    return {"sample_id": tdata & ((1 << cfg.sample_id_bits) - 1), "lookups": lk,
            "keep": keep, "user": tuser, "last": tlast}


@cocotb.test()
async def hotline_flow(dut):
    from sim.tb_dma import LatencyAxiRam
    cfg = load_config()
    rng = random.Random(random.getrandbits(32))
    n_learn, n_train = env("HOTLINE_TB_LEARN", 3), env("HOTLINE_TB_BATCHES", 20)
    idle, stall = env("HOTLINE_TB_IDLE", 0.2), env("HOTLINE_TB_STALL", 0.3)
    pause, holes = env("HOTLINE_TB_PAUSE", 0.2), env("HOTLINE_TB_HOLES", 0.1)
    cam_slots = env("HOTLINE_TB_CAM_SLOTS", -1)
    hot = env("HOTLINE_TB_HOT", 0.2)
    wl = workload_for(cfg, env("HOTLINE_TB_ROWS", 4096))
    tr = synth.generate(wl, batches=n_learn + n_train, batch_size=env("HOTLINE_TB_BATCH_SIZE", 16),
                        seed=rng.randrange(1 << 30), table_bits=cfg.table_bits)
    keys = tr.keys(cfg)
    loff, soff = tr.batch_lookup_offsets, tr.batch_sample_offsets
    mask = cfg.addr_mask
    params = layout(cfg, tr.cardinalities, base=_base(cfg, tr.cardinalities))
    params = dataclasses.replace(
        params, table_base=tuple(a & mask for a in params.table_base),
        popular_base=params.popular_base & mask,
        staging_base=tuple(a & mask for a in params.staging_base))
    gold = SparseMemory()
    fill_tables(gold, cfg, params, tr.cardinalities, seed=rng.randrange(1 << 30))
    g = Geometry(cfg)
    import numpy as np
    nprng = np.random.default_rng(rng.randrange(1 << 30))

    # --- the DUT's world -----------------------------------------------------------------
    start_clock(dut)
    for name in ("s_axis_lookup_tvalid", "m_axis_popular_tready", "m_axis_nonpopular_tready"):
        getattr(dut, name).value = 0
    ram = LatencyAxiRam(dut, latency=env("HOTLINE_TB_LATENCY", 20), reorder=True, rng=rng)
    ram.set_pauses(pause)
    high_addr = []                               # AR/AW addresses with bits >= addr_bits
    if cfg.addr_bits < 64:
        cocotb.start_soon(_watch_high_addr(dut, cfg.addr_bits, high_addr))
    for addr, page in gold.snapshot().items():   # the host tables
        ram.ram.write(addr, page)
    axil = AxiLiteMaster(AxiLiteBus.from_prefix(dut, "s_axil"), dut.clk, dut.rst)
    for side in (axil.write_if, axil.read_if):   # a log line per register access is noise
        side.log.setLevel(logging.WARNING)
    for ch in (axil.write_if.aw_channel, axil.write_if.w_channel, axil.read_if.ar_channel):
        ch.set_pause_generator(iter(lambda: rng.random() < pause, None))
    await reset(dut, cycles=8)

    drv = AsyncHotlineDriver(axil.read_dword, axil.write_dword, cfg)
    got = {"popular": [], "nonpopular": []}
    ends = {"popular": [], "nonpopular": []}     # cycle of each terminator beat
    cyc = ram.cycle

    async def sink(name):
        # drive tready just after a falling edge and look at tvalid/tdata in that same
        # timestep: that is the pair the next rising edge hands over
        pre = f"m_axis_{name}"
        while True:
            await FallingEdge(dut.clk)
            ready = int(rng.random() >= stall)
            getattr(dut, pre + "_tready").value = ready
            await ReadOnly()
            if ready and int(getattr(dut, pre + "_tvalid").value):
                got[name].append(decode(cfg, g, int(getattr(dut, pre + "_tdata").value),
                                        int(getattr(dut, pre + "_tkeep").value),
                                        int(getattr(dut, pre + "_tuser").value),
                                        int(getattr(dut, pre + "_tlast").value)))
                if got[name][-1]["last"]:
                    ends[name].append(cyc.n)

    cocotb.start_soon(sink("popular"))
    cocotb.start_soon(sink("nonpopular"))

    async def send(beats):
        """Drive ``beats``; return the cycles of the first and the last handshake."""
        first = None
        for bt in beats:
            while rng.random() < idle:
                await FallingEdge(dut.clk)
                dut.s_axis_lookup_tvalid.value = 0
                await RisingEdge(dut.clk)
            await FallingEdge(dut.clk)
            dut.s_axis_lookup_tdata.value = sum(int(x) << (8 * g.kB * i)
                                                for i, x in enumerate(bt["keys"]))
            dut.s_axis_lookup_tkeep.value = sum(((1 << g.kB) - 1) << (g.kB * i)
                                                for i in range(cfg.lanes) if (bt["keep"] >> i) & 1)
            dut.s_axis_lookup_tuser.value = bt["user"]
            dut.s_axis_lookup_tlast.value = bt["last"]
            dut.s_axis_lookup_tvalid.value = 1
            while True:                          # tready does not depend on tvalid
                await ReadOnly()
                taken = int(dut.s_axis_lookup_tready.value)
                if taken:
                    last = cyc.n
                    first = last if first is None else first
                await RisingEdge(dut.clk)
                if taken:
                    break
                await FallingEdge(dut.clk)
        await FallingEdge(dut.clk)
        dut.s_axis_lookup_tvalid.value = 0
        return first, last

    async def until(cond, what, limit=2_000_000):
        for _ in range(limit // 20):
            if await cond():
                return
            await ClockCycles(dut.clk, 20)
        raise AssertionError(f"timed out waiting for {what}")

    async def mode_idle():
        return (await drv.read_field("STATUS", "mode")) == 0

    async def ctl_idle():
        return not (await drv.read_field("STATUS", "busy"))

    # --- golden model: the same commands -------------------------------------------------
    model = HotlineModel(cfg, params, gold)

    phases = {}
    # LEARN
    t_phase = cyc.n
    assert await drv.check_id()
    await drv.configure(params)
    await drv.learn(clear=True)
    await until(ctl_idle, "the counter array's clear")
    model.start_learning()
    for b in range(n_learn):
        await send(frame_lookup_beats(tr.samples_of_batch(b, cfg), cfg.lanes))
        model.minibatch(keys[loff[b]:loff[b + 1]], None, learn=True, train=False)
    await drv.stop()
    await until(mode_idle, "STOP")
    phases["learn"], t_phase = cyc.n - t_phase, cyc.n

    # INSTALL
    await drv.install()
    await until(ctl_idle, "INSTALL")
    phases["install"] = cyc.n - t_phase
    inst = model.install()
    contents = model.cam.contents()
    slots = range(cfg.cam_entries)
    if 0 <= cam_slots < cfg.cam_entries:       # half used slots, half free ones, at random
        used = sorted(contents)
        free = [s for s in slots if s not in contents]
        n_used = min(len(used), cam_slots - min(len(free), cam_slots // 2))
        slots = sorted(rng.sample(used, n_used) + rng.sample(free, min(len(free),
                                                                       cam_slots - n_used)))
    for slot in slots:
        used, key = await drv.cam_read(slot, timeout=600)
        want = (1, contents[slot]) if slot in contents else (0, 0)
        assert (used, key) == want, f"CAM slot {slot}: {(used, key)}, golden {want}"
    for slot in contents:
        a = params.popular_addr(slot) & mask
        assert ram.ram.read(a, params.row_bytes) == gold.read(a, params.row_bytes).tobytes(), \
            f"popular row of slot {slot} at {a:#x}"
    dut._log.info("installed %d rows (%d skipped); CAM and popular region match", len(inst.keys),
                  inst.skipped)

    # TRAIN: each mini-batch, then its GPU step and SCATTER (the order that is always legal:
    # an OVERFLOW row's CPU-path update must land before a later mini-batch gathers the row)
    want = {"popular": [], "nonpopular": []}
    per_batch = []
    t_phase = cyc.n
    await drv.train()
    rebuilt = _rebuild_hot_samples(cfg, keys, tr.sample_lengths, soff, loff, n_learn,
                                   n_learn + n_train, contents.values(), hot, nprng)
    for i, bb in enumerate(range(n_learn, n_learn + n_train)):
        k = keys[loff[bb]:loff[bb + 1]]
        lens = tr.sample_lengths[soff[bb]:soff[bb + 1]]
        samples = [k[a:b].tolist() for a, b in zip(np.cumsum(lens) - lens, np.cumsum(lens))]
        beats = frame_lookup_beats(samples, cfg.lanes, rng=nprng,
                                   hole_prob=holes, empty_end_prob=holes)
        res = model.minibatch(k, tr.sample_lengths[soff[bb]:soff[bb + 1]], train=True)
        p, n = output_beats(cfg, beats, res)
        want["popular"] += p
        want["nonpopular"] += n
        r0 = len(ram.r_beats)
        t0, t_in = await send(beats)
        bank = res.bank
        await until(lambda: _gathers_done(drv, bank), f"gathers of bank {bank}")
        t_gathered, r_gathered = cyc.n, len(ram.r_beats)
        await until(lambda: _ended(ends, i + 1), "the mini-batch's terminator beats", limit=200_000)
        per_batch.append({
            "bank": bank, "samples": int(soff[bb + 1] - soff[bb]), "lookups": len(k),
            "input_beats": len(beats), "popular_samples": int(res.counters.popular_samples),
            "staged_rows": int(res.counters.staged_rows),
            "cycles_input": t_in - t0 + 1,
            "cycles_output": max(ends["popular"][i], ends["nonpopular"][i]) - t0 + 1,
            "cycles_gathered": t_gathered - t0 + 1,
            "read_beats": r_gathered - r0})
        for addr, n in model.row_uses(res, k).items():          # the modelled GPU
            row = bytearray(ram.ram.read(addr, params.row_bytes))
            words = memoryview(row).cast("I")
            for i in range(len(words)):
                words[i] = (words[i] + n) & 0xFFFFFFFF
            ram.ram.write(addr, bytes(row))
        model.gpu_update(res, k)
        await drv.scatter(bank)
        model.scatter(bank)
    await drv.stop()
    await until(mode_idle, "STOP")
    await until(ctl_idle, "the last scatters")
    phases["train"], t_phase = cyc.n - t_phase, cyc.n

    # EVICT, compare everything
    await drv.evict()
    await until(ctl_idle, "EVICT")
    phases["evict"] = cyc.n - t_phase
    model.evict()
    await ClockCycles(dut.clk, 50)
    dut._log.info("terminators: got %s, golden %s", {n: sum(b["last"] for b in got[n]) for n in got},
                  {n: sum(b["last"] for b in want[n]) for n in want})
    for name in ("popular", "nonpopular"):
        mine, ref = got[name], want[name]
        for i, (x, y) in enumerate(zip(mine, ref)):
            assert x == y, (f"{name} beat {i} of {len(ref)}: got {x}, golden {y}; around it, "
                            f"got {mine[max(0, i - 4):i + 3]}, golden {ref[max(0, i - 4):i + 3]}")
        assert len(mine) == len(ref), f"{name}: {len(mine)} beats, golden {len(ref)}"
    bad = []
    for addr, page in gold.snapshot().items():
        if ram.ram.read(addr, len(page)) != page:
            hw = ram.ram.read(addr, len(page))
            off = next(i for i in range(len(page)) if hw[i] != page[i])
            bad.append(f"{addr + off:#x}: {hw[off]:#04x} != golden {page[off]:#04x}")
    for lo, n in [(params.popular_base & mask, cfg.cam_entries * params.row_bytes)] + \
            [(s & mask, cfg.staging_rows * params.row_bytes) for s in params.staging_base]:
        for a in range(lo, lo + n, 4096):       # device regions the golden never wrote
            if a // 4096 not in gold.pages and any(ram.ram.read(a, min(4096, lo + n - a))):
                bad.append(f"page {a:#x} written, golden all zero")
    assert not bad, "memory differs from the golden model: " + "; ".join(bad[:8])
    assert not ram.violations, ram.violations[:5]
    assert not high_addr, f"{len(high_addr)} AR/AW addresses use bits >= addr_bits=" \
                          f"{cfg.addr_bits}: {high_addr[:4]}"
    st = await drv.check_errors(ignore=("bad_key", "overflow", "framing_error"))
    stats = await drv.stats()
    t = model.totals
    for n in ("lookups", "hits", "popular_samples", "nonpopular_samples", "staged_rows",
              "overflows", "staging_full", "dedup_full", "minibatches"):
        want_n = cfg.wrap_stat(32, getattr(t, n))        # stats_bits wide, wraps
        assert stats[n] == want_n, f"STAT_{n.upper()}: {stats[n]}, golden {want_n}"
    assert stats["rows_scattered"] == stats["rows_gathered"] == cfg.wrap_stat(32, t.staged_rows)
    report = os.environ.get("HOTLINE_TB_REPORT")
    if report:
        with open(report, "w") as f:
            json.dump({"config": cfg.name, "learn_batches": n_learn, "train_batches": n_train,
                       "batch_size": int(tr.batch_sizes[0]), "workload": wl.name,
                       "installed_rows": len(inst.keys), "cam_slots_checked": len(slots),
                       "hot_share": hot, "samples_rebuilt": rebuilt,
                       "memory_pages_compared": len(gold.pages),
                       "output_beats": {n: len(got[n]) for n in got},
                       "stats": stats, "phases": phases, "cycles": cyc.n,
                       "minibatches": per_batch,
                       "knobs": {"idle": idle, "stall": stall, "pause": pause, "holes": holes,
                                 "latency": env("HOTLINE_TB_LATENCY", 20)}}, f, indent=1)
    dut._log.info("%d mini-batches trained: %d lookups, %d hits, %d rows gathered and "
                  "scattered, %d popular rows evicted; memory (%d pages) and %d + %d output "
                  "beats match; status %s", n_train, t.lookups, t.hits, t.staged_rows,
                  stats["rows_evicted"], len(gold.pages), len(got["popular"]),
                  len(got["nonpopular"]), st)


def _base(cfg, cardinalities):
    """Start of the address map: 1 MiB; with ``addr_bits < 64``, half the first host table
    below ``2**addr_bits`` (64-byte aligned), so that the table crosses it (the map wraps)."""
    if cfg.addr_bits >= 64:
        return 0x100000
    return ((1 << cfg.addr_bits) - cardinalities[0] * cfg.row_bytes // 2) & ~63 & cfg.addr_mask


async def _watch_high_addr(dut, addr_bits, found):
    """Record every AR/AW handshake whose address has a bit set at or above ``addr_bits``."""
    while True:
        await RisingEdge(dut.clk)
        for ch in ("ar", "aw"):
            if int(getattr(dut, f"m_axi_{ch}valid").value) and \
                    int(getattr(dut, f"m_axi_{ch}ready").value):
                a = int(getattr(dut, f"m_axi_{ch}addr").value)
                if a >> addr_bits:
                    found.append(f"{ch} {a:#x}")


def _rebuild_hot_samples(cfg, keys, lengths, soff, loff, first, end, installed, frac, rng):
    """Rebuild about ``frac`` of the samples of mini-batches ``first..end-1`` (in ``keys``,
    in place) from installed rows: each lookup takes an installed key of its own table, so
    the sample is popular when every table it reads has installed rows. A Criteo sample
    reads 26 tables and is rarely popular by chance; this puts the popular path to work.
    Returns the number of samples rebuilt."""
    by_table = {}
    for key in installed:
        by_table.setdefault(int(key) >> cfg.row_bits, []).append(int(key))
    n = 0
    for bb in range(first, end):
        pos = int(loff[bb])
        for ln in lengths[soff[bb]:soff[bb + 1]]:
            if rng.random() < frac:
                n += 1
                for j in range(pos, pos + int(ln)):
                    cand = by_table.get(int(keys[j]) >> cfg.row_bits)
                    if cand:
                        keys[j] = cand[rng.integers(len(cand))]
            pos += int(ln)
    return n


async def _ended(ends, n):
    return len(ends["popular"]) >= n and len(ends["nonpopular"]) >= n


async def _gathers_done(drv, bank):
    return (await drv.read_field("STATUS", "gathers_done")) >> bank & 1
