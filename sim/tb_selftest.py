"""cocotb self-test of the simulation infrastructure on :class:`sim.selftest_dut.AddOne`.

Run through :func:`sim.runner.run_cocotb` (``tests/sim/test_infra.py``). Structure of every
testbench here: a ``TB`` class builds the bus models from the stream names, a golden model
(``ref_add_one``) predicts, a checker compares every beat.
"""

import random

import cocotb
from cocotb.triggers import ClockCycles, RisingEdge

from sim.streams import (StreamMonitor, StreamSink, StreamSource, load_config, load_ports,
                         reset, start_clock)


def ref_add_one(cfg, beat):
    """The golden model: the output beat (a dict) for an input beat (a dict)."""
    m = (1 << cfg.table_bits) - 1
    return {"tag": beat["tag"], "value": (beat["value"] + 1) & 0xff,
            "lanes": [(x + 1) & m for x in beat["lanes"]]}


class TB:
    def __init__(self, dut, *, idle=0.0, backpressure=0.0):
        self.dut = dut
        self.cfg = load_config()
        self.ports = load_ports()
        start_clock(dut)
        self.source = StreamSource(dut, "i", dut.clk, idle_prob=idle)
        self.sink = StreamSink(dut, "o", dut.clk, backpressure_prob=backpressure)
        self.events = StreamMonitor(dut, "ev", dut.clk)

    async def reset(self):
        await reset(self.dut)

    def random_beat(self):
        m = (1 << self.cfg.table_bits) - 1
        return {"tag": random.getrandbits(4), "value": random.getrandbits(8),
                "lanes": [random.randint(0, m) for _ in range(self.cfg.lanes)]}


@cocotb.test()
@cocotb.parametrize(idle=[0.0, 0.5], backpressure=[0.0, 0.6])
async def stream_roundtrip(dut, idle, backpressure):
    """Random beats through the +1 stage with idle cycles and backpressure: every output beat
    equals the golden model's, in order; ev reports every accepted input tag."""
    tb = TB(dut, idle=idle, backpressure=backpressure)
    await tb.reset()
    beats = [tb.random_beat() for _ in range(200)]
    for b in beats:
        tb.source.send_nowait(b)
    for k, b in enumerate(beats):
        got = await tb.sink.recv()
        want = ref_add_one(tb.cfg, b)
        assert got.fields == want, f"beat {k}: got {got.fields}, want {want}"
        assert got.value == tb.ports.stream("o").layout.pack(want)
    await tb.source.wait_idle()
    await ClockCycles(dut.clk, 2)
    tags = []
    while not tb.events.empty():
        tags.append(tb.events.recv_nowait().value)
    assert tags == [b["tag"] for b in beats]
    assert tb.source.count == tb.sink.count == len(beats)
    assert tb.sink.empty()
    if idle == 0.0 and backpressure == 0.0:
        # Full throughput: 200 beats in about 200 cycles.
        assert tb.sink.cycle < 200 + 20, f"took {tb.sink.cycle} cycles"


@cocotb.test()
async def send_waits_for_acceptance(dut):
    """``await send()`` returns once the beat is taken; the caller may write right after."""
    tb = TB(dut)
    await tb.reset()
    tb.sink.backpressure_prob = 1.0     # nothing leaves: the stage fills after one beat
    await tb.source.send({"tag": 1, "value": 1, "lanes": [0] * tb.cfg.lanes})
    dut.o_ready.value = 0               # writable phase after send()
    second = tb.source.send_nowait({"tag": 2, "value": 2, "lanes": [0] * tb.cfg.lanes})
    await ClockCycles(dut.clk, 5)
    assert not second.is_set(), "the full stage must not take a second beat"
    tb.sink.backpressure_prob = 0.0
    await second.wait()
    assert (await tb.sink.recv())["value"] == 2
    assert (await tb.sink.recv())["value"] == 3


@cocotb.test()
async def config_matches_ports(dut):
    """The config.json the TB reads is the one the Verilog was generated from."""
    cfg, ports = load_config(), load_ports()
    assert ports.port("i_lanes").width == cfg.lanes * cfg.table_bits
    assert len(dut.i_lanes.value) == cfg.lanes * cfg.table_bits
    start_clock(dut)
    await RisingEdge(dut.clk)
