"""A first end-to-end run of the whole accelerator (``HotlineAccelerator``, ``tiny``
preset) in amaranth.sim, driven through its AXI4-Lite registers by ``hotline_hw.driver``:
LEARN two mini-batches, INSTALL (CAM contents and the popular region), TRAIN two mini-batches
(every output beat), a modelled GPU update of every row used, SCATTER both banks, EVICT; the
whole memory behind ``m_axi`` must equal the golden model's prediction byte for byte.
Then the resets: ``CLEAR_STATS`` and a soft reset in the middle of a mini-batch."""
import random
import sys
from pathlib import Path

import numpy as np
from amaranth.sim import Simulator

from golden import synth
from golden.framing import frame_lookup_beats, output_beats
from golden.memory import SparseMemory
from golden.model import HotlineModel, fill_tables
from golden.params import layout
from hotline_hw.config import preset
from hotline_hw.driver import AsyncHotlineDriver
from hotline_hw.gateware.registers import axil_read, axil_write
from hotline_hw.gateware.top import MODE, HotlineAccelerator, stream_geometry
from sim.register_copies import watch_register_copies

sys.path.insert(0, str(Path(__file__).parent))
from test_dma import AxiMemModel  # noqa: E402


def copy_memory(mem):
    out = SparseMemory()
    for n, p in mem.pages.items():
        out.pages[n] = p.copy()
    return out


def tiny_trace(cfg, *, batches, seed):
    """A synthetic `tiny` trace of 8-sample mini-batches, its keys and batch offsets, an
    address map and a host memory holding the tables:
    ``(trace, keys, lookup offsets, sample offsets, params, memory)``."""
    tr = synth.generate("tiny", batches=batches, batch_size=8, seed=seed,
                        table_bits=cfg.table_bits)
    params = layout(cfg, tr.cardinalities, base=0x10000)
    hw_mem = SparseMemory()
    fill_tables(hw_mem, cfg, params, tr.cardinalities, seed=1)
    return (tr, tr.keys(cfg), tr.batch_lookup_offsets, tr.batch_sample_offsets, params,
            hw_mem)


class TopHarness:
    """The accelerator in amaranth.sim with a random-latency AXI memory (``hw_mem``), both
    output streams sunk with random backpressure into :attr:`got` (decoded beats), and
    :meth:`send_beats` to drive the lookup stream."""

    def __init__(self, cfg, hw_mem, seed=1):
        self.cfg, self.geo = cfg, stream_geometry(cfg)
        self.dut = HotlineAccelerator(cfg)
        self.rng = random.Random(seed)
        self.axi_mem = AxiMemModel(self.dut.m_axi, hw_mem, cfg.bus_bytes, rng=self.rng,
                                   latency=3, ready=0.8)
        self.got = {"popular": [], "nonpopular": []}

    def decode(self, tdata, tkeep, tuser, tlast):
        cfg, geo = self.cfg, self.geo
        sB, lB = geo["sid_bytes"], geo["lookup_bytes"]
        vb = lB * 8 - 2
        lk, keep = [], 0
        for i in range(cfg.lanes):
            v = (tdata >> (8 * (sB + lB * i))) & ((1 << (8 * lB)) - 1)
            if (tkeep >> (sB + lB * i)) & 1:
                keep |= 1 << i
            lk.append((v & 3, (v >> 2) & ((1 << vb) - 1)))
        return {"sample_id": tdata & ((1 << cfg.sample_id_bits) - 1), "lookups": lk,
                "keep": keep, "user": tuser, "last": tlast}

    def sink(self, name):
        port = getattr(self.dut, f"m_axis_{name}")

        async def process(ctx):
            while True:
                ctx.set(port.tready, self.rng.random() > 0.2)
                _, _, v, r, d, k, u, last = await ctx.tick().sample(
                    port.tvalid, port.tready, port.tdata, port.tkeep, port.tuser, port.tlast)
                if v and r:
                    self.got[name].append(self.decode(d, k, u, last))
        return process

    async def send_beats(self, ctx, beats):
        s, kB = self.dut.s_axis_lookup, self.geo["key_bytes"]
        for bt in beats:
            data = sum(int(x) << (8 * kB * i) for i, x in enumerate(bt["keys"]))
            keep = sum(((1 << kB) - 1) << (kB * i) for i in range(self.cfg.lanes)
                       if (bt["keep"] >> i) & 1)
            ctx.set(s.tdata, data)
            ctx.set(s.tkeep, keep)
            ctx.set(s.tuser, bt["user"])
            ctx.set(s.tlast, bt["last"])
            ctx.set(s.tvalid, 1)
            await ctx.tick().until(s.tready)
        ctx.set(s.tvalid, 0)

    def driver(self, ctx):
        async def rd(addr):
            return (await axil_read(ctx, self.dut.s_axil, addr))[0]

        async def wr(addr, value):
            await axil_write(ctx, self.dut.s_axil, addr, value)

        return AsyncHotlineDriver(rd, wr, self.cfg)

    async def count_cycles(self, ctx):
        """Background testbench: :attr:`cycle` counts the clock edges since the start."""
        self.cycle = 0
        async for _ in ctx.tick():
            self.cycle += 1

    def run(self, main):
        sim = Simulator(self.dut)
        sim.add_clock(1e-8)
        watch_register_copies(sim, self.dut)
        sim.add_testbench(self.axi_mem.run, background=True)
        sim.add_testbench(self.sink("popular"), background=True)
        sim.add_testbench(self.sink("nonpopular"), background=True)
        sim.add_testbench(self.count_cycles, background=True)
        sim.add_testbench(main)
        sim.run()
        assert not self.axi_mem.violations, self.axi_mem.violations


