"""The ``hotline-hw`` command.

Every mistake in what the user typed (an unknown flag or preset, a bad configuration value, a
trace file that is truncated or of the wrong format, an unwritable output) ends with one line
``hotline-hw: error: ...`` on standard error and exit status 2, never a traceback.
"""

import argparse
import json
import sys
import time
from pathlib import Path

from .config import DEFAULT_PRESET, PRESETS, ConfigError, HotlineConfig, preset

__all__ = ["main"]


class UsageError(Exception):
    """A mistake in the user's input: reported in one line, exit status 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        raise UsageError(message)


# --- configuration flags -------------------------------------------------------------------

def add_config_args(p):
    """``--preset``, ``--config FILE`` and one ``--flag`` per :class:`HotlineConfig` field."""
    g = p.add_argument_group("accelerator configuration (every HotlineConfig field is a flag)")
    g.add_argument("--preset", default=None, metavar="NAME",
                   help=f"start from a named preset ({', '.join(PRESETS)}; default {DEFAULT_PRESET})")
    g.add_argument("--config", default=None, metavar="FILE",
                   help="start from a config.json instead of a preset")
    for name, (typ, default, doc) in HotlineConfig.field_docs().items():
        t = int if typ in (int, "int") else str
        g.add_argument("--" + name.replace("_", "-"), dest="cfg_" + name, type=t, default=None,
                       metavar="N" if t is int else "S", help=f"{doc} (ulx3s: {default})".replace("%", "%%"))


def config_from_args(args):
    if args.preset and args.config:
        raise UsageError("--preset and --config: give one or the other")
    changes = {k[4:]: v for k, v in vars(args).items() if k.startswith("cfg_") and v is not None}
    base = HotlineConfig.load(args.config) if args.config else preset(args.preset or DEFAULT_PRESET)
    if (args.preset or args.config) and "name" not in changes and changes:
        changes["name"] = base.name + "-custom"
    return base.replace(**changes) if changes else base


# --- traces ----------------------------------------------------------------------------------

def add_trace_source_args(p, default_workload=None):
    g = p.add_argument_group("trace source (a file, or a synthetic workload)")
    g.add_argument("--trace", metavar="FILE", help="a .hltrace file (from `hotline-hw trace`)")
    g.add_argument("--workload", default=default_workload, metavar="NAME",
                   help="synthetic workload: kaggle, terabyte, dlrmv2, taobao, tiny")
    g.add_argument("--batches", type=int, metavar="N", help="mini-batches to generate")
    g.add_argument("--lookups", type=int, metavar="N",
                   help="about this many lookups (rounded up to whole mini-batches)")
    g.add_argument("--batch-size", type=int, metavar="N", help="samples per mini-batch")
    g.add_argument("--zipf", type=float, default=1.1, help="Zipf exponent of large tables (1.1)")
    g.add_argument("--seed", type=int, default=0, help="random seed (0)")
    g.add_argument("--bad-key-rate", type=float, default=0.0,
                   help="fraction of lookups given an invalid table id (0)")


def trace_from_args(args, progress):
    if args.trace:
        from golden import traceio
        return traceio.load_trace(args.trace)
    from golden import synth
    if not args.workload:
        raise UsageError("give --trace FILE or --workload NAME")
    if args.batches is None and args.lookups is None:
        args.lookups = 1_000_000
    return synth.generate(args.workload, batches=args.batches, lookups=args.lookups,
                          zipf=args.zipf, batch_size=args.batch_size, seed=args.seed,
                          bad_key_rate=args.bad_key_rate, progress=progress)


# --- commands ---------------------------------------------------------------------------------

def cmd_presets(args):
    """List the presets and their key figures."""
    rows = [("preset", "lanes", "tables", "key", "counters", "CAM", "staging", "AXI", "row")]
    for name, c in PRESETS.items():
        rows.append((name + (" *" if name == DEFAULT_PRESET else ""), str(c.lanes),
                     str(c.num_tables), f"{c.key_bits}b",
                     f"{c.counter_sets}x{c.counter_ways}", f"{c.cam_kind} {c.cam_entries}",
                     f"{c.staging_banks}x{c.staging_rows}", f"{c.axi_data_bits}b",
                     f"{c.row_bytes}B"))
    w = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        print("  ".join(v.ljust(w[i]) for i, v in enumerate(r)).rstrip())
    print(f"(* default; `hotline-hw config --preset NAME` shows every field)")


def cmd_config(args):
    """Show a configuration, or write it as config.json."""
    cfg = config_from_args(args)
    if args.output:
        _write(Path(args.output), cfg.to_json())
        print(f"wrote {args.output}")
    else:
        sys.stdout.write(cfg.to_json())


def cmd_trace(args):
    """Write a trace file: synthetic, or read from Criteo's TSV format."""
    from golden import criteo, traceio
    if args.info:
        info = traceio.trace_info(args.info)
        print(json.dumps(info, indent=2, default=str))
        return
    if not args.output:
        raise UsageError("-o/--output FILE is required")
    t0 = time.perf_counter()
    if args.criteo:
        tr = criteo.read_criteo_tsv(args.criteo, mode=args.criteo_mode,
                                    max_ind_range=args.max_ind_range,
                                    batch_size=args.batch_size or 1024,
                                    max_samples=args.max_samples, progress=_progress(args))
    else:
        tr = trace_from_args(args, progress=_progress(args))
    dt = time.perf_counter() - t0
    out = Path(args.output)
    if out.parent and not out.parent.exists():
        out.parent.mkdir(parents=True, exist_ok=True)
    traceio.save_trace(tr, out)
    print(f"wrote {out}: {tr.describe()} ({out.stat().st_size / 1e6:.1f} MB, made in {dt:.1f} s)")


