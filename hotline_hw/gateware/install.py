"""The install engine: choose the popular set from the counter array and write it into the
popularity CAM.

The order is the golden install policy (``golden/counters.py``, ``golden/cam.py``): every
valid counter with ``count >= threshold``, by count descending, ties by array position
(set, way) ascending; walked in that order until the CAM holds ``cam_entries`` rows or the
candidates run out; a ``hash`` CAM skips (and counts) a candidate whose set is full.

The engine sorts by **counting**, which gives exactly that stable order:

=========  ====================================================  ============================
phase      work                                                  cycles
=========  ====================================================  ============================
CLEAR      zero the histogram (and the hash CAM's set fill)      ``max(2**counter_bits, cam_sets)``
HIST       read every set, count candidates per count value      ``sets * (ways + r)``
PREFIX     histogram -> start offset of each count value,         ``<= 2**counter_bits + 4``
           highest count first
SCATTER    read every set again, write each candidate's          ``sets * (ways + r)``
           (set, way) to ``sorted[offset[count]++]``
WALK       per candidate in sorted order: read its set, take     ``<= candidates * (r + 9)``
           the key, place it, write the CAM, emit ``(key, slot)``
=========  ====================================================  ============================

``r`` is the round trip of a counter-array read (request to response, a few cycles). So an
install takes about ``2**(counter_bits + 1) + 2 * sets * (ways + r) + candidates * (r + 9)``
cycles. Measured (``bench/gateware_bench.py``) for the ``ulx3s`` preset (4096 sets x 4 ways,
12-bit counters) after learning a Criteo Kaggle-like trace of 200,000 lookups: 149,187
cycles for 16,379 candidates (4,096 rows installed; 140,780 before the fill word was
registered, 144,868 before PREFIX was pipelined), about 1.5 ms at 100 MHz. The engine needs a ``2**counter_bits``-entry
histogram and a ``sets * ways``-entry array of (set, way) positions.

The CAM must be empty when the engine starts (the top evicts and clears it first).

Timing (paths of at most ~9 LUT levels on ``ulx3s``, ``bench/unit_area.py --depth``): the
selects of wide multiplexers are registers, and memory read addresses are registers (or,
for the fill memory, the hash of one). The sweep shifts the set's (valid, count) pairs
through a register so that the way under test is always entry 0; its candidate test is
registered with the histogram's read address (``inc0_*``). The histogram's
read-modify-write is a 3-stage pipeline (address, registered read data, write back) that
forwards its own last two writes (``fwd1``, ``fwd2``, compares of address registers) instead
of relying on a transparent read port, so the block RAM's output feeds only a register;
PREFIX runs through the same pipeline at one level per cycle. The walk registers the
sorted array's word as it is (``pos_q``), selects the candidate's key with a one-hot way
register decoded from it (``pos_sel``), and a fill word carries a
``full`` bit so that the skip decision is one bit of a register (``f_word``, the memory's
output registered in ``FILL_WORD``: one cycle per candidate of a ``hash`` CAM). No
variable-index ``ArrayLayout`` access is left: Yosys builds one as a shifter (a multiplier
for the ``index * width`` offset and a barrel shifter), 17 levels deep on ``ulx3s``.
"""

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import data, memory, stream, wiring
from amaranth.lib.wiring import In, Out

from ..hashing import SEED_CAM
from .hash import h3_expr

__all__ = ["InstallEngine", "counter_set_layout", "cam_write_layout", "placed_layout"]


def counter_set_layout(cfg):
    """One set of the counter array as the array's read port returns it."""
    return data.ArrayLayout(data.StructLayout({
        "valid": 1, "key": cfg.key_bits, "count": cfg.counter_bits}), cfg.counter_ways)


def cam_write_layout(cfg):
    return data.StructLayout({"slot": cfg.slot_bits, "key": cfg.key_bits, "used": 1})


def placed_layout(cfg):
    """A placement record for the DMA: copy the host row of ``key`` to slot ``slot``."""
    return data.StructLayout({"key": cfg.key_bits, "slot": cfg.slot_bits})


