"""GatherScatterDMA in amaranth.sim against the golden model's memory semantics.

A Python AXI4 slave (:class:`AxiMemModel`, backed by ``golden.memory.SparseMemory``) answers
the DMA's ``m_axi`` port with latency, random ready/valid pauses and out-of-order read data
across IDs. It is deliberately strict: a read returns the memory as it was when its AR was
accepted and a write reaches memory only when its B response is sent, so a DMA that reads a
row before the write of it has been acknowledged sees stale data. It also checks the AXI rules
the DMA promises (no 4 KiB crossing, <= 256 beats, full strobes, WLAST, no AW after an error).

Each test runs a script of DMA operations on the DUT and on :class:`sim.tb_dma.DmaRef` (the
golden ``HotlineModel`` copy semantics) and compares the **whole** memory.
"""
import random
import re
from collections import deque

import numpy as np
import pytest
from amaranth.sim import Simulator

from golden.memory import SparseMemory
from amaranth.utils import exact_log2

from hotline_hw.config import preset
from hotline_hw.gateware import dma as dma_mod
from hotline_hw.gateware.dma import GatherScatterDMA, SEED_DMA_FILTER, dma_geometry
from hotline_hw.hashing import h3
from sim.register_copies import watch_register_copies
from sim.elaborated import sync_registers
from sim.tb_dma import DmaRef, make_params, fill_memory

TINY = preset("tiny")


class AxiMemModel:
    """AXI4 slave memory for amaranth.sim (see the module docstring)."""

    def __init__(self, axi, mem, bus_bytes, *, rng, latency=0, max_latency=None, ready=1.0,
                 rvalid=1.0, err_window=None):
        self.axi, self.mem, self.bb = axi, mem, bus_bytes
        self.rng, self.latency = rng, latency
        self.max_latency = latency if max_latency is None else max_latency
        self.ready, self.rvalid = ready, rvalid
        self.err_window = err_window          # (lo, hi): bursts touching it answer SLVERR
        self.cycle = 0
        self.first_error = None               # cycle of the first error response
        self.violations = []
        self.aw_log = []                      # (first cycle awvalid seen, addr, beats)
        self.writes = []                      # (addr, bytes) applied
        self.reads = 0
        self.outstanding = 0                  # bursts (and W beats) not yet answered

    def _err(self, addr, n):
        if self.err_window is None:
            return False
        lo, hi = self.err_window
        return addr < hi and addr + n > lo

    def _check_burst(self, kind, addr, length, size, burst):
        nbytes = (length + 1) * self.bb
        if addr % self.bb:
            self.violations.append(f"{kind} addr {addr:#x} not bus aligned")
        if (addr % 4096) + nbytes > 4096:
            self.violations.append(f"{kind} {addr:#x}+{nbytes} crosses 4 KiB")
        if size != self.bb.bit_length() - 1 or burst != 1:
            self.violations.append(f"{kind} size {size} burst {burst}")

    async def run(self, ctx):
        axi, rng = self.axi, self.rng
        reads = []            # pending read bursts, in AR order
        cur = None            # burst being returned
        aws = deque()         # accepted AW bursts waiting for W data
        wdata = []            # beats of the current W burst
        wq = deque()          # W beats (data, last) accepted and not yet matched to an AW
        bq = []               # bursts with all W data: (ready_at, addr, data, err)
        aw_seen = None
        while True:
            # --- drive ---
            ctx.set(axi.arready, rng.random() < self.ready)
            ctx.set(axi.awready, rng.random() < self.ready)
            ctx.set(axi.wready, rng.random() < self.ready)
            if cur is None:
                heads = {}
                for r in reads:
                    heads.setdefault(r["id"], r)
                cands = [r for r in heads.values() if r["at"] <= self.cycle]
                if cands:
                    cur = rng.choice(cands)
                    reads.remove(cur)
            r_on = cur is not None and rng.random() < self.rvalid
            ctx.set(axi.rvalid, r_on)
            if r_on:
                i = cur["beat"]
                word = int.from_bytes(cur["data"][i * self.bb:(i + 1) * self.bb].tobytes(),
                                      "little")
                ctx.set(axi.rdata, word)
                ctx.set(axi.rid, cur["id"])
                ctx.set(axi.rresp, 2 if cur["err"] else 0)
                ctx.set(axi.rlast, i == cur["len"])
            b_ready = [b for b in bq if b[0] <= self.cycle]
            b_on = bool(b_ready) and rng.random() < self.rvalid
            ctx.set(axi.bvalid, b_on)
            if b_on:
                ctx.set(axi.bresp, 2 if b_ready[0][3] else 0)
                ctx.set(axi.bid, 0)
            (_, _, arv, araddr, arlen, arid, arsize, arburst, arrdy, awv, awaddr, awlen,
             awsize, awburst, awrdy, wv, wd, wstrb, wlast, wrdy, rrdy, brdy) = \
                await ctx.tick().sample(
                    axi.arvalid, axi.araddr, axi.arlen, axi.arid, axi.arsize, axi.arburst,
                    axi.arready, axi.awvalid, axi.awaddr, axi.awlen, axi.awsize, axi.awburst,
                    axi.awready, axi.wvalid, axi.wdata, axi.wstrb, axi.wlast, axi.wready,
                    axi.rready, axi.bready)
            self.cycle += 1
            # --- handshakes ---
            if arv and arrdy:
                self._check_burst("AR", araddr, arlen, arsize, arburst)
                n = (arlen + 1) * self.bb
                lat = rng.randint(self.latency, self.max_latency)
                reads.append({"id": arid, "addr": araddr, "len": arlen, "beat": 0,
                              "data": self.mem.read(araddr, n), "err": self._err(araddr, n),
                              "at": self.cycle + lat})
            if r_on and rrdy:
                self.reads += 1
                if cur["err"] and self.first_error is None:
                    self.first_error = self.cycle
                cur["beat"] += 1
                if cur["beat"] > cur["len"]:
                    cur = None
            if awv and aw_seen is None:
                aw_seen = self.cycle
            if awv and awrdy:
                self._check_burst("AW", awaddr, awlen, awsize, awburst)
                aws.append((awaddr, awlen))
                self.aw_log.append((aw_seen, awaddr, awlen + 1))
                aw_seen = None
            if wv and wrdy:
                if wstrb != (1 << self.bb) - 1:
                    self.violations.append(f"wstrb {wstrb:#x}")
                wq.append((wd, wlast))
            # W beats may come before their AW (AXI allows it): they wait here for it
            while aws and wq:
                wd, wlast = wq.popleft()
                wdata.append(wd)
                addr, length = aws[0]
                if bool(wlast) != (len(wdata) == length + 1):
                    self.violations.append(f"WLAST {wlast} at beat {len(wdata)} of {length + 1}")
                if wlast or len(wdata) == length + 1:
                    aws.popleft()
                    blob = b"".join(w.to_bytes(self.bb, "little") for w in wdata)
                    wdata = []
                    lat = rng.randint(self.latency, self.max_latency)
                    bq.append((self.cycle + lat, addr, blob, self._err(addr, len(blob))))
            if b_on and brdy:
                _, addr, blob, err = b_ready[0]
                bq.remove(b_ready[0])
                if err:
                    if self.first_error is None:
                        self.first_error = self.cycle
                else:
                    self.mem.write(addr, blob)
                    self.writes.append((addr, blob))
            self.outstanding = (len(reads) + (cur is not None) + len(aws) + len(wdata)
                                + len(wq) + len(bq))

    def aw_after_error(self):
        """AWs whose AWVALID rose after the DMA could have seen the first error (its R beat
        is registered one cycle after the handshake)."""
        if self.first_error is None:
            return []
        return [a for a in self.aw_log if a[0] > self.first_error + 1]


