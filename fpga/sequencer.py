"""The ROM-programmed engine that runs the Hotline flow on the board: an AXI4-Lite master
for the registers and an AXI4-Stream master for the lookups.

The program (``fpga.program``) is a list of operations, one ROM word each::

    op (3) | slot (3) | addr (addr_bits) | a (32) | b (32)

``WRITE addr, a`` (byte strobes ``b[:4]``); ``READ addr`` (checked when ``a != 0``: ``(data & a) == b``, else
``mismatch`` and ``fail_op``; checked data is folded into the statistics MISR; ``slot`` != 0
captures the data into ``display[slot - 1]``); ``POLL addr, a, b`` (read until
``(data & a) == b``); ``STREAM a, b`` (lookup beats ``[a, b)`` of the lookup ROM, blocking
until the last one is taken); ``END``. A non-OKAY AXI4-Lite response sets ``bus_error``.
``start`` (a pulse) runs the program from operation 0; ``done`` rises at ``END`` (the board
top stops a run that hangs by resetting the sequencer).
"""

from amaranth.hdl import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from hotline_hw.gateware.registers import axil_signature
from hotline_hw.gateware.top import axis_signature

from .program import OP_POLL, OP_READ, OP_STREAM, OP_WRITE
from .signature import W, Misr

__all__ = ["Sequencer", "encode_ops", "encode_beats"]


def encode_ops(ops, addr_bits):
    words = []
    for o in ops:
        w = o.op | (o.slot << 3) | (o.addr << 6) | (o.a << (6 + addr_bits)) \
            | (o.b << (38 + addr_bits))
        words.append(w)
    return words


def encode_beats(beats, in_bits):
    kb = in_bits // 8
    return [d | (k << in_bits) | (u << (in_bits + kb)) | (l << (in_bits + kb + 1))
            for d, k, u, l in beats]