def cmd_golden(args):
    """Run the golden model on a trace and report what Hotline would do with it."""
    from golden.analysis import analyse
    cfg = config_from_args(args)
    tr = trace_from_args(args, progress=_progress(args))
    t0 = time.perf_counter()
    a = analyse(tr, cfg, learn_batches=args.learn_batches, progress=_progress(args))
    dt = time.perf_counter() - t0
    if args.json:
        print(json.dumps(a.as_dict(), indent=2))
    else:
        print(a.format())
        print(f"(golden models ran in {dt:.1f} s, {tr.n_lookups / dt / 1e6:.2f}M lookups/s)")


def _generate(cfg, out, top="hotline"):
    """Write the accelerator's files into ``out``; return a few lines saying what was written."""
    from .gateware.export import write
    from .gateware.top import HotlineAccelerator, stream_geometry
    from .regmap import RegMapError, regmap, write_outputs
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise UsageError(f"{out}: cannot create ({e.strerror})") from None
    t0 = time.perf_counter()
    try:
        rmap = regmap(cfg)
        reg_files = write_outputs(cfg, out)
    except RegMapError as e:
        raise UsageError(f"register map: {e}") from None
    cfg.save(out / "config.json")
    vpath, ppath = write(HotlineAccelerator(cfg), top, out)
    dt = time.perf_counter() - t0
    geo = stream_geometry(cfg)
    return [
        f"{vpath} ({vpath.stat().st_size // 1000} kB, top module {top!r}, {dt:.1f} s), "
        f"{ppath.name}, config.json",
        f"register map: {len(rmap.registers)} registers, {rmap.size:#x} bytes of AXI4-Lite "
        f"space: " + ", ".join(Path(f).name for f in reg_files),
        f"streams: s_axis_lookup {geo['in_bits']} bits, m_axis_popular / m_axis_nonpopular "
        f"{geo['out_bits']} bits; m_axi {cfg.axi_data_bits} bits",
    ]


