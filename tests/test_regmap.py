"""The register map (hotline_hw/regmap.py): SystemRDL produced from the configuration,
compiled by systemrdl-compiler, read back as a RegMap, and the files PeakRDL writes."""

import json
import re
import shutil
import subprocess
from xml.etree import ElementTree

import pytest

from hotline_hw.config import PRESETS, preset
from hotline_hw.regmap import (
    ID_MAGIC, MAP_VERSION, OUTPUT_FILES, STATISTICS, LAST_STATISTICS, RegMap, RegMapError,
    compile_rdl, compile_regmap, hw_kind, port_name, rdl_source, regmap, write_outputs,
)

REQUIRED = [
    "ID", "VERSION", "CTRL", "STATUS", "IRQ_ENABLE", "IRQ_STATUS", "ROW_STRIDE", "ROW_BYTES",
    "POPULAR_BASE_LO", "POPULAR_BASE_HI", "LEARN_PERIOD", "LEARN_THRESHOLD",
    "CAM_SLOT", "CAM_KEY_LO", "CAM_KEY_HI", "CAM_CTRL", "CAM_STATUS",
    "DMA_ERROR_ADDR_LO", "DMA_ERROR_ADDR_HI", "DMA_ERROR_RESP",
    "STAT_LOOKUPS", "STAT_HITS", "STAT_POPULAR_SAMPLES", "STAT_NONPOPULAR_SAMPLES",
    "STAT_STAGED_ROWS", "STAT_OVERFLOWS", "STAT_BYTES_READ_LO", "STAT_BYTES_READ_HI",
    "STAT_BYTES_WRITTEN_LO", "STAT_BYTES_WRITTEN_HI", "STAT_BUSY_CYCLES_LO",
    "STAT_BUSY_CYCLES_HI", "LAST_LOOKUPS", "LAST_HITS", "LAST_OVERFLOWS",
]
CONFIG_FIELDS = ["lanes", "num_tables", "table_bits", "row_bits", "cam_entries", "cam_ways",
                 "cam_kind", "staging_rows", "staging_banks", "axi_data_bits", "max_row_bytes",
                 "counter_sets", "counter_ways", "counter_bits", "max_sample_lookups",
                 "sample_id_bits"]


def config_fields(rm):
    return {f.name: f for r in rm if r.name.startswith("CFG_") for f in r.fields}


@pytest.mark.parametrize("name", list(PRESETS))
def test_every_preset_compiles(name):
    cfg = preset(name)
    rm = RegMap.from_rdl(compile_regmap(cfg))
    assert rm.name == "hotline"
    assert len(rm.array("TABLE_BASE")) == cfg.num_tables
    assert len(rm.array("STAGING_BASE")) == cfg.staging_banks
    for n in REQUIRED:
        assert n in rm, n
    for s, bits, _ in STATISTICS:
        assert (f"STAT_{s.upper()}" in rm) if bits == 32 else (f"STAT_{s.upper()}_HI" in rm)
    for s in LAST_STATISTICS:
        assert f"LAST_{s.upper()}" in rm
    # read-only configuration registers carry the config values
    cf = config_fields(rm)
    assert sorted(cf) == sorted(CONFIG_FIELDS)
    for k, f in cf.items():
        want = int(cfg.cam_kind == "hash") if k == "cam_kind" else getattr(cfg, k)
        assert f.reset == want and f.sw == "r" and want < (1 << f.width), k
    assert rm.reg("ID").reset == ID_MAGIC == 0x484F544C
    assert rm.reg("VERSION").reset == MAP_VERSION[0] << 16 | MAP_VERSION[1]


@pytest.mark.parametrize("tables, banks", [(1, 2), (3, 4), (26, 8), (64, 2)])
def test_arrays_follow_the_config(tables, banks):
    cfg = preset("tiny", table_bits=7, num_tables=tables, staging_banks=banks)
    rm = regmap(cfg)
    assert rm.array("TABLE_BASE") == [f"TABLE_BASE[{t}]" for t in range(tables)]
    assert rm.array("STAGING_BASE") == [f"STAGING_BASE[{b}]" for b in range(banks)]
    assert rm.reg(f"TABLE_BASE[{tables - 1}].HI").offset == 0x400 + 8 * tables - 4
    assert rm.size == 0x400 + 8 * tables
    assert rm.field("STATUS", "bank_pending").width == banks
    assert rm.field("CTRL", "bank").width == max(1, (banks - 1).bit_length())


def test_reset_values_from_config():
    cfg = preset("ulx3s", row_bytes=256, learn_period=7, learn_threshold=9)
    rm = regmap(cfg)
    assert rm.reg("ROW_BYTES").reset == 256
    assert rm.reg("ROW_STRIDE").reset == 256
    assert rm.reg("LEARN_PERIOD").reset == 7
    assert rm.reg("LEARN_THRESHOLD").reset == 9
    assert rm.field("LEARN_THRESHOLD", "value").width == cfg.counter_bits


