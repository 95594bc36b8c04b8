"""cocotb regression of the learning and lookup half (counter array -> install engine ->
CAM, ``sim/tb_popularity.py``) on the generated Verilog, Icarus and Verilator, against the
golden model: every placed record, every CAM slot, and every lookup result at its fixed
latency."""
import pytest

from hotline_hw.config import preset
from sim.runner import run_cocotb

TINY = preset("tiny")

#: variant name -> (config, lookups in the trace per simulator)
VARIANTS = {
    # fully associative CAM, 1 / 2 / 4 lanes, two counter-array sizes
    "full-l1": (TINY.replace(name="pop-full-l1", lanes=1), 20_000),
    "full-l2": (TINY.replace(name="pop-full-l2", cam_entries=32, cam_ways=32), 20_000),
    "full-l4": (TINY.replace(name="pop-full-l4", lanes=4, counter_sets=64, counter_ways=8,
                             counter_banks=4, counter_bits=6), 20_000),
    # set-associative CAM
    "hash-l2": (TINY.replace(name="pop-hash-l2", cam_kind="hash", cam_entries=64, cam_ways=4,
                             counter_sets=64, counter_ways=4), 20_000),
    # the ulx3s preset: Criteo Kaggle keys, 4096-row 8-way CAM, 4 lanes, 100k lookups
    "ulx3s": (preset("ulx3s"), 100_000),
}


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_learn_install_lookup(variant, sim):
    cfg, lookups = VARIANTS[variant]
    if sim == "icarus" and lookups > 20_000:
        lookups = 20_000            # Icarus is ~10x slower; Verilator runs the full trace
    r = run_cocotb("popularity", cfg, sim=sim, test_module="sim.tb_popularity",
                   extra_env={"HOTLINE_TB_LOOKUPS": str(lookups)})
    assert r.tests == {"learn_install_lookup": "passed"}


def test_learn_period_3(sim):
    cfg = VARIANTS["hash-l2"][0]
    r = run_cocotb("popularity", cfg, sim=sim, test_module="sim.tb_popularity",
                   extra_env={"HOTLINE_TB_LOOKUPS": "10000", "HOTLINE_TB_LEARN_PERIOD": "3"})
    assert r.tests == {"learn_install_lookup": "passed"}