def cam_port(req, resp, contents):
    """The CAM's host read port: slot -> (key, used), a couple of cycles later."""
    async def process(ctx):
        while True:
            ctx.set(req.ready, 1)
            _, _, valid, slot = await ctx.tick().sample(req.valid, req.payload)
            if not valid:
                continue
            ctx.set(req.ready, 0)
            await ctx.tick()
            key = contents.get(slot)
            ctx.set(resp.payload, {"key": key or 0, "used": int(key is not None)})
            ctx.set(resp.valid, 1)
            await ctx.tick().until(resp.ready)
            ctx.set(resp.valid, 0)
    return process


def set_params(ctx, dut, cfg, params):
    """Drive the DMA's parameter inputs (what the register block holds) from ``params``."""
    for t in range(cfg.num_tables):
        ctx.set(dut.table_base[t], params.table_base[t])
    for b in range(cfg.staging_banks):
        ctx.set(dut.staging_base[b], params.staging_base[b])
    ctx.set(dut.row_stride, params.row_stride)
    ctx.set(dut.row_bytes, params.row_bytes)
    ctx.set(dut.popular_base, params.popular_base)


def simulate(dut, tb, axi=None, *background):
    """Run testbench ``tb`` on ``dut`` with a clock, the register-copy watcher, the AXI
    memory model ``axi`` (if any, then checked for protocol violations) and the other
    ``background`` testbenches."""
    sim = Simulator(dut)
    sim.add_clock(1e-8)
    watch_register_copies(sim, dut)
    for bg in ([axi.run] if axi is not None else []) + list(background):
        sim.add_testbench(bg, background=True)
    sim.add_testbench(tb)
    sim.run()
    if axi is not None:
        assert not axi.violations, axi.violations[:5]


def run_script(cfg, params, mem, script, *, seed=0, idle=0.3, max_cycles=30_000, dma_kw={},
               **axi_kw):
    """Run ``script`` (see :class:`sim.tb_dma.DmaRef.run`) on the DUT with ``mem``; returns
    (axi model, dut status dict). ``dma_kw``: keyword arguments of the DUT's constructor."""
    dut = GatherScatterDMA(cfg, **dma_kw)
    rng = random.Random(seed)
    axi = AxiMemModel(dut.m_axi, mem, cfg.bus_bytes, rng=rng, **axi_kw)
    cam = {}
    status = {}

    async def wait(ctx, cond, what):
        n = 0
        while not cond():
            await ctx.tick()
            n += 1
            assert n < max_cycles, f"timeout waiting for {what}"

    async def drained(ctx, what):
        # `busy` low: every AXI transaction the DMA started has been answered
        await ctx.tick()
        assert axi.outstanding == 0, f"{what}: busy low with AXI bursts outstanding"

    async def send(ctx, port, payloads):
        for p in payloads:
            while rng.random() < idle:
                await ctx.tick()
            ctx.set(port.payload, p)
            ctx.set(port.valid, 1)
            await ctx.tick().until(port.ready)
            ctx.set(port.valid, 0)

    async def pulse(ctx, sig, extra=()):
        for s, v in extra:
            ctx.set(s, v)
        ctx.set(sig, 1)
        await ctx.tick()
        ctx.set(sig, 0)

    async def main(ctx):
        set_params(ctx, dut, cfg, params)
        await ctx.tick()
        for step in script:
            op = step[0]
            if op == "gather":
                _, bank, entries = step
                await send(ctx, dut.gather, [{"key": k, "bank": bank, "index": i}
                                             for k, i in entries])
            elif op == "place":
                await send(ctx, dut.place, [{"key": k, "slot": s} for k, s in step[1]])
            elif op == "scatter":
                await pulse(ctx, dut.scatter_start, [(dut.scatter_bank, step[1])])
            elif op == "evict":
                cam.clear()
                cam.update(step[1])
                await pulse(ctx, dut.evict_start)
            elif op == "wait_gathers":
                await wait(ctx, lambda: (ctx.get(dut.gathers_done) >> step[1]) & 1,
                           f"gathers_done[{step[1]}]")
            elif op == "wait_idle":
                await ctx.tick()
                await wait(ctx, lambda: not ctx.get(dut.busy), "idle")
                await drained(ctx, "idle")
            elif op == "gpu":
                _, addrs, delta = step
                for a in addrs:
                    mem.add_words(a, params.row_bytes, delta)
            elif op == "soft_reset":
                await pulse(ctx, dut.soft_reset)
                await ctx.tick()
                await wait(ctx, lambda: not ctx.get(dut.busy), "soft reset")
                await drained(ctx, "soft reset")
            elif op == "expect_error":
                await wait(ctx, lambda: ctx.get(dut.error), "error")
                await wait(ctx, lambda: not ctx.get(dut.busy), "drain after error")
                status["error_addr"] = ctx.get(dut.error_addr)
                status["error_resp"] = ctx.get(dut.error_resp)
            elif op == "set":
                _, name, value = step
                ctx.set(getattr(dut, name), value)
                await ctx.tick()
            else:
                raise ValueError(op)
        for name in ("error", "param_error", "cmd_ignored", "bad_key", "busy",
                     "gathers_done", "stat_rows_gathered", "stat_rows_scattered",
                     "stat_rows_placed", "stat_rows_evicted", "stat_deferred",
                     "stat_bytes_read", "stat_bytes_written"):
            status[name] = ctx.get(getattr(dut, name))
        status["log_count"] = [ctx.get(dut.log_count[b]) for b in range(cfg.staging_banks)]

    simulate(dut, main, axi, cam_port(dut.cam_read_req, dut.cam_read_resp, cam))
    return axi, status