def test_end_to_end_tiny():
    cfg = preset("tiny", lanes=2, staging_rows=16, dedup_sets=16, dedup_ways=2,
                 learn_threshold=1)
    tr, keys, loff, soff, params, hw_mem = tiny_trace(cfg, batches=4, seed=5)
    gold_mem = copy_memory(hw_mem)
    model = HotlineModel(cfg, params, gold_mem)

    # golden: learn 0-1, install, train 2-3 with the modelled GPU, scatter, evict
    model.start_learning()
    for b in (0, 1):
        model.minibatch(keys[loff[b]:loff[b + 1]], tr.sample_lengths[soff[b]:soff[b + 1]],
                        learn=True, train=False)
    inst = model.install()
    cam_after_install = model.cam.contents()
    popular_after_install = {s: gold_mem.read(params.popular_addr(s), params.row_bytes).tobytes()
                             for s in cam_after_install}
    results, uses = [], []
    for b in (2, 3):
        k = keys[loff[b]:loff[b + 1]]
        results.append(model.minibatch(k, tr.sample_lengths[soff[b]:soff[b + 1]], train=True))
    expected_out = []
    for b, res in zip((2, 3), results):
        beats = frame_lookup_beats(tr.samples_of_batch(b, cfg), cfg.lanes)
        expected_out.append((beats, output_beats(cfg, beats, res)))
    uses.append(model.row_uses(results[0], keys[loff[2]:loff[3]]))
    model.gpu_update(results[0], keys[loff[2]:loff[3]])
    model.scatter(0)
    uses.append(model.row_uses(results[1], keys[loff[3]:loff[4]]))
    model.gpu_update(results[1], keys[loff[3]:loff[4]])
    model.scatter(1)
    model.evict()
    assert len(inst.keys) > 0 and any(len(r.gather_keys) for r in results)

    h = TopHarness(cfg, hw_mem)
    send_beats, got = h.send_beats, h.got

    async def main(ctx):
        drv = h.driver(ctx)
        await ctx.tick().repeat(30)
        await drv.check_id()
        await drv.configure(params)
        await drv.learn(clear=True)
        await drv.wait_idle(timeout=60)
        for b in (0, 1):
            await send_beats(ctx, frame_lookup_beats(tr.samples_of_batch(b, cfg), cfg.lanes))
        await drv.stop()
        await drv.wait_idle(timeout=60)
        await drv.install()
        await drv.wait_idle(timeout=120)
        for slot in range(cfg.cam_entries):
            used, key = await drv.cam_read(slot, timeout=60)
            want = (1, cam_after_install[slot]) if slot in cam_after_install else (0, 0)
            assert (used, key) == want, f"CAM slot {slot}: {(used, key)} != golden {want}"
        for s, row in popular_after_install.items():
            assert hw_mem.read(params.popular_addr(s), params.row_bytes).tobytes() == row, s
        await drv.train()
        for beats, _ in expected_out:
            await send_beats(ctx, beats)
        await drv.stop()
        # STOP is done when the mode is back to IDLE (the DMA may still hold gathers that
        # wait for SCATTER(0), so the accelerator as a whole is not idle)
        for _ in range(5000):
            if (await drv.read_field("STATUS", "mode")) == 0:
                break
        for bank, u in ((0, uses[0]), (1, uses[1])):
            for _ in range(2000):                      # gathers of the bank done
                if (await drv.read_field("STATUS", "gathers_done")) >> bank & 1:
                    break
                await ctx.tick().repeat(5)
            for addr, n in u.items():                   # the modelled GPU
                hw_mem.add_words(addr, params.row_bytes, n)
            await drv.scatter(bank)
            await drv.wait_idle(timeout=120)
        await drv.evict()
        await drv.wait_idle(timeout=120)
        st = await drv.check_errors(ignore=("bad_key", "overflow", "framing_error"))
        assert st["mode"] == 0
        stats = await drv.stats()
        want = model.totals
        for n in ("lookups", "hits", "staged_rows", "popular_samples", "nonpopular_samples"):
            assert stats[n] == getattr(want, n), (n, stats[n], getattr(want, n))
        await ctx.tick().repeat(20)

    h.run(main)

    want_p = [x for _, (p, _) in expected_out for x in p]
    want_n = [x for _, (_, n) in expected_out for x in n]
    assert got["popular"] == want_p
    assert got["nonpopular"] == want_n
    assert hw_mem == gold_mem, hw_mem.diff(gold_mem)


