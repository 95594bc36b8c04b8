"""cocotbext-axi on an exported AXI4-Stream stage (:class:`sim.selftest_dut.AxisPass`): the
port names fit ``AxiStreamBus.from_prefix``, and cocotbext-axi runs on cocotb 2 under
``PYTHONWARNINGS=error`` (see ``sim/__init__.py``)."""

import itertools
import random

import cocotb
from cocotbext.axi import AxiStreamBus, AxiStreamFrame, AxiStreamSink, AxiStreamSource

from sim.streams import reset, start_clock


@cocotb.test()
async def axis_frames_with_idle_and_backpressure(dut):
    start_clock(dut)
    source = AxiStreamSource(AxiStreamBus.from_prefix(dut, "s_axis"), dut.clk, dut.rst)
    sink = AxiStreamSink(AxiStreamBus.from_prefix(dut, "m_axis"), dut.clk, dut.rst)
    source.set_pause_generator(itertools.cycle([0, 1, 0, 0]))
    sink.set_pause_generator(itertools.cycle([1, 0, 0]))
    await reset(dut)
    frames = [bytes(random.getrandbits(8) for _ in range(n)) for n in (1, 4, 7, 12, 16, 3)]
    for f in frames:
        await source.send(AxiStreamFrame(f))
    for f in frames:
        got = await sink.recv()
        assert bytes(got.tdata) == f
