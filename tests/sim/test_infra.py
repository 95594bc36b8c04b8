"""Self-test of the simulation infrastructure: export naming, the cocotb runner on both
simulators, its failure reporting and build cache, the stream bus models and the lint."""

import re

import pytest
from amaranth.hdl import Module, signed
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from hotline_hw.config import preset
from hotline_hw.gateware import export
from sim import runner
from sim.lint import Waiver, assert_lint_clean, lint
from sim.runner import SimulationFailed, run_cocotb
from sim.selftest_dut import AddOne

CFG = preset("tiny")


def top_ports(verilog, top):
    m = re.search(rf"^module {top}\(([^)]*)\);", verilog, re.M)
    assert m, f"no module {top} in the Verilog"
    return {p.strip() for p in m.group(1).split(",")}


# --- export ----------------------------------------------------------------------------

def test_export_ports_have_single_underscores_and_clk_rst():
    text, pmap = export.export(AddOne(CFG), "selftest")
    ports = top_ports(text, "selftest")
    assert not [p for p in ports if "__" in p]
    assert ports == {"clk", "rst"} | set(pmap.names)
    assert ports == {"clk", "rst", "i_tag", "i_value", "i_lanes", "i_valid", "i_ready",
                     "o_tag", "o_value", "o_lanes", "o_valid", "o_ready",
                     "ev_payload", "ev_valid"}     # ev is always_ready: no ev_ready
    assert re.search(r"^\s*input rst;", text, re.M) and re.search(r"^\s*input clk;", text, re.M)
    o = pmap.stream("o")
    assert (o.direction, o.valid, o.ready) == ("out", "o_valid", "o_ready")
    assert o.payload_ports == (("o_tag", 0, 4), ("o_value", 4, 8), ("o_lanes", 12, 4))
    assert pmap.stream("ev").ready is None and pmap.stream("i").direction == "in"
    assert export.PortMap.from_json(pmap.to_json()) == pmap


class _Axi(wiring.Component):
    s_axis_lookup: In(wiring.Signature({"tdata": Out(16), "tvalid": Out(1), "tready": In(1)}))
    irq: Out(1).array(2)
    res: Out(stream.Signature(8))

    def elaborate(self, platform):
        m = Module()
        m.d.comb += self.s_axis_lookup.tready.eq(self.res.ready)
        m.d.sync += [self.res.payload.eq(self.s_axis_lookup.tdata[:8]),
                     self.res.valid.eq(self.s_axis_lookup.tvalid),
                     self.irq[0].eq(self.s_axis_lookup.tdata[8]),
                     self.irq[1].eq(self.s_axis_lookup.tdata[9])]
        return m


def test_export_naming_rule_nested_arrays_and_plain_payload():
    text, pmap = export.export(_Axi(), "axi_top")
    assert top_ports(text, "axi_top") == {
        "clk", "rst", "s_axis_lookup_tdata", "s_axis_lookup_tvalid", "s_axis_lookup_tready",
        "irq_0", "irq_1", "res_payload", "res_valid", "res_ready"}
    assert pmap.port("s_axis_lookup_tready").direction == "output"
    assert pmap.stream("res").payload_ports == (("res_payload", 0, 8),)


def _component(members):
    class C(wiring.Component):
        def __init__(self):
            super().__init__(members)

        def elaborate(self, platform):
            return Module()
    return C()


@pytest.mark.parametrize("members, match", [
    ({"a": Out(stream.Signature(data.StructLayout({"valid": 1, "x": 3})))},
     r"'a\.payload\.valid' and 'a\.valid' both give the port name 'a_valid'"),
    ({"a_": Out(1)}, r"'a_'.*naming rule"),
    ({"clk": In(1)}, r"reserved for the clock"),
    ({"b": Out(wiring.Signature({"c_": Out(1)}))}, r"'b_c_'"),
])
def test_export_refuses_names_that_break_the_rule(members, match):
    with pytest.raises(export.ExportError, match=match):
        export.port_map(_component(members), "top")


def test_export_is_reproducible_whatever_yosys_says(monkeypatch):
    first = export.flatten(AddOne(CFG), "selftest")
    # TOOLCHAIN gotcha 8: an environment pointing Amaranth at another Yosys changes nothing.
    monkeypatch.setenv("AMARANTH_USE_YOSYS", "system")
    monkeypatch.setenv("YOSYS", "/nonexistent/yosys")
    assert export.flatten(AddOne(CFG), "selftest") == first


