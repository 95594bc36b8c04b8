# amaranth: UnusedElaboratable=no
"""RegisterBlock (hotline_hw/gateware/registers.py) in amaranth.sim, against a reference
built from the same RegMap: every ``rtl_*`` access through AXI4-Lite is checked against
``ref_*`` expectations computed from the map's fields (reset, sw access, strobes, W1C)."""

import random

import pytest
from amaranth.sim import Simulator

from hotline_hw.config import preset
from hotline_hw.gateware.registers import OKAY, SLVERR, RegisterBlock, axil_read, axil_write
from hotline_hw.regmap import hw_kind, port_name, regmap

PRESETS = ["tiny", "ulx3s"]

def block(name):
    # One elaborated signature per preset is enough; the simulator copies nothing from it.
    return RegisterBlock(preset(name))


def run(dut, *testbenches):
    sim = Simulator(dut)
    sim.add_clock(1e-8)
    for tb in testbenches:
        sim.add_testbench(tb)
    sim.run()


# --- reference helpers -----------------------------------------------------------------------

def strobe_mask(strb):
    return sum(0xFF << (8 * i) for i in range(4) if strb >> i & 1)


def ref_rw(reg, old, data, strb):
    """Expected read-back of a plain RW register after writing ``data`` with ``strb``."""
    m = strobe_mask(strb) & reg.sw_write_mask
    return ((old & ~m) | (data & m)) & reg.sw_read_mask


def plain_regs(rm):
    return [r for r in rm if r.fields and all(f.plain for f in r.fields)]


def input_regs(rm):
    return [r for r in rm if all(hw_kind(f) in ("input", "const") for f in r.fields)
            and any(hw_kind(f) == "input" for f in r.fields)]


def drive_inputs(ctx, dut, reg, rng):
    """Drive every input field of ``reg`` with a random value; return the expected read."""
    v = 0
    for f in reg.fields:
        if hw_kind(f) == "input":
            x = rng.getrandbits(f.width)
            ctx.set(getattr(dut, port_name(reg, f)), x)
            v |= x << f.lsb
        elif hw_kind(f) == "const":
            v |= (f.reset or 0) << f.lsb
    return v


# --- tests -------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", PRESETS)
def test_reset_values(name):
    dut = block(name)
    rm = dut.regmap

    async def tb(ctx):
        for reg in rm:
            data, resp = await axil_read(ctx, dut.s_axil, reg.offset)
            assert resp == OKAY, reg.name
            assert data == reg.reset, f"{reg.name}: 0x{data:08x} != reset 0x{reg.reset:08x}"
            for f in reg.fields:
                if hw_kind(f) in ("value", "pulse"):
                    want = 0 if f.singlepulse else f.reset
                    assert ctx.get(getattr(dut, port_name(reg, f))) == want, f"{reg.name}.{f.name}"

    run(dut, tb)


def test_config_reset_values_follow_the_config():
    cfg = preset("tiny", row_bytes=32, learn_period=3, learn_threshold=5)
    dut = RegisterBlock(cfg)

    async def tb(ctx):
        for reg, want in (("ROW_BYTES", 32), ("LEARN_PERIOD", 3), ("LEARN_THRESHOLD", 5),
                          ("CFG_TABLES", cfg.num_tables)):
            data, _ = await axil_read(ctx, dut.s_axil, dut.regmap.reg(reg).offset)
            assert data == want, reg
        assert ctx.get(dut.row_bytes) == 32

    run(dut, tb)


