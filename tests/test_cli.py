"""The command line, run as a user would: a subprocess, its output and its exit status."""
import json
import subprocess
import sys

import pytest

from hotline_hw.config import PRESETS, HotlineConfig


def run(*args, cwd=None, timeout=300):
    return subprocess.run([sys.executable, "-m", "hotline_hw.cli", *args], capture_output=True,
                          text=True, cwd=cwd, timeout=timeout)


def assert_usage_error(r, *words):
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("hotline-hw: error: "), r.stderr
    assert "Traceback" not in r.stderr
    for w in words:
        assert w in lines[0], (w, lines[0])


def test_presets_lists_every_preset():
    r = run("presets")
    assert r.returncode == 0
    for name in PRESETS:
        assert name in r.stdout


def test_config_flags_and_round_trip(tmp_path):
    out = tmp_path / "config.json"
    r = run("config", "--preset", "kaggle", "--lanes", "8", "--cam-kind", "hash", "-o", str(out))
    assert r.returncode == 0, r.stderr
    cfg = HotlineConfig.load(out)
    assert cfg.lanes == 8 and cfg.name == "kaggle-custom" and cfg.cam_entries == PRESETS["kaggle"].cam_entries
    r = run("config", "--config", str(out))
    assert r.returncode == 0 and HotlineConfig.from_json(r.stdout) == cfg


@pytest.mark.parametrize("args,words", [
    (["config", "--preset", "nope"], ["preset='nope'", "unknown preset"]),
    (["config", "--lanes", "3"], ["lanes=3", "power of two"]),
    (["config", "--cam-entries", "-8"], ["cam_entries=-8"]),
    (["config", "--staging-rows", "1000"], ["staging_rows=1000", "power of two"]),
    (["config", "--lanes", "four"], ["--lanes", "invalid int value"]),
    (["config", "--frobnicate", "1"], ["unrecognized arguments"]),
    (["config", "--preset", "tiny", "--config", "x.json"], ["--preset and --config"]),
    (["config", "--config", "/nonexistent/config.json"], ["cannot read"]),
    (["golden", "--preset", "tiny", "--trace", "/nonexistent.hltrace"], ["/nonexistent.hltrace"]),
    (["golden", "--workload", "nope", "--batches", "2"], ["nope"]),
    (["golden", "--preset", "tiny", "--workload", "kaggle", "--batches", "1"], ["row_bits=10"]),
    (["nosuchcommand"], ["invalid choice"]),
])
def test_bad_input_is_one_line_and_status_2(args, words):
    assert_usage_error(run(*args), *words)


@pytest.fixture(scope="module")
def tiny_trace(tmp_path_factory):
    path = tmp_path_factory.mktemp("trace") / "tiny.hltrace"
    r = run("trace", "--workload", "tiny", "--batches", "30", "--seed", "3", "-q", "-o", str(path))
    assert r.returncode == 0, r.stderr
    assert "wrote" in r.stdout
    return path


def test_trace_info(tiny_trace):
    r = run("trace", "--info", str(tiny_trace))
    assert r.returncode == 0, r.stderr
    assert "tiny" in r.stdout


def test_golden_report_on_a_trace_file(tiny_trace):
    r = run("golden", "--preset", "tiny", "--trace", str(tiny_trace), "-q")
    assert r.returncode == 0, r.stderr
    for words in ("lookup coverage", "popular-sample fraction", "unique non-popular rows",
                  "coverage ratio hardware / exact top-N", "Modelled, not measured", "speedup",
                  "link bytes"):
        assert words in r.stdout
    r = run("golden", "--preset", "tiny", "--trace", str(tiny_trace), "-q", "--json")
    d = json.loads(r.stdout)
    assert 0 < d["exact"]["lookup_coverage"] <= 1 and d["coverage_ratio"] > 0
    assert d["modelled"]["speedup"] > 0


@pytest.mark.parametrize("damage", ["truncate", "text", "criteo", "empty"])
def test_bad_trace_files(tiny_trace, tmp_path, damage):
    bad = tmp_path / "bad.hltrace"
    data = tiny_trace.read_bytes()
    if damage == "truncate":
        bad.write_bytes(data[:len(data) // 2])
    elif damage == "text":
        bad.write_text("hello\n")
    elif damage == "criteo":
        bad.write_text("0\t1\t2\t" + "\t" * 10 + "\t".join(["68fd1e64"] * 26) + "\n")
    else:
        bad.write_bytes(b"")
    assert_usage_error(run("golden", "--preset", "tiny", "--trace", str(bad), "-q"), str(bad))


def test_demo_runs_small(tmp_path):
    r = run("demo", "--lookups", "200000", "-q", "--sim", "none", "-o", str(tmp_path / "demo"))
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "demo" / "config.json").exists()
    assert (tmp_path / "demo" / "golden.json").exists()
    verilog = (tmp_path / "demo" / "rtl" / "hotline.v").read_text()
    assert "module hotline(" in verilog and "__" not in verilog.split(");")[0]
    assert (tmp_path / "demo" / "rtl" / "regmap.json").exists()
    assert "register map:" in r.stdout
    assert "speedup" in r.stdout


@pytest.mark.slow
def test_demo_with_simulation(tmp_path):
    """The main job as the README runs it (a few minutes: the end-to-end run on Icarus)."""
    r = run("demo", "--lookups", "200000", "-q", "-o", str(tmp_path / "demo"), timeout=1800)
    assert r.returncode == 0, r.stderr
    assert "End-to-end simulation" in r.stdout and "passed in" in r.stdout
    rep = json.loads((tmp_path / "demo" / "e2e.json").read_text())
    assert rep["stats"]["rows_gathered"] == rep["stats"]["rows_scattered"] > 0
    assert len(rep["minibatches"]) == 4
    assert "cycles per mini-batch" in r.stdout


@pytest.mark.parametrize("command", ["presets", "config", "trace", "golden", "demo", "generate",
                                     "fpga", "impl"])
def test_every_command_has_help(command):
    """``--help`` of every command prints usage (a ``%`` in a help string once crashed it)."""
    r = run(command, "--help")
    assert r.returncode == 0, r.stderr
    assert "usage:" in r.stdout
