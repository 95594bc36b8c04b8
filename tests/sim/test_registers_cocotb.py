"""The register block (unit ``registers``) on Icarus and Verilator: ``sim/tb_registers.py``
drives it through cocotbext-axi's AXI4-Lite master (random pauses on every channel) and the
async driver, one ``run_cocotb`` call (all six cocotb tests) per (variant, simulator).

Variants: ``tiny`` (3 tables, 12-bit keys) and ``ulx3s`` (26 tables, 29-bit keys).
"""

import pytest

from hotline_hw.config import preset
from sim.runner import run_cocotb

TESTS = {"reset_values", "rw_random_strobes", "ro_inputs", "w1c_irq", "command_pulses",
         "unmapped"}


@pytest.mark.parametrize("variant", ["tiny", "ulx3s"])
def test_registers_cocotb(sim, variant, record_property):
    r = run_cocotb("registers", preset(variant), sim=sim, test_module="sim.tb_registers")
    assert r.tests == {t: "passed" for t in TESTS}
    record_property("seconds", round(r.seconds, 1))
