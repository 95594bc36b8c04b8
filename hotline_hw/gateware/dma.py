"""The gather/scatter DMA: an AXI4 master that moves embedding rows between host memory and
device memory (one ``m_axi`` address space, as behind a PCIe bridge).

Jobs (DESIGN.md A4)
-------------------
Every job is a **row copy** of ``ROW_BYTES`` bytes, ``src -> dst``:

==========  =====================================  =========================================
job         source                                 destination
==========  =====================================  =========================================
place       ``host(key)``                          ``POPULAR_BASE + slot * ROW_BYTES``
gather      ``host(key)``                          ``STAGING_BASE[bank] + index * ROW_BYTES``
scatter     ``STAGING_BASE[bank] + i * ROW_BYTES``  ``host(log[bank][i])``, i = 0, 1, ...
evict       ``POPULAR_BASE + slot * ROW_BYTES``     ``host(key of slot)``, every used CAM slot
==========  =====================================  =========================================

with ``host(key) = TABLE_BASE[key >> row_bits] + (key & (2**row_bits - 1)) * ROW_STRIDE``.
A gather also writes ``key`` at position ``index`` of bank ``bank``'s **gather log** (a memory
of ``staging_rows`` keys per bank; ``log_count[bank]`` becomes ``max(log_count, index + 1)``,
so indices are expected in order 0, 1, 2, ..., as the fragmenter assigns them). SCATTER(bank)
copies log positions ``0 .. log_count - 1`` back in index order and then empties the log.
EVICT reads every CAM slot through the CAM's host read port and copies every used slot back;
clearing the CAM afterwards is not the DMA's job.

Micro-architecture
------------------
::

    place ----\\
    gather --- hazard check --(defer)--> deferred lists (one per bank, linked in a memory)
      |            |                          | replay after that bank's scatter
      |            v                          v
      |     gather log (key, wait mask, epoch snapshot per (bank, index))
      v            ^ scatter sequencer reads it
    arbiter: replay > scatter > evict > place > gather  (one row job per cycle)
      -> J1 (select) -> J2i (multiplier inputs) -> J2 (row * ROW_STRIDE as 18x16 products,
      n * ROW_BYTES) -> J2o (products again, table base) -> [J2s: partial sums, rows wider
      than 18 bits] -> J3 (src, dst)
      -> skid buffer -> read issuer: splits src into bursts, one reorder-buffer tag + buffer space each,
         AR; the row's (dst, kind, bank) goes to the row FIFO
      -> R: tag = head tag of the ID (looked up as the beat is registered), beat -> data
         buffer, retire tags in order
      -> write issuer: splits dst into bursts, AW only when the burst's data has arrived,
         W streams from the data buffer, B completes rows (all writes use AWID 0)

* **Handshakes are registered.** ``place`` and ``gather`` enter through two-entry skid
  buffers (:class:`SkidBuffer`), so their ``ready`` is a flip-flop output and the hazard
  check and arbiter work on registered requests (the gather's filter hash is computed before
  the buffer); a third skid buffer between J3 and the read issuer lets the J pipeline advance
  on a registered ``ready``. The read and write issuers keep the next burst's length and
  "last burst of the row" flag (and the read side its free buffer space) in registers,
  computed a cycle early, so AR/AW issue and the row FIFO handshakes are one compare of
  register outputs. A request held in an input buffer counts as pending: ``busy`` is set and,
  for a gather, ``gathers_done`` of its bank is clear.
* **Block RAM outputs and wide checks end in registers.** The arbiter, the in-flight
  counters and the list bookkeeping see no block RAM read data and no wide compare of the
  same cycle: the filter RAM's read data enters a register, the gather's filter check is
  made from registers in a check stage (G1) after the input buffer and registered with the
  gather in G2, the scatter sequencer reads the gather log ahead into a register, the replay
  registers the log word and link it read, the key's table-id check is registered with
  the job in J1 (a job with a bad key occupies J1 for a cycle and goes no further), the
  in-flight counters count a job when it leaves J1 (their zero tests add the job in J1),
  a scatter's completion is a state of its own after the drain, and ``param_error`` is a
  register.
* **Read side.** ``tags = 2**ceil_log2(max_outstanding_reads)`` reorder-buffer entries are
  allocated in order; tag ``t`` uses ARID ``t mod ids`` with ``ids = min(2**axi_id_bits,
  tags)``, so the bursts of one ID are tags ``i, i + ids, i + 2 ids, ...`` in issue order and a
  per-ID head pointer finds the tag of every R beat. Read data of different IDs may therefore
  come back in any order, even interleaved beat by beat. At most ``max_outstanding_reads``
  bursts are in flight. ``RREADY`` is always high: each burst reserved its space in the data
  buffer (``buffer_beats`` bus words, a ring) when its AR was issued. Tags retire in order;
  a retired burst's beats become available to the write side.
* **Write side.** Rows are written in the order they were read. A write burst's AW is issued
  only when all its data is in the buffer, so write data is never sent before its read data
  arrived, and a halted DMA can always finish the W beats of the AWs already issued. Reads
  and writes overlap freely (the read side keeps streaming while earlier rows are written).
  Write strobes are always full (rows are whole bus words). Up to ``tags`` write bursts may
  wait for their B. The W beats of a burst follow its AW's issue, not its acceptance: while
  AWREADY is held low they may be offered before their AW is accepted (as AXI allows).

Burst rule
----------
A row of ``ROW_BYTES / bus_bytes`` beats at a bus-aligned address ``a`` is cut into INCR
bursts of ``min(beats left, beats to the next 4 KiB boundary, 256)`` beats, so no burst
crosses a 4 KiB boundary (a row that straddles one becomes two bursts; a 4 KiB row on a
64-bit bus, 512 beats, becomes two or three). Source and destination are cut independently.

Ordering and hazard rule (no lost update)
-----------------------------------------
* Each bank has a **filter** of the keys logged in it and not yet scattered: a table of
  ``filter_entries`` generation tags of ``filter_gen_bits`` bits, indexed by the H3 hash of
  the key (seed :data:`SEED_DMA_FILTER`, ``log2(filter_entries)`` bits), and a current
  **generation** ``gen[b]``. A gather into bank ``b`` (deferred or not) writes ``gen[b]`` at
  its hash; the bank's scatter **completing** (every write response of it received) clears
  the filter by incrementing ``gen[b]`` (and toggles the bank's ``epoch`` bit). A key *hits*
  bank ``d``'s filter iff ``table_d[hash] == gen[d]`` and bank ``d`` has logged a gather since
  its last scatter. Generations count ``0 .. 2**filter_gen_bits - 2``; the all-ones tag,
  the tables' power-up contents, is never current. No false negative: only gathers into
  ``d`` write ``table_d``, always with the current ``gen[d]``, so a key logged and not yet
  scattered always hits. False positives: another key with the same hash, or an entry
  written exactly ``k * (2**filter_gen_bits - 1)`` generations ago (the counter wrapped).
  ``soft_reset`` also increments every generation (a hard reset restarts them at 0 over
  the old tables: again false positives at most). The tables of all banks are one memory
  (word = one tag per bank, ulx3s 8192 x 8 bits: four DP16KD, one 8192 x 2 column slice
  each, see :func:`filter_slices`), read ahead: each cycle it reads the entry of the gather
  the input buffer's output register (G0) loads next, and its read data goes straight into
  a register. The gather moves on to the check stage G1, where that registered word (with
  the writes made since the read forwarded by registers) is compared with the generations;
  the result (the hit mask) is registered with the gather in G2, which the arbiter serves.
  A write in the check's cycle (the G2 gather leaving) is forwarded by comparing hashes, and
  a scatter completing clears its bank's bit in the mask (registered or being computed), as
  it clears the bank's filter.
* A gather into bank ``c`` whose key hits the filter of another bank is **deferred**: its
  log word records the set ``M`` of banks it hit and a snapshot of the epochs, and it joins
  the deferred list of the lowest bank of ``M``. When that bank's scatter completes, its list
  is **replayed** (before any new gather is accepted): an entry whose other banks in ``M``
  have all completed a scatter since (epoch changed) is performed; otherwise it moves to the
  list of the lowest such bank. A false positive only delays a gather; the memory outcome is
  the golden model's (``golden/model.py``: a deferred gather is done after the scatter it
  waits for).
* A gather into a bank whose scatter is pending or running waits (at the head of the gather
  input buffer; the stream's ``ready`` falls once the buffer is full). SCATTER does not wait
  for such a held gather.
* SCATTER(bank) starts only when ``gathers_done[bank]``: every gather sent to the bank,
  deferred ones included, has received its write responses. So software may hand a bank to
  the GPU exactly when ``gathers_done[bank]`` is set (and ``log_count``/``busy`` say the rest).
* ``place`` records wait while an EVICT is pending or running, and EVICT starts only when no
  placed row is in flight (evict write-back and install copy never race).
* Commands: ``scatter_start`` queues a scatter of ``scatter_bank`` (one per bank; several
  banks may be queued, served lowest bank first, one at a time); ``evict_start`` queues an
  evict. A command that names a bank whose scatter is already pending or running, an
  ``evict_start`` while an evict is pending or running, and any command while ``error`` or a
  soft reset is pending is **ignored and sets** ``cmd_ignored`` (sticky until ``soft_reset``):
  never lost silently.

Parameters and their rule
-------------------------
``table_base``, ``row_stride``, ``popular_base``, ``staging_base`` must be multiples of the
bus width in bytes; ``row_bytes`` a non-zero multiple of it and ``<= max_row_bytes``. A
violation raises ``param_error`` (registered: one cycle after the parameters change) and no
new job starts while it is set (the input streams stall, commands stay queued); jobs already
started finish with the live values, so change parameters only while idle. A key whose table
id is ``>= num_tables`` moves nothing and sets the sticky ``bad_key``.

Errors
------
A SLVERR/DECERR on R or B sets ``error`` (sticky, with ``error_resp`` and ``error_addr``, the
start address of the failing burst). From the cycle the response is seen the DMA issues no
new AR and no new AW (so a row whose read failed is never written; a row cut into several
write bursts may be left partly written with correct data); it accepts every R beat and B
response still due and finishes the W beats of AWs already issued, so the bus stays legal.
While ``error`` is set, ``place``/``gather`` are accepted and dropped (the upstream never
stalls for ever) and commands are ignored (``cmd_ignored``). ``soft_reset`` (a pulse) aborts
everything: no new transaction starts, the outstanding ones drain, then the error, the logs,
filters (generations incremented), deferred lists, queued commands and statistics are
cleared (``busy`` stays high meanwhile; ``place``/``gather`` wait).

Cycle costs
-----------
* Job front end: one row job per cycle (input buffer 1 cycle, a gather's check stages G1
  and G2 2 cycles, J1 -> J3 5 cycles, 6 for rows wider than 18 bits, J skid buffer 1 cycle
  of latency); a deferred gather replays in
  3 cycles; the scatter sequencer emits one row per cycle (after 2 cycles of log read-ahead)
  and completes 1 cycle after its last write response, the evict sequencer one
  slot per CAM read round trip (about 3 cycles for a ``full`` CAM, 6 for ``hash``).
* Read issuer: one AR per cycle, but a row's burst after one that is not its last waits a
  cycle (its length enters the credit a cycle late; likewise on the write side); a row of
  ``b`` beats needs ``ceil(b / 256)`` (+1 per 4 KiB crossing) ARs. Read throughput is one beat per cycle while ``max_outstanding_reads`` bursts
  and ``buffer_beats`` cover the memory latency: ``efficiency ~ min(1, bursts in flight *
  burst beats / (latency + burst beats))``.
* Latency of a row (no contention, memory latency ``L``): ~7 cycles to the AR (a gather
  9; one more each for rows wider than 18 bits), ``L + beats`` for the data, ~5 cycles
  from the last R beat to the AW, ``beats`` of W, then the B.
"""

from math import gcd
from types import SimpleNamespace

from amaranth.hdl import Array, Cat, Const, Module, Mux, ResetInserter, Signal, Value, signed
from amaranth.lib import data, stream, wiring
from amaranth.lib.fifo import SyncFIFOBuffered
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out
from amaranth.utils import bits_for, ceil_log2, exact_log2