@pytest.mark.parametrize("name", PRESETS)
def test_rw_with_strobes(name):
    dut = block(name)
    rm = dut.regmap
    rng = random.Random(1)
    regs = plain_regs(rm)
    assert {"ROW_BYTES", "TABLE_BASE[0].LO", "IRQ_ENABLE", "CAM_SLOT"} <= {r.name for r in regs}

    async def tb(ctx):
        shadow = {r.name: r.reset for r in regs}
        for _ in range(3):
            for reg in rng.sample(regs, len(regs)):
                data, strb = rng.getrandbits(32), rng.choice([0xF, rng.getrandbits(4)])
                resp = await axil_write(ctx, dut.s_axil, reg.offset, data, strb,
                                        aw_delay=rng.randint(0, 2), w_delay=rng.randint(0, 2),
                                        b_delay=rng.randint(0, 2))
                assert resp == OKAY
                shadow[reg.name] = ref_rw(reg, shadow[reg.name], data, strb)
                for f in reg.fields:        # the hardware port shows the field
                    if hw_kind(f) == "value":
                        want = (shadow[reg.name] >> f.lsb) & ((1 << f.width) - 1)
                        assert ctx.get(getattr(dut, port_name(reg, f))) == want, reg.name
        for reg in regs:
            data, resp = await axil_read(ctx, dut.s_axil, reg.offset, r_delay=rng.randint(0, 2))
            assert (data, resp) == (shadow[reg.name], OKAY), reg.name

    run(dut, tb)


@pytest.mark.parametrize("name", PRESETS)
def test_inputs_read_back_and_ro_ignores_writes(name):
    dut = block(name)
    rm = dut.regmap
    rng = random.Random(2)
    regs = input_regs(rm) + [r for r in rm if all(hw_kind(f) == "const" for f in r.fields)]
    assert {"STATUS", "STAT_LOOKUPS", "CAM_STATUS", "ID", "CFG_CAM"} <= {r.name for r in regs}

    async def tb(ctx):
        want = {r.name: drive_inputs(ctx, dut, r, rng) for r in regs}
        for reg in regs:
            assert await axil_write(ctx, dut.s_axil, reg.offset, rng.getrandbits(32)) == OKAY
            data, resp = await axil_read(ctx, dut.s_axil, reg.offset)
            assert (data, resp) == (want[reg.name], OKAY), reg.name

    run(dut, tb)


def test_write_only_fields_read_zero():
    dut = block("tiny")
    rm = dut.regmap

    async def tb(ctx):
        for name in ("CTRL", "CAM_CTRL"):
            reg = rm.reg(name)
            assert reg.access == "WO"
            await axil_write(ctx, dut.s_axil, reg.offset, 0xFFFF_FFFF)
            assert await axil_read(ctx, dut.s_axil, reg.offset) == (0, OKAY)

    run(dut, tb)


@pytest.mark.parametrize("name", PRESETS)
def test_w1c_and_irq(name):
    dut = block(name)
    rm = dut.regmap
    st, en = rm.reg("IRQ_STATUS"), rm.reg("IRQ_ENABLE")
    events = [f for f in st.fields if f.intr]
    assert [f.name for f in events] == ["cmd_done", "dma_error", "overflow", "bad_key",
                                        "framing_error", "minibatch_done"]
    rng = random.Random(3)

    async def pulse(ctx, fields):
        for f in fields:
            ctx.set(getattr(dut, port_name(st, f)), 1)
        await ctx.tick()
        for f in fields:
            ctx.set(getattr(dut, port_name(st, f)), 0)

    async def read_status(ctx):
        data, resp = await axil_read(ctx, dut.s_axil, st.offset)
        assert resp == OKAY
        return data

    async def tb(ctx):
        assert not ctx.get(dut.irq)
        # software cannot set an event bit
        await axil_write(ctx, dut.s_axil, st.offset, 0x3F)
        assert await read_status(ctx) == 0
        shadow = 0
        enable = 0
        for _ in range(20):
            fired = [f for f in events if rng.random() < 0.3]
            await pulse(ctx, fired)
            shadow |= sum(f.mask for f in fired)
            assert await read_status(ctx) == shadow
            # irq follows status & enable, with the status held
            enable = rng.getrandbits(len(events))
            await axil_write(ctx, dut.s_axil, en.offset, enable)
            await ctx.tick()
            assert ctx.get(dut.irq) == int(bool(shadow & enable)), (shadow, enable)
            clear, strb = rng.getrandbits(len(events)), rng.choice([0x1, 0xF, 0xE])
            await axil_write(ctx, dut.s_axil, st.offset, clear, strb)
            if strb & 1:                            # the bits live in byte 0
                shadow &= ~clear
            assert await read_status(ctx) == shadow
            await ctx.tick()
            assert ctx.get(dut.irq) == int(bool(shadow & enable))

    run(dut, tb)


