"""Fmax over placement seeds and nextpnr options: one design, several routes.

    python bench/pnr_sweep.py [--preset ulx3s] [--lanes N] [--seeds 1,2,3]
                              [--variant NAME=ARGS ...] [--perturb 0,1,2] [-j 2]
                              [-o build/impl] [--json F] [--keep]

Routes the out-of-context core (``fpga.ooc.implement``, the flow of ``hotline-hw impl``)
once per seed and per *variant* (a named set of extra nextpnr-ecp5 options, ``NAME=ARGS``
with ARGS split on spaces; ``base=`` is the flow's own options, which set the placer's
timing weight to 30, ``fpga.ooc.TIMING_WEIGHT_ARGS``; ``tw10='--placer-heap-timingweight
10'`` is nextpnr's default weight) and prints, per variant, the
Fmax of every seed, their median and best, and the worst path of the best route. A route
that fails (a tool's error, e.g. a Yosys assertion on one netlist) is shown as ``fail``
with its log's last lines; the others still run, and the exit status is then 1.
``--perturb 0,1,2`` also routes each seed on *perturbed netlists* of the same design
(``fpga.ooc.yosys_script``'s ``perturb``: private cell and wire names scrambled before
technology mapping, seed N; 0 is the flow's own netlist); every (seed, perturbation) is a
sample, named ``S`` or ``S/pN`` in the table.

Why: nextpnr's placement moves a large netlist's Fmax by more than most timing cuts do
(the ``ulx3s`` preset routed at 62.8 MHz with seed 1 and 72.3 MHz with seed 2, same
netlist). A change or an option is only shown to help by the median over seeds, and the
figure a user can reach is the best of them. A seed does not sample synthesis: a change of a
few cells makes Yosys/ABC map the whole flattened design differently, and the ``ulx3s``
core's netlists of nearly the same RTL routed up to ~8 MHz apart; ranking a change needs
perturbed netlists too (docs/implementation.md, "Ranking a change over perturbed netlists"). Every route is cached (``-o``, the ``impl``
cache): rerunning prints the table at once, and adding a seed routes only that seed.

``-j N`` routes N points at a time (each nextpnr is single-threaded; a ``ulx3s`` route
needs ~2 GB). Example (the option study in docs/implementation.md)::

    python bench/pnr_sweep.py --lanes 1 --seeds 1,2,3 --variant base= \\
        --variant ripup=--tmg-ripup --variant tw10='--placer-heap-timingweight 10'
"""

import argparse
import json
import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from fpga import ooc  # noqa: E402
from hotline_hw.config import ConfigError, preset, preset_names  # noqa: E402


def parse_variant(text):
    """``NAME=ARGS`` -> ``(NAME, [args])``; ``ValueError`` naming the problem."""
    name, sep, rest = text.partition("=")
    if not sep or not name or not name.replace("-", "").replace("_", "").isalnum():
        raise ValueError(f"--variant {text!r}: expected NAME=ARGS (NAME letters, digits, -, _)")
    args = rest.split()
    try:
        ooc.check_extra_args(args)
    except ValueError as e:
        raise ValueError(f"--variant {text!r}: {e}") from None
    return name, args


def _distinct_ints(text, flag, what, example):
    """Comma-separated distinct integers >= 0 from ``text``; ``ValueError`` naming ``flag``."""
    try:
        out = [int(s) for s in text.split(",") if s.strip()]
    except ValueError:
        out = []
    if not out or any(v < 0 for v in out) or len(set(out)) != len(out):
        raise ValueError(f"{flag} {text!r}: expected {what}, e.g. {example}")
    return out


def parse_seeds(text):
    return _distinct_ints(text, "--seeds", "distinct non-negative integers", "1,2,3")


def parse_perturb(text):
    """``--perturb`` -> distinct integers >= 0 (0: the flow's netlist); ``ValueError``."""
    return _distinct_ints(text, "--perturb", "distinct integers >= 0 (0: no perturbation)",
                          "0,1,2")


def sample_key(seed, perturb):
    """A route's name in the table: the seed, with ``/pN`` for perturbation N > 0."""
    return seed if not perturb else f"{seed}/p{perturb}"


def make_config(name, lanes):
    if lanes is None:
        return preset(name)
    return preset(name, name=f"{name}-lanes{lanes}", lanes=lanes)


def _route(job):
    """One route (in a worker process): ``(variant, sample key, result dict)``."""
    name, lanes, variant, args, seed, perturb, cache, keep = job
    cfg = make_config(name, lanes)
    t0 = time.perf_counter()
    kw = {"perturb": perturb} if perturb else {}
    try:
        r = ooc.implement(cfg, cache_dir=Path(cache), progress=False, seed=seed,
                          nextpnr_extra=args, keep=keep, **kw)
        d = r.as_dict()
    except ooc.ImplError as e:
        # one failed route (e.g. a Yosys assertion on one netlist) does not end the sweep
        d = {"error": str(e).splitlines()[0], "log_tail": e.log_tail}
    d["wall_s"] = round(time.perf_counter() - t0, 1)
    return variant, sample_key(seed, perturb), d