class InstallEngine(wiring.Component):
    """Selects the popular set from the counter array and installs it in the CAM.

    Parameters
    ----------
    cfg : HotlineConfig

    Members
    -------
    start : In(1)
        Pulse: begin an install (ignored while busy).
    threshold : In(counter_bits)
        LEARN_THRESHOLD: the smallest count installed (0 acts as 1).
    busy : Out(1)
        High from ``start`` until the install is complete.
    done : Out(1)
        One-cycle pulse when an install completes.
    counter_req : Out(stream.Signature(set index))
        Read requests to the counter array's ``read_req``.
    counter_resp : In(stream.Signature(counter set))
        The counter array's ``read_resp``: ``counter_ways`` of (valid, key, count).
    cam_write : Out(stream.Signature(slot, key, used))
        Writes to the CAM's ``write`` port.
    placed : Out(stream.Signature(key, slot))
        One record per installed row, in install order, for the DMA's placement copy.
        ``valid`` and ``payload`` are register outputs (a 2-entry buffer), and ``ready``
        only advances that buffer: nothing else in the engine depends on it. ``done`` rises
        only after the buffer has drained, so every record has been taken when it does.
    installed, skipped, candidates : Out(32)
        Rows installed, candidates skipped because their ``hash`` CAM set was full, and
        candidates found (``count >= threshold``) by the last install.

    Latency
    -------
    See the module docstring: about ``2**(counter_bits+1) + 2*sets*(ways+r) +
    candidates*(r+8)`` cycles per install (the CLEAR and PREFIX phases take
    ``2**counter_bits`` cycles each).
    """

    def __init__(self, cfg):
        self.cfg = cfg
        self.set_bits = max(1, cfg.counter_set_bits)
        self.way_bits = max(1, (cfg.counter_ways - 1).bit_length())
        self.pos_bits = cfg.counter_set_bits + self.way_bits
        self.n_bits = (cfg.counter_sets * cfg.counter_ways).bit_length()
        super().__init__({
            "start": In(1),
            "threshold": In(cfg.counter_bits),
            "busy": Out(1),
            "done": Out(1),
            "counter_req": Out(stream.Signature(self.set_bits)),
            "counter_resp": In(stream.Signature(counter_set_layout(cfg))),
            "cam_write": Out(stream.Signature(cam_write_layout(cfg))),
            "placed": Out(stream.Signature(placed_layout(cfg))),
            "installed": Out(32),
            "skipped": Out(32),
            "candidates": Out(32),
        })

    def elaborate(self, platform):
        cfg = self.cfg
        m = Module()
        W, S = cfg.counter_ways, cfg.counter_sets
        levels = 1 << cfg.counter_bits

        # Neither memory needs a transparent read port: the histogram's read-modify-write
        # forwards its own last two writes (fwd1, fwd2 below), and a fill word is written in
        # FILL_DECIDE and read again no earlier than the next candidate's FILL_READ.
        m.submodules.hist = hist = memory.Memory(shape=self.n_bits, depth=levels, init=[])
        h_wr = hist.write_port()
        h_rd = hist.read_port()
        m.submodules.sorted = srt = memory.Memory(shape=max(1, self.pos_bits), depth=S * W, init=[])
        s_wr = srt.write_port()
        s_rd = srt.read_port()
        hashed = cfg.cam_kind == "hash"
        if hashed:
            # per CAM set: the ways used so far and whether that is all of them (kept in
            # the word, so that FILL_DECIDE tests one bit of the memory's output)
            fill_layout = data.StructLayout({"n": cfg.cam_ways.bit_length(), "full": 1})
            m.submodules.fill = fill = memory.Memory(shape=fill_layout, depth=cfg.cam_sets,
                                                     init=[])
            f_wr = fill.write_port()
            f_rd = fill.read_port()
            f_word = Signal(fill_layout)      # the word read, registered (FILL_WORD)

        eff_thr = Signal(cfg.counter_bits)   # the threshold, 0 read as 1 (a register)
        set_idx = Signal(cfg.counter_set_bits + 1)   # one past the last set ends a sweep
        way = Signal(range(W + 1))
        # The (valid, count) of the ways of the set being swept, a shift register: the way
        # under test is always entry 0 (no multiplexer indexed by ``way``)
        ways_buf = Signal(data.ArrayLayout(data.StructLayout(
            {"valid": 1, "count": cfg.counter_bits}), W))
        level = Signal(cfg.counter_bits + 1)
        total = Signal(self.n_bits)
        walk_i = Signal(self.n_bits)
        key = Signal(cfg.key_bits)
        pos_q = Signal(max(1, self.pos_bits))   # the candidate's (set, way), read in WALK_POS
        pos_sel = Signal(W)                  # the candidate's way, one-hot (set in WALK_REQ)
        cam_set = Signal(max(1, cfg.cam_set_bits))
        slot = Signal(cfg.slot_bits)
        clr = Signal(max(levels, cfg.cam_sets if hashed else 1).bit_length() + 1)

        # The histogram pipeline, fed by registers only. Stage 0 (inc0_*, set by the WAYS or
        # the PREFIX state) presents its address to the read port; stage 1 (inc1_*) registers
        # the word read (d1); stage 2 (inc2_*) writes it back: old + 1 (HIST, SCATTER) or the
        # running offset (PREFIX, which adds old to it). The read port is not transparent and
        # a word is read two cycles before it is written back, so stage 2 takes the value of
        # the last write (h_last, flag fwd1) or the one before (h_last2, fwd2) to the same
        # address instead of d1; both flags are compares of address registers made in stage 1.
        # No memory output reaches logic: the RAM's data goes straight into d1.
        inc0_valid = Signal()
        inc0_addr = Signal(cfg.counter_bits)
        inc0_pos = Signal(max(1, self.pos_bits))
        inc1_valid = Signal()
        inc1_addr = Signal(cfg.counter_bits)
        inc1_pos = Signal(max(1, self.pos_bits))
        inc1_last = Signal()                 # PREFIX: the lowest level (the threshold's)
        inc2_valid = Signal()
        inc2_addr = Signal(cfg.counter_bits)
        inc2_pos = Signal(max(1, self.pos_bits))
        inc2_last = Signal()
        inc3_valid = Signal()                # the write of the cycle before (for fwd2)
        inc3_addr = Signal(cfg.counter_bits)
        inc0_last = Signal()
        d1 = Signal(self.n_bits)
        fwd1 = Signal()
        fwd2 = Signal()
        h_last = Signal(self.n_bits)         # the value written last (by stage 2)
        h_last2 = Signal(self.n_bits)        # ... and the one before
        h_old = Signal(self.n_bits)
        phase = Signal(2)                    # what stage 2 does: HIST / PREFIX / SCATTER
        P_HIST, P_PREFIX, P_SCATTER = 0, 1, 2
        running = Signal(self.n_bits)
        prefix_done = Signal()               # stage 2 wrote the lowest PREFIX level
        h_new = Mux(phase == P_PREFIX, running, h_old + 1)[:self.n_bits]    # written back
        m.d.sync += [
            inc1_valid.eq(inc0_valid), inc1_addr.eq(inc0_addr), inc1_pos.eq(inc0_pos),
            inc1_last.eq(inc0_last),
            inc2_valid.eq(inc1_valid), inc2_addr.eq(inc1_addr), inc2_pos.eq(inc1_pos),
            inc2_last.eq(inc1_last),
            inc3_valid.eq(inc2_valid), inc3_addr.eq(inc2_addr),
            d1.eq(h_rd.data),
            fwd1.eq(inc1_valid & inc2_valid & (inc1_addr == inc2_addr)),
            fwd2.eq(inc1_valid & inc3_valid & (inc1_addr == inc3_addr)),
            h_last.eq(h_new), h_last2.eq(h_last),
        ]
        m.d.sync += [inc0_valid.eq(0), inc0_last.eq(0), prefix_done.eq(0)]
        m.d.comb += [
            h_rd.en.eq(1), h_rd.addr.eq(inc0_addr),
            h_old.eq(Mux(fwd1, h_last, Mux(fwd2, h_last2, d1))),
        ]
        with m.If(inc2_valid):
            m.d.comb += [h_wr.addr.eq(inc2_addr), h_wr.data.eq(h_new), h_wr.en.eq(1)]
            with m.If(phase == P_SCATTER):
                m.d.comb += [s_wr.addr.eq(h_old), s_wr.data.eq(inc2_pos), s_wr.en.eq(1)]
            with m.If(phase == P_PREFIX):
                m.d.sync += [running.eq(running + h_old), prefix_done.eq(inc2_last)]
        rmw_idle = Signal()
        m.d.comb += rmw_idle.eq(~inc0_valid & ~inc1_valid & ~inc2_valid)

        # WALK: the sorted array is read at walk_i and, for a hash CAM, the fill memory at
        # the key's set, every cycle (each state reads them only when its address is settled)
        m.d.comb += [s_rd.addr.eq(walk_i), s_rd.en.eq(1)]
        if hashed:
            key_set = h3_expr(key, SEED_CAM, cfg.key_bits, cfg.cam_set_bits)
            m.d.comb += [f_rd.addr.eq(key_set), f_rd.en.eq(1)]
            m.d.sync += cam_set.eq(key_set)   # in FILL_DECIDE: the set of the current key

        entry = ways_buf[0]
        is_cand = Signal()
        m.d.comb += is_cand.eq(entry.valid & (entry.count >= eff_thr))

        # The placed output: a 2-entry buffer of registers (pb0 the head, pb1 behind it), so
        # that placed.valid/payload are flip-flop outputs and the DMA's ready only moves the
        # buffer (it never reaches the FSM). The FSM pushes when pb1 is free (pb_room, a
        # register: one entry of room whatever the DMA does in the same cycle).
        pb0_valid = Signal()
        pb1_valid = Signal()
        pb0 = Signal(placed_layout(cfg))
        pb1 = Signal(placed_layout(cfg))
        pb_push = Signal()
        pb_in = Signal(placed_layout(cfg))
        pb_pop = Signal()
        pb_room = Signal()
        m.d.comb += [
            pb_room.eq(~pb1_valid),
            self.placed.valid.eq(pb0_valid),
            self.placed.payload.eq(pb0),
            pb_pop.eq(self.placed.ready & pb0_valid),
        ]
        with m.If(pb_pop):
            with m.If(pb1_valid):             # (no push: pb_room is low)
                m.d.sync += [pb0.eq(pb1), pb1_valid.eq(0)]
            with m.Else():
                m.d.sync += [pb0.eq(pb_in), pb0_valid.eq(pb_push)]
        with m.Elif(pb_push):
            with m.If(pb0_valid):
                m.d.sync += [pb1.eq(pb_in), pb1_valid.eq(1)]
            with m.Else():
                m.d.sync += [pb0.eq(pb_in), pb0_valid.eq(1)]

        m.d.comb += self.busy.eq(1)
        m.d.sync += self.done.eq(0)

        with m.FSM():
            with m.State("IDLE"):
                m.d.comb += self.busy.eq(0)
                with m.If(self.start):
                    m.d.sync += [eff_thr.eq(Mux(self.threshold == 0, 1, self.threshold)),
                                 clr.eq(0), self.installed.eq(0),
                                 self.skipped.eq(0), self.candidates.eq(0)]
                    m.next = "CLEAR"

            with m.State("CLEAR"):
                m.d.comb += [h_wr.addr.eq(clr), h_wr.data.eq(0), h_wr.en.eq(clr < levels)]
                if hashed:
                    m.d.comb += [f_wr.addr.eq(clr), f_wr.data.eq(0), f_wr.en.eq(clr < cfg.cam_sets)]
                m.d.sync += clr.eq(clr + 1)
                with m.If(clr == max(levels, cfg.cam_sets if hashed else 1) - 1):
                    m.d.sync += [set_idx.eq(0), phase.eq(P_HIST)]
                    m.next = "READ_SET"

            # HIST and SCATTER share the sweep over the sets (`phase` tells them apart)
            with m.State("READ_SET"):
                m.d.comb += [self.counter_req.valid.eq(1), self.counter_req.payload.eq(set_idx)]
                with m.If(self.counter_req.ready):
                    m.next = "WAIT_SET"

            with m.State("WAIT_SET"):
                m.d.comb += self.counter_resp.ready.eq(1)
                with m.If(self.counter_resp.valid):
                    m.d.sync += way.eq(0)
                    m.d.sync += [ways_buf[w].valid.eq(self.counter_resp.payload[w].valid)
                                 for w in range(W)]
                    m.d.sync += [ways_buf[w].count.eq(self.counter_resp.payload[w].count)
                                 for w in range(W)]
                    m.next = "WAYS"

            with m.State("WAYS"):
                with m.If(way == W):
                    with m.If(set_idx == S - 1):
                        m.next = "SWEEP_DONE"
                    with m.Else():
                        m.d.sync += set_idx.eq(set_idx + 1)
                        m.next = "READ_SET"
                with m.Else():
                    # HIST counts levels; SCATTER counts offsets (stored in place)
                    m.d.sync += [
                        way.eq(way + 1),
                        inc0_valid.eq(is_cand),
                        inc0_addr.eq(entry.count),
                        inc0_pos.eq(Cat(way[:self.way_bits], set_idx[:cfg.counter_set_bits])),
                    ]
                    m.d.sync += [ways_buf[w].eq(ways_buf[w + 1]) for w in range(W - 1)]

            with m.State("SWEEP_DONE"):
                with m.If(rmw_idle):            # let the last increment land
                    with m.If(phase == P_SCATTER):
                        m.d.sync += walk_i.eq(0)
                        m.next = "WALK_READ"
                    with m.Else():
                        m.d.sync += [level.eq(levels - 1), running.eq(0), phase.eq(P_PREFIX)]
                        m.next = "PREFIX"

            # PREFIX: from the highest count down to the threshold, hist[c] := start offset
            # (one level per cycle through the pipeline; the levels are distinct addresses)
            with m.State("PREFIX"):
                last = (level == eff_thr) | (level == 0)
                m.d.sync += [inc0_valid.eq(1), inc0_addr.eq(level), inc0_last.eq(last),
                             level.eq(level - 1)]
                with m.If(last):
                    m.next = "PREFIX_DONE"

            with m.State("PREFIX_DONE"):
                with m.If(prefix_done):         # (running now holds every count's total)
                    m.d.sync += [total.eq(running), self.candidates.eq(running),
                                 set_idx.eq(0), phase.eq(P_SCATTER)]
                    m.next = "READ_SET"

            # WALK: candidates in sorted order until the CAM is full
            with m.State("WALK_READ"):
                with m.If((walk_i == total) | (self.installed == cfg.cam_entries)):
                    with m.If(~pb0_valid):      # done once the DMA has every record
                        m.d.sync += self.done.eq(1)
                        m.next = "IDLE"
                with m.Else():                  # (the sorted array is read at walk_i)
                    m.next = "WALK_POS"

            # the sorted array's word is registered as it is (pos_q) before any logic reads
            # it: its set and way decoded a cycle later reach the counters' request and the
            # key select in time (a block RAM's output into set_idx's multiplexer was the
            # worst path of a ulx3s route, 13.9 ns, 7.1 of them routing)
            with m.State("WALK_POS"):
                m.d.sync += pos_q.eq(s_rd.data)
                m.next = "WALK_REQ"

            with m.State("WALK_REQ"):
                m.d.comb += [self.counter_req.valid.eq(1),
                             self.counter_req.payload.eq(pos_q[self.way_bits:])]
                m.d.sync += [pos_sel[w].eq(pos_q[:self.way_bits] == w) for w in range(W)]
                with m.If(self.counter_req.ready):
                    m.next = "WALK_RESP"

            with m.State("WALK_RESP"):
                m.d.comb += self.counter_resp.ready.eq(1)
                with m.If(self.counter_resp.valid):
                    # the candidate's key: an AND-OR of the ways with the one-hot pos_sel
                    k = 0
                    for w in range(W):
                        k = k | Mux(pos_sel[w], self.counter_resp.payload[w].key, 0)
                    m.d.sync += key.eq(k)
                    if hashed:
                        m.next = "FILL_READ"
                    else:
                        m.d.sync += slot.eq(self.installed)
                        m.next = "CAM_WRITE"

            if hashed:
                with m.State("FILL_READ"):      # (the fill memory is read at the key's set)
                    m.next = "FILL_WORD"

                # the word read is registered before it decides anything: a block RAM's
                # output into the state and `walk_i` logic was `ulx3s`'s third-slowest path
                with m.State("FILL_WORD"):
                    m.d.sync += f_word.eq(f_rd.data)
                    m.next = "FILL_DECIDE"

                with m.State("FILL_DECIDE"):
                    used = f_word.n
                    with m.If(f_word.full):
                        m.d.sync += [self.skipped.eq(self.skipped + 1), walk_i.eq(walk_i + 1)]
                        m.next = "WALK_READ"
                    with m.Else():
                        m.d.comb += [f_wr.addr.eq(cam_set), f_wr.data.n.eq(used + 1),
                                     f_wr.data.full.eq(used == cfg.cam_ways - 1), f_wr.en.eq(1)]
                        ways_bits = (cfg.cam_ways - 1).bit_length()
                        m.d.sync += slot.eq(Cat(used[:ways_bits], cam_set) if ways_bits else cam_set)
                        m.next = "CAM_WRITE"

            with m.State("CAM_WRITE"):
                m.d.comb += [self.cam_write.valid.eq(1), self.cam_write.payload.slot.eq(slot),
                             self.cam_write.payload.key.eq(key), self.cam_write.payload.used.eq(1)]
                with m.If(self.cam_write.ready):
                    m.next = "PLACED"

            with m.State("PLACED"):
                m.d.comb += [pb_push.eq(pb_room), pb_in.key.eq(key), pb_in.slot.eq(slot)]
                with m.If(pb_room):
                    m.d.sync += [self.installed.eq(self.installed + 1), walk_i.eq(walk_i + 1)]
                    m.next = "WALK_READ"
        return m

