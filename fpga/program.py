"""The build-time half of the board self-check: trace, memory image, sequencer program and
the expected signatures, all from the golden model and the real driver.

:func:`make_program` returns a :class:`BoardProgram`:

* a short synthetic trace (``golden.synth`` with small tables, one-hot, Zipf), its
  mini-batches framed into input beats (``golden.framing.frame_lookup_beats``): the lookup ROM;
* a compact address map (:func:`board_layout`) whose *touched* rows do not alias when the
  ``m_axi`` address is folded into the on-chip RAM (``ram_bytes``, a power of two), and the
  RAM's initial image (the host tables, filled by ``golden.model.fill_tables``);
* the **program** of the sequencer: the register accesses of the Hotline flow, recorded by
  running the real :class:`hotline_hw.driver.HotlineDriver` against a recording
  ``read32``/``write32`` (:class:`ProgramRecorder`), plus the STREAM operations that feed the
  lookup beats, ending with the statistics reads, each checked against the golden model;
* the expected signatures: the MISR of each output stream (``golden.framing.output_beats``),
  the count and sum of the AXI write beats (every row copy the golden ``HotlineModel`` makes),
  and the MISR of the checked register reads.

The flow (one "run"; the board repeats it): check ID; configure; LEARN (clear) + learn
mini-batches; STOP; INSTALL; TRAIN + one mini-batch per staging bank; STOP (wait for mode
IDLE); for each bank: wait for its gathers, SCATTER, wait idle; EVICT; wait idle; STATUS
check; statistics.
"""

from dataclasses import dataclass, field, replace

import numpy as np

from golden import synth
from golden.framing import frame_lookup_beats, output_beats
from golden.memory import SparseMemory
from golden.model import HotlineModel, fill_tables
from golden.params import RuntimeParams
from hotline_hw.driver import HotlineDriver
from hotline_hw.gateware.top import stream_geometry
from hotline_hw.regmap import STATISTICS, regmap

from .signature import fold, misr_step, wsum_step

__all__ = ["Op", "BoardProgram", "ProgramRecorder", "make_program", "board_layout",
           "OP_WRITE", "OP_READ", "OP_POLL", "OP_STREAM", "OP_END", "OP_NAMES",
           "pack_out_beat", "pack_in_beat"]

OP_WRITE, OP_READ, OP_POLL, OP_STREAM, OP_END = 1, 2, 3, 4, 5
OP_NAMES = {OP_WRITE: "WRITE", OP_READ: "READ", OP_POLL: "POLL", OP_STREAM: "STREAM",
            OP_END: "END"}

#: display slots of the UART line (captured register reads): slot -> register
DISPLAY = {1: "STAT_LOOKUPS", 2: "STAT_HITS", 3: "STAT_STAGED_ROWS", 4: "STAT_ROWS_GATHERED"}


@dataclass(frozen=True)
class Op:
    """One sequencer operation.

    ``WRITE addr, a, strobes b`` (the AXI4-Lite ``wstrb``); ``READ addr, mask a, value b,
    slot`` (a checked read when ``a != 0``:
    ``(data & a) == b`` else the run fails; checked reads are folded into the statistics
    MISR; ``slot`` != 0 captures the data for the UART line); ``POLL addr, mask a, value b``
    (read until ``(data & a) == b``); ``STREAM a, b`` (send lookup beats ``[a, b)``); ``END``.
    """
    op: int
    addr: int = 0
    a: int = 0
    b: int = 0
    slot: int = 0
    note: str = ""

    def __str__(self):
        n = OP_NAMES[self.op]
        if self.op == OP_WRITE:
            s = f"{n:6} 0x{self.addr:03x} <- 0x{self.a:08x}"
            if self.b != 0xF:
                s += f" bytes {self.b:04b}"
        elif self.op in (OP_READ, OP_POLL):
            s = f"{n:6} 0x{self.addr:03x} & 0x{self.a:08x} == 0x{self.b:08x}"
            if self.slot:
                s += f" -> slot {self.slot}"
        elif self.op == OP_STREAM:
            s = f"{n:6} beats {self.a}..{self.b}"
        else:
            s = n
        return s + (f"  ; {self.note}" if self.note else "")