from ..hashing import SEED_DMA_FILTER    # H3 seed of the per-bank hazard filters
from .hash import h3_expr
from .install import placed_layout

__all__ = ["GatherScatterDMA", "gather_layout", "cam_entry_layout", "axi4_signature",
           "dma_geometry", "SEED_DMA_FILTER", "KIND_PLACE", "KIND_GATHER", "KIND_SCATTER",
           "KIND_EVICT", "STAT_NAMES"]

KIND_PLACE, KIND_GATHER, KIND_SCATTER, KIND_EVICT = range(4)

#: The statistics counters, ``stat_<name>`` (``Out(32)`` each).
STAT_NAMES = ("bytes_read", "bytes_written", "rows_gathered", "rows_scattered", "rows_placed",
              "rows_evicted", "deferred")

ADDR_BITS = 64
#: Bits of the row a multiplier of the J pipeline takes (one input of an ECP5 MULT18X18D).
MUL_ROW_BITS = 18
PAGE = 4096
MAX_BURST = 256


def gather_layout(cfg):
    """A gather request: copy the host row of ``key`` into ``index`` of staging bank
    ``bank`` (the fragmenter's ``gather`` stream)."""
    return data.StructLayout({"key": cfg.key_bits,
                              "bank": max(1, ceil_log2(cfg.staging_banks)),
                              "index": cfg.staging_index_bits})


def cam_entry_layout(cfg):
    """The CAM's ``read_resp`` payload."""
    return data.StructLayout({"key": cfg.key_bits, "used": 1})