def check(cfg, params, script, *, seed=0, fill_seed=1, **kw):
    ref_mem, dut_mem = SparseMemory(), SparseMemory()
    fill_memory(ref_mem, cfg, params, seed=fill_seed)
    fill_memory(dut_mem, cfg, params, seed=fill_seed)
    ref = DmaRef(cfg, params, ref_mem)
    ref.run(script)
    axi, status = run_script(cfg, params, dut_mem, script, seed=seed, **kw)
    assert dut_mem == ref_mem, f"memory differs (addr, dut, ref): {dut_mem.diff(ref_mem)}"
    return ref, axi, status


def keys_of(cfg, rng, n):
    """``n`` distinct keys with valid table ids."""
    out = set()
    while len(out) < n:
        out.add((rng.randrange(cfg.num_tables) << cfg.row_bits) | rng.randrange(1 << cfg.row_bits))
    return list(out)


@pytest.mark.parametrize("latency", [0, 12])
def test_place_and_evict(latency):
    cfg = TINY
    params = make_params(cfg)
    rng = random.Random(3)
    keys = keys_of(cfg, rng, 10)
    placed = list(zip(keys, rng.sample(range(cfg.cam_entries), 10)))
    contents = {s: k for k, s in placed}
    script = [("place", placed), ("wait_idle",),
              ("gpu", [params.popular_addr(s) for s in contents], 5),
              ("evict", contents), ("wait_idle",)]
    _, _, st = check(cfg, params, script, latency=latency, max_latency=latency + 5,
                     ready=0.7, rvalid=0.8)
    assert st["stat_rows_placed"] == 10 and st["stat_rows_evicted"] == 10
    assert not st["busy"] and not st["error"]


def test_gather_scatter_out_of_order():
    """Gather into both banks, modelled GPU update, scatter; long random read latency so read
    data of different IDs comes back out of order."""
    cfg = TINY
    params = make_params(cfg)
    rng = random.Random(5)
    k0 = keys_of(cfg, rng, cfg.staging_rows)
    k1 = [k for k in keys_of(cfg, rng, 40) if k not in k0][:cfg.staging_rows]
    script = [("gather", 0, list(zip(k0, range(len(k0))))), ("wait_gathers", 0),
              ("gpu", [params.staging_addr(0, i) for i in range(len(k0))], 7),
              ("gather", 1, list(zip(k1, range(len(k1))))),
              # a filter false positive may defer a bank-1 gather behind SCATTER(0): software
              # waits for gathers_done[1] only after it has scattered bank 0 (as in training)
              ("scatter", 0), ("wait_gathers", 1), ("wait_idle",),
              ("gpu", [params.staging_addr(1, i) for i in range(len(k1))], 3),
              ("scatter", 1), ("wait_idle",)]
    _, axi, st = check(cfg, params, script, latency=1, max_latency=30, ready=0.8, rvalid=0.7)
    assert st["stat_rows_gathered"] == len(k0) + len(k1)
    assert st["stat_rows_scattered"] == len(k0) + len(k1)
    assert st["log_count"] == [0, 0] and st["gathers_done"] == 0b11


def test_hazard_deferred_gather_sees_scattered_value():
    """Bank 1 gathers keys still waiting in bank 0's log: they must see bank 0's update."""
    cfg = TINY
    params = make_params(cfg)
    rng = random.Random(7)
    k0 = keys_of(cfg, rng, 12)
    k1 = k0[:6] + [k for k in keys_of(cfg, rng, 30) if k not in k0][:6]
    rng.shuffle(k1)
    script = [("gather", 0, list(zip(k0, range(len(k0))))), ("wait_gathers", 0),
              ("gpu", [params.staging_addr(0, i) for i in range(len(k0))], 11),
              ("gather", 1, list(zip(k1, range(len(k1))))),
              ("scatter", 0), ("wait_gathers", 1),
              ("gpu", [params.staging_addr(1, i) for i in range(len(k1))], 2),
              ("scatter", 1), ("wait_idle",)]
    ref, _, st = check(cfg, params, script, latency=2, max_latency=10, ready=0.8, rvalid=0.8)
    assert st["stat_deferred"] >= 6          # the 6 shared keys (plus filter false positives)
    # the shared keys' staged copies in bank 1 hold the value after both updates
    assert st["stat_rows_gathered"] == len(k0) + len(k1)