def test_event_wins_over_clear():
    dut = block("tiny")
    st = dut.regmap.reg("IRQ_STATUS")
    sig = dut.field("IRQ_STATUS", "overflow")

    async def tb(ctx):
        ctx.set(sig, 1)
        await ctx.tick()
        # hold the event high through the clearing write: the bit must stay set
        await axil_write(ctx, dut.s_axil, st.offset, 0x3F)
        ctx.set(sig, 0)
        data, _ = await axil_read(ctx, dut.s_axil, st.offset)
        assert data == st.field("overflow").mask
        await axil_write(ctx, dut.s_axil, st.offset, 0x3F)
        assert (await axil_read(ctx, dut.s_axil, st.offset))[0] == 0

    run(dut, tb)


def test_command_pulses_one_cycle_per_write():
    dut = block("tiny")
    rm = dut.regmap
    ctrl = rm.reg("CTRL")
    log = []     # (cycle, cmd_stb, cmd, clear, bank, soft_reset, bvalid)
    stop = []

    async def monitor(ctx):
        cycle = 0
        while not stop:
            log.append((cycle, ctx.get(dut.ctrl_cmd_stb), ctx.get(dut.ctrl_cmd),
                        ctx.get(dut.ctrl_clear), ctx.get(dut.ctrl_bank),
                        ctx.get(dut.ctrl_soft_reset), ctx.get(dut.s_axil.bvalid)))
            await ctx.tick()
            cycle += 1

    writes = [(1 | 1 << 4, 0xF), (5 | 1 << 8, 0xF), (3, 0xF), (3, 0x1), (7, 0xE),
              (1 << 31, 0x8), (2 | 1 << 31, 0xF)]

    async def tb(ctx):
        for data, strb in writes:
            await axil_write(ctx, dut.s_axil, ctrl.offset, data, strb)
            for _ in range(3):
                await ctx.tick()
        stop.append(1)

    run(dut, tb, monitor)
    stb = [e for e in log if e[1]]
    # a strobe per write that covers byte 0: all but (7, 0xE) and (1 << 31, 0x8)
    assert [e[2] for e in stb] == [1, 5, 3, 3, 2]
    assert [(e[3], e[4]) for e in stb[:2]] == [(1, 0), (0, 1)]
    # each strobe is high for exactly one cycle, and it is the first cycle of bvalid
    cycles = [e[0] for e in stb]
    assert all(b - a > 1 for a, b in zip(cycles, cycles[1:]))
    for e in stb:
        prev = log[e[0] - 1]
        assert e[6] and not prev[6], "the strobe comes with the first cycle of bvalid"
    resets = [e[0] for e in log if e[5]]
    assert len(resets) == 2 and resets[1] - resets[0] > 1


def test_cam_op_strobe():
    dut = block("tiny")
    reg = dut.regmap.reg("CAM_CTRL")
    count = []

    async def monitor(ctx):
        while True:
            if ctx.get(dut.strobe("cam_ctrl", "op")):
                count.append((ctx.get(dut.cam_ctrl_op), ctx.get(dut.cam_ctrl_used)))
            await ctx.tick()

    async def tb(ctx):
        await axil_write(ctx, dut.s_axil, reg.offset, 1 | 1 << 4)
        await axil_write(ctx, dut.s_axil, reg.offset, 2)
        await ctx.tick()
        assert count == [(1, 1), (2, 0)]

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(tb)
    sim.add_testbench(monitor, background=True)
    sim.run()


