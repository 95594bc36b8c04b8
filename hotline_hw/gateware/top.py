"""The Hotline accelerator: every unit wired behind the ports of DESIGN.md A3.

:class:`HotlineAccelerator` holds the :class:`~.popularity.PopularityEngine` (counter array,
install engine, popularity CAM), the :class:`~.fragmenter.MiniBatchFragmenter`, the
:class:`~.dma.GatherScatterDMA` and the :class:`~.registers.RegisterBlock`, and the control
logic that runs the commands software writes into ``CTRL``.

Ports (Verilog names)
---------------------
``clk``, ``rst`` (synchronous, active high), ``irq`` (level); ``s_axil_*`` (AXI4-Lite slave,
the registers); ``m_axi_*`` (AXI4 master, host and device memory); ``s_axis_lookup_*``;
``m_axis_popular_*`` and ``m_axis_nonpopular_*``.

Stream formats
--------------
* ``s_axis_lookup``: ``tdata`` holds ``lanes`` keys, key ``i`` in bytes
  ``[i * key_bytes, (i + 1) * key_bytes)`` (low ``key_bits`` bits used); ``tkeep`` marks the
  keys present, all bytes of a key together (a key whose bytes are not all kept is
  ignored);
  ``tuser`` ends a sample, ``tlast`` a mini-batch.
* ``m_axis_popular``, ``m_axis_nonpopular``: ``tdata`` = the sample id in the first
  ``sid_bytes`` bytes, then ``lanes`` translated lookups of ``lookup_bytes`` bytes each
  (bits ``[0, 2)`` the tag: 1 POPULAR, 2 STAGED, 3 OVERFLOW; bits ``[2, 2 + value_bits)``
  the slot, staging index or key). ``tkeep`` marks the sample id bytes on every beat of a
  sample and the bytes of each present lookup; ``tuser`` ends a sample; the terminator beat
  of a micro-batch has ``tkeep == 0`` and ``tlast`` (``golden.framing``).

Commands (``CTRL.cmd``; see ``hotline_hw.regmap.COMMANDS``)
-------------------------------------------------------------
A command is taken when the control logic is idle; otherwise ``STATUS.cmd_error`` is set.
Every command ends with a ``cmd_done`` interrupt event.

* ``LEARN``: mode LEARN (lookups go to the counter array); with ``CTRL.clear`` the counter
  array is cleared first.
* ``TRAIN``: mode TRAIN (lookups go to the fragmenter; gathers go to the DMA).
* ``STOP``: an open mini-batch is ended (``flush``, a framing error if the stream stopped
  inside it), the fragmenter drains, then mode IDLE.
* ``INSTALL`` (not in TRAIN): EVICT, then the install engine fills the CAM from the counter
  array and the DMA copies each installed row to its slot.
* ``EVICT`` (not in TRAIN): the DMA copies every installed row back to its host row, then
  the CAM is cleared.
* ``SCATTER`` (``CTRL.bank``): queued in the DMA, which copies bank ``bank``'s staged rows
  back once the bank's gathers are done; the command completes at once (training goes on)
  and ``STATUS.bank_pending`` falls when the scatter has completed. A SCATTER the DMA cannot
  queue (that bank's scatter is already pending) sets ``cmd_error``.
* ``CLEAR_STATS`` (not in TRAIN): the statistics restart from zero (the fragmenter is reset,
  so the staging bank sequence restarts at bank 0 too).
* ``CTRL.soft_reset``: the DMA aborts and drains (see ``GatherScatterDMA``), the fragmenter
  and the control logic reset, mode IDLE, sticky status cleared. The counter array and the
  CAM keep their contents.

Timing: a command is taken the cycle after its ``CTRL`` write; the fragmenter (and the
gather splitter) is reset the cycle after a soft reset or a taken ``CLEAR_STATS``, from a
register. ``STATUS.busy`` and ``STATUS.gathers_done`` come from registers:
``busy`` is the units' busy two cycles late or'ed with a command taken in the last four
cycles, so a read issued after a command's write response already reads it busy.

``CAM_CTRL.op`` WRITE / READ reach the CAM's host port (a READ waits while an eviction owns
it); ``CAM_STATUS.done`` is set when the operation has completed, ``rejected`` when a
``hash`` CAM refused the write (wrong set).
"""