def test_hazard_deferred_behind_two_banks():
    """With four staging banks, bank 2 gathers keys pending in banks 0 and 1 (bank 1's own
    gathers of them wait behind bank 0): each waits for SCATTER(0), is then moved to bank 1's
    list by its logged wait mask, and must stage the row after SCATTER(1) (both updates).
    A log entry without its mask (or a replay that ignores it) hands out the row after
    SCATTER(0) only, and the staged copies differ from the reference."""
    cfg = preset("tiny", staging_banks=4)
    params = make_params(cfg)
    rng = random.Random(17)
    ks = keys_of(cfg, rng, 6)
    idx = list(range(len(ks)))
    script = [("gather", 0, list(zip(ks, idx))), ("wait_gathers", 0),
              ("gpu", [params.staging_addr(0, i) for i in idx], 11),
              ("gather", 1, list(zip(ks, idx))), ("gather", 2, list(zip(ks, idx))),
              ("scatter", 0), ("wait_gathers", 1),
              ("gpu", [params.staging_addr(1, i) for i in idx], 2),
              ("scatter", 1), ("wait_gathers", 2), ("wait_idle",),
              ("gpu", [params.staging_addr(2, i) for i in idx], 5),
              ("scatter", 2), ("wait_idle",)]
    _, _, st = check(cfg, params, script, latency=2, max_latency=8, ready=0.8, rvalid=0.8)
    assert st["stat_deferred"] >= 2 * len(ks)
    assert st["stat_rows_gathered"] == 3 * len(ks)


