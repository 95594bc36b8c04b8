"""The self-checking board top: the whole Hotline accelerator, kept alive and checked on chip.

:class:`SelfCheck` (platform-independent, simulated in ``tests/test_fpga_board.py``) holds

* the accelerator (:class:`hotline_hw.gateware.top.HotlineAccelerator`), reset at the start
  of every run;
* its host memory: :class:`fpga.axi_ram.AxiRam` on ``m_axi`` (block RAM, addresses folded,
  initialised with the host tables of the board trace);
* the :class:`fpga.sequencer.Sequencer`: the Hotline flow recorded from the real driver
  (``fpga.program``), on ``s_axil`` and ``s_axis_lookup``;
* the signatures: a MISR per output stream (both taken with LFSR backpressure), the
  order-independent sum of every AXI W beat (address, data, strobes), the MISR of the
  statistics and STATUS reads (each also compared one by one with the golden model);
* the verdict: after ``END`` every signature and count is compared with the expected value
  computed at build time from the golden model; a run that does not end within
  ``timeout_cycles`` fails (``TIME``);
* the report: LEDs (heartbeat, running, pass, fail) and one UART line per run, e.g.::

    hotline run 0001 PASS err=00 pop=1A2B3C4D npop=... w=.../0050 st=... lk=00000030 ...

  then, after ``pause_cycles`` (or at once on ``button``), the next run.

:class:`BoardTop` puts :class:`SelfCheck` on a board of ``fpga.boards`` (LEDs, UART TX,
optional button; the board's default clock).
"""

from amaranth.hdl import Cat, Elaboratable, Module, Mux, ResetInserter, Signal
from amaranth.lib import io, wiring
from amaranth.lib.wiring import In, Out

from hotline_hw.gateware.top import HotlineAccelerator, stream_geometry

from .axi_ram import AxiRam
from .sequencer import Sequencer
from .signature import BeatSum, Misr
from .uart import LinePrinter

__all__ = ["SelfCheck", "BoardTop", "ERR_BITS", "LINES", "line_template", "expected_line"]

#: bits of ``err`` (the UART line's ``err=`` field)
ERR_BITS = {"popular": 0, "nonpopular": 1, "writes": 2, "stats": 3, "read_check": 4,
            "bus": 5, "timeout": 6}

#: The UART lines :class:`SelfCheck` can print:
#:
#: * ``"full"``: the verdict and ``err`` bits, the signatures (``pop``, ``npop``, ``w`` with
#:   its beat count, ``st``), four statistics read back from the accelerator, the run's
#:   cycle count and the first failing read's op;
#: * ``"short"``: the verdict and ``err`` bits, the cycle count and the failing op only. The
#:   checks are the same (every signature and statistic is compared on chip; ``err`` names
#:   the one that differed, and a passing run's signatures are the expected ones the build
#:   report prints). It saves the printer's nibble multiplexer over the signatures and the
#:   sequencer's display registers: on an iCE40, which has no wide multiplexers, 270
#:   of the HX8K's 7,680 logic cells.
LINES = ("full", "short")


def line_template(line="full"):
    """The :class:`fpga.uart.LinePrinter` template of the UART line ``line`` (:data:`LINES`)."""
    if line not in LINES:
        raise ValueError(f"line {line!r}: choose from {', '.join(LINES)}")
    t = ["hotline run ", ("hex", "runs", 4), " ",
         ("text", "verdict", {1: "PASS", 2: "FAIL", 0: "????"}),
         " err=", ("hex", "err", 2)]
    if line == "full":
        t += [" pop=", ("hex", "pop", 8), " npop=", ("hex", "npop", 8),
              " w=", ("hex", "w", 8), "/", ("hex", "wn", 4), " st=", ("hex", "st", 8),
              " lookups=", ("hex", "d0", 4), " hits=", ("hex", "d1", 4),
              " staged=", ("hex", "d2", 4), " gathered=", ("hex", "d3", 4)]
    return t + [" cycles=", ("hex", "cyc", 8), " op=", ("hex", "op", 3), "\r\n"]


