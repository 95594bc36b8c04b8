"""cocotb testbench of the GatherScatterDMA (``hotline_hw/gateware/dma.py``).

Memory is cocotbext-axi's ``AxiRam`` on ``m_axi`` (wrapped by :class:`LatencyAxiRam`, which
adds a read/write latency and answers SLVERR for bursts that touch an error window), with
random pause generators on all five AXI channels and random idle cycles on the job streams.
The golden prediction is :class:`DmaRef` (the copy semantics of ``golden.model.HotlineModel``
on a ``golden.memory.SparseMemory``); after every test the **whole** RAM (host tables, popular
region, staging banks and the guard bytes around them, all pre-filled with a pattern) is
compared with it.

The pure-Python half (:class:`DmaRef`, :func:`make_params`, :func:`fill_memory`) is shared
with the amaranth.sim tests (``tests/gateware/test_dma.py``).

Environment (set by ``tests/sim/test_dma_cocotb.py`` / ``bench/dma_bench.py`` through
``run_cocotb(extra_env=...)``):

* ``HOTLINE_TB_SCALE``: multiplies the number of jobs of the random tests (default 1).
* ``HOTLINE_BENCH``: ``rows,latency`` runs the benchmark test only (see ``bench/dma_bench.py``).
"""

import logging
import os
import random

import numpy as np

from golden.memory import PAGE, SparseMemory
from golden.model import HotlineModel
from golden.params import RuntimeParams
from sim.lint import Waiver

__all__ = ["DmaRef", "make_params", "fill_memory", "LINT_WAIVERS"]


# ---------------------------------------------------------------------------------------------
# golden prediction (no cocotb, no Amaranth)

class DmaRef:
    """The memory effects of the DMA's operations, through ``golden.model.HotlineModel``.

    :meth:`run` takes the script format of the tests: ``("gather", bank, [(key, index)...])``,
    ``("place", [(key, slot)...])``, ``("scatter", bank)``, ``("evict", {slot: key})``,
    ``("gpu", [addr...], delta)`` (the modelled GPU adds ``delta`` to every 32-bit word of
    each row), ``("soft_reset",)``; ``wait_*`` steps change nothing.
    """

    def __init__(self, cfg, params, mem):
        self.cfg, self.params, self.mem = cfg, params, mem
        self.model = HotlineModel(cfg, params, mem)

    def gather(self, bank, entries):
        # HotlineModel.minibatch's data movement, without the fragmenter
        md = self.model
        assert not md.logs[bank], f"bank {bank} reused before its scatter"
        md.logs[bank] = list(entries)
        for key, idx in entries:
            src = md.pending_bank.get(key)
            if src is not None:
                md.deferred[src].append((key, bank, idx))
                md.waiting[bank] += 1
            else:
                md._gather(key, bank, idx)
        md.pending_bank.update(dict.fromkeys([k for k, _ in entries], bank))

    def place(self, records):
        p = self.params
        for key, slot in records:
            self.mem.copy(p.popular_addr(slot), p.host_addr(self.cfg, key), p.row_bytes)

    def evict(self, contents):
        p = self.params
        for slot, key in sorted(contents.items()):
            self.mem.copy(p.host_addr(self.cfg, key), p.popular_addr(slot), p.row_bytes)

    def run(self, script):
        for step in script:
            op = step[0]
            if op == "gather":
                self.gather(step[1], step[2])
            elif op == "place":
                self.place(step[1])
            elif op == "scatter":
                self.model.scatter(step[1])
            elif op == "evict":
                self.evict(step[1])
            elif op == "gpu":
                for a in step[1]:
                    self.mem.add_words(a, self.params.row_bytes, step[2])
            elif op == "soft_reset":
                self.model.soft_reset()
            elif op.startswith("wait"):
                pass
            else:
                raise ValueError(f"DmaRef: cannot predict {op!r}")


def make_params(cfg, *, row_bytes=None, row_stride=None, near_page=False, rows_per_table=None,
                base=0x1000_0000):
    """An address map like ``golden.params.layout`` (each region page-aligned, one row of
    slack after each). ``near_page`` shifts every base by a different bus-aligned offset
    (less than a row) so that rows straddle 4 KiB boundaries at different points in the
    source and the destination."""
    rb = cfg.row_bytes if row_bytes is None else row_bytes
    stride = rb if row_stride is None else row_stride
    n = rows_per_table or min(1 << cfg.row_bits, 4096)
    bb = cfg.bus_bytes
    k = [0]

    def place(size):
        nonlocal a
        k[0] += 1
        shift = (k[0] * 3 * bb) % rb if near_page else 0
        at = a + shift
        a = (a + shift + size + rb + PAGE - 1) // PAGE * PAGE
        return at

    a = base
    tb = tuple(place(n * stride) for _ in range(cfg.num_tables))
    pop = place(cfg.cam_entries * rb)
    sb = tuple(place(cfg.staging_rows * rb) for _ in range(cfg.staging_banks))
    return RuntimeParams(tb, stride, rb, pop, sb, cfg.learn_period, cfg.learn_threshold)


def _regions(cfg, params, rows_per_table):
    p = params
    out = [(a, rows_per_table * p.row_stride) for a in p.table_base]
    out.append((p.popular_base, cfg.cam_entries * p.row_bytes))
    out += [(a, cfg.staging_rows * p.row_bytes) for a in p.staging_base]
    return out


def fill_memory(mem, cfg, params, *, seed=0, rows_per_table=None):
    """Fill every page the job can touch, plus a guard page before and after each region,
    with pseudo-random bytes: a stray or missing write always shows in a whole-memory
    comparison."""
    rng = np.random.default_rng(seed)
    n = rows_per_table or min(1 << cfg.row_bits, 4096)
    pages = set()
    for a, size in _regions(cfg, params, n):
        first, last = a // PAGE - 1, (a + size - 1) // PAGE + 1
        pages.update(range(first, last + 1))
    for pg in sorted(pages):
        mem.write(pg * PAGE, rng.integers(0, 256, size=PAGE, dtype=np.uint8))
    return sorted(pages)