class ProgramRecorder(HotlineDriver):
    """The real driver over a recording bus: every ``write32`` becomes a WRITE, every
    ``read32`` a READ (returning the value the register is known to hold: the last value
    written, else its reset value, else an expectation set with :meth:`expect`), and every
    wait of the driver (``wait_idle``, CAM operations) a POLL of its register field."""

    def __init__(self, cfg):
        self.rmap = regmap(cfg)
        self._by_offset = {r.offset: r for r in self.rmap}
        self.ops = []
        self.shadow = {r.offset: (r.reset or 0) for r in self.rmap}
        self._expect = {}
        self._note = ""
        super().__init__(self._read32, self._write32, self.rmap)

    # the recording bus
    def _read32(self, addr):
        if addr in self._expect:
            mask, value, slot = self._expect[addr]
            self.ops.append(Op(OP_READ, addr, mask, value & mask, slot, self._take_note()))
            return value
        self.ops.append(Op(OP_READ, addr, note=self._take_note()))
        return self.shadow.get(addr, 0)

    def _write32(self, addr, value):
        reg = self._by_offset.get(addr)
        if reg is not None and reg.fields and all(f.plain for f in reg.fields):
            # a register of plain fields is written in two halves, bytes 0 and 2 and then
            # bytes 1 and 3, each write carrying the complement in the other bytes: the
            # value read back (and the run's result) is right only if wstrb is honoured
            evn, odd = 0x00FF_00FF, 0xFF00_FF00
            self.ops.append(Op(OP_WRITE, addr, (value & evn) | (~value & odd), 0b0101,
                               note=self._take_note()))
            self.ops.append(Op(OP_WRITE, addr, (value & odd) | (~value & evn), 0b1010))
        else:
            self.ops.append(Op(OP_WRITE, addr, value, 0xF, note=self._take_note()))
        self.shadow[addr] = value

    def _take_note(self):
        n, self._note = self._note, ""
        return n

    def note(self, text):
        """Attach ``text`` to the next recorded operation (program listings)."""
        self._note = text

    def expect(self, name, value, mask=0xFFFF_FFFF, slot=0):
        """Reads of register ``name`` from now on are checked: ``(data & mask) == value``."""
        self._expect[self.addr(name)] = (mask, value & mask, slot)

    def stream(self, start, stop, note=""):
        self.ops.append(Op(OP_STREAM, 0, start, stop, note=note))

    def poll(self, reg, field, want, bits=None):
        """POLL until ``reg.field`` (or its bits ``bits``) reads ``want``."""
        f = self.map.field(reg, field)
        mask = f.mask if bits is None else (bits << f.lsb)
        self.ops.append(Op(OP_POLL, self.addr(reg), mask, (want << f.lsb) & mask,
                           note=self._take_note() or f"wait {reg}.{field}"))

    def end(self):
        self.ops.append(Op(OP_END))

    # the driver's waits become POLL operations
    def _g_wait(self, reg, field, want, timeout, what):
        f = self.map.field(reg, field)
        yield ("poll", self.addr(reg), f.mask, (want << f.lsb) & f.mask, what)
        fields = self.decode(reg, self.shadow.get(self.addr(reg), 0))
        fields[field] = want
        return fields

    def _run(self, gen):
        try:
            op = next(gen)
            while True:
                if op[0] == "poll":
                    self.ops.append(Op(OP_POLL, op[1], op[2], op[3], note=op[4]))
                    res = None
                elif op[0] == "r":
                    res = int(self._read32(op[1]))
                elif op[0] == "w":
                    res = self._write32(op[1], op[2])
                else:
                    res = None
                op = gen.send(res)
        except StopIteration as stop:
            return stop.value


