"""``hotline-hw fpga``: a board build of the whole accelerator with its self-checking top.

See ``fpga/build.py`` for the flow and ``docs/fpga.md`` for the boards, LEDs and UART.
"""

import sys
from pathlib import Path


def add_command(sub, add_config_args, config_from_args, usage_error):
    """Add the ``fpga`` subcommand to the `hotline-hw` parser ``sub``."""
    from .boards import BOARDS

    def cmd_fpga(args):
        from .boards import BoardError, get_board
        from .build import board_config, format_report, make_plan, run_build, write_plan
        try:
            spec = get_board(args.board)
        except BoardError as e:
            raise usage_error(str(e)) from None
        preset_given = bool(args.preset or args.config)
        if not preset_given:
            args.preset = spec.default_preset
        user = {k[4:]: v for k, v in vars(args).items() if k.startswith("cfg_") and v is not None}
        cfg = board_config(spec, config_from_args(args), user, preset_given)
        out = Path(args.output or f"build/fpga/{spec.name}-{cfg.name}")
        try:
            out.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise usage_error(f"{out}: cannot create ({e.strerror})") from None
        print(f"hotline-hw fpga: board {spec.name} ({spec.description}), "
              f"accelerator {cfg.name!r}: {cfg.summary()}", flush=True)
        try:
            plan = make_plan(spec, cfg)
        except ValueError as e:
            raise usage_error(f"board program: {e}") from None
        p = plan.program
        print(f"  board top elaborated in {plan.elaborate_s:.1f} s: program {len(p.ops)} ops, "
              f"{len(p.in_beats)} lookup beats, host RAM {p.ram_bytes // 1024} KiB, "
              f"plan digest {plan.digest[:16]}", flush=True)
        if args.dry_run:
            d = write_plan(plan, out)
            print(f"  dry run: wrote the build plan ({len(d['files'])} files) and plan.json "
                  f"to {out}")
            for s in d["steps"]:
                print(f"    {s[:110]}")
            return
        print(f"  building in {out} (YoWASP yosys + nextpnr-{spec.family}; may take minutes)",
              flush=True)
        rep = run_build(plan, out, keep_files=args.keep_files, force=args.force)
        print(format_report(rep))
        print(f"  wrote {out / 'report.json'}")
        if not rep["ok"]:
            print(f"hotline-hw: error: fpga build: {rep['error'] or 'no bitstream'}",
                  file=sys.stderr)
            sys.exit(1)

    s = sub.add_parser("fpga", help="board build of the accelerator with a self-checking top "
                       "(utilisation and Fmax report)")
    s.add_argument("--board", required=True, metavar="NAME",
                   help=f"the board: {', '.join(BOARDS)}")
    add_config_args(s)
    s.add_argument("--dry-run", action="store_true",
                   help="elaborate and write the build plan (Verilog, constraints, scripts, "
                        "plan.json) without running the tools")
    s.add_argument("--keep-files", action="store_true",
                   help="keep the intermediate files (default: bitstream, logs, report only)")
    s.add_argument("--force", action="store_true", help="rebuild even if the plan is unchanged")
    s.add_argument("-o", "--output", metavar="DIR",
                   help="output directory (default build/fpga/<board>-<config name>)")
    s.set_defaults(func=cmd_fpga)