# ---------------------------------------------------------------------------------------------
# cocotb side

import cocotb                                                        # noqa: E402
from cocotb.triggers import ClockCycles, ReadOnly, RisingEdge        # noqa: E402
from cocotbext.axi import AxiBus                                    # noqa: E402
from cocotbext.axi.axi_channels import AxiBTransaction, AxiRTransaction  # noqa: E402
from cocotbext.axi.axi_ram import AxiRamRead, AxiRamWrite            # noqa: E402
from cocotbext.axi.memory import Memory                              # noqa: E402

from sim.streams import StreamSink, StreamSource, load_config, reset, start_clock  # noqa: E402


def _pauses(rng, prob):
    while True:
        yield rng.random() < prob


class _Cycle:
    """Cycle counter, sampled in ReadOnly like sim/streams.py (cycle c = the values that
    handshake at the next rising edge)."""

    def __init__(self, dut):
        self.n = 0
        cocotb.start_soon(self._run(dut))

    async def _run(self, dut):
        while True:
            await RisingEdge(dut.clk)
            self.n += 1


class _ReadIf(AxiRamRead):
    """AxiRam's read side with a pipelined latency and reordering across IDs: an AR is
    snapshotted when accepted (the strictest legal memory: a read never sees a write whose B
    has not been sent), released ``latency`` cycles later; among released bursts the next one
    is drawn at random from the oldest of each ID (``reorder``)."""

    def __init__(self, owner, *args, **kwargs):
        self.owner = owner
        super().__init__(*args, **kwargs)

    async def _process_read(self):
        o = self.owner
        pending = []
        released = cocotb.triggers.Event()

        async def collect():
            while True:
                ar = await self.ar_channel.recv()
                addr, n = int(ar.araddr), (int(ar.arlen) + 1) * self.byte_lanes
                o.check_burst("AR", addr, int(ar.arlen), int(ar.arsize), int(ar.arburst))
                pending.append({"id": int(ar.arid), "addr": addr, "n": n,
                                "data": bytes(self.read(addr, n)), "err": o.in_window(addr, n),
                                "at": o.cycle.n + o.latency})
                o.ar_count += 1
                released.set()

        # the slave restarts this coroutine at every reset: stop the previous collector
        if getattr(self, "_collector", None) is not None and not self._collector.done():
            self._collector.cancel()
        self._collector = cocotb.start_soon(collect())
        while True:
            heads = {}
            for r in pending:
                heads.setdefault(r["id"], r)
            ready = [r for r in heads.values() if r["at"] <= o.cycle.n]
            if not ready:
                released.clear()
                if pending:
                    await RisingEdge(self.clock)
                else:
                    await released.wait()
                continue
            r = o.rng.choice(ready) if o.reorder else min(ready, key=lambda x: pending.index(x))
            pending.remove(r)
            beats = r["n"] // self.byte_lanes
            for i in range(beats):
                t = AxiRTransaction(rid=r["id"], rlast=int(i == beats - 1),
                                    rresp=2 if r["err"] else 0,
                                    rdata=int.from_bytes(r["data"][i * self.byte_lanes:
                                                                   (i + 1) * self.byte_lanes],
                                                         "little"))
                await self.r_channel.send(t)


class _WriteIf(AxiRamWrite):
    """AxiRam's write side: checks the DMA's burst rules, and applies a burst to memory only
    when its B response is sent, ``latency`` cycles after its last W beat (pipelined)."""

    def __init__(self, owner, *args, **kwargs):
        self.owner = owner
        super().__init__(*args, **kwargs)

    async def _process_write(self):
        o = self.owner
        bq = []

        async def responder():
            while True:
                while not bq or bq[0][0] > o.cycle.n:
                    await RisingEdge(self.clock)
                _, awid, addr, data, err = bq.pop(0)
                if not err:
                    self.write(addr, data)
                    o.writes.append((addr, data))
                await self.b_channel.send(AxiBTransaction(bid=awid, bresp=2 if err else 0))

        if getattr(self, "_responder", None) is not None and not self._responder.done():
            self._responder.cancel()
        self._responder = cocotb.start_soon(responder())
        while True:
            aw = await self.aw_channel.recv()
            addr, length = int(aw.awaddr), int(aw.awlen) + 1
            o.check_burst("AW", addr, length - 1, int(aw.awsize), int(aw.awburst))
            data = bytearray()
            for n in range(length):
                w = await self.w_channel.recv()
                if int(w.wstrb) != self.strb_mask:
                    o.violations.append(f"partial wstrb {int(w.wstrb):#x} at {addr:#x}")
                if int(w.wlast) != (n == length - 1):
                    o.violations.append(f"WLAST {int(w.wlast)} at beat {n} of {length}")
                data += int(w.wdata).to_bytes(self.byte_lanes, "little")
            bq.append((o.cycle.n + o.latency, int(aw.awid), addr, bytes(data),
                       o.in_window(addr, len(data))))


