"""The mini-batch fragmenter: lookup beats in; popular and non-popular micro-batch beats and
gather requests out, at one input beat per cycle. Bit-exact with ``golden.fragment.fragment``
and the framing of ``golden.framing`` (``output_beats``).

Pipeline
--------
1. **Input** (``lookups``): a beat is accepted when the meta FIFO has room (it counts every
   beat in flight up to dispatch) and the CAM is not sweeping. Its ``lanes`` keys go to the
   CAM at once; in the same cycle the beat's bookkeeping is computed and queued in the
   **meta FIFO**: each lane's position in its sample (lookups past ``max_sample_lookups``
   leave as ``OVERFLOW``), bad keys (table id >= ``num_tables``), the de-dup set of each key,
   the sample id, and the framing (``user``, and ``last`` without ``user``, which closes the
   open sample and is counted as a framing error). A beat that carries no key and ends
   nothing is dropped. ``flush`` ends an open mini-batch as if a ``last`` beat had come (a
   framing error: the stream stopped).
2. **CAM** (external, ``cam_*`` ports, ``cam_latency`` cycles, every lane every cycle): the
   results are queued in the **result FIFO**, in step with the meta FIFO, with the beat's
   misses per de-dup bank, counted from its keep, overflow and bank bits, which wait beside
   the CAM in a ``cam_latency``-stage shift register.
3. **Dispatch** (one beat per cycle): a beat's meta and CAM results leave their FIFOs into
   a register (the output of a two-entry skid buffer) with each lane's kind (``HIT``,
   ``OVERFLOW``, ``MISS``), each miss's rank among the beat's misses to its de-dup bank and
   the misses per bank; from there dispatch
   pushes the sample's verdict into the **verdict FIFO** as soon as it is known (at its first
   lookup that is not a hit: non-popular; at its end: popular); pushes each miss into its
   de-dup bank (:mod:`.dedup`, up to ``lanes`` misses a cycle over ``dedup_banks`` banks); and
   pushes the beat into the **beat FIFO**, which holds it until its sample's verdict and its
   misses' de-dup results are known. The first beat of a mini-batch waits until everything of
   the previous one has left (about 10 cycles), then starts the banks' new mini-batch.
4. **Retire** (one beat per cycle, in order), two stages. *Take*: the beat leaves the beat
   FIFO with its de-dup results into a pipeline register once every repeated row's index is
   resolved in its bank or will be forwarded at *assign*: its first occurrence is in the
   beat itself, in the register, or in the beat retired last (the ``DUP``'s ordinal is not
   below that beat's first ``NEW`` ordinal in the bank). Whether each bank's first results
   may leave is a register per bank and place (``tk_ok``), so the take decision is a few
   gates from flip-flops; the beat's rank of each miss in its bank and misses per bank come
   from dispatch, in the beat FIFO. *Assign*: each new row gets the next
   staging index (a prefix count over the beat's lanes), or ``OVERFLOW`` past
   ``staging_rows``; a repeated row takes its first occurrence's index (resolved, or
   forwarded from an earlier lane of the beat or from the last three retired beats: the
   source is chosen at take by comparing the low bits of the ordinals, exact in that window
   of consecutive beats); a row whose de-dup set is full leaves as ``OVERFLOW``. The
   translated beat waits in the sample buffer (then a two-entry skid buffer) for its
   sample's verdict and goes to the output FIFO of that verdict, the beat's newly staged
   rows to the gather FIFO (one beat, up to ``lanes`` requests; ``gather``'s valid and
   payload are the FIFO's output registers), and the statistics are counted. After a
   mini-batch's last beat each output gets a terminator beat, and the staging bank advances
   (mini-batch ``n`` since reset uses bank ``n % staging_banks``). Two stages keep the
   de-dup banks' queue pointers (res_q pop, resolver) apart from the staging count and the
   output handshakes (timing).

Throughput and latency
----------------------
With no backpressure the input takes one beat per cycle, also across samples, except: (a) the
first beat of a mini-batch waits for the previous mini-batch to drain (``DRAIN_CYCLES``,
about 10, per mini-batch; beats already accepted keep the input busy meanwhile); (b) a
de-dup bank offered more misses than its queue holds (``lanes`` misses can land in one bank;
on average a bank gets ``lanes * miss_rate / banks`` per cycle, under 1 with a bank per lane
and fewer than all lookups missing); (c) a repeated
row whose first occurrence is neither in its own beat, nor in the beat being assigned or
the beat retired last, nor resolved by its bank yet waits for its bank's resolver (two to
four cycles). A popular sample's beats leave once its last beat is dispatched; other
samples' beats leave as soon as their de-dup results are known. **Latency** from a sample's
last input beat to its first output beat: :attr:`MiniBatchFragmenter.min_latency` cycles
(``cam_latency + 12``) for a popular sample with no backpressure, 5 more for a sample with a
new row (its de-dup bank); it grows only while earlier beats still wait (a de-dup bank
queue, a full output), never unboundedly: nothing waits for a later beat.

Statistics
----------
``stat_<name>`` (``Out(32)``, every name of :data:`STAT_NAMES`): totals over the completed
mini-batches since reset; ``last_<name>``: the latest completed mini-batch. The names are the
fields of ``golden.records.BatchCounters`` plus ``framing_errors`` and ``minibatches``.
Event pulses ``ev_minibatch`` (a mini-batch completed), ``ev_bad_key``, ``ev_overflow``
(a lookup left as OVERFLOW because staging or its de-dup set was full) and ``ev_framing``
feed the status and interrupt registers.
"""

from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal, Value
from amaranth.lib import data, stream, wiring
from amaranth.lib.fifo import SyncFIFOBuffered
from amaranth.lib.wiring import In, Out
from amaranth.utils import bits_for, ceil_log2

from ..hashing import SEED_DEDUP
from .bits import need_bit, popcount
from .cam import PopularityCAM
from .dedup import KIND_DUP, KIND_FULL, KIND_NEW, BankGeometry, DedupBank
from .hash import h3_expr
from .queues import PeekFIFO

__all__ = ["MiniBatchFragmenter", "FragmenterUnit", "STAT_NAMES", "TAG_POPULAR", "TAG_STAGED",
           "TAG_OVERFLOW", "input_layout", "output_layout", "gather_layout", "lookup_layout"]

TAG_POPULAR, TAG_STAGED, TAG_OVERFLOW = 1, 2, 3

#: Statistics counters (``stat_<name>``, ``last_<name>``).
STAT_NAMES = ("lookups", "hits", "popular_samples", "nonpopular_samples", "staged_rows",
              "overflows", "bad_keys", "long_samples", "staging_full", "dedup_full", "id_wraps",
              "framing_errors", "minibatches")

# lane kinds between dispatch and retire
K_NONE, K_HIT, K_OVF, K_MISS = 0, 1, 2, 3


def value_bits(cfg):
    return max(cfg.key_bits, cfg.slot_bits, cfg.staging_index_bits)


def lookup_layout(cfg):
    """A translated lookup: ``tag`` (1 POPULAR, 2 STAGED, 3 OVERFLOW, 0 empty lane), ``value``."""
    return data.StructLayout({"tag": 2, "value": value_bits(cfg)})


def input_layout(cfg):
    return data.StructLayout({"keys": data.ArrayLayout(cfg.key_bits, cfg.lanes),
                              "keep": cfg.lanes, "user": 1, "last": 1})


def output_layout(cfg):
    return data.StructLayout({
        "sample_id": cfg.sample_id_bits,
        "lookups": data.ArrayLayout(lookup_layout(cfg), cfg.lanes),
        "keep": cfg.lanes, "user": 1, "last": 1})


def bank_bits(cfg):
    return max(1, ceil_log2(cfg.staging_banks))


def gather_layout(cfg):
    """A gather beat: up to ``lanes`` requests of one mini-batch: lane ``i`` (``keep`` bit
    ``i``) asks for the row of ``keys[i]`` at index ``indices[i]`` of staging bank ``bank``.
    Requests are in index order: lane order within a beat, beat order."""
    return data.StructLayout({"bank": bank_bits(cfg),
                              "keys": data.ArrayLayout(cfg.key_bits, cfg.lanes),
                              "indices": data.ArrayLayout(cfg.staging_index_bits, cfg.lanes),
                              "keep": cfg.lanes})


def _pow2_at_least(n):
    return 1 << ceil_log2(max(2, n))



def _room_reg(m, fifo, depth, w_en, name):
    """A register that is 1 iff ``fifo`` (a ``SyncFIFOBuffered`` of ``depth``) holds at most
    ``depth - 2`` entries: its ``w_rdy`` is then 1 (the FIFO takes a write while it holds
    fewer than ``depth - 1``, the output register apart). Next value chosen among compares
    of the ``level`` register with constants by this cycle's write (``w_en``, a write only
    with ``w_rdy``) and read, last."""
    room = Signal(name=name, init=1)
    lv = fifo.level
    rd = fifo.r_en & fifo.r_rdy
    m.d.sync += room.eq(Mux(w_en, Mux(rd, lv <= depth - 2, lv <= depth - 3),
                            Mux(rd, lv <= depth - 1, lv <= depth - 2)))
    return room

