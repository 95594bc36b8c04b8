"""The control and status registers: an AXI4-Lite slave built from the register map.

:class:`RegisterBlock` walks the :class:`~hotline_hw.regmap.RegMap` compiled from the
SystemRDL source (:mod:`hotline_hw.regmap`); it holds no address of its own. Adding a
register or a field to the map adds its storage, its decode and its hardware port here.
"""

from dataclasses import dataclass

from amaranth.hdl import Cat, Const, Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ..regmap import RegMap, RegMapError, hw_kind, port_name, regmap as compile_map

__all__ = ["RegisterBlock", "PortRole", "axil_signature", "axil_read", "axil_write", "OKAY",
           "SLVERR"]

#: AXI responses.
OKAY = 0b00
SLVERR = 0b10


def axil_signature(addr_bits, data_bits=32):
    """AXI4-Lite as seen from the *master* (``In(axil_signature(...))`` is a slave). A plain
    ``wiring.Signature``, so the exported ports are ``s_axil_awaddr``, ... (the names
    cocotbext-axi's ``AxiLiteBus.from_prefix(dut, "s_axil")`` finds)."""
    return wiring.Signature({
        "awaddr": Out(addr_bits), "awprot": Out(3), "awvalid": Out(1), "awready": In(1),
        "wdata": Out(data_bits), "wstrb": Out(data_bits // 8), "wvalid": Out(1),
        "wready": In(1),
        "bresp": In(2), "bvalid": In(1), "bready": Out(1),
        "araddr": Out(addr_bits), "arprot": Out(3), "arvalid": Out(1), "arready": In(1),
        "rdata": In(data_bits), "rresp": In(2), "rvalid": In(1), "rready": Out(1),
    })


@dataclass(frozen=True)
class PortRole:
    """What a hardware port of :class:`RegisterBlock` carries.

    ``role``: ``"value"`` (Out: the field's stored value), ``"strobe"`` (Out: one-cycle pulse
    per software write of a ``swmod`` field), ``"pulse"`` (Out: a ``singlepulse`` field, high
    for one cycle after software writes 1), ``"input"`` (In: a hardware-driven field, read by
    software as is), ``"event"`` (In: a pulse that sets an interrupt bit of ``IRQ_STATUS``).
    """
    port: str
    reg: str
    field: str
    role: str
    width: int


class RegisterBlock(wiring.Component):
    """AXI4-Lite register block of the accelerator, generated from the register map.

    Parameters
    ----------
    cfg : HotlineConfig
        The configuration; the map is :func:`hotline_hw.regmap.regmap` ``(cfg)``.
    regmap : RegMap, optional
        Use this map instead (it must come from the same SystemRDL flow).

    Members
    -------
    s_axil : ``In(axil_signature(regmap.addr_bits))``
        AXI4-Lite slave, 32-bit data, byte addresses; exported as ``s_axil_awaddr``, ...
    irq : ``Out(1)``
        ``|(IRQ_STATUS & IRQ_ENABLE)``, a level (combinational from the two registers).
    <port> : one per field that hardware sees, see *Port naming* below.

    Port naming
    -----------
    Every field that hardware reads or drives has one port named by
    :func:`hotline_hw.regmap.port_name`: the register name in lower case, ``[i]`` written
    ``_i`` and ``.`` written ``_``, then ``_<field>``; a register whose only field is
    ``value`` gives the bare register part. Examples: ``CTRL.cmd`` -> ``ctrl_cmd``,
    ``STATUS.busy`` -> ``status_busy``, ``ROW_BYTES`` -> ``row_bytes``,
    ``TABLE_BASE[3].LO`` -> ``table_base_3_lo``, ``STAT_BYTES_READ_HI`` ->
    ``stat_bytes_read_hi``, ``IRQ_STATUS.dma_error`` -> ``irq_status_dma_error``. By field
    kind:

    - software-writable, hardware-read (``sw=rw|w, hw=r``): ``Out(width)``, the stored value
      (it holds until software writes again);
    - ``swmod`` (commands: ``CTRL.cmd``, ``CAM_CTRL.op``): additionally ``<port>_stb``,
      ``Out(1)``, high for exactly one cycle per software write that strobes a byte of the
      field, in the cycle the new value first shows on ``<port>``;
    - ``singlepulse`` (``CTRL.soft_reset``): ``Out(1)``, high for one cycle after software
      writes 1, 0 otherwise;
    - hardware-driven (``sw=r, hw=w``: ``STATUS``, statistics, ``CAM_STATUS``, ...):
      ``In(width)``, sampled when software reads;
    - interrupt bits (``IRQ_STATUS``): ``In(1)``, a one-cycle (or longer) pulse sets the bit;
    - constants (``ID``, ``VERSION``, ``CFG_*``) and software-only storage (``IRQ_ENABLE``)
      have no port.

    Use :meth:`field` / :meth:`strobe` (or :attr:`ports`) to find a port from the register
    and field name rather than spelling the port name.

    Bus behaviour
    -------------
    - Reads and writes proceed independently, one transaction of each kind at a time.
    - Address bits 1:0 are ignored (accesses are 32-bit words); byte strobes are honoured
      (a field's byte is written only when its ``wstrb`` bit is set).
    - Writes to read-only registers and to read-only fields are ignored (``OKAY``);
      write-only fields read as 0.
    - An address with no register, read or written, answers ``SLVERR`` (reads return 0)
      and changes nothing.
    - ``IRQ_STATUS`` bits clear where 1 is written; a hardware event in the same cycle wins.

    Latency
    -------
    - Read: ``arready`` is high while no read is in progress; ``rvalid`` rises three
      cycles after the ``AR`` handshake with the data sampled the cycle after the handshake
      (so ``In`` ports are read as they were then): the address is registered, then each
      group of 16 registers' value, then the addressed group's. One read per four cycles
      with ``rready`` held high.
    - Write: ``AW`` and ``W`` are taken independently (``awready``/``wready`` high while
      the respective holding register is empty); the cycle after both are held the write
      commits, and the next cycle ``bvalid`` rises while the new values and the strobes are
      visible on the ports. One write per two cycles with ``AW``, ``W`` together and
      ``bready`` held high.
    """

    def __init__(self, cfg=None, *, regmap=None):
        if regmap is None:
            if cfg is None:
                raise TypeError("RegisterBlock needs a HotlineConfig or a RegMap")
            regmap = compile_map(cfg)
        if not isinstance(regmap, RegMap):
            raise TypeError(f"regmap must be a RegMap, not {type(regmap).__name__}")
        self.cfg = cfg
        self.regmap = regmap
        self.addr_bits = regmap.addr_bits
        members = {"s_axil": In(axil_signature(self.addr_bits)), "irq": Out(1)}
        roles = {}

        def add(name, member, reg, field, role, width):
            if name in members or name in roles:
                raise RegMapError(f"port {name!r} of {reg.name}.{field.name} clashes with "
                                  f"another port")
            members[name] = member
            roles[name] = PortRole(name, reg.name, field.name, role, width)

        for reg in regmap:
            for f in reg.fields:
                kind = hw_kind(f)
                name = port_name(reg, f)
                if kind == "input":
                    add(name, In(f.width), reg, f, "input", f.width)
                elif kind == "event":
                    add(name, In(1), reg, f, "event", 1)
                elif kind in ("value", "pulse"):
                    # the port is the field's storage: it starts at the reset value
                    add(name, Out(f.width, init=0 if f.singlepulse else f.reset or 0), reg, f,
                        kind, f.width)
                    if f.swmod:
                        add(f"{name}_stb", Out(1), reg, f, "strobe", 1)
        self._roles = roles
        self._by_field = {(r.reg, r.field, r.role == "strobe"): r.port for r in roles.values()}
        super().__init__(members)

    # --- finding ports -----------------------------------------------------------------------
    @property
    def ports(self):
        """``{port name: PortRole}`` of every register-side port (not ``s_axil``/``irq``)."""
        return dict(self._roles)

    def _reg(self, reg):
        for name in (reg, str(reg).upper()):
            if name in self.regmap:
                return self.regmap.reg(name)
        return self.regmap.reg(reg)          # KeyError with near matches

    def field(self, reg, field="value"):
        """The port of field ``field`` of register ``reg`` (register name case-insensitive:
        ``block.field("ctrl", "cmd")``, ``block.field("TABLE_BASE[3].LO")``)."""
        r = self._reg(reg)
        f = r.field(field)
        try:
            return getattr(self, self._by_field[(r.name, f.name, False)])
        except KeyError:
            raise KeyError(f"{r.name}.{f.name} has no hardware port (a constant or "
                           f"software-only field)") from None

    def strobe(self, reg, field):
        """The one-cycle write strobe of a ``swmod`` field (``block.strobe("ctrl", "cmd")``)."""
        r = self._reg(reg)
        f = r.field(field)
        try:
            return getattr(self, self._by_field[(r.name, f.name, True)])
        except KeyError:
            raise KeyError(f"{r.name}.{f.name} has no write strobe (not swmod)") from None

    def value64(self, name):
        """``Cat(LO, HI)`` of the 64-bit pair ``name`` (``"POPULAR_BASE"``,
        ``"TABLE_BASE[3]"``, ``"STAT_BYTES_READ"``): the implemented bits of the pair (64,
        or fewer for ``addr_bits`` / ``stats_bits`` < 64: then a constant HI is left out and
        LO may be narrower than 32 bits). ``Out`` pairs zero-extend where used; for ``In``
        pairs, assign to it to drive both halves (the value is truncated to the width)."""
        lo, hi = self.regmap.wide(str(name).upper())
        lo_port = self.field(lo.name)
        if hw_kind(hi.field("value")) == "const":
            return Cat(lo_port)
        if len(lo_port) != 32:
            raise RegMapError(f"{name}: LO of a pair with a HI half must be 32 bits wide")
        return Cat(lo_port, self.field(hi.name))

    # --- gateware ----------------------------------------------------------------------------
    def elaborate(self, platform):
        m = Module()
        bus = self.s_axil
        rm = self.regmap
        word = slice(2, self.addr_bits)

        # storage and the readable value of every field
        store = {}                           # (reg, field) -> Signal
        readable = {}                        # (reg, field) -> value software reads
        for reg in rm:
            for f in reg.fields:
                kind = hw_kind(f)
                key = (reg.name, f.name)
                if kind == "const":
                    readable[key] = Const(f.reset or 0, f.width)
                    continue
                if kind == "input":
                    readable[key] = getattr(self, port_name(reg, f))
                    continue
                if kind in ("value", "pulse"):
                    sig = getattr(self, port_name(reg, f))
                else:
                    sig = Signal(f.width, init=f.reset or 0, name=port_name(reg, f))
                store[key] = sig
                if f.sw_readable:
                    readable[key] = sig
                if f.singlepulse:
                    m.d.sync += sig.eq(0)
                if f.swmod:
                    m.d.sync += getattr(self, port_name(reg, f) + "_stb").eq(0)

        # --- write channel ---------------------------------------------------------------
        aw_full = Signal()
        aw_addr = Signal(self.addr_bits)
        w_full = Signal()
        w_data = Signal(32)
        w_strb = Signal(4)
        m.d.comb += [bus.awready.eq(~aw_full), bus.wready.eq(~w_full)]
        with m.If(bus.awvalid & bus.awready):
            m.d.sync += [aw_full.eq(1), aw_addr.eq(bus.awaddr)]
        with m.If(bus.wvalid & bus.wready):
            m.d.sync += [w_full.eq(1), w_data.eq(bus.wdata), w_strb.eq(bus.wstrb)]
        with m.If(bus.bvalid & bus.bready):
            m.d.sync += bus.bvalid.eq(0)
        commit = Signal()
        m.d.comb += commit.eq(aw_full & w_full & ~bus.bvalid)
        with m.If(commit):
            m.d.sync += [aw_full.eq(0), w_full.eq(0), bus.bvalid.eq(1), bus.bresp.eq(SLVERR)]
            with m.Switch(aw_addr[word]):
                for reg in rm:
                    with m.Case(reg.offset >> 2):
                        m.d.sync += bus.bresp.eq(OKAY)
                        self._write(m, reg, store, w_data, w_strb)

        # hardware events set interrupt bits after (so over) a software clear
        for name, role in self._roles.items():
            if role.role == "event":
                with m.If(getattr(self, name)):
                    m.d.sync += store[(role.reg, role.field)].eq(1)

        # --- read channel ----------------------------------------------------------------
        # three stages: the AR handshake registers the address (ar_full); the next cycle each
        # group of 16 registers (by the high address bits) loads its read multiplexer's
        # value into a register (r1_full), so every field is sampled then; the cycle after,
        # rdata takes the addressed group's value. Neither the bus's address nor one
        # multiplexer over every readable field is between two registers.
        GROUP = 4                            # address bits (words) within a group
        ar_full = Signal()
        r1_full = Signal()
        ar_addr = Signal(len(bus.araddr[word]))
        r1_hi = Signal(max(1, len(ar_addr) - GROUP))
        groups = {}                          # group -> its registers
        for reg in rm:
            groups.setdefault((reg.offset >> 2) >> GROUP, []).append(reg)
        g_data = {g: Signal(32, name=f"r1_data{g}") for g in groups}
        g_ok = {g: Signal(name=f"r1_ok{g}") for g in groups}
        m.d.comb += bus.arready.eq(~ar_full & ~r1_full & ~bus.rvalid)
        with m.If(bus.rvalid & bus.rready):
            m.d.sync += bus.rvalid.eq(0)
        with m.If(bus.arvalid & bus.arready):
            m.d.sync += [ar_full.eq(1), ar_addr.eq(bus.araddr[word])]
        with m.If(ar_full):
            m.d.sync += [ar_full.eq(0), r1_full.eq(1), r1_hi.eq(ar_addr >> GROUP)]
            for g, regs in groups.items():
                m.d.sync += [g_data[g].eq(0), g_ok[g].eq(0)]
                with m.Switch(ar_addr[:GROUP]):
                    for reg in regs:
                        with m.Case((reg.offset >> 2) & ((1 << GROUP) - 1)):
                            m.d.sync += [g_ok[g].eq(1),
                                         g_data[g].eq(self._read_value(reg, readable))]
        with m.If(r1_full):
            m.d.sync += [r1_full.eq(0), bus.rvalid.eq(1), bus.rdata.eq(0), bus.rresp.eq(SLVERR)]
            with m.Switch(r1_hi):
                for g in groups:
                    with m.Case(g):
                        with m.If(g_ok[g]):
                            m.d.sync += [bus.rresp.eq(OKAY), bus.rdata.eq(g_data[g])]

        # --- interrupt -------------------------------------------------------------------
        pending = []
        for reg in rm:
            for f in reg.fields:
                if f.intr:
                    bit = store[(reg.name, f.name)]
                    if f.enable is None:
                        pending.append(bit)
                        continue
                    ereg, _, efield = f.enable.rpartition(".")
                    en = store.get((ereg, efield))
                    if en is None:
                        en = Const(rm.field(ereg, efield).reset or 0, 1)
                    pending.append(bit & en)
        m.d.comb += self.irq.eq(Cat(*pending).any() if pending else 0)
        return m

    def _write(self, m, reg, store, w_data, w_strb):
        """Software write of ``reg`` (inside the commit's ``Case``), byte by byte."""
        for f in reg.fields:
            sig = store.get((reg.name, f.name))
            if sig is None or not f.sw_writable:
                continue
            strobed = []
            # split the field at byte boundaries: each piece follows its wstrb bit
            b = f.lsb
            while b <= f.msb:
                end = min(f.msb, (b // 8) * 8 + 7)
                lo, hi = b - f.lsb, end - f.lsb + 1
                en = w_strb[b // 8]
                strobed.append(en)
                with m.If(en):
                    if f.onwrite == "woclr":
                        m.d.sync += sig[lo:hi].eq(sig[lo:hi] & ~w_data[b:end + 1])
                    else:
                        m.d.sync += sig[lo:hi].eq(w_data[b:end + 1])
                b = end + 1
            if f.swmod:
                m.d.sync += getattr(self, port_name(reg, f) + "_stb").eq(Cat(*strobed).any())

    @staticmethod
    def _read_value(reg, readable):
        parts, pos = [], 0
        for f in sorted(reg.fields, key=lambda f: f.lsb):
            v = readable.get((reg.name, f.name))
            if v is None:
                continue
            if f.lsb > pos:
                parts.append(Const(0, f.lsb - pos))
            parts.append(v)
            pos = f.lsb + f.width
        if pos < 32:
            parts.append(Const(0, 32 - pos))
        return Cat(*parts)


# --- amaranth.sim helpers (tests, and the top's tests) ----------------------------------------

async def axil_write(ctx, bus, addr, data, strb=0xF, *, aw_delay=0, w_delay=0, b_delay=0):
    """Write through AXI4-Lite ``bus`` (the slave's ``s_axil``) in an ``amaranth.sim``
    testbench: ``AW`` after ``aw_delay`` cycles, ``W`` after ``w_delay`` cycles, ``bready``
    after ``b_delay`` cycles (each channel on its own). Return ``bresp``."""
    ctx.set(bus.awaddr, addr)
    ctx.set(bus.wdata, data)
    ctx.set(bus.wstrb, strb)
    delays = {"aw": aw_delay, "w": w_delay, "b": b_delay}
    done = {"aw": False, "w": False}
    cycle = 0
    while True:
        ctx.set(bus.awvalid, not done["aw"] and cycle >= delays["aw"])
        ctx.set(bus.wvalid, not done["w"] and cycle >= delays["w"])
        ctx.set(bus.bready, cycle >= delays["b"])
        aw = ctx.get(bus.awvalid) and ctx.get(bus.awready)
        w = ctx.get(bus.wvalid) and ctx.get(bus.wready)
        b = ctx.get(bus.bvalid) and ctx.get(bus.bready)
        resp = ctx.get(bus.bresp)
        await ctx.tick()
        cycle += 1
        done["aw"] |= bool(aw)
        done["w"] |= bool(w)
        if b:
            assert done["aw"] and done["w"], "B before AW and W were taken"
            break
    ctx.set(bus.awvalid, 0)
    ctx.set(bus.wvalid, 0)
    ctx.set(bus.bready, 0)
    return resp


async def axil_read(ctx, bus, addr, *, r_delay=0):
    """Read through AXI4-Lite ``bus`` in an ``amaranth.sim`` testbench; ``rready`` rises
    ``r_delay`` cycles after ``arvalid``. Return ``(rdata, rresp)``."""
    ctx.set(bus.araddr, addr)
    ctx.set(bus.arvalid, 1)
    cycle = 0
    while True:
        ctx.set(bus.rready, cycle >= r_delay)
        ar = ctx.get(bus.arvalid) and ctx.get(bus.arready)
        r = ctx.get(bus.rvalid) and ctx.get(bus.rready)
        data, resp = ctx.get(bus.rdata), ctx.get(bus.rresp)
        await ctx.tick()
        cycle += 1
        if ar:
            ctx.set(bus.arvalid, 0)
        if r:
            break
    ctx.set(bus.rready, 0)
    return data, resp