class LatencyAxiRam:
    """cocotbext-axi's AxiRam (its memory, channel models and pause generators) with a
    pipelined latency, read reordering across IDs, an SLVERR window and protocol checks;
    plus a bus monitor that records when the first error response handshakes, when each AR
    and AW became valid, and counts the transactions in flight from the handshakes:
    ``outstanding_reads`` (+1 per AR, -1 per R beat with RLAST) and ``outstanding_writes``
    (+1 per AW, -1 per B).

    The monitor samples in ReadOnly after a rising edge, where valid and ready are the values
    that handshake at the *next* edge; so read between a RisingEdge and its ReadOnly, the
    counts are the transactions outstanding after that edge, the same ones the DUT's
    registers see during the cycle it starts (its ``busy`` sampled in that ReadOnly)."""

    def __init__(self, dut, *, latency=0, reorder=False, rng=None, err_window=None):
        self.dut, self.latency, self.reorder = dut, latency, reorder
        self.rng = rng or random.Random()
        self.err_window = err_window
        self.cycle = _Cycle(dut)
        self.violations, self.writes = [], []
        self.ar_count = 0
        self.first_error = None
        self.aw_log = []               # (first cycle AWVALID seen, addr)
        self.r_beats = []              # cycle of every R handshake
        self.ar_cycles = []            # cycle of every AR handshake
        self.ar_log = []               # (first cycle ARVALID seen, addr)
        self.outstanding_reads = 0     # ARs accepted, last R beat not yet handshaken
        self.outstanding_writes = 0    # AWs accepted, B not yet handshaken
        bus = AxiBus.from_prefix(dut, "m_axi")
        # AxiRam = cocotbext-axi's Memory + AxiRamWrite + AxiRamRead; built here from the same
        # parts with the latency-aware interfaces (subclasses of AxiRamWrite/AxiRamRead)
        self.ram = Memory(size=2**48)
        self.ram.write_if = _WriteIf(self, bus.write, dut.clk, dut.rst, mem=self.ram.mem)
        self.ram.read_if = _ReadIf(self, bus.read, dut.clk, dut.rst, mem=self.ram.mem)
        logging.getLogger("cocotb.dma.m_axi").setLevel(logging.WARNING)
        cocotb.start_soon(self._monitor())

    def in_window(self, addr, n):
        w = self.err_window
        return w is not None and addr < w[1] and addr + n > w[0]

    def check_burst(self, kind, addr, arlen, size, burst):
        bl = self.ram.read_if.byte_lanes
        n = (arlen + 1) * bl
        if addr % bl or (addr % 4096) + n > 4096 or arlen > 255 or burst != 1 \
                or (1 << size) != bl:
            self.violations.append(f"{kind} addr {addr:#x} len {arlen + 1} size {size} "
                                   f"burst {burst}")

    def channels(self):
        w, r = self.ram.write_if, self.ram.read_if
        return [w.aw_channel, w.w_channel, w.b_channel, r.ar_channel, r.r_channel]

    def set_pauses(self, prob):
        for ch in self.channels():
            if prob:
                ch.set_pause_generator(_pauses(self.rng, prob))
            else:
                ch.clear_pause_generator()

    async def _monitor(self):
        d = self.dut
        aw_seen = ar_seen = None
        while True:
            await RisingEdge(d.clk)
            await ReadOnly()
            c = self.cycle.n
            if int(d.m_axi_awvalid.value):
                if aw_seen is None:
                    aw_seen = c
                if int(d.m_axi_awready.value):
                    self.aw_log.append((aw_seen, int(d.m_axi_awaddr.value)))
                    self.outstanding_writes += 1
                    aw_seen = None
            if int(d.m_axi_arvalid.value):
                if ar_seen is None:
                    ar_seen = c
                if int(d.m_axi_arready.value):
                    self.ar_cycles.append(c)
                    self.ar_log.append((ar_seen, int(d.m_axi_araddr.value)))
                    self.outstanding_reads += 1
                    ar_seen = None
            if int(d.m_axi_rvalid.value) and int(d.m_axi_rready.value):
                self.r_beats.append(c)
                if int(d.m_axi_rlast.value):
                    self.outstanding_reads -= 1
                if int(d.m_axi_rresp.value) >= 2 and self.first_error is None:
                    self.first_error = c
            if int(d.m_axi_bvalid.value) and int(d.m_axi_bready.value):
                self.outstanding_writes -= 1
                if int(d.m_axi_bresp.value) >= 2 and self.first_error is None:
                    self.first_error = c
            if self.outstanding_reads < 0 or self.outstanding_writes < 0:
                self.violations.append(f"cycle {c}: more RLAST/B handshakes than AR/AW")
                self.outstanding_reads = max(self.outstanding_reads, 0)
                self.outstanding_writes = max(self.outstanding_writes, 0)

    def load(self, mem):
        """Copy every page of a golden SparseMemory into the RAM."""
        for addr, page in mem.snapshot().items():
            self.ram.write(addr, page)

    def compare(self, mem):
        """Whole-memory comparison with the golden ``mem``: every page golden knows and every
        page the DMA wrote. Returns a list of (addr, dut byte, golden byte), empty if equal."""
        pages = set(mem.pages) | {a // PAGE for a, d in self.writes} \
            | {(a + len(d) - 1) // PAGE for a, d in self.writes}
        out = []
        for pg in sorted(pages):
            got = np.frombuffer(bytes(self.ram.read(pg * PAGE, PAGE)), dtype=np.uint8)
            want = mem.read(pg * PAGE, PAGE)
            for off in np.flatnonzero(got != want)[:8]:
                out.append((hex(pg * PAGE + int(off)), int(got[off]), int(want[off])))
            if len(out) >= 8:
                break
        return out

    def aw_after_error(self):
        if self.first_error is None:
            return []
        return [a for a in self.aw_log if a[0] > self.first_error + 1]


class TB:
    def __init__(self, dut, *, latency=0, reorder=False, pause=0.0, idle=0.0, err_window=None):
        self.dut = dut
        self.cfg = load_config()
        self.rng = random.Random(random.getrandbits(32))
        start_clock(dut)
        for name in ("scatter_start", "scatter_bank", "evict_start", "soft_reset",
                     "row_stride", "row_bytes", "popular_base"):
            getattr(dut, name).value = 0
        for t in range(self.cfg.num_tables):
            getattr(dut, f"table_base_{t}").value = 0
        for b in range(self.cfg.staging_banks):
            getattr(dut, f"staging_base_{b}").value = 0
        self.axi = LatencyAxiRam(dut, latency=latency, reorder=reorder, rng=self.rng,
                                 err_window=err_window)
        self.axi.set_pauses(pause)
        self.gather = StreamSource(dut, "gather", dut.clk, idle_prob=idle)
        self.place = StreamSource(dut, "place", dut.clk, idle_prob=idle)
        self.cam_req = StreamSink(dut, "cam_read_req", dut.clk, backpressure_prob=idle)
        self.cam_resp = StreamSource(dut, "cam_read_resp", dut.clk, idle_prob=idle)
        self.cam = {}
        cocotb.start_soon(self._cam())

    async def _cam(self):
        while True:
            req = await self.cam_req.recv()
            key = self.cam.get(req.value)
            await self.cam_resp.send({"key": key or 0, "used": int(key is not None)})

    async def start(self):
        await reset(self.dut)
        await ClockCycles(self.dut.clk, 2)

    def set_params(self, p):
        d = self.dut
        for t, a in enumerate(p.table_base):
            getattr(d, f"table_base_{t}").value = a
        for b, a in enumerate(p.staging_base):
            getattr(d, f"staging_base_{b}").value = a
        d.row_stride.value = p.row_stride
        d.row_bytes.value = p.row_bytes
        d.popular_base.value = p.popular_base
        self.params = p

    async def wait_for(self, cond, what, limit=100_000):
        """Wait until ``cond()`` holds, evaluated in ReadOnly (after this cycle's register
        updates: a job accepted at the last edge is already counted); return right after
        the next rising edge, where signals may be written."""
        n = 0
        while True:
            await ReadOnly()
            if cond():
                break
            await RisingEdge(self.dut.clk)
            n += 1
            assert n < limit, f"timeout waiting for {what}: {self.status()}"
        await RisingEdge(self.dut.clk)

    def status(self):
        d = self.dut
        return {n: int(getattr(d, n).value) for n in (
            "busy", "error", "param_error", "gathers_done", "scatter_busy", "evict_busy",
            "log_count_0", "log_count_1", "stat_rows_gathered", "stat_rows_scattered",
            "stat_deferred", "gather_valid", "gather_ready", "place_valid", "place_ready")}

    async def pulse(self, name, **extra):
        d = self.dut
        for k, v in extra.items():
            getattr(d, k).value = v
        getattr(d, name).value = 1
        await RisingEdge(d.clk)
        getattr(d, name).value = 0

    async def run_script(self, script):
        d, p = self.dut, self.params
        for step in script:
            op = step[0]
            self.dut._log.debug("step %s", step[:2] if op != "gpu" else op)
            if op == "gather":
                for k, i in step[2]:
                    self.gather.send_nowait({"key": k, "bank": step[1], "index": i})
                await self.gather.wait_idle()
            elif op == "place":
                for k, s in step[1]:
                    self.place.send_nowait({"key": k, "slot": s})
                await self.place.wait_idle()
            elif op == "scatter":
                await self.pulse("scatter_start", scatter_bank=step[1])
            elif op == "evict":
                self.cam = dict(step[1])
                await self.pulse("evict_start")
            elif op == "wait_gathers":
                await self.wait_for(lambda: (int(d.gathers_done.value) >> step[1]) & 1,
                                    f"gathers_done[{step[1]}]")
            elif op == "wait_idle":
                await RisingEdge(d.clk)
                await self.wait_for(lambda: not int(d.busy.value), "idle")
            elif op == "gpu":
                for a in step[1]:
                    row = np.frombuffer(bytes(self.axi.ram.read(a, p.row_bytes)), dtype="<u4")
                    self.axi.ram.write(a, (row + np.uint32(step[2])).astype("<u4").tobytes())
            elif op == "soft_reset":
                await self.pulse("soft_reset")
                await RisingEdge(d.clk)
                await self.wait_for(lambda: not int(d.busy.value), "soft reset")
            else:
                raise ValueError(op)

    def check_clean(self):
        assert not self.axi.violations, self.axi.violations[:5]


ROWS = 256      # rows per host table in the cocotb tests (keys stay inside their table)


def random_keys(cfg, rng, n, exclude=(), rows=ROWS, params=None):
    """``n`` distinct keys of the first ``rows`` rows of each table; with ``params``, half
    of them (where possible) are rows that straddle a 4 KiB boundary."""
    out, ex = [], set(exclude)
    rows = min(1 << cfg.row_bits, rows)
    straddle = []
    if params is not None:
        for t in range(cfg.num_tables):
            for r in range(rows):
                a = params.table_base[t] + r * params.row_stride
                if a // PAGE != (a + params.row_bytes - 1) // PAGE:
                    straddle.append((t << cfg.row_bits) | r)
    straddle = [k for k in straddle if k not in ex]
    while len(out) < n:
        if straddle and rng.random() < 0.5:
            k = straddle.pop(rng.randrange(len(straddle)))
        else:
            k = (rng.randrange(cfg.num_tables) << cfg.row_bits) | rng.randrange(rows)
        if k not in ex:
            ex.add(k)
            out.append(k)
    return out


def round_script(cfg, p, rng, *, n0, n1, overlap, n_place):
    """One protocol round: place, gather bank 0, GPU, gather bank 1 (``overlap`` keys of bank
    0: deferred), scatter 0, GPU on bank 1, scatter 1, evict of the placed rows."""
    k0 = random_keys(cfg, rng, n0, params=p)
    k1 = rng.sample(k0, min(overlap, n0)) + random_keys(cfg, rng, n1 - min(overlap, n0), k0,
                                                        params=p)
    rng.shuffle(k1)
    pk = random_keys(cfg, rng, n_place, k0 + k1, params=p)
    slots = rng.sample(range(cfg.cam_entries), n_place)
    placed = list(zip(pk, slots))
    return [("place", placed),
            ("gather", 0, list(zip(k0, range(n0)))), ("wait_gathers", 0),
            ("gpu", [p.staging_addr(0, i) for i in range(n0)], rng.randrange(1, 99)),
            ("gather", 1, list(zip(k1, range(n1)))),
            ("scatter", 0), ("wait_gathers", 1),
            ("gpu", [p.staging_addr(1, i) for i in range(n1)], rng.randrange(1, 99)),
            ("gpu", [p.popular_addr(s) for s in slots], 5),
            ("scatter", 1), ("evict", {s: k for k, s in placed}), ("wait_idle",)]


def random_params(cfg, rng):
    bb = cfg.bus_bytes
    rb = bb * rng.randrange(1, cfg.max_row_bytes // bb + 1)
    stride = rb + bb * rng.choice([0, 0, 1, 3])
    return make_params(cfg, row_bytes=rb, row_stride=stride, near_page=rng.random() < 0.7,
                       rows_per_table=min(1 << cfg.row_bits, ROWS))


def explain(cfg, p, script, addr):
    """Which rows of ``script`` an address belongs to (for failure messages)."""
    out = []
    for step in script:
        if step[0] in ("gather", "place"):
            entries = step[2] if step[0] == "gather" else step[1]
            for k, n in entries:
                h = p.host_addr(cfg, k)
                if h <= addr < h + p.row_bytes:
                    out.append(f"host row of key {k:#x} ({step[0]} {step[1] if step[0] == 'gather' else ''} n={n})")
                d = p.staging_addr(step[1], n) if step[0] == "gather" else p.popular_addr(n)
                if d <= addr < d + p.row_bytes:
                    out.append(f"dst of key {k:#x} ({step[0]} n={n})")
    return "; ".join(out) or "no row of the script"


_BENCH = os.environ.get("HOTLINE_BENCH")
_SCALE = float(os.environ.get("HOTLINE_TB_SCALE", "1"))


@cocotb.test(skip=bool(_BENCH))
@cocotb.parametrize(mode=["fast", "slow_reorder"])
async def random_rounds(dut, mode):
    """Random protocol rounds (random row sizes and strides, bases near 4 KiB boundaries,
    hazards), whole memory compared with the golden prediction after every round."""
    if mode == "fast":
        tb = TB(dut, latency=0, pause=0.0, idle=0.0)
    else:
        tb = TB(dut, latency=40, reorder=True, pause=0.3, idle=0.3)
    cfg, rng = tb.cfg, tb.rng
    await tb.start()
    mem = SparseMemory()
    rounds = max(1, int(3 * _SCALE))
    for r in range(rounds):
        p = random_params(cfg, rng)
        tb.set_params(p)
        if r == 0:
            fill_memory(mem, cfg, p, seed=rng.randrange(1 << 30), rows_per_table=ROWS)
            tb.axi.load(mem)
        else:
            # new regions of this round's map: fill both sides alike
            extra = SparseMemory()
            fill_memory(extra, cfg, p, seed=rng.randrange(1 << 30), rows_per_table=ROWS)
            for a, page in extra.snapshot().items():
                if a // PAGE not in mem.pages:
                    mem.write(a, np.frombuffer(page, dtype=np.uint8))
                    tb.axi.ram.write(a, page)
        n = cfg.staging_rows
        script = round_script(cfg, p, rng, n0=rng.randrange(1, n + 1), n1=rng.randrange(1, n + 1),
                              overlap=rng.randrange(0, n // 2 + 1),
                              n_place=rng.randrange(0, min(cfg.cam_entries, 12) + 1))
        DmaRef(cfg, p, mem).run(script)
        await tb.run_script(script)
        diff = tb.axi.compare(mem)
        if diff and os.environ.get("HOTLINE_TB_DEBUG"):
            a0 = int(diff[0][0], 16)
            for step in script:
                if step[0] == "gpu":
                    dut._log.info("gpu delta %d on %d rows", step[2], len(step[1]))
                if step[0] == "gather":
                    for k, n in step[2]:
                        h = p.host_addr(cfg, k)
                        if h <= a0 < h + p.row_bytes:
                            d = p.staging_addr(step[1], n)
                            dut._log.info("bank %d n %d: dut %s golden %s", step[1], n,
                                          bytes(tb.axi.ram.read(d, 8)).hex(),
                                          mem.read(d, 8).tobytes().hex())
            dut._log.info("host dut %s golden %s", bytes(tb.axi.ram.read(a0, 8)).hex(),
                          mem.read(a0, 8).tobytes().hex())
            dut._log.info("stat_deferred %d", int(dut.stat_deferred.value))
        assert not diff, f"round {r} ({p}): memory differs {diff}; " + explain(
            cfg, p, script, int(diff[0][0], 16))
        tb.check_clean()
    assert not int(dut.error.value) and not int(dut.param_error.value)
    assert int(dut.stat_rows_gathered.value) > 0


@cocotb.test(skip=bool(_BENCH))
@cocotb.parametrize(where=["read", "write"])
async def error_injection(dut, where):
    """SLVERR for bursts touching a window (a host row: read error; a staging row: write
    error): no AW after the error, only correct data written, status, soft reset recovery and
    then a correct round."""
    tb0_cfg = load_config()
    rng0 = random.Random(random.getrandbits(32))
    p = make_params(tb0_cfg, near_page=True, rows_per_table=ROWS)
    keys = random_keys(tb0_cfg, rng0, tb0_cfg.staging_rows, params=p)
    victim = len(keys) // 2
    if where == "read":
        lo = p.host_addr(tb0_cfg, keys[victim])
    else:
        lo = p.staging_addr(0, victim)
    window = (lo, lo + tb0_cfg.bus_bytes)
    tb = TB(dut, latency=20, reorder=True, pause=0.2, idle=0.2, err_window=window)
    cfg, rng = tb.cfg, tb.rng
    await tb.start()
    tb.set_params(p)
    mem = SparseMemory()
    fill_memory(mem, cfg, p, seed=7, rows_per_table=ROWS)
    tb.axi.load(mem)
    for k, i in zip(keys, range(len(keys))):
        tb.gather.send_nowait({"key": k, "bank": 0, "index": i})
    await tb.wait_for(lambda: int(dut.error.value), "error")
    await tb.wait_for(lambda: not int(dut.busy.value), "drain")
    await tb.gather.wait_idle()          # the rest is accepted and dropped
    assert int(dut.error_resp.value) == 2
    assert int(dut.error_addr.value) <= lo < int(dut.error_addr.value) + 4096
    assert not tb.axi.aw_after_error(), tb.axi.aw_after_error()[:3]
    # commands are ignored, and say so
    await tb.pulse("scatter_start", scatter_bank=0)
    await RisingEdge(dut.clk)
    assert int(dut.cmd_ignored.value) == 1
    # every byte that changed belongs to a staged row with its source's data
    good = {p.staging_addr(0, i): p.host_addr(cfg, k) for i, k in enumerate(keys)}
    for addr, data in tb.axi.writes:
        row = p.staging_base[0] + (addr - p.staging_base[0]) // p.row_bytes * p.row_bytes
        assert row in good, hex(addr)
        if where == "read":
            assert row != p.staging_addr(0, victim), "the failed row was written"
        src = good[row] + (addr - row)
        assert bytes(mem.read(src, len(data))) == data, f"wrong data at {addr:#x}"
    # recovery
    await tb.run_script([("soft_reset",)])
    assert not int(dut.error.value) and not int(dut.cmd_ignored.value)
    assert int(dut.stat_rows_gathered.value) == 0 and int(dut.log_count_0.value) == 0
    tb.axi.err_window = None
    for addr, data in tb.axi.writes:          # golden: the writes that happened
        mem.write(addr, np.frombuffer(data, dtype=np.uint8))
    tb.axi.writes.clear()
    script = round_script(cfg, p, rng, n0=cfg.staging_rows, n1=cfg.staging_rows // 2,
                          overlap=3, n_place=4)
    DmaRef(cfg, p, mem).run(script)
    await tb.run_script(script)
    diff = tb.axi.compare(mem)
    assert not diff, f"after recovery: memory differs {diff}"
    tb.check_clean()


@cocotb.test(skip=bool(_BENCH))
async def commands_while_busy(dut):
    """A second SCATTER of a bank that is still scattering, or a second EVICT, is ignored and
    flagged; a SCATTER of the other bank is queued and performed. The SCATTERs are sent once
    every bank-1 gather has been logged (``log_count_1``; a gather still in the DMA's input
    stages when its bank's SCATTER is queued waits for that scatter, and a bank-1 gather
    deferred behind bank 0 by a filter false positive keeps ``gathers_done[1]`` low until
    bank 0's scatter)."""
    tb = TB(dut, latency=30)
    cfg, rng = tb.cfg, tb.rng
    await tb.start()
    p = make_params(cfg, rows_per_table=ROWS)
    tb.set_params(p)
    mem = SparseMemory()
    fill_memory(mem, cfg, p, seed=9, rows_per_table=ROWS)
    tb.axi.load(mem)
    k0 = random_keys(cfg, rng, cfg.staging_rows)
    k1 = random_keys(cfg, rng, 4, k0)
    script = [("gather", 0, list(zip(k0, range(len(k0))))), ("wait_gathers", 0),
              ("gather", 1, list(zip(k1, range(len(k1)))))]
    ref = DmaRef(cfg, p, mem)
    ref.run(script + [("scatter", 0), ("scatter", 1)])
    await tb.run_script(script)
    await tb.wait_for(lambda: int(dut.log_count_1.value) == len(k1), "bank 1's gathers logged")
    await tb.pulse("scatter_start", scatter_bank=0)
    await tb.pulse("scatter_start", scatter_bank=1)       # queued behind bank 0
    await tb.pulse("scatter_start", scatter_bank=0)       # duplicate: ignored
    await RisingEdge(dut.clk)
    assert int(dut.cmd_ignored.value) == 1
    assert int(dut.scatter_busy.value) == 0b11
    await tb.pulse("evict_start")
    await tb.pulse("evict_start")                          # duplicate: ignored
    await tb.run_script([("wait_idle",)])
    assert int(dut.stat_rows_scattered.value) == len(k0) + len(k1)
    diff = tb.axi.compare(mem)
    assert not diff, diff
    await tb.run_script([("soft_reset",)])
    assert int(dut.cmd_ignored.value) == 0


@cocotb.test(skip=bool(_BENCH))
@cocotb.parametrize(mode=["slow_reorder", "plain"])
async def soft_reset_in_flight(dut, mode):
    """A soft reset while a bank's gather has AXI transactions in flight (``slow_reorder``:
    reads and writes outstanding, latency 40, reordering, pauses and idle cycles; ``plain``:
    reads outstanding, latency 20): the DMA starts no burst after the pulse, ``busy`` stays
    high until every AR it issued got its last R beat and every AW its B (checked every
    cycle on the bus monitor's counts), it stays idle afterwards with clean status; then a
    gather of other keys into the same staging rows, a GPU step and their scatter leave the
    whole memory as the golden prediction (the aborted gather's rows are all overwritten).
    The cocotb counterpart of ``tests/gateware/test_dma.py::test_soft_reset_in_flight``."""
    if mode == "slow_reorder":
        tb = TB(dut, latency=40, reorder=True, pause=0.3, idle=0.3)
    else:
        tb = TB(dut, latency=20)
    need_writes = mode == "slow_reorder"
    cfg, rng, a = tb.cfg, tb.rng, tb.axi
    await tb.start()
    p = make_params(cfg, near_page=True, rows_per_table=ROWS)
    tb.set_params(p)
    mem = SparseMemory()
    fill_memory(mem, cfg, p, seed=11, rows_per_table=ROWS)
    tb.axi.load(mem)
    keys = random_keys(cfg, rng, 2 * cfg.staging_rows, params=p)
    first, second = keys[:cfg.staging_rows], keys[cfg.staging_rows:]
    idx = list(range(cfg.staging_rows))
    script = [("gather", 0, list(zip(first, idx))), ("soft_reset",),
              ("gather", 0, list(zip(second, idx))), ("wait_gathers", 0),
              ("gpu", [p.staging_addr(0, i) for i in idx], rng.randrange(1, 99)),
              ("scatter", 0), ("wait_idle",)]
    DmaRef(cfg, p, mem).run(script)
    # the whole first gather is accepted (a job still queued at the pulse would be taken
    # after the reset), then the pulse as soon as transactions are in flight
    await tb.run_script(script[:1])
    n = 0
    while True:
        await RisingEdge(dut.clk)       # the counts: outstanding after this edge
        if a.outstanding_reads and (a.outstanding_writes or not need_writes):
            break
        n += 1
        assert n < 10_000, f"no transactions in flight: {tb.status()}"
    reads0, writes0 = a.outstanding_reads, a.outstanding_writes
    assert reads0 > 0 and (writes0 > 0 or not need_writes), (reads0, writes0)
    dut.soft_reset.value = 1
    await ReadOnly()
    c0 = a.cycle.n                      # the cycle soft_reset is high; halted from c0 + 1
    await RisingEdge(dut.clk)
    dut.soft_reset.value = 0
    waited = n = 0
    while True:
        rd, wr = a.outstanding_reads, a.outstanding_writes
        await ReadOnly()
        if not int(dut.busy.value):
            break
        waited += bool(rd or wr)
        await RisingEdge(dut.clk)
        n += 1
        assert n < 10_000, f"soft reset never completes: {tb.status()}"
    assert rd == 0 and wr == 0, \
        f"busy low {n + 1} cycles after the pulse with {rd} reads, {wr} writes outstanding"
    assert waited > 0, "nothing was in flight after the pulse: the test proves nothing"
    # nothing new after the pulse: a burst may still be first presented in cycle c0 + 1 (its
    # AR/AW register loaded at the pulse's edge, before the halt), none later
    late = [(c, hex(x)) for c, x in a.ar_log if c > c0 + 1] + \
        [(c, hex(x)) for c, x in a.aw_log if c > c0 + 1]
    assert not late, f"bursts issued after the soft reset pulse (cycle {c0}): {late[:4]}"
    n_ar, n_aw, n_r = len(a.ar_log), len(a.aw_log), len(a.r_beats)
    await RisingEdge(dut.clk)
    await ClockCycles(dut.clk, 64)
    await ReadOnly()
    assert not int(dut.busy.value), "busy again after the soft reset"
    assert (len(a.ar_log), len(a.aw_log), len(a.r_beats)) == (n_ar, n_aw, n_r), \
        "AXI traffic after the soft reset completed"
    assert not int(dut.error.value) and not int(dut.cmd_ignored.value)
    assert int(dut.stat_rows_gathered.value) == 0 and int(dut.log_count_0.value) == 0
    assert int(dut.gathers_done.value) == (1 << cfg.staging_banks) - 1   # nothing in flight
    dut._log.info("soft reset (%s) with %d reads, %d writes outstanding; busy %d more "
                  "cycles, %d of them with transactions in flight", mode, reads0, writes0,
                  n + 1, waited)
    await RisingEdge(dut.clk)
    await tb.run_script(script[2:])
    assert int(dut.stat_rows_gathered.value) == cfg.staging_rows
    assert int(dut.stat_rows_scattered.value) == cfg.staging_rows
    diff = a.compare(mem)
    assert not diff, f"memory differs {diff}; " + explain(cfg, p, script, int(diff[0][0], 16))
    tb.check_clean()


@cocotb.test(skip=not _BENCH)
async def bench_gather(dut):
    """Read-channel efficiency of a gather of ``rows`` random rows (``HOTLINE_BENCH=rows,
    latency``): R beats / cycles from the first AR to the last R. Writes the result to
    ``$HOTLINE_BENCH_OUT``."""
    rows, latency = (int(x) for x in _BENCH.split(","))
    tb = TB(dut, latency=latency, reorder=True)
    cfg, rng = tb.cfg, tb.rng
    await tb.start()
    per_table = min(1 << cfg.row_bits, 1 << 20)
    p = make_params(cfg, rows_per_table=per_table)
    tb.set_params(p)
    n = min(rows, cfg.staging_rows)
    keys = random_keys(cfg, rng, n, rows=per_table)
    done = 0
    bank = 0
    while done < rows:
        chunk = keys[:min(n, rows - done)]
        for i, k in enumerate(chunk):
            tb.gather.send_nowait({"key": k, "bank": bank, "index": i})
        await tb.gather.wait_idle()
        await tb.wait_for(lambda: (int(dut.gathers_done.value) >> bank) & 1, "gathers")
        done += len(chunk)
        if done < rows:
            await tb.pulse("scatter_start", scatter_bank=bank)
            bank ^= 1
    a = tb.axi
    beats = len(a.r_beats)
    cycles = a.r_beats[-1] - a.ar_cycles[0] + 1
    res = {"rows": rows, "latency": latency, "beats": beats, "cycles": cycles,
           "efficiency": beats / cycles, "row_bytes": p.row_bytes,
           "bus_bits": cfg.axi_data_bits, "outstanding": cfg.max_outstanding_reads}
    out = os.environ.get("HOTLINE_BENCH_OUT")
    if out:
        import json
        with open(out, "w") as f:
            json.dump(res, f)
    dut._log.info("bench: %s", res)
    tb.check_clean()


# ---------------------------------------------------------------------------------------------
# lint waivers of this unit (tests/sim/test_lint.py reads LINT_WAIVERS)

_CORE = r"dma\.dut\.core"
LINT_WAIVERS = (
    # GatherScatterDMA's logic lives in a `core` submodule (the ResetInserter of the soft
    # reset). Named signals that Amaranth writes as alias wires of their driving nets
    # (`assign ar_len = $123;`, each checked in the .v): the statistics registers behind
    # the stat_* ports, the log counts behind log_count_*, comb helpers (burst lengths,
    # buffer occupancy, filter hits, the list-append position, the next burst's address and
    # beats left `nsrc`/`nleft`/`ndst`/`nwl`, the held-gather mask `g_held`, `rj_src` behind
    # the tag memory's write data, the registered `perr` behind param_error, the filter
    # check `hits_new` behind `g2_chk`, the in-flight flags `gath_none`, the R stage's
    # `r1_v` behind the buffer's write enable, `r1_ptr` / `r_tag` behind the buffer's write
    # and the tag memory's read addresses, the hazard log's write register `lw_*` behind its write port,
    # the link list's write register `lk_*` behind its write port,
    # the scatter request `r_scat` (= s_kv), the pending scatters `s_pending` behind the
    # scatter_busy port, the hazard filter's ports `filt_*` and read address `f_cand`
    # behind its column slices' ports, the gather log's ports `log_*` behind its column
    # slices' ports, ...) and the members of the three
    # SyncFIFOs as seen from `core` (`w_en`, `r_rdy`, ... with `$N` suffixes).
    Waiver("UNUSEDSIGNAL", r"^Signal is not used: '(st_[a-z_]+|log_count\d+|row_beats|"
           r"replayable|r1_data|occupancy|ip|hits|gathers_done|error|e_pending|aw_len|ar_len|"
           r"app_pos|to_page|w_en|r_en|r_rdy|w_data|nsrc|nleft|ndst|nwl|g_held|rj_src|perr|"
           r"hits_new|gath_none|ret_beats|avail_ret|r1_v|r1_ptr|r_tag|lw_en|lw_addr|lw_data|r_scat|s_pending|"
           r"lk_en|lk_addr|lk_data|"
           r"f_cand|filt_raddr|filt_ren|filt_waddr|filt_wdata|filt_wen|"
           r"log_[wsr]addr|log_[sr]en|log_wen|log_wdata)"
           r"(\$\d+)?'$", instance=_CORE, reason=
           "alias wires of named signals, read through their driving nets"),
    # amaranth.lib.fifo.SyncFIFOBuffered (row, write-response and write-length queues):
    # `produce`/`consume` alias its memory port addresses, `level`/`r_level` its counters,
    # `w_data` its write port (the same waiver the counter array's FIFO has).
    Waiver("UNUSEDSIGNAL", r"^Signal is not used: '(produce|consume|level|r_level|w_data)'$",
           instance=_CORE + r"\.(row_fifo|b_fifo|wl_fifo)(\.unbuffered)?", reason=
           "alias wires inside Amaranth's own SyncFIFOBuffered"),
    # Unsigned arithmetic/compares between a narrower operand and a wider one, which Verilog
    # zero-extends exactly as Amaranth does: the 12-bit page offset subtracted from 4096
    # (13 bits), the beats left of a row (`rj_left`/`wr_left`, up to max_row_bytes / bus)
    # against the burst limits, the buffer occupancy/available beats against a burst length,
    # `index >= log_count`.
    Waiver("WIDTHEXPAND", r"^Operator (SUB|LT|GTE|ADD) expects \d+ bits on the [LR]HS, but "
           r"[LR]HS's (SEL|VARREF '(rj_left|wr_left|avail)') generates \d+ bits\.$",
           instance=_CORE, reason="unsigned operand zero-extended, as Amaranth extends it"),
    # The registered burst lengths `ar_len`/`aw_len` (<= the longest burst) added to the
    # buffer allocation pointer, compared with the free buffer space / available beats and
    # subtracted from them: zero-extended as in Amaranth.
    Waiver("WIDTHEXPAND", r"^Operator (ADD|SUB|LTE|GTE) expects \d+ bits on the [LR]HS, but "
           r"[LR]HS's VARREF '(ar_len|aw_len)' generates \d+ bits\.$",
           instance=_CORE, reason="unsigned burst length zero-extended, as Amaranth extends it"),
    # `buf_free - (ar_ok ? ar_len : 0) + fetch`: Amaranth's signed difference plus the 1-bit
    # `fetch`, which Yosys writes as `$signed({1'h0, fetch})` (a non-negative 2-bit value)
    # sign-extended to the sum's width: the value Amaranth defines.
    Waiver("WIDTHEXPAND", r"^Operator ADD expects \d+ bits on the RHS, but RHS's SIGNED "
           r"generates 2 bits\.$", instance=_CORE, reason=
           "a 1-bit increment as a non-negative signed operand, extended as Amaranth does"),
    # `spare - len`: a row's first burst length, carried with the job (`jo.rd.len`) and in
    # the row FIFO (`rowout.wr.len`), zero-extended to the credit's signed width, which
    # Yosys writes as `$signed({1'h0, field})` (a non-negative value) sign-extended to the
    # difference's width: the value Amaranth defines.
    Waiver("WIDTHEXPAND", r"^Operator SUB expects \d+ bits on the RHS, but RHS's SIGNED "
           r"generates \d+ bits\.$", instance=_CORE, reason=
           "a burst length as a non-negative signed operand, extended as Amaranth does"),
)
