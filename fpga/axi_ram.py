"""An AXI4 slave in front of on-chip block RAM: the board's stand-in for host memory.

:class:`AxiRam` serves the accelerator's ``m_axi`` master one transaction at a time (AW has
priority over AR): INCR bursts (FIXED bursts keep their address; WRAP is treated as INCR),
up to 256 beats, IDs echoed on R and B, byte strobes honoured, one beat per cycle in both
directions. A burst whose start address has a bit set at or above ``decode_bits`` is outside
the memory: it is answered DECERR (every R beat, or the B response) and writes nothing. While
``protocol_error`` is set, every other response is SLVERR. The ``m_axi`` address is **folded** into the RAM: word
``(addr / bus_bytes) mod depth`` (so the RAM holds ``depth * bus_bytes`` bytes and the
program must keep its touched rows alias-free, see ``fpga.program.board_layout``).

Every accepted W beat is shown on ``wbeat_*`` (full 64-bit byte address, data, strobes) for
the write signature, and ``protocol_error`` (sticky until ``clear``) records a WLAST that
does not match the burst length, or an address bit set at or above ``track_bits``.
"""

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from hotline_hw.gateware.dma import axi4_signature

__all__ = ["AxiRam"]


class AxiRam(wiring.Component):
    """``AxiRam(data_bits, id_bits, depth, init=(), addr_bits=64, track_bits=None)``; see the
    module docstring. ``track_bits`` (default ``addr_bits``): the address bits the RAM keeps
    in its burst address and shows on ``wbeat_addr`` (the accelerator's
    ``HotlineConfig.addr_bits``: it must drive the bits above 0), so that a small board does
    not carry a 64-bit address counter; an address with an upper bit set is a
    ``protocol_error``. ``decode_bits`` (default ``addr_bits``: all): the address bits the
    memory answers; a burst with a bit set above them is answered DECERR (the board answers
    outside the program's address span, so that the master's upper address bits and its
    error handling stay in the design)."""

    def __init__(self, data_bits, id_bits, depth, init=(), addr_bits=64, track_bits=None,
                 decode_bits=None):
        assert depth & (depth - 1) == 0 and depth >= 2
        self.data_bits, self.id_bits, self.depth = data_bits, id_bits, depth
        self.addr_bits = addr_bits
        self.track_bits = addr_bits if track_bits is None else min(addr_bits, track_bits)
        self.decode_bits = addr_bits if decode_bits is None else decode_bits
        self.bus_bytes = data_bits // 8
        self.init = list(init)
        super().__init__({
            "axi": In(axi4_signature(addr_bits, data_bits, id_bits)),
            "wbeat_valid": Out(1), "wbeat_addr": Out(addr_bits), "wbeat_data": Out(data_bits),
            "wbeat_strb": Out(data_bits // 8),
            "clear": In(1), "protocol_error": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        a = self.axi
        bb = self.bus_bytes
        shift = bb.bit_length() - 1
        abits = self.depth.bit_length() - 1
        # no_rw_check: a word read in a cycle where the write port writes its address is
        # never used (reads and writes are separate states of the FSM below; the read port,
        # enabled outside READ, is reloaded before its first beat), so Yosys needs no
        # old-word emulation (a register and a multiplexer per data bit after the RAM)
        m.submodules.mem = mem = Memory(shape=self.data_bits, depth=self.depth,
                                        init=self.init, attrs={"no_rw_check": 1})
        wr = mem.write_port(granularity=8)
        rd = mem.read_port()

        addr = Signal(self.track_bits)      # byte address of the current beat
        incr = Signal()
        bid = Signal(self.id_bits)
        left = Signal(9)                    # beats still to fetch (reads) / to take (writes)
        rvalid = Signal()
        rlast = Signal()
        step = Signal(self.track_bits)
        m.d.comb += step.eq(bb)

        decerr = Signal()                   # the burst is outside the decoded space
        # DECERR outside; SLVERR once the master broke the protocol (`protocol_error`)
        resp = Mux(decerr, 0b11, Mux(self.protocol_error, 0b10, 0b00))
        m.d.comb += [a.bid.eq(bid), a.rid.eq(bid), a.bresp.eq(resp), a.rresp.eq(resp),
                     a.rdata.eq(rd.data), a.rvalid.eq(rvalid), a.rlast.eq(rlast)]

        # the RAM's data and address inputs follow the W channel and the burst address in
        # every state (no AND with the state ahead of the RAM); only the enables decide
        m.d.comb += [wr.addr.eq(addr[shift:shift + abits]), wr.data.eq(a.wdata),
                     rd.addr.eq(addr[shift:shift + abits])]

        def outside(addr):
            if self.decode_bits >= self.addr_bits:
                return 0
            return addr[self.decode_bits:].any()
        with m.If(self.clear):
            m.d.sync += self.protocol_error.eq(0)

        with m.FSM(name="axi_ram"):
            with m.State("IDLE"):
                m.d.comb += [a.awready.eq(1), a.arready.eq(~a.awvalid)]
                if self.track_bits < self.addr_bits:
                    # an address bit the master must drive 0 (HotlineConfig.addr_bits)
                    hi = slice(self.track_bits, self.addr_bits)
                    with m.If((a.awvalid & a.awaddr[hi].any())
                              | (~a.awvalid & a.arvalid & a.araddr[hi].any())):
                        m.d.sync += self.protocol_error.eq(1)
                with m.If(a.awvalid):
                    m.d.sync += [addr.eq(a.awaddr), bid.eq(a.awid), left.eq(a.awlen + 1),
                                 incr.eq(a.awburst != 0), decerr.eq(outside(a.awaddr))]
                    m.next = "WRITE"
                with m.Elif(a.arvalid):
                    m.d.sync += [addr.eq(a.araddr), bid.eq(a.arid), left.eq(a.arlen + 1),
                                 incr.eq(a.arburst != 0), rvalid.eq(0),
                                 decerr.eq(outside(a.araddr))]
                    m.next = "READ"
            with m.State("WRITE"):
                m.d.comb += [a.wready.eq(1),
                             self.wbeat_addr.eq(addr), self.wbeat_data.eq(a.wdata),
                             self.wbeat_strb.eq(a.wstrb)]
                with m.If(a.wvalid):
                    with m.If(~decerr):
                        m.d.comb += [wr.en.eq(a.wstrb), self.wbeat_valid.eq(1)]
                    m.d.sync += left.eq(left - 1)
                    with m.If(incr):
                        m.d.sync += addr.eq(addr + step)
                    with m.If(a.wlast != (left == 1)):
                        m.d.sync += self.protocol_error.eq(1)
                    with m.If((left == 1) | a.wlast):
                        m.next = "RESP"
            with m.State("RESP"):
                m.d.comb += a.bvalid.eq(1)
                with m.If(a.bready):
                    m.next = "IDLE"
            with m.State("READ"):
                # the read port's output is the R data: a new word is fetched whenever the
                # beat on R is taken (or none is on R), so R runs at one beat per cycle
                adv = ~rvalid | a.rready
                with m.If(adv):
                    with m.If(left != 0):
                        m.d.comb += rd.en.eq(1)
                        m.d.sync += [rvalid.eq(1), rlast.eq(left == 1), left.eq(left - 1)]
                        with m.If(incr):
                            m.d.sync += addr.eq(addr + step)
                    with m.Else():
                        m.d.sync += [rvalid.eq(0), rlast.eq(0)]
                        m.next = "IDLE"
                with m.Else():
                    m.d.comb += rd.en.eq(0)
        return m