@pytest.mark.parametrize("name", ["tiny", "ulx3s", "terabyte"])
def test_layout_is_sound(name):
    rm = regmap(preset(name))
    offsets = [r.offset for r in rm]
    assert len(set(offsets)) == len(offsets)
    assert all(o % 4 == 0 for o in offsets)
    assert offsets == sorted(offsets)                  # 4-byte registers: unique = disjoint
    assert rm.size == offsets[-1] + 4 <= 1 << rm.addr_bits
    for r in rm:
        bits = 0
        assert r.fields, r.name
        assert r.title and r.desc, r.name
        for f in r.fields:
            assert 0 <= f.lsb and f.msb < 32, (r.name, f.name)
            assert bits & f.mask == 0, f"{r.name}.{f.name} overlaps"
            bits |= f.mask
            assert f.title and f.desc, (r.name, f.name)
            hw_kind(f)                                 # every field is buildable
        assert r.reset & ~bits == 0


def test_fixed_part_does_not_move():
    """Scalar registers sit at the same offsets in every preset (portable software)."""
    maps = [regmap(preset(n)) for n in PRESETS]
    scalars = [r.name for r in maps[0] if "[" not in r.name]
    for rm in maps[1:]:
        assert [r.name for r in rm if "[" not in r.name] == scalars
        assert all(rm.reg(n).offset == maps[0].reg(n).offset for n in scalars)


def test_access_and_side_effects():
    rm = regmap(preset("ulx3s"))
    assert rm.reg("STATUS").access == "RO"
    assert rm.reg("IRQ_STATUS").access == "W1C"
    assert rm.reg("CTRL").access == "WO"
    assert rm.reg("ROW_BYTES").access == "RW"
    cmd = rm.field("CTRL", "cmd")
    assert cmd.swmod and cmd.sw == "w" and cmd.hw == "r"
    assert cmd.enum == {"NOP": 0, "LEARN": 1, "INSTALL": 2, "TRAIN": 3, "STOP": 4,
                        "SCATTER": 5, "EVICT": 6, "CLEAR_STATS": 7}
    assert rm.field("CTRL", "soft_reset").singlepulse
    assert rm.field("CAM_CTRL", "op").enum == {"NOP": 0, "WRITE": 1, "READ": 2}
    assert rm.field("STATUS", "mode").enum == {"IDLE": 0, "LEARN": 1, "TRAIN": 2}
    for f in rm.reg("IRQ_STATUS").fields:
        assert f.intr and f.onwrite == "woclr" and f.enable == f"IRQ_ENABLE.{f.name}"
    assert rm.reg("STATUS").field("busy").reset is None       # hardware-driven


def test_json_round_trip(tmp_path):
    rm = regmap(preset("ulx3s"))
    text = rm.to_json()
    doc = json.loads(text)
    assert doc["format"] == "hotline-hw-regmap" and doc["version"] == 1
    assert set(doc["registers"][0]) >= {"name", "offset", "access", "reset", "fields"}
    assert RegMap.from_json(text) == rm
    rm.save(tmp_path / "regmap.json")
    assert RegMap.load(tmp_path / "regmap.json") == rm
    assert RegMap.load(tmp_path / "regmap.json").to_json() == text


def test_json_errors(tmp_path):
    with pytest.raises(RegMapError, match="not valid JSON"):
        RegMap.from_json("{")
    with pytest.raises(RegMapError, match="'format' must be"):
        RegMap.from_json('{"format": "x"}')
    with pytest.raises(RegMapError, match="version 9 is not supported"):
        RegMap.from_json('{"format": "hotline-hw-regmap", "version": 9}')
    with pytest.raises(RegMapError, match="cannot read"):
        RegMap.load(tmp_path / "missing.json")


def test_unknown_names_suggest():
    rm = regmap(preset("tiny"))
    with pytest.raises(KeyError, match="did you mean ROW_BYTES"):
        rm.reg("ROW_BYTE")
    with pytest.raises(KeyError, match="did you mean busy"):
        rm.field("STATUS", "bussy")
    with pytest.raises(KeyError, match="64-bit register pair"):
        rm.wide("ROW_BYTES")
    assert [r.name for r in rm.wide("TABLE_BASE[2]")] == ["TABLE_BASE[2].LO", "TABLE_BASE[2].HI"]
    assert [r.name for r in rm.wide("POPULAR_BASE")] == ["POPULAR_BASE_LO", "POPULAR_BASE_HI"]


def test_port_name_rule():
    rm = regmap(preset("ulx3s"))
    assert port_name(rm.reg("CTRL"), rm.field("CTRL", "cmd")) == "ctrl_cmd"
    assert port_name(rm.reg("ROW_BYTES"), rm.field("ROW_BYTES", "value")) == "row_bytes"
    assert port_name(rm.reg("TABLE_BASE[3].LO"), "value") == "table_base_3_lo"
    assert port_name("STATUS", "busy") == "status_busy"


