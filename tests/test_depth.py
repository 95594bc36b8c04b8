"""Logic depth of a synthesised netlist (fpga/depth.py) and the per-unit bench
(bench/unit_area.py).

Hand-built netlists check the level arithmetic and path tracing exactly; one real synthesis
(the tiny register block, ~10-30 s) checks the bench end to end."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from fpga import depth

ROOT = Path(__file__).resolve().parent.parent


class _Builder:
    """A Yosys-JSON-shaped netlist built cell by cell."""

    def __init__(self):
        self.cells, self.netnames, self.next_bit = {}, {}, 10
        self.ports = {"clk": {"direction": "input", "bits": [2]}}

    def bit(self, name=None):
        b = self.next_bit
        self.next_bit += 1
        if name:
            self.netnames[name] = {"hide_name": 0, "bits": [b]}
        return b

    def cell(self, name, ctype, ins, outs, params=None):
        conns = {**{p: [b] for p, b in ins.items()}, **{p: [b] for p, b in outs.items()}}
        dirs = {**{p: "input" for p in ins}, **{p: "output" for p in outs}}
        self.cells[name] = {"type": ctype, "parameters": params or {},
                            "port_directions": dirs, "connections": conns}

    def ff(self, name, d):
        q = self.bit(name)
        self.cell(f"{name}_ff", "TRELLIS_FF", {"CLK": 2, "DI": d}, {"Q": q})
        return q

    def lut(self, name, *ins):
        z = self.bit(name)
        ports = dict(zip("ABCD", ins))
        self.cell(f"{name}_lut", "LUT4", ports, {"Z": z})
        return z

    def json(self):
        return {"modules": {"t": {"attributes": {"top": "1"}, "ports": self.ports,
                                  "cells": self.cells, "netnames": self.netnames}}}


def _chain(n):
    """r_a -> n LUTs (named l0..) -> r_b, and a short side path r_a -> 1 LUT -> r_c."""
    b = _Builder()
    loop = b.bit()                            # r_a's D (tied off: a constant-free start)
    ra = b.ff("r_a", loop)
    x = ra
    for i in range(n):
        x = b.lut(f"l{i}", x)
    b.ff("r_b", x)
    b.ff("r_c", b.lut("side", ra))
    return b


def test_lut_chain_levels_and_path():
    paths = depth.deepest(_chain(5).json(), n=5)
    assert paths[0]["end"] == "r_b" and paths[0]["start"] == "r_a"
    assert paths[0]["levels"] == 5.0 and paths[0]["lut_levels"] == 5
    assert paths[0]["through"] == [f"l{i}" for i in range(5)]
    assert paths[1]["end"] == "r_c" and paths[1]["levels"] == 1.0
    assert len(paths) == 2                    # r_a's input is undriven: depth 0, not listed


def test_fanout_adds_levels():
    b = _Builder()
    ra = b.ff("r_a", b.bit())
    hub = b.lut("hub", ra)
    for i in range(64):                       # 64 loads: 0.25 * log2(64 / 16) = 0.5
        b.ff(f"r{i}", b.lut(f"x{i}", hub))
    p = depth.deepest(b.json(), n=1)[0]
    assert p["levels"] == pytest.approx(2.5)


def test_bram_and_carry_and_mux_delays():
    b = _Builder()
    ra = b.ff("r_a", b.bit())
    do = b.bit("ram_do")
    b.cell("ram", "DP16KD", {"CLKA": 2, "ADA0": ra}, {"DOA0": do})
    # carry chain of 3 CCU2C: first one's A0 from the RAM, carry through two more
    c0, c1, c2 = b.bit(), b.bit(), b.bit()
    b.cell("cc0", "CCU2C", {"A0": do}, {"COUT": c0})
    b.cell("cc1", "CCU2C", {"CIN": c0}, {"COUT": c1})
    b.cell("cc2", "CCU2C", {"CIN": c1}, {"S0": c2})
    b.ff("r_sum", c2)
    # a PFUMX fed by two LUTs and a routed select
    la, lb = b.lut("la", ra), b.lut("lb", ra)
    m = b.bit("mux_out")
    b.cell("mx", "PFUMX", {"ALUT": la, "BLUT": lb, "C0": ra}, {"Z": m})
    b.ff("r_mux", m)
    got = {p["end"]: p["levels"] for p in depth.deepest(b.json(), n=10)}
    assert got["r_sum"] == pytest.approx(depth.BRAM_CLK_TO_OUT + 1 + depth.CARRY
                                         + depth.CARRY_SUM)
    assert got["r_mux"] == pytest.approx(1 + depth.MUX_LOCAL)
    # the RAM address is an endpoint too (r_a straight into it: depth 0, not listed)
    assert all(not e.startswith("ram") for e in got)


def test_combinational_loop_does_not_hang():
    b = _Builder()
    x, y = b.bit("x"), b.bit("y")
    b.cell("lx", "LUT4", {"A": y}, {"Z": x})
    b.cell("ly", "LUT4", {"A": x}, {"Z": y})
    b.ff("r", x)
    assert depth.deepest(b.json(), n=3)[0]["end"] == "r"


def test_distinct_start_groups_by_source():
    b = _chain(3)
    ends = depth.deepest(b.json(), n=10, distinct="start")
    assert [p["start"] for p in ends] == ["r_a"]


def test_cli_missing_file_exits_2(tmp_path):
    r = subprocess.run([sys.executable, "-m", "fpga.depth", str(tmp_path / "none.json")],
                       capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 2 and "none.json" in r.stderr


def test_cli_prints_paths(tmp_path):
    f = tmp_path / "n.json"
    f.write_text(json.dumps(_chain(4).json()))
    r = subprocess.run([sys.executable, "-m", "fpga.depth", str(f), "-n", "1", "--histogram"],
                       capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    assert "4.00 levels (4 LUT)  r_a -> r_b" in r.stdout
    assert "via l0 > l1 > l2 > l3" in r.stdout


@pytest.mark.parametrize("args, word", [(["--depth", "-1"], "--depth"),
                                        (["--preset", "nosuch"], "--preset"),
                                        (["--noflatten", "--depth", "3"], "--depth"),
                                        (["--set", "lanes=3"], "lanes"),
                                        (["--set", "no_such=1"], "no_such"),
                                        (["--set", "lanes"], "FIELD=VALUE")])
def test_unit_area_bad_flags_exit_2(args, word):
    r = subprocess.run([sys.executable, "bench/unit_area.py", *args], capture_output=True,
                       text=True, cwd=ROOT)
    assert r.returncode == 2 and word in r.stderr and r.stderr.count("\n") == 1


def test_unit_area_registers_tiny(tmp_path):
    """One real synthesis: the tiny register block, with its deepest paths."""
    r = subprocess.run([sys.executable, "bench/unit_area.py", "--preset", "tiny",
                        "--unit", "registers", "--depth", "3", "--json", "-o", str(tmp_path)],
                       capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    res = json.loads(r.stdout)["units"]["registers"]
    assert res["total"]["LUT4"] > 50 and res["total"]["FF"] > 50
    assert len(res["paths"]) == 3
    assert res["paths"][0]["levels"] >= res["paths"][1]["levels"] >= res["paths"][2]["levels"] > 0


def test_unit_area_reads_yosys_023_hierarchical_stat(tmp_path):
    """Yosys 0.23 appends the hierarchy as text to a hierarchical `stat -json`."""
    sys.path.insert(0, str(ROOT / "bench"))
    import unit_area
    f = tmp_path / "stat.json"
    f.write_text('{\n   "creator": "Yosys 0.23",\n   "modules": {\n      "\\\\a": {\n'
                 '         "num_cells_by_type": {"LUT4": 3}\n      }\n   },\n'
                 '       a.b       1\n   "design": {}\n}\n')
    st = unit_area._read_stat(f)
    assert st["modules"]["\\a"]["num_cells_by_type"]["LUT4"] == 3