class _CopyLog(SparseMemory):
    """A golden memory that logs every row copy ``(dst, bytes)`` the model makes, and the
    end of the highest address it copies from or to (``span``)."""

    def __init__(self):
        super().__init__()
        self.log = []
        self.span = 0

    def copy(self, dst, src, length):
        data = self.read(src, length)
        self.log.append((dst, data.tobytes()))
        self.span = max(self.span, dst + length, src + length)
        self.write(dst, data)


def pack_in_beat(cfg, beat):
    """``(tdata, tkeep, tuser, tlast)`` of an input beat (``golden.framing``)."""
    geo = stream_geometry(cfg)
    kB = geo["key_bytes"]
    data = sum(int(k) << (8 * kB * i) for i, k in enumerate(beat["keys"])
               if (beat["keep"] >> i) & 1)
    keep = sum(((1 << kB) - 1) << (kB * i) for i in range(cfg.lanes) if (beat["keep"] >> i) & 1)
    return data, keep, int(beat["user"]), int(beat["last"])


def pack_out_beat(cfg, beat):
    """The word (folded into a signature) of an output beat as the board top sees it:
    ``tdata | tkeep << out_bits | tuser << (...) | tlast << (...)``."""
    geo = stream_geometry(cfg)
    sB, lB, ob = geo["sid_bytes"], geo["lookup_bytes"], geo["out_bits"]
    data = beat["sample_id"]
    keep = ((1 << sB) - 1) if beat["keep"] else 0
    for i, (tag, val) in enumerate(beat["lookups"]):
        data |= (tag | (val << 2)) << (8 * (sB + lB * i))
        if (beat["keep"] >> i) & 1:
            keep |= ((1 << lB) - 1) << (sB + lB * i)
    word = data | (keep << ob) | (beat["user"] << (ob + ob // 8)) | (beat["last"] << (ob + ob // 8 + 1))
    return word, ob + ob // 8 + 2


def board_layout(cfg, cardinalities, touched, ram_bytes, row_bytes=None, learn_threshold=None):
    """RuntimeParams whose touched rows do not alias in a RAM of ``ram_bytes`` (addresses
    folded modulo ``ram_bytes``). Tables are packed from address 0 (all their rows fit);
    each other region (staging bank ``b``, the popular region) gets its own 4 GiB window
    (when ``cfg.addr_bits`` has room for it; else the last ``ram_bytes`` below
    ``2**addr_bits``) and the smallest in-window offset whose touched rows (``touched[("staging", b)]``,
    ``touched["popular"]``: row indices) land on free rows of the RAM."""
    rb = cfg.row_bytes if row_bytes is None else row_bytes
    rows = ram_bytes // rb
    tb, a = [], 0
    for c in cardinalities:
        tb.append(a)
        a += c * rb
    if a > ram_bytes:
        raise ValueError(f"tables need {a} bytes, the RAM has {ram_bytes}")
    used = set(range(a // rb))
    bases = {}
    regions = [("staging", b) for b in range(cfg.staging_banks)] + ["popular"]
    for n, reg in enumerate(regions, start=1):
        idx = sorted(set(touched.get(reg, ())))
        for off in range(rows):
            spots = {(off + i) % rows for i in idx}
            if len(spots) == len(idx) and not (spots & used):
                break
        else:
            raise ValueError(f"no alias-free place for {reg} in a {ram_bytes}-byte RAM")
        used |= spots
        # a 4 GiB window per region exercises the upper address bits; with fewer address
        # bits (addr_bits), the regions go to the top RAM-sized window below 2**addr_bits
        # instead, so that the top address bit is set
        if (n + 1) << 32 <= 1 << cfg.addr_bits:
            window = n << 32
        else:
            window = (1 << cfg.addr_bits) - ram_bytes
        bases[reg] = window + off * rb
    return RuntimeParams(tuple(tb), rb, rb, bases["popular"],
                         tuple(bases[("staging", b)] for b in range(cfg.staging_banks)),
                         cfg.learn_period,
                         cfg.learn_threshold if learn_threshold is None else learn_threshold)


@dataclass
class BoardProgram:
    cfg: object
    params: object
    ram_bytes: int
    ram_init: list                 # bus words
    ops: list                      # Op
    in_beats: list                 # (tdata, tkeep, tuser, tlast)
    exp_pop: int                   # MISR of m_axis_popular
    exp_npop: int                  # MISR of m_axis_nonpopular
    exp_wcount: int                # AXI W beats of one run (modulo 2**COUNT_BITS)
    exp_wsum: int                  # their sum signature
    exp_stats: int                 # MISR of the checked reads
    n_pop_beats: int
    n_npop_beats: int
    addr_span: int                 # end of the highest address the DMA reads or writes
    stats: dict = field(default_factory=dict)       # expected statistics
    info: dict = field(default_factory=dict)

    @property
    def out_word_bits(self):
        return pack_out_beat(self.cfg, {"sample_id": 0, "lookups": [(0, 0)] * self.cfg.lanes,
                                        "keep": 0, "user": 0, "last": 0})[1]

    @property
    def decode_bits(self):
        """Address bits of the board's host memory: every address the DMA uses is below
        ``2**decode_bits`` (a burst above is answered DECERR, see ``fpga.axi_ram``)."""
        return min(self.cfg.addr_bits, max(1, (self.addr_span - 1).bit_length()))

    def listing(self):
        return "\n".join(f"{i:4}: {op}" for i, op in enumerate(self.ops))

    def summary(self):
        return {"ops": len(self.ops), "lookup_beats": len(self.in_beats),
                "ram_bytes": self.ram_bytes, "w_beats": self.exp_wcount,
                "decode_bits": self.decode_bits,
                "popular_beats": self.n_pop_beats, "nonpopular_beats": self.n_npop_beats,
                "exp_popular_sig": f"{self.exp_pop:08x}",
                "exp_nonpopular_sig": f"{self.exp_npop:08x}",
                "exp_w_sig": f"{self.exp_wsum:08x}", "exp_stats_sig": f"{self.exp_stats:08x}",
                "stats": self.stats, **self.info}


def _cards(cfg, max_rows):
    """Small table sizes (4..max_rows rows) for the board trace."""
    cap = min(max_rows, 1 << cfg.row_bits)
    return tuple(max(2, min(cap, cap >> (t % 3))) for t in range(cfg.num_tables))


def _spread_rows(tr, cfg, cards, period, seed):
    """Spread the trace's rows over the whole row range, without moving them in the RAM.

    The board's tables have a few rows each, so the keys of a plain trace would leave most
    key bits 0 (and synthesis would remove the logic behind them). Row ``r`` of table ``t``
    becomes ``r' = (r - d[t]) mod period + period * k[t, r]`` (``d[t]`` and ``k[t, r]``
    random) and the table's base moves up by ``d[t]`` rows: its address
    ``base + d[t] * rb + r' * rb`` is the old one modulo ``period * rb`` (the RAM's size or
    a multiple of it), so the RAM holds the row in the same place. Returns ``d`` and the
    map ``{(t, r): r'}`` (``None`` when the row range is no larger than ``period``; the
    trace is left as it is)."""
    if period >= 1 << cfg.row_bits:
        return (0,) * cfg.num_tables, None
    rng = np.random.default_rng(seed)
    d = [int(x) for x in rng.integers(0, period, size=cfg.num_tables)]
    kmax = (1 << cfg.row_bits) // period
    new = {}
    for t, n in enumerate(cards):
        ks = rng.integers(0, kmax, size=n)
        for r in range(n):
            new[(t, r)] = (r - d[t]) % period + period * int(ks[r])
    tr.rows = np.array([new.get((int(t), int(r)), int(r)) for t, r in zip(tr.tables, tr.rows)],
                       dtype=np.int64)
    return tuple(d), new


def make_program(cfg, *, ram_bytes=None, max_ram_bytes=1 << 17, batch_size=8, learn_batches=2,
                 seed=3, max_rows=None, seed_tries=32):
    """The :class:`BoardProgram` of ``cfg`` (see the module docstring): the first trace seed
    from ``seed`` on whose touched rows fit the RAM without aliasing (``ram_bytes``, or the
    smallest power of two up to ``max_ram_bytes`` that works)."""
    err = None
    for s in range(seed, seed + seed_tries):
        try:
            return _make_program(cfg, ram_bytes=ram_bytes, max_ram_bytes=max_ram_bytes,
                                 batch_size=batch_size, learn_batches=learn_batches, seed=s,
                                 max_rows=max_rows)
        except ValueError as e:
            err = e
    raise ValueError(f"board program: {err} (tried trace seeds {seed}..{seed + seed_tries - 1})")


def _make_program(cfg, *, ram_bytes, max_ram_bytes, batch_size, learn_batches, seed, max_rows):
    """The :class:`BoardProgram` of ``cfg`` (see the module docstring). ``ram_bytes``: the
    on-chip RAM (default: the smallest power of two, from the bytes of the touched rows up
    to ``max_ram_bytes``, in which the touched rows do not alias, raising the program's
    LEARN_THRESHOLD if need be, see below)."""
    rb, bb = cfg.row_bytes, cfg.bus_bytes
    # the accelerator addresses 2**addr_bits bytes: a larger RAM would not be reachable
    max_ram_bytes = min(max_ram_bytes, 1 << cfg.addr_bits)
    if ram_bytes is not None and ram_bytes > 1 << cfg.addr_bits:
        raise ValueError(f"a {ram_bytes}-byte RAM is more than addr_bits={cfg.addr_bits} "
                         f"addresses")
    if max_rows is None:
        max_rows = 24 if cfg.num_tables <= 4 else 4
    cards = _cards(cfg, max_rows)
    wl = synth.Workload("board", cards, (1,) * cfg.num_tables, batch_size,
                        "board self-check (small tables)", uniform_below=0)
    train_batches = cfg.staging_banks
    nb = learn_batches + train_batches
    tr = synth.generate(wl, batches=nb, seed=seed, zipf=1.2, table_bits=cfg.table_bits)
    # every ram size tried divides `period * rb` (powers of two up to the largest)
    period = (ram_bytes or max_ram_bytes) // rb
    if rb & (rb - 1):
        period = 1 << cfg.row_bits          # not a power of two: no spreading
    shift, spread = _spread_rows(tr, cfg, cards, period, seed)
    keys = tr.keys(cfg)
    loff, soff = tr.batch_lookup_offsets, tr.batch_sample_offsets
    lengths = tr.sample_lengths

    def run_model(params, mem):
        model = HotlineModel(cfg, params, mem)
        model.start_learning()
        for b in range(learn_batches):
            model.minibatch(keys[loff[b]:loff[b + 1]], lengths[soff[b]:soff[b + 1]],
                            learn=True, train=False)
        inst = model.install()
        res = [model.minibatch(keys[loff[b]:loff[b + 1]], lengths[soff[b]:soff[b + 1]],
                               train=True) for b in range(learn_batches, nb)]
        scattered = [model.scatter(bk) for bk in range(cfg.staging_banks)]
        evicted = model.evict()
        return model, inst, res, scattered, evicted

    def touched_rows(threshold):
        """First pass (no memory) with LEARN_THRESHOLD = ``threshold``: the popular slots
        and staging indices the run touches, and the number of installed rows."""
        p0 = RuntimeParams((0,) * cfg.num_tables, rb, rb, 0, (0,) * cfg.staging_banks,
                           cfg.learn_period, threshold)
        _, inst, res, _, _ = run_model(p0, None)
        touched = {"popular": inst.slots.tolist()}
        for r in res:
            touched.setdefault(("staging", r.bank), []).extend(r.gather_indices.tolist())
        return touched, len(inst.keys)

    # The popular slots of a hash CAM are spread over all cam_entries slots: folded into a
    # small RAM, n installed rows collide unless the RAM has ~n**2 rows. So the RAM is the
    # smallest power of two (from the touched bytes up to max_ram_bytes) in which some
    # LEARN_THRESHOLD (a run-time register; the configured one first, then higher ones, so
    # that fewer, hotter rows are installed) gives an alias-free layout with at least one
    # installed row (the popular path is always checked).
    runs = {}
    thresholds = []
    for thr in range(cfg.learn_threshold, cfg.counter_max + 1):
        runs[thr] = touched_rows(thr)
        if runs[thr][1] == 0:
            break
        thresholds.append(thr)
    if not thresholds:
        raise ValueError(f"LEARN_THRESHOLD {cfg.learn_threshold} installs no row")

    def need(thr):
        return sum(cards) * rb + sum(len(set(v)) for v in runs[thr][0].values()) * rb

    sizes = [ram_bytes] if ram_bytes is not None else []
    if ram_bytes is None:
        floor = min(1 << 10, max_ram_bytes)
        size = max(floor, 1 << (min(need(t) for t in thresholds) - 1).bit_length())
        while size <= max(max_ram_bytes, floor):
            sizes.append(size)
            size *= 2
    params, err = None, None
    for size in sizes:
        for thr in thresholds:
            if need(thr) > size:
                continue
            try:
                params = board_layout(cfg, cards, runs[thr][0], size, learn_threshold=thr)
                break
            except ValueError as e:
                err = err or e
        if params is not None:
            ram_bytes = size
            break
    else:
        raise err or ValueError(f"the touched rows need more than {max_ram_bytes} bytes of "
                                f"RAM (at least {min(need(t) for t in thresholds)})")

    mem = _CopyLog()
    if spread is None:
        fill_tables(mem, cfg, params, cards, seed=1)
        image = mem.read(0, ram_bytes)
    else:
        # the spread rows, at their addresses; the RAM image holds them folded
        params = replace(params, table_base=tuple(b + dt * rb for b, dt in
                                                  zip(params.table_base, shift)))
        rng = np.random.default_rng(1)
        image = np.zeros(ram_bytes, dtype=np.uint8)
        for t, n in enumerate(cards):
            data = rng.integers(0, 256, size=(n, params.row_bytes), dtype=np.uint8)
            for r in range(n):
                a = params.host_addr(cfg, (t << cfg.row_bits) | spread[(t, r)]) & cfg.addr_mask
                mem.write(a, data[r])
                image[a % ram_bytes:a % ram_bytes + rb] = data[r]
    ram_init = [int.from_bytes(image[i:i + bb].tobytes(), "little")
                for i in range(0, ram_bytes, bb)]
    model, inst, res, scattered, evicted = run_model(params, mem)

    # expected W beats (order-independent)
    wsig = (0, 0)
    for dst, data in mem.log:
        for i in range(0, len(data), bb):
            word = int.from_bytes(data[i:i + bb], "little")
            strb = (1 << bb) - 1
            beat = word | (strb << (8 * bb)) | ((dst + i) << (9 * bb))
            wsig = wsum_step(wsig, fold(beat, 9 * bb + 64))

    # input and output beats
    in_beats, pop_words, npop_words, ranges = [], [], [], []
    for b in range(nb):
        beats = frame_lookup_beats(tr.samples_of_batch(b, cfg), cfg.lanes)
        ranges.append((len(in_beats), len(in_beats) + len(beats)))
        in_beats += [pack_in_beat(cfg, bt) for bt in beats]
        if b >= learn_batches:
            p, n = output_beats(cfg, beats, res[b - learn_batches])
            pop_words += [pack_out_beat(cfg, x) for x in p]
            npop_words += [pack_out_beat(cfg, x) for x in n]
    exp_pop = exp_npop = 0
    for w, width in pop_words:
        exp_pop = misr_step(exp_pop, fold(w, width))
    for w, width in npop_words:
        exp_npop = misr_step(exp_npop, fold(w, width))

    # expected statistics
    t = model.totals
    n_rows = {"gathered": sum(len(r.gather_keys) for r in res),
              "scattered": sum(len(s) for s in scattered),
              "placed": len(inst.keys), "evicted": len(evicted)}
    copies = sum(n_rows.values())
    stats = {n: getattr(t, n) for n in ("lookups", "hits", "popular_samples",
                                        "nonpopular_samples", "staged_rows", "overflows",
                                        "bad_keys", "long_samples", "staging_full",
                                        "dedup_full", "id_wraps", "framing_errors",
                                        "minibatches", "learned_lookups")}
    stats["install_skipped"] = model.install_skipped
    for k, v in n_rows.items():
        stats[f"rows_{k}"] = v
    stats["bytes_read"] = stats["bytes_written"] = copies * rb
    last = res[-1].counters
    for n in ("lookups", "hits", "popular_samples", "nonpopular_samples", "staged_rows",
              "overflows"):
        stats[f"last_{n}"] = getattr(last, n)
    assert len(mem.log) == copies

    # the program, recorded from the driver
    rec = ProgramRecorder(cfg)
    rmap = rec.rmap
    rec.expect("ID", rmap.reg("ID").reset)
    rec.check_id()
    rec.note("configure")
    rec.configure(params)
    rec.learn(clear=True)
    rec.wait_idle()
    for b in range(learn_batches):
        rec.stream(*ranges[b], note=f"learn mini-batch {b}")
    rec.stop()
    rec.wait_idle()
    rec.install()
    rec.wait_idle()
    rec.train()
    for b in range(learn_batches, nb):
        rec.stream(*ranges[b], note=f"train mini-batch {b}")
    rec.stop()
    rec.poll("STATUS", "mode", 0)
    for bank in range(cfg.staging_banks):
        rec.poll("STATUS", "gathers_done", 1 << bank, bits=1 << bank)
        rec.scatter(bank)
        rec.wait_idle()
    rec.evict()
    rec.wait_idle()
    st = rmap.reg("STATUS")
    want_status = {"mode": 0, "busy": 0, "cmd_error": 0, "dma_error": 0, "param_error": 0,
                   "bad_key": int(t.bad_keys > 0), "overflow": int(t.overflows > 0),
                   "framing_error": 0, "bank_pending": 0}
    smask = svalue = 0
    for f in st.fields:
        if f.name in want_status:
            smask |= f.mask
            svalue |= want_status[f.name] << f.lsb
    rec.expect("STATUS", svalue, smask)
    rec.check_errors(ignore=("bad_key", "overflow"))
    slot_of = {v: k for k, v in DISPLAY.items()}
    for name in rmap.names:
        for prefix, kp in (("STAT_", ""), ("LAST_", "last_")):
            if not name.startswith(prefix):
                continue
            base = name[len(prefix):].lower()
            if base.endswith(("_lo", "_hi")):
                base = base[:-3]
            key = kp + base
            if key in stats:
                nominal = next(b for n, b, _ in STATISTICS if n == base.removeprefix("last_")) \
                    if prefix == "STAT_" else 32
                v = cfg.wrap_stat(nominal, stats[key])     # the counter's width: stats_bits
                if name.endswith("_HI"):
                    v >>= 32
                rec.expect(name, v & 0xFFFF_FFFF, slot=slot_of.get(name, 0))
    rec.stats()
    rec.end()
    ops = rec.ops

    exp_stats = 0
    for op in ops:
        if op.op == OP_READ and op.a:
            exp_stats = misr_step(exp_stats, op.b)

    info = {"trace": {"tables": list(cards), "batches": nb, "batch_size": batch_size,
                      "lookups": int(tr.n_lookups), "seed": seed},
            "installed_rows": len(inst.keys)}
    return BoardProgram(cfg, params, ram_bytes, ram_init, ops, in_beats, exp_pop, exp_npop,
                        wsig[0], wsig[1], exp_stats, len(pop_words), len(npop_words),
                        mem.span, stats, info)