def axi4_signature(addr_bits, data_bits, id_bits):
    """An AXI4 master interface (``Out`` = driven by the master), AXI member names."""
    return wiring.Signature({
        "awid": Out(id_bits), "awaddr": Out(addr_bits), "awlen": Out(8), "awsize": Out(3),
        "awburst": Out(2), "awlock": Out(1), "awcache": Out(4), "awprot": Out(3),
        "awvalid": Out(1), "awready": In(1),
        "wdata": Out(data_bits), "wstrb": Out(data_bits // 8), "wlast": Out(1),
        "wvalid": Out(1), "wready": In(1),
        "bid": In(id_bits), "bresp": In(2), "bvalid": In(1), "bready": Out(1),
        "arid": Out(id_bits), "araddr": Out(addr_bits), "arlen": Out(8), "arsize": Out(3),
        "arburst": Out(2), "arlock": Out(1), "arcache": Out(4), "arprot": Out(3),
        "arvalid": Out(1), "arready": In(1),
        "rid": In(id_bits), "rdata": In(data_bits), "rresp": In(2), "rlast": In(1),
        "rvalid": In(1), "rready": Out(1),
    })


def _pow2_ceil(n):
    return 1 << ceil_log2(max(1, n))


def dma_geometry(cfg, *, buffer_beats=None, filter_entries=None, filter_gen_bits=4):
    """The derived sizes of the DMA for ``cfg`` (see :class:`GatherScatterDMA`)."""
    bb = cfg.bus_bytes
    max_row_beats = cfg.max_row_bytes // bb
    max_burst = min(MAX_BURST, max_row_beats)
    tags = _pow2_ceil(cfg.max_outstanding_reads)
    ids = min(1 << cfg.axi_id_bits, tags)
    if buffer_beats is None:
        buffer_beats = _pow2_ceil(max(2 * max_burst,
                                      min(cfg.max_outstanding_reads * max_burst, 2048)))
    if buffer_beats < 2 * max_burst or buffer_beats & (buffer_beats - 1):
        raise ValueError(f"buffer_beats={buffer_beats}: must be a power of two >= "
                         f"{2 * max_burst} (two longest bursts)")
    if filter_entries is None:
        filter_entries = _pow2_ceil(min(8192, max(64, 2 * cfg.staging_rows)))
    if filter_entries < 2 or filter_entries & (filter_entries - 1):
        raise ValueError(f"filter_entries={filter_entries}: must be a power of two >= 2")
    if filter_gen_bits < 2:
        raise ValueError(f"filter_gen_bits={filter_gen_bits}: must be >= 2")
    return SimpleNamespace(bus_bytes=bb, max_row_beats=max_row_beats, max_burst=max_burst,
                           tags=tags, ids=ids, buffer_beats=buffer_beats,
                           filter_entries=filter_entries, filter_gen_bits=filter_gen_bits,
                           bank_bits=max(1, ceil_log2(cfg.staging_banks)))


def _lowest(bits, n):
    """Index (``max(1, ceil_log2(n))`` bits) of the lowest set bit of ``bits`` (0 if none)."""
    idx = Const(0, max(1, ceil_log2(n)))
    for i in reversed(range(n)):
        idx = Mux(bits[i], i, idx)
    return idx


#: Bits of one block RAM (ECP5 DP16KD, without its parity bits): sets the filter's slices.
BRAM_BITS = 16384


def filter_slices(width, depth, gran):
    """Column slices ``[(lo, hi), ...]`` of a ``width`` x ``depth`` memory written in granules
    of ``gran`` bits, each as wide as one block RAM of ``BRAM_BITS`` is at that depth (at
    least one bit; a multiple of ``gran`` or a divisor of it, so a write granule never
    straddles two slices unevenly): slices of one RAM each need no depth cascade and no
    multiplexer after the RAMs. A memory no deeper than one RAM at full width is one slice.
    """
    w = max(1, BRAM_BITS // depth)
    if w >= width:
        return [(0, width)]
    w = (w // gran) * gran if w >= gran else gcd(w, gran)
    return [(lo, min(width, lo + w)) for lo in range(0, width, w)]


def sliced_memory(m, name, width, depth, wport, rports, *, gran=None, init_ones=False):
    """Add to ``m`` a ``width`` x ``depth`` memory built as column slices one block RAM deep
    (:func:`filter_slices`), as submodules ``{name}0``, ``{name}1``, ...: no depth cascade,
    so no multiplexer between the RAMs' clock-to-out and the read data's users.

    ``wport`` is the write port (``addr``, ``data`` of ``width`` bits, ``en``); ``gran`` its
    write granule in bits, with one ``en`` bit per granule (``None``: one ``en`` bit writes
    the whole word, and the slices may cut it at any bit). ``rports`` are synchronous read
    ports (``addr``, ``data``, ``en``), each reading every slice. ``init_ones``: every bit
    starts as one (else zero).
    """
    for k, (lo, hi) in enumerate(filter_slices(width, depth, gran or 1)):
        init = [(1 << (hi - lo)) - 1] * depth if init_ones else []
        mem = Memory(shape=hi - lo, depth=depth, init=init)
        m.submodules[f"{name}{k}"] = mem
        if gran is None:
            wp = mem.write_port()
            en = wport.en
        elif hi - lo >= gran:
            wp = mem.write_port(granularity=gran)
            en = wport.en[lo // gran:hi // gran]
        else:
            wp = mem.write_port()
            en = wport.en[lo // gran].replicate(hi - lo)
        # (the enable leads for granule writes: the statement order the filter had before
        # this helper, which Amaranth's signal naming follows, so the Verilog is unchanged)
        wr = [wp.addr.eq(wport.addr), wp.en.eq(en)]
        m.d.comb += [*(wr if gran is None else wr[::-1]),
                     wp.data.eq(Value.cast(wport.data)[lo:hi])]
        for port in rports:
            rp = mem.read_port(domain="sync")
            m.d.comb += [rp.addr.eq(port.addr), rp.en.eq(port.en),
                         Value.cast(port.data)[lo:hi].eq(rp.data)]


class SkidBuffer(wiring.Component):
    """A two-entry pipeline register (skid buffer) between two valid/ready streams.

    ``i.ready``, ``o.valid`` and ``o.payload`` are flip-flop outputs, so neither side's
    handshake logic reaches the other's in one cycle; it moves one item per cycle when ``o``
    never stalls, and adds one cycle of latency. ``o`` holds the oldest item; ``s_valid`` /
    ``s_payload`` is the second (the *skid* register, filled only while ``o`` is stalled, so
    ``s_valid`` implies ``o.valid``). Both are exported because an item held here is still
    pending for its owner's status logic. The skid register captures the input in every
    cycle it is empty (its enable is ``~s_valid``, a flip-flop, not the late ``o.ready``:
    only ``s_valid`` decides whether the capture counts), so ``s_payload`` means nothing
    while ``s_valid`` is low.
    """

    def __init__(self, shape):
        super().__init__({"i": In(stream.Signature(shape)), "o": Out(stream.Signature(shape)),
                          "s_valid": Out(1), "s_payload": Out(shape)})

    def elaborate(self, platform):
        m = Module()
        i, o = self.i, self.o
        m.d.comb += i.ready.eq(~self.s_valid)
        with m.If(~self.s_valid):
            m.d.sync += self.s_payload.eq(i.payload)
        with m.If(~o.valid | o.ready):
            with m.If(self.s_valid):
                m.d.sync += [o.payload.eq(self.s_payload), o.valid.eq(1), self.s_valid.eq(0)]
            with m.Else():
                m.d.sync += [o.payload.eq(i.payload), o.valid.eq(i.valid)]
        with m.Elif(i.valid & ~self.s_valid):
            m.d.sync += self.s_valid.eq(1)
        return m


class GatherScatterDMA(wiring.Component):
    """The gather/scatter DMA (AXI4 master); the module docstring has the micro-architecture,
    the burst rule, the ordering/hazard rule and the cycle costs.

    Parameters
    ----------
    cfg : HotlineConfig
        Uses ``key_bits``, ``row_bits``, ``num_tables``, ``table_bits``, ``slot_bits``,
        ``cam_entries``, ``staging_banks``, ``staging_rows``, ``staging_index_bits``,
        ``axi_data_bits``, ``axi_id_bits``, ``max_outstanding_reads``, ``max_row_bytes``.
    buffer_beats : int, optional
        Bus words of the read-data ring buffer (power of two, >= 2 of the longest burst).
        Default: ``max_outstanding_reads * longest burst``, capped at 2048, at least two
        longest bursts.
    filter_entries : int, optional
        Entries of each bank's hazard filter (power of two; the filter hash has
        ``log2(filter_entries)`` bits). Default: ``2 * staging_rows`` clamped to 64..8192.
        Fewer means more false-positive deferrals (slower, never wrong).
    filter_gen_bits : int, optional
        Bits of a filter entry, the generation tag (>= 2, default 4): a bank's entries
        written ``2**filter_gen_bits - 1`` scatters ago alias the current generation (a false
        positive). The filters are one memory of ``filter_entries`` words of
        ``staging_banks * filter_gen_bits`` bits, built as column slices of one block RAM
        each (ulx3s: 8192 x 8 as four 8192 x 2 DP16KD).

    Members
    -------
    place : ``In(stream.Signature({key, slot}))``
        Placement records (``install.placed_layout``): copy the host row of ``key`` to popular
        slot ``slot``.
    gather : ``In(stream.Signature({key, bank, index}))``
        Gather requests (:func:`gather_layout`): copy the host row of ``key`` to ``index`` of
        staging bank ``bank`` and log ``key`` there.
    cam_read_req : ``Out(stream.Signature(slot_bits))``
        To the CAM's ``read_req``: the slot EVICT reads.
    cam_read_resp : ``In(stream.Signature({key, used}))``
        From the CAM's ``read_resp``.
    scatter_start : ``In(1)``
        Pulse: queue SCATTER(``scatter_bank``).
    scatter_bank : ``In(bank_bits)``
        The bank of ``scatter_start``.
    evict_start : ``In(1)``
        Pulse: queue an EVICT.
    soft_reset : ``In(1)``
        Pulse: abort, drain the bus, clear error, logs, filters, lists, commands, statistics.
    table_base : ``In(64).array(num_tables)``
        TABLE_BASE[t]: byte address of row 0 of table ``t`` (bus aligned).
    row_stride : ``In(32)``
        ROW_STRIDE: bytes between consecutive host rows (bus aligned).
    row_bytes : ``In(bits_for(max_row_bytes))``
        ROW_BYTES: bytes per row (a non-zero multiple of the bus width, <= max_row_bytes).
    popular_base : ``In(64)``
        POPULAR_BASE: byte address of popular slot 0 (bus aligned).
    staging_base : ``In(64).array(staging_banks)``
        STAGING_BASE[b]: byte address of index 0 of bank ``b`` (bus aligned).
    m_axi : ``Out(axi4_signature(64, axi_data_bits, axi_id_bits))``
        The AXI4 master port (exported as ``m_axi_awaddr`` etc.).
    busy : ``Out(1)``
        Work accepted and not complete (including deferred gathers waiting for a scatter and
        queued commands), a transaction outstanding, or a soft reset pending.
    error : ``Out(1)``
        Sticky: an AXI error response was seen (cleared by ``soft_reset``).
    error_addr : ``Out(64)``
        Start address of the first failing burst.
    error_resp : ``Out(2)``
        Its response code (2 SLVERR, 3 DECERR).
    param_error : ``Out(1)``
        The parameters break the alignment rule (registered, one cycle after the parameters;
        no new job starts while set).
    bad_key : ``Out(1)``
        Sticky: a job named a key with a table id >= num_tables (it moved nothing).
    cmd_ignored : ``Out(1)``
        Sticky: a command was ignored (see the module docstring); cleared by ``soft_reset``.
    gathers_done : ``Out(staging_banks)``
        Bit ``b``: every gather sent to bank ``b``, deferred ones and ones still held in the
        input buffer included, has completed its writes (the GPU may use the bank).
    scatter_busy : ``Out(staging_banks)``
        Bit ``b``: SCATTER(b) is queued or running.
    evict_busy : ``Out(1)``
        An EVICT is queued or running.
    log_count : ``Out(staging_index_bits + 1).array(staging_banks)``
        Entries in each bank's gather log.
    stat_bytes_read, stat_bytes_written : ``Out(32)``
        Bytes of R / W data beats transferred.
    stat_rows_gathered, stat_rows_scattered, stat_rows_placed, stat_rows_evicted : ``Out(32)``
        Rows whose last write response (OKAY) arrived, per job kind.
    stat_deferred : ``Out(32)``
        Gathers deferred by the hazard rule (each counted once).

    After elaboration, ``register_copies`` lists ``(name, flip-flop, value)``: flip-flops
    that hold a value the design could compute, a cycle early for timing (``front_ok``,
    ``s_complete``, ``r_err_w``, ``g_blocked``), and one constant 0 "copy" of a value the
    arbiter assumes is 0 (the replay's and G2's requests at once). Not hardware:
    ``sim/register_copies.py`` checks them in the amaranth.sim tests.
    """

    def __init__(self, cfg, *, buffer_beats=None, filter_entries=None, filter_gen_bits=4):
        self.cfg = cfg
        self.geom = g = dma_geometry(cfg, buffer_beats=buffer_beats,
                                     filter_entries=filter_entries,
                                     filter_gen_bits=filter_gen_bits)
        B = cfg.staging_banks
        members = {
            "place": In(stream.Signature(placed_layout(cfg))),
            "gather": In(stream.Signature(gather_layout(cfg))),
            "cam_read_req": Out(stream.Signature(cfg.slot_bits)),
            "cam_read_resp": In(stream.Signature(cam_entry_layout(cfg))),
            "scatter_start": In(1),
            "scatter_bank": In(g.bank_bits),
            "evict_start": In(1),
            "soft_reset": In(1),
            "table_base": In(ADDR_BITS).array(cfg.num_tables),
            "row_stride": In(32),
            "row_bytes": In(bits_for(cfg.max_row_bytes)),
            "popular_base": In(ADDR_BITS),
            "staging_base": In(ADDR_BITS).array(B),
            "m_axi": Out(axi4_signature(ADDR_BITS, cfg.axi_data_bits, cfg.axi_id_bits)),
            "busy": Out(1),
            "error": Out(1),
            "error_addr": Out(ADDR_BITS),
            "error_resp": Out(2),
            "param_error": Out(1),
            "bad_key": Out(1),
            "cmd_ignored": Out(1),
            "gathers_done": Out(B),
            "scatter_busy": Out(B),
            "evict_busy": Out(1),
            "log_count": Out(cfg.staging_index_bits + 1).array(B),
        }
        for n in STAT_NAMES:
            members[f"stat_{n}"] = Out(32)
        super().__init__(members)

    # ------------------------------------------------------------------------------------
    def elaborate(self, platform):
        cfg, g = self.cfg, self.geom
        B, bank_bits = cfg.staging_banks, g.bank_bits
        ib, kb, sb = cfg.staging_index_bits, cfg.key_bits, cfg.slot_bits
        rows = cfg.staging_rows
        nbits = max(ib, sb)
        bb = g.bus_bytes
        lbb = exact_log2(bb)
        T, ids = g.tags, g.ids
        tb_, idl = ceil_log2(T), ceil_log2(ids)
        D = g.buffer_beats
        db = exact_log2(D)
        F = g.filter_entries
        fb = exact_log2(F)
        G = g.filter_gen_bits
        MB = g.max_burst
        N = cfg.max_outstanding_reads
        pos_bits = bank_bits + ib
        beat_bits = bits_for(g.max_row_beats)
        burst_bits = bits_for(MB)
        cnt_bits = bits_for(B * rows + T + 8) + 1
        axi = self.m_axi

        top = Module()
        m = Module()

        # --- soft reset and sticky command flag (outside the reset domain) ------------------
        rst_pending = Signal()
        quiescent = Signal()
        do_reset = Signal()
        cmd_ign_evt = Signal()
        cmd_ignored = Signal()
        # the core's reset is a flip-flop (it reaches every register of the core: from the
        # quiescence logic it was `ulx3s`'s slowest path). It rises the cycle after the
        # halted core is seen quiescent; a halted core starts nothing, so it stays quiescent
        top.d.sync += do_reset.eq(rst_pending & quiescent & ~do_reset)
        with top.If(self.soft_reset):
            top.d.sync += rst_pending.eq(1)
        with top.Elif(do_reset):
            top.d.sync += rst_pending.eq(0)
        with top.If(self.soft_reset):
            top.d.sync += cmd_ignored.eq(0)
        with top.Elif(cmd_ign_evt):
            top.d.sync += cmd_ignored.eq(1)
        top.d.comb += self.cmd_ignored.eq(cmd_ignored)
        top.submodules.core = ResetInserter({"sync": do_reset})(m)

        error = Signal()
        halt = Signal()
        m.d.comb += [halt.eq(error | rst_pending), self.error.eq(error)]

        # --- parameters -------------------------------------------------------------------
        def misaligned(v):
            return v[:lbb].any()

        perr_c = ((self.row_bytes == 0) | misaligned(self.row_bytes)
                  | (self.row_bytes > cfg.max_row_bytes) | misaligned(self.row_stride)
                  | misaligned(self.popular_base))
        for v in list(self.table_base) + list(self.staging_base):
            perr_c = perr_c | misaligned(v)
        # registered (outside the soft-reset domain): the wide OR of the parameter checks
        # never sits in front of the job logic it gates
        perr = Signal()
        top.d.sync += perr.eq(perr_c)
        m.d.comb += self.param_error.eq(perr)
        row_beats = Signal(beat_bits)
        m.d.comb += row_beats.eq(self.row_bytes >> lbb)

        # `front_ok` (the job sources may start new jobs: no `halt`, no parameter error, no
        # scatter completing) is a flip-flop of its own, loaded with the next values of the
        # three (timing: `error` -> the `halt` OR -> G2's take -> the gather skid buffer's
        # enables, then the scatter state's decode -> the AND -> G2's take, were the `ulx3s`'s
        # slowest paths). `halt` next is `halt_d`: `halt_now` (halt, or an error response seen
        # now: `error` next) or a soft reset request; at the core's reset `error` clears and
        # `rst_pending` keeps only a new request. `s_complete` is the scatter sequencer's
        # one-hot "complete" state (s_state == 4), entered when `s_fin_d` and cleared by the
        # core's reset. (Outside the soft-reset domain, like `rst_pending`; `halt_now` and
        # `s_fin_d` are assigned below.)
        halt_now = Signal()
        halt_d = Signal()
        top.d.comb += halt_d.eq(Mux(do_reset, self.soft_reset, halt_now | self.soft_reset))
        s_complete = Signal()        # a scatter completes this cycle (a flip-flop)
        s_fin_d = Signal()           # the sequencer enters "complete" next cycle
        front_ok = Signal(init=1)
        top.d.sync += front_ok.eq(~halt_d & ~perr_c & ~(s_fin_d & ~do_reset))
        # Flip-flops that hold, a cycle early, a value the design could compute: (name,
        # flip-flop, the value). The amaranth.sim tests check every pair in every cycle; no
        # logic is built from this list.
        self.register_copies = [("front_ok", front_ok, ~halt & ~perr & ~s_complete)]

        # --- bookkeeping counters ------------------------------------------------------------
        gath_inflight = Array(Signal(cnt_bits, name=f"gath_inflight{b}") for b in range(B))
        deferred_into = Array(Signal(cnt_bits, name=f"deferred_into{b}") for b in range(B))
        scat_inflight = Signal(cnt_bits)
        place_inflight = Signal(cnt_bits)
        evict_inflight = Signal(cnt_bits)
        # no row of the kind (of the bank) in flight: counter zero and none in J1 (set below)
        gath_none = Signal(B)
        scat_none = Signal()
        place_none = Signal()
        evict_none = Signal()
        gathers_done = Signal(B)
        m.d.comb += gathers_done.eq(gath_none & Cat(deferred_into[b] == 0 for b in range(B)))
        # the output also waits for gathers still held in the input skid buffer (internally,
        # SCATTER waits only for gathers that have started, as it did for gathers not yet
        # accepted before there was a buffer: a held gather into a bank being scattered waits
        # for that scatter)
        g_held = Signal(B)
        m.d.comb += self.gathers_done.eq(gathers_done & ~g_held)
        stats = {n: Signal(32, name=f"st_{n}") for n in STAT_NAMES}
        for n in STAT_NAMES:
            m.d.comb += getattr(self, f"stat_{n}").eq(stats[n])

        # --- hazard state ---------------------------------------------------------------------
        # filters: one memory, word = one generation tag of G bits per bank (see the module
        # docstring). Generations count 0 .. 2**G - 2; the all-ones tag is never a
        # generation and is the memory's initial contents (a defined power-up state, also in
        # simulation). The generations live outside the reset domain: a soft reset bumps them
        # (clears every filter) instead of resetting them to values old entries still hold.
        never = (1 << G) - 1
        # The memory is built as column slices as wide as one block RAM is at depth F
        # (`filter_slices`; ulx3s: 8192 x 8 as four 8192 x 2): a deeper-than-one-RAM memory
        # of the full width would be a depth cascade with a multiplexer after the RAMs, on
        # the read data's way into the hazard check, the design's worst path at 65.2 MHz.
        filt_wp = SimpleNamespace(addr=Signal(fb, name="filt_waddr"),
                                  data=Signal(B * G, name="filt_wdata"),
                                  en=Signal(B, name="filt_wen"))
        filt_rp = SimpleNamespace(addr=Signal(fb, name="filt_raddr"),
                                  data=Signal(B * G, name="filt_rdata"), en=Signal(name="filt_ren"))
        sliced_memory(m, "filt_mem", B * G, F, filt_wp, [filt_rp], gran=G, init_ones=True)
        gen = Array(Signal(G, name=f"filt_gen{b}") for b in range(B))
        armed = Signal(B)            # bit b: bank b has logged a gather since its last scatter
        epoch = Signal(B)
        log_count = Array(Signal(ib + 1, name=f"log_count{b}") for b in range(B))
        for b in range(B):
            m.d.comb += self.log_count[b].eq(log_count[b])
        qhead = Array(Signal(pos_bits, name=f"qhead{b}") for b in range(B))
        qtail = Array(Signal(pos_bits, name=f"qtail{b}") for b in range(B))
        qcnt = Array(Signal(cnt_bits, name=f"qcnt{b}") for b in range(B))
        # `qnz[q]`: list q is not empty (= qcnt[q] != 0, kept as a register of its own so the
        # replay / gather priority and the list append read a flip-flop, not a count compare)
        qnz = Signal(B)
        replay_ok = Signal(B)

        # gather log: {key, wait mask, epoch snapshot} per (bank, index)
        log_layout = data.StructLayout({"key": kb, "mask": B, "snap": B})
        # Column slices each one block RAM deep (`filter_slices`; ulx3s: 8192 x 33 as
        # seventeen 8192 x 2): as one memory it was a depth cascade of four 2048 x 9 RAMs
        # per column, whose output multiplexer sat between the RAMs' clock-to-out (5.8 ns)
        # and the replay's `rp_word` (11.45 ns on `ulx3s`) and the scatter's `s_word`.
        # Ports: `log_wp` writes, `log_sp` (scatter sequencer) and `log_rp` (replay) read.
        log_ports = [SimpleNamespace(addr=Signal(range(B * rows), name=f"log_{n}addr"),
                                     data=Signal(log_layout, name=f"log_{n}data"),
                                     en=Signal(name=f"log_{n}en"))
                     for n in ("w", "s", "r")]
        log_wp, log_sp, log_rp = log_ports
        sliced_memory(m, "log_mem", log_layout.size, B * rows, log_wp, [log_sp, log_rp])
        m.submodules.link_mem = link_mem = Memory(shape=pos_bits, depth=B * rows, init=[])
        link_wp = link_mem.write_port()
        link_rp = link_mem.read_port(domain="sync")

        # list append / pop requests (comb)
        app_en = Signal()
        app_q = Signal(bank_bits)
        app_pos = Signal(pos_bits)
        pop_en = Signal()
        pop_q = Signal(bank_bits)
        pop_next = Signal(pos_bits)
        # The link write is registered (`lk_*`) and reaches the RAM a cycle after the append
        # (timing: the append decision, at the end of the deferral / replay chain, reached
        # the link RAM's address and enable pins over a long net). Nothing reads the entry
        # that soon: the link of an appended position is read by the replay FSM once that
        # position is its queue's head, in state 1, which comes a cycle after a pick (state
        # 0) at the earliest, and the FSM picks no queue in the cycle of an append (a
        # deferral needs `~replay_busy`; the FSM's own append is in state 3). A register
        # copy checks that no replay read meets a pending link write of its address.
        lk_en = Signal()
        lk_addr = Signal(len(link_wp.addr), reset_less=True)
        lk_data = Signal(pos_bits, reset_less=True)
        m.d.sync += [lk_en.eq(app_en & qnz.bit_select(app_q, 1)),
                     lk_addr.eq(qtail[app_q]), lk_data.eq(app_pos)]
        m.d.comb += [link_wp.addr.eq(lk_addr), link_wp.data.eq(lk_data),
                     link_wp.en.eq(lk_en)]
        for q in range(B):
            inc = app_en & (app_q == q)
            dec = pop_en & (pop_q == q)
            m.d.sync += [qcnt[q].eq(qcnt[q] + inc - dec),
                         qnz[q].eq(inc | (qnz[q] & ~(dec & (qcnt[q] == 1))))]
            with m.If(inc):
                m.d.sync += qtail[q].eq(app_pos)
                with m.If(~qnz[q]):
                    m.d.sync += qhead[q].eq(app_pos)
            with m.If(dec):
                m.d.sync += qhead[q].eq(pop_next)
                with m.If(qcnt[q] == 1):
                    m.d.sync += replay_ok[q].eq(0)

        PB = PAGE >> lbb                    # beats in a 4 KiB page
        assert MB <= PB, (MB, PB)
        tp_bits = bits_for(PB)

        def page_room(addr):
            """Beats from ``addr`` to the next 4 KiB boundary (1 .. PB)."""
            to_page = Signal(tp_bits)
            m.d.comb += to_page.eq(Const(PB, tp_bits + 1) - addr[lbb:12])
            return to_page

        def burst_of(to_page, left):
            """``(min(left, to_page, MB), left fits in it)`` for a burst with ``to_page`` beats
            to the page boundary: the compares run side by side, not as a chain of
            minimums."""
            fin = (to_page >= left) & (left <= MB)
            return Mux(fin, left, Mux(to_page <= MB, to_page, MB)), fin

        # --- J pipeline: J1 select, J2 products, [J2s partial sums], J3 addresses ---------------
        rd_take = Signal()
        adv = Signal()
        j1_v = Signal()
        j2_v = Signal()
        j3_v = Signal()
        # J3 -> read issuer through a skid buffer: the J pipeline (and so the arbiter's grants
        # and every input's `ready`) advances on the buffer's registered `ready`, never on the
        # read issuer's address/credit arithmetic of the same cycle
        # The row's first read burst and first write burst (room to the page boundary,
        # length, whether it is the row's only burst) are computed here from the J3
        # registers and travel with the job (and on into the row FIFO), so the read and write
        # issuers' credit updates start from registers, not from an address subtraction and
        # a compare on the skid buffer's / row FIFO's output
        burst_layout = data.StructLayout({"room": tp_bits, "len": burst_bits, "fin": 1})
        j_layout = data.StructLayout({"src": ADDR_BITS, "dst": ADDR_BITS, "kind": 2,
                                      "bank": bank_bits, "beats": beat_bits,
                                      "rd": burst_layout, "wr": burst_layout})
        m.submodules.j_skid = jsk = SkidBuffer(j_layout)
        m.d.comb += adv.eq(~j3_v | jsk.i.ready)

        sel_any = Signal()
        sel_kind = Signal(2)
        sel_bank = Signal(bank_bits)
        sel_key = Signal(kb)
        sel_n = Signal(nbits)

        # (The jobs' fields in J1-J3 have no reset, like the other data registers of the
        # core: each is used only while its stage's valid bit, which resets, says so; they
        # stay off the core's reset net, which has every control register of the core.)
        def dreg(shape, name):
            return Signal(shape, name=name, reset_less=True)

        j1_kind, j1_bank, j1_key, j1_n = (dreg(2, "j1_kind"), dreg(bank_bits, "j1_bank"),
                                          dreg(kb, "j1_key"), dreg(nbits, "j1_n"))
        # the key check is registered with the job in J1 (`j1_bad`): a job with a bad key
        # takes J1 for a cycle, sets `bad_key` and goes no further. A job counts as
        # in flight from J1 on (`j1_live`); the in-flight counters add it when it leaves J1
        j1_bad = Signal()
        j1_live = Signal()
        if cfg.num_tables < (1 << cfg.table_bits):
            with m.If(adv):
                m.d.sync += j1_bad.eq(sel_key[cfg.row_bits:] >= cfg.num_tables)
        m.d.comb += j1_live.eq(j1_v & ~j1_bad)
        with m.If(j1_v & j1_bad):
            m.d.sync += self.bad_key.eq(1)
        # The multipliers sit between registers of their own (timing: `j1_key`, whose input
        # is the arbiter's select, was placed 4.2 ns of routing from the DSPs, and the
        # product's register, pulled towards the adders, 4.1 ns after them; with the DSP's
        # own 3.9 ns that was the core's longest path). J2i holds copies of the multipliers'
        # inputs (the row, the row count `n`), fed only by J1 and feeding only the DSPs; J2
        # registers their products beside the DSPs; J2o registers them again for the adders
        # and looks up the bases. Each stage moves with `adv` like the rest of the J pipeline.
        tid_bits = max(1, kb - cfg.row_bits)
        j2i_v = Signal(name="j2i_v")
        j2i_kind, j2i_bank = dreg(2, "j2i_kind"), dreg(bank_bits, "j2i_bank")
        j2i_row, j2i_n = dreg(cfg.row_bits, "j2i_row"), dreg(nbits, "j2i_n")
        j2i_tid = dreg(tid_bits, "j2i_tid")
        j2_kind, j2_bank, j2_tid = (dreg(2, "j2_kind"), dreg(bank_bits, "j2_bank"),
                                    dreg(tid_bits, "j2_tid"))
        j2_nprod = dreg(ADDR_BITS, "j2_nprod")
        j2o_v = Signal(name="j2o_v")
        j2o_kind, j2o_bank = dreg(2, "j2o_kind"), dreg(bank_bits, "j2o_bank")
        j2o_tbase, j2o_nbase, j2o_nprod = (dreg(ADDR_BITS, n) for n in
                                           ("j2o_tbase", "j2o_nbase", "j2o_nprod"))
        # row * row_stride as registered partial products, one per 18-bit chunk of the row
        # and 16-bit half of the stride: each is a single 18x18 multiplier (MULT18X18D on
        # ECP5) with no adder after it before its register. Each is kept with its weight
        # (the bit where it adds in): ``host = tbase + sum(p << weight)``.
        # (Products are cut to the bits below ADDR_BITS that they can reach.)
        # The multipliers take copies of `row_stride` and `row_bytes` registered here, next
        # to them (timing: the register block's flip-flops were ~4 ns of routing away from
        # the DSPs). The copies are a cycle late, which the rule above (parameters change
        # only while idle) covers.
        stride = Signal(32, name="stride_q", reset_less=True)
        rbytes = Signal(len(self.row_bytes), name="row_bytes_q", reset_less=True)
        m.d.sync += [stride.eq(self.row_stride), rbytes.eq(self.row_bytes)]
        host_ops = [(j2o_tbase, 0)]
        for lo in range(0, cfg.row_bits, MUL_ROW_BITS):
            hi = min(lo + MUL_ROW_BITS, cfg.row_bits)
            for slo in (0, 16):
                wid = min(hi - lo + 16, ADDR_BITS - lo - slo)
                p = dreg(wid, f"j2_p{lo}_{slo}")
                po = dreg(wid, f"j2o_p{lo}_{slo}")
                with m.If(adv):
                    m.d.sync += [p.eq(j2i_row[lo:hi] * stride[slo:slo + 16]), po.eq(p)]
                host_ops.append((po, lo + slo))
        host_ops.sort(key=lambda op: op[1])
        j3_kind, j3_bank = dreg(2, "j3_kind"), dreg(bank_bits, "j3_bank")
        j3_src, j3_dst = dreg(ADDR_BITS, "j3_src"), dreg(ADDR_BITS, "j3_dst")
        tbases = Array(self.table_base)
        sbases = Array(self.staging_base)
        with m.If(adv):
            m.d.sync += [
                j1_v.eq(sel_any), j1_kind.eq(sel_kind), j1_bank.eq(sel_bank), j1_key.eq(sel_key),
                j1_n.eq(sel_n),
                j2i_v.eq(j1_live), j2i_kind.eq(j1_kind), j2i_bank.eq(j1_bank),
                j2i_row.eq(j1_key[:cfg.row_bits]), j2i_n.eq(j1_n),
                j2i_tid.eq(j1_key[cfg.row_bits:] if cfg.num_tables > 1 else 0),
                j2_v.eq(j2i_v), j2_kind.eq(j2i_kind), j2_bank.eq(j2i_bank), j2_tid.eq(j2i_tid),
                j2_nprod.eq(j2i_n * rbytes),
                j2o_v.eq(j2_v), j2o_kind.eq(j2_kind), j2o_bank.eq(j2_bank),
                j2o_nprod.eq(j2_nprod),
                j2o_tbase.eq(tbases[j2_tid] if cfg.num_tables > 1 else self.table_base[0]),
                j2o_nbase.eq(Mux((j2_kind == KIND_PLACE) | (j2_kind == KIND_EVICT),
                                 self.popular_base, sbases[j2_bank])),
            ]

        # Partial-sum stages (J2s1, J2s2, ...: only for rows wider than one multiplier input,
        # e.g. the 24-bit rows of `ulx3s`): while more than three terms are left, each stage
        # adds neighbouring pairs, one two-input carry chain per register, so J3 always adds
        # at most three terms (as for rows of up to 18 bits, which have no such stage). The
        # stages move with `adv` like the rest of the J pipeline.
        jv, jkind, jbank, jother = j2o_v, j2o_kind, j2o_bank, (j2o_nbase + j2o_nprod)[:ADDR_BITS]
        j_valids = [j2i_v, j2o_v]
        stage = 0
        while len(host_ops) > 3:
            stage += 1
            pre = f"j2s{stage}_"
            nv = Signal(name=pre + "v")
            nkind, nbank = dreg(2, pre + "kind"), dreg(bank_bits, pre + "bank")
            nother = dreg(ADDR_BITS, pre + "other")
            with m.If(adv):
                m.d.sync += [nv.eq(jv), nkind.eq(jkind), nbank.eq(jbank), nother.eq(jother)]
            nops = []
            for i in range(0, len(host_ops), 2):
                if i + 1 == len(host_ops):
                    (a, wa), = host_ops[i:]
                    t, value = dreg(len(a), f"{pre}t{wa}"), a
                else:
                    (a, wa), (b, wb) = host_ops[i:i + 2]
                    wid = min(max(len(a), len(b) + wb - wa) + 1, ADDR_BITS - wa)
                    t, value = dreg(wid, f"{pre}t{wa}"), a + (b << (wb - wa))
                with m.If(adv):
                    m.d.sync += t.eq(value)
                nops.append((t, wa))
            j_valids.append(nv)
            jv, jkind, jbank, jother, host_ops = nv, nkind, nbank, nother, nops
        with m.If(adv):
            m.d.sync += [j3_v.eq(jv), j3_kind.eq(jkind), j3_bank.eq(jbank)]
            host = sum((t << w for t, w in host_ops[1:]), host_ops[0][0] << host_ops[0][1])
            host = host[:ADDR_BITS]
            to_host = (jkind == KIND_SCATTER) | (jkind == KIND_EVICT)
            m.d.sync += [j3_src.eq(Mux(to_host, jother, host)),
                         j3_dst.eq(Mux(to_host, host, jother))]
        m.d.comb += [jsk.i.valid.eq(j3_v), jsk.i.payload.src.eq(j3_src),
                     jsk.i.payload.dst.eq(j3_dst), jsk.i.payload.kind.eq(j3_kind),
                     jsk.i.payload.bank.eq(j3_bank), jsk.i.payload.beats.eq(row_beats)]
        for d, addr in (("rd", j3_src), ("wr", j3_dst)):
            room = page_room(addr)
            blen, bfin = burst_of(room, row_beats)
            m.d.comb += [jsk.i.payload[d].room.eq(room), jsk.i.payload[d].len.eq(blen),
                         jsk.i.payload[d].fin.eq(bfin)]

        # --- sources ----------------------------------------------------------------------------
        # replay FSM
        # pick a queue (state 0), read its head (1), register the log word and link (2), then
        # act on them (3): the block RAMs' read data only reaches a register
        rp_state = Signal(range(4))       # 0 idle, 1 read, 2 data, 3 act
        rp_busy_state = Signal()
        m.d.comb += rp_busy_state.eq(rp_state != 0)
        rp_q = Signal(bank_bits)
        rp_pos = Signal(pos_bits)
        replayable = Signal(B)
        m.d.comb += replayable.eq(replay_ok & qnz)
        replay_busy = Signal()
        m.d.comb += replay_busy.eq(rp_busy_state | replayable.any() | s_complete)
        rp_word = Signal(log_layout)
        rp_link = Signal(pos_bits)
        m.d.comb += [log_rp.en.eq(0), link_rp.en.eq(0), log_sp.en.eq(0)]
        rp_rest = Signal(B)
        m.d.comb += rp_rest.eq(rp_word.mask & ~(epoch ^ rp_word.snap)
                               & ~(Const(1, B) << rp_q)[:B])
        r_replay = Signal()
        g_replay = Signal()
        with m.Switch(rp_state):
            with m.Case(0):
                # pick the queue; its head is read next cycle from the register rp_pos, so
                # the pick does not drive the memories' read address (the head cannot move
                # meanwhile: only this FSM pops, and an append to a non-empty queue keeps it)
                with m.If(replayable.any() & front_ok):
                    q = _lowest(replayable, B)
                    m.d.sync += [rp_state.eq(1), rp_q.eq(q), rp_pos.eq(qhead[q])]
            with m.Case(1):
                m.d.comb += [log_rp.addr.eq(rp_pos), log_rp.en.eq(1),
                             link_rp.addr.eq(rp_pos), link_rp.en.eq(1)]
                m.d.sync += rp_state.eq(2)
            with m.Case(2):
                m.d.sync += [rp_word.eq(log_rp.data), rp_link.eq(link_rp.data), rp_state.eq(3)]
            with m.Case(3):
                with m.If(front_ok):
                    with m.If(rp_rest.any()):
                        m.d.comb += [app_en.eq(1), app_q.eq(_lowest(rp_rest, B)),
                                     app_pos.eq(rp_pos),
                                     pop_en.eq(1), pop_q.eq(rp_q), pop_next.eq(rp_link)]
                        m.d.sync += rp_state.eq(0)
                    with m.Else():
                        m.d.comb += r_replay.eq(1)
                        with m.If(g_replay):
                            m.d.comb += [pop_en.eq(1), pop_q.eq(rp_q), pop_next.eq(rp_link)]
                            m.d.sync += rp_state.eq(0)

        self.register_copies.append(
            ("replay's link read vs a pending link write", Const(0, 1),
             lk_en & (rp_state == 1) & (lk_addr == rp_pos)))

        # scatter sequencer
        s_pending = Signal(B)
        # The log is read ahead into a two-stage pipeline (memory output `s_av`, then the
        # register `s_word`/`s_kv` the arbiter sees), so the block RAM's read data never
        # reaches the arbiter in the cycle it leaves the RAM; one row per cycle while granted.
        s_state = Signal(range(5))        # 0 idle, 1 wait, 2 run, 3 drain, 4 complete
        s_bank = Signal(bank_bits)
        s_i = Signal(ib + 1)              # log index of the row in `s_word`
        s_ri = Signal(ib + 1)             # next log index to read
        s_av = Signal()                   # the read port's data is log entry s_ri - 1
        s_kv = Signal()                   # `s_word` holds entry s_i
        s_word = Signal(log_layout)
        s_more = Signal()                 # entries left to read (registered)
        r_scat = Signal()
        g_scat = Signal()
        s_mv = Signal()
        m.d.comb += [log_sp.addr.eq(Cat(s_ri[:ib], s_bank)),
                     s_mv.eq(s_av & (~s_kv | g_scat)),
                     r_scat.eq(s_kv)]     # (s_kv is set in the run state only: no decode)
        with m.Switch(s_state):
            with m.Case(0):
                with m.If(s_pending.any()):
                    m.d.sync += [s_bank.eq(_lowest(s_pending, B)), s_state.eq(1)]
            with m.Case(1):
                with m.If(gathers_done.bit_select(s_bank, 1) & ~replay_busy):
                    m.d.sync += [s_i.eq(0), s_ri.eq(0), s_av.eq(0), s_kv.eq(0),
                                 s_more.eq(log_count[s_bank] != 0),
                                 s_state.eq(Mux(log_count[s_bank] == 0, 3, 2))]
            with m.Case(2):
                with m.If(~s_av | s_mv):
                    m.d.comb += log_sp.en.eq(s_more)
                    m.d.sync += s_av.eq(s_more)
                    with m.If(s_more):
                        m.d.sync += [s_ri.eq(s_ri + 1),
                                     s_more.eq(s_ri + 1 != log_count[s_bank])]
                with m.If(s_mv):
                    m.d.sync += [s_word.eq(log_sp.data), s_kv.eq(1)]
                with m.Elif(g_scat):
                    m.d.sync += s_kv.eq(0)
                with m.If(g_scat):
                    m.d.sync += s_i.eq(s_i + 1)
                    with m.If(s_i + 1 == log_count[s_bank]):
                        m.d.sync += [s_kv.eq(0), s_state.eq(3)]
            with m.Case(3):
                with m.If(scat_none):
                    m.d.comb += s_fin_d.eq(1)
                    m.d.sync += [s_state.eq(4), s_complete.eq(1)]
            with m.Case(4):
                m.d.sync += [s_state.eq(0), s_complete.eq(0)]
        self.register_copies.append(("s_complete", s_complete, s_state == 4))
        with m.If(s_complete):
            for b in range(B):
                with m.If(s_bank == b):
                    m.d.sync += [log_count[b].eq(0), armed[b].eq(0), epoch[b].eq(~epoch[b]),
                                 replay_ok[b].eq(qnz[b])]
        for b in range(B):
            with top.If(do_reset | (s_complete & (s_bank == b))):
                top.d.sync += gen[b].eq(Mux(gen[b] == never - 1, 0, gen[b] + 1))
        # s_pending[b] stays set from the command until the scatter of b completes, so it
        # covers the sequencer's bank in every state but idle (no decode of s_state here)
        m.d.comb += self.scatter_busy.eq(s_pending)

        # evict sequencer
        e_pending = Signal()
        e_state = Signal(range(5))        # 0 idle, 1 wait, 2 req, 3 resp, 4 drain
        e_slot = Signal(sb + 1)
        r_evict = Signal()
        g_evict = Signal()
        m.d.comb += [self.cam_read_req.payload.eq(e_slot[:sb]), self.evict_busy.eq(e_pending)]
        e_next = Signal()
        with m.Switch(e_state):
            with m.Case(0):
                with m.If(e_pending):
                    m.d.sync += e_state.eq(1)
            with m.Case(1):
                with m.If(place_none & front_ok):
                    m.d.sync += [e_slot.eq(0), e_state.eq(2)]
            with m.Case(2):
                m.d.comb += self.cam_read_req.valid.eq(1)
                with m.If(self.cam_read_req.ready):
                    m.d.sync += e_state.eq(3)
            with m.Case(3):
                with m.If(halt):
                    m.d.comb += self.cam_read_resp.ready.eq(1)
                    with m.If(self.cam_read_resp.valid):
                        m.d.sync += e_state.eq(0)
                with m.Elif(self.cam_read_resp.valid):
                    with m.If(~self.cam_read_resp.payload.used):
                        m.d.comb += [self.cam_read_resp.ready.eq(1), e_next.eq(1)]
                    with m.Else():
                        m.d.comb += [r_evict.eq(1), self.cam_read_resp.ready.eq(g_evict),
                                     e_next.eq(g_evict)]
                with m.If(e_next):
                    with m.If(e_slot == cfg.cam_entries - 1):
                        m.d.sync += e_state.eq(4)
                    with m.Else():
                        m.d.sync += [e_slot.eq(e_slot + 1), e_state.eq(2)]
            with m.Case(4):
                with m.If(evict_none):
                    m.d.sync += [e_pending.eq(0), e_state.eq(0)]

        # commands
        sb_onehot = (Const(1, B) << self.scatter_bank)[:B]
        s_pending_n = Signal(B)           # s_pending's next value (for `g_blocked`, below)
        m.d.comb += s_pending_n.eq(s_pending)
        with m.If(self.scatter_start):
            with m.If(halt | (self.scatter_busy & sb_onehot).any()):
                m.d.comb += cmd_ign_evt.eq(1)
            with m.Else():
                m.d.comb += s_pending_n.eq(s_pending | sb_onehot)
        with m.If(s_complete):
            for b in range(B):
                with m.If(s_bank == b):
                    m.d.comb += s_pending_n[b].eq(0)
        m.d.sync += s_pending.eq(s_pending_n)
        with m.If(self.evict_start):
            with m.If(halt | e_pending):
                m.d.comb += cmd_ign_evt.eq(1)
            with m.Else():
                m.d.sync += e_pending.eq(1)

        # input streams: each enters through a skid buffer, so `place.ready` (toward the
        # install engine) and `gather.ready` (toward the fragmenter) are flip-flop outputs and
        # the arbiter works on registered payloads. An item held in a buffer has not started:
        # it is counted by `busy`, and a held gather clears its bank's `gathers_done`.
        in_ok = Signal()             # the inputs may hand over items (else their ready is low)
        m.d.comb += in_ok.eq(~rst_pending & (~perr | error))

        # place input
        m.submodules.place_skid = psk = SkidBuffer(placed_layout(cfg))
        m.d.comb += [psk.i.valid.eq(self.place.valid & in_ok),
                     psk.i.payload.eq(self.place.payload),
                     self.place.ready.eq(psk.i.ready & in_ok)]
        r_place = Signal()
        g_place = Signal()
        m.d.comb += [r_place.eq(psk.o.valid & front_ok & ~e_pending),
                     psk.o.ready.eq(g_place | (error & ~rst_pending))]

        # gather input; the filter hash is computed before the buffer and held with the item
        g_skid_layout = data.StructLayout({"key": kb, "bank": bank_bits, "index": ib,
                                           "hash": fb})
        m.submodules.gather_skid = gsk = SkidBuffer(g_skid_layout)
        gi = self.gather.payload
        m.d.comb += [gsk.i.valid.eq(self.gather.valid & in_ok),
                     gsk.i.payload.key.eq(gi.key), gsk.i.payload.bank.eq(gi.bank),
                     gsk.i.payload.index.eq(gi.index),
                     gsk.i.payload.hash.eq(h3_expr(gi.key, SEED_DMA_FILTER, kb, fb)),
                     self.gather.ready.eq(gsk.i.ready & in_ok)]
        # the gather in the buffer's output register (G0) moves to G1, where it is checked
        # against the filters, and on, with its registered hit mask, into the check register
        # G2 (`g2_v`, `gp`; the mask is `hits`, below), which the arbiter serves. The filter
        # RAM's read data only enters a register (`f_q`, no logic between, placed by its
        # RAM): the compare works from registers, a cycle later, and its result is
        # registered again before the arbiter.
        go = gsk.o.payload
        g1_v = Signal()
        g1p = Signal(g_skid_layout)
        g1_load = Signal()
        g2_v = Signal()
        gp = Signal(g_skid_layout)
        g2_hits = Signal(B)
        g_hash = gp.hash

        def granule(v, d):
            return v[d * G:(d + 1) * G]

        def forward(word, eq, en, wdata):
            """``word`` with the granules a write (``eq``: to its entry, ``en``, ``wdata``)
            replaced."""
            return Cat(Mux(eq & en[d], granule(wdata, d), granule(word, d)) for d in range(B))

        # filter read, one cycle ahead: every cycle the memory reads the entry of the item
        # G0 loads next (the skid register's, else the input's), with en = 1, so neither its
        # address nor its enable depends on a hazard check; the read data is registered
        # (`f_q`) unconditionally. `w0` is, a cycle late, the entry of the item G0 held in
        # the previous cycle: the fresh read (`f_q`) if G0 had just loaded it, with the write
        # of the read's cycle forwarded, else the word held since. `w1` (G1's item's entry,
        # only compared, see `fresh`) is `w0` with the write of the previous cycle (the G0
        # item's last) forwarded. Only the item in G2 writes the filter, when it is taken,
        # and G1 and G0 then move in the same cycle, so a held word or mask stays exact for as
        # long as it is used; a write in the check's cycle (the G2 item leaving) is forwarded
        # by comparing hashes.
        f_cand = Signal(fb)
        m.d.comb += [f_cand.eq(Mux(gsk.s_valid, gsk.s_payload.hash, gsk.i.payload.hash)),
                     filt_rp.addr.eq(f_cand), filt_rp.en.eq(1)]
        f_q = Signal(B * G, reset_less=True)
        f_loaded = Signal()           # G0 loaded in the previous cycle (`f_q` is its entry
        f_loaded_q = Signal()         # ... in the next: `f_loaded_q`)
        f_fw_eq = Signal()            # the read's cycle's write hit the read's entry
        f_fw_en = Signal(B)           # ... with these granules
        f_fw_data = Signal(B * G, reset_less=True)    # ... and this data
        f_fw_eq_q = Signal()          # (the same, a cycle later, beside `f_q`)
        f_fw_en_q = Signal(B)
        f_fw_data_q = Signal(B * G, reset_less=True)
        w0 = Signal(B * G)
        w0_held = Signal(B * G, reset_less=True)
        m.d.sync += [f_q.eq(filt_rp.data),
                     f_loaded.eq(~gsk.o.valid | gsk.o.ready), f_loaded_q.eq(f_loaded),
                     f_fw_eq.eq(filt_wp.addr == f_cand), f_fw_en.eq(filt_wp.en),
                     f_fw_data.eq(filt_wp.data),
                     f_fw_eq_q.eq(f_fw_eq), f_fw_en_q.eq(f_fw_en), f_fw_data_q.eq(f_fw_data),
                     w0_held.eq(w0)]
        m.d.comb += w0.eq(Mux(f_loaded_q, forward(f_q, f_fw_eq_q, f_fw_en_q, f_fw_data_q),
                              w0_held))
        w1_eq = Signal()              # the previous cycle's write hit G0's item's entry
        w1_en = Signal(B)
        w1_data = Signal(B * G, reset_less=True)
        g1_fresh = Signal()           # G1 loaded in the previous cycle
        m.d.sync += [w1_eq.eq(filt_wp.addr == go.hash), w1_en.eq(filt_wp.en),
                     w1_data.eq(filt_wp.data), g1_fresh.eq(g1_load)]
        gather_take = Signal()
        g2_load = Signal()
        hits_new = Signal(B)
        # a completing scatter clears its bank's filter (generation bump, `armed` cleared):
        # no gather hits that bank any more, also one checked in this very cycle
        hits_clr = Signal(B)
        m.d.comb += hits_clr.eq(Mux(s_complete, (Const(1, B) << s_bank)[:B], 0))
        # G1's item hits bank d: in the cycle after G1 loaded, its entry (each candidate
        # word compared with the generation, then selected by registers: the compare reads
        # registers only) matches an armed bank's generation; later, its mask of the previous
        # cycle (`g2_chk`, registered every cycle, cleared by completing scatters as it was
        # made); in both, or the G2 item's write in this cycle hits it
        fresh = Signal(B)
        for d in range(B):
            def hit(word, d=d):
                return granule(word, d) == gen[d]
            m.d.comb += fresh[d].eq(armed[d] & Mux(
                w1_eq & w1_en[d], hit(w1_data),
                Mux(f_loaded_q, Mux(f_fw_eq_q & f_fw_en_q[d], hit(f_fw_data_q), hit(f_q)),
                    hit(w0_held))))
        # the check of G1's item is registered every cycle (`g2_chk`, no load enable in its
        # path); G2's mask is that result in the cycle after G2 loaded (`g2_fresh`), else
        # its own mask held
        # (`hit_any`: whether the mask has a bit, from registers of its own made beside the
        # masks, so the take / load decision does not wait for an OR of the selected mask.
        # With two banks the fresh mask's OR fits the select's LUT4 (fresh, two mask bits,
        # held bit): no register for it)
        g2_chk = Signal(B)
        g2_fresh = Signal()
        hits = Signal(B)
        g2_hits_any = Signal()
        hit_any = Signal()
        m.d.comb += hits_new.eq(Cat(
            (Mux(g1_fresh, fresh[d], g2_chk[d])
             | (gather_take & (gp.bank == d) & (gp.hash == g1p.hash)))
            & (g1p.bank != d) & ~hits_clr[d] for d in range(B)))
        m.d.sync += [g2_chk.eq(hits_new), g2_fresh.eq(g2_load),
                     g2_hits.eq(hits & ~hits_clr), g2_hits_any.eq((hits & ~hits_clr).any())]
        if B > 2:
            g2_chk_any = Signal()
            m.d.sync += g2_chk_any.eq(hits_new.any())
        else:
            g2_chk_any = g2_chk.any()
        m.d.comb += [hits.eq(Mux(g2_fresh, g2_chk, g2_hits)),
                     hit_any.eq(Mux(g2_fresh, g2_chk_any, g2_hits_any))]
        with m.If(g2_load):
            m.d.sync += [g2_v.eq(g1_v), gp.eq(g1p)]
        with m.If(g1_load):
            m.d.sync += [g1_v.eq(gsk.o.valid), g1p.eq(go)]
        # G2's bank has a scatter pending or running (see above): a flip-flop, loaded with the
        # bit of the bank G2 holds next (timing: the bank select was the first two levels of
        # the take chain into the gather skid buffer's enables, the ulx3s route's worst path)
        g_blocked = Signal()
        m.d.sync += g_blocked.eq(Mux(g2_load, s_pending_n.bit_select(g1p.bank, 1),
                                     s_pending_n.bit_select(gp.bank, 1)))
        self.register_copies.append(("g_blocked", g_blocked, s_pending.bit_select(gp.bank, 1)))
        g_base = Signal()
        m.d.comb += g_base.eq(g2_v & front_ok & ~replay_busy & ~g_blocked)
        r_gath = Signal()
        g_gath = Signal()
        m.d.comb += [r_gath.eq(g_base & ~hit_any),
                     gather_take.eq(g_base & (hit_any | g_gath)),
                     g2_load.eq(~g2_v | gather_take | (error & ~rst_pending)),
                     g1_load.eq(~g1_v | g2_load), gsk.o.ready.eq(g1_load)]
        g_pos = Cat(gp.index, gp.bank)
        # the log write is registered (`lw_*`) and reaches the RAM a cycle after the take:
        # its enable is then a flip-flop, not the take decision, on a net that spans the
        # log's block RAMs. Nothing reads the entry that soon: a deferred gather's entry is
        # read by the replay FSM two cycles after its append at the earliest (pick, then
        # read), the scatter sequencer reads a bank's log two cycles after the bank's last
        # gather left G2 at the earliest (wait, then run).
        lw_en = Signal()
        lw_addr = Signal(len(g_pos), reset_less=True)
        lw_data = Signal(log_layout, reset_less=True)
        m.d.sync += [lw_en.eq(gather_take), lw_addr.eq(g_pos),
                     lw_data.eq(Cat(gp.key, hits, epoch))]
        m.d.comb += [log_wp.addr.eq(lw_addr), log_wp.en.eq(lw_en), log_wp.data.eq(lw_data),
                     filt_wp.addr.eq(g_hash), filt_wp.data.eq(Cat(gen[b] for b in range(B)))]
        with m.If(gather_take):
            for b in range(B):
                with m.If(gp.bank == b):
                    m.d.comb += filt_wp.en[b].eq(1)
                    m.d.sync += armed[b].eq(1)
        # `log_count` follows the registered log write (timing: the take decision, at the end
        # of the arbiter's chain, reached every bank's count through its compare and
        # increment). A cycle late is soon enough: the scatter sequencer reads a bank's count
        # in its wait state, two cycles after the bank's scatter command at the earliest, and
        # no gather into the bank is taken after that command (`g_blocked`); a count cleared
        # by a completing scatter gets no late update, as no gather into the bank was taken
        # while it was pending.
        lw_index = lw_addr[:ib]
        lw_bank = lw_addr[ib:]
        with m.If(lw_en):
            for b in range(B):
                with m.If((lw_bank == b) & (lw_index >= log_count[b])):
                    m.d.sync += log_count[b].eq(lw_index + 1)
        self.register_copies += [
            ("late log_count update vs the scatter's read", Const(0, 1),
             lw_en & (lw_bank == s_bank) & (s_state == 1)),
            ("late log_count update vs its clear", Const(0, 1),
             lw_en & (lw_bank == s_bank) & s_complete)]
        # a deferred gather is taken without a grant (`g_base & hit_any`), so its list
        # bookkeeping does not wait for the arbiter's priority chain
        g_defer = g_base & hit_any
        with m.If(g_defer):
            m.d.comb += [app_en.eq(1), app_q.eq(_lowest(hits, B)), app_pos.eq(g_pos)]
            m.d.sync += stats["deferred"].eq(stats["deferred"] + 1)

        m.d.comb += g_held.eq(Cat((g2_v & (gp.bank == b)) | (g1_v & (g1p.bank == b))
                                  | (gsk.o.valid & (go.bank == b))
                                  | (gsk.s_valid & (gsk.s_payload.bank == b))
                                  for b in range(B)))

        # deferred_into counters
        for b in range(B):
            inc = g_defer & (gp.bank == b)
            dec = g_replay & (rp_pos[ib:] == b)
            m.d.sync += deferred_into[b].eq(deferred_into[b] + inc - dec)

        # arbiter: replay > scatter > evict > place > gather
        reqs = [(r_replay, g_replay, KIND_GATHER, rp_pos[ib:], rp_word.key, rp_pos[:ib]),
                (r_scat, g_scat, KIND_SCATTER, s_bank, s_word.key, s_i[:ib]),
                (r_evict, g_evict, KIND_EVICT, 0, self.cam_read_resp.payload.key, e_slot[:sb]),
                (r_place, g_place, KIND_PLACE, 0, psk.o.payload.key, psk.o.payload.slot),
                (r_gath, g_gath, KIND_GATHER, gp.bank, gp.key, gp.index)]
        # G2's gather leaves the replay out of the requests above it: `r_replay` needs the
        # replay FSM in its act state, which makes `replay_busy`, which keeps `g_base` and so
        # `r_gath` low, so the two never meet (timing: the replay's request, from its log
        # word through the epoch compare, led the take chain into the gather skid buffer's
        # enables, the `ulx3s` route's worst path). The tests that watch the register copies
        # check it every cycle: both requests at once would equal the constant 0's "copy".
        higher = Const(0, 1)          # requests above this one
        higher_g = Const(0, 1)        # ... but the replay's (G2's gather: above)
        with m.If(adv):
            for i, (r, gnt, kind, bank, key, n) in enumerate(reqs):
                m.d.comb += gnt.eq(r & ~(higher_g if r is r_gath else higher))
                with m.If(gnt):
                    m.d.comb += [sel_any.eq(1), sel_kind.eq(kind), sel_bank.eq(bank),
                                 sel_key.eq(key), sel_n.eq(n)]
                higher = higher | r
                if r is not r_replay:
                    higher_g = higher_g | r
        self.register_copies.append(("replay/gather exclusive", Const(0, 1), r_replay & r_gath))

        # --- read issuer ----------------------------------------------------------------------
        row_layout = data.StructLayout({"dst": ADDR_BITS, "beats": beat_bits, "kind": 2,
                                        "bank": bank_bits, "wr": burst_layout})
        m.submodules.row_fifo = row_fifo = SyncFIFOBuffered(
            width=row_layout.size, depth=max(4, T))
        rj_v = Signal()
        rj_src = dreg(ADDR_BITS, "rj_src")
        rj_left = Signal(beat_bits)
        ar_valid = Signal()
        in_use = Signal(range(T + 1))
        ip = Signal(tb_)                    # next tag to allocate
        rt = Signal(tb_)                    # oldest tag (retire pointer)
        wa = Signal(db + 1)                 # buffer allocation pointer
        wptr = Signal(db + 1)               # buffer read (W fetch) pointer
        # buffer address of the tag's next R beat (its burst's space starts at `wa` when
        # the AR is issued)
        t_ptr = Array(dreg(db, f"t_ptr{t}") for t in range(T))    # (of tags in use)
        t_len = Array(dreg(8, f"t_len{t}") for t in range(T))
        t_done = Array(Signal(name=f"t_done{t}") for t in range(T))
        t_err = Array(Signal(name=f"t_err{t}") for t in range(T))
        m.submodules.tag_addr = tag_addr = Memory(shape=ADDR_BITS, depth=T, init=[])
        ta_wp = tag_addr.write_port()
        ta_rp = tag_addr.read_port(domain="sync")

        def after_burst(to_page, left):
            """``(room, len, fin)`` of a row's next burst after one that was not its last,
            from that burst's ``to_page`` and the beats ``left`` before it (registers). The
            burst was ``min(to_page, MB)`` long: it ended at the boundary (``to_page <= MB``:
            a whole page follows, the next burst is ``min(left - to_page, MB)``) or ``MB``
            beats before it (``to_page - MB`` follows, the next burst is
            ``min(to_page - MB, left - MB, MB)``). Every compare is of the registers with each
            other or with constants, side by side with the subtractions, so the loop that
            computes the next length has no subtraction ahead of a compare and no address
            adder."""
            def at_most(v, c):           # v <= c, constant when c covers v's range
                return Const(1, 1) if c >= (1 << len(v)) - 1 else v <= c

            at_page = at_most(to_page, MB)
            a_left = (left - to_page)[:len(left)]
            a_fin = at_most(a_left, MB)
            b_room = (to_page - MB)[:tp_bits]
            b_left = (left - MB)[:len(left)]
            b_fin = (to_page >= left) & at_most(left, 2 * MB)
            room = Mux(at_page, PB, b_room)
            nlen = Mux(at_page, Mux(a_fin, a_left, MB),
                       Mux(b_fin, b_left, Mux(at_most(to_page, 2 * MB), b_room, MB)))
            return room, nlen, Mux(at_page, a_fin, b_fin)

        def spare_credit(name, init, gain, ok, last, take, cur_len, jlen):
            """A credit check without a compare: ``spare = pool - need`` as one signed
            register, where ``pool`` is the credit (free buffer beats, retired beats) and
            ``need`` the length of the burst waiting for it (0 when none waits); the burst
            may go when ``spare >= 0``, its sign bit. ``pool`` gains ``gain`` each cycle and
            loses the burst's length when it goes (``ok``); ``need`` becomes ``jlen`` when a
            new row is ``take``n and 0 when the row's last burst goes without one. When a
            burst that is not its row's ``last`` goes, ``need`` becomes the next burst's
            length a cycle later, from the length register ``cur_len`` (loaded with it by
            that handshake), and the burst may not go in that cycle (``<name>_sub``; timing:
            the next length, a subtraction, a compare and a select after the length and
            page-room registers, was the carry-in of this subtraction, 18 levels on `tiny`'s
            route). Every case is ``spare + gain - x``: the sums are made beside the
            handshake, which only selects one. Returns the "may go" flag."""
            w = max(db + 1, burst_bits) + 1          # pool <= D, need <= MB, and a sign
            spare = Signal(signed(w), init=init, name=name)
            sub = Signal(name=f"{name}_sub")         # need is cur_len, not yet subtracted
            # (operands of one signed width: the arithmetic needs no sign extension)
            def sw(v):
                return Cat(v, Const(0, max(0, w - len(v))))[:w].as_signed()

            def nxt(g):
                a = sw(spare + g)
                return Mux(take, a - sw(jlen), Mux(sub, a - sw(cur_len), a))
            m.d.sync += sub.eq(ok & ~last)
            if len(gain) == 1:
                # a one-bit gain (the W side's `fetch`, which depends on `wready`) selects
                # between the sums with 0 and with 1 (timing: it was the carry-in of the
                # first of two adders, 13.6 ns from the W stage's valid bit in one route)
                m.d.sync += spare.eq(Mux(gain, nxt(1), nxt(0)))
            else:
                m.d.sync += spare.eq(nxt(sw(gain)))
            return ~spare[-1] & ~sub

        # precomputed one cycle early (with rj_src/rj_left): the next AR's length and whether
        # it is the row's last, and the buffer credit, so that AR issue and `rd_take` use
        # register outputs and no compare
        ar_len = Signal(burst_bits)         # burst_of(ar_room, rj_left)
        ar_fin = Signal()                   # rj_left == ar_len
        ar_room = Signal(tp_bits)           # page_room(rj_src)
        buf_fits = Signal()                 # ar_len <= beats not allocated (D - (wa - wptr))
        ar_ok = Signal()
        ar_last = Signal()
        halt_now_r = Signal()               # the AR side's halt_now (W channel, below)
        # stop at once when an error response is seen (the R beat in its register, the B
        # response in its handshake cycle), before `error` itself is set (`halt_now`)
        m.d.comb += [
            ar_ok.eq(rj_v & (~ar_valid | axi.arready) & (in_use < N)
                     & buf_fits & ~halt_now_r),
            ar_last.eq(ar_ok & ar_fin),
            rd_take.eq(jsk.o.valid & ~halt & row_fifo.w_rdy & (~rj_v | ar_last)),
            jsk.o.ready.eq(rd_take),
        ]
        m.d.comb += [
            axi.arvalid.eq(ar_valid), axi.arsize.eq(lbb), axi.arburst.eq(1),
            axi.arcache.eq(0b0011), axi.arlock.eq(0), axi.arprot.eq(0),
            ta_wp.addr.eq(ip), ta_wp.data.eq(rj_src), ta_wp.en.eq(ar_ok),
        ]
        # the row's next burst (used when ar_ok) and a new row's first (when rd_take)
        nsrc = Signal(ADDR_BITS)
        nleft = Signal(beat_bits)
        m.d.comb += [nsrc.eq(rj_src + (ar_len << lbb)), nleft.eq(rj_left - ar_len)]
        nroom, nlen, nfin = after_burst(ar_room, rj_left)
        jo = jsk.o.payload
        jroom, jlen, jfin = jo.rd.room, jo.rd.len, jo.rd.fin
        # The tag's entry is written a cycle after its AR is issued, from registers (`al_*`;
        # timing: `ar_ok`, late and wide-spread, no longer drives the enables of every tag's
        # entry). Nothing reads it sooner: the burst's first R beat is registered (r1) two
        # cycles after the AR handshake at the earliest, itself at least a cycle after
        # ar_ok (and `t_done` / `t_err` of a free tag are already 0, cleared at its retire).
        al_v = Signal()
        al_tag = Signal(tb_, reset_less=True)
        al_ptr = Signal(db, reset_less=True)
        al_len = Signal(8, reset_less=True)
        m.d.sync += [al_v.eq(ar_ok), al_tag.eq(ip), al_ptr.eq(wa[:db]), al_len.eq(ar_len - 1)]
        with m.If(al_v):
            m.d.sync += [t_ptr[al_tag].eq(al_ptr), t_len[al_tag].eq(al_len),
                         t_done[al_tag].eq(0), t_err[al_tag].eq(0)]
        with m.If(ar_ok):
            m.d.sync += [
                ar_valid.eq(1), axi.araddr.eq(rj_src), axi.arlen.eq(ar_len - 1),
                axi.arid.eq(ip[:idl] if idl else 0),
                wa.eq(wa + ar_len), ip.eq(ip + 1),
            ]
            m.d.sync += [rj_src.eq(nsrc), rj_left.eq(nleft), ar_len.eq(nlen),
                         ar_fin.eq(nfin), ar_room.eq(nroom)]
            with m.If(ar_last):
                m.d.sync += rj_v.eq(0)
        with m.Elif(axi.arready):
            m.d.sync += ar_valid.eq(0)
        rowin = data.View(row_layout, row_fifo.w_data)
        m.d.comb += [row_fifo.w_en.eq(rd_take), rowin.dst.eq(jo.dst), rowin.beats.eq(jo.beats),
                     rowin.kind.eq(jo.kind), rowin.bank.eq(jo.bank), rowin.wr.eq(jo.wr)]
        with m.If(rd_take):
            m.d.sync += [rj_v.eq(1), rj_src.eq(jo.src), rj_left.eq(jo.beats), ar_len.eq(jlen),
                         ar_fin.eq(jfin), ar_room.eq(jroom)]

        # --- R channel: tag lookup, data into the buffer --------------------------------------
        m.submodules.buf = buf = Memory(shape=cfg.axi_data_bits, depth=D, init=[])
        buf_wp = buf.write_port()
        buf_rp = buf.read_port(domain="sync")
        # the beat's tag is looked up as the beat is registered: `head_tag[rid]`, or its
        # successor when the previous beat (in r1) ends a burst of the same ID. With one ID
        # per tag (ids == tags) the tag is the ID itself.
        r1_v = Signal()
        r1_last = Signal()
        r1_id = Signal(max(1, idl))
        r1_data = dreg(cfg.axi_data_bits, "r1_data")
        r1_resp = Signal(2)
        r_tag = Signal(tb_)
        # the beat's buffer address, registered with it (timing: the tag's pointer select
        # is then ahead of r1, not between r_tag and the buffer's address pins and the
        # pointer's increment): the tag's pointer, or the next address after the beat in r1
        # when it is of the same tag (its increment is not yet in t_ptr). A tag's pointer is
        # written (al_v) at the latest in the cycle of its AR handshake, before any R beat.
        r1_ptr = dreg(db, "r1_ptr")
        rid = axi.rid[:idl] if idl else Const(0, 1)
        if ids == T:
            tag_in = rid
        else:
            head_tag = Array(Signal(tb_, init=i, name=f"head_tag{i}") for i in range(ids))

            def head(i):
                return head_tag[i] if ids > 1 else head_tag[0]
            tag_in = Mux(r1_v & r1_last & (r1_id == rid), (head(r1_id) + ids)[:tb_], head(rid))
        m.d.comb += axi.rready.eq(1)
        m.d.sync += r1_v.eq(axi.rvalid)
        with m.If(axi.rvalid):
            m.d.sync += [r1_id.eq(rid), r1_data.eq(axi.rdata), r_tag.eq(tag_in),
                         r1_resp.eq(axi.rresp), r1_last.eq(axi.rlast),
                         r1_ptr.eq(Mux(r1_v & (r_tag == tag_in), r1_ptr + 1, t_ptr[tag_in]))]
        self.register_copies.append(
            ("r1_ptr is t_ptr[r_tag]", Const(0, 1), r1_v & (r1_ptr != t_ptr[r_tag])))
        m.d.comb += [buf_wp.addr.eq(r1_ptr), buf_wp.data.eq(r1_data),
                     buf_wp.en.eq(r1_v), ta_rp.addr.eq(r_tag), ta_rp.en.eq(r1_v)]
        cap_r = Signal()
        m.d.sync += cap_r.eq(0)
        with m.If(cap_r):
            m.d.sync += self.error_addr.eq(ta_rp.data)
        with m.If(r1_v):
            m.d.sync += [t_ptr[r_tag].eq(r1_ptr + 1),
                         stats["bytes_read"].eq(stats["bytes_read"] + bb)]
            with m.If(r1_last):
                m.d.sync += t_done[r_tag].eq(1)
                if ids < T:
                    m.d.sync += head(r1_id).eq(head(r1_id) + ids)
            with m.If(r1_resp[1]):
                m.d.sync += t_err[r_tag].eq(1)
                with m.If(~error):
                    m.d.sync += [error.eq(1), self.error_resp.eq(r1_resp), cap_r.eq(1)]

        # retire in order
        retire = Signal()
        m.d.comb += retire.eq((in_use != 0) & t_done[rt])
        with m.If(retire):
            m.d.sync += [t_done[rt].eq(0), rt.eq(rt + 1)]
        m.d.sync += in_use.eq(in_use + ar_ok - retire)

        # --- write issuer -------------------------------------------------------------------------
        b_layout = data.StructLayout({"addr": ADDR_BITS, "last": 1, "kind": 2,
                                      "bank": bank_bits})
        m.submodules.b_fifo = b_fifo = SyncFIFOBuffered(width=b_layout.size, depth=max(4, T))
        m.submodules.wl_fifo = wl_fifo = SyncFIFOBuffered(width=8, depth=4)
        wr_v = Signal()
        wr_dst = dreg(ADDR_BITS, "wr_dst")
        wr_left = Signal(beat_bits)
        wr_kind = Signal(2)
        wr_bank = Signal(bank_bits)
        aw_valid = Signal()
        # precomputed with wr_dst/wr_left, as on the read side: the row FIFO's read enable
        # then depends on the sign of one credit register (retired beats >= aw_len)
        aw_len = Signal(burst_bits)         # burst_of(aw_room, wr_left)
        aw_fin = Signal()                   # wr_left == aw_len
        aw_room = Signal(tp_bits)           # page_room(wr_dst)
        aw_ok = Signal()
        aw_last = Signal()
        wr_take = Signal()
        beats_ready = Signal()              # aw_len <= retired beats not claimed by an AW
        # The write side's own copy of `halt_now`, from its own flip-flop of the R error
        # (`r_err_w`, equal to r1_v & r1_resp[1]; timing: `halt_now`, from the R stage's
        # registers, crossed the chip to the AW logic - 4.8 ns of routing on the `ulx3s`'s
        # path r1_resp -> halt_now -> aw_ok -> the row FIFO's level).
        b_take = Signal()                   # a B response taken (assigned below)
        b_bad = axi.bresp[1]
        r_err_w = Signal()
        m.d.sync += r_err_w.eq(axi.rvalid & axi.rresp[1])
        self.register_copies.append(("r_err_w", r_err_w, r1_v & r1_resp[1]))
        # The AR side's own `halt_now` too, from a flip-flop of the R error stored inverted
        # (`r_ok_ar`; Yosys would merge an equal copy with `r_err_w`. Timing: r1_resp's
        # fanout and its AND with r1_v led the path into the job skid buffer's enables,
        # r1_resp -> halt_now -> ar_ok -> rd_take.)
        r_ok_ar = Signal(init=1)
        m.d.sync += r_ok_ar.eq(~(axi.rvalid & axi.rresp[1]))
        self.register_copies.append(("r_ok_ar", r_ok_ar, ~(r1_v & r1_resp[1])))
        m.d.comb += halt_now_r.eq(halt | ~r_ok_ar | (b_take & b_bad))
        halt_now_w = Signal()
        m.d.comb += [
            halt_now_w.eq(halt | r_err_w | (b_take & b_bad)),
            aw_ok.eq(wr_v & (~aw_valid | axi.awready) & beats_ready & b_fifo.w_rdy
                     & wl_fifo.w_rdy & ~halt_now_w),
            aw_last.eq(aw_ok & aw_fin),
            wr_take.eq(row_fifo.r_rdy & (~wr_v | aw_last) & ~halt),
            row_fifo.r_en.eq(wr_take),
        ]
        # the credit is the beats of retired bursts, counted a cycle after they retire
        # (`ret_beats`, a register: the retire pointer's multiplexers and an adder in series
        # with the credit were a 15-level path), less those claimed by AWs
        ret_beats = Signal(db + 1)
        m.d.sync += ret_beats.eq(Mux(retire & ~t_err[rt], t_len[rt] + 1, 0))
        m.d.comb += [
            axi.awvalid.eq(aw_valid), axi.awsize.eq(lbb), axi.awburst.eq(1),
            axi.awcache.eq(0b0011), axi.awlock.eq(0), axi.awprot.eq(0), axi.awid.eq(0),
        ]
        bin_ = data.View(b_layout, b_fifo.w_data)
        m.d.comb += [b_fifo.w_en.eq(aw_ok), bin_.addr.eq(wr_dst), bin_.last.eq(aw_last),
                     bin_.kind.eq(wr_kind), bin_.bank.eq(wr_bank),
                     wl_fifo.w_en.eq(aw_ok), wl_fifo.w_data.eq(aw_len - 1)]
        # the row's next write burst (used when aw_ok) and a new row's first (when wr_take)
        ndst = Signal(ADDR_BITS)
        nwl = Signal(beat_bits)
        m.d.comb += [ndst.eq(wr_dst + (aw_len << lbb)), nwl.eq(wr_left - aw_len)]
        nwroom, nwlen, nwfin = after_burst(aw_room, wr_left)
        rowout = data.View(row_layout, row_fifo.r_data)
        wroom, wlen, wfin = rowout.wr.room, rowout.wr.len, rowout.wr.fin
        m.d.comb += beats_ready.eq(spare_credit("beat_spare", 0, ret_beats, aw_ok, aw_last,
                                                wr_take, aw_len, wlen))
        with m.If(aw_ok):
            m.d.sync += [aw_valid.eq(1), axi.awaddr.eq(wr_dst), axi.awlen.eq(aw_len - 1)]
            m.d.sync += [wr_dst.eq(ndst), wr_left.eq(nwl), aw_len.eq(nwlen),
                         aw_fin.eq(nwfin), aw_room.eq(nwroom)]
            with m.If(aw_last):
                m.d.sync += wr_v.eq(0)
        with m.Elif(axi.awready):
            m.d.sync += aw_valid.eq(0)
        with m.If(wr_take):
            m.d.sync += [wr_v.eq(1), wr_dst.eq(rowout.dst), wr_left.eq(rowout.beats),
                         wr_kind.eq(rowout.kind), wr_bank.eq(rowout.bank), aw_len.eq(wlen),
                         aw_fin.eq(wfin), aw_room.eq(wroom)]

        # W: buffer read (stage 1) -> W register (stage 2)
        s1_v = Signal()
        s1_last = Signal()
        w_valid = Signal()
        f_left = Signal(8)
        f_active = Signal()
        load2 = Signal()
        adv1 = Signal()
        fetch = Signal()
        f_lastbeat = Signal()
        m.d.comb += [
            load2.eq(s1_v & (~w_valid | axi.wready)),
            adv1.eq(~s1_v | load2),
            fetch.eq(adv1 & (f_active | wl_fifo.r_rdy)),
            buf_rp.en.eq(adv1), buf_rp.addr.eq(wptr[:db]),
            axi.wvalid.eq(w_valid), axi.wstrb.eq((1 << bb) - 1),
        ]
        with m.If(fetch):
            m.d.sync += wptr.eq(wptr + 1)
            with m.If(~f_active):
                m.d.comb += [wl_fifo.r_en.eq(1), f_lastbeat.eq(wl_fifo.r_data == 0)]
                m.d.sync += [f_left.eq(wl_fifo.r_data), f_active.eq(wl_fifo.r_data != 0)]
            with m.Else():
                m.d.comb += f_lastbeat.eq(f_left == 1)
                m.d.sync += [f_left.eq(f_left - 1), f_active.eq(f_left != 1)]
        with m.If(adv1):
            m.d.sync += [s1_v.eq(fetch), s1_last.eq(f_lastbeat)]
        with m.If(load2):
            m.d.sync += [w_valid.eq(1), axi.wdata.eq(buf_rp.data), axi.wlast.eq(s1_last)]
        with m.Elif(axi.wready):
            m.d.sync += w_valid.eq(0)
        with m.If(w_valid & axi.wready):
            m.d.sync += stats["bytes_written"].eq(stats["bytes_written"] + bb)
        m.d.comb += buf_fits.eq(spare_credit("buf_spare", D, fetch, ar_ok, ar_last, rd_take,
                                             ar_len, jlen))

        # B: complete rows
        bout = data.View(b_layout, b_fifo.r_data)
        m.d.comb += [axi.bready.eq(b_fifo.r_rdy), b_take.eq(axi.bvalid & b_fifo.r_rdy),
                     b_fifo.r_en.eq(b_take)]
        m.d.comb += halt_now.eq(halt | (r1_v & r1_resp[1]) | (b_take & b_bad))
        with m.If(b_take & b_bad & ~error):
            m.d.sync += [error.eq(1), self.error_resp.eq(axi.bresp),
                         self.error_addr.eq(bout.addr)]
        done_row = Signal()
        m.d.comb += done_row.eq(b_take & bout.last)
        ok_row = done_row & ~b_bad
        for kind, name in ((KIND_PLACE, "rows_placed"), (KIND_GATHER, "rows_gathered"),
                           (KIND_SCATTER, "rows_scattered"), (KIND_EVICT, "rows_evicted")):
            with m.If(ok_row & (bout.kind == kind)):
                m.d.sync += stats[name].eq(stats[name] + 1)

        # in-flight row counters: +1 when the job leaves J1 (while in J1 it is counted by
        # the `*_none` flags above through `j1_live`), -1 at the row's last write response
        def count(sig, inc, dec):
            m.d.sync += sig.eq(sig + inc - dec)

        j1_out = adv & j1_live
        m.d.comb += [
            gath_none.eq(Cat((gath_inflight[b] == 0)
                             & ~(j1_live & (j1_kind == KIND_GATHER) & (j1_bank == b))
                             for b in range(B))),
            scat_none.eq((scat_inflight == 0) & ~(j1_live & (j1_kind == KIND_SCATTER))),
            place_none.eq((place_inflight == 0) & ~(j1_live & (j1_kind == KIND_PLACE))),
            evict_none.eq((evict_inflight == 0) & ~(j1_live & (j1_kind == KIND_EVICT))),
        ]
        for b in range(B):
            count(gath_inflight[b], j1_out & (j1_kind == KIND_GATHER) & (j1_bank == b),
                  done_row & (bout.kind == KIND_GATHER) & (bout.bank == b))
        count(scat_inflight, j1_out & (j1_kind == KIND_SCATTER),
              done_row & (bout.kind == KIND_SCATTER))
        count(place_inflight, j1_out & (j1_kind == KIND_PLACE),
              done_row & (bout.kind == KIND_PLACE))
        count(evict_inflight, j1_out & (j1_kind == KIND_EVICT),
              done_row & (bout.kind == KIND_EVICT))

        # --- status -----------------------------------------------------------------------------
        m.d.comb += quiescent.eq((in_use == 0) & ~ar_valid & ~aw_valid & (b_fifo.level == 0)
                                 & ~r1_v & (e_state != 2) & (e_state != 3))
        work = (j1_v | j2_v | j3_v | jsk.o.valid | psk.o.valid | gsk.o.valid | g1_v | g2_v
                | rj_v
                | wr_v
                | (row_fifo.level != 0) | s_pending.any()
                | (s_state != 0) | e_pending | (e_state != 0) | rp_busy_state)
        work = work | qnz.any()
        for v in j_valids:
            work = work | v
        m.d.comb += self.busy.eq(rst_pending | ~quiescent | (~error & work))
        return top