def test_layout_pack_unpack_roundtrip():
    lay = export.LayoutInfo.from_shape(data.StructLayout({
        "a": 3, "s": data.StructLayout({"x": 2, "y": data.ArrayLayout(4, 3)}), "n": signed(5)}))
    lay = export.LayoutInfo.from_dict(lay.to_dict())
    v = {"a": 5, "s": {"x": 2, "y": [1, 15, 7]}, "n": -3}
    raw = lay.pack(v)
    assert lay.unpack(raw) == v
    assert raw == 5 | (2 << 3) | (1 << 5) | (15 << 9) | (7 << 13) | ((-3 & 31) << 17)
    assert lay.pack({"a": 1}) == 1                  # missing fields are 0
    with pytest.raises(KeyError, match="unknown field"):
        lay.pack({"b": 1})


# --- runner on both simulators ------------------------------------------------------------

def test_selftest_streams_with_idle_and_backpressure_then_no_rebuild(sim):
    r = run_cocotb("selftest", CFG, sim=sim, test_module="sim.tb_selftest")
    assert set(r.tests.values()) == {"passed"}
    assert {"stream_roundtrip/idle=0.5/backpressure=0.6", "send_waits_for_acceptance",
            "config_matches_ports"} <= set(r.tests)
    assert r.build.dir == r.build.variant.dir / sim
    assert r.build.variant.dir.name.startswith("tiny-")
    assert (r.build.variant.dir / "config.json").read_text() == CFG.to_json()
    # The build-cache stamp: the same (unit, variant, sim) again does not rebuild.
    art = runner._artifact(sim, r.build.dir, "selftest")
    mtime = art.stat().st_mtime_ns
    again = run_cocotb("selftest", CFG, sim=sim, test_module="sim.tb_selftest",
                       testcase="config_matches_ports")
    assert not again.build.rebuilt and art.stat().st_mtime_ns == mtime
    assert again.tests == {"config_matches_ports": "passed"}


def test_cocotbext_axi_stream_on_exported_names():
    r = run_cocotb("selftest_axis", CFG, sim="icarus", test_module="sim.tb_selftest_axis")
    assert r.tests == {"axis_frames_with_idle_and_backpressure": "passed"}


def test_failing_cocotb_test_fails_the_pytest_test(sim):
    with pytest.raises(SimulationFailed) as e:
        run_cocotb("selftest", CFG, sim=sim, test_module="sim.tb_selftest_red")
    msg = str(e.value)
    assert "1 of 3 cocotb test(s) failed: fails_on_purpose" in msg
    assert "deliberately red" in msg and "passes_on_purpose:" not in msg
    assert "HOTLINE_SEED=" in msg


def test_stream_checker_catches_a_protocol_bug():
    with pytest.raises(SimulationFailed, match=r"o: valid dropped at cycle \d+ before beat"):
        run_cocotb("selftest_bug", CFG, sim="icarus", test_module="sim.tb_selftest",
                   testcase="stream_roundtrip/idle=0.0/backpressure=0.6")


def test_stale_stamp_rebuilds_in_a_fresh_build_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("HOTLINE_BUILD_DIR", str(tmp_path))
    kw = dict(sim="icarus", test_module="sim.tb_selftest", testcase="config_matches_ports")
    assert run_cocotb("selftest", CFG, **kw).build.rebuilt
    r = run_cocotb("selftest", CFG, **kw)
    assert not r.build.rebuilt and r.build.dir.is_relative_to(tmp_path)
    (r.build.dir / "build.stamp").write_text("stale")
    assert run_cocotb("selftest", CFG, **kw).build.rebuilt


def test_missing_testcase_or_module_fails():
    with pytest.raises(SimulationFailed, match="requested testcase.*did not run: no_such_test"):
        run_cocotb("selftest", CFG, sim="icarus", test_module="sim.tb_selftest",
                   testcase=["config_matches_ports", "no_such_test"])
    with pytest.raises(SimulationFailed):
        run_cocotb("selftest", CFG, sim="icarus", test_module="sim.tb_no_such_module")


