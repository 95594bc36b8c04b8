"""cocotb testbench of :class:`hotline_hw.gateware.registers.RegisterBlock` (unit
``registers``) on Icarus and Verilator, through cocotbext-axi's ``AxiLiteMaster`` with
random pauses on all five AXI4-Lite channels, and :class:`hotline_hw.driver.AsyncHotlineDriver`
on top of it (the driver is what software uses, so it is what the bus carries here).

The expected behaviour comes from the register map of the very configuration the Verilog was
generated from (``load_config()`` -> :func:`hotline_hw.regmap.regmap`): reset values, which
fields software reads and writes, which are hardware inputs, interrupt bits and commands. The
hardware ports are found by :func:`hotline_hw.regmap.port_name` (no Amaranth in here).

Tests (one ``run_cocotb`` call runs them all, ``tests/sim/test_registers_cocotb.py``):

- ``reset_values``: every register reads its reset value; ``check_id()``.
- ``rw_random_strobes``: every software-writable plain register written three times with
  random values and random byte strobes (1-4 contiguous bytes), the hardware port checked
  after each write, everything read back through the driver.
- ``ro_inputs``: every hardware input driven with random values and read back; writes to
  read-only registers change nothing.
- ``w1c_irq``: random event pulses set IRQ_STATUS, ``irq`` follows
  ``|(IRQ_STATUS & IRQ_ENABLE)``, write-1-to-clear clears exactly the written bits.
- ``command_pulses``: a monitor counts every cycle of ``ctrl_cmd_stb``,
  ``ctrl_soft_reset`` and ``cam_ctrl_op_stb``: exactly one per driver command, with the
  command's code and arguments.
- ``unmapped``: reads and writes of addresses without a register answer SLVERR (reads 0) and
  change nothing.
"""

import random

import cocotb
from cocotb.triggers import ReadOnly, RisingEdge
from cocotbext.axi import AxiLiteBus, AxiLiteMaster, AxiResp

from hotline_hw.driver import AsyncHotlineDriver
from hotline_hw.regmap import hw_kind, port_name, regmap
from sim.lint import Waiver
from sim.streams import load_config, reset, start_clock

#: Verilator lint waivers of this unit (collected by tests/sim/test_lint.py).
LINT_WAIVERS = (
    Waiver("UNUSEDSIGNAL", r"^Bits of signal are not used: 's_axil__araddr'\[1:0\]$",
           instance=r"registers\.dut", reason=
           "AXI4-Lite byte address bits 1:0 select a byte inside the 32-bit word; the block "
           "decodes whole words and takes byte lanes from wstrb, so they are ignored by "
           "design (documented in RegisterBlock)"),
)

S_AXIL_INPUTS = ("awaddr", "awprot", "awvalid", "wdata", "wstrb", "wvalid", "bready",
                 "araddr", "arprot", "arvalid", "rready")


def _pauses(rng, prob):
    while True:
        yield rng.random() < prob


class TB:
    def __init__(self, dut, pause=0.3):
        self.dut = dut
        self.cfg = load_config()
        self.rm = regmap(self.cfg)
        self.rng = random.Random(random.getrandbits(32))
        # every DUT input to 0 before anything runs (Icarus starts at X)
        for n in S_AXIL_INPUTS:
            getattr(dut, f"s_axil_{n}").value = 0
        self.inputs, self.events, self.values, self.strobes = [], [], [], []
        for reg in self.rm:
            for f in reg.fields:
                k = hw_kind(f)
                entry = (reg, f, port_name(reg, f))
                if k == "input":
                    self.inputs.append(entry)
                elif k == "event":
                    self.events.append(entry)
                elif k in ("value", "pulse"):
                    self.values.append(entry)
                if f.swmod:
                    self.strobes.append(entry)
        for _, _, name in self.inputs + self.events:
            getattr(dut, name).value = 0
        dut.rst.value = 1
        start_clock(dut)
        self.axil = AxiLiteMaster(AxiLiteBus.from_prefix(dut, "s_axil"), dut.clk, dut.rst)
        wr, rd = self.axil.write_if, self.axil.read_if
        for ch in (wr.aw_channel, wr.w_channel, wr.b_channel, rd.ar_channel, rd.r_channel):
            ch.set_pause_generator(_pauses(random.Random(self.rng.getrandbits(32)), pause))
        self.drv = AsyncHotlineDriver(self.read32, self.write32, self.rm)

    async def read32(self, addr):
        r = await self.axil.read(addr, 4)
        assert r.resp == AxiResp.OKAY, f"read 0x{addr:x}: {r.resp!r}"
        return int.from_bytes(r.data, "little")

    async def write32(self, addr, value):
        r = await self.axil.write(addr, int(value).to_bytes(4, "little"))
        assert r.resp == AxiResp.OKAY, f"write 0x{addr:x}: {r.resp!r}"

    def port(self, name):
        return int(getattr(self.dut, name).value)

    async def start(self):
        await reset(self.dut)
        await RisingEdge(self.dut.clk)