@pytest.mark.parametrize("name", PRESETS)
def test_unmapped_addresses(name):
    dut = block(name)
    rm = dut.regmap
    mapped = {r.offset for r in rm}
    holes = [a for a in range(0, 1 << rm.addr_bits, 4) if a not in mapped]
    rng = random.Random(4)
    sample = rng.sample(holes, 12) + [holes[-1]]
    plain = plain_regs(rm)

    async def tb(ctx):
        before = {r.name: (await axil_read(ctx, dut.s_axil, r.offset))[0] for r in plain}
        for a in sample:
            assert await axil_read(ctx, dut.s_axil, a) == (0, SLVERR), hex(a)
            assert await axil_write(ctx, dut.s_axil, a, 0xFFFF_FFFF) == SLVERR, hex(a)
        after = {r.name: (await axil_read(ctx, dut.s_axil, r.offset))[0] for r in plain}
        assert before == after
        # bits 1:0 of the address are ignored
        reg = rm.reg("ROW_STRIDE")
        await axil_write(ctx, dut.s_axil, reg.offset + 3, 0x1234)
        assert await axil_read(ctx, dut.s_axil, reg.offset + 1) == (0x1234, OKAY)

    run(dut, tb)


def test_latency():
    """Read: rvalid three cycles after the AR handshake (one read per four cycles); write:
    bvalid two cycles after the AW+W handshake (one write per two cycles)."""
    dut = block("tiny")
    bus = dut.s_axil
    off = dut.regmap.reg("ROW_STRIDE").offset

    async def tb(ctx):
        ctx.set(bus.araddr, off)
        ctx.set(bus.arvalid, 1)
        ctx.set(bus.rready, 1)
        assert ctx.get(bus.arready)
        await ctx.tick()                            # AR handshake
        ctx.set(bus.arvalid, 0)
        assert not ctx.get(bus.rvalid) and not ctx.get(bus.arready)   # address registered
        await ctx.tick()
        assert not ctx.get(bus.rvalid) and not ctx.get(bus.arready)   # group values
        await ctx.tick()
        assert ctx.get(bus.rvalid) and not ctx.get(bus.arready)
        assert ctx.get(bus.rresp) == 0                                # OKAY
        await ctx.tick()                            # R handshake
        assert not ctx.get(bus.rvalid) and ctx.get(bus.arready)
        ctx.set(bus.awaddr, off)
        ctx.set(bus.wdata, 77)
        ctx.set(bus.wstrb, 0xF)
        ctx.set(bus.awvalid, 1)
        ctx.set(bus.wvalid, 1)
        ctx.set(bus.bready, 1)
        await ctx.tick()                            # AW and W handshakes
        ctx.set(bus.awvalid, 0)
        ctx.set(bus.wvalid, 0)
        assert not ctx.get(bus.bvalid)              # commit cycle
        await ctx.tick()
        assert ctx.get(bus.bvalid) and ctx.get(dut.row_stride) == 77
        await ctx.tick()
        assert not ctx.get(bus.bvalid)

    run(dut, tb)


def test_field_lookup():
    dut = block("ulx3s")
    assert dut.field("ctrl", "cmd") is dut.ctrl_cmd
    assert dut.strobe("CTRL", "cmd") is dut.ctrl_cmd_stb
    assert dut.field("row_bytes") is dut.row_bytes
    assert dut.field("TABLE_BASE[25].HI") is dut.table_base_25_hi
    assert dut.field("STATUS", "busy") is dut.status_busy
    assert len(dut.value64("TABLE_BASE[3]")) == 64
    assert dut.ports["ctrl_cmd_stb"].role == "strobe"
    assert dut.ports["irq_status_dma_error"].role == "event"
    with pytest.raises(KeyError, match="did you mean STATUS"):
        dut.field("STATSU", "busy")
    with pytest.raises(KeyError, match="no hardware port"):
        dut.field("ID")
    with pytest.raises(KeyError, match="no write strobe"):
        dut.strobe("ROW_BYTES", "value")


def test_every_port_follows_the_rule():
    dut = block("ulx3s")
    rm = regmap(preset("ulx3s"))
    names = set(dut.signature.members)
    want = {"s_axil", "irq"}
    for reg in rm:
        for f in reg.fields:
            k = hw_kind(f)
            if k in ("input", "event", "value", "pulse"):
                want.add(port_name(reg, f))
            if f.swmod:
                want.add(port_name(reg, f) + "_stb")
    assert names == want
    assert all("__" not in n and not n.startswith("_") and not n.endswith("_") for n in names)
    assert dut.addr_bits == 11
