"""How far is a routed design from a target frequency? The registers that miss it, by unit.

    python bench/timing_wall.py [BUILD_DIR | --preset P] [--mhz 100] [--json]
    python bench/timing_wall.py BUILD_DIR --trace 'g2_chk' --trace 'gather_skid'

Reads a kept out-of-context build (``hotline-hw impl --keep``: ``routed.sdf`` is still in
the build directory) and runs the SDF timing analysis of ``fpga.ooc``: for each of a few
target frequencies, how many endpoint pins and register groups (a bus counts once) have
arrival + setup above the period; for the target ``--mhz`` the units holding them, each
with its worst path, and the start registers whose fanout reaches most of them.
``--preset P`` takes the newest kept build of ``P`` in the cache (``$HOTLINE_BUILD_DIR/impl``,
default ``build/impl``). ``--trace REGEX`` instead prints the worst path into the worst
endpoint pin matching ``REGEX``, each cell and net with its arrival time and the delay it
adds (where a path's nanoseconds go: clock-to-out, logic, routing).

Why: nextpnr reports the one worst path, and the worst-paths list in ``result.json`` the
few worst distinct ones; when hundreds of registers sit just behind them (the ``ulx3s``
route at 62.7 MHz had 507 register groups, 11,452 endpoint pins, above 10 ns), cutting the
worst path moves Fmax by nothing, and this count is what a frequency target has to bring
to zero.
"""

import argparse
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from fpga import ooc  # noqa: E402

TARGETS_MHZ = (60, 70, 80, 90, 100)


def newest_kept_build(preset, cache=None):
    """The newest build directory of ``preset`` that still has its ``routed.sdf``."""
    cache = Path(cache or Path(os.environ.get("HOTLINE_BUILD_DIR", "build")) / "impl")
    found = []
    for res in cache.glob("*/result.json"):
        try:
            r = json.loads(res.read_text())
        except (OSError, ValueError):
            continue
        if r.get("config") == preset and (res.parent / "routed.sdf").exists():
            found.append((res.stat().st_mtime, res.parent))
    if not found:
        raise SystemExit(f"no kept build of preset {preset!r} under {cache} "
                         f"(run: hotline-hw impl --preset {preset} --keep)")
    return max(found)[1]


def wall(build_dir, mhz, targets=TARGETS_MHZ):
    d = Path(build_dir)
    text = (d / "routed.sdf").read_text()
    sta = ooc._Sta(text)
    res = json.loads((d / "result.json").read_text()) if (d / "result.json").exists() else {}
    out = {"build_dir": str(d), "config": res.get("config"), "fmax_mhz": res.get("fmax_mhz"),
           "worst_ns": round(sta.ends[0][0], 3) if sta.ends else 0.0, "targets": []}
    for t in sorted(set(targets) | {mhz}):
        w = ooc.sdf_slow_endpoints(text, 1000.0 / t, sta=sta, top=0)
        out["targets"].append({"mhz": t, "endpoints": w["endpoints"], "groups": w["groups"]})
    out["at"] = ooc.sdf_slow_endpoints(text, 1000.0 / mhz, sta=sta, top=1000)
    out["at"]["mhz"] = mhz
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("build_dir", nargs="?", help="a kept build directory (with routed.sdf)")
    ap.add_argument("--preset", help="the newest kept build of this preset in the cache")
    ap.add_argument("--mhz", type=float, default=100.0, help="target frequency (default 100)")
    ap.add_argument("--json", action="store_true", help="print JSON")
    ap.add_argument("--trace", action="append", default=[], metavar="REGEX",
                    help="print the worst path into the worst endpoint pin matching REGEX, "
                         "node by node with arrival times (repeatable)")
    a = ap.parse_args(argv)
    if not a.build_dir and not a.preset:
        ap.error("give a build directory or --preset")
    d = Path(a.build_dir) if a.build_dir else newest_kept_build(a.preset)
    if not (d / "routed.sdf").exists():
        print(f"timing_wall: {d} has no routed.sdf (build with --keep)", file=sys.stderr)
        return 2
    if a.trace:
        sta = ooc._Sta((d / "routed.sdf").read_text())
        for pat in a.trace:
            t = ooc.sdf_trace(None, pat, sta=sta)
            if t is None:
                print(f"no endpoint matches {pat!r}")
                continue
            print(f"{t['delay_ns']:.2f} ns into {t['end'].replace('dut.dut.', '')}")
            for n in t["nodes"]:
                print(f"  {n['arrival_ns']:6.2f}  +{n['step_ns']:5.2f}  {n['type']:<13} "
                      f"{n['node'].replace('dut.dut.', '')[:110]}")
        return 0
    w = wall(d, a.mhz)
    if a.json:
        print(json.dumps(w, indent=2))
        return 0
    print(f"{w['config']}  {d.name[:12]}  Fmax {w['fmax_mhz']:.1f} MHz  worst "
          f"{w['worst_ns']:.2f} ns")
    print(f"{'target':>8} {'period':>8} {'register groups':>16} {'endpoint pins':>14}")
    for t in w["targets"]:
        print(f"{t['mhz']:>5.0f} MHz {1000 / t['mhz']:>6.2f} ns {t['groups']:>16,} "
              f"{t['endpoints']:>14,}")
    at = w["at"]
    print(f"\nat {at['mhz']:.0f} MHz ({at['period_ns']} ns): groups per ns of delay "
          + ", ".join(f"{k}-{int(k) + 1} ns: {v}" for k, v in at["histogram"].items()))
    print(f"{'unit':<40} {'groups':>6} {'pins':>6} {'worst':>7}  worst path")
    for e in at["by_unit"][:25]:
        print(f"{e['unit']:<40} {e['groups']:>6} {e['endpoints']:>6} {e['worst_ns']:>6.2f}  "
              f"{e['worst_start'].replace('dut.dut.', '')} -> "
              f"{e['worst_end'].replace('dut.dut.', '')}")
    if len(at["by_unit"]) > 25:
        rest = at["by_unit"][25:]
        print(f"... {len(rest)} more units, {sum(e['groups'] for e in rest)} groups")
    pins = max(1, at["endpoints"])
    print(f"\nthe {at['endpoints']:,} slow endpoint pins start (worst path) at {at['starts']} "
          f"register groups; the first {min(15, len(at['by_start']))}:")
    print(f"{'start register':<48} {'pins':>6} {'share':>6} {'cum.':>6} {'groups':>6} "
          f"{'worst':>6}")
    cum = 0
    for e in at["by_start"][:15]:
        cum += e["endpoints"]
        print(f"{e['start'].replace('dut.dut.', ''):<48} {e['endpoints']:>6} "
              f"{e['endpoints'] / pins:>6.1%} {cum / pins:>6.1%} {e['groups']:>6} "
              f"{e['worst_ns']:>6.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