def test_clear_stats_and_soft_reset():
    """CLEAR_STATS zeroes every statistic and the fragmenter's sticky status bits (not
    ``cmd_error``); a soft reset in the middle of a mini-batch clears ``cmd_error`` too and
    restarts the datapath, so that the next mini-batch is exactly what a fresh golden model
    makes of it (sample ids and staging banks from 0, every output beat, the statistics)."""
    cfg = preset("tiny", lanes=2, staging_rows=16, dedup_sets=16, dedup_ways=2)
    tr, keys, loff, soff, params, hw_mem = tiny_trace(cfg, batches=3, seed=6)
    fresh = HotlineModel(cfg, params, copy_memory(hw_mem))
    res = fresh.minibatch(keys[loff[2]:loff[3]], tr.sample_lengths[soff[2]:soff[3]], train=True)
    beats = [frame_lookup_beats(tr.samples_of_batch(b, cfg), cfg.lanes) for b in range(3)]
    want_p, want_n = output_beats(cfg, beats[2], res)
    assert len(beats[0]) > 2 and len(beats[1]) > 2 and len(res.gather_keys) > 0
    h = TopHarness(cfg, hw_mem, seed=2)
    mark = {}

    async def main(ctx):
        drv = h.driver(ctx)

        async def status():
            return await drv.read_fields("STATUS")

        async def until_idle():
            for _ in range(5000):
                st = await status()
                if st["mode"] == 0 and not st["busy"]:
                    return st
            raise AssertionError(f"not idle: {st}")

        await ctx.tick().repeat(30)
        await drv.configure(params)
        # mini-batch 0 without its last beat, then STOP: a framing error
        await drv.train()
        await h.send_beats(ctx, beats[0][:-1])
        await drv.clear_stats()                 # not in TRAIN: cmd_error, nothing cleared
        await drv.stop()
        st = await until_idle()
        assert st["framing_error"] and st["cmd_error"], st
        stats = await drv.stats()
        assert stats["framing_errors"] == 1 and stats["lookups"] > 0, stats
        assert stats["minibatches"] >= 1, stats
        await drv.clear_stats()
        await ctx.tick().repeat(4)
        st = await status()
        assert not st["framing_error"] and st["cmd_error"], st
        stats = await drv.stats()
        for n in ("lookups", "hits", "popular_samples", "nonpopular_samples", "staged_rows",
                  "framing_errors", "minibatches", "long_samples"):
            assert stats[n] == 0, (n, stats)
        # STATUS read right after a command's write response: already busy (EVICT of an
        # empty CAM still reads every slot)
        await drv.evict()
        assert (await status())["busy"]
        await until_idle()
        # mini-batch 1 cut in the middle by a soft reset (no STOP), with the memory slow so
        # that gather requests are held in the fragmenter, the splitter and the DMA
        await drv.train()
        h.axi_mem.ready = 0.02
        await h.send_beats(ctx, beats[1][:-1])
        assert (await status())["busy"]          # the mini-batch is open
        await drv.soft_reset()
        h.axi_mem.ready = 0.8
        st = await until_idle()
        assert not st["cmd_error"] and not st["framing_error"], st
        stats = await drv.stats()
        assert stats["lookups"] == stats["rows_gathered"] == 0, stats
        await ctx.tick().repeat(50)
        mark["popular"], mark["nonpopular"] = len(h.got["popular"]), len(h.got["nonpopular"])
        # mini-batch 2 from a clean start
        await drv.train()
        await h.send_beats(ctx, beats[2])
        await drv.stop()
        for _ in range(5000):
            if (await drv.read_field("STATUS", "mode")) == 0:
                break
        st = await status()
        assert not (st["cmd_error"] or st["framing_error"]), st
        for _ in range(2000):                    # bank 0's gathers done
            if (await drv.read_field("STATUS", "gathers_done")) & 1:
                break
            await ctx.tick().repeat(5)
        assert st["overflow"] == (fresh.totals.overflows > 0), st
        stats = await drv.stats()
        for n in ("lookups", "hits", "staged_rows", "popular_samples", "nonpopular_samples",
                  "overflows", "staging_full", "dedup_full", "minibatches"):
            assert stats[n] == getattr(fresh.totals, n), (n, stats[n], getattr(fresh.totals, n))
        assert stats["rows_gathered"] == fresh.totals.staged_rows, stats
        await ctx.tick().repeat(20)

    h.run(main)
    assert h.got["popular"][mark["popular"]:] == want_p
    assert h.got["nonpopular"][mark["nonpopular"]:] == want_n


