"""A cocotb module that must fail: ``tests/sim/test_infra.py`` checks that
:func:`sim.runner.run_cocotb` turns it into a failed pytest test (a red cocotb test can never
pass silently). Never run it in a regression."""

import os
import time

import cocotb
from cocotb.triggers import RisingEdge

from sim.streams import start_clock


@cocotb.test()
async def passes_on_purpose(dut):
    start_clock(dut)
    await RisingEdge(dut.clk)


@cocotb.test()
async def fails_on_purpose(dut):
    start_clock(dut)
    await RisingEdge(dut.clk)
    assert int(dut.o_valid.value) == 42, "deliberately red"


@cocotb.test(skip=os.environ.get("SELFTEST_HANG") != "1")
async def hangs_on_purpose(dut):
    """Blocks the simulator (wall clock) to test the runner's timeout; runs only when
    SELFTEST_HANG=1."""
    time.sleep(3600)
