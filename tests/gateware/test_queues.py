"""The register queues of hotline_hw/gateware/queues.py against a Python reference queue.

Every cycle pushes 0..npush entries (writers in a random order, so writer ``k`` is not
entry ``k``), pops 0..npop, and (``MultiQueue`` with ``update``) overwrites a random held
entry (all of it, or the bits given by ``update=(lo, hi)``); ``level``, ``space``, every
meaningful ``peek`` and the random-access read (``at`` / ``at_slot``) are compared with the
reference before the clock edge. ``RingQueue`` also restarts at random while empty.
With ``enables``, ``push_en`` / ``pop_en`` are low at random while ``push_n`` / ``pop_n`` carry
arbitrary counts, which must then be ignored.
"""
import random
from collections import deque

import pytest
from amaranth.hdl import Module, Signal, unsigned
from amaranth.sim import Simulator

from hotline_hw.gateware.queues import MultiQueue, RingQueue
from sim.register_copies import watch_register_copies

W = 7  # entry width


def _pack(values, width):
    return sum(v << (i * width) for i, v in enumerate(values))


def run_queue(kind, depth, npush, npop, *, update=False, registered_peek=False, seed=0,
              cycles=600, enables=False):
    rng = random.Random(seed)
    if kind == "ring":
        q = RingQueue(unsigned(W), depth, npush, npop, registered_peek=registered_peek,
                      space_drained=True)
    else:
        q = MultiQueue(unsigned(W), depth, npush, npop, update=update)
    m = Module()
    m.submodules.q = q
    pos = Signal(range(depth))               # random-access read: slot (ring) or offset
    rd = Signal(W)
    m.d.comb += rd.eq(q.at_slot(pos) if kind == "ring" else q.at(pos))
    offw = len(q.wr_off.as_value()) // npush

    async def bench(ctx):
        ref = deque()
        head = 0                              # the ring's head slot in the reference
        for cyc in range(cycles):
            level = len(ref)
            assert ctx.get(q.level) == level, (cyc, "level")
            assert ctx.get(q.space) == depth - level, (cyc, "space")
            if kind == "ring":
                assert ctx.get(q.space_drained) == depth - level + (level != 0), \
                    (cyc, "space_drained")
            for i in range(min(npop, level)):
                assert ctx.get(q.peek[i]) == ref[i], (cyc, "peek", i)
            if level:
                k = rng.randrange(level)
                if kind == "ring":
                    assert ctx.get(q.head) == head, (cyc, "head")
                    ctx.set(pos, (head + k) % depth)
                else:
                    ctx.set(pos, k)
                assert ctx.get(rd) == ref[k], (cyc, "at", k)
            # this cycle's operations; mostly full speed, sometimes starved or stalled
            pop_n = rng.randint(0, min(npop, level))
            push_n = rng.randint(0, min(npush, depth - level))
            if rng.random() < 0.3:
                push_n = min(npush, depth - level)
            writers = rng.sample(range(npush), push_n)
            data = [rng.randrange(1 << W) for _ in range(push_n)]
            en, offs, wdat = 0, [0] * npush, [rng.randrange(1 << W) for _ in range(npush)]
            for o, k in enumerate(writers):
                en |= 1 << k
                offs[k] = o
                wdat[k] = data[o]
            for k in range(npush):           # idle writers carry junk offsets
                if not en >> k & 1:
                    offs[k] = rng.randrange(1 << offw)
            push_cnt, pop_cnt = push_n, pop_n          # what the count ports carry
            if enables:
                push_on = rng.random() < 0.7
                pop_on = rng.random() < 0.7
                ctx.set(q.push_en, push_on)
                ctx.set(q.pop_en, pop_on)
                if not push_on:
                    # no push: a junk count and writers enabled at any offset, even past
                    # the free places (a caller that stalls for room); all ignored
                    push_cnt, push_n, data = rng.randint(0, npush), 0, []
                    en = rng.randrange(1 << npush)
                    offs = [rng.randrange(1 << offw) for _ in range(npush)]
                if not pop_on:
                    pop_cnt, pop_n = rng.randint(0, npop), 0
            ctx.set(q.push_n, push_cnt)
            ctx.set(q.wr_en, en)
            ctx.set(q.wr_off.as_value(), _pack(offs, offw))
            ctx.set(q.wr_data.as_value(), _pack(wdat, W))
            ctx.set(q.pop_n, pop_cnt)
            if update:
                ue = level > 0 and rng.random() < 0.5
                uo = rng.randrange(level) if ue else rng.randrange(depth)
                ud = rng.randrange(1 << W)
                ctx.set(q.upd_en, ue)
                ctx.set(q.upd_off, uo)
                ctx.set(q.upd_data, ud)
                if ue:
                    lo, hi = (0, W) if update is True else update
                    mask = ((1 << hi) - 1) & ~((1 << lo) - 1)
                    ref[uo] = (ref[uo] & ~mask) | (ud & mask)
            restart = False
            if kind == "ring":
                restart = level == 0 and push_n == 0 and rng.random() < 0.3
                ctx.set(q.restart, restart)
            await ctx.tick()
            for _ in range(pop_n):
                ref.popleft()
            head = 0 if restart else (head + pop_n) % depth
            ref.extend(data)

    sim = Simulator(m)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()


