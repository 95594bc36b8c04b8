"""The mini-batch fragmenter (first cut): lookup beats in, popular / non-popular micro-batch
beats and gather requests out, bit-exact with ``golden.fragment.fragment`` +
``golden.framing.pack_output_beats``.

Micro-architecture (simple and sequential; throughput comes later)
------------------------------------------------------------------
* One input beat is held in a register and its keys (lanes with ``keep`` set, in lane order)
  are translated **one key at a time**; ``lookups.ready`` is high only when the beat register
  is free (and the internal CAM is not sweeping after reset/clear).
* Per key: bad key -> ``OVERFLOW(key)`` (1 cycle); else position ``>= max_sample_lookups``
  -> ``OVERFLOW(key)`` streamed straight to the non-popular output; else a CAM lookup on lane
  0 of the internal :class:`PopularityCAM` (``LATENCY`` cycles): hit -> ``POPULAR(slot)``;
  miss -> one read-compare-write of the de-dup table (1 cycle after the CAM result) ->
  ``STAGED(index)`` or ``OVERFLOW(key)``, plus one gather request for a newly staged key.
* Translated lookups of a sample are buffered in a ``max_sample_lookups``-entry memory. When
  the sample ends its verdict is known and the buffer drains, one entry per cycle, into a
  packer (``lanes`` entries per beat) and then a one-beat **hold** register per output: a
  beat is held until the next beat of that output or the end of the mini-batch decides its
  ``last`` bit. At the end of a mini-batch each output's held beat leaves with ``last`` (or,
  if the output got no sample, an empty beat ``keep 0, user 0, last 1``).
* A long sample: at its first excess lookup the buffered part drains to the non-popular
  output, then every further lookup of the sample streams out as ``OVERFLOW(key)``.
* De-dup table: ``dedup_sets`` words of ``dedup_ways`` x (valid, key, index) in a memory,
  set = ``h3(key, SEED_DEDUP)``. It is **cleared by a sweep** (one set per cycle) at the end
  of every mini-batch, during which the input is not ready. Ways fill in order.

Throughput: a CAM-looked-up key costs ``LATENCY + 1`` cycles (hit) or ``LATENCY + 2``
(miss), a bad key 1 cycle, plus 1 cycle per buffered lookup to drain, ~3 cycles per sample
and ``dedup_sets + 3`` cycles per mini-batch. Measured (``tests/gateware/test_fragmenter.py::
test_throughput_first_cut``, tiny preset, full CAM with LATENCY 4, no idle or backpressure):
0.125 keys/cycle at 1 lane (0.135 input beats/cycle), 0.149 keys/cycle at 4 lanes (0.064
input beats/cycle). A hash CAM (LATENCY 7) is slower still.

Statistics outputs ``stat_<name>`` (``lookups`` would clash with the input port) are
**cumulative since reset** (the sum of golden ``BatchCounters`` over the mini-batches).
``staging_full``, ``dedup_full``, ``id_wraps`` and framing-error counters are not implemented.

Lookups wait (``lookups.ready`` low) while the internal CAM is ``busy`` (its sweep after
reset). Mini-batch ``n`` since reset uses bank ``n % staging_banks``.
"""

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out
from amaranth.utils import bits_for, ceil_log2

from ..hashing import SEED_DEDUP
from .cam import PopularityCAM, _priority
from .hash import h3_expr

__all__ = ["MiniBatchFragmenter", "TAG_POPULAR", "TAG_STAGED", "TAG_OVERFLOW"]

TAG_POPULAR, TAG_STAGED, TAG_OVERFLOW = 1, 2, 3

STAT_NAMES = ("lookups", "hits", "popular_samples", "nonpopular_samples", "staged_rows",
              "overflows", "bad_keys", "long_samples")


def lookup_layout(cfg):
    return data.StructLayout({"tag": 2, "value": value_bits(cfg)})


def value_bits(cfg):
    return max(cfg.key_bits, cfg.slot_bits, cfg.staging_index_bits)


def input_layout(cfg):
    return data.StructLayout({"keys": data.ArrayLayout(cfg.key_bits, cfg.lanes),
                              "keep": cfg.lanes, "user": 1, "last": 1})


def output_layout(cfg):
    return data.StructLayout({
        "sample_id": cfg.sample_id_bits,
        "lookups": data.ArrayLayout(lookup_layout(cfg), cfg.lanes),
        "keep": cfg.lanes, "user": 1, "last": 1})


def gather_layout(cfg):
    return data.StructLayout({"key": cfg.key_bits,
                              "bank": max(1, ceil_log2(cfg.staging_banks)),
                              "index": cfg.staging_index_bits})


