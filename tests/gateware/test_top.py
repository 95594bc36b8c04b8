"""A first end-to-end run of the whole accelerator (``HotlineAccelerator``, ``tiny``
preset) in amaranth.sim, driven through its AXI4-Lite registers by ``hotline_hw.driver``:
LEARN two mini-batches, INSTALL (CAM contents and the popular region), TRAIN two mini-batches
(every output beat), a modelled GPU update of every row used, SCATTER both banks, EVICT; the
whole memory behind ``m_axi`` must equal the golden model's prediction byte for byte."""
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
from hotline_hw.gateware.top import HotlineAccelerator, stream_geometry

sys.path.insert(0, str(Path(__file__).parent))
from test_dma import AxiMemModel  # noqa: E402


def copy_memory(mem):
    out = SparseMemory()
    for n, p in mem.pages.items():
        out.pages[n] = p.copy()
    return out


def test_end_to_end_tiny():
    cfg = preset("tiny", lanes=2, staging_rows=16, dedup_sets=16, dedup_ways=2,
                 learn_threshold=1)
    geo = stream_geometry(cfg)
    tr = synth.generate("tiny", batches=4, batch_size=8, seed=5, table_bits=cfg.table_bits)
    keys = tr.keys(cfg)
    loff, soff = tr.batch_lookup_offsets, tr.batch_sample_offsets
    params = layout(cfg, tr.cardinalities, base=0x10000)
    hw_mem = SparseMemory()
    fill_tables(hw_mem, cfg, params, tr.cardinalities, seed=1)
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

    dut = HotlineAccelerator(cfg)
    rng = random.Random(1)
    axi_mem = AxiMemModel(dut.m_axi, hw_mem, cfg.bus_bytes, rng=rng, latency=3, ready=0.8)
    got = {"popular": [], "nonpopular": []}
    kB, sB, lB = geo["key_bytes"], geo["sid_bytes"], geo["lookup_bytes"]
    vb = lB * 8 - 2

    def decode(tdata, tkeep, tuser, tlast):
        lk, keep = [], 0
        for i in range(cfg.lanes):
            v = (tdata >> (8 * (sB + lB * i))) & ((1 << (8 * lB)) - 1)
            if (tkeep >> (sB + lB * i)) & 1:
                keep |= 1 << i
            lk.append((v & 3, (v >> 2) & ((1 << vb) - 1)))
        return {"sample_id": tdata & ((1 << cfg.sample_id_bits) - 1), "lookups": lk,
                "keep": keep, "user": tuser, "last": tlast}

    def sink(name):
        port = getattr(dut, f"m_axis_{name}")

        async def process(ctx):
            while True:
                ctx.set(port.tready, rng.random() > 0.2)
                _, _, v, r, d, k, u, last = await ctx.tick().sample(
                    port.tvalid, port.tready, port.tdata, port.tkeep, port.tuser, port.tlast)
                if v and r:
                    got[name].append(decode(d, k, u, last))
        return process

    async def send_beats(ctx, beats):
        s = dut.s_axis_lookup
        for bt in beats:
            data = sum(int(x) << (8 * kB * i) for i, x in enumerate(bt["keys"]))
            keep = sum(((1 << kB) - 1) << (kB * i) for i in range(cfg.lanes)
                       if (bt["keep"] >> i) & 1)
            ctx.set(s.tdata, data)
            ctx.set(s.tkeep, keep)
            ctx.set(s.tuser, bt["user"])
            ctx.set(s.tlast, bt["last"])
            ctx.set(s.tvalid, 1)
            await ctx.tick().until(s.tready)
        ctx.set(s.tvalid, 0)

    async def main(ctx):
        async def rd(addr):
            return (await axil_read(ctx, dut.s_axil, addr))[0]

        async def wr(addr, value):
            await axil_write(ctx, dut.s_axil, addr, value)

        drv = AsyncHotlineDriver(rd, wr, cfg)
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

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(axi_mem.run, background=True)
    sim.add_testbench(sink("popular"), background=True)
    sim.add_testbench(sink("nonpopular"), background=True)
    sim.add_testbench(main)
    sim.run()

    want_p = [x for _, (p, _) in expected_out for x in p]
    want_n = [x for _, (_, n) in expected_out for x in n]
    assert got["popular"] == want_p
    assert got["nonpopular"] == want_n
    assert not axi_mem.violations, axi_mem.violations
    assert hw_mem == gold_mem, hw_mem.diff(gold_mem)