class MiniBatchFragmenter(wiring.Component):
    """The fragmenter without its CAM (see the module docstring).

    Parameters
    ----------
    cfg : HotlineConfig
    cam_latency : int
        Cycles from ``cam_lookup_valid`` to ``cam_result_valid`` (``PopularityCAM.LATENCY``).

    Members
    -------
    lookups : In(stream of ``input_layout``)
        ``keys`` (``lanes`` keys), ``keep`` (one bit per lane), ``user`` (last beat of a
        sample), ``last`` (last beat of a mini-batch).
    popular, nonpopular : Out(stream of ``output_layout``)
        ``sample_id``, ``lookups`` (``lanes`` translated lookups), ``keep``, ``user``,
        ``last`` (only on the terminator beat); see ``golden.framing``.
    gather : Out(stream of ``gather_layout``)
        Gather requests of newly staged rows.
    cam_lookup_valid, cam_lookup_keys : Out
        To the CAM's lookup lanes (every lane of every accepted beat is looked up).
    cam_result_valid, cam_result_hit, cam_result_slot : In
        From the CAM, ``cam_latency`` cycles later.
    cam_busy : In(1)
        The CAM is sweeping: no beat is accepted.
    flush : In(1)
        Pulse: end the open mini-batch (the stream stopped); counted as a framing error.
        Taken from the next cycle on, and held until the synthetic ``last`` beat has gone
        into the meta FIFO (which may be full for a while); no effect when no mini-batch is
        open by then.
    busy : Out(1)
        A mini-batch is open, or something accepted has not yet left on an output.
    gather_busy : Out(1)
        A gather request may still come: a mini-batch is open, or accepted beats have not
        yet retired, or the gather FIFO holds requests. (Low: every gather request of the
        mini-batches so far has left on ``gather``.)
    stat_<name>, last_<name> : Out(32)
        Statistics (module docstring).
    ev_minibatch, ev_bad_key, ev_overflow, ev_framing : Out(1)
        One-cycle event pulses.
    """

    def __init__(self, cfg, cam_latency):
        self.cfg = cfg
        self.cam_latency = cam_latency
        self.geo = BankGeometry(cfg)
        L, kb, sb = cfg.lanes, cfg.key_bits, cfg.slot_bits
        ports = {
            "lookups": In(stream.Signature(input_layout(cfg))),
            "popular": Out(stream.Signature(output_layout(cfg))),
            "nonpopular": Out(stream.Signature(output_layout(cfg))),
            "gather": Out(stream.Signature(gather_layout(cfg))),
            "cam_lookup_valid": Out(L),
            "cam_lookup_keys": Out(data.ArrayLayout(kb, L)),
            "cam_result_valid": In(L),
            "cam_result_hit": In(L),
            "cam_result_slot": In(data.ArrayLayout(sb, L)),
            "cam_busy": In(1),
            "flush": In(1),
            "busy": Out(1),
            "gather_busy": Out(1),
            "ev_minibatch": Out(1),
            "ev_bad_key": Out(1),
            "ev_overflow": Out(1),
            "ev_framing": Out(1),
        }
        for n in STAT_NAMES:
            ports["stat_" + n] = Out(32)
            ports["last_" + n] = Out(32)
        super().__init__(ports)

    @property
    def min_latency(self):
        """Cycles from a sample's last input beat to its first output beat with no
        backpressure and nothing ahead of it: a popular sample's (a new row's sample waits
        5 cycles more, for its de-dup bank). Measured by ``test_min_latency``."""
        return self.cam_latency + 12

    def elaborate(self, platform):
        cfg, geo = self.cfg, self.geo
        m = Module()
        L, kb, sb = cfg.lanes, cfg.key_bits, cfg.slot_bits
        ib, vb = cfg.staging_index_bits, value_bits(cfg)
        msl = cfg.max_sample_lookups
        B, bb = geo.banks, geo.bank_bits
        sidb = cfg.sample_id_bits
        nbad = bits_for(L)

        # ================================================================ 1. input =====
        meta_layout = data.StructLayout({
            "keys": data.ArrayLayout(kb, L),
            "keep": L,
            "ovf": L,             # bad key or past max_sample_lookups
            "bank": data.ArrayLayout(max(1, bb), L),
            "lset": data.ArrayLayout(max(1, geo.lset_bits), L),
            "user": 1, "last": 1, "has_sample": 1, "first": 1,
            "sid": sidb, "bad_n": nbad, "long_end": 1, "ferr": 1, "idwrap": 1,
        })
        fifo_depth = _pow2_at_least(2 * (self.cam_latency + 4))
        m.submodules.metaf = metaf = SyncFIFOBuffered(width=meta_layout.size, depth=fifo_depth)
        # `need`: the beat's misses per de-dup bank, counted as its CAM results arrive (see
        # "2. CAM results"), so the dispatch stage's bank-room compare starts at the FIFO's
        # output register, not at a popcount of its hit, keep and bank bits
        res_layout = data.StructLayout({"hit": L, "slot": data.ArrayLayout(sb, L),
                                        "need": data.ArrayLayout(range(L + 1), B)})
        m.submodules.resf = resf = SyncFIFOBuffered(width=res_layout.size, depth=fifo_depth)

        p = self.lookups.payload
        # room left in the open sample: max_sample_lookups minus its lookups so far (0 once
        # past it). Lane i of a beat is past it iff the kept lanes before it number at least
        # `sroom`: a small count against a register, no adder in the input path (8 lanes:
        # keep -> prefix count -> + position -> compare was the deepest path of `tiny`).
        sroom = Signal(range(msl + 1), init=msl)
        s_open = Signal()                    # the open sample has a key
        s_long = Signal()                    # ... and a lookup past msl
        b_open = Signal()                    # a mini-batch is open (a beat since `last`)
        sid = Signal(sidb)
        scount = Signal(sidb + 2)            # samples begun in this mini-batch (saturating)

        inject = Signal()                    # flush: a synthetic `last` beat
        # the flush pulse is held until the mini-batch is closed: the meta FIFO may be full
        # when it comes (outputs backpressured), and a lost flush left the unit busy for
        # ever; held in a register, it also keeps the control logic's command decode out
        # of the input stage's paths
        flush_req = Signal()
        with m.If(self.flush):
            m.d.sync += flush_req.eq(1)
        with m.Elif(inject | ~b_open):
            m.d.sync += flush_req.eq(0)
        m.d.comb += inject.eq(flush_req & b_open & metaf.w_rdy)
        m.d.comb += self.lookups.ready.eq(metaf.w_rdy & ~self.cam_busy & ~inject)
        take = Signal()
        m.d.comb += take.eq(self.lookups.valid & self.lookups.ready)

        # The beat pushed into the meta FIFO is the input beat or, on a flush, a synthetic
        # empty `last` beat. `inject` depends on the FIFO's room (the latest signal here), so
        # both beats' meta words and next sample state are built side by side, and `inject`
        # only chooses between them (8 lanes: room -> keep -> lane positions -> meta was the
        # deepest path of the core).
        def beat(keep, user_in, last_in, flush):
            """(meta word, next state, carries nothing) of the beat ``keep``/``user_in``/
            ``last_in`` (the flush beat when ``flush``)."""
            sfx = "_f" if flush else ""

            def named(name, shape, value):
                """``value`` through a named signal (the input beat's, for reading the
                netlist); the flush beat's values stay expressions, which fold to
                constants (a named signal would be left unused)."""
                if flush:
                    return value
                sig = Signal(shape, name=name)
                m.d.comb += sig.eq(value)
                return sig

            meta = Signal(meta_layout, name=f"meta{sfx}")
            excess, bads = [], []
            for i in range(L):
                before = popcount(keep[j] for j in range(i))   # kept lanes before lane i
                bad = named(f"bad{i}", 1,
                            keep[i] & ((p.keys[i] >> cfg.row_bits) >= cfg.num_tables))
                ex = named(f"excess{i}", 1, keep[i] & (before >= sroom))
                excess.append(ex)
                bads.append(bad)
                m.d.comb += meta.ovf[i].eq(bad | ex)
                if not flush:
                    dset = h3_expr(p.keys[i], SEED_DEDUP, kb, cfg.dedup_set_bits)
                    if bb:
                        m.d.comb += meta.bank[i].eq(dset[:bb])
                    if geo.lset_bits:
                        m.d.comb += meta.lset[i].eq(dset[bb:])
            any_excess = Cat(*excess).any()
            user_eff = named("user_eff", 1, user_in | (last_in & (s_open | (keep != 0))))
            ferr = Const(1, 1) if flush else (last_in & ~user_in & (s_open | (keep != 0)))
            cap = (1 << sidb) + 1
            scount_next = named("scount_next", sidb + 2,
                                Mux(user_eff & (scount < cap), scount + 1, scount))
            m.d.comb += [
                meta.keys.eq(p.keys),
                meta.keep.eq(keep),
                meta.user.eq(user_eff),
                meta.last.eq(last_in),
                meta.has_sample.eq((keep != 0) | user_eff),
                meta.first.eq(~b_open),
                meta.sid.eq(sid),
                meta.bad_n.eq(popcount(bads)),
                meta.long_end.eq(user_eff & (s_long | any_excess)),
                meta.ferr.eq(ferr),
                # scount_next > 2**sidb, from scount alone (it saturates at cap): no adder
                meta.idwrap.eq(last_in & ((scount >= cap)
                                          | (user_eff & (scount == (1 << sidb))))),
            ]
            # the sample state after this beat
            cnt = popcount(keep[i] for i in range(L))
            nxt = {
                "b_open": ~last_in,
                "scount": Mux(last_in, 0, scount_next),
                "sroom": Mux(user_eff, msl, Mux(cnt >= sroom, 0, sroom - cnt)),
                "s_open": Mux(user_eff, 0, s_open | (keep != 0)),
                "s_long": Mux(user_eff, 0, s_long | any_excess),
                "sid": Mux(last_in, 0, Mux(user_eff, sid + 1, sid)),
            }
            nothing = (keep == 0) & ~user_in & ~last_in      # carries nothing: dropped
            return meta, nxt, nothing

        meta_in, nxt_in, pure_nothing = beat(p.keep, p.user, p.last, False)
        meta_fl, nxt_fl, _ = beat(Const(0, L), Const(0, 1), Const(1, 1), True)
        meta = Signal(meta_layout)
        m.d.comb += meta.eq(Mux(inject, meta_fl, meta_in))
        push = Signal()
        m.d.comb += [
            push.eq((take & ~pure_nothing) | inject),
            metaf.w_en.eq(push),
            metaf.w_data.eq(meta),
            self.cam_lookup_valid.eq(Mux(push, (1 << L) - 1, 0)),
            self.cam_lookup_keys.eq(p.keys),
        ]
        state = {"b_open": b_open, "scount": scount, "sroom": sroom, "s_open": s_open,
                 "s_long": s_long, "sid": sid}
        with m.If(push):
            for name, reg in state.items():
                m.d.sync += reg.eq(Mux(inject, nxt_fl[name], nxt_in[name]))

        # ================================================================ 2. CAM results
        # The beat's keep, overflow and bank bits wait beside the CAM for its results in a
        # shift register of `cam_latency` stages (the CAM's latency is fixed: a lookup's
        # result comes exactly `cam_latency` cycles later, every cycle), and its misses per
        # bank are counted on the way into the result FIFO (timing: the count, from the
        # FIFOs' heads, began the dispatch stage's longest path, `d_in.res.hit` -> the
        # popcount -> the bank-room compare -> `bank_ok`, 11.8 ns on `ulx3s`). A register
        # copy checks the count against the heads' bits at every beat read.
        dl_layout = data.StructLayout({"keep": L, "ovf": L,
                                       "bank": data.ArrayLayout(max(1, bb), L)})
        dl = [Signal(dl_layout, name=f"cam_meta{t}", reset_less=True)
              for t in range(self.cam_latency)]
        m.d.sync += dl[0].eq(Cat(meta.keep, meta.ovf, meta.bank))
        for t in range(1, self.cam_latency):
            m.d.sync += dl[t].eq(dl[t - 1])
        rm = dl[-1]
        rin = Signal(res_layout)
        m.d.comb += [rin.hit.eq(self.cam_result_hit), rin.slot.eq(self.cam_result_slot),
                     resf.w_en.eq(self.cam_result_valid[0]), resf.w_data.eq(rin)]
        for b in range(B):
            m.d.comb += rin.need[b].eq(popcount(
                rm.keep[i] & ~rm.ovf[i] & ~self.cam_result_hit[i]
                & ((rm.bank[i] == b) if bb else Const(1, 1)) for i in range(L)))

        # ================================================================ 3. dispatch ==
        beat_layout = data.StructLayout({
            "kind": data.ArrayLayout(2, L),
            "value": data.ArrayLayout(vb, L),
            "bank": data.ArrayLayout(max(1, bb), L),
            "rank": data.ArrayLayout(max(1, ceil_log2(L)), L),   # a miss's place in its bank
            "need": data.ArrayLayout(bits_for(L), B),          # the beat's misses per bank
            "user": 1, "last": 1, "has_sample": 1, "sid": sidb, "bad_n": nbad,
            "long_end": 1, "ferr": 1, "idwrap": 1,
        })
        # beats wait here for their de-dup results only; a sample waiting for its verdict
        # waits after retirement, in the sample buffer, so de-dup results never pile up
        beat_depth = _pow2_at_least(max(16, 2 * L + 8))
        need_f = beat_layout["need"]         # (the take stage peeks at the next beat's need)
        m.submodules.beatf = beatf = PeekFIFO(
            width=beat_layout.size, depth=beat_depth,
            peek=slice(need_f.offset, need_f.offset + need_f.width),
            block_ram=cfg.queue_ram == "block")
        sbuf_depth = _pow2_at_least(2 * -(-msl // L) + 16)
        # The verdict FIFO never fills, so dispatch does not read its level (timing: its
        # level compare and adder were the longest path on the ulx3s). A sample's verdict
        # waits from its push until its last beat (``user``) is emitted, and a sample's beats
        # are emitted only once every earlier sample's are. So each waiting verdict has a
        # beat of its own sample in the beat FIFO (at most beat_depth - 1: `bf_room`), the
        # retire register ``rp_*``, the sample buffer (at most sbuf_depth - 1: `sb_room`) or
        # the emit skid buffer (two, `e0` and `e0s`): its last beat, or, for the open sample,
        # the beat that pushed it, unless every earlier sample has left. At most
        # beat_depth + sbuf_depth + 1 wait; one to spare.
        m.submodules.verdf = verdf = SyncFIFOBuffered(width=1,
                                                      depth=beat_depth + sbuf_depth + 2)

        banks = []
        for b in range(B):
            bank = DedupBank(cfg, geo, b)
            m.submodules[f"dedup{b}"] = bank
            banks.append(bank)
        # parts whose `register_copies` the amaranth.sim tests check (sim/register_copies.py)
        self.register_copy_parts = banks + [beatf]

        # The dispatch register (d0): a beat's meta and CAM results leave their FIFOs into
        # it with each lane's kind, each miss's rank in its bank and the misses per bank
        # (timing: the CAM hits do not reach the de-dup banks' queues in the same cycle).
        fm = data.View(meta_layout, metaf.r_data)
        fr = data.View(res_layout, resf.r_data)
        f_kind = [Mux(~fm.keep[i], K_NONE, Mux(fm.ovf[i], K_OVF, Mux(fr.hit[i], K_HIT, K_MISS)))
                  for i in range(L)]
        f_miss = [fm.keep[i] & ~fm.ovf[i] & ~fr.hit[i] for i in range(L)]

        def fbank(i):
            return fm.bank[i] if bb else Const(0, 1)

        # d0 is the output register of a two-entry skid buffer (timing: the FIFOs' read enable
        # is `~d0s_valid`, a flip-flop, so `dispatch`, which ends a long bank-room compare,
        # reaches only d0's load enables, not the FIFOs' level adders). The skid register
        # `d0s_*` takes the beat the FIFOs hand over while d0 is full and does not dispatch.
        # (data registers without reset, here and in the retire stage: each is used only
        # while its valid bit, which resets, says so; they stay off the reset net)
        d_layout = data.StructLayout({
            "meta": meta_layout, "res": res_layout,
            "kind": data.ArrayLayout(2, L), "rank": data.ArrayLayout(range(L), L),
            "need": data.ArrayLayout(range(L + 1), B), "sel": data.ArrayLayout(L, B)})
        d_in = Signal(d_layout)
        m.d.comb += [d_in.meta.eq(fm), d_in.res.eq(fr)]
        for i in range(L):
            m.d.comb += [
                d_in.kind[i].eq(f_kind[i]),
                d_in.rank[i].eq(popcount(f_miss[j] & (fbank(j) == fbank(i)) for j in range(i))),
            ]
        for b in range(B):
            m.d.comb += [
                d_in.need[b].eq(fr.need[b]),         # (counted at the CAM result: above)
                d_in.sel[b].eq(Cat(*[f_miss[i] & (fbank(i) == b) for i in range(L)])),
            ]
        d_in_valid = Signal()
        d0_valid = Signal()
        d0s_valid = Signal()
        d0 = Signal(d_layout, reset_less=True)
        d0s = Signal(d_layout, reset_less=True)
        dispatch = Signal()
        d_rd = Signal()                      # the beat at the FIFOs' heads enters d0 or d0s
        m.d.comb += [d_in_valid.eq(metaf.r_rdy & resf.r_rdy), d_rd.eq(d_in_valid & ~d0s_valid),
                     metaf.r_en.eq(d_rd), resf.r_en.eq(d_rd)]
        with m.If(~d0s_valid):
            m.d.sync += d0s.eq(d_in)
        with m.If(~d0_valid | dispatch):
            with m.If(d0s_valid):
                m.d.sync += [d0.eq(d0s), d0_valid.eq(1), d0s_valid.eq(0)]
            with m.Else():
                m.d.sync += [d0.eq(d_in), d0_valid.eq(d_in_valid)]
        with m.Elif(d_rd):
            m.d.sync += d0s_valid.eq(1)
        d0_meta, d0_res = d0.meta, d0.res
        kind, rank, d_need, d_sel = d0.kind, d0.rank, d0.need, d0.sel
        dm = d0_meta
        dr = d0_res
        miss = [kind[i] == K_MISS for i in range(L)]
        nonhit = Cat(*[(kind[i] == K_OVF) | miss[i] for i in range(L)]).any()

        # Room for the beat in d0 in every bank's queue: a register (timing: `dispatch`,
        # which writes the beat FIFO's LUT RAM and every bank's queue, is then an AND of
        # flip-flops, not the end of the need/space compares). Its next value is chosen by
        # this cycle's dispatch, last, among compares of the spaces with the needs of the
        # beat d0 holds next (d0's own, or the one it loads: from d0s or the FIFOs), with
        # the bank's pop of this cycle added (its B0 issue, from its registers) and, if d0
        # leaves now, d0's need subtracted: the compare of the next cycle, a cycle early
        # (a register copy checks it).
        bank_ok = Signal()
        op_l = []
        for i in range(L):
            op = Signal(geo.op_layout(cfg), name=f"d_op{i}")
            m.d.comb += op.key.eq(dm.keys[i])
            if geo.lset_bits:
                m.d.comb += op.lset.eq(dm.lset[i])
            op_l.append(op)
        ok_keep, ok_load, ok_after, ok_now = [], [], [], []
        for b, bank in enumerate(banks):
            space = bank.in_q.space
            need_next = Mux(d0s_valid, d0s.need[b], d_in.need[b])

            def room(n):                     # space after this cycle's pop >= n
                return Mux(bank.in_q.pop_n, space + 1 >= n, space >= n)

            ok_keep.append(room(d_need[b]))
            ok_load.append(room(need_next))
            ok_after.append(room(d_need[b] + need_next))
            ok_now.append(space >= d_need[b])
            for i in range(L):
                m.d.comb += [bank.in_q.wr_off[i].eq(rank[i]), bank.in_q.wr_data[i].eq(op_l[i])]
        m.d.sync += bank_ok.eq(Mux(dispatch, Cat(*ok_after).all(),
                                   Mux(d0_valid, Cat(*ok_keep).all(), Cat(*ok_load).all())))
        self.register_copies = [
            ("bank_ok: every bank's queue has room for d0's beat", Const(0, 1),
             d0_valid & (bank_ok != Cat(*ok_now).all())),
            ("the misses per bank counted at the CAM result = the FIFO heads' count",
             Const(0, 1), d_in_valid & Cat(*[
                 fr.need[b] != popcount(f_miss[i] & (fbank(i) == b) for i in range(L))
                 for b in range(B)]).any()),
        ]

        # verdict of the open sample (at dispatch)
        v_pushed = Signal()
        v_push = Signal()
        v_np = Signal()
        m.d.comb += [
            v_np.eq(nonhit),
            v_push.eq(dm.has_sample & ~v_pushed & (nonhit | dm.user)),
        ]

        # mini-batch boundary: the first beat waits for the previous mini-batch to drain
        all_idle = Signal()
        retire_idle = Signal()
        dedup_idle = Signal()                # the previous mini-batch has retired
        rp_valid = Signal()                  # the retire pipeline register holds a beat
        m.d.comb += [
            dedup_idle.eq(Cat(*[bk.idle for bk in banks]).all() & (beatf.level == 0)
                          & ~beatf.r_rdy & ~rp_valid),
            all_idle.eq(dedup_idle & retire_idle),
        ]
        # `dedup_idle` a cycle late, from a register: the start pulse (which clears every
        # bank's `touched` bits) then starts at flip-flops, not at the beat FIFO's level adder.
        # Sound because nothing enters the banks but a dispatch: idle at t with no dispatch at
        # t means idle at t + 1 (the first beat of a mini-batch waits one cycle longer).
        was_idle = Signal()
        m.d.sync += was_idle.eq(dedup_idle & ~dispatch)
        started = Signal()
        start_now = Signal()
        m.d.comb += start_now.eq(d0_valid & dm.first & ~started & was_idle)
        for bk in banks:
            m.d.comb += bk.batch_start.eq(start_now)
        with m.If(start_now):
            m.d.sync += started.eq(1)

        # room in the beat FIFO as a register (`_room_reg`: one entry short of `w_rdy`), and
        # the verdict pushed a cycle after dispatch from the registers `vq_*` (timing:
        # `dispatch`, which fans out to every de-dup bank's queue, then starts at flip-flops
        # and drives neither FIFO's level compare nor the verdict FIFO's level adder). The
        # late push is harmless: the beat that pushed it cannot reach emit in one cycle.
        bf_room = _room_reg(m, beatf, beat_depth, dispatch, "bf_room")
        m.d.comb += dispatch.eq(d0_valid & bf_room & bank_ok & (~dm.first | started))
        with m.If(dispatch & dm.first):
            m.d.sync += started.eq(0)
        vq_en = Signal()
        vq_np = Signal(reset_less=True)
        m.d.sync += [vq_en.eq(dispatch & v_push), vq_np.eq(v_np)]
        m.d.comb += [beatf.w_en.eq(dispatch), verdf.w_en.eq(vq_en), verdf.w_data.eq(vq_np)]
        for b, bank in enumerate(banks):
            m.d.comb += [bank.in_q.push_n.eq(d_need[b]), bank.in_q.push_en.eq(dispatch)]
            for i in range(L):
                m.d.comb += bank.in_q.wr_en[i].eq(d_sel[b][i])     # (push_en: dispatch)
        with m.If(dispatch):
            with m.If(dm.user):
                m.d.sync += v_pushed.eq(0)
            with m.Elif(v_push):
                m.d.sync += v_pushed.eq(1)
        bw = Signal(beat_layout)
        for i in range(L):
            m.d.comb += [bw.kind[i].eq(kind[i]),
                         bw.value[i].eq(Mux(kind[i] == K_HIT, dr.slot[i], dm.keys[i]))]
            if bb:
                m.d.comb += bw.bank[i].eq(dm.bank[i])
            m.d.comb += bw.rank[i].eq(rank[i])
        for b in range(B):
            m.d.comb += bw.need[b].eq(d_need[b])
        m.d.comb += [
            bw.user.eq(dm.user), bw.last.eq(dm.last), bw.has_sample.eq(dm.has_sample),
            bw.sid.eq(dm.sid), bw.bad_n.eq(dm.bad_n), bw.long_end.eq(dm.long_end),
            bw.ferr.eq(dm.ferr), bw.idwrap.eq(dm.idwrap),
            beatf.w_data.eq(bw),
        ]

        # ================================================================ 4. retire ====
        # Two stages, so that the de-dup banks' queue pointers (res_q pop, resolver) and the
        # staging count / output handshakes are not one chain of logic:
        # 4a. **take**: the beat at the head of the beat FIFO leaves it, with its de-dup
        #     results, into the pipeline register ``rp_*`` once every repeated row's index is
        #     known (resolved in its bank, or forwarded: from an earlier lane of the beat, from
        #     the beat in ``rp_*``, or from the beat retired before it, ``h_*``);
        # 4b. **assign**: the beat in ``rp_*`` gets its staging indices and retires into the
        #     sample buffer, the gather FIFO and the banks' write queues.
        out_layout = output_layout(cfg)
        m.submodules.outp = outp = SyncFIFOBuffered(width=out_layout.size, depth=4)
        m.submodules.outn = outn = SyncFIFOBuffered(width=out_layout.size, depth=4)
        g_layout = gather_layout(cfg)
        m.submodules.gathf = gathf = SyncFIFOBuffered(width=g_layout.size, depth=4)
        for fifo, port in ((outp, self.popular), (outn, self.nonpopular), (gathf, self.gather)):
            m.d.comb += [port.valid.eq(fifo.r_rdy), port.payload.eq(fifo.r_data),
                         fifo.r_en.eq(port.ready)]

        res_l = geo.result_layout()
        ordb = geo.ord_bits

        # ---- 4a. take ----------------------------------------------------------------
        ab = data.View(beat_layout, beatf.r_data)
        amiss = [ab.kind[i] == K_MISS for i in range(L)]

        def abank(i):
            return ab.bank[i] if bb else Const(0, 1)

        # each miss's result: entry `rank` of its bank's res_q (rank and bank from dispatch)
        ares = []
        for i in range(L):
            rs = Signal(res_l, name=f"a_res{i}")
            if B > 1:
                per_bank = Array([Array([bk.res_q.peek[k].as_value() for k in range(L)])
                                  [ab.rank[i][:max(1, ceil_log2(L))]] for bk in banks])
                m.d.comb += rs.eq(per_bank[ab.bank[i]])
            else:
                m.d.comb += rs.eq(Array([banks[0].res_q.peek[k].as_value()
                                         for k in range(L)])[ab.rank[i]])
            ares.append(rs)
        anew = [Signal(name=f"a_new{i}") for i in range(L)]
        for i in range(L):
            m.d.comb += anew[i].eq(amiss[i] & (ares[i].kind == KIND_NEW))
        # The beat's new rows counted per bank from the bank's own results: its misses are
        # the first `need` entries of its result queue (ranks 0 .. need - 1), so bank b's
        # new rows are the NEW entries among them. A compare of `need` with constants and an
        # AND with each entry's kind, no select by lane (timing: `anew` comes through the
        # 16:1 select by bank and rank, and counting it across lanes put 7 LUT levels from
        # the beat FIFO's head into `rp_any_new` / `rp_nn`, the `ulx3s` route's worst
        # path). Register copies check both against the per-lane count at every take.
        bnew = [Cat(*[(banks[b].res_q.peek[k].kind == KIND_NEW) & (ab.need[b] > k)
                      for k in range(L)]) for b in range(B)]
        a_nn = [Signal(range(L + 1), name=f"a_nn{b}") for b in range(B)]
        a_any = Signal()
        for b in range(B):
            m.d.comb += a_nn[b].eq(popcount(bnew[b][k] for k in range(L)))
        m.d.comb += a_any.eq(Cat(*bnew).any())

        # the pipeline register between take and assign
        rp_beat = Signal(beat_layout, reset_less=True)    # the beat, as it was in the beat FIFO
        rp_res = [Signal(res_l, name=f"rp_res{i}", reset_less=True)      # lane's de-dup result
                  for i in range(L)]
        rp_new = Signal(L)                   # lane is a new row (a miss, KIND_NEW)
        rp_any_new = Signal()                # rp_new != 0
        # new rows before it, one-hot (bit k: k new rows in the lanes before it; lane 0:
        # none), from rp_new at assign (a function of i bits: the assign stage's selects by
        # it take the same LUT levels as by a registered one-hot, and take does not count)
        rp_pre = [None] + [Signal(L, name=f"rp_pre{i}") for i in range(1, L)]
        rp_rn = [Signal(range(L), name=f"rp_rn{i}") for i in range(L)]   # ... in its bank
        rp_nn = [Signal(range(L + 1), name=f"rp_nn{b}") for b in range(B)]  # new rows per bank
        # the new rows of the last HIST beats retired in this mini-batch, latest first
        # (forwarded to the assign stage)
        HIST = 3
        # Forwarding compares only the low `fwd_ob` bits of the ordinals. A repeated row that
        # is taken unresolved has its first occurrence (its NEW) among the forwarding sources:
        # the lanes before it in its beat and the HIST beats of history as they will be at
        # assign, HIST + 1 consecutive beats of its mini-batch. Their NEW rows of one bank
        # have consecutive ordinals, at most (HIST + 1) * L of them, so below
        # 2 ** fwd_ob > (HIST + 1) * L no two of them share their low bits: the compare is
        # exact. (For a resolved DUP or a row that is not a DUP the selects are not used.)
        # Timing: the ordinal of each lane's result comes through a 16:1 select by bank and
        # rank (`a_res`) on take's path into `rp_fl` / `rp_hs`; 5 bits instead of 12 on
        # `ulx3s`. A check (below) that every unresolved DUP taken matches exactly one
        # source runs in every amaranth.sim cycle.
        fwd_ob = min(ordb, bits_for((HIST + 1) * L))
        h_new = [Signal(L, name=f"h{t}_new") for t in range(HIST)]
        h_bank = [[Signal(max(1, bb), name=f"h{t}_bank{j}") for j in range(L)]
                  for t in range(HIST)]
        h_ord = [[Signal(fwd_ob, name=f"h{t}_ord{j}", reset_less=True) for j in range(L)]
                 for t in range(HIST)]
        h_val = [[Signal(geo.value_bits, name=f"h{t}_val{j}", reset_less=True) for j in range(L)]
                 for t in range(HIST)]
        # per bank: new rows retired in this mini-batch (their ordinals are 0 .. fcnt - 1),
        # and the first ordinal of the beat retired last (h0)
        fcnt = [Signal(range(geo.entries + 1), name=f"f_cnt{b}") for b in range(B)]
        hlo = [bk.fwd_lo for bk in banks]   # (registers of the fragmenter)
        # hlo's next value at a retire, Mux(rb.last, 0, fcnt), as a register per bank (the
        # banks' `fwd_cnt`; timing: rb.last is then not ORed into every result's flag)
        fnx = [Signal(range(geo.entries + 1), name=f"f_nx{b}") for b in range(B)]

        rb = rp_beat
        retire = Signal()                    # 4b retires the beat in rp_*

        def fcnt_at_retire(b):               # f_cnt's next value when rp_* retires
            return Mux(rb.last, 0, fcnt[b] + rp_nn[b])
        newval = [Signal(geo.value_bits, name=f"r_newval{i}") for i in range(L)]

        def rbank(i):
            return rb.bank[i] if bb else Const(0, 1)

        # Whether each bank's first results may leave: `take_ok` bit k (registered): the
        # bank's res_q holds entries 0 .. k and each is final or will be by assign: not a
        # DUP, or resolved, or a DUP whose NEW is not older than the beat retired last
        # (ordinal >= hlo: that NEW is in this beat, in rp_*, or one of the last three
        # retired beats when the beat is assigned, h0 .. h2, and the assign stage
        # forwards its index). Computed from this cycle's registers for the places after
        # this cycle's pop (pop_n selects last): results pushed or resolved this cycle count
        # a cycle later; an entry only gains `resolved`, and hlo moves by one beat a cycle,
        # which the three history beats cover.
        # (the register is the bank's `take_ok`, given the threshold `fwd_lo` = hlo)
        # `tk_ok`: bit need - 1 of every bank's take_ok for the beat at the beat FIFO's head,
        # as a register of its own (timing: `take`, which pops every bank's result queue
        # and loads the pipeline register, is then an AND of flip-flops and `retire`, not
        # the end of a select by the head beat's need). Its next value is chosen by take,
        # last: the banks' take_ok after this cycle's pop at the need of the beat that
        # reaches the head next (`beatf.next_data`), or without a pop at the head beat's
        # need (or the next beat's, when the head is empty). A register copy checks it.
        nb_need = data.View(need_f.shape, beatf.next_data)
        tk_ok = Signal()
        tk_now = []
        for b, bk in enumerate(banks):
            m.d.comb += [bk.need_pop.eq(nb_need[b]),
                         bk.need_keep.eq(Mux(beatf.r_rdy, ab.need[b], nb_need[b]))]
            tk_now.append(need_bit(bk.take_ok, ab.need[b]))
        take = Signal()
        ok_pop_all = Cat(*[bk.ok_pop for bk in banks]).all()
        ok_keep_all = Cat(*[bk.ok_keep for bk in banks]).all()

        def tk_ok_next(tk):                  # (the take handshake selects last)
            return Mux(tk, ok_pop_all, ok_keep_all)
        m.d.sync += tk_ok.eq(tk_ok_next(take))
        m.d.comb += take.eq(beatf.r_rdy & tk_ok & (~rp_valid | retire))
        self.register_copies.append(
            ("tk_ok is every bank's take_ok at the head beat's need", Const(0, 1),
             beatf.r_rdy & (tk_ok != Cat(*tk_now).all())))
        m.d.comb += beatf.r_en.eq(take)
        # Forwarding selects, decided at take (timing: the assign stage ANDs registered
        # one-hot selects with the values, no ordinal compares between its pipeline register
        # and the sample buffer). Lane i of the beat taken takes the index of the new row
        # with its bank and ordinal: an earlier lane j of the same beat (`rp_fl`, the value
        # computed at assign), or lane j of the history beat h_s as it will be when the beat
        # is assigned (`rp_hs`, bit s * L + j). Nothing retires between take and assign but
        # the beat leaving rp_* in the take cycle, so the history then is [rp_*, h0, h1]
        # (a retire now) or [h0, h1, h2] (rp_* was empty). (A beat that ends its mini-batch
        # is never in rp_* when a beat is taken: the next mini-batch's first beat is
        # dispatched only once the retire stage is empty.)
        rp_fl = [Signal(i, name=f"rp_fl{i}") for i in range(L)]   # (lane 0: none)
        rp_hs = [Signal(HIST * L, name=f"rp_hs{i}") for i in range(L)]

        def hmatch(i, new_j, bank_j, ord_j):
            return new_j & (bank_j == abank(i)) & (ord_j[:fwd_ob] == ares[i].ord[:fwd_ob])

        for i in range(L):
            lanes_i = [hmatch(i, anew[j], abank(j), ares[j].ord) for j in range(i)]
            c_h = [Cat(*[hmatch(i, h_new[t][j], h_bank[t][j] if bb else Const(0, 1),
                                h_ord[t][j]) for j in range(L)]) for t in range(HIST)]
            c_rp = Cat(*[hmatch(i, rp_new[j], rbank(j), rp_res[j].ord) for j in range(L)])
            c_hs = Mux(retire, Cat(c_rp, *c_h[:HIST - 1]), Cat(*c_h))
            with m.If(take):
                if i:
                    m.d.sync += rp_fl[i].eq(Cat(*lanes_i))
                m.d.sync += rp_hs[i].eq(c_hs)
            # (the low-bit compares are exact: an unresolved DUP taken has one source)
            srcs = Cat(*lanes_i, c_hs)
            one = (srcs != 0) & ((srcs & (srcs - 1)[:len(srcs)]) == 0)
            udup = take & amiss[i] & (ares[i].kind == KIND_DUP) & ~ares[i].resolved
            self.register_copies.append(
                (f"lane {i}: an unresolved DUP taken matches one forwarding source",
                 Const(0, 1), udup & ~one))
        with m.If(take):
            m.d.sync += [rp_valid.eq(1), rp_beat.eq(beatf.r_data), rp_new.eq(Cat(*anew)),
                         rp_any_new.eq(a_any)]
            for i in range(L):
                m.d.sync += [
                    rp_res[i].eq(ares[i]),
                    rp_rn[i].eq(popcount(anew[j] & (abank(j) == abank(i)) for j in range(i))),
                ]
            for b in range(B):
                m.d.sync += rp_nn[b].eq(a_nn[b])
        with m.Elif(retire):
            m.d.sync += rp_valid.eq(0)
        for i in range(1, L):
            m.d.comb += rp_pre[i].eq(Cat(*[popcount(rp_new[j] for j in range(i)) == k
                                           for k in range(L)]))
        self.register_copies.append(
            ("the beat's new rows, any (per bank) = any (per lane)", Const(0, 1),
             take & (a_any != Cat(*anew).any())))
        for b in range(B):
            self.register_copies.append(
                (f"bank {b}'s new rows (its first `need` results) = its new lanes", Const(0, 1),
                 take & (a_nn[b] != popcount(anew[i] & (abank(i) == b) for i in range(L)))))

        # ---- 4b. assign ----------------------------------------------------------------
        rkind = [rb.kind[i] for i in range(L)]
        rmiss = [rkind[i] == K_MISS for i in range(L)]
        res = rp_res
        scount_st = Signal(ib + 1)           # staging indices given in this mini-batch
        # room[k]: the mini-batch's staging bank has room for k + 1 more rows (registers, so
        # no compare follows scount_st). After n new rows, room[k] is therm[k + n] (the count
        # saturates at staging_rows, where every flag is 0), so the next flags are a
        # multiplexer by n over compares of scount_st with constants: no adder before them.
        R = cfg.staging_rows
        room = [Signal(name=f"r_room{k}", init=int(R > k)) for k in range(L)]
        therm = [(scount_st < R - j) if R > j else Const(0, 1) for j in range(2 * L)]
        new = [rp_new[i] for i in range(L)]
        idx = [Signal(bits_for(cfg.staging_rows + L), name=f"r_idx{i}") for i in range(L)]
        # sc[k] = scount_st + k, registers (timing: a lane's staging index is an AND-OR of
        # them with the one-hot rp_pre, not an adder after rp_pre; the adder's carry chain
        # started the assign stage's 21-level path into the sample buffer's write data). A
        # register copy checks each against scount_st + k.
        sc = [Signal(len(idx[0]), name=f"r_sc{k}", init=k) for k in range(L)]
        for k in range(L):
            self.register_copies.append((f"r_sc{k} is scount_st + {k}", sc[k], scount_st + k))
        staged = [Signal(name=f"r_staged{i}") for i in range(L)]
        refused_flag = 1 << ib
        for i in range(L):
            ix, rm = sc[0], room[0]          # (lane 0: no lane before it)
            if i:
                ix, rm = Const(0, len(sc[0])), (rp_pre[i] & Cat(*room)).any()
                for k in range(L):
                    ix = ix | Mux(rp_pre[i][k], sc[k], 0)
            m.d.comb += [
                idx[i].eq(ix),
                staged[i].eq(new[i] & rm),
                newval[i].eq(Mux(staged[i], idx[i], refused_flag)),
            ]
        tag = [Signal(2, name=f"r_tag{i}") for i in range(L)]
        val = [Signal(vb, name=f"r_val{i}") for i in range(L)]
        sfull = [Signal(name=f"r_sfull{i}") for i in range(L)]
        dfull = [Signal(name=f"r_dfull{i}") for i in range(L)]
        # a staged lane's value is its staging index (`use_idx`) or the forwarded one,
        # chosen after the `sw_q` register (below): `val` is the key here. A repeated row
        # (`dups`) is STAGED with the forwarded index unless that index was refused (its
        # flag, `dval[ib]`); the tag, value and statistics here take it as refused (an
        # OVERFLOW), and the forwarded flag corrects them after the register (timing: the
        # forwarding AND-OR's last bit then ends at a flip-flop, not in the tag logic, the
        # sample buffer's write data and the statistics' registers).
        use_idx = [Signal(name=f"r_use_idx{i}") for i in range(L)]
        dups = []
        dvals = []
        for i in range(L):
            dup = rmiss[i] & (res[i].kind == KIND_DUP)
            dups.append(dup)
            # a repeated row not resolved at take has its first occurrence in this beat or in
            # one of the last three retired beats (see tk_ok); at most one source matches,
            # selected by the registers rp_fl / rp_hs (decided at take)
            fwd_val = Const(0, geo.value_bits)
            for j in range(i):
                fwd_val = fwd_val | Mux(rp_fl[i][j], newval[j], 0)
            for t in range(HIST):
                for j in range(L):
                    fwd_val = fwd_val | Mux(rp_hs[i][t * L + j], h_val[t][j], 0)
            dval = Signal(geo.value_bits, name=f"r_dval{i}")
            m.d.comb += dval.eq(Mux(res[i].resolved, res[i].value, fwd_val))
            dvals.append(dval)
            with m.If(rkind[i] != K_NONE):   # (a lane with no lookup leaves 0)
                m.d.comb += val[i].eq(rb.value[i])
            with m.Switch(rkind[i]):
                with m.Case(K_HIT):
                    m.d.comb += tag[i].eq(TAG_POPULAR)
                with m.Case(K_OVF):
                    m.d.comb += tag[i].eq(TAG_OVERFLOW)
                with m.Case(K_MISS):
                    with m.If(staged[i]):
                        m.d.comb += [tag[i].eq(TAG_STAGED), use_idx[i].eq(1)]
                    with m.Else():           # (a repeated row: see `dups`)
                        m.d.comb += tag[i].eq(TAG_OVERFLOW)
            m.d.comb += [
                sfull[i].eq(new[i] & ~staged[i]),    # (| dup & refused: after st_*)
                dfull[i].eq(rmiss[i] & (res[i].kind == KIND_FULL)),
            ]

        # write queues: the index of every new row, per bank, in lane order
        # wq_ok: every bank's write queue has room for the beat in rp_*'s new rows, as a
        # register (timing: no compare of the queues' space with rp_nn ahead of retire and
        # take). Its next value: the space after this cycle's drain and push against the
        # new rows of the beat in rp_* after this cycle's take; for a beat taken now, its
        # misses to the bank (`need`, a register; at least its new rows: the count of new
        # rows, after the result queues' multiplexers, was a 20-level path into this
        # register), so a beat may wait a cycle longer than it must, never overfill a
        # queue. Four candidates, chosen by take and retire last.
        wq_ok = Signal(init=1)
        cand = {}
        for tk in (0, 1):
            for rt in (0, 1):
                oks = []
                for b, bk in enumerate(banks):
                    # space + drain - (pushed now) >= next rp_nn, without a subtraction;
                    # space + drain is the queue's register `space_drained` (timing: the
                    # drain, `level != 0`, and its adder led `b0_wq_level` -> `wq_ok`)
                    need = (ab.need[b] if tk else rp_nn[b]) + (rp_nn[b] if rt else 0)
                    oks.append(bk.wq.space_drained >= need)
                cand[tk, rt] = Cat(*oks).all()

        self.register_copies += [
            (f"bank {b}'s write queue: space_drained = space + this cycle's drain",
             bk.wq.space + bk.wq.pop_n, bk.wq.space_drained) for b, bk in enumerate(banks)]

        def wq_ok_next(tk, rt):              # (the take and retire handshakes select last)
            return Mux(tk, Mux(rt, cand[1, 1], cand[1, 0]), Mux(rt, cand[0, 1], cand[0, 0]))
        m.d.sync += wq_ok.eq(wq_ok_next(take, retire))
        for b, bk in enumerate(banks):
            for i in range(L):
                m.d.comb += [bk.wq.wr_off[i].eq(rp_rn[i]), bk.wq.wr_data[i].eq(newval[i])]

        g_keep = Cat(*staged)
        # the beat has a staged row: its first new row (no new row before it) is staged iff
        # the staging bank has room for one (`room` is a thermometer code), so `g_keep != 0`
        # is rp_any_new & room[0], an AND of two flip-flops (timing: `g_keep` comes from
        # rp_new through the one-hot counts `rp_pre` and the room selects, and its OR-reduce
        # led the branch's 85 MHz tier, `rp_new` -> the gather FIFO's write enable and
        # `g_room`). A register copy checks the two at every beat in rp_*.
        g_any = Signal(name="r_g_any")
        m.d.comb += g_any.eq(rp_any_new & room[0])
        self.register_copies.append(
            ("a beat has a staged row iff it has a new row and the staging bank room for one",
             Const(0, 1), rp_valid & ((g_keep != 0) != g_any)))
        # the beat waits for room in the gather FIFO if it has a new row (staged or not:
        # `rp_any_new` is a register, so retire does not wait for the staging count)
        sb_layout = data.StructLayout({"beat": out_layout, "has_sample": 1, "last": 1})
        m.submodules.sbuf = sbuf = SyncFIFOBuffered(width=sb_layout.size, depth=sbuf_depth)
        pend_valid = Signal()                # a retired mini-batch's figures await do_term
        # room in the sample buffer and the gather FIFO as registers (timing: `retire` then
        # ANDs flip-flops, not the FIFOs' level compares, ahead of `take`, which fans out
        # to every de-dup bank): `sb_room` / `g_room` = the FIFO will hold at most depth - 2
        # entries this cycle, so a write finds room; one entry short of the exact `w_rdy`
        # The retired beat reaches the sample buffer through a register stage, `sw_q` (the
        # `q_*` flip-flops below; timing: the assign stage's forwarding multiplexers then end
        # at flip-flops, not at the LUT RAM's write data). `sb_room`: the buffer and `sw_q`
        # will hold at most depth - 2 beats this cycle, so the write a cycle after a retire
        # finds room.
        sw_valid = Signal()
        sb_room = Signal(name="sb_room", init=1)
        sb_rd = sbuf.r_en & sbuf.r_rdy
        sb_lv = sbuf.level

        def sb_fits(n):                      # level + n <= depth - 2 (n = -1 .. 2)
            return sb_lv <= sbuf_depth - 2 - n

        def sb_room_next(ret):               # (the retire handshake selects last)
            return Mux(ret, Mux(sw_valid, Mux(sb_rd, sb_fits(1), sb_fits(2)),
                                Mux(sb_rd, sb_fits(0), sb_fits(1))),
                       Mux(sw_valid, Mux(sb_rd, sb_fits(0), sb_fits(1)),
                           Mux(sb_rd, sb_fits(-1), sb_fits(0))))
        m.d.sync += sb_room.eq(sb_room_next(retire))
        self.register_copies.append(
            ("sb_room: sample buffer and sw_q hold at most depth - 2", sb_room,
             sb_lv + sw_valid <= sbuf_depth - 2))
        g_room = _room_reg(m, gathf, 4, gathf.w_en, "g_room")
        m.d.comb += retire.eq(rp_valid & wq_ok & sb_room & (~rp_any_new | g_room)
                              & ~(rb.last & pend_valid))
        # each bank's copies of take and retire (see "control copies" below)
        take_bk = [Signal(name=f"take_b{b}") for b in range(B)]
        retire_bk = [Signal(name=f"retire_b{b}") for b in range(B)]
        for b, bk in enumerate(banks):
            # counts from registers, handshakes in the queues' last mux (pop_en / push_en)
            m.d.comb += [bk.fwd_step.eq(retire_bk[b]), bk.fwd_cnt.eq(fnx[b])]
            m.d.comb += [bk.res_q.pop_n.eq(ab.need[b]), bk.res_q.pop_en.eq(take_bk[b]),
                         bk.head_need.eq(Mux(beatf.r_rdy, ab.need[b], 0)),
                         bk.wq.push_n.eq(rp_nn[b]), bk.wq.push_en.eq(retire_bk[b])]
            for i in range(L):
                m.d.comb += bk.wq.wr_en[i].eq(new[i] & (rbank(i) == b))  # (push_en: retire)
        with m.If(retire):
            m.d.sync += h_new[0].eq(Mux(rb.last, 0, rp_new))
            for t in range(1, HIST):
                m.d.sync += h_new[t].eq(Mux(rb.last, 0, h_new[t - 1]))
            for j in range(L):
                m.d.sync += [h_ord[0][j].eq(res[j].ord[:fwd_ob]), h_val[0][j].eq(newval[j])]
                if bb:
                    m.d.sync += h_bank[0][j].eq(rb.bank[j])
                for t in range(1, HIST):
                    m.d.sync += [h_ord[t][j].eq(h_ord[t - 1][j]),
                                 h_val[t][j].eq(h_val[t - 1][j]),
                                 h_bank[t][j].eq(h_bank[t - 1][j])]
            for b in range(B):
                m.d.sync += [fcnt[b].eq(fcnt_at_retire(b)), hlo[b].eq(fnx[b])]
        # fnx follows rb.last (loaded at take) and fcnt (at retire)
        nx_last = Mux(take, ab.last, rb.last)
        for b in range(B):
            nx_cnt = Mux(retire, fcnt_at_retire(b), fcnt[b])
            m.d.sync += fnx[b].eq(Mux(nx_last, 0, nx_cnt))
            self.register_copies.append(
                (f"f_nx{b} = Mux(rb.last, 0, f_cnt{b})", Mux(rb.last, 0, fcnt[b]), fnx[b]))

        sbank = Signal(bank_bits(cfg))       # staging bank of this mini-batch
        sw = Signal(sb_layout)
        ob = sw.beat
        for i in range(L):
            m.d.comb += [ob.lookups[i].tag.eq(tag[i]), ob.lookups[i].value.eq(val[i])]
        m.d.comb += [
            ob.sample_id.eq(rb.sid),
            ob.keep.eq(Cat(*[rkind[i] != K_NONE for i in range(L)])),
            ob.user.eq(rb.user),
            sw.has_sample.eq(rb.has_sample),
            sw.last.eq(rb.last),
        ]
        # (timing: the value select by the forwarded index's refused flag is after sw_q, so
        # the forwarding multiplexers end at flip-flops a select earlier)
        # (the beat's `last` is 0 here, set only in the terminator record: not registered, as
        # a constant flip-flop whose alias wires Yosys' generic flow rejects)
        q_beat = {n: Signal(f.shape, name=f"q_{n}", reset_less=True)
                  for n, f in out_layout if n != "last"}
        q_hs = Signal(reset_less=True)
        q_last = Signal(reset_less=True)
        q_idx = [Signal(ib, name=f"q_idx{i}", reset_less=True) for i in range(L)]
        q_dval = [Signal(ib, name=f"q_dval{i}", reset_less=True) for i in range(L)]
        q_ui = Signal(L, reset_less=True)
        q_dup = Signal(L, reset_less=True)   # a repeated row ...
        q_dref = Signal(L, reset_less=True)  # ... and its forwarded index's refused flag
        m.d.sync += [sw_valid.eq(retire), q_hs.eq(sw.has_sample), q_last.eq(sw.last),
                     q_ui.eq(Cat(*use_idx)), q_dup.eq(Cat(*dups)),
                     q_dref.eq(Cat(*[dvals[i][ib] for i in range(L)]))]
        m.d.sync += [q.eq(sw.beat[n]) for n, q in q_beat.items()]
        m.d.sync += [q_idx[i].eq(idx[i][:ib]) for i in range(L)]
        m.d.sync += [q_dval[i].eq(dvals[i][:ib]) for i in range(L)]
        q_ud = Signal(L)                     # STAGED with the forwarded index
        q_ovf = Signal(L)                    # ... or an OVERFLOW with a refused one
        m.d.comb += [q_ud.eq(q_dup & ~q_dref), q_ovf.eq(q_dup & q_dref)]
        sw_out = Signal(sb_layout)
        m.d.comb += [sw_out.has_sample.eq(q_hs), sw_out.last.eq(q_last)]
        m.d.comb += [sw_out.beat[n].eq(q) for n, q in q_beat.items()]
        q_look = q_beat["lookups"]
        for i in range(L):
            m.d.comb += [
                sw_out.beat.lookups[i].value.eq(
                    Mux(q_ui[i], q_idx[i], Mux(q_ud[i], q_dval[i], q_look[i].value))),
                # (a repeated row's tag is OVERFLOW here; clearing bit 0 makes it STAGED)
                sw_out.beat.lookups[i].tag.eq(q_look[i].tag & ~Cat(q_ud[i], 0)),
            ]
        m.d.comb += [sbuf.w_en.eq(sw_valid), sbuf.w_data.eq(sw_out)]

        # ---- emit: a sample's beats leave once its verdict is known --------------------
        # The sample buffer's head enters a two-entry skid buffer first (`e0` and its skid
        # register `e0s`), so emit decides from flip-flops, not from the block RAM's read
        # data (timing: the RAM's clock-to-out and its route to the verdict FIFO's enables
        # were the longest path of the 1- and 2-lane ulx3s routes); the buffer reads when
        # `e0s` is empty, a flip-flop, not on `emit`. One cycle more of latency.
        e0_valid = Signal()
        e0s_valid = Signal()
        e0 = Signal(sb_layout, reset_less=True)
        e0s = Signal(sb_layout, reset_less=True)
        e_take = Signal()                    # e0 leaves: emit or emit_end
        m.d.comb += sbuf.r_en.eq(~e0s_valid)
        with m.If(~e0s_valid):
            m.d.sync += e0s.eq(sbuf.r_data)
        with m.If(~e0_valid | e_take):
            with m.If(e0s_valid):
                m.d.sync += [e0.eq(e0s), e0_valid.eq(1), e0s_valid.eq(0)]
            with m.Else():
                m.d.sync += [e0.eq(sbuf.r_data), e0_valid.eq(sbuf.r_rdy)]
        with m.Elif(sbuf.r_rdy & ~e0s_valid):
            m.d.sync += e0s_valid.eq(1)
        eb = e0
        r_np = verdf.r_data[0]
        term_pending = Signal()
        # room in the output FIFOs as registers (timing: the terminator's write, `do_term`,
        # clears `term_pending` and publishes the statistics; it and `emit` then start at
        # flip-flops, not at the FIFOs' level compares)
        op_room = _room_reg(m, outp, 4, outp.w_en, "op_room")
        on_room = _room_reg(m, outn, 4, outn.w_en, "on_room")
        out_rdy = Mux(r_np, on_room, op_room)
        emit = Signal()                      # a beat of a sample leaves
        emit_end = Signal()                  # a record that only ends the mini-batch leaves
        m.d.comb += [
            emit.eq(e0_valid & ~term_pending & eb.has_sample & verdf.r_rdy & out_rdy),
            emit_end.eq(e0_valid & ~term_pending & ~eb.has_sample),
            e_take.eq(emit | emit_end),
            verdf.r_en.eq(emit & eb.beat.user),
        ]
        with m.If(e_take & eb.last):
            m.d.sync += term_pending.eq(1)
        m.d.comb += retire_idle.eq(~beatf.r_rdy & ~term_pending & ~e0_valid & ~sbuf.r_rdy
                                   & ~sw_valid
                                   & (sbuf.level == 0) & ~verdf.r_rdy & ~vq_en)
        term = Signal(out_layout)
        m.d.comb += term.last.eq(1)
        do_term = Signal()
        m.d.comb += do_term.eq(term_pending & op_room & on_room)
        m.d.comb += [
            outp.w_en.eq((emit & ~r_np) | do_term),
            outn.w_en.eq((emit & r_np) | do_term),
            outp.w_data.eq(Mux(do_term, term, eb.beat)),
            outn.w_data.eq(Mux(do_term, term, eb.beat)),
        ]
        gb = Signal(g_layout)
        for i in range(L):
            m.d.comb += [gb.keys[i].eq(rb.value[i][:kb]), gb.indices[i].eq(idx[i][:ib])]
        m.d.comb += [gb.bank.eq(sbank), gb.keep.eq(g_keep),
                     gathf.w_en.eq(retire & g_any), gathf.w_data.eq(gb)]

        n_new = popcount(new)
        with m.If(retire):
            with m.If(rb.last):
                m.d.sync += scount_st.eq(0)
                m.d.sync += [room[k].eq(int(R > k)) for k in range(L)]
                m.d.sync += [sc[k].eq(k) for k in range(L)]
            with m.Else():
                m.d.sync += scount_st.eq(Mux(scount_st + n_new > R, R, scount_st + n_new))
                m.d.sync += [room[k].eq(Array(therm[k:k + L + 1])[n_new]) for k in range(L)]
                # (the count after n new rows, saturated, plus k: one candidate per n, each
                # from scount_st alone, chosen by n_new)
                sat = [Mux(scount_st + n > R, R, scount_st + n) for n in range(L + 1)]
                m.d.sync += [sc[k].eq(Array([c + k for c in sat])[n_new]) for k in range(L)]

        # ---- statistics ----------------------------------------------------------------
        # per retired beat: a count, or (`lane_bits`) one bit per lane, counted a cycle later
        # so that no popcount follows the assign stage's tags
        per_beat = {
            "lookups": Cat(*[rkind[i] != K_NONE for i in range(L)]),
            "hits": Cat(*[rkind[i] == K_HIT for i in range(L)]),
            "popular_samples": Const(0, 1),       # counted when emitted, below
            "nonpopular_samples": Const(0, 1),
            "staged_rows": Cat(*staged),
            "overflows": Cat(*[tag[i] == TAG_OVERFLOW for i in range(L)]),
            "bad_keys": Mux(retire, rb.bad_n, 0),   # (a cell: the addition reads a temporary)
            "long_samples": rb.long_end,
            "staging_full": Cat(*sfull),
            "dedup_full": Cat(*dfull),
            "id_wraps": rb.idwrap,
            "framing_errors": rb.ferr,
            "minibatches": Const(0, 1),
        }
        lane_bits = ("lookups", "hits", "staged_rows", "overflows", "staging_full",
                     "dedup_full")
        # Retire-side figures of a mini-batch are complete when its last beat retires: they
        # move to `pend_*` then, and the next mini-batch may retire while the emitter still
        # sends this one's beats. Its sample counts are complete at its terminator
        # (do_term), when everything is published. A retired beat's figures are registered
        # a cycle later (`st_*`; timing: the lane tags do not feed the 32-bit adders), and
        # their per-lane counts a cycle after that (`inc_*`; timing: the popcounts of
        # `st_*`, with the repeated rows' corrections, ahead of the 32-bit adders were the
        # longest path of `ulx3s`, 12.0 ns); the adders add them in the third cycle after
        # retire. do_term comes at least two cycles after the last beat retires, so `pub`,
        # which reads `pend_*`, at least three (a register copy checks that no figure of
        # a last beat is still in `st_*` or `inc_*` then).
        emit_side = ("popular_samples", "nonpopular_samples")
        retire_side = [n for n in STAT_NAMES if n not in emit_side + ("minibatches",)]
        batch = {n: Signal(32, name=f"batch_{n}") for n in STAT_NAMES if n != "minibatches"}
        pend = {n: Signal(32, name=f"pend_{n}") for n in retire_side}
        st_valid = Signal()                  # st_* hold the figures of a retired beat
        st_last = Signal()                   # ... the last of its mini-batch
        st = {n: Signal(len(Value.cast(per_beat[n])), name=f"st_{n}") for n in retire_side}
        m.d.sync += [st_valid.eq(retire), st_last.eq(rb.last)]
        for n in retire_side:
            m.d.sync += st[n].eq(per_beat[n])
        # the repeated rows' tags, corrected by their forwarded flags (see `dups`; q_* are
        # loaded with st_*)
        st_fix = dict(st)
        st_fix["overflows"] = st["overflows"] & ~q_ud
        st_fix["staging_full"] = st["staging_full"] | q_ovf
        inc_valid = Signal()                 # inc_* hold the counts of a retired beat
        inc_last = Signal()                  # ... the last of its mini-batch
        inc = {}
        for n in retire_side:
            v = st_fix[n]
            cnt = popcount(v[i] for i in range(L)) if n in lane_bits else v
            inc[n] = Signal(len(Value.cast(cnt)), name=f"inc_{n}", reset_less=True)
            m.d.sync += inc[n].eq(cnt)
        m.d.sync += [inc_valid.eq(st_valid), inc_last.eq(st_last)]
        with m.If(inc_valid):
            for n in retire_side:
                with m.If(inc_last):
                    m.d.sync += [pend[n].eq(batch[n] + inc[n]), batch[n].eq(0)]
                with m.Else():
                    m.d.sync += batch[n].eq(batch[n] + inc[n])
        with m.If(retire):
            with m.If(rb.last):
                m.d.sync += [pend_valid.eq(1), sbank.eq(sbank + 1)]
                if cfg.staging_banks == 1:
                    m.d.sync += sbank.eq(0)
        with m.If(emit & eb.beat.user):
            with m.If(r_np):
                m.d.sync += batch["nonpopular_samples"].eq(batch["nonpopular_samples"] + 1)
            with m.Else():
                m.d.sync += batch["popular_samples"].eq(batch["popular_samples"] + 1)
        # The retire-side figures are published a cycle after the terminator (`pub`, a
        # register; timing: do_term, from the output FIFOs' room, enabled some 800
        # statistics flip-flops); the sample counts at the terminator, as no sample of the
        # next mini-batch may leave before it. `ev_minibatch` and `busy` follow `pub`.
        pub = Signal()
        m.d.sync += pub.eq(do_term)
        self.register_copies.append(
            ("the statistics of a mini-batch's last beat reach pend_* before pub", Const(0, 1),
             pub & ((st_valid & st_last) | (inc_valid & inc_last))))
        with m.If(do_term):
            m.d.sync += term_pending.eq(0)
            for n in emit_side:
                tot, lst = getattr(self, "stat_" + n), getattr(self, "last_" + n)
                m.d.sync += [tot.eq(tot + batch[n]), lst.eq(batch[n]), batch[n].eq(0)]
        with m.If(pub):
            m.d.sync += pend_valid.eq(0)
            for n in STAT_NAMES:
                if n in emit_side:
                    continue
                tot, lst = getattr(self, "stat_" + n), getattr(self, "last_" + n)
                if n == "minibatches":
                    m.d.sync += [tot.eq(tot + 1), lst.eq(1)]
                else:
                    m.d.sync += [tot.eq(tot + pend[n]), lst.eq(pend[n])]
        # ---- control copies: take and retire per de-dup bank ---------------------------
        # Each bank pops its result queue with `take` and steps its write queue and its
        # results' forwarding flags with `retire`: ~250 flip-flops per bank, ~1,000 in all
        # on `ulx3s`, the fanout that led the wall at 100 MHz. Each bank computes its own
        # copies from its own copies of the registers they are made of, updated as the
        # originals are but with the copies' handshakes. (Each copy holds or feeds back
        # its own value, so Yosys does not merge the copies as equal flip-flops.) Register
        # copies check each against the original.
        for b in range(B):
            sfx = f"b{b}"
            c_valid = Signal(name=f"rp_valid_{sfx}")
            c_tk = Signal(name=f"tk_ok_{sfx}")
            c_wq = Signal(name=f"wq_ok_{sfx}", init=1)
            c_sb = Signal(name=f"sb_room_{sfx}", init=1)
            c_any = Signal(name=f"rp_any_new_{sfx}")
            c_last = Signal(name=f"rp_last_{sfx}", reset_less=True)
            c_pend = Signal(name=f"pend_valid_{sfx}")
            c_take, c_ret = take_bk[b], retire_bk[b]
            c_g = _room_reg(m, gathf, 4, c_ret & c_any & room[0], f"g_room_{sfx}")
            m.d.comb += [
                c_ret.eq(c_valid & c_wq & c_sb & (~c_any | c_g) & ~(c_last & c_pend)),
                c_take.eq(beatf.r_rdy & c_tk & (~c_valid | c_ret)),
            ]
            m.d.sync += [
                c_valid.eq(Mux(c_take, 1, Mux(c_ret, 0, c_valid))),
                c_tk.eq(tk_ok_next(c_take)),
                c_wq.eq(wq_ok_next(c_take, c_ret)),
                c_sb.eq(sb_room_next(c_ret)),
                c_any.eq(Mux(c_take, a_any, c_any)),
                c_last.eq(Mux(c_take, ab.last, c_last)),
                c_pend.eq(Mux(pub, 0, Mux(c_ret & c_last, 1, c_pend))),
            ]
            self.register_copies += [
                (f"{n} (bank {b}'s copy)", orig, copy) for n, orig, copy in (
                    ("rp_valid", rp_valid, c_valid), ("tk_ok", tk_ok, c_tk),
                    ("wq_ok", wq_ok, c_wq), ("sb_room", sb_room, c_sb),
                    ("g_room", g_room, c_g), ("rp_any_new", rp_any_new, c_any),
                    ("rb.last", rb.last, c_last), ("pend_valid", pend_valid, c_pend))]

        m.d.comb += [
            self.ev_minibatch.eq(pub),
            # the events of a retired beat, from its registered figures (a cycle after retire)
            self.ev_bad_key.eq(st_valid & (st["bad_keys"] != 0)),
            self.ev_overflow.eq(st_valid & (st_fix["staging_full"].any()
                                            | st["dedup_full"].any())),
            self.ev_framing.eq(st_valid & st["framing_errors"]),
            self.busy.eq(b_open | (metaf.level != 0) | d0_valid | ~all_idle | (outp.level != 0)
                         | (outn.level != 0) | (gathf.level != 0) | pub),
            self.gather_busy.eq(b_open | (metaf.level != 0) | d0_valid | ~dedup_idle
                                | (gathf.level != 0)),
        ]
        return m


class FragmenterUnit(wiring.Component):
    """:class:`MiniBatchFragmenter` with its own :class:`PopularityCAM`: the unit the tests
    and benchmarks build. Members: those of the fragmenter, minus the ``cam_*`` lanes, plus
    ``cam_write`` (the CAM's host write port) and ``cam_busy`` (the CAM is sweeping)."""

    def __init__(self, cfg):
        self.cfg = cfg
        self._cam = PopularityCAM(cfg)
        self._frag = MiniBatchFragmenter(cfg, self._cam.LATENCY)
        # parts whose `register_copies` the amaranth.sim tests check (sim/register_copies.py)
        self.register_copy_parts = [self._frag]
        members = {n: v for n, v in self._frag.signature.members.items()
                   if not n.startswith("cam_") and n != "flush"}
        members["flush"] = In(1)
        members["cam_write"] = self._cam.signature.members["write"]
        members["cam_busy"] = Out(1)
        super().__init__(members)

    @property
    def min_latency(self):
        return self._frag.min_latency

    def elaborate(self, platform):
        m = Module()
        m.submodules.cam = cam = self._cam
        m.submodules.frag = frag = self._frag
        wiring.connect(m, wiring.flipped(self.cam_write), cam.write)
        m.d.comb += [
            self.cam_busy.eq(cam.busy),
            cam.lookup_valid.eq(frag.cam_lookup_valid),
            cam.lookup_keys.eq(frag.cam_lookup_keys),
            frag.cam_result_valid.eq(cam.result_valid),
            frag.cam_result_hit.eq(cam.result_hit),
            frag.cam_result_slot.eq(cam.result_slot),
            frag.cam_busy.eq(cam.busy),
            frag.flush.eq(self.flush),
        ]
        for name in ("lookups",):
            wiring.connect(m, wiring.flipped(getattr(self, name)), getattr(frag, name))
        for name in ("popular", "nonpopular", "gather"):
            wiring.connect(m, getattr(frag, name), wiring.flipped(getattr(self, name)))
        for name in self._frag.signature.members:
            if name.startswith(("stat_", "last_", "ev_")) or name in ("busy", "gather_busy"):
                m.d.comb += getattr(self, name).eq(getattr(frag, name))
        return m