def cmd_generate(args):
    """Generate the accelerator: Verilog, config.json and the register map files."""
    cfg = config_from_args(args)
    lines = _generate(cfg, Path(args.output), args.top)
    print(f"hotline-hw generate: {cfg.name!r}: {cfg.summary()}")
    for line in lines:
        print("  " + line)


def cmd_demo(args):
    """The main job: the default accelerator's configuration and what it does to a
    synthetic Criteo Kaggle trace."""
    from golden import synth, traceio
    from golden.analysis import analyse
    cfg = config_from_args(args)
    out = Path(args.output)
    out.mkdir(parents=True, exist_ok=True)
    print(f"hotline-hw demo: accelerator preset {cfg.name!r}: {cfg.summary()}")
    cfg.save(out / "config.json")
    print(f"  wrote {out / 'config.json'}")
    lines = _generate(cfg, out / "rtl")            # what `hotline-hw generate` writes
    print("  wrote " + lines[0])
    for line in lines[1:]:
        print("  " + line)
    t0 = time.perf_counter()
    tr = synth.generate("kaggle", lookups=args.lookups, zipf=args.zipf, seed=args.seed,
                        batch_size=args.batch_size, progress=_progress(args))
    traceio.save_trace(tr, out / "kaggle.hltrace")
    print(f"  wrote {out / 'kaggle.hltrace'}: {tr.describe()} "
          f"(Zipf {args.zipf}, {time.perf_counter() - t0:.1f} s)")
    print()
    a = analyse(tr, cfg, progress=_progress(args))
    print(a.format())
    (out / "golden.json").write_text(json.dumps(a.as_dict(), indent=2) + "\n")
    print(f"\n  wrote {out / 'golden.json'}")
    if args.sim != "none":
        print()
        _demo_simulation(cfg, args, out)
    print("Next: `hotline-hw golden --help`, `hotline-hw presets`, `./run.sh test`.")


#: The demo's end-to-end run: mini-batches of LEARN and TRAIN, samples per mini-batch, and the
#: CAM slots read back after INSTALL besides the used ones. No idle cycles or backpressure,
#: so the cycle counts are the accelerator's own.
DEMO_SIM = {"HOTLINE_TB_LEARN": "4", "HOTLINE_TB_BATCHES": "4", "HOTLINE_TB_BATCH_SIZE": "128",
            "HOTLINE_TB_CAM_SLOTS": "128", "HOTLINE_TB_IDLE": "0", "HOTLINE_TB_STALL": "0",
            "HOTLINE_TB_PAUSE": "0", "HOTLINE_TB_HOLES": "0", "HOTLINE_TB_LATENCY": "50"}


