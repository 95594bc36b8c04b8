"""End-to-end cocotb regression of the whole accelerator (``sim/tb_hotline.py``) on Icarus and
Verilator: LEARN, INSTALL, TRAIN 20 mini-batches with a modelled GPU, SCATTER each bank,
EVICT; every output beat and the whole memory against the golden model. ``tiny`` runs by
default; the ``ulx3s`` preset (a longer build) with ``--slow``."""
import pytest

from hotline_hw.config import preset
from sim.runner import run_cocotb

TINY = preset("tiny", name="e2e-tiny", lanes=2, staging_rows=32, dedup_sets=32, dedup_ways=2,
              learn_threshold=1)


def test_hotline_flow_tiny(sim):
    r = run_cocotb("hotline", TINY, sim=sim, test_module="sim.tb_hotline",
                   extra_env={"HOTLINE_TB_BATCHES": "20"})
    assert r.tests == {"hotline_flow": "passed"}


@pytest.mark.slow
def test_hotline_flow_ulx3s(sim):
    r = run_cocotb("hotline", preset("ulx3s"), sim=sim, test_module="sim.tb_hotline",
                   extra_env={"HOTLINE_TB_BATCHES": "20"}, timeout_s=3600)
    assert r.tests == {"hotline_flow": "passed"}


# Host addresses modulo 2**20 (the map wraps inside a host table) and 8-bit statistics
# counters, which wrap during the run (~480 lookups): the narrow paths of addr_bits/stats_bits.
NARROW = TINY.replace(name="e2e-narrow", addr_bits=20, stats_bits=8)


def test_hotline_flow_narrow(sim):
    r = run_cocotb("hotline", NARROW, sim=sim, test_module="sim.tb_hotline",
                   extra_env={"HOTLINE_TB_BATCHES": "10"})
    assert r.tests == {"hotline_flow": "passed"}