@pytest.mark.parametrize("seed", range(2))
def test_gather_into_bank_being_scattered_waits(seed):
    """The next mini-batch's gathers into a bank arrive right behind SCATTER of that bank
    (same staging indices; half the keys the same, half new). Each must wait until the
    scatter has read the bank and written its rows back: a gather let through early
    overwrites a staging slot the scatter has not yet read (a wrong row written back) or
    stages a row before its update reached host memory."""
    cfg = TINY
    params = make_params(cfg)
    rng = random.Random(40 + seed)
    n = cfg.staging_rows
    ks = keys_of(cfg, rng, 2 * n)
    first, second = ks[:n], ks[: n // 2] + ks[n: n + n - n // 2]
    idx = list(range(n))
    addrs = [params.staging_addr(0, i) for i in idx]
    script = [("gather", 0, list(zip(first, idx))), ("wait_gathers", 0), ("gpu", addrs, 7),
              ("scatter", 0), ("gather", 0, list(zip(second, idx))), ("wait_gathers", 0),
              ("gpu", addrs, 3), ("scatter", 0), ("wait_idle",)]
    _, _, st = check(cfg, params, script, latency=3, max_latency=6, seed=seed, idle=0.0)
    assert st["stat_rows_gathered"] == st["stat_rows_scattered"] == 2 * n


@pytest.mark.parametrize("seed", range(2))
def test_blocked_gather_with_another_bank_behind(seed):
    """A gather into a bank whose scatter is pending waits in the check register G2 while
    gathers into the other bank queue behind it (G1, the skid buffer). The blocked flag is
    a flip-flop loaded with the bit of the bank G2 holds next (``g_blocked``, a register
    copy); one taken from the bank behind would let the waiting gather through before the
    scatter has read its slot (a wrong row written back, and the register copy differs)."""
    cfg = TINY
    params = make_params(cfg)
    rng = random.Random(50 + seed)
    n, k = cfg.staging_rows, 1 + seed       # k gathers into bank 0 ahead of bank 1's
    ks = keys_of(cfg, rng, 2 * n + k)
    first, second, other = ks[:n], ks[n:n + k], ks[n + k:]
    idx = list(range(n))
    a0 = [params.staging_addr(0, i) for i in idx]
    a1 = [params.staging_addr(1, i) for i in idx]
    script = [("gather", 0, list(zip(first, idx))), ("wait_gathers", 0), ("gpu", a0, 7),
              ("scatter", 0), ("gather", 0, list(zip(second, idx))),
              ("gather", 1, list(zip(other, idx))), ("wait_gathers", 0), ("wait_gathers", 1),
              ("gpu", a0[:k] + a1, 3), ("scatter", 0), ("scatter", 1), ("wait_idle",)]
    _, _, st = check(cfg, params, script, latency=3, max_latency=6, seed=seed, idle=0.0)
    assert st["stat_rows_gathered"] == st["stat_rows_scattered"] == 2 * n + k


def test_wide_row_stride():
    """A row stride of 196,672 bytes (above 16 bits in both halves) and rows up to the
    largest index: the host address is ``row * stride`` made of two partial products."""
    cfg = TINY
    stride = (3 << 16) | 0x40
    params = make_params(cfg, row_stride=stride)
    rng = random.Random(13)
    top = (1 << cfg.row_bits) - 1
    keys = [(t << cfg.row_bits) | r for t in range(cfg.num_tables) for r in (top, top - 1)]
    keys += [k for k in keys_of(cfg, rng, 3 * cfg.staging_rows) if k not in keys]
    keys = keys[:cfg.staging_rows]
    script = [("gather", 0, list(zip(keys, range(len(keys))))), ("wait_gathers", 0),
              ("gpu", [params.staging_addr(0, i) for i in range(len(keys))], 5),
              ("scatter", 0), ("wait_idle",)]
    _, _, st = check(cfg, params, script, latency=2, max_latency=6, ready=0.8)
    assert st["stat_rows_gathered"] == st["stat_rows_scattered"] == len(keys)


@pytest.mark.parametrize("row_bits, sum_stages", [(18, 0), (24, 1), (38, 2)])
def test_wide_rows_products_and_partial_sums(row_bits, sum_stages):
    """Rows wider than one multiplier input: ``row * stride`` is one 18x16 product per
    18-bit chunk of the row and 16-bit half of the stride, summed with the table base in
    ``sum_stages`` partial-sum stages and J3. Rows are chosen so that every chunk is
    non-zero (all ones, a carry across each chunk boundary, random), the stride has both
    halves non-zero, and place, gather, scatter and evict all use such rows."""
    cfg = preset("tiny", row_bits=row_bits)
    names = {s.name for sigs in sync_registers(GatherScatterDMA(cfg)).values() for s in sigs}
    assert {n for n in names if re.fullmatch(r"j2s\d+_v", n)} == \
        {f"j2s{i}_v" for i in range(1, sum_stages + 1)}
    stride = (5 << 16) | 0x1c0
    params = make_params(cfg, row_stride=stride, rows_per_table=16)
    rng = random.Random(row_bits)
    top = (1 << row_bits) - 1
    rows = {top, top - 1, (1 << 18) - 1, 1 << 18, 0x2_0000 | 1}
    rows |= {(1 << c) - 1 for c in range(18, row_bits, 18)}
    rows |= {1 << c for c in range(18, row_bits, 18)}
    while len(rows) < 12:
        rows.add(rng.randrange(1 << row_bits))
    rows = sorted(r for r in rows if r <= top)
    keys = [(rng.randrange(cfg.num_tables) << row_bits) | r for r in rows]
    n_place = 4
    placed = list(zip(keys[:n_place], rng.sample(range(cfg.cam_entries), n_place)))
    gathered = keys[n_place:n_place + cfg.staging_rows]
    mems = SparseMemory(), SparseMemory()
    for mem in mems:
        fill_memory(mem, cfg, params, seed=4, rows_per_table=16)
        frng = np.random.default_rng(5)
        for k in keys:                      # the far rows' pages, and one page either side
            t, r = k >> row_bits, k & top
            a = params.table_base[t] + r * stride
            for pg in range(a // 4096 - 1, (a + cfg.row_bytes - 1) // 4096 + 2):
                mem.write(pg * 4096, frng.integers(0, 256, size=4096, dtype=np.uint8))
    ref_mem, dut_mem = mems
    idx = range(len(gathered))
    script = [("place", placed), ("gather", 0, list(zip(gathered, idx))), ("wait_gathers", 0),
              ("gpu", [params.staging_addr(0, i) for i in idx], 9),
              ("gpu", [params.popular_addr(s) for _, s in placed], 4),
              ("scatter", 0), ("evict", {s: k for k, s in placed}), ("wait_idle",)]
    DmaRef(cfg, params, ref_mem).run(script)
    _, st = run_script(cfg, params, dut_mem, script, seed=row_bits, latency=2, max_latency=7,
                       ready=0.8)
    assert dut_mem == ref_mem, f"memory differs (addr, dut, ref): {dut_mem.diff(ref_mem)}"
    assert st["stat_rows_placed"] == st["stat_rows_evicted"] == n_place
    assert st["stat_rows_gathered"] == st["stat_rows_scattered"] == len(gathered)


@pytest.mark.parametrize("row_bytes", [48, 64])
def test_4k_split(row_bytes):
    """Rows straddling 4 KiB boundaries (source and destination cut at different points)."""
    cfg = TINY
    params = make_params(cfg, row_bytes=row_bytes, near_page=True)
    rng = random.Random(11)
    n_rows = 4096 // row_bytes
    # rows around the first page boundary of each table
    keys = [(t << cfg.row_bits) | r for t in range(cfg.num_tables)
            for r in range(max(0, n_rows - 2), n_rows + 2)][:cfg.staging_rows]
    script = [("gather", 0, list(zip(keys, range(len(keys))))), ("wait_gathers", 0),
              ("gpu", [params.staging_addr(0, i) for i in range(len(keys))], 1),
              ("scatter", 0), ("wait_idle",)]
    _, axi, _ = check(cfg, params, script, latency=3, max_latency=9, ready=0.8)
    split = [a for a in axi.aw_log if (a[1] % 4096) + a[2] * cfg.bus_bytes == 4096]
    assert split, "no write burst ended at a 4 KiB boundary: the test lost its point"


@pytest.mark.parametrize("row_bytes", [4096, 3000])
def test_rows_longer_than_a_burst(row_bytes):
    """A 64-bit bus and rows of up to 4 KiB: 512 beats, more than AXI's 256, so a row is cut
    at 256 beats as well as at the 4 KiB boundary (near_page shifts every region, so the
    cuts fall at different points in the source and the destination). The next burst's
    room to the boundary after a 256-beat burst is derived from the previous room, not
    from the address: a wrong one crosses 4 KiB (the model flags it) or shortens bursts."""
    cfg = preset("tiny", axi_data_bits=64, max_row_bytes=4096, row_bytes=row_bytes, row_bits=4)
    params = make_params(cfg, row_bytes=row_bytes, near_page=True)
    keys = [(t << cfg.row_bits) | r for t in range(cfg.num_tables) for r in range(3)]
    keys = keys[:cfg.staging_rows]
    script = [("gather", 0, list(zip(keys, range(len(keys))))), ("wait_gathers", 0),
              ("gpu", [params.staging_addr(0, i) for i in range(len(keys))], 1),
              ("scatter", 0), ("wait_idle",)]
    _, axi, _ = check(cfg, params, script, latency=3, max_latency=9, ready=0.8)
    mb = [aw for aw in axi.aw_log if aw[2] == 256 and (aw[1] + 256 * cfg.bus_bytes) % 4096]
    assert mb, "no 256-beat write burst ended away from a page boundary: the test lost its point"

    def fewest_bursts(addr, n):
        """Bursts of a row written greedily: each up to the page end and 256 beats."""
        count = 0
        while n:
            step = min(n, 4096 - addr % 4096, 256 * cfg.bus_bytes)
            addr, n, count = addr + step, n - step, count + 1
        return count

    want = sum(fewest_bursts(params.staging_addr(0, i), row_bytes) for i in range(len(keys)))
    want += sum(fewest_bursts(params.host_addr(cfg, k), row_bytes) for k in keys)
    assert len(axi.aw_log) == want, "write bursts are not the longest allowed"


@pytest.mark.parametrize("row_stride", [4096, 6144])
def test_rows_cut_exactly_at_the_limits(row_stride):
    """4 KiB rows on a 64-bit bus (512 beats) starting at a page boundary (the first burst is
    256 beats and exactly 256 remain) or 256 beats before one (a 256-beat burst up to the
    boundary, then exactly 256 beats): the last burst of each row must be marked last at
    exactly those remainders."""
    cfg = preset("tiny", axi_data_bits=64, max_row_bytes=4096, row_bytes=4096, row_bits=4)
    params = make_params(cfg, row_bytes=4096, row_stride=row_stride)
    keys = [(t << cfg.row_bits) | r for t in range(cfg.num_tables) for r in range(4)]
    keys = keys[:cfg.staging_rows]
    script = [("gather", 0, list(zip(keys, range(len(keys))))), ("wait_gathers", 0),
              ("gpu", [params.staging_addr(0, i) for i in range(len(keys))], 1),
              ("scatter", 0), ("wait_idle",)]
    _, axi, _ = check(cfg, params, script, latency=3, max_latency=9, ready=0.8)
    assert all(aw[2] == 256 for aw in axi.aw_log), sorted(set(aw[2] for aw in axi.aw_log))
    assert len(axi.aw_log) == 2 * 2 * len(keys)      # two bursts per row, gather and scatter


def test_error_stops_writes_and_soft_reset_recovers():
    cfg = TINY
    params = make_params(cfg)
    rng = random.Random(13)
    keys = keys_of(cfg, rng, cfg.staging_rows)
    bad = params.host_addr(cfg, keys[5])
    window = (bad, bad + params.row_bytes)
    mem = SparseMemory()
    fill_memory(mem, cfg, params, seed=2)
    before = SparseMemory()
    fill_memory(before, cfg, params, seed=2)
    script = [("gather", 0, list(zip(keys, range(len(keys))))), ("expect_error",),
              ("soft_reset",)]
    axi, st = run_script(cfg, params, mem, script, latency=4, max_latency=12, ready=0.8,
                         err_window=window)
    assert st["error"] == 0          # cleared by the soft reset
    assert axi.first_error is not None
    assert not axi.aw_after_error(), axi.aw_after_error()
    # every write went to the staging row of a key whose read succeeded, with its data
    good = {params.staging_addr(0, i): params.host_addr(cfg, k) for i, k in enumerate(keys)}
    failed_dst = params.staging_addr(0, 5)
    for addr, blob in axi.writes:
        row = addr - (addr - params.staging_base[0]) % params.row_bytes
        assert row in good and row != failed_dst, hex(addr)
        src = good[row] + (addr - row)
        assert bytes(before.read(src, len(blob))) == blob
    assert mem.read(failed_dst, params.row_bytes).tobytes() == \
        before.read(failed_dst, params.row_bytes).tobytes()


def test_error_status_then_correct_job():
    cfg = TINY
    params = make_params(cfg)
    rng = random.Random(17)
    keys = keys_of(cfg, rng, 8)
    bad = params.staging_addr(1, 0)
    ref_mem, mem = SparseMemory(), SparseMemory()
    for x in (ref_mem, mem):
        fill_memory(x, cfg, params, seed=3)
    # write error on bank 1 (B channel), then recovery and a correct job on bank 0
    script = [("gather", 1, [(keys[0], 0)]), ("expect_error",), ("soft_reset",),
              ("gather", 0, list(zip(keys, range(8)))), ("wait_gathers", 0),
              ("scatter", 0), ("wait_idle",)]
    axi, st = run_script(cfg, params, mem, script, latency=2, ready=0.9,
                         err_window=(bad, bad + 8))
    assert st["error_resp"] == 2 and st["error_addr"] == bad
    ref = DmaRef(cfg, params, ref_mem)
    ref.run(script[3:])
    assert mem == ref_mem, mem.diff(ref_mem)
    assert st["stat_rows_gathered"] == 8 and not st["error"]


def test_param_error_blocks_jobs():
    cfg = TINY
    params = make_params(cfg)
    mem = SparseMemory()
    fill_memory(mem, cfg, params, seed=4)
    snap = mem.snapshot()
    script = [("set", "row_bytes", 12)]
    _, st = run_script(cfg, params, mem, script)
    assert st["param_error"] == 1
    dut = GatherScatterDMA(cfg)
    # row_bytes 12 on a 64-bit bus: misaligned; nothing may move while it is set
    async def tb(ctx):
        ctx.set(dut.row_bytes, 12)
        ctx.set(dut.gather.valid, 1)
        for _ in range(20):
            await ctx.tick()
            assert not ctx.get(dut.gather.ready)
            assert not ctx.get(dut.m_axi.arvalid)
        assert ctx.get(dut.param_error)
    simulate(dut, tb)
    assert mem.snapshot() == snap


def test_held_requests_count_as_pending():
    """A request held in an input skid buffer has not started, but the status must already
    count it: ``gathers_done[bank]`` falls and ``busy`` rises in the cycle after the
    handshake (before the request reaches the job pipeline), and stay so until it is done."""
    cfg = TINY
    params = make_params(cfg)
    mem = SparseMemory()
    fill_memory(mem, cfg, params, seed=5)
    dut = GatherScatterDMA(cfg)
    axi = AxiMemModel(dut.m_axi, mem, cfg.bus_bytes, rng=random.Random(1), latency=3)
    rng = random.Random(19)
    keys = keys_of(cfg, rng, 2)
    seen = []

    async def tb(ctx):
        set_params(ctx, dut, cfg, params)
        await ctx.tick()
        for what, port, payload, check in (
                ("place", dut.place, {"key": keys[0], "slot": 3}, lambda: ctx.get(dut.busy)),
                ("gather", dut.gather, {"key": keys[1], "bank": 1, "index": 0},
                 lambda: not (ctx.get(dut.gathers_done) >> 1) & 1 and ctx.get(dut.busy))):
            assert not ctx.get(dut.busy) and ctx.get(dut.gathers_done) == 0b11
            ctx.set(port.payload, payload)
            ctx.set(port.valid, 1)
            await ctx.tick().until(port.ready)
            ctx.set(port.valid, 0)
            n = 0
            while ctx.get(dut.busy):
                assert check(), f"{what} request not counted {n} cycles after handshake"
                await ctx.tick()
                n += 1
                assert n < 500
            seen.append(n)
        assert ctx.get(dut.stat_rows_placed) == 1 and ctx.get(dut.stat_rows_gathered) == 1

    simulate(dut, tb, axi)
    assert all(n > 5 for n in seen), seen      # busy right after each handshake


@pytest.mark.parametrize("offset", range(6))
def test_soft_reset_as_a_scatter_completes(offset):
    """A SCATTER of an empty bank runs idle -> wait -> drain -> complete in a few cycles
    while the core stays quiescent, so a soft reset ``offset`` cycles after the command
    lands on each of its states (one offset puts the core's reset in the cycle the sequencer
    enters "complete"). In every cycle the register copies (``front_ok``, ``s_complete``)
    must equal their values; afterwards a gather must run."""
    cfg = TINY
    params = make_params(cfg)
    mem = SparseMemory()
    fill_memory(mem, cfg, params, seed=6)
    dut = GatherScatterDMA(cfg)
    axi = AxiMemModel(dut.m_axi, mem, cfg.bus_bytes, rng=random.Random(offset), latency=2)
    key = keys_of(cfg, random.Random(23), 1)[0]

    async def tb(ctx):
        set_params(ctx, dut, cfg, params)
        await ctx.tick()
        for sig, wait in ((dut.scatter_start, offset), (dut.soft_reset, 0)):
            ctx.set(sig, 1)
            await ctx.tick()
            ctx.set(sig, 0)
            if wait:
                await ctx.tick().repeat(wait)
        n = 0
        while ctx.get(dut.busy):
            await ctx.tick()
            n += 1
            assert n < 100, "soft reset did not finish"
        assert not ctx.get(dut.scatter_busy) and not ctx.get(dut.cmd_ignored)
        ctx.set(dut.gather.payload, {"key": key, "bank": 1, "index": 0})
        ctx.set(dut.gather.valid, 1)
        await ctx.tick().until(dut.gather.ready)
        ctx.set(dut.gather.valid, 0)
        await ctx.tick().repeat(3)
        while not (ctx.get(dut.gathers_done) >> 1) & 1:
            await ctx.tick()
            n += 1
            assert n < 300, "gather after the soft reset did not finish"
        assert ctx.get(dut.stat_rows_gathered) == 1

    simulate(dut, tb, axi)


def _generations_script(cfg, params, rng, rounds, *, soft_reset_at=()):
    """Bank 1 goes through ``rounds`` gather/update/scatter rounds (its filter generation
    advances once per round, and once more per soft reset in ``soft_reset_at``); then keys
    pending in bank 1 (gathered, updated, not scattered) are gathered into bank 0. Those
    must be deferred until SCATTER(1): else bank 0 stages the stale host row."""
    n = cfg.staging_rows
    pool = keys_of(cfg, rng, 3 * n)
    script = []
    for r in range(rounds):
        if r in soft_reset_at:
            script.append(("soft_reset",))
        ks = rng.sample(pool, n // 2)
        script += [("gather", 1, list(zip(ks, range(len(ks))))), ("wait_gathers", 1),
                   ("gpu", [params.staging_addr(1, i) for i in range(len(ks))], r + 1),
                   ("scatter", 1), ("wait_idle",)]
    k1 = rng.sample(pool, n // 2)
    shared = k1[:4]
    k0 = shared + [k for k in pool if k not in k1][:n // 2 - 4]
    rng.shuffle(k0)
    script += [("gather", 1, list(zip(k1, range(len(k1))))), ("wait_gathers", 1),
               ("gpu", [params.staging_addr(1, i) for i in range(len(k1))], 100),
               ("gather", 0, list(zip(k0, range(len(k0))))),
               ("scatter", 1), ("wait_gathers", 0), ("wait_idle",),
               ("gpu", [params.staging_addr(0, i) for i in range(len(k0))], 1000),
               ("scatter", 0), ("wait_idle",)]
    return script, len(shared)


@pytest.mark.parametrize("gen_bits,rounds,entries", [(2, 5, None), (4, 17, None),
                                                    (2, 5, 8192), (4, 17, 8192)])
def test_hazard_after_generations(gen_bits, rounds, entries):
    """A key pending in bank 1 defers a gather into bank 0 after bank 1's filter has gone
    through several generations, including wraps of the generation counter
    (``2**gen_bits - 1`` generations; 5 rounds of 3 and 17 of 15 both wrap): no false
    negative. Bank 0 stays at its first generation, so a check against the wrong bank's
    generation misses. 8192 entries: the filter memory in column slices
    (``dma.filter_slices``): with 2-bit tags one slice per bank, with 4-bit tags four
    slices, each half a bank's tag."""
    cfg = TINY
    params = make_params(cfg)
    rng = random.Random(gen_bits * 100 + rounds)
    script, shared = _generations_script(cfg, params, rng, rounds)
    _, _, st = check(cfg, params, script, latency=2, max_latency=8, ready=0.9, rvalid=0.9,
                     idle=0.1, max_cycles=60_000,
                     dma_kw={"filter_gen_bits": gen_bits,
                             **({} if entries is None else {"filter_entries": entries})})
    assert st["stat_deferred"] >= shared
    assert not st["busy"] and not st["error"]


def test_log_in_column_slices(monkeypatch):
    """The gather log as column slices one block RAM deep (``dma.filter_slices``; on
    ``ulx3s`` seventeen 8192 x 2 RAMs): with block RAMs of 64 bits, `tiny`'s 32-entry log
    is 2-bit slices. Deferred gathers are replayed from the log (the replay's read port)
    and every bank is scattered from it (the scatter's), through wrapped generations: the
    memory ends as the reference's, every shared key deferred."""
    monkeypatch.setattr(dma_mod, "BRAM_BITS", 64)
    cfg = TINY
    params = make_params(cfg)
    log_bits = cfg.key_bits + 2 * cfg.staging_banks
    assert len(dma_mod.filter_slices(log_bits, cfg.staging_banks * cfg.staging_rows, 1)) > 1
    rng = random.Random(71)
    script, shared = _generations_script(cfg, params, rng, 5)
    _, _, st = check(cfg, params, script, latency=2, max_latency=8, ready=0.8, rvalid=0.8,
                     idle=0.1, max_cycles=60_000, dma_kw={"filter_gen_bits": 2})
    assert st["stat_deferred"] >= shared
    assert not st["busy"] and not st["error"]


@pytest.mark.parametrize("seed", [1, 2])
def test_soft_reset_in_flight(seed):
    """A soft reset while a bank's gather is in flight (slow memory, many bursts issued):
    the DMA starts nothing new, waits until every AR and AW it issued has been answered,
    then resets (`busy` stays high until then); a gather of other keys into the same
    staging rows and their scatter then leave memory as the reference does (the aborted
    gather's rows are all overwritten)."""
    cfg = TINY
    params = make_params(cfg)
    rng = random.Random(40 + seed)
    keys = keys_of(cfg, rng, 2 * cfg.staging_rows)
    first, second = keys[:cfg.staging_rows], keys[cfg.staging_rows:]
    idx = list(range(cfg.staging_rows))
    script = [("gather", 0, list(zip(first, idx))), ("soft_reset",),
              ("gather", 0, list(zip(second, idx))), ("wait_gathers", 0),
              ("gpu", [params.staging_addr(0, i) for i in idx], 3),
              ("scatter", 0), ("wait_idle",)]
    _, axi, st = check(cfg, params, script, seed=seed, latency=6, max_latency=20, ready=0.7,
                       rvalid=0.8)
    assert st["stat_rows_gathered"] == cfg.staging_rows and not st["error"]


def test_hazard_after_soft_resets():
    """Soft resets bump every generation (they clear the filters): with 2-bit generations,
    three soft resets and rounds in between wrap bank 1's generation; the hazard check still
    defers every pending shared key."""
    cfg = TINY
    params = make_params(cfg)
    rng = random.Random(11)
    script, shared = _generations_script(cfg, params, rng, 4, soft_reset_at=(1, 2, 3))
    _, _, st = check(cfg, params, script, latency=1, max_latency=6, ready=0.9, rvalid=0.9,
                     idle=0.1, max_cycles=60_000, dma_kw={"filter_gen_bits": 2})
    assert st["stat_deferred"] >= shared


@pytest.mark.parametrize("entries", [None, 8192])
@pytest.mark.parametrize("gap", [1, 2, 3, 4])
@pytest.mark.parametrize("stall", [False, True])
def test_hazard_back_to_back_same_key(entries, gap, stall):
    """Gathers of one key into bank 1 and then, ``gap`` items later in the stream (the items
    between are bank-1 gathers of other keys), into bank 0: the bank-0 item's filter entry is
    read, or is in a register on its way to the check, in the cycle the bank-1 item writes it
    (gap 1: the bank-0 item is in the check stage G1; 2: in the buffer's output register G0;
    3: its entry is being read; 4: just ahead of that), so only the forwarding makes it hit.
    ``stall``: the memory's ready/valid drop at random, so the gathers also wait in G2 and the
    stages behind it hold their words and masks. All keys have distinct filter entries, so
    no bank-1 gather is deferred behind bank 0 (which would wait for a scatter the script does
    not send first) and exactly the bank-0 gathers are deferred. With 8192 entries (ulx3s's)
    the filter memory is four column slices of 2 bits, each half a bank's generation tag
    (``dma.filter_slices``)."""
    cfg = TINY
    params = make_params(cfg)
    rng = random.Random(13 + gap)
    n = cfg.staging_rows
    m = n // gap                       # keys shared by the banks
    dma_kw = {} if entries is None else {"filter_entries": entries}
    fb = exact_log2(dma_geometry(cfg, **dma_kw).filter_entries)
    by_hash = {}
    for k in keys_of(cfg, rng, 8 * n):
        by_hash.setdefault(h3(k, SEED_DMA_FILTER, cfg.key_bits, fb), k)
    ks = list(by_hash.values())[:n + m]
    assert len(ks) == n + m
    shared, others = ks[:m], iter(ks[m:])
    b1 = []                             # bank 1's entries (key, index), in stream order
    script = []
    for i, k in enumerate(shared):
        group = [(k, len(b1))] + [(next(others), len(b1) + j) for j in range(1, gap)]
        b1 += group
        script += [("gather", 1, group), ("gather", 0, [(k, i)])]
    # bank 1's copies are updated before its scatter: a bank-0 gather not deferred would
    # stage the stale host row
    tail = [("wait_gathers", 1), ("gpu", [params.staging_addr(1, i) for i in range(len(b1))], 7),
            ("scatter", 1), ("wait_gathers", 0), ("wait_idle",),
            ("gpu", [params.staging_addr(0, i) for i in range(m)], 5),
            ("scatter", 0), ("wait_idle",)]
    # the reference takes a bank's entries in one step (the deferral is the same)
    ref_script = [("gather", 1, b1), ("gather", 0, list(zip(shared, range(m))))] + tail
    ref_mem, dut_mem = SparseMemory(), SparseMemory()
    fill_memory(ref_mem, cfg, params, seed=1)
    fill_memory(dut_mem, cfg, params, seed=1)
    DmaRef(cfg, params, ref_mem).run(ref_script)
    axi_kw = ({"latency": 2, "max_latency": 9, "ready": 0.5, "rvalid": 0.6} if stall
              else {"latency": 1, "max_latency": 4})
    _, st = run_script(cfg, params, dut_mem, script + tail, seed=3 + gap, idle=0.0,
                       dma_kw=dma_kw, **axi_kw)
    assert dut_mem == ref_mem, f"memory differs (addr, dut, ref): {dut_mem.diff(ref_mem)}"
    assert st["stat_deferred"] == m


@pytest.mark.parametrize("seed", range(4))
def test_gathers_straddling_scatter_completion(seed):
    """SCATTER(1) completes in the middle of a stream of bank-0 gathers (random gaps) of keys
    logged in bank 1 (each hits bank 1's filter until the completion clears it). A gather
    whose filter check is registered before the completion and used after it must not be
    deferred behind bank 1 any more: it would wait for a scatter that never comes, and
    ``gathers_done[0]`` would not rise (timeout). The seeds put a gather in the check
    register at the completion in 3 of the 4 runs."""
    cfg = TINY
    params = make_params(cfg)
    rng = random.Random(seed)
    rows1, latency = 1 + seed % 3, seed % 4
    n = cfg.staging_rows
    ks = keys_of(cfg, rng, rows1)
    script = [("gather", 1, list(zip(ks, range(rows1)))), ("wait_gathers", 1),
              ("gpu", [params.staging_addr(1, i) for i in range(rows1)], 9),
              ("scatter", 1),
              ("gather", 0, [(ks[i % rows1], i) for i in range(n)]),
              ("wait_gathers", 0), ("wait_idle",)]
    _, _, st = check(cfg, params, script, latency=latency, max_latency=latency + 2,
                     seed=seed, idle=0.6, max_cycles=3000)
    assert st["stat_rows_gathered"] == rows1 + n and st["stat_rows_scattered"] == rows1