def _demo_simulation(cfg, args, out):
    """Run the cocotb end-to-end test (``sim/tb_hotline.py``) on the generated Verilog of
    ``cfg`` and print what it measured."""
    root = Path(__file__).resolve().parents[1]
    if not (root / "sim" / "tb_hotline.py").exists():
        print("  end-to-end simulation skipped: the testbenches (sim/) come with a clone of "
              "the repository, not with an installed package")
        return
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    from sim.runner import SimulationFailed, SimulatorUnavailable, run_cocotb
    report = (out / "e2e.json").resolve()
    env = dict(DEMO_SIM, HOTLINE_TB_REPORT=str(report))
    n_learn, n_train, bs = (int(env[k]) for k in ("HOTLINE_TB_LEARN", "HOTLINE_TB_BATCHES",
                                                   "HOTLINE_TB_BATCH_SIZE"))
    print(f"End-to-end simulation of the generated Verilog ({args.sim}, cocotb): the driver "
          f"over AXI4-Lite runs LEARN ({n_learn} mini-batches of {bs} samples), INSTALL, "
          f"TRAIN ({n_train} mini-batches, a modelled GPU updates every row used), SCATTER, "
          f"EVICT; memory is cocotbext-axi's AXI4 RAM ({env['HOTLINE_TB_LATENCY']} cycles of "
          f"latency); everything is checked against the golden model ...", flush=True)
    t0 = time.perf_counter()
    try:
        r = run_cocotb("hotline", cfg, sim=args.sim, test_module="sim.tb_hotline",
                       testcase="hotline_flow", seed=args.seed, extra_env=env, timeout_s=3600)
    except SimulatorUnavailable as e:
        print(f"  skipped: {e}")
        return
    except SimulationFailed as e:
        raise UsageError(f"the end-to-end simulation failed: {e}") from None
    rep = json.loads(report.read_text())
    st, mbs = rep["stats"], rep["minibatches"]
    samples = st["popular_samples"] + st["nonpopular_samples"]
    print(f"  passed in {time.perf_counter() - t0:.0f} s ({rep['cycles']:,} cycles; "
          f"log {r.log})")
    print(f"  INSTALL: {rep['installed_rows']} popular rows placed; CAM read back "
          f"({rep['cam_slots_checked']} slots) and the popular region match the golden model")
    print(f"  TRAIN: {st['lookups']:,} lookups, {st['hits']:,} CAM hits "
          f"({st['hits'] / max(1, st['lookups']):.1%}); popular samples "
          f"{st['popular_samples']} of {samples} ({st['popular_samples'] / max(1, samples):.1%}; "
          f"{rep['samples_rebuilt']} samples were rebuilt from installed rows so that the "
          f"popular path works too: a 26-lookup sample is rarely popular by chance)")
    print(f"  rows gathered {st['rows_gathered']:,}, scattered {st['rows_scattered']:,}, "
          f"evicted {st['rows_evicted']:,}; overflows {st['overflows']}")
    print(f"  output beats: {rep['output_beats']['popular']} popular, "
          f"{rep['output_beats']['nonpopular']} non-popular, each equal to the golden model's")
    print(f"  host memory: {rep['memory_pages_compared']} pages equal the golden model's byte "
          f"for byte")
    print("  cycles per mini-batch, from its first input beat to its last one (in), to the "
          "last beat of both micro-batches (out) and to STATUS.gathers_done (gathered); the "
          "m_axi read channel's data beats per cycle over 'gathered' (scatter reads of the "
          "previous mini-batch included):")
    print("    batch  samples  input beats      in     out  gathered  rows gathered  "
          "R beats/cycle")
    for i, m in enumerate(mbs):
        print(f"    {i:5d}  {m['samples']:7d}  {m['input_beats']:11d}  {m['cycles_input']:6d}  "
              f"{m['cycles_output']:6d}  {m['cycles_gathered']:8d}  {m['staged_rows']:13d}  "
              f"{m['read_beats'] / m['cycles_gathered']:13.2f}")
    beats = cfg.row_bytes // (cfg.axi_data_bits // 8)
    print(f"  each gathered row is {beats} bus beats to read and, at SCATTER, {beats} more: the "
          f"mini-batch time is set by the m_axi read channel, not by the lookup stream")
    phases = ", ".join(f"{k} {v:,}" for k, v in rep["phases"].items())
    print(f"  cycles per phase: {phases}")
    print(f"  wrote {report}")


def _progress(args):
    """Progress bars only for a person watching a terminal."""
    return not args.quiet and sys.stderr.isatty()


def _write(path, text):
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    except OSError as e:
        raise UsageError(f"{path}: cannot write ({e.strerror})") from None


