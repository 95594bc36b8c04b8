"""``GatherSplitter`` (hotline_hw/gateware/gather_split.py) in amaranth.sim against the
obvious reference: the kept lanes of every beat, in beat order then lane order, each exactly
once. Random beats (empty, full and sparse ``keep``), random input gaps and output
backpressure; at full speed one request per cycle; a reset in the middle of a beat drops it
and the next beat is sent whole; ``o.valid`` never depends on ``o.ready``."""
import random

import pytest
from amaranth.hdl import Module, ResetInserter, Signal
from amaranth.sim import Simulator

from hotline_hw.config import preset
from hotline_hw.gateware.gather_split import GatherSplitter


def _beats(cfg, n, rng):
    L = cfg.lanes
    out = []
    for _ in range(n):
        r = rng.random()
        keep = 0 if r < 0.1 else (1 << L) - 1 if r < 0.4 else rng.randrange(1 << L)
        out.append({"bank": rng.randrange(cfg.staging_banks),
                    "keys": [rng.randrange(1 << cfg.key_bits) for _ in range(L)],
                    "indices": [rng.randrange(1 << cfg.staging_index_bits) for _ in range(L)],
                    "keep": keep})
    return out


def _requests(beats, lanes):
    return [(b["keys"][j], b["bank"], b["indices"][j])
            for b in beats for j in range(lanes) if b["keep"] >> j & 1]


def run(lanes, *, seed=0, beats=120, p_valid=0.7, p_ready=0.6, reset_after=None):
    """Drive ``beats`` random beats; returns ``(expected, got, cycles)``. ``reset_after``:
    after that many requests have left, hold the next beat, reset once when it is partly sent
    (or at once if it cannot be), and drop it (the fragmenter's FIFO is reset with it)."""
    cfg = preset("tiny", lanes=lanes)
    rng = random.Random(seed)
    dut = GatherSplitter(cfg)
    rst = Signal()
    m = Module()
    m.submodules.dut = ResetInserter(rst)(dut)
    todo = _beats(cfg, beats, rng)
    expected, got = [], []
    cycles = 0

    async def bench(ctx):
        nonlocal cycles, todo

        def take_output(ready):
            """Record the request the DMA takes on this clock edge, if any."""
            if ctx.get(dut.o.valid) and ready:
                got.append((ctx.get(dut.o.p.key), ctx.get(dut.o.p.bank),
                            ctx.get(dut.o.p.index)))

        bi, presenting, reset_done = 0, False, reset_after is None
        sent_of_beat = 0
        while (bi < len(todo) or ctx.get(dut.o.valid)) and cycles < 20 * beats * lanes + 100:
            if not presenting and bi < len(todo):
                presenting = rng.random() < p_valid
                sent_of_beat = 0
            b = todo[bi] if bi < len(todo) else None
            ctx.set(dut.i.valid, presenting)
            if b is not None:
                ctx.set(dut.i.p.bank, b["bank"])
                ctx.set(dut.i.p.keep, b["keep"])
                for j in range(lanes):
                    ctx.set(dut.i.p.keys[j], b["keys"][j])
                    ctx.set(dut.i.p.indices[j], b["indices"][j])
            # o.valid comes from a register: the same with ready low or high
            ctx.set(dut.o.ready, 0)
            v0 = ctx.get(dut.o.valid)
            ctx.set(dut.o.ready, 1)
            assert ctx.get(dut.o.valid) == v0, f"cycle {cycles}: o.valid depends on o.ready"
            ready = rng.random() < p_ready
            ctx.set(dut.o.ready, ready)
            if not reset_done and len(got) >= reset_after and presenting:
                full = bin(b["keep"]).count("1")
                if sent_of_beat >= 1 and sent_of_beat < full or full < 2:
                    # reset mid-beat: what left before stays, the beat and the held request go
                    ctx.set(dut.i.valid, 0)
                    take_output(ready)              # the DMA takes it on this edge
                    ctx.set(rst, 1)
                    await ctx.tick()
                    ctx.set(rst, 0)
                    cycles += 1
                    expected[:] = got       # requests held in the register are dropped
                    bi, presenting, reset_done = bi + 1, False, True
                    continue
            take_output(ready)
            if presenting and ctx.get(dut.i.ready):
                expected.extend(_requests([b], lanes))
                bi, presenting = bi + 1, False
            elif presenting and (ready or not ctx.get(dut.o.valid)) and b["keep"]:
                sent_of_beat += 1
            await ctx.tick()
            cycles += 1
        ctx.set(dut.i.valid, 0)

    sim = Simulator(m)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    return expected, got, cycles


@pytest.mark.parametrize("lanes", [1, 2, 4, 8])
@pytest.mark.parametrize("seed", [0, 1])
def test_every_kept_lane_once_in_order(lanes, seed):
    expected, got, _ = run(lanes, seed=seed)
    assert len(expected) > 50
    assert got == expected


@pytest.mark.parametrize("lanes", [2, 4, 8])
def test_one_request_per_cycle_at_full_speed(lanes):
    beats = 60
    expected, got, cycles = run(lanes, seed=3, beats=beats, p_valid=1.0, p_ready=1.0)
    assert got == expected
    cfg = preset("tiny", lanes=lanes)
    bs = _beats(cfg, beats, random.Random(3))
    empty = sum(1 for b in bs if b["keep"] == 0)
    # one cycle per request, one per empty beat, one of latency (the output register), which
    # an empty last beat hides (it is taken while the last request leaves)
    assert cycles == len(expected) + empty + 1 - (bs[-1]["keep"] == 0)


@pytest.mark.parametrize("lanes", [2, 4, 8])
@pytest.mark.parametrize("seed", [0, 5])
def test_reset_in_the_middle_of_a_beat(lanes, seed):
    expected, got, _ = run(lanes, seed=seed, reset_after=20, p_ready=0.5)
    assert got == expected