class MiniBatchFragmenter(wiring.Component):
    """See the module docstring. Ports: ``lookups`` (in), ``popular``, ``nonpopular``,
    ``gather`` (out), ``cam_write`` (the internal CAM's host write port), ``cam_busy``,
    and the statistics counters ``stat_<name>`` for every name of ``STAT_NAMES`` (the
    ``golden.records.BatchCounters`` fields; ``Out(32)`` each, cumulative since reset)."""

    def __init__(self, cfg):
        self.cfg = cfg
        ports = {
            "lookups": In(stream.Signature(input_layout(cfg))),
            "popular": Out(stream.Signature(output_layout(cfg))),
            "nonpopular": Out(stream.Signature(output_layout(cfg))),
            "gather": Out(stream.Signature(gather_layout(cfg))),
            "cam_write": In(stream.Signature(data.StructLayout(
                {"slot": cfg.slot_bits, "key": cfg.key_bits, "used": 1}))),
            "cam_busy": Out(1),
        }
        for n in STAT_NAMES:
            ports["stat_" + n] = Out(32)
        super().__init__(ports)

    def elaborate(self, platform):
        cfg = self.cfg
        m = Module()
        lanes, kb = cfg.lanes, cfg.key_bits
        msl = cfg.max_sample_lookups
        vb = value_bits(cfg)
        ib = cfg.staging_index_bits
        lk_layout = lookup_layout(cfg)
        out_layout = output_layout(cfg)

        m.submodules.cam = cam = PopularityCAM(cfg)
        wiring.connect(m, wiring.flipped(self.cam_write), cam.write)
        m.d.comb += self.cam_busy.eq(cam.busy)

        # --- input beat register -------------------------------------------------------
        b_keys = Signal(data.ArrayLayout(kb, lanes))
        b_keep = Signal(lanes)
        b_user = Signal()
        b_last = Signal()

        cur_key = Signal(kb)                      # key of the lowest kept lane
        cur_onehot = Signal(lanes)
        for i in reversed(range(lanes)):          # the lowest lane's statements come last
            with m.If(b_keep[i]):
                m.d.comb += [cur_key.eq(b_keys[i]), cur_onehot.eq(1 << i)]
        cur_bad = Signal()
        m.d.comb += cur_bad.eq((cur_key >> cfg.row_bits) >= cfg.num_tables)

        k_key = Signal(kb)                        # the key being translated

        # --- sample state ---------------------------------------------------------------
        pos = Signal(range(msl + 1))              # buffered lookups of the open sample
        long_ = Signal()                          # the open sample is long (buffer drained)
        nonpop = Signal()                         # the open sample has a non-POPULAR lookup
        sid = Signal(cfg.sample_id_bits)
        bank = Signal(max(1, ceil_log2(cfg.staging_banks)))
        staged = Signal(ib + 1)                   # rows staged in this mini-batch
        sel = Signal()                            # output of the sample being drained (1: np)
        opened = Signal()
        m.d.comb += opened.eq((pos != 0) | long_)

        # --- statistics -----------------------------------------------------------------
        stats = {n: getattr(self, "stat_" + n) for n in STAT_NAMES}

        def inc(name, cond=1):
            m.d.sync += stats[name].eq(stats[name] + cond)

        # --- sample buffer --------------------------------------------------------------
        m.submodules.sbuf = sbuf = Memory(shape=lk_layout, depth=msl, init=[])
        sb_w = sbuf.write_port()
        sb_r = sbuf.read_port(transparent_for=())
        m.d.comb += sb_w.addr.eq(pos)
        rd_i = Signal(range(msl))
        m.d.comb += sb_r.addr.eq(rd_i)

        def buf_write(tag, value):
            m.d.comb += [sb_w.en.eq(1), sb_w.data.tag.eq(tag), sb_w.data.value.eq(value)]
            m.d.sync += pos.eq(pos + 1)
            if tag != TAG_POPULAR:
                m.d.sync += nonpop.eq(1)
                if tag == TAG_OVERFLOW:
                    inc("overflows")

        # --- de-dup table ---------------------------------------------------------------
        ways = cfg.dedup_ways
        dset_bits = cfg.dedup_set_bits
        dd_entry = data.StructLayout({"valid": 1, "key": kb, "index": ib})
        dd_word = data.ArrayLayout(dd_entry, ways)
        m.submodules.dedup = dmem = Memory(shape=dd_word, depth=cfg.dedup_sets, init=[])
        dd_w = dmem.write_port(granularity=1)
        dd_r = dmem.read_port(transparent_for=())
        k_set = h3_expr(k_key, SEED_DEDUP, kb, dset_bits)
        if dset_bits:
            sweep_i = Signal(dset_bits)
            sweep_last = sweep_i == cfg.dedup_sets - 1
        else:
            sweep_i, sweep_last = Const(0, 0), Const(1)
        m.d.comb += [dd_r.addr.eq(k_set), dd_w.addr.eq(k_set)]
        word = dd_r.data
        match_any, _, match_idx = _priority(
            [word[w].valid & (word[w].key == k_key) for w in range(ways)],
            [word[w].index for w in range(ways)])
        free_any, free_way, _ = _priority([~word[w].valid for w in range(ways)])
        staging_full = staged == cfg.staging_rows

        # --- gather output register ---------------------------------------------------
        g_free = ~self.gather.valid | self.gather.ready
        with m.If(self.gather.valid & self.gather.ready):
            m.d.sync += self.gather.valid.eq(0)

        # --- per-output hold + output register -------------------------------------------
        outs = [self.popular, self.nonpopular]
        h_valid = [Signal(name=f"h_valid{p}") for p in range(2)]
        h_beat = [Signal(out_layout, name=f"h_beat{p}") for p in range(2)]
        out_free = [~o.valid | o.ready for o in outs]
        hold_can = [~h_valid[p] | out_free[p] for p in range(2)]
        hold_in = [Signal(name=f"hold_in{p}") for p in range(2)]
        flush_req = [Signal(name=f"flush_req{p}") for p in range(2)]
        emit_beat = Signal(out_layout)

        for p, o in enumerate(outs):
            flush = flush_req[p] & out_free[p]
            with m.If((hold_in[p] & h_valid[p]) | flush):
                m.d.sync += [o.valid.eq(1), o.payload.eq(h_beat[p])]
                with m.If(flush):
                    m.d.sync += o.payload.last.eq(1)
                    with m.If(~h_valid[p]):
                        m.d.sync += o.payload.eq(0)
                        m.d.sync += o.payload.last.eq(1)
            with m.Elif(o.valid & o.ready):
                m.d.sync += o.valid.eq(0)
            with m.If(hold_in[p]):
                m.d.sync += [h_valid[p].eq(1), h_beat[p].eq(emit_beat)]
            with m.Elif(flush):
                m.d.sync += h_valid[p].eq(0)

        # --- packer -----------------------------------------------------------------------
        acc = Signal(data.ArrayLayout(lk_layout, lanes))
        cnt = Signal(range(lanes + 1))
        pk_push = Signal()
        pk_end = Signal()
        pk_entry = Signal(lk_layout)
        pk_ack = Signal()
        emit = Signal()
        m.d.comb += [
            emit.eq(pk_end | (pk_push & (cnt == lanes))),
            pk_ack.eq(~emit | Mux(sel, hold_can[1], hold_can[0])),
            emit_beat.sample_id.eq(sid),
            emit_beat.keep.eq(Cat(cnt > i for i in range(lanes))),
            emit_beat.user.eq(pk_end),
            emit_beat.last.eq(0),
            hold_in[0].eq(emit & pk_ack & ~sel),
            hold_in[1].eq(emit & pk_ack & sel),
        ]
        for i in range(lanes):
            m.d.comb += emit_beat.lookups[i].eq(Mux(cnt > i, acc[i], 0))
        with m.If(pk_push & pk_ack):
            with m.If(cnt == lanes):
                m.d.sync += [acc[0].eq(pk_entry), cnt.eq(1)]
            with m.Else():
                for i in range(lanes):
                    with m.If(cnt == i):
                        m.d.sync += acc[i].eq(pk_entry)
                m.d.sync += cnt.eq(cnt + 1)
        with m.If(pk_end & pk_ack):
            m.d.sync += cnt.eq(0)

        # --- control --------------------------------------------------------------------
        with m.FSM():
            with m.State("IDLE"):
                m.d.comb += self.lookups.ready.eq(~cam.busy)
                with m.If(self.lookups.valid & ~cam.busy):
                    p = self.lookups.payload
                    m.d.sync += [b_keys.eq(p.keys), b_keep.eq(p.keep), b_user.eq(p.user),
                                 b_last.eq(p.last)]
                    m.next = "KEY"

            with m.State("KEY"):
                with m.If(b_keep == 0):
                    with m.If(b_user | (b_last & opened)):
                        m.next = "END"
                    with m.Elif(b_last):
                        m.next = "FLUSH_P"
                    with m.Else():
                        m.next = "IDLE"
                with m.Else():
                    m.d.sync += [b_keep.eq(b_keep & ~cur_onehot), k_key.eq(cur_key)]
                    inc("lookups")
                    inc("bad_keys", cur_bad)
                    with m.If(long_ | (pos == msl)):
                        inc("overflows")
                        m.d.sync += nonpop.eq(1)
                        with m.If(long_):
                            m.next = "PUSH_X"
                        with m.Else():
                            inc("long_samples")
                            m.d.sync += [long_.eq(1), sel.eq(1)]
                            m.next = "DRAIN_START"
                    with m.Elif(cur_bad):
                        buf_write(TAG_OVERFLOW, cur_key)
                    with m.Else():
                        m.d.comb += [cam.lookup_valid.eq(1), cam.lookup_keys[0].eq(cur_key)]
                        m.next = "CAM_WAIT"

            with m.State("CAM_WAIT"):
                with m.If(cam.result_valid[0]):
                    with m.If(cam.result_hit[0]):
                        inc("hits")
                        buf_write(TAG_POPULAR, cam.result_slot[0])
                        m.next = "KEY"
                    with m.Else():
                        m.next = "DEDUP"

            with m.State("DEDUP"):
                with m.If(match_any):
                    buf_write(TAG_STAGED, match_idx)
                    m.next = "KEY"
                with m.Elif(staging_full | ~free_any):
                    buf_write(TAG_OVERFLOW, k_key)
                    m.next = "KEY"
                with m.Elif(g_free):
                    buf_write(TAG_STAGED, staged)
                    for w in range(ways):
                        m.d.comb += [dd_w.data[w].valid.eq(1), dd_w.data[w].key.eq(k_key),
                                     dd_w.data[w].index.eq(staged)]
                        with m.If(free_way == w):
                            m.d.comb += dd_w.en[w].eq(1)
                    m.d.sync += [
                        staged.eq(staged + 1),
                        self.gather.valid.eq(1),
                        self.gather.payload.key.eq(k_key),
                        self.gather.payload.bank.eq(bank),
                        self.gather.payload.index.eq(staged),
                    ]
                    inc("staged_rows")
                    m.next = "KEY"

            with m.State("PUSH_X"):
                m.d.comb += [pk_push.eq(1), pk_entry.tag.eq(TAG_OVERFLOW),
                             pk_entry.value.eq(k_key)]
                with m.If(pk_ack):
                    m.next = "KEY"

            with m.State("END"):
                m.d.sync += sel.eq(nonpop)
                with m.If(nonpop):
                    inc("nonpopular_samples")
                with m.Else():
                    inc("popular_samples")
                with m.If(long_):
                    m.next = "END_EMIT"
                with m.Else():
                    m.next = "DRAIN_START"

            with m.State("DRAIN_START"):
                m.d.sync += rd_i.eq(0)
                m.d.comb += sb_r.addr.eq(0)
                with m.If(pos == 0):
                    m.next = "END_EMIT"
                with m.Else():
                    m.next = "DRAIN"

            with m.State("DRAIN"):
                m.d.comb += [pk_push.eq(1), pk_entry.eq(sb_r.data)]
                with m.If(pk_ack):
                    m.d.comb += sb_r.addr.eq(rd_i + 1)
                    m.d.sync += rd_i.eq(rd_i + 1)
                    with m.If(rd_i == pos - 1):
                        with m.If(long_):
                            m.next = "PUSH_X"
                        with m.Else():
                            m.next = "END_EMIT"

            with m.State("END_EMIT"):
                m.d.comb += pk_end.eq(1)
                with m.If(pk_ack):
                    m.d.sync += [sid.eq(sid + 1), pos.eq(0), long_.eq(0), nonpop.eq(0)]
                    with m.If(b_last):
                        m.next = "FLUSH_P"
                    with m.Else():
                        m.next = "IDLE"

            with m.State("FLUSH_P"):
                m.d.comb += flush_req[0].eq(1)
                with m.If(out_free[0]):
                    m.next = "FLUSH_N"

            with m.State("FLUSH_N"):
                m.d.comb += flush_req[1].eq(1)
                with m.If(out_free[1]):
                    m.next = "SWEEP"

            with m.State("SWEEP"):
                m.d.comb += [dd_w.addr.eq(sweep_i), dd_w.en.eq(-1), dd_w.data.eq(0)]
                if dset_bits:
                    m.d.sync += sweep_i.eq(sweep_i + 1)
                with m.If(sweep_last):
                    m.d.sync += [bank.eq(bank + 1), staged.eq(0), sid.eq(0)]
                    m.next = "IDLE"
        return m