class Sequencer(wiring.Component):
    def __init__(self, ops, beats, addr_bits, in_bits, display_slots=4):
        self.ops, self.beats = list(ops), list(beats)
        self.addr_bits, self.in_bits = addr_bits, in_bits
        self.nslots = display_slots
        super().__init__({
            "m_axil": Out(axil_signature(addr_bits)),
            "m_axis": Out(axis_signature(in_bits)),
            "start": In(1),
            "running": Out(1), "done": Out(1),
            "mismatch": Out(1), "bus_error": Out(1), "fail_op": Out(16),
            "pc": Out(16),
            "stats_sig": Out(W),
            "display": Out(32).array(display_slots),
        })

    def elaborate(self, platform):
        m = Module()
        ab, ib = self.addr_bits, self.in_bits
        op_words = encode_ops(self.ops, ab)
        op_width = 70 + ab
        m.submodules.prog = prog = Memory(shape=op_width, depth=max(2, len(op_words)),
                                          init=op_words)
        beat_width = ib + ib // 8 + 2
        beat_words = encode_beats(self.beats, ib) or [0]
        m.submodules.lookups = lrom = Memory(shape=beat_width, depth=max(2, len(beat_words)),
                                             init=beat_words)
        pr = prog.read_port()
        lr = lrom.read_port()
        m.submodules.misr = misr = Misr(32)

        pc = Signal(16)
        # the operation is read from the ROM's port itself: pc changes only when the next
        # operation is fetched, so the port holds mem[pc] from DECODE until then (no copy)
        word = pr.data
        m.d.comb += [pr.addr.eq(pc), self.pc.eq(pc), self.stats_sig.eq(misr.state)]
        opc, slot = word[0:3], word[3:6]
        addr, a, b = word[6:6 + ab], word[6 + ab:38 + ab], word[38 + ab:70 + ab]

        axil, axis = self.m_axil, self.m_axis
        rdata = Signal(32)
        bidx = Signal(16)           # next beat to fetch
        # lookup ROM: beat ``bidx`` is on the read port's output one cycle after it is
        # addressed; the stream holds it until taken
        m.d.comb += [lr.addr.eq(bidx),
                     axis.tdata.eq(lr.data[:ib]), axis.tkeep.eq(lr.data[ib:ib + ib // 8]),
                     axis.tuser.eq(lr.data[ib + ib // 8]), axis.tlast.eq(lr.data[ib + ib // 8 + 1])]
        m.d.comb += [axil.awprot.eq(0), axil.arprot.eq(0), axil.wstrb.eq(b[:4]),
                     axil.awaddr.eq(addr), axil.araddr.eq(addr), axil.wdata.eq(a)]

        def fetch_next():
            m.d.sync += pc.eq(pc + 1)
            m.next = "FETCH"

        with m.FSM(name="seq") as fsm:
            with m.State("IDLE"):
                with m.If(self.start):
                    m.d.sync += [pc.eq(0), self.done.eq(0), self.mismatch.eq(0),
                                 self.bus_error.eq(0), self.fail_op.eq(0)]
                    m.d.comb += misr.clear.eq(1)
                    for d in self.display:
                        m.d.sync += d.eq(0)
                    m.next = "FETCH"
            with m.State("FETCH"):           # the ROM word of pc arrives next cycle
                m.next = "DECODE"
            with m.State("DECODE"):
                m.next = "EXEC"
            with m.State("EXEC"):
                with m.Switch(opc):
                    with m.Case(OP_WRITE):
                        m.next = "WR"
                    with m.Case(OP_READ, OP_POLL):
                        m.next = "RD_AR"
                    with m.Case(OP_STREAM):
                        m.d.sync += bidx.eq(a)
                        m.next = "ST_LOAD"
                    with m.Default():         # OP_END and anything else
                        m.d.sync += self.done.eq(1)
                        m.next = "IDLE"
            # --- AXI4-Lite write: AW and W together, then B
            aw_done, w_done = Signal(), Signal()
            with m.State("WR"):
                m.d.comb += [axil.awvalid.eq(~aw_done), axil.wvalid.eq(~w_done)]
                with m.If(axil.awready & ~aw_done):
                    m.d.sync += aw_done.eq(1)
                with m.If(axil.wready & ~w_done):
                    m.d.sync += w_done.eq(1)
                with m.If((aw_done | axil.awready) & (w_done | axil.wready)):
                    m.next = "WR_B"
            with m.State("WR_B"):
                m.d.comb += axil.bready.eq(1)
                with m.If(axil.bvalid):
                    m.d.sync += [aw_done.eq(0), w_done.eq(0)]
                    with m.If(axil.bresp != 0):
                        m.d.sync += self.bus_error.eq(1)
                    fetch_next()
            # --- AXI4-Lite read
            with m.State("RD_AR"):
                m.d.comb += axil.arvalid.eq(1)
                with m.If(axil.arready):
                    m.next = "RD_R"
            with m.State("RD_R"):
                m.d.comb += axil.rready.eq(1)
                with m.If(axil.rvalid):
                    m.d.sync += rdata.eq(axil.rdata)
                    with m.If(axil.rresp != 0):
                        m.d.sync += self.bus_error.eq(1)
                    m.next = "RD_CHECK"
            with m.State("RD_CHECK"):
                ok = (rdata & a) == b
                with m.If(opc == OP_POLL):
                    with m.If(ok):
                        fetch_next()
                    with m.Else():
                        m.next = "RD_AR"
                with m.Else():
                    with m.If(a != 0):
                        m.d.comb += [misr.en.eq(1), misr.word.eq(rdata & a)]
                        with m.If(~ok & ~self.mismatch):
                            m.d.sync += [self.mismatch.eq(1), self.fail_op.eq(pc)]
                    for i, d in enumerate(self.display):
                        with m.If(slot == i + 1):
                            m.d.sync += d.eq(rdata)
                    fetch_next()
            # --- lookup stream
            with m.State("ST_LOAD"):         # beat bidx on the port next cycle
                m.d.sync += bidx.eq(bidx + 1)
                m.next = "ST_SEND"
            with m.State("ST_SEND"):
                m.d.comb += axis.tvalid.eq(1)
                # hold the port's output while the beat waits; fetch the next when taken
                m.d.comb += lr.en.eq(axis.tready)
                with m.If(axis.tready):
                    with m.If(bidx == b):
                        m.d.comb += lr.en.eq(0)
                        fetch_next()
                    with m.Else():
                        m.d.sync += bidx.eq(bidx + 1)
            m.d.comb += self.running.eq(~fsm.ongoing("IDLE"))
        return m
