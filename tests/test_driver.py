# amaranth: UnusedElaboratable=no
"""HotlineDriver / AsyncHotlineDriver (hotline_hw/driver.py): against a pure-Python model of
the register semantics (fast, every method), and against the real RegisterBlock RTL in
amaranth.sim (the async driver, awaiting AXI4-Lite accesses)."""

import pytest
from amaranth.sim import Simulator

from golden.params import RuntimeParams, layout
from hotline_hw.config import preset
from hotline_hw.driver import (
    AsyncHotlineDriver, DriverTimeout, HotlineDriver, HotlineError,
)
from hotline_hw.gateware.registers import OKAY, RegisterBlock, axil_read, axil_write
from hotline_hw.regmap import LAST_STATISTICS, STATISTICS, hw_kind, regmap


class FakeHotline:
    """Register semantics of a RegMap in Python: plain storage, write-only fields read 0,
    W1C bits, hardware-driven fields from ``self.hw[(reg, field)]``. Records every write;
    ``on_write`` hooks model a little hardware (the CAM)."""

    def __init__(self, rm):
        self.rm = rm
        self.store = {r.offset: r.reset for r in rm}
        self.hw = {}
        self.writes = []
        self.cam = {}

    def read32(self, addr):
        r = self.rm.at(addr)
        assert r is not None, f"read of unmapped 0x{addr:x}"
        v = 0
        for f in r.fields:
            k = hw_kind(f)
            if k == "input":
                v |= self.hw.get((r.name, f.name), 0) << f.lsb
            elif f.sw_readable:
                v |= self.store[addr] & f.mask
        return v

    def write32(self, addr, value):
        r = self.rm.at(addr)
        assert r is not None, f"write of unmapped 0x{addr:x}"
        assert 0 <= value < 1 << 32
        self.writes.append((r.name, value))
        for f in r.fields:
            if not f.sw_writable:
                continue
            if f.onwrite == "woclr":
                self.store[addr] &= ~(value & f.mask)
            else:
                self.store[addr] = (self.store[addr] & ~f.mask) | (value & f.mask)
        if r.name == "CAM_CTRL":
            self._cam(value)

    def field(self, reg, field):
        f = self.rm.field(reg, field)
        return (self.store[self.rm.reg(reg).offset] >> f.lsb) & ((1 << f.width) - 1)

    def _cam(self, value):
        op = value & 3
        slot = self.field("CAM_SLOT", "value")
        key = self.field("CAM_KEY_LO", "value") | self.field("CAM_KEY_HI", "value") << 32
        done = {"done": 1, "rejected": 0, "used": 0}
        if op == 1:
            if slot == 7:
                done["rejected"] = 1
            else:
                self.cam[slot] = (bool(value >> 4 & 1), key)
        elif op == 2:
            used, key = self.cam.get(slot, (False, 0))
            done["used"] = int(used)
            self.hw[("CAM_READ_KEY_LO", "value")] = key & 0xFFFF_FFFF
            self.hw[("CAM_READ_KEY_HI", "value")] = key >> 32
        for k, v in done.items():
            self.hw[("CAM_STATUS", k)] = v


@pytest.fixture
def fake():
    return FakeHotline(regmap(preset("ulx3s")))


@pytest.fixture
def drv(fake):
    return HotlineDriver(fake.read32, fake.write32, fake.rm)


def test_map_sources(fake, tmp_path):
    path = tmp_path / "regmap.json"
    fake.rm.save(path)
    for src in (fake.rm, path, str(path), fake.rm.to_dict(), preset("ulx3s")):
        d = HotlineDriver(fake.read32, fake.write32, src)
        assert d.addr("ROW_BYTES") == fake.rm.reg("ROW_BYTES").offset
    assert HotlineDriver(fake.read32, fake.write32, path, base=0x1000).addr("ID") == 0x1000
    with pytest.raises(TypeError, match="regmap"):
        HotlineDriver(fake.read32, fake.write32, 42)