from amaranth.hdl import Cat, Const, Module, Mux, ResetInserter, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ..regmap import COMMANDS, CAM_OPS, MODES
from .dma import GatherScatterDMA
from .fragmenter import MiniBatchFragmenter, value_bits
from .gather_split import GatherSplitter
from .popularity import PopularityEngine
from .registers import RegisterBlock

__all__ = ["HotlineAccelerator", "axis_signature", "stream_geometry"]

CMD = {n: v for n, (v, _) in COMMANDS.items()}
CAMOP = {n: v for n, (v, _) in CAM_OPS.items()}
MODE = {n: v for n, (v, _) in MODES.items()}


def axis_signature(data_bits):
    """An AXI4-Stream interface as seen from the master (``tuser`` one bit)."""
    return wiring.Signature({
        "tdata": Out(data_bits), "tkeep": Out(data_bits // 8), "tuser": Out(1),
        "tlast": Out(1), "tvalid": Out(1), "tready": In(1),
    })


def stream_geometry(cfg):
    """Byte layout of the AXI4-Stream ports: ``key_bytes``, ``sid_bytes``,
    ``lookup_bytes``, ``in_bits`` and ``out_bits`` (``tdata`` widths)."""
    key_bytes = cfg.key_bytes
    sid_bytes = (cfg.sample_id_bits + 7) // 8
    lookup_bytes = (2 + value_bits(cfg) + 7) // 8
    return {"key_bytes": key_bytes, "sid_bytes": sid_bytes, "lookup_bytes": lookup_bytes,
            "in_bits": 8 * key_bytes * cfg.lanes,
            "out_bits": 8 * (sid_bytes + lookup_bytes * cfg.lanes)}


class HotlineAccelerator(wiring.Component):
    """The accelerator top (module docstring). ``cfg``: the :class:`HotlineConfig`."""

    def __init__(self, cfg):
        self.cfg = cfg
        self.geo = stream_geometry(cfg)
        self._regs = RegisterBlock(cfg)
        self._dma = GatherScatterDMA(cfg)
        # parts whose `register_copies` the amaranth.sim tests check (sim/register_copies.py)
        self.register_copy_parts = [self._dma]
        super().__init__({
            "s_axil": self._regs.signature.members["s_axil"],
            "irq": Out(1),
            "m_axi": self._dma.signature.members["m_axi"],
            "s_axis_lookup": In(axis_signature(self.geo["in_bits"])),
            "m_axis_popular": Out(axis_signature(self.geo["out_bits"])),
            "m_axis_nonpopular": Out(axis_signature(self.geo["out_bits"])),
        })

    def elaborate(self, platform):
        cfg, geo = self.cfg, self.geo
        m = Module()
        L = cfg.lanes
        regs, dma = self._regs, self._dma
        # instance names = the units' registered names (sim/runner.py), so that lint waivers
        # and waveform paths read the same standalone and inside the top
        m.submodules.registers = regs
        m.submodules.dma = dma
        m.submodules.popularity = pop = PopularityEngine(cfg)
        # the fragmenter's (and the gather splitter's) reset: a register, set the cycle after a
        # soft reset or a taken CLEAR_STATS (`frag_clear`), so that the net that fans out to
        # every register of the unit starts at a flip-flop rather than at the command decode
        frag_clear = Signal()
        frag_rst = Signal()
        frag = MiniBatchFragmenter(cfg, pop.LATENCY)
        self.register_copy_parts = [dma, frag, pop]
        m.submodules.fragmenter = ResetInserter(frag_rst)(frag)

        wiring.connect(m, wiring.flipped(self.s_axil), regs.s_axil)
        # m_axi: the DMA's master as is, except that the addresses keep their low addr_bits
        # bits (zero-extended to the 64-bit ports), so that synthesis trims the upper bits
        # of the DMA's address adders and registers when addr_bits < 64
        for name, member in dma.m_axi.signature.members.items():
            ours, theirs = getattr(self.m_axi, name), getattr(dma.m_axi, name)
            if member.flow == wiring.In:
                m.d.comb += theirs.eq(ours)
            elif name in ("araddr", "awaddr"):
                m.d.comb += ours.eq(theirs[:cfg.addr_bits])
            else:
                m.d.comb += ours.eq(theirs)
        m.d.comb += self.irq.eq(regs.irq)

        def reg(name, field="value"):
            return regs.field(name, field)

        # ---- run-time parameters --------------------------------------------------------
        for t in range(cfg.num_tables):
            m.d.comb += dma.table_base[t].eq(regs.value64(f"TABLE_BASE[{t}]"))
        for b in range(cfg.staging_banks):
            m.d.comb += dma.staging_base[b].eq(regs.value64(f"STAGING_BASE[{b}]"))
        m.d.comb += [
            dma.popular_base.eq(regs.value64("POPULAR_BASE")),
            dma.row_stride.eq(reg("ROW_STRIDE")),
            dma.row_bytes.eq(reg("ROW_BYTES")),
            pop.learn_period.eq(reg("LEARN_PERIOD")),
            pop.threshold.eq(reg("LEARN_THRESHOLD")),
        ]

        # ---- the lookup stream: to the counter array (LEARN) or the fragmenter (TRAIN) ----
        mode = Signal(2)
        # The mode's next value (the control logic below drives it), and one flip-flop per
        # streaming mode loaded with its decode (timing: `mode == TRAIN` sat between the
        # mode register and the fragmenter's input handshake, which writes the metadata
        # FIFO's LUT RAM: a LUT and a long net less on `ulx3s`'s path into its write
        # enables). A register copy checks each flag against the decode of `mode`.
        mode_next = Signal(2)
        mode_learn = Signal()
        mode_train = Signal()
        m.d.comb += mode_next.eq(mode)
        m.d.sync += [mode.eq(mode_next), mode_learn.eq(mode_next == MODE["LEARN"]),
                     mode_train.eq(mode_next == MODE["TRAIN"])]
        self.register_copies = [("mode_learn", mode_learn, mode == MODE["LEARN"]),
                                ("mode_train", mode_train, mode == MODE["TRAIN"])]
        s = self.s_axis_lookup
        kb8 = 8 * geo["key_bytes"]
        keys = [s.tdata[i * kb8:i * kb8 + cfg.key_bits] for i in range(L)]
        kB = geo["key_bytes"]
        keep = Cat(*[s.tkeep[i * kB:(i + 1) * kB].all() for i in range(L)])
        for i in range(L):
            m.d.comb += [pop.lookups.payload.keys[i].eq(keys[i]),
                         frag.lookups.payload.keys[i].eq(keys[i])]
        m.d.comb += [
            pop.lookups.payload.keep.eq(keep),
            pop.lookups.payload.last.eq(s.tlast),
            frag.lookups.payload.keep.eq(keep),
            frag.lookups.payload.user.eq(s.tuser),
            frag.lookups.payload.last.eq(s.tlast),
            pop.lookups.valid.eq(s.tvalid & mode_learn),
            frag.lookups.valid.eq(s.tvalid & mode_train),
            s.tready.eq(Mux(mode_learn, pop.lookups.ready,
                            Mux(mode_train, frag.lookups.ready, 0))),
        ]

        # ---- fragmenter <-> CAM, outputs ---------------------------------------------------
        # The fragmenter holds its input while the CAM changes (a clear or an install), seen
        # through a register (init 1, like the CAM's own busy after reset), so the install
        # FSM's state decode does not reach the fragmenter's input stage in the same cycle.
        # Exact enough: the register is high whenever `pop.cam_busy` is, since that rises
        # only the cycle after a `cam_clear` / `install_start` pulse, which the control FSM
        # sends outside TRAIN mode, the only mode in which the fragmenter gets lookups
        # (falling a cycle late costs one cycle). Counter sweeps (`pop.busy`) do not touch the CAM.
        frag_cam_busy = Signal(init=1)
        m.d.sync += frag_cam_busy.eq(pop.cam_busy)
        m.d.comb += [
            pop.lookup_valid.eq(frag.cam_lookup_valid),
            pop.lookup_keys.eq(frag.cam_lookup_keys),
            frag.cam_result_valid.eq(pop.result_valid),
            frag.cam_result_hit.eq(pop.result_hit),
            frag.cam_result_slot.eq(pop.result_slot),
            frag.cam_busy.eq(frag_cam_busy),
        ]
        sid_bits, lb = 8 * geo["sid_bytes"], 8 * geo["lookup_bytes"]
        for port, out in ((frag.popular, self.m_axis_popular),
                          (frag.nonpopular, self.m_axis_nonpopular)):
            p = port.payload
            data_ = [p.sample_id, Const(0, sid_bits - cfg.sample_id_bits)]
            kp = [Mux(p.keep != 0, (1 << geo["sid_bytes"]) - 1, 0)]
            for i in range(L):
                w = 2 + value_bits(cfg)
                data_ += [p.lookups[i].as_value(), Const(0, lb - w)]
                kp.append(Mux(p.keep[i], (1 << geo["lookup_bytes"]) - 1, 0))
            m.d.comb += [
                out.tdata.eq(Cat(*data_)),
                out.tkeep.eq(Cat(*kp)),
                out.tuser.eq(p.user),
                out.tlast.eq(p.last),
                out.tvalid.eq(port.valid),
                port.ready.eq(out.tready),
            ]

        # ---- gather requests: up to `lanes` per beat -> one per cycle into the DMA -------
        # (reset with the fragmenter: its gather FIFO and the beat in progress go together)
        split = GatherSplitter(cfg)
        m.submodules.gather_split = ResetInserter(frag_rst)(split)
        wiring.connect(m, frag.gather, split.i)
        wiring.connect(m, split.o, dma.gather)

        wiring.connect(m, pop.placed, dma.place)

        # ---- CAM host port: the DMA (eviction) or the registers ----------------------------
        cam_rd_host = Signal()
        cam_rd_resp_host = Signal()
        with m.If(dma.evict_busy):
            wiring.connect(m, dma.cam_read_req, pop.host_read_req)
            wiring.connect(m, pop.host_read_resp, dma.cam_read_resp)
        with m.Else():
            m.d.comb += [pop.host_read_req.valid.eq(cam_rd_host),
                         pop.host_read_req.payload.eq(reg("CAM_SLOT")),
                         pop.host_read_resp.ready.eq(cam_rd_resp_host)]

        # ---- control ---------------------------------------------------------------------------
        # a command is taken the cycle after its CTRL write (from a register), unless that
        # write also pulsed soft_reset; CTRL (cmd, bank, clear) keeps its value meanwhile, as
        # the next register write commits two cycles later at the earliest
        soft = reg("CTRL", "soft_reset")
        cmd_stb = Signal()
        m.d.sync += cmd_stb.eq(regs.strobe("CTRL", "cmd") & ~soft)
        cmd = reg("CTRL", "cmd")
        cmd_done = Signal()
        cmd_error = Signal()
        m.d.comb += [frag_clear.eq(0), dma.soft_reset.eq(soft)]
        m.d.sync += frag_rst.eq(frag_clear)
        flush = Signal()
        m.d.comb += frag.flush.eq(flush)
        wait = Signal(2)                    # cycles to let a started unit raise its busy
        # the units' busy as the control FSM sees them: registered (a cycle late), so that no
        # unit's busy logic reaches the state register; `wait` (3) covers the extra cycle
        frag_busy = Signal()
        dma_busy = Signal()
        pop_busy = Signal()
        m.d.sync += [frag_busy.eq(frag.busy), dma_busy.eq(dma.busy), pop_busy.eq(pop.busy)]
        with m.If(wait != 0):
            m.d.sync += wait.eq(wait - 1)
        def abort():                        # a soft reset ends any command (last in each
            with m.If(soft):                # state, so it wins over the state's own m.next)
                m.next = "IDLE"

        # LEARN's counter clear starts from a register, in the cycle the mode becomes LEARN
        # (the command decode does not reach the counter array's control in one cycle). The
        # counters take no lookup in their `start` cycle, so none is counted before the clear.
        learn_go = Signal()
        m.d.sync += learn_go.eq(0)
        m.d.comb += pop.learn_start.eq(learn_go)
        with m.FSM(name="ctl") as ctl:
            with m.State("IDLE"):
                with m.If(cmd_stb):
                    with m.Switch(cmd):
                        with m.Case(CMD["NOP"]):
                            pass
                        with m.Case(CMD["LEARN"]):
                            m.d.comb += mode_next.eq(MODE["LEARN"])
                            m.d.sync += learn_go.eq(reg("CTRL", "clear"))
                            m.d.comb += cmd_done.eq(1)
                        with m.Case(CMD["TRAIN"]):
                            m.d.comb += mode_next.eq(MODE["TRAIN"])
                            m.d.comb += cmd_done.eq(1)
                        with m.Case(CMD["STOP"]):
                            m.d.comb += flush.eq(mode == MODE["TRAIN"])
                            m.d.sync += wait.eq(3)
                            m.next = "STOP"
                        with m.Case(CMD["INSTALL"]):
                            with m.If(mode == MODE["TRAIN"]):
                                m.d.comb += cmd_error.eq(1)
                            with m.Else():
                                m.d.comb += mode_next.eq(MODE["IDLE"])
                                m.d.comb += dma.evict_start.eq(1)
                                m.d.sync += wait.eq(3)
                                m.next = "INSTALL_EVICT"
                        with m.Case(CMD["EVICT"]):
                            with m.If(mode == MODE["TRAIN"]):
                                m.d.comb += cmd_error.eq(1)
                            with m.Else():
                                m.d.comb += dma.evict_start.eq(1)
                                m.d.sync += wait.eq(3)
                                m.next = "EVICT"
                        with m.Case(CMD["SCATTER"]):
                            # queued in the DMA (which starts it once the bank's gathers are
                            # done); the control logic takes the next command at once, so
                            # training goes on; STATUS.bank_pending falls when it is done
                            m.d.comb += [dma.scatter_start.eq(1),
                                         dma.scatter_bank.eq(reg("CTRL", "bank")),
                                         cmd_done.eq(1)]
                        with m.Case(CMD["CLEAR_STATS"]):
                            with m.If(mode == MODE["TRAIN"]):
                                m.d.comb += cmd_error.eq(1)
                            with m.Else():
                                m.d.comb += [frag_clear.eq(1), cmd_done.eq(1)]
                        with m.Default():
                            m.d.comb += cmd_error.eq(1)
            with m.State("STOP"):
                with m.If((wait == 0) & ~frag_busy):
                    m.d.comb += mode_next.eq(MODE["IDLE"])
                    m.d.comb += cmd_done.eq(1)
                    m.next = "IDLE"
                abort()
            with m.State("INSTALL_EVICT"):
                with m.If((wait == 0) & ~dma_busy):
                    m.d.comb += pop.cam_clear.eq(1)
                    m.d.sync += wait.eq(3)
                    m.next = "INSTALL_CLEAR"
                abort()
            with m.State("INSTALL_CLEAR"):
                with m.If((wait == 0) & ~pop_busy):
                    m.d.comb += pop.install_start.eq(1)
                    m.next = "INSTALL_RUN"
                abort()
            with m.State("INSTALL_RUN"):
                with m.If(pop.install_done):
                    m.d.sync += wait.eq(3)
                    m.next = "INSTALL_COPY"
                abort()
            with m.State("INSTALL_COPY"):
                with m.If((wait == 0) & ~dma_busy):
                    m.d.comb += cmd_done.eq(1)
                    m.next = "IDLE"
                abort()
            with m.State("EVICT"):
                with m.If((wait == 0) & ~dma_busy):
                    m.d.comb += pop.cam_clear.eq(1)
                    m.d.sync += wait.eq(3)
                    m.next = "EVICT_CLEAR"
                abort()
            with m.State("EVICT_CLEAR"):
                with m.If((wait == 0) & ~pop_busy):
                    m.d.comb += cmd_done.eq(1)
                    m.next = "IDLE"
                abort()
        with m.If(soft):
            m.d.comb += frag_clear.eq(1)
            m.d.comb += mode_next.eq(MODE["IDLE"])
        with m.If(cmd_stb & ~ctl.ongoing("IDLE")):
            m.d.comb += cmd_error.eq(1)

        # ---- CAM access registers -------------------------------------------------------------
        cam_op_stb = regs.strobe("CAM_CTRL", "op")
        cam_op = reg("CAM_CTRL", "op")
        cam_done = Signal()
        cam_rej = Signal()
        cam_used = Signal()
        cam_key = Signal(cfg.key_bits)
        rej_snap = Signal(32)
        settle = Signal(3)
        with m.FSM(name="camctl"):
            with m.State("IDLE"):
                with m.If(cam_op_stb & (cam_op == CAMOP["WRITE"])):
                    m.d.sync += [cam_done.eq(0), rej_snap.eq(pop.write_rejected)]
                    m.next = "WRITE"
                with m.Elif(cam_op_stb & (cam_op == CAMOP["READ"])):
                    m.d.sync += cam_done.eq(0)
                    m.next = "READ"
            with m.State("WRITE"):
                key_reg = Cat(reg("CAM_KEY_LO"), reg("CAM_KEY_HI"))[:cfg.key_bits]
                m.d.comb += [pop.host_write.valid.eq(1),
                             pop.host_write.payload.slot.eq(reg("CAM_SLOT")),
                             pop.host_write.payload.key.eq(key_reg),
                             pop.host_write.payload.used.eq(reg("CAM_CTRL", "used"))]
                with m.If(pop.host_write.ready):
                    m.d.sync += settle.eq(6)
                    m.next = "WRITE_SETTLE"
            with m.State("WRITE_SETTLE"):
                m.d.sync += settle.eq(settle - 1)
                with m.If(settle == 0):
                    m.d.sync += [cam_done.eq(1), cam_rej.eq(pop.write_rejected != rej_snap)]
                    m.next = "IDLE"
            with m.State("READ"):
                with m.If(~dma.evict_busy):
                    m.d.comb += cam_rd_host.eq(1)
                    with m.If(pop.host_read_req.ready):
                        m.next = "READ_RESP"
            with m.State("READ_RESP"):
                with m.If(~dma.evict_busy):
                    m.d.comb += cam_rd_resp_host.eq(1)
                    with m.If(pop.host_read_resp.valid):
                        m.d.sync += [cam_done.eq(1), cam_used.eq(pop.host_read_resp.payload.used),
                                     cam_key.eq(pop.host_read_resp.payload.key)]
                        m.next = "IDLE"

        # ---- status, interrupts, statistics ------------------------------------------------
        sticky = {n: Signal(name=f"sticky_{n}") for n in ("cmd_error", "bad_key", "overflow",
                                                          "framing_error")}
        events = {"cmd_error": cmd_error | dma.cmd_ignored, "bad_key": frag.ev_bad_key | dma.bad_key,
                  "overflow": frag.ev_overflow, "framing_error": frag.ev_framing}
        # cleared with the unit that raises them: cmd_error by a soft reset, the others when
        # the fragmenter is reset (the cycle after a soft reset or a CLEAR_STATS), so that an
        # event from the fragmenter's last cycle before its reset does not survive the clear
        for n, sig in sticky.items():
            with m.If(events[n]):
                m.d.sync += sig.eq(1)
            with m.If(soft if n == "cmd_error" else frag_rst):
                m.d.sync += sig.eq(0)
        dma_err_q = Signal()
        m.d.sync += dma_err_q.eq(dma.error)
        # STATUS.busy and STATUS.gathers_done from registers, two deep (timing: the units'
        # busy and gather-busy terms are deep logic, from the de-dup banks' queue levels; they
        # reach registers of their own, not the status ones). STATUS.busy: the control state
        # and the units' registered busy (so the units' busy two cycles late), or'ed with a
        # command taken in the last four cycles, so that a read sampled the cycle after a
        # command is taken (the earliest a read after the command's write response can be)
        # reads busy although the units start later. STATUS.gathers_done: two cycles late,
        # both its terms delayed alike (it falls after a mini-batch's first lookup enters,
        # long before software can have sent the whole mini-batch).
        busy_r = Signal()
        cmd_r = Signal()
        gathers_done = Signal(cfg.staging_banks)
        g_busy_q = Signal()
        g_done_q = Signal(cfg.staging_banks)
        m.d.sync += [g_busy_q.eq(frag.gather_busy | frag.gather.valid | split.busy),
                     g_done_q.eq(dma.gathers_done),
                     gathers_done.eq(Mux(g_busy_q, 0, g_done_q))]
        cmd_recent = Signal(4)
        m.d.sync += [busy_r.eq(~ctl.ongoing("IDLE") | dma_busy | frag_busy | pop_busy
                               | learn_go),
                     cmd_recent.eq(Cat(cmd_stb, cmd_recent[:-1]))]
        m.d.comb += cmd_r.eq(cmd_recent.any())
        m.d.comb += [
            reg("STATUS", "mode").eq(mode),
            reg("STATUS", "busy").eq(busy_r | cmd_r),
            reg("STATUS", "cmd_error").eq(sticky["cmd_error"]),
            reg("STATUS", "dma_error").eq(dma.error),
            reg("STATUS", "param_error").eq(dma.param_error),
            reg("STATUS", "bad_key").eq(sticky["bad_key"]),
            reg("STATUS", "overflow").eq(sticky["overflow"]),
            reg("STATUS", "framing_error").eq(sticky["framing_error"]),
            reg("STATUS", "bank_pending").eq(Cat(*[dma.log_count[b] != 0
                                                  for b in range(cfg.staging_banks)])),
            # a bank's gathers are done when the DMA has finished every gather it took for the
            # bank (dma.gathers_done also waits for gathers still held in the DMA's input skid
            # buffer) and no gather request can still come from the fragmenter or the
            # splitter's output register
            reg("STATUS", "gathers_done").eq(gathers_done),
            reg("IRQ_STATUS", "cmd_done").eq(cmd_done),
            reg("IRQ_STATUS", "dma_error").eq(dma.error & ~dma_err_q),
            reg("IRQ_STATUS", "overflow").eq(frag.ev_overflow),
            reg("IRQ_STATUS", "bad_key").eq(frag.ev_bad_key),
            reg("IRQ_STATUS", "framing_error").eq(frag.ev_framing),
            reg("IRQ_STATUS", "minibatch_done").eq(frag.ev_minibatch),
            reg("CAM_STATUS", "done").eq(cam_done),
            reg("CAM_STATUS", "rejected").eq(cam_rej),
            reg("CAM_STATUS", "used").eq(cam_used),
            Cat(reg("CAM_READ_KEY_LO"), reg("CAM_READ_KEY_HI")).eq(cam_key),
            regs.value64("DMA_ERROR_ADDR").eq(dma.error_addr),
            reg("DMA_ERROR_RESP").eq(dma.error_resp),
        ]
        for n in ("lookups", "hits", "popular_samples", "nonpopular_samples", "staged_rows",
                  "overflows", "bad_keys", "long_samples", "staging_full", "dedup_full",
                  "id_wraps", "framing_errors", "minibatches"):
            m.d.comb += reg(f"STAT_{n.upper()}").eq(getattr(frag, "stat_" + n))
        for n in ("lookups", "hits", "popular_samples", "nonpopular_samples", "staged_rows",
                  "overflows"):
            m.d.comb += reg(f"LAST_{n.upper()}").eq(getattr(frag, "last_" + n))
        m.d.comb += [
            reg("STAT_LEARNED_LOOKUPS").eq(pop.learned),
            reg("STAT_INSTALL_SKIPPED").eq(pop.skipped),
            reg("STAT_ROWS_GATHERED").eq(dma.stat_rows_gathered),
            reg("STAT_ROWS_SCATTERED").eq(dma.stat_rows_scattered),
            reg("STAT_ROWS_PLACED").eq(dma.stat_rows_placed),
            reg("STAT_ROWS_EVICTED").eq(dma.stat_rows_evicted),
            regs.value64("STAT_BYTES_READ").eq(dma.stat_bytes_read),
            regs.value64("STAT_BYTES_WRITTEN").eq(dma.stat_bytes_written),
        ]
        busy_cycles = Signal(64)
        with m.If(busy_r):
            m.d.sync += busy_cycles.eq(busy_cycles + 1)
        m.d.comb += regs.value64("STAT_BUSY_CYCLES").eq(busy_cycles)
        return m