def test_lookups_wait_for_the_cam_sweep_after_reset():
    """After a reset the CAM sweeps its sets (block RAM keeps its contents through a reset,
    see ``cam.py``): a TRAIN mini-batch begun at once is held at the input (``tready`` low)
    until the sweep is over, through the fragmenter's registered copy of the CAM's busy
    (``top.py``: ``frag_cam_busy``). 512 sets, one swept per cycle: the first beat may be
    taken no earlier than cycle 512, though TRAIN is set within 30 cycles."""
    cfg = preset("tiny", lanes=2, staging_rows=16, dedup_sets=16, dedup_ways=2,
                 cam_kind="hash", cam_entries=1024, cam_ways=2)
    tr, keys, loff, soff, params, hw_mem = tiny_trace(cfg, batches=1, seed=7)
    h = TopHarness(cfg, hw_mem, seed=3)
    seen = {}

    async def main(ctx):
        drv = h.driver(ctx)
        await drv.train()
        assert (await drv.read_field("STATUS", "mode")) == MODE["TRAIN"]
        seen["train_at"] = h.cycle
        await h.send_beats(ctx, frame_lookup_beats(tr.samples_of_batch(0, cfg), cfg.lanes)[:1])
        seen["taken_at"] = h.cycle

    h.run(main)
    assert seen["train_at"] < 100, seen
    assert seen["taken_at"] >= cfg.cam_entries // cfg.cam_ways, seen


def test_learn_clear_restarts_the_counters():
    """LEARN with ``clear`` zeroes STAT_LEARNED_LOOKUPS with the counter array (the clear
    starts from a register in the cycle the mode becomes LEARN, and ``STATUS.busy`` covers
    that cycle); LEARN without ``clear`` keeps them."""
    cfg = preset("tiny", lanes=2, staging_rows=16, dedup_sets=16, dedup_ways=2)
    tr, keys, loff, soff, params, hw_mem = tiny_trace(cfg, batches=1, seed=8)
    beats = frame_lookup_beats(tr.samples_of_batch(0, cfg), cfg.lanes)
    h = TopHarness(cfg, hw_mem, seed=4)

    async def main(ctx):
        drv = h.driver(ctx)
        await ctx.tick().repeat(30)
        await drv.configure(params)

        async def learned():
            return (await drv.stats())["learned_lookups"]

        await drv.learn(clear=True)
        await drv.wait_idle(timeout=60)
        await h.send_beats(ctx, beats)
        await drv.stop()
        await drv.wait_idle(timeout=60)
        n = await learned()
        assert n > 0
        await drv.learn(clear=False)
        await drv.stop()
        await drv.wait_idle(timeout=60)
        assert await learned() == n
        await drv.learn(clear=True)
        assert (await drv.read_field("STATUS", "busy")) == 1
        await drv.wait_idle(timeout=60)
        assert await learned() == 0

    h.run(main)