def build_parser():
    p = _Parser(prog="hotline-hw", description="Generator of the Hotline accelerator and its "
                "golden model (arXiv 2204.05436).")
    from . import __version__
    p.add_argument("--version", action="version", version=f"hotline-hw {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    s = sub.add_parser("presets", help=cmd_presets.__doc__.splitlines()[0])
    s.set_defaults(func=cmd_presets)

    s = sub.add_parser("config", help=cmd_config.__doc__.splitlines()[0])
    add_config_args(s)
    s.add_argument("-o", "--output", metavar="FILE", help="write config.json here")
    s.set_defaults(func=cmd_config)

    s = sub.add_parser("trace", help=cmd_trace.__doc__.splitlines()[0])
    add_trace_source_args(s, default_workload="kaggle")
    g = s.add_argument_group("Criteo TSV input")
    g.add_argument("--criteo", metavar="TSV", help="read Criteo's TSV format (.gz too)")
    g.add_argument("--criteo-mode", choices=("mod", "dict"), default="dict",
                   help="categorical to row: 'mod' = int(hex) %% --max-ind-range (DLRM's "
                        "--max-ind-range), 'dict' = dense ids by first appearance (default)")
    g.add_argument("--max-ind-range", type=int, metavar="R")
    g.add_argument("--max-samples", type=int, metavar="N")
    s.add_argument("--info", metavar="FILE", help="print a trace file's header and exit")
    s.add_argument("-o", "--output", metavar="FILE", help="the .hltrace file to write")
    s.add_argument("-q", "--quiet", action="store_true", help="no progress bars")
    s.set_defaults(func=cmd_trace)

    s = sub.add_parser("golden", help=cmd_golden.__doc__.splitlines()[0])
    add_config_args(s)
    add_trace_source_args(s)
    g = s.add_argument_group("learning")
    g.add_argument("--learn-batches", type=int, metavar="N",
                   help="mini-batches of the learning phase (default: a tenth of the trace); "
                        "the configuration's --learn-period and --learn-threshold apply")
    s.add_argument("--json", action="store_true", help="print the figures as JSON")
    s.add_argument("-q", "--quiet", action="store_true", help="no progress bars")
    s.set_defaults(func=cmd_golden)

    s = sub.add_parser("generate", help=cmd_generate.__doc__.splitlines()[0])
    add_config_args(s)
    s.add_argument("-o", "--output", required=True, metavar="DIR",
                   help="where to write the files")
    s.add_argument("--top", default="hotline", metavar="NAME",
                   help="the top module's name (default hotline)")
    s.set_defaults(func=cmd_generate)

    s = sub.add_parser("demo", help=cmd_demo.__doc__.splitlines()[0])
    add_config_args(s)
    s.add_argument("-o", "--output", default="out/demo", metavar="DIR",
                   help="where to write the files (out/demo)")
    s.add_argument("--lookups", type=int, default=2_000_000, help="trace size (2M lookups)")
    s.add_argument("--batch-size", type=int, default=256, metavar="S",
                   help="samples per mini-batch of the trace (256: the default accelerator "
                        "stages 4096 rows per mini-batch, about what 256 Kaggle samples miss; "
                        "Kaggle's FAE batch of 1024 needs the `kaggle` preset)")
    s.add_argument("--zipf", type=float, default=1.1)
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--sim", choices=("icarus", "verilator", "none"), default="icarus",
                   help="simulator of the end-to-end run (icarus: builds in a second; "
                        "verilator: runs faster, builds in minutes; none: skip it)")
    s.add_argument("-q", "--quiet", action="store_true", help="no progress bars")
    s.set_defaults(func=cmd_demo)

    # FPGA flows (the `fpga` package beside this one): `hotline-hw fpga` (board builds) and
    # `hotline-hw impl` (out-of-context implementation reports).
    from fpga import board_cli, impl_cli
    board_cli.add_command(sub, add_config_args, config_from_args, UsageError)
    impl_cli.add_command(sub, add_config_args, config_from_args, UsageError)
    return p


def main(argv=None):
    from golden.trace import TraceError

    from .tuning import keep_freed_memory
    keep_freed_memory()
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        if not getattr(args, "func", None):
            parser.print_help()
            return 2
        args.func(args)
    except (UsageError, ConfigError, TraceError) as e:
        print(f"hotline-hw: error: {e}", file=sys.stderr)
        return 2
    except OSError as e:
        print(f"hotline-hw: error: {e.filename or ''}: {e.strerror}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("hotline-hw: interrupted", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