class SelfCheck(wiring.Component):
    """See the module docstring.

    Parameters
    ----------
    cfg : HotlineConfig
    program : fpga.program.BoardProgram
    clk_freq : float
        Clock frequency in Hz (UART divisor, heartbeat, pause).
    expect : dict, optional
        Overrides of the expected values (``pop``, ``npop``, ``wsum``, ``wcount``, ``stats``):
        a wrong one proves the check can fail.
    line : str
        The UART line, ``"full"`` or ``"short"`` (:data:`LINES`, :func:`line_template`).
    """

    def __init__(self, cfg, program, clk_freq, *, baud=115200, timeout_cycles=None,
                 pause_cycles=None, expect=None, uart=True, line="full"):
        self.cfg, self.prog, self.clk_freq = cfg, program, int(clk_freq)
        self.baud = baud
        self.timeout_cycles = timeout_cycles or (1 << 26)
        self.pause_cycles = pause_cycles if pause_cycles is not None else self.clk_freq
        self.expect = {"pop": program.exp_pop, "npop": program.exp_npop,
                       "wsum": program.exp_wsum, "wcount": program.exp_wcount,
                       "stats": program.exp_stats}
        self.expect.update(expect or {})
        self.with_uart = uart
        self.line = line
        line_template(line)                         # checks the name
        super().__init__({
            "button": In(1),
            "running": Out(1), "passed": Out(1), "failed": Out(1), "heartbeat": Out(1),
            "runs": Out(16), "err": Out(8), "tx": Out(1, init=1),
        })

    def elaborate(self, platform):
        cfg, prog = self.cfg, self.prog
        geo = stream_geometry(cfg)
        m = Module()
        core_rst = Signal()
        seq_rst = Signal()
        clear = Signal()

        core = HotlineAccelerator(cfg)
        m.submodules.hotline = ResetInserter(core_rst)(core)
        ram = AxiRam(cfg.axi_data_bits, cfg.axi_id_bits, prog.ram_bytes // cfg.bus_bytes,
                     init=prog.ram_init, track_bits=cfg.addr_bits,
                     decode_bits=prog.decode_bits)
        m.submodules.host_ram = ram
        rmap_bits = len(core.s_axil.awaddr)
        seq = Sequencer(prog.ops, prog.in_beats, rmap_bits, geo["in_bits"],
                        display_slots=4 if self.line == "full" else 0)
        m.submodules.sequencer = ResetInserter(seq_rst)(seq)

        wiring.connect(m, core.m_axi, ram.axi)
        wiring.connect(m, seq.m_axil, core.s_axil)
        wiring.connect(m, seq.m_axis, core.s_axis_lookup)
        m.d.comb += ram.clear.eq(clear)

        # ---- output streams: LFSR backpressure, a MISR each -----------------------------
        lfsr = Signal(16, init=0xACE1)
        m.d.sync += lfsr.eq(Cat(lfsr[1:], lfsr[0] ^ lfsr[2] ^ lfsr[3] ^ lfsr[5]))
        sigs = {}
        for n, (name, port) in enumerate((("pop", core.m_axis_popular),
                                          ("npop", core.m_axis_nonpopular))):
            word = Cat(port.tdata, port.tkeep, port.tuser, port.tlast)
            misr = Misr(len(word))
            m.submodules[f"misr_{name}"] = misr
            ready = ~(lfsr[2 * n] & lfsr[2 * n + 5])          # ready 3 cycles in 4
            m.d.comb += [port.tready.eq(ready), misr.word.eq(word), misr.clear.eq(clear),
                         misr.en.eq(port.tvalid & port.tready)]
            sigs[name] = misr.state

        # ---- W beats ----------------------------------------------------------------------
        wbeat = Cat(ram.wbeat_data, ram.wbeat_strb, ram.wbeat_addr)
        m.submodules.wsum = wsum = BeatSum(len(wbeat))
        m.d.comb += [wsum.word.eq(wbeat), wsum.en.eq(ram.wbeat_valid), wsum.clear.eq(clear)]

        # ---- run control --------------------------------------------------------------------
        ex = self.expect
        cycles = Signal(32)
        timeout = Signal()
        err = Signal(8)
        verdict = Signal(2)               # 0 none yet, 1 PASS, 2 FAIL
        runs = Signal(16)
        failed_ever = Signal()
        rst_cnt = Signal(5)
        pause = Signal(range(max(2, self.pause_cycles + 1)))
        btn_sync = Signal(3)
        m.d.sync += btn_sync.eq(Cat(self.button, btn_sync[:2]))
        btn_rise = btn_sync[1] & ~btn_sync[2]
        printer_busy = Signal()
        print_start = Signal()

        err_now = Cat(sigs["pop"] != ex["pop"], sigs["npop"] != ex["npop"],
                      (wsum.total != ex["wsum"]) | (wsum.count != ex["wcount"]),
                      seq.stats_sig != ex["stats"], seq.mismatch,
                      seq.bus_error | ram.protocol_error, timeout)

        with m.FSM(name="run") as fsm:
            with m.State("RESET"):
                m.d.comb += [core_rst.eq(1), seq_rst.eq(1), clear.eq(1)]
                m.d.sync += [rst_cnt.eq(rst_cnt + 1), cycles.eq(0), timeout.eq(0)]
                with m.If(rst_cnt == 31):
                    m.next = "START"
            with m.State("START"):
                m.d.comb += seq.start.eq(1)
                m.next = "RUN"
            with m.State("RUN"):
                m.d.sync += cycles.eq(cycles + 1)
                with m.If(seq.done):
                    m.next = "SETTLE"
                with m.Elif(cycles == self.timeout_cycles):
                    m.d.sync += timeout.eq(1)
                    m.next = "SETTLE"
            with m.State("SETTLE"):           # the W-sum pipeline stage
                m.next = "VERDICT"
            with m.State("VERDICT"):
                m.d.sync += [err.eq(err_now), runs.eq(runs + 1)]
                with m.If(err_now == 0):
                    m.d.sync += verdict.eq(1)
                with m.Else():
                    m.d.sync += [verdict.eq(2), failed_ever.eq(1)]
                m.next = "REPORT"
            with m.State("REPORT"):
                m.d.comb += print_start.eq(1)
                m.next = "REPORT_WAIT"
            with m.State("REPORT_WAIT"):
                with m.If(~printer_busy):
                    m.d.sync += pause.eq(0)
                    m.next = "PAUSE"
            with m.State("PAUSE"):
                m.d.sync += pause.eq(pause + 1)
                with m.If((pause == self.pause_cycles) | btn_rise):
                    m.d.sync += rst_cnt.eq(0)
                    m.next = "RESET"
        m.d.comb += [
            self.running.eq(fsm.ongoing("RUN") | fsm.ongoing("START") | fsm.ongoing("RESET")),
            self.passed.eq((verdict == 1) & ~failed_ever),
            self.failed.eq(failed_ever),
            self.runs.eq(runs), self.err.eq(err),
        ]
        hb = Signal(range(max(2, self.clk_freq // 4)))
        m.d.sync += hb.eq(Mux(hb == self.clk_freq // 4 - 1, 0, hb + 1))
        with m.If(hb == 0):
            m.d.sync += self.heartbeat.eq(~self.heartbeat)

        # ---- UART line ----------------------------------------------------------------------
        if self.with_uart:
            fields = {"verdict": verdict, "runs": runs, "err": err,
                      "pop": sigs["pop"], "npop": sigs["npop"],
                      "w": wsum.total, "wn": wsum.count, "st": seq.stats_sig,
                      "cyc": cycles, "op": seq.fail_op}
            for i, d in enumerate(seq.display):
                fields[f"d{i}"] = d
            template = line_template(self.line)
            divisor = max(2, round(self.clk_freq / self.baud))
            m.submodules.report = pr = LinePrinter(template, fields, divisor)
            m.d.comb += [pr.start.eq(print_start), printer_busy.eq(pr.busy),
                         self.tx.eq(pr.tx)]
        else:
            m.d.comb += [printer_busy.eq(0), self.tx.eq(1)]
        return m


def expected_line(program, verdict="PASS", runs=1, line="full"):
    """The UART line ``line`` (:data:`LINES`) a passing run prints (for the docs and the
    report); the cycle count, known only on the board, is dots."""
    line_template(line)
    head = f"hotline run {runs:04X} {verdict} err=00 "
    tail = "cycles=........ op=000"
    if line == "short":
        return head + tail
    # the displayed statistics as the hardware holds them (stats_bits wide)
    st = {k: program.cfg.wrap_stat(32, v) for k, v in program.stats.items()}
    return (f"{head}pop={program.exp_pop:08X} "
            f"npop={program.exp_npop:08X} w={program.exp_wsum:08X}/"
            f"{program.exp_wcount:04X} st={program.exp_stats:08X} "
            f"lookups={st['lookups'] & 0xFFFF:04X} hits={st['hits'] & 0xFFFF:04X} "
            f"staged={st['staged_rows'] & 0xFFFF:04X} "
            f"gathered={st['rows_gathered'] & 0xFFFF:04X} {tail}")


class BoardTop(Elaboratable):
    """:class:`SelfCheck` on a board (``spec``: a :class:`fpga.boards.BoardSpec`)."""

    def __init__(self, spec, cfg, program, **kw):
        self.spec, self.cfg, self.program, self.kw = spec, cfg, program, kw

    def elaborate(self, platform):
        m = Module()
        spec = self.spec
        clk_freq = platform.default_clk_frequency if platform is not None else 12e6
        m.submodules.check = chk = SelfCheck(self.cfg, self.program, clk_freq, **self.kw)
        roles = {"heartbeat": chk.heartbeat, "running": chk.running, "pass": chk.passed,
                 "fail": chk.failed,
                 # pass when passed, blinking with the heartbeat while running
                 "pass_hb": chk.passed | (chk.running & chk.heartbeat)}
        for i in range(4):
            roles[f"run{i}"] = chk.runs[i]
        if platform is None:
            return m
        # Pins through Amaranth 0.5's I/O buffer components (`dir="-"`: the raw port, its
        # inversion included; the older `platform.request` buffers are deprecated).
        for idx, role in enumerate(spec.leds):
            if role:
                led = io.Buffer("o", platform.request("led", idx, dir="-"))
                m.submodules[f"led{idx}"] = led
                m.d.comb += led.o.eq(roles[role])
        uart = platform.request(spec.uart, 0, dir="-")
        m.submodules.uart_tx = tx = io.Buffer("o", uart.tx)
        m.d.comb += tx.o.eq(chk.tx)
        if spec.button:
            name, num = spec.button
            m.submodules.button = btn = io.Buffer("i", platform.request(name, num, dir="-"))
            m.d.comb += chk.button.eq(btn.i)
        return m