def test_named_access(drv, fake):
    assert drv.check_id() == (1, 0)
    assert drv.read("ROW_BYTES") == 64
    drv.write("ROW_BYTES", 128)
    assert drv.read("ROW_BYTES") == 128
    fake.hw[("STATUS", "busy")] = 1
    fake.hw[("STATUS", "mode")] = 2
    assert drv.read_field("STATUS", "busy") == 1
    assert drv.read_fields("STATUS")["mode"] == 2
    drv.write64("TABLE_BASE[5]", 0x1_2345_6789_ABCD)
    assert fake.writes[-2:] == [("TABLE_BASE[5].LO", 0x6789_ABCD), ("TABLE_BASE[5].HI", 0x12345)]
    assert drv.read64("TABLE_BASE[5]") == 0x1_2345_6789_ABCD
    fake.hw[("STAT_BYTES_READ_LO", "value")] = 5
    fake.hw[("STAT_BYTES_READ_HI", "value")] = 2
    assert drv.read64("STAT_BYTES_READ") == (2 << 32) | 5


def test_unknown_names(drv):
    with pytest.raises(KeyError, match="did you mean STATUS"):
        drv.read("STATSU")
    with pytest.raises(KeyError, match="did you mean busy"):
        drv.read_field("STATUS", "bsy")
    with pytest.raises(KeyError, match="did you mean POPULAR_BASE"):
        drv.write64("POPULAR_BAS", 0)
    with pytest.raises(ValueError, match="STATUS is read-only"):
        drv.write("STATUS", 1)
    with pytest.raises(ValueError, match=r"does not fit in \d+ bits"):
        drv.write_field("ROW_BYTES", "value", 4096)
    with pytest.raises(ValueError, match="'JUMP' is not one of"):
        drv.command("JUMP")


def test_field_writes(drv, fake):
    # IRQ_ENABLE is plain storage: read-modify-write keeps the other bits
    drv.write("IRQ_ENABLE", 0b100001)
    drv.write_field("IRQ_ENABLE", "overflow", 1)
    assert drv.read("IRQ_ENABLE") == 0b100101
    # CTRL is write-only: one write, the other fields 0, no read
    n = len(fake.writes)
    drv.learn(clear=False)
    drv.scatter(1)
    drv.soft_reset()
    assert fake.writes[n:] == [("CTRL", 1), ("CTRL", 5 | 1 << 8), ("CTRL", 1 << 31)]
    drv.learn()
    assert fake.writes[-1] == ("CTRL", 1 | 1 << 4)
    for method, code in (("install", 2), ("train", 3), ("stop", 4), ("evict", 6),
                         ("clear_stats", 7)):
        getattr(drv, method)()
        assert fake.writes[-1] == ("CTRL", code)


def test_configure_writes_runtime_params(drv, fake):
    cfg = preset("ulx3s")
    params = layout(cfg, [1000 + 37 * t for t in range(cfg.num_tables)], base=0xF_0000_0000,
                    row_stride=128, learn_period=3, learn_threshold=7)
    drv.configure(params)
    for t, a in enumerate(params.table_base):
        assert drv.read64(f"TABLE_BASE[{t}]") == a
    for b, a in enumerate(params.staging_base):
        assert drv.read64(f"STAGING_BASE[{b}]") == a
    assert drv.read64("POPULAR_BASE") == params.popular_base
    assert (drv.read("ROW_STRIDE"), drv.read("ROW_BYTES")) == (128, 64)
    assert (drv.read("LEARN_PERIOD"), drv.read("LEARN_THRESHOLD")) == (3, 7)
    with pytest.raises(ValueError, match="2 table bases for 26 TABLE_BASE registers"):
        drv.configure(RuntimeParams((0, 0), 64, 64, 0, (0, 0)))


def test_wait_idle(drv, fake):
    fake.hw[("STATUS", "busy")] = 0
    assert drv.wait_idle()["busy"] == 0
    fake.hw[("STATUS", "busy")] = 1
    with pytest.raises(DriverTimeout, match="wait_idle: still not done.*'busy': 1"):
        drv.wait_idle(timeout=0.05)
    polls = []
    d = HotlineDriver(fake.read32, fake.write32, fake.rm,
                      poll_delay=lambda: polls.append(1) or fake.hw.update({("STATUS", "busy"): 0}))
    assert d.wait_idle()["busy"] == 0 and polls == [1]