def test_hung_simulation_times_out():
    with pytest.raises(SimulationFailed, match="timed out after 3 s"):
        run_cocotb("selftest", CFG, sim="icarus", test_module="sim.tb_selftest_red",
                   testcase="hangs_on_purpose", extra_env={"SELFTEST_HANG": "1"}, timeout_s=3)


def test_old_or_missing_verilator_skips(monkeypatch):
    monkeypatch.setattr(runner, "_toolchains", {})
    monkeypatch.setattr(runner, "verilator_version", lambda: (5, 6))
    with pytest.raises(pytest.skip.Exception, match=r"5\.006 found, cocotb 2 needs >= 5\.036"):
        run_cocotb("selftest", CFG, sim="verilator", test_module="sim.tb_selftest")
    monkeypatch.setattr(runner, "verilator_version", lambda: None)
    with pytest.raises(pytest.skip.Exception, match="verilator: not found"):
        run_cocotb("selftest", CFG, sim="verilator", test_module="sim.tb_selftest")


def test_waves_on_request(tmp_path, monkeypatch):
    monkeypatch.setenv("HOTLINE_BUILD_DIR", str(tmp_path))
    r = run_cocotb("selftest", CFG, sim="icarus", test_module="sim.tb_selftest",
                   testcase="config_matches_ports", waves=True)
    assert r.build.dir.name == "icarus-waves"
    assert (r.run_dir / "selftest.fst").stat().st_size > 0


def test_unknown_unit_and_sim():
    with pytest.raises(KeyError, match="unknown unit 'nope'"):
        run_cocotb("nope", CFG, sim="icarus", test_module="sim.tb_selftest")
    with pytest.raises(ValueError, match="must be one of icarus, verilator"):
        run_cocotb("selftest", CFG, sim="xcelium", test_module="sim.tb_selftest")


def test_register_unit_is_lazy_and_checked():
    runner.register_unit("broken_unit", "hotline_hw.gateware.no_such_module:X", replace=True)
    try:
        with pytest.raises(ImportError, match="unit 'broken_unit': cannot load"):
            runner.prepare("broken_unit", CFG)
    finally:
        del runner.UNITS["broken_unit"]
    with pytest.raises(ValueError, match="single '_'"):
        runner.register_unit("Bad__name", lambda cfg: None)
    with pytest.raises(ValueError, match="already registered"):
        runner.register_unit("selftest", lambda cfg: None)


# --- lint ---------------------------------------------------------------------------------

def test_lint_selftest_is_clean():
    assert_lint_clean(runner.prepare("selftest", CFG).verilog)


class _Unused(wiring.Component):
    a: In(8)
    b: In(8)
    y: Out(8)

    def elaborate(self, platform):
        m = Module()
        m.d.sync += self.y.eq(self.a)
        return m


def test_lint_reports_an_unused_input_and_honours_a_file_waiver(tmp_path):
    vpath, _ = export.write(_Unused(), "unused", tmp_path)
    found = lint(vpath)
    assert [(w.code, "'b'" in w.message) for w in found] == [("UNUSEDSIGNAL", True)]
    assert lint(vpath, waivers=[Waiver("UNUSEDSIGNAL", r"'b'", reason="test")]) == []
    with pytest.raises(ValueError, match="give a reason"):
        Waiver("UNUSEDSIGNAL")


def test_lint_instance_from_the_module_when_verilator_gives_none(tmp_path):
    """A warning without Verilator's ``In instance`` note takes the module its line is in
    (Amaranth's module names are instance paths); the top's own warnings keep none, and an
    instance-scoped waiver then applies."""
    from sim.lint import LintWarning, _with_instances
    v = tmp_path / "top.v"
    v.write_text("module \\top.dut.sub (a);\n  input a;\nendmodule\n"
                 "module top (b);\n  input b;\nendmodule\n")
    found = [LintWarning("UNUSEDSIGNAL", str(v), 2, "Signal is not used: 'a'"),
             LintWarning("UNUSEDSIGNAL", str(v), 5, "Signal is not used: 'b'"),
             LintWarning("UNUSEDSIGNAL", str(v), 2, "x", instance="given")]
    got = _with_instances(found, v.resolve(), "top")
    assert [w.instance for w in got] == ["top.dut.sub", None, "given"]
    w = Waiver("UNUSEDSIGNAL", "'a'", instance=r"top\.dut\.sub", reason="test")
    assert w.matches(got[0]) and not w.matches(found[0])