def test_compiler_failure_is_a_clear_error():
    with pytest.raises(RegMapError) as e:
        compile_rdl("addrmap hotline { reg { field {} x[40:0]; } R; };")
    assert str(e.value) == ("systemrdl-compiler failed: hotline.rdl:1:34: error: High bit (40) "
                            "of field 'x' exceeds MSb of parent register")
    bad = rdl_source(preset("tiny")).replace("ROW_BYTES @", "ROW_STRIDE @")
    with pytest.raises(RegMapError, match=r"hotline\.rdl:\d+:\d+: error: Multiple declarations "
                                          r"of instance 'ROW_STRIDE'$"):
        compile_rdl(bad)


@pytest.fixture(scope="module")
def outputs(tmp_path_factory):
    out = tmp_path_factory.mktemp("regmap")
    return out, write_outputs(preset("ulx3s"), out)


def test_write_outputs_writes_every_file(outputs):
    out, paths = outputs
    assert [p.name for p in paths] == list(OUTPUT_FILES)
    for p in paths:
        assert p.parent == out and p.stat().st_size > 100, p
    assert (out / "hotline.rdl").read_text() == rdl_source(preset("ulx3s"))
    assert RegMap.load(out / "regmap.json") == regmap(preset("ulx3s"))
    md = (out / "hotline_regs.md").read_text()
    assert "TABLE_BASE" in md and "IRQ_STATUS" in md


@pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc is not installed")
def test_c_header_compiles_and_matches_regmap(outputs, tmp_path):
    out, _ = outputs
    rm = RegMap.load(out / "regmap.json")
    lines = ['#include <stddef.h>', '#include "hotline_regs.h"']
    for r in rm:
        member = r.name                       # the map's names are the C member designators
        lines.append(f'_Static_assert(offsetof(hotline_t, {member}) == 0x{r.offset:x}, '
                     f'"{r.name}");')
        macro = "HOTLINE__" + re.sub(r"\[\d+\]", "", r.name).replace(".", "__")
        for f in r.fields:
            lines.append(f'_Static_assert({macro}__{f.name.upper()}_bm == 0x{f.mask:x}u, '
                         f'"{r.name}.{f.name}");')
    lines.append(f'_Static_assert(sizeof(hotline_t) == 0x{rm.size:x}, "size");')
    src = tmp_path / "check.c"
    src.write_text("\n".join(lines) + "\n")
    res = subprocess.run(["gcc", "-std=gnu11", "-Wall", "-Werror", "-fsyntax-only",
                          f"-I{out}", str(src)], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr[-3000:]


def test_ipxact_is_well_formed(outputs):
    out, _ = outputs
    tree = ElementTree.parse(out / "hotline_regs.xml")
    ns = {"ipxact": "http://www.accellera.org/XMLSchema/IPXACT/1685-2014"}
    root = tree.getroot()
    assert root.find("ipxact:name", ns).text == "hotline"
    block = root.find(".//ipxact:addressBlock", ns)
    regs = {r.find("ipxact:name", ns).text: int(r.find("ipxact:addressOffset", ns).text
                                                 .replace("'h", ""), 16)
            for r in block.findall("ipxact:register", ns)}
    rm = regmap(preset("ulx3s"))
    assert regs == {r.name: r.offset for r in rm if "[" not in r.name}
    files = {f.find("ipxact:name", ns).text: int(f.find("ipxact:dim", ns).text)
             for f in block.findall("ipxact:registerFile", ns)}
    assert files == {"TABLE_BASE": 26, "STAGING_BASE": 2}


def test_narrow_addresses_and_statistics_in_the_map():
    """addr_bits / stats_bits narrow the fields, never move a register."""
    full, narrow = regmap(preset("tiny")), regmap(preset("tiny", addr_bits=20, stats_bits=8))
    assert [(r.name, r.offset) for r in full] == [(r.name, r.offset) for r in narrow]
    for name in ("POPULAR_BASE", "TABLE_BASE[0]", "STAGING_BASE[1]", "DMA_ERROR_ADDR"):
        lo, hi = narrow.wide(name)
        assert lo.field("value").width == 20
        assert hw_kind(hi.field("value")) == "const" and hi.field("value").reset == 0
        assert "not implemented" in hi.field("value").desc
    assert narrow.field("STAT_LOOKUPS", "value").width == 8
    assert narrow.field("LAST_HITS", "value").width == 8
    lo, hi = narrow.wide("STAT_BYTES_WRITTEN")
    assert lo.field("value").width == 16 and hw_kind(hi.field("value")) == "const"
    mid = regmap(preset("tiny", addr_bits=40, stats_bits=20))
    lo, hi = mid.wide("TABLE_BASE[2]")
    assert (lo.field("value").width, hi.field("value").width) == (32, 8)
    assert hw_kind(hi.field("value")) == "value"
    lo, hi = mid.wide("STAT_BUSY_CYCLES")
    assert (lo.field("value").width, hi.field("value").width) == (32, 8)
    for name in ("POPULAR_BASE", "STAT_BUSY_CYCLES"):
        lo, hi = full.wide(name)
        assert (lo.field("value").width, hi.field("value").width) == (32, 32)