def test_cam_access(drv, fake):
    key = 0x1234_5678                           # ulx3s keys have 29 bits
    assert drv.cam_write(3, key, used=True)
    assert fake.cam[3] == (True, key)
    assert drv.cam_read(3) == (True, key)
    with pytest.raises(ValueError, match="CAM_KEY_LO.value: .* does not fit in 29 bits"):
        drv.cam_write(3, 1 << 30)
    assert drv.cam_read(4) == (False, 0)
    assert not drv.cam_write(7, 1)              # the fake rejects slot 7


def test_stats(drv, fake):
    fake.hw[("STAT_HITS", "value")] = 11
    fake.hw[("STAT_BUSY_CYCLES_HI", "value")] = 1
    fake.hw[("LAST_OVERFLOWS", "value")] = 4
    st = drv.stats()
    assert st["hits"] == 11 and st["busy_cycles"] == 1 << 32 and st["last_overflows"] == 4
    assert len(st) == len(STATISTICS) + len(LAST_STATISTICS)
    assert "busy_cycles_lo" not in st


def test_check_errors(drv, fake):
    fake.hw[("STATUS", "overflow")] = 1
    assert drv.check_errors()["overflow"] == 1          # overflow is no error
    fake.hw[("STATUS", "dma_error")] = 1
    fake.hw[("STATUS", "cmd_error")] = 1
    fake.hw[("DMA_ERROR_ADDR_LO", "value")] = 0x8000_1000
    fake.hw[("DMA_ERROR_ADDR_HI", "value")] = 0x2
    fake.hw[("DMA_ERROR_RESP", "value")] = 2
    with pytest.raises(HotlineError, match=r"cmd_error, dma_error \(DMA SLVERR at address "
                                           r"0x0000000280001000") as e:
        drv.check_errors()
    assert e.value.bits == ["cmd_error", "dma_error"] and e.value.dma_addr == 0x2_8000_1000
    with pytest.raises(HotlineError, match="error: cmd_error$"):
        drv.check_errors(ignore=["dma_error"])


def test_irq_helpers(drv, fake):
    drv.irq_enable("cmd_done", "dma_error")
    assert drv.read("IRQ_ENABLE") == 0b11
    drv.irq_enable()
    assert drv.read("IRQ_ENABLE") == 0
    fake.store[fake.rm.reg("IRQ_STATUS").offset] = 0b100101
    assert drv.irq_status() == {"cmd_done", "overflow", "minibatch_done"}
    drv.irq_clear("overflow")
    assert drv.irq_status() == {"cmd_done", "minibatch_done"}
    drv.irq_clear()
    assert drv.irq_status() == frozenset()


def test_check_id_rejects_other_devices(fake):
    drv = HotlineDriver(lambda a: 0xDEADBEEF, fake.write32, fake.rm)
    with pytest.raises(HotlineError, match="no Hotline accelerator"):
        drv.check_id()


# --- the async driver against the RTL --------------------------------------------------------

def run_rtl(cfg, body):
    """Run ``body(ctx, dut, drv)`` with an AsyncHotlineDriver over the RegisterBlock's
    AXI4-Lite port (every access checked for OKAY)."""
    dut = RegisterBlock(cfg)

    async def tb(ctx):
        async def read32(addr):
            data, resp = await axil_read(ctx, dut.s_axil, addr)
            assert resp == OKAY, hex(addr)
            return data

        async def write32(addr, value):
            assert await axil_write(ctx, dut.s_axil, addr, value) == OKAY, hex(addr)

        drv = AsyncHotlineDriver(read32, write32, dut.regmap)
        await body(ctx, dut, drv)

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(tb)
    sim.run()


def test_rtl_configure_and_read_back():
    cfg = preset("tiny")
    params = layout(cfg, [100, 200, 300], base=0x1_0000_0000, learn_period=2,
                    learn_threshold=9)

    async def body(ctx, dut, drv):
        assert await drv.check_id() == (1, 0)
        await drv.configure(params)
        for t, a in enumerate(params.table_base):
            assert ctx.get(dut.value64(f"TABLE_BASE[{t}]")) == a
            assert await drv.read64(f"TABLE_BASE[{t}]") == a
        for b, a in enumerate(params.staging_base):
            assert ctx.get(dut.value64(f"STAGING_BASE[{b}]")) == a
        assert ctx.get(dut.value64("POPULAR_BASE")) == params.popular_base
        assert ctx.get(dut.row_stride) == params.row_stride
        assert ctx.get(dut.row_bytes) == params.row_bytes
        assert ctx.get(dut.learn_period) == 2 and ctx.get(dut.learn_threshold) == 9

    run_rtl(cfg, body)