def plain_regs(rm):
    return [r for r in rm if all(f.plain for f in r.fields)]


@cocotb.test()
async def reset_values(dut):
    tb = TB(dut)
    await tb.start()
    assert await tb.drv.check_id() == (1, 0)
    for reg in tb.rm:
        got = await tb.drv.read(reg.name)
        assert got == reg.reset, f"{reg.name}: 0x{got:08x} != reset 0x{reg.reset:08x}"
    for reg, f, name in tb.values:
        assert tb.port(name) == (0 if f.singlepulse else f.reset), name


@cocotb.test()
async def rw_random_strobes(dut):
    tb = TB(dut)
    await tb.start()
    regs = plain_regs(tb.rm)
    assert len(regs) >= 10 + 2 * tb.cfg.num_tables
    shadow = {r.name: r.reset for r in regs}
    for _ in range(3):
        for reg in tb.rng.sample(regs, len(regs)):
            start = tb.rng.randrange(4)
            n = tb.rng.randint(1, 4 - start)
            data = bytes(tb.rng.getrandbits(8) for _ in range(n))
            r = await tb.axil.write(reg.offset + start, data)
            assert r.resp == AxiResp.OKAY
            m = sum(0xFF << (8 * (start + i)) for i in range(n)) & reg.sw_write_mask
            v = int.from_bytes(data, "little") << (8 * start)
            shadow[reg.name] = ((shadow[reg.name] & ~m) | (v & m)) & reg.sw_read_mask
            for f in reg.fields:
                if hw_kind(f) == "value":
                    want = (shadow[reg.name] >> f.lsb) & ((1 << f.width) - 1)
                    assert tb.port(port_name(reg, f)) == want, f"{reg.name}.{f.name}"
        for reg in tb.rng.sample(regs, len(regs)):
            got = await tb.drv.read(reg.name)
            assert got == shadow[reg.name], f"{reg.name}: 0x{got:08x} != 0x{shadow[reg.name]:08x}"


@cocotb.test()
async def ro_inputs(dut):
    tb = TB(dut)
    await tb.start()
    want = {}
    for reg, f, name in tb.inputs:
        x = tb.rng.getrandbits(f.width)
        getattr(dut, name).value = x
        want[reg.name] = want.get(reg.name, 0) | x << f.lsb
    ro = [r for r in tb.rm if r.access == "RO"]
    for reg in ro:
        want[reg.name] = want.get(reg.name, 0) | sum((f.reset or 0) << f.lsb for f in reg.fields
                                                     if hw_kind(f) == "const")
    for reg in tb.rng.sample(ro, len(ro)):
        assert await tb.drv.read(reg.name) == want[reg.name], reg.name
        await tb.write32(reg.offset, tb.rng.getrandbits(32))        # ignored, OKAY
        assert await tb.drv.read(reg.name) == want[reg.name], reg.name
    st = await tb.drv.stats()
    assert st["lookups"] == want["STAT_LOOKUPS"]
    assert st["bytes_read"] == want["STAT_BYTES_READ_HI"] << 32 | want["STAT_BYTES_READ_LO"]


