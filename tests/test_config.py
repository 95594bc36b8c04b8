import json

import pytest
from hypothesis import given, strategies as st

from hotline_hw.config import (DEFAULT_PRESET, PRESETS, ConfigError, HotlineConfig, preset)


@pytest.mark.parametrize("name", list(PRESETS))
def test_presets_are_valid_and_named(name):
    cfg = preset(name)
    assert cfg.name == name
    cfg.validate()


def test_required_presets_exist():
    assert {"tiny", "ulx3s", "kaggle", "terabyte"} <= set(PRESETS)
    assert DEFAULT_PRESET in PRESETS


def test_kaggle_and_terabyte_key_formats():
    k = preset("kaggle")
    assert (k.num_tables, k.row_bits) == (26, 24)
    assert 10131227 < 2 ** k.row_bits          # largest Kaggle table
    t = preset("terabyte")
    assert t.row_bits == 26 and 39979771 < 2 ** t.row_bits   # largest Terabyte table (40M cap)
    assert t.max_sample_lookups >= 214          # DLRMv2 multi-hot sample
    assert t.lanes > k.lanes


@pytest.mark.parametrize("field,value,words", [
    ("lanes", 3, "power of two"),
    ("lanes", 0, "1..16"),
    ("lanes", -4, "1..16"),
    ("row_bits", 0, "1..40"),
    ("num_tables", 40, "1..32"),
    ("counter_sets", 1000, "power of two"),
    ("counter_ways", 0, "1..16"),
    ("counter_bits", 1, "2..20"),
    ("counter_bits", 24, "2..20"),
    ("counter_banks", 8192, "1..4096"),
    ("cam_kind", "tcam", "'full' or 'hash'"),
    ("queue_ram", "distributed", "'lut' or 'block'"),
    ("cam_entries", 3000, "power of two"),
    ("cam_ways", 3, "power of two"),
    ("staging_rows", -1, "1..16777216"),
    ("staging_banks", 1, "2..8"),
    ("dedup_ways", 1, "dedup_sets * dedup_ways must be >= staging_rows"),
    ("axi_data_bits", 96, "64, 128, 256 or 512"),
    ("row_bytes", 72, "multiple of the bus width"),
    ("max_row_bytes", 8192, f"16..4096"),
    ("learn_period", 0, "1..65535"),
    ("learn_threshold", 4096, "1..4095"),
    ("max_sample_lookups", 2, "4..65536"),
    ("lanes", True, "integer"),
    ("name", "a b", "letters"),
    ("addr_bits", 7, "8..64"),
    ("addr_bits", 65, "8..64"),
    ("addr_bits", 8, "two rows of max_row_bytes (512 bytes)"),
    ("stats_bits", 3, "4..32"),
    ("stats_bits", 33, "4..32"),
    ("stats_bits", 16.0, "integer"),
])
def test_bad_value_names_field_value_and_rule(field, value, words):
    with pytest.raises(ConfigError) as e:
        preset("ulx3s", **{field: value})
    assert e.value.field == field
    msg = str(e.value)
    assert msg.startswith(f"{field}={value!r}:")
    assert words in msg
    assert "\n" not in msg


def test_full_cam_needs_ways_equal_entries():
    with pytest.raises(ConfigError, match=r"cam_ways=8: must equal cam_entries \(64\)"):
        preset("ulx3s", cam_kind="full", cam_entries=64)
    assert preset("ulx3s", cam_kind="full", cam_entries=64, cam_ways=64).cam_sets == 1


def test_unknown_field_and_preset():
    with pytest.raises(ConfigError, match="bogus: unknown configuration field"):
        preset("tiny").replace(bogus=1)
    with pytest.raises(ConfigError, match="preset='nope': unknown preset"):
        preset("nope")
    with pytest.raises(ConfigError, match="bogus: unknown"):
        HotlineConfig.from_dict({"bogus": 1})


def test_derived_values():
    c = preset("tiny")
    assert c.key_bits == 12 and c.key_bytes == 2 and c.counter_max == 255
    assert c.slot_bits == 4 and c.cam_sets == 1 and c.bus_bytes == 8
    u = preset("ulx3s")
    assert u.cam_sets == 512 and u.cam_set_bits == 9 and u.key_bytes == 4


def test_addr_and_stats_bits_default_to_full_width():
    c = preset("ulx3s")
    assert (c.addr_bits, c.stats_bits) == (64, 32)
    assert c.addr_mask == (1 << 64) - 1
    assert c.stat_bits(32) == 32 and c.stat_bits(64) == 64
    assert c.wrap_stat(32, (1 << 32) + 5) == 5 and c.wrap_stat(64, 1 << 40) == 1 << 40