def summarise(variants, seeds, results):
    """Rows ``{variant, args, fmax: {seed: MHz}, median, best, best_seed, worst_path}``;
    ``seeds`` are sample keys (:func:`sample_key`), ``results`` ``{(variant, key): dict}``."""
    rows = []
    for name, args in variants:
        got = {s: results[(name, s)] for s in seeds if (name, s) in results}
        fm = {s: r.get("fmax_mhz") for s, r in got.items() if r.get("fmax_mhz")}
        bad = [s for s, r in got.items() if "error" in r]
        luts = {r.get("luts") for r in got.values()} - {None}
        row = {"variant": name, "args": args, "fmax": fm, "median": None, "best": None,
               "best_seed": None, "worst_path": None,
               "luts": min(luts) if len(luts) == 1 else (sorted(luts) or None),
               "failed": bad}
        if fm:
            row["median"] = statistics.median(fm.values())
            row["best_seed"] = max(fm, key=fm.get)
            row["best"] = fm[row["best_seed"]]
            wp = got[row["best_seed"]].get("worst_paths") or []
            if wp and "delay_ns" in wp[0]:
                row["worst_path"] = f"{wp[0]['delay_ns']:.2f} ns {wp[0]['start']} -> {wp[0]['end']}"
        rows.append(row)
    return rows


def format_table(cfg_name, seeds, rows):
    head = f"{'variant':<12}" + "".join(f"{'seed ' + str(s):>10}" for s in seeds) + \
        f"{'median':>10}{'best':>10}  nextpnr options"
    out = [f"pnr_sweep: {cfg_name}, Fmax in MHz (ECP5-85F speed 6, target 100 MHz)", head]
    for r in rows:
        cells = "".join(f"{r['fmax'][s]:>10.1f}" if s in r["fmax"] else
                        f"{'fail' if s in r.get('failed', ()) else '-':>10}"
                        for s in seeds)
        med = f"{r['median']:>10.1f}" if r["median"] else f"{'-':>10}"
        best = f"{r['best']:>10.1f}" if r["best"] else f"{'-':>10}"
        out.append(f"{r['variant']:<12}{cells}{med}{best}  {' '.join(r['args']) or '(the flow options)'}")
    for r in rows:
        if r["worst_path"]:
            out.append(f"  {r['variant']} best (seed {r['best_seed']}): {r['worst_path']}")
    return "\n".join(out)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", default="ulx3s", help="preset (ulx3s)")
    ap.add_argument("--lanes", type=int, help="lanes (default: the preset's)")
    ap.add_argument("--seeds", default="1,2,3", help="placement seeds, comma-separated (1,2,3)")
    ap.add_argument("--perturb", default="0",
                    help="synthesis perturbations, comma-separated (0: the flow's netlist; "
                         "N > 0: the same design with scrambled private names, seed N); "
                         "every seed is routed on each (0)")
    ap.add_argument("--variant", action="append", metavar="NAME=ARGS",
                    help="a named set of extra nextpnr options, repeatable (default: base=)")
    ap.add_argument("-j", "--jobs", type=int, default=1, help="routes at a time (1)")
    ap.add_argument("-o", "--output", default="build/impl", help="impl cache (build/impl)")
    ap.add_argument("--json", metavar="FILE", help="also write the table as JSON to FILE")
    ap.add_argument("--keep", action="store_true",
                    help="keep each new route's netlist and routed.sdf, for bench/timing_wall.py "
                         "(a route already cached without them is not rerun)")
    a = ap.parse_args(argv)
    try:
        if a.preset not in preset_names():
            raise ValueError(f"--preset {a.preset!r}: one of {', '.join(preset_names())}")
        if a.jobs < 1:
            raise ValueError(f"--jobs {a.jobs}: must be >= 1")
        seeds = parse_seeds(a.seeds)
        perturbs = parse_perturb(a.perturb)
        variants = [parse_variant(v) for v in (a.variant or ["base="])]
        names = [n for n, _ in variants]
        if len(set(names)) != len(names):
            raise ValueError("--variant: names must be distinct")
        cfg = make_config(a.preset, a.lanes)
    except (ValueError, ConfigError) as e:
        print(f"pnr_sweep: error: {e}", file=sys.stderr)
        return 2
    jobs = [(a.preset, a.lanes, n, args, s, p, a.output, a.keep)
            for n, args in variants for p in perturbs for s in seeds]
    samples = [sample_key(s, p) for p in perturbs for s in seeds]
    results, failed = {}, []
    with ProcessPoolExecutor(max_workers=a.jobs) as ex:
        for fut in as_completed([ex.submit(_route, j) for j in jobs]):
            variant, seed, d = fut.result()
            results[(variant, seed)] = d
            how = "cached" if d.get("cached") else f"{d['wall_s']:.0f} s"
            fm = d.get("fmax_mhz")
            if "error" in d:
                failed.append((variant, seed))
                tail = "".join(f"\n    {x}" for x in d.get("log_tail", "").splitlines()[-5:])
                print(f"[pnr_sweep] {variant} seed {seed}: FAILED: {d['error']} ({how}){tail}",
                      flush=True)
                continue
            print(f"[pnr_sweep] {variant} seed {seed}: "
                  + (f"{fm:.1f} MHz" if fm else d.get("note", "no Fmax")) + f" ({how})",
                  flush=True)
    rows = summarise(variants, samples, results)
    print(format_table(cfg.name, samples, rows))
    if a.json:
        Path(a.json).write_text(json.dumps({"config": cfg.name, "seeds": seeds,
                                            "perturb": perturbs, "samples": samples,
                                            "rows": rows, "failed": failed},
                                           indent=2, default=str) + "\n")
    if failed:
        print(f"pnr_sweep: {len(failed)} route(s) failed: "
              + ", ".join(f"{v} seed {s}" for v, s in failed), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