@pytest.mark.parametrize("registered_peek", [False, True], ids=["mux-peek", "reg-peek"])
@pytest.mark.parametrize("depth,npush,npop", [(4, 4, 1), (4, 2, 1), (8, 1, 4), (8, 4, 2),
                                             (2, 1, 1)])
def test_ring_queue(depth, npush, npop, registered_peek):
    run_queue("ring", depth, npush, npop, registered_peek=registered_peek, seed=depth * npop)


@pytest.mark.parametrize("registered_peek", [False, True], ids=["mux-peek", "reg-peek"])
def test_ring_queue_enables(registered_peek):
    run_queue("ring", 8, 4, 2, registered_peek=registered_peek, seed=11, enables=True)


@pytest.mark.parametrize("update", [False, True], ids=["plain", "update"])
def test_multi_queue_enables(update):
    run_queue("multi", 8, 4, 4, update=update, seed=12, enables=True)


@pytest.mark.parametrize("depth,npush,npop,update", [(4, 4, 1, False), (8, 1, 4, True),
                                                    (8, 2, 2, True), (8, 1, 4, (2, 5))])
def test_multi_queue(depth, npush, npop, update):
    run_queue("multi", depth, npush, npop, update=update, seed=depth + npush)


@pytest.mark.parametrize("block_ram,lo,hi", [(False, 2, 6), (False, 0, 3), (False, W - 3, W),
                                              (False, 0, W), (True, 2, 6), (True, 0, 3),
                                              (True, W - 3, W), (True, 0, W)])
@pytest.mark.parametrize("depth", [3, 4, 16])
def test_peek_fifo_matches_sync_fifo_buffered(depth, block_ram, lo, hi, seed=5, cycles=800):
    """PeekFIFO beside Amaranth's SyncFIFOBuffered, same random writes and reads (reads
    also while empty, writes also while full): every output and the level equal in every
    cycle, and ``next_data`` (bits lo..hi-1 peeked), while ``next_rdy``, is what ``r_data``
    shows next time it changes. With ``block_ram`` (the bits outside the peek in a
    synchronous-read RAM) at a peek in the middle, at either end and over the whole word."""
    from amaranth.lib.fifo import SyncFIFOBuffered
    from hotline_hw.gateware.queues import PeekFIFO

    rng = random.Random(seed + depth)
    m = Module()
    m.submodules.ref = ref = SyncFIFOBuffered(width=W, depth=depth)
    m.submodules.dut = dut = PeekFIFO(width=W, depth=depth, peek=slice(lo, hi),
                                      block_ram=block_ram)
    w_en, r_en, w_data = Signal(), Signal(), Signal(W)
    m.d.comb += [ref.w_en.eq(w_en), dut.w_en.eq(w_en), ref.r_en.eq(r_en), dut.r_en.eq(r_en),
                 ref.w_data.eq(w_data), dut.w_data.eq(w_data)]
    sim = Simulator(m)
    sim.add_clock(1e-6)
    watch_register_copies(sim, dut, expect=not block_ram)
    checked = {"peeks": 0, "reads": 0}

    async def bench(ctx):
        expect_next = None
        for _ in range(cycles):
            wp, rp = rng.random(), rng.random()
            ctx.set(w_en, rng.random() < wp)
            ctx.set(r_en, rng.random() < rp)
            ctx.set(w_data, rng.randrange(1 << W))
            for a, b in ((ref.w_rdy, dut.w_rdy), (ref.r_rdy, dut.r_rdy), (ref.level, dut.level)):
                assert ctx.get(a) == ctx.get(b)
            if ctx.get(ref.r_rdy):
                assert ctx.get(ref.r_data) == ctx.get(dut.r_data)
                checked["reads"] += 1
                if expect_next is not None:
                    assert (ctx.get(dut.r_data) >> lo) & ((1 << (hi - lo)) - 1) == expect_next
                    checked["peeks"] += 1
            loads = ctx.get(dut.next_rdy) and (not ctx.get(dut.r_rdy) or ctx.get(r_en))
            expect_next = ctx.get(dut.next_data) if loads else None
            await ctx.tick()

    sim.add_testbench(bench)
    sim.run()
    assert checked["reads"] > cycles // 4 and checked["peeks"] > cycles // 8, checked