@cocotb.test()
async def w1c_irq(dut):
    tb = TB(dut)
    await tb.start()
    names = [f.name for _, f, _ in tb.events]
    shadow, enable = set(), set()
    for _ in range(25):
        fired = [e for e in tb.events if tb.rng.random() < 0.3]
        await RisingEdge(dut.clk)
        for _, _, port in fired:
            getattr(dut, port).value = 1
        await RisingEdge(dut.clk)
        for _, _, port in fired:
            getattr(dut, port).value = 0
        shadow |= {f.name for _, f, _ in fired}
        assert await tb.drv.irq_status() == shadow
        enable = {n for n in names if tb.rng.random() < 0.5}
        await tb.drv.irq_enable(*enable)
        await ReadOnly()
        assert int(dut.irq.value) == int(bool(shadow & enable)), (shadow, enable)
        await RisingEdge(dut.clk)
        clear = {n for n in names if tb.rng.random() < 0.5}
        if clear:
            await tb.drv.irq_clear(*clear)
        shadow -= clear
        assert await tb.drv.irq_status() == shadow
        await ReadOnly()
        assert int(dut.irq.value) == int(bool(shadow & enable))
        await RisingEdge(dut.clk)


@cocotb.test()
async def command_pulses(dut):
    tb = TB(dut)
    await tb.start()
    seen = {"cmd": [], "soft_reset": 0, "cam": []}

    async def monitor():
        while True:
            await RisingEdge(dut.clk)
            await ReadOnly()
            if int(dut.ctrl_cmd_stb.value):
                seen["cmd"].append((int(dut.ctrl_cmd.value), int(dut.ctrl_clear.value),
                                    int(dut.ctrl_bank.value)))
            seen["soft_reset"] += int(dut.ctrl_soft_reset.value)
            if int(dut.cam_ctrl_op_stb.value):
                seen["cam"].append((int(dut.cam_ctrl_op.value), int(dut.cam_ctrl_used.value),
                                    int(dut.cam_slot.value)))

    cocotb.start_soon(monitor())
    dut.cam_status_done.value = 1         # CAM operations finish at once here
    cmds = tb.rm.field("CTRL", "cmd").enum
    want_cmd, want_cam, resets = [], [], 0
    for _ in range(40):
        op = tb.rng.choice(["learn", "install", "train", "stop", "scatter", "evict",
                            "clear_stats", "soft_reset", "cam_write", "cam_read"])
        if op == "learn":
            clear = tb.rng.randrange(2)
            await tb.drv.learn(clear=clear)
            want_cmd.append((cmds["LEARN"], clear, 0))
        elif op == "scatter":
            bank = tb.rng.randrange(tb.cfg.staging_banks)
            await tb.drv.scatter(bank)
            want_cmd.append((cmds["SCATTER"], 0, bank))
        elif op == "soft_reset":
            await tb.drv.soft_reset()
            want_cmd.append((cmds["NOP"], 0, 0))   # the same write carries cmd = NOP
            resets += 1
        elif op.startswith("cam"):
            slot = tb.rng.randrange(tb.cfg.cam_entries)
            if op == "cam_write":
                used = tb.rng.randrange(2)
                await tb.drv.cam_write(slot, tb.rng.getrandbits(tb.cfg.key_bits), used=used)
                want_cam.append((1, used, slot))
            else:
                await tb.drv.cam_read(slot)
                want_cam.append((2, 0, slot))
        else:
            await getattr(tb.drv, op)()
            want_cmd.append((cmds[op.upper()], 0, 0))
    for _ in range(4):
        await RisingEdge(dut.clk)
    assert seen["cmd"] == want_cmd
    assert seen["cam"] == want_cam
    assert seen["soft_reset"] == resets


@cocotb.test()
async def unmapped(dut):
    tb = TB(dut)
    await tb.start()
    mapped = {r.offset for r in tb.rm}
    holes = [a for a in range(0, 1 << tb.rm.addr_bits, 4) if a not in mapped]
    plain = plain_regs(tb.rm)
    before = {r.name: await tb.drv.read(r.name) for r in plain}
    for a in tb.rng.sample(holes, 16) + [holes[0], holes[-1]]:
        r = await tb.axil.read(a, 4)
        assert (r.resp, r.data) == (AxiResp.SLVERR, bytes(4)), hex(a)
        w = await tb.axil.write(a, bytes([0xFF] * 4))
        assert w.resp == AxiResp.SLVERR, hex(a)
    assert {r.name: await tb.drv.read(r.name) for r in plain} == before