def test_narrow_addr_and_stats_bits():
    c = preset("tiny", addr_bits=12, stats_bits=8)
    assert c.addr_mask == 0xFFF
    assert c.stat_bits(32) == 8 and c.stat_bits(64) == 16
    assert c.wrap_stat(32, 0x1FF) == 0xFF and c.wrap_stat(64, 0x12345) == 0x2345
    assert HotlineConfig.from_json(c.to_json()) == c
    # a config.json written before the fields existed reads as the full widths
    doc = json.loads(preset("tiny").to_json())
    del doc["config"]["addr_bits"], doc["config"]["stats_bits"]
    old = HotlineConfig.from_json(json.dumps(doc))
    assert (old.addr_bits, old.stats_bits) == (64, 32)


@st.composite
def configs(draw):
    base = preset(draw(st.sampled_from(list(PRESETS))))
    changes = {}
    if draw(st.booleans()):
        changes["lanes"] = draw(st.sampled_from([1, 2, 4, 8, 16]))
    if draw(st.booleans()):
        changes["counter_bits"] = draw(st.integers(base.learn_threshold.bit_length() + 1, 20))
    if draw(st.booleans()):
        changes["aging_period"] = draw(st.integers(0, 1 << 16))
    if draw(st.booleans()):
        changes["learn_period"] = draw(st.integers(1, (1 << 16) - 1))
    if changes.get("lanes", base.lanes) > base.max_sample_lookups:
        changes["max_sample_lookups"] = changes["lanes"]
    return base.replace(**changes)


@given(configs())
def test_config_json_round_trips(cfg):
    text = cfg.to_json()
    assert HotlineConfig.from_json(text) == cfg
    doc = json.loads(text)
    assert doc["format"] == "hotline-hw-config" and doc["config"]["name"] == cfg.name


def test_config_file_round_trip(tmp_path):
    cfg = preset("kaggle", lanes=8)
    cfg.save(tmp_path / "config.json")
    assert HotlineConfig.load(tmp_path / "config.json") == cfg


@pytest.mark.parametrize("text,words", [
    ("{", "not valid JSON"),
    ('{"format": "other"}', "'format' must be"),
    ('{"format": "hotline-hw-config", "version": 9, "config": {}}', "version 9 is not supported"),
    ('{"format": "hotline-hw-config", "version": 1, "config": {"lanes": 5}}', "lanes=5"),
    ('{"format": "hotline-hw-config", "version": 1, "config": []}', "JSON object"),
])
def test_bad_config_json(text, words):
    with pytest.raises(ConfigError) as e:
        HotlineConfig.from_json(text)
    assert words in str(e.value)


def test_every_field_is_documented():
    for name, (_, _, doc) in HotlineConfig.field_docs().items():
        assert doc, name


def test_readme_has_a_section_per_generator_parameter():
    from pathlib import Path
    readme = (Path(__file__).parents[1] / "README.md").read_text()
    for name in HotlineConfig.field_docs():
        assert f"### `{name}`" in readme, name


def test_readme_parameter_sections_match_the_code():
    """Each section quotes its field's docstring and the presets' values."""
    from pathlib import Path
    readme = (Path(__file__).parents[1] / "README.md").read_text()
    for name, (_, _, doc) in HotlineConfig.field_docs().items():
        section = readme.split(f"### `{name}`")[1].split("###")[0]
        assert doc in section, name
        vals = ", ".join(f"{p} {getattr(c, name)}" for p, c in PRESETS.items())
        assert f"Presets: {vals}." in section, name


def test_parse_changes_types_and_errors():
    """The benches' ``--set FIELD=VALUE``: values take their field's type; a bad item names
    its field."""
    assert HotlineConfig.parse_changes(["lanes=16", "dedup-sets=0x800", "cam_kind=hash"]) == {
        "lanes": 16, "dedup_sets": 2048, "cam_kind": "hash"}
    assert HotlineConfig.parse_changes([]) == {}
    for item, field in (("lanes", "lanes"), ("nosuch=1", "nosuch"), ("lanes=x", "lanes")):
        with pytest.raises(ConfigError) as e:
            HotlineConfig.parse_changes([item])
        assert e.value.field == field and field in str(e.value)


def test_stored_fields_fill_fields_added_later():
    """A config.json written before a field existed (the stored implementation results)
    matches the configuration it was: the missing field takes its default, as from_dict
    gives it; the name does not count. A field at another value still tells them apart."""
    doc = json.loads(preset("tiny").to_json())
    del doc["config"]["queue_ram"]
    doc["config"]["name"] = "old-tiny"
    assert HotlineConfig.stored_fields(doc) == HotlineConfig.stored_fields(
        json.loads(preset("tiny").to_json()))
    assert "name" not in HotlineConfig.stored_fields(doc)
    assert HotlineConfig.stored_fields(doc) != HotlineConfig.stored_fields(
        preset("tiny", queue_ram="block").to_dict())