def test_rtl_commands_status_and_errors():
    cfg = preset("tiny")

    async def body(ctx, dut, drv):
        await drv.scatter(1)
        assert (ctx.get(dut.ctrl_cmd), ctx.get(dut.ctrl_bank)) == (5, 1)
        ctx.set(dut.field("STATUS", "busy"), 1)
        with pytest.raises(DriverTimeout):
            await drv.wait_idle(timeout=0.01)
        ctx.set(dut.field("STATUS", "busy"), 0)
        assert (await drv.wait_idle())["busy"] == 0
        ctx.set(dut.status_dma_error, 1)
        ctx.set(dut.value64("DMA_ERROR_ADDR"), 0xABCD_0000_1234)
        ctx.set(dut.dma_error_resp, 3)
        with pytest.raises(HotlineError, match="DMA DECERR at address 0x0000abcd00001234"):
            await drv.check_errors()
        # an interrupt event, enabled, raises irq; irq_clear drops it
        await drv.irq_enable("dma_error")
        ctx.set(dut.irq_status_dma_error, 1)
        await ctx.tick()
        ctx.set(dut.irq_status_dma_error, 0)
        assert ctx.get(dut.irq)
        assert await drv.irq_status() == {"dma_error"}
        await drv.irq_clear()
        await ctx.tick()
        assert not ctx.get(dut.irq)
        ctx.set(dut.stat_hits, 99)
        ctx.set(dut.value64("STAT_BYTES_WRITTEN"), 5 << 32 | 7)
        st = await drv.stats()
        assert st["hits"] == 99 and st["bytes_written"] == 5 << 32 | 7

    run_rtl(cfg, body)


@pytest.mark.parametrize("addr_bits", [20, 40])
def test_narrow_addresses(addr_bits):
    """addr_bits < 64: a base must fit the implemented bits; a constant HI is neither
    written nor read."""
    cfg = preset("tiny", addr_bits=addr_bits, stats_bits=12)
    fake = FakeHotline(regmap(cfg))
    drv = HotlineDriver(fake.read32, fake.write32, fake.rm)
    assert drv.wide_bits("POPULAR_BASE") == drv.wide_bits("TABLE_BASE[2]") == addr_bits
    assert drv.wide_bits("DMA_ERROR_ADDR") == addr_bits
    assert drv.wide_bits("STAT_BYTES_READ") == 24 and drv.wide_bits("STAT_BUSY_CYCLES") == 24
    top = (1 << addr_bits) - 64
    drv.write64("POPULAR_BASE", top)
    assert drv.read64("POPULAR_BASE") == top
    hi_writes = [w for w in fake.writes if w[0] == "POPULAR_BASE_HI"]
    assert bool(hi_writes) == (addr_bits > 32)
    with pytest.raises(ValueError, match=f"does not fit in the {addr_bits} implemented bits "
                                         r"\(addr_bits"):
        drv.write64("TABLE_BASE[0]", 1 << addr_bits)
    fake.hw[("STAT_BYTES_READ_LO", "value")] = 0xABCDEF
    assert drv.stats()["bytes_read"] == 0xABCDEF


def test_narrow_registers_in_rtl():
    """The register block implements addr_bits bits of a base (bits above read 0, a write
    to the constant HI is ignored) and stats_bits bits of a statistic."""
    cfg = preset("tiny", addr_bits=20, stats_bits=8)

    async def body(ctx, dut, drv):
        hi = drv.map.reg("TABLE_BASE[1].HI")
        assert len(dut.value64("TABLE_BASE[1]")) == 20
        assert len(dut.value64("STAT_BUSY_CYCLES")) == 16
        assert len(dut.field("STAT_LOOKUPS")) == 8
        await drv.write("TABLE_BASE[1].LO", 0xFFFF_FFFF)
        assert await axil_write(ctx, dut.s_axil, hi.offset, 0xFFFF_FFFF) == OKAY   # ignored
        assert await drv.read("TABLE_BASE[1].LO") == 0xF_FFFF
        assert ctx.get(dut.value64("TABLE_BASE[1]")) == 0xF_FFFF
        assert await drv.read("TABLE_BASE[1].HI") == 0

    run_rtl(cfg, body)
