"""The register map of the accelerator: one SystemRDL source, produced from the configuration.

Everything that knows a register address derives it from here (contract A5 of DESIGN.md):

1. :func:`rdl_source` renders the SystemRDL 2.0 text of the addrmap ``hotline`` for a
   :class:`~hotline_hw.config.HotlineConfig` (the only place with a layout: register names,
   offsets, fields, reset values);
2. :func:`compile_regmap` compiles and elaborates that text with ``systemrdl-compiler``;
3. :class:`RegMap` is a plain-Python description read back from the *compiled* model
   (registers with offset, access, reset and fields with their software / hardware access and
   side effects), saved as ``regmap.json``. The register block
   (:class:`hotline_hw.gateware.registers.RegisterBlock`), the driver
   (:mod:`hotline_hw.driver`), the testbenches and the generated files all start from it;
4. :func:`write_outputs` writes ``hotline.rdl``, ``regmap.json`` and, with the PeakRDL
   exporters, a C header, Markdown documentation and an IP-XACT description.

Layout
------
32-bit registers at byte addresses (``regwidth = accesswidth = 32``). Offsets of the fixed
part do not depend on the configuration, so software written for one variant finds every
scalar register at the same address on another; the two per-table / per-bank arrays come
last (``STAGING_BASE[b]`` at 0x200, ``TABLE_BASE[t]`` at 0x400, 8 bytes per element), so
the map grows with ``num_tables`` at its end only.

======  =========================================================================
0x000   ``ID`` (magic ``0x484F544C``, "HOTL"), ``VERSION``
0x010   ``CFG_*``: the generate-time configuration (read-only)
0x040   ``CTRL`` (commands, soft reset), ``STATUS``, ``IRQ_ENABLE``, ``IRQ_STATUS``
0x060   ``ROW_STRIDE``, ``ROW_BYTES``, ``POPULAR_BASE_LO/HI``, ``LEARN_PERIOD``,
        ``LEARN_THRESHOLD``
0x080   CAM access: ``CAM_SLOT``, ``CAM_KEY_LO/HI``, ``CAM_CTRL``, ``CAM_STATUS``,
        ``CAM_READ_KEY_LO/HI``
0x0A0   ``DMA_ERROR_ADDR_LO/HI``, ``DMA_ERROR_RESP``
0x100   ``STAT_*``: cumulative statistics (64-bit ones as ``_LO``/``_HI`` pairs)
0x180   ``LAST_*``: the per-mini-batch statistics of the latest mini-batch
0x200   ``STAGING_BASE[b].LO/HI``, one per staging bank
0x400   ``TABLE_BASE[t].LO/HI``, one per table
======  =========================================================================

Names
-----
A register is named by its SystemRDL path below the top: ``ROW_BYTES``, ``POPULAR_BASE_LO``,
and for the arrays (SystemRDL ``regfile`` arrays) ``TABLE_BASE[3].LO``. These are exactly the
member designators of the C header (``regs->TABLE_BASE[3].LO``, ``regs->ROW_BYTES``).
"""

import difflib
import json
import os
import re
import tempfile
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

__all__ = [
    "RegMapError", "RegMap", "Register", "Field",
    "rdl_source", "compile_rdl", "compile_regmap", "regmap", "write_outputs", "port_name",
    "hw_kind",
    "REGMAP_FORMAT", "REGMAP_FORMAT_VERSION", "MAP_VERSION", "ID_MAGIC",
    "COMMANDS", "CAM_OPS", "MODES", "IRQ_EVENTS", "STATISTICS", "LAST_STATISTICS",
    "OUTPUT_FILES",
]

REGMAP_FORMAT = "hotline-hw-regmap"
#: Version of the ``regmap.json`` format.
REGMAP_FORMAT_VERSION = 1
#: ``VERSION`` register: (major, minor) of the register map. A change that moves or removes
#: a register bumps the major number; an added register or field bumps the minor number.
MAP_VERSION = (1, 0)
#: ``ID`` register: "HOTL" in ASCII.
ID_MAGIC = 0x484F544C

#: ``CTRL.cmd`` encodings (the field's SystemRDL enum ``cmd_e``).
COMMANDS = {
    "NOP": (0, "No operation."),
    "LEARN": (1, "Start a learning phase (CTRL.clear = 1 also clears the counter array)."),
    "INSTALL": (2, "Choose the popular set from the counter array, fill the CAM and copy "
                   "the popular rows to the popular region."),
    "TRAIN": (3, "Enter training mode: classify, fragment and gather every mini-batch."),
    "STOP": (4, "Back to idle mode after the current mini-batch."),
    "SCATTER": (5, "Copy every row staged in bank CTRL.bank back to host memory."),
    "EVICT": (6, "Copy every installed row back from the popular region and empty the CAM."),
    "CLEAR_STATS": (7, "Clear every statistics counter (STAT_* and LAST_*)."),
}
#: ``CAM_CTRL.op`` encodings.
CAM_OPS = {
    "NOP": (0, "No operation."),
    "WRITE": (1, "Write CAM_KEY_LO/HI and CAM_CTRL.used into slot CAM_SLOT."),
    "READ": (2, "Read slot CAM_SLOT into CAM_READ_KEY_LO/HI and CAM_STATUS.used."),
}
#: ``STATUS.mode`` encodings.
MODES = {
    "IDLE": (0, "Idle: lookups are not accepted."),
    "LEARN": (1, "Learning: lookups update the counter array."),
    "TRAIN": (2, "Training: mini-batches are classified, fragmented and gathered."),
}
#: ``IRQ_STATUS`` / ``IRQ_ENABLE`` bits: (name, description), bit i is the i-th.
IRQ_EVENTS = (
    ("cmd_done", "A command (CTRL.cmd other than NOP) finished."),
    ("dma_error", "The DMA got an error response and stopped (see DMA_ERROR_*)."),
    ("overflow", "A lookup left as OVERFLOW because its staging bank or its de-dup set was full."),
    ("bad_key", "A lookup named a table >= num_tables."),
    ("framing_error", "The lookup stream broke the sample/mini-batch framing."),
    ("minibatch_done", "A mini-batch left the fragmenter (its LAST_* statistics are ready)."),
)
#: Statistics counters: (name, bits, description). 64-bit ones are LO/HI register pairs.
STATISTICS = (
    ("lookups", 32, "Lookups accepted on the lookup stream."),
    ("hits", 32, "Lookups that hit the popularity CAM while training."),
    ("popular_samples", 32, "Samples routed to the popular micro-batch."),
    ("nonpopular_samples", 32, "Samples routed to the non-popular micro-batch."),
    ("staged_rows", 32, "Unique non-popular rows given a staging index."),
    ("overflows", 32, "Lookups that left as OVERFLOW(key), for any reason (bad key, past "
                      "max_sample_lookups, staging bank full, de-dup set full)."),
    ("bad_keys", 32, "Lookups whose table id was >= num_tables."),
    ("long_samples", 32, "Samples longer than max_sample_lookups."),
    ("staging_full", 32, "Missing lookups that left as OVERFLOW because their row came after "
                         "the staging bank held staging_rows rows."),
    ("dedup_full", 32, "Missing lookups that left as OVERFLOW because their row's de-dup set "
                       "was full."),
    ("id_wraps", 32, "Mini-batches with more samples than sample ids (the ids wrapped)."),
    ("framing_errors", 32, "Framing errors on the lookup stream."),
    ("minibatches", 32, "Mini-batches completed (any mode)."),
    ("learned_lookups", 32, "Lookups that updated the counter array."),
    ("install_skipped", 32, "Candidate rows INSTALL did not place (CAM set full)."),
    ("rows_gathered", 32, "Rows the DMA copied from host memory into a staging bank."),
    ("rows_scattered", 32, "Rows the DMA copied from a staging bank back to host memory."),
    ("rows_placed", 32, "Rows the DMA copied into the popular region (INSTALL)."),
    ("rows_evicted", 32, "Rows the DMA copied from the popular region back (EVICT)."),
    ("bytes_read", 64, "Bytes the DMA read on m_axi."),
    ("bytes_written", 64, "Bytes the DMA wrote on m_axi."),
    ("busy_cycles", 64, "Clock cycles with STATUS.busy set."),
)
#: Statistics also kept for the latest mini-batch alone (``LAST_<NAME>``).
LAST_STATISTICS = ("lookups", "hits", "popular_samples", "nonpopular_samples", "staged_rows",
                   "overflows")

#: Files :func:`write_outputs` writes, in order.
OUTPUT_FILES = ("hotline.rdl", "regmap.json", "hotline_regs.h", "hotline_regs.md",
                "hotline_regs.xml")


class RegMapError(ValueError):
    """The register map cannot be built, compiled or read (the message says why)."""


# --- the layout (rendered to SystemRDL) ----------------------------------------------------

# Field kinds: SystemRDL properties of each.
_KINDS = {
    "const": "sw = r; hw = na;",               # a constant: ID, VERSION, CFG_*
    "status": "sw = r; hw = w;",               # hardware drives it (STATUS, statistics)
    "config": "sw = rw; hw = r;",              # software sets it, hardware uses it
    "sw": "sw = rw; hw = na;",                 # software-only storage (IRQ_ENABLE)
    "cmd": "sw = w; hw = r; swmod;",           # write-only, a strobe to hardware per write
    "arg": "sw = w; hw = r;",                  # write-only argument of a command
    "pulse": "sw = w; hw = r; singlepulse;",   # writing 1 gives a one-cycle pulse
    "irq": "intr; sw = rw; hw = w; onwrite = woclr;",   # set by a hardware pulse, W1C
}


@dataclass
class _F:
    name: str
    lsb: int
    width: int
    kind: str
    title: str
    desc: str
    reset: "int | None" = 0
    enum: "str | None" = None


@dataclass
class _R:
    name: str
    title: str
    desc: str
    fields: list


@dataclass
class _Array:
    """A ``regfile`` array of ``count`` elements of 8 bytes, registers ``LO`` and ``HI``."""
    name: str
    count: int
    title: str
    desc: str
    regs: list


def _value(name, title, desc, kind, width=32, reset=0):
    """A register with one field ``value`` at bit 0."""
    if kind == "status":
        reset = None
    return _R(name, title, desc, [_F("value", 0, width, kind, title, desc, reset)])


def _lohi(name, title, desc, kind, bits=64, reset=0, sep="_"):
    """The LO/HI register pair of a 64-bit quantity of which ``bits`` are implemented
    (``addr_bits`` of an address, the width of a statistic): LO holds bits
    ``min(bits, 32) - 1:0``; HI holds bits ``bits - 1:32``, or, when ``bits <= 32``, is a
    constant 0 (reads 0, writes are ignored), so that the layout does not move."""
    lo_w = min(32, bits)
    lo = _value(f"{name}{sep}LO", f"{title} (bits 31:0)",
                f"{desc} Bits {lo_w - 1}:0" + (f" (bits 31:{lo_w} read 0)." if lo_w < 32 else "."),
                kind, lo_w, reset & 0xFFFF_FFFF)
    if bits > 32:
        hi = _value(f"{name}{sep}HI", f"{title} (bits 63:32)",
                    f"{desc} Bits {bits - 1}:32" + (f" (bits 63:{bits} read 0)." if bits < 64
                                                     else "."),
                    kind, bits - 32, reset >> 32)
    else:
        hi = _value(f"{name}{sep}HI", f"{title} (bits 63:32)", f"{desc} Bits 63:32 are not "
                    f"implemented (only {bits} bits are): reads 0, writes are ignored.",
                    "const", 32, 0)
    return [lo, hi]


def _bits(v):
    return max(1, int(v).bit_length())


def _layout(cfg):
    """``[(offset, [_R | _Array, ...]), ...]``: groups of consecutive registers."""
    bank_bits = max(1, (cfg.staging_banks - 1).bit_length())
    ident = [
        _value("ID", "Identification", "Magic number 0x484F544C (\"HOTL\" in ASCII): a "
               "Hotline accelerator answers at this base address.", "const", reset=ID_MAGIC),
        _R("VERSION", "Register map version", "Version of this register map (MAP_VERSION of "
           "hotline_hw.regmap): a moved or removed register bumps major, an added one minor.", [
               _F("minor", 0, 16, "const", "Minor version", "Added registers or fields.",
                  MAP_VERSION[1]),
               _F("major", 16, 16, "const", "Major version", "Incompatible changes.",
                  MAP_VERSION[0])]),
    ]

    def c(name, lsb, width, desc):
        return _F(name, lsb, width, "const", name, desc, getattr(cfg, name))

    config = [
        _R("CFG_LOOKUP", "Lookup stream configuration", "Generate-time parameters of the "
           "lookup stream and keys.", [
               c("lanes", 0, 8, "Keys per beat of the lookup stream."),
               c("table_bits", 8, 8, "Bits of the table id in a key."),
               c("row_bits", 16, 8, "Bits of the row index in a key."),
               c("sample_id_bits", 24, 8, "Bits of the sample id on the output streams.")]),
        _R("CFG_TABLES", "Tables", "Number of embedding tables in use.", [
            c("num_tables", 0, 17, "Embedding tables; a key with a larger table id is a "
                                   "bad key.")]),
        _R("CFG_SAMPLE", "Sample length", "Longest sample the fragmenter buffers whole.", [
            c("max_sample_lookups", 0, 17, "Lookups past this leave as OVERFLOW.")]),
        _R("CFG_COUNTERS", "Counter array sets", "Sets of the access-frequency counter "
           "array.", [c("counter_sets", 0, 25, "Sets of the counter array.")]),
        _R("CFG_COUNTER_FMT", "Counter array format", "Ways and counter width of the "
           "access-frequency counter array.", [
               c("counter_ways", 0, 8, "Tagged counters per set."),
               c("counter_bits", 8, 8, "Width of each saturating counter.")]),
        _R("CFG_CAM", "Popularity CAM", "Size and kind of the popularity CAM.", [
            c("cam_entries", 0, 25, "Popular rows the CAM holds (slots)."),
            _F("cam_kind", 31, 1, "const", "cam_kind", "0: full (fully associative), "
               "1: hash (set-associative).", int(cfg.cam_kind == "hash"), "cam_kind_e")]),
        _R("CFG_CAM_WAYS", "Popularity CAM ways", "Ways per set of the popularity CAM.", [
            c("cam_ways", 0, 11, "Ways per set (= cam_entries for a full CAM).")]),
        _R("CFG_STAGING", "Staging buffers", "Size and number of the staging banks.", [
            c("staging_rows", 0, 25, "Rows per staging bank."),
            c("staging_banks", 28, 4, "Staging banks.")]),
        _R("CFG_AXI", "AXI and rows", "Data width of m_axi and the largest row.", [
            c("axi_data_bits", 0, 10, "Data width of the m_axi master in bits."),
            c("max_row_bytes", 16, 13, "Largest ROW_BYTES the DMA supports.")]),
    ]

    cmd_fields = [
        _F("cmd", 0, 4, "cmd", "Command", "Writing a command (with a byte strobe on bits "
           "7:0) starts it; reads as 0. Commands other than NOP set IRQ_STATUS.cmd_done "
           "when finished; a command the current mode does not allow sets STATUS.cmd_error.",
           enum="cmd_e"),
        _F("clear", 4, 1, "arg", "Clear counters", "With LEARN: 1 clears the counter array "
           "first, 0 continues counting."),
        _F("bank", 8, bank_bits, "arg", "Bank", "With SCATTER: the staging bank to copy back."),
        _F("soft_reset", 31, 1, "pulse", "Soft reset", "Writing 1 resets the datapath (DMA, "
           "fragmenter, modes, STATUS errors); the registers keep their values. Reads as 0."),
    ]
    status_fields = [
        _F("mode", 0, 2, "status", "Mode", "The current mode.", None, "mode_e"),
        _F("busy", 2, 1, "status", "Busy", "A command or a mini-batch is in progress.", None),
        _F("cmd_error", 3, 1, "status", "Command error", "A command was rejected (not "
           "allowed in the current mode, or an unknown code).", None),
        _F("dma_error", 4, 1, "status", "DMA error", "The DMA got SLVERR/DECERR and stopped "
           "(DMA_ERROR_*); a soft reset recovers.", None),
        _F("param_error", 5, 1, "status", "Parameter error", "A command found a run-time "
           "register out of range (ROW_BYTES, LEARN_PERIOD, ...).", None),
        _F("bad_key", 6, 1, "status", "Bad key", "A lookup named a table >= num_tables "
           "since the last soft reset or CLEAR_STATS.", None),
        _F("overflow", 7, 1, "status", "Overflow", "A lookup left as OVERFLOW since the last "
           "soft reset or CLEAR_STATS.", None),
        _F("framing_error", 8, 1, "status", "Framing error", "The lookup stream broke the "
           "framing since the last soft reset or CLEAR_STATS.", None),
        _F("bank_pending", 16, cfg.staging_banks, "status", "Bank pending", "Bit b: staging "
           "bank b holds gathered rows waiting for SCATTER.", None),
        _F("gathers_done", 24, cfg.staging_banks, "status", "Gathers done", "Bit b: every "
           "gather of the mini-batch in staging bank b has completed.", None),
    ]
    control = [
        _R("CTRL", "Control", "Commands and soft reset. Every field is write-only.",
           cmd_fields),
        _R("STATUS", "Status", "Mode, activity and error flags, driven by the hardware.",
           status_fields),
        _R("IRQ_ENABLE", "Interrupt enable", "irq = |(IRQ_STATUS & IRQ_ENABLE).", [
            _F(n, i, 1, "sw", f"Enable {n}", f"Enable the {n} interrupt.")
            for i, (n, _) in enumerate(IRQ_EVENTS)]),
        _R("IRQ_STATUS", "Interrupt status", "Events latched from hardware pulses; write 1 "
           "to clear (a pulse in the same cycle wins).", [
               _F(n, i, 1, "irq", n, d) for i, (n, d) in enumerate(IRQ_EVENTS)]),
    ]
    runtime = [
        _value("ROW_STRIDE", "Row stride", "Bytes between consecutive rows of a host table"
               + (f" (addresses wrap modulo 2**{cfg.addr_bits}, so only bits "
                  f"{cfg.addr_bits - 1}:0 are implemented)." if cfg.addr_bits < 32 else "."),
               "config", min(32, cfg.addr_bits), cfg.row_bytes),
        _value("ROW_BYTES", "Row bytes", "Bytes moved per row (a multiple of the bus width, "
               f"<= {cfg.max_row_bytes}).", "config", _bits(cfg.max_row_bytes), cfg.row_bytes),
        *_lohi("POPULAR_BASE", "Popular base", "Byte address of slot 0 of the popular "
               "region in device memory.", "config", cfg.addr_bits),
        _value("LEARN_PERIOD", "Learn period", "Mini-batch n of a learning phase is sampled "
               "iff n % LEARN_PERIOD == 0 (0 acts as 1).", "config", 16, cfg.learn_period),
        _value("LEARN_THRESHOLD", "Learn threshold", "Smallest count a row needs to be "
               "installed.", "config", cfg.counter_bits, cfg.learn_threshold),
    ]
    key_lo = min(32, cfg.key_bits)
    cam = [
        _value("CAM_SLOT", "CAM slot", "Slot of the next CAM_CTRL operation.", "config",
               cfg.slot_bits),
        _value("CAM_KEY_LO", "CAM key (bits 31:0)", "Key of the next CAM write, bits 31:0.",
               "config", key_lo),
        _value("CAM_KEY_HI", "CAM key (bits 47:32)", "Key of the next CAM write, bits "
               "47:32 (bits above key_bits are ignored).", "config", 16),
        _R("CAM_CTRL", "CAM control", "Host access to the popularity CAM. Write-only.", [
            _F("op", 0, 2, "cmd", "Operation", "Writing WRITE or READ (with a byte strobe on "
               "bits 7:0) starts it on slot CAM_SLOT; CAM_STATUS.done rises when it "
               "finished.", enum="cam_op_e"),
            _F("used", 4, 1, "arg", "Used", "With WRITE: 1 makes the slot hold CAM_KEY, 0 "
               "empties it.")]),
        _R("CAM_STATUS", "CAM status", "Result of the latest CAM_CTRL operation.", [
            _F("done", 0, 1, "status", "Done", "The latest operation finished (cleared when "
               "a new one starts).", None),
            _F("rejected", 1, 1, "status", "Rejected", "The latest WRITE was rejected (the "
               "key belongs to another set of a hash CAM, or the slot is out of range).",
               None),
            _F("used", 2, 1, "status", "Used", "READ: the slot holds a key "
               "(CAM_READ_KEY_LO/HI).", None)]),
        _value("CAM_READ_KEY_LO", "CAM read key (bits 31:0)", "Key of the slot the latest "
               "READ read, bits 31:0.", "status", key_lo),
        _value("CAM_READ_KEY_HI", "CAM read key (bits 47:32)", "Key of the slot the latest "
               "READ read, bits 47:32.", "status", 16),
    ]
    dma = [
        *_lohi("DMA_ERROR_ADDR", "DMA error address", "Address of the first m_axi burst "
               "that got an error response.", "status", cfg.addr_bits),
        _value("DMA_ERROR_RESP", "DMA error response", "Its response: 2 SLVERR, 3 DECERR "
               "(0 no error).", "status", 2),
    ]
    stats = []
    for name, bits, desc in STATISTICS:
        w = cfg.stat_bits(bits)
        full = (f"{desc} Cumulative since reset or CLEAR_STATS; wraps"
                + (f" modulo 2**{w} (stats_bits)." if w < bits else "."))
        if bits == 64:
            stats += _lohi(f"STAT_{name.upper()}", f"Statistic {name}", full, "status", w)
        else:
            stats.append(_value(f"STAT_{name.upper()}", f"Statistic {name}", full, "status", w))
    descs = {n: d for n, _, d in STATISTICS}
    w = cfg.stat_bits(32)
    last = [_value(f"LAST_{n.upper()}", f"Last mini-batch {n}", f"{descs[n]} In the latest "
                   "completed mini-batch only" + (f"; modulo 2**{w} (stats_bits)." if w < 32
                                                  else "."), "status", w)
            for n in LAST_STATISTICS]

    def base_array(name, count, title, desc):
        return _Array(name, count, title, desc,
                      _lohi("", title, desc, "config", cfg.addr_bits, sep=""))

    arrays_s = [base_array("STAGING_BASE", cfg.staging_banks, "Staging base",
                           "Byte address of index 0 of staging bank [b] in device memory.")]
    arrays_t = [base_array("TABLE_BASE", cfg.num_tables, "Table base",
                           "Byte address of row 0 of host table [t].")]
    return [(0x000, ident), (0x010, config), (0x040, control), (0x060, runtime), (0x080, cam),
            (0x0A0, dma), (0x100, stats), (0x180, last), (0x200, arrays_s), (0x400, arrays_t)]


def _q(text):
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _render_field(f):
    props = [_KINDS[f.kind], f"name = {_q(f.title)};", f"desc = {_q(f.desc)};"]
    if f.enum:
        props.append(f"encode = {f.enum};")
    reset = "" if f.reset is None else f" = 0x{f.reset:x}"
    return (f"field {{ {' '.join(props)} }} {f.name}[{f.lsb + f.width - 1}:{f.lsb}]{reset};")


def _render_reg(r, indent):
    pad = " " * indent
    lines = [f"{pad}reg {{", f"{pad}    name = {_q(r.title)};", f"{pad}    desc = {_q(r.desc)};"]
    lines += [f"{pad}    {_render_field(f)}" for f in r.fields]
    lines.append(f"{pad}}}")
    return lines


def _render_enum(name, items):
    body = [f"        {k} = {v} {{ desc = {_q(d)}; }};" for k, (v, d) in items.items()]
    return "\n".join([f"    enum {name} {{", *body, "    };"])


def rdl_source(cfg):
    """The SystemRDL 2.0 text of the addrmap ``hotline`` for ``cfg`` (see the module doc)."""
    top_desc = ("Control and status registers of the Hotline recommendation-training "
                "accelerator (AXI4-Lite slave s_axil, 32-bit data, byte addresses). "
                f"Variant {cfg.name}: {cfg.summary()}.")
    out = [
        f"// Register map of the Hotline accelerator, variant {cfg.name!r}.",
        "// Generated by hotline_hw.regmap from the configuration: do not edit.",
        f"// {cfg.summary()}",
        "addrmap hotline {",
        f"    name = {_q('Hotline accelerator')};",
        f"    desc = {_q(top_desc)};",
        "    default regwidth = 32;",
        "    default accesswidth = 32;",
        _render_enum("cmd_e", COMMANDS),
        _render_enum("cam_op_e", CAM_OPS),
        _render_enum("mode_e", MODES),
        _render_enum("cam_kind_e", {"FULL": (0, "Fully associative."),
                                    "HASH": (1, "Set-associative in block RAM.")}),
    ]
    for base, items in _layout(cfg):
        offset = base
        for item in items:
            if isinstance(item, _Array):
                out.append("    regfile {")
                out.append(f"        name = {_q(item.title)};")
                out.append(f"        desc = {_q(item.desc)};")
                for i, r in enumerate(item.regs):
                    lines = _render_reg(r, 8)
                    lines[-1] += f" {r.name} @ 0x{4 * i:x};"
                    out += lines
                out.append(f"    }} {item.name}[{item.count}] @ 0x{offset:03x} += 0x8;")
                offset += 8 * item.count
            else:
                lines = _render_reg(item, 4)
                lines[-1] += f" {item.name} @ 0x{offset:03x};"
                out += lines
                offset += 4
    for name, _ in IRQ_EVENTS:
        out.append(f"    IRQ_STATUS.{name}->enable = IRQ_ENABLE.{name};")
    out.append("};")
    return "\n".join(out) + "\n"


# --- compilation -----------------------------------------------------------------------------

_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _compiler():
    from systemrdl import RDLCompiler
    from systemrdl.messages import MessagePrinter

    class Collect(MessagePrinter):
        def __init__(self):
            self.lines = []

        def emit_message(self, lines):
            self.lines += [_ANSI.sub("", ln) for ln in lines]

    printer = Collect()
    # extended_dpa_type_names=False: the `->enable` assignments of IRQ_STATUS would
    # otherwise give its C type a hashed name (`IRQ_STATUS_cmd_done_7a4c1233`).
    return RDLCompiler(message_printer=printer, extended_dpa_type_names=False), printer


def compile_rdl(text, filename="hotline.rdl"):
    """Compile and elaborate SystemRDL ``text``; return the ``RootNode``.

    Raises
    ------
    RegMapError
        With the compiler's messages when the text does not compile.
    """
    from systemrdl import RDLCompileError

    rdlc, printer = _compiler()
    with tempfile.TemporaryDirectory(prefix="hotline-rdl-") as d:
        path = os.path.join(d, filename)
        with open(path, "w") as f:
            f.write(text)
        try:
            rdlc.compile_file(path)
            root = rdlc.elaborate(top_def_name="hotline")
        except RDLCompileError as e:
            # keep the error lines ("<file>:<line>:<col>: error: ..."), not the source echo
            errors = [ln.strip().replace(path, filename) for ln in printer.lines
                      if re.search(r"\b(error|fatal):", ln)
                      and not ln.strip().startswith("fatal: Elaborate aborted")]
            detail = "; ".join(errors) or str(e)
            raise RegMapError(f"systemrdl-compiler failed: {detail}") from None
    return root


def compile_regmap(cfg):
    """The elaborated SystemRDL model (``systemrdl.node.RootNode``) of ``cfg``'s map."""
    return compile_rdl(rdl_source(cfg))


# --- the plain-Python description ------------------------------------------------------------

def _name(value):
    """A systemrdl enum (AccessType.rw, OnWriteType.woclr) or None -> its name."""
    return None if value is None else getattr(value, "name", str(value))


@dataclass(frozen=True)
class Field:
    """One field of a :class:`Register`.

    ``sw``/``hw``: SystemRDL access (``"r"``, ``"w"``, ``"rw"``, ``"na"``); ``onwrite``:
    ``"woclr"`` (write 1 to clear) or None; ``onread``: None (no read side effects here);
    ``swmod``: writing it gives hardware a one-cycle strobe; ``singlepulse``: writing 1 makes
    it 1 for one cycle; ``intr``: an interrupt bit set by a hardware pulse, ``enable`` the
    ``"REG.field"`` that enables it; ``reset``: None when hardware drives the value;
    ``enum``: ``{name: value}`` of an encoded field.
    """
    name: str
    lsb: int
    width: int
    sw: str
    hw: str
    reset: "int | None" = 0
    onwrite: "str | None" = None
    onread: "str | None" = None
    swmod: bool = False
    singlepulse: bool = False
    intr: bool = False
    enable: "str | None" = None
    enum: "dict | None" = None
    title: str = ""
    desc: str = ""

    @property
    def msb(self):
        return self.lsb + self.width - 1

    @property
    def mask(self):
        return ((1 << self.width) - 1) << self.lsb

    @property
    def sw_readable(self):
        return "r" in self.sw

    @property
    def sw_writable(self):
        return "w" in self.sw

    @property
    def plain(self):
        """Plain storage: read/write by software with no side effect on either."""
        return (self.sw == "rw" and self.onwrite is None and self.onread is None
                and not (self.swmod or self.singlepulse))

    def to_dict(self):
        return {k: getattr(self, k) for k in _FIELD_KEYS}


_FIELD_KEYS = ("name", "lsb", "width", "sw", "hw", "reset", "onwrite", "onread", "swmod",
               "singlepulse", "intr", "enable", "enum", "title", "desc")


@dataclass(frozen=True)
class Register:
    """A 32-bit register: ``name`` (SystemRDL path below the top, e.g. ``ROW_BYTES``,
    ``TABLE_BASE[3].LO``), byte ``offset``, ``access`` (``"RO"``, ``"RW"``, ``"WO"``,
    ``"W1C"``), ``reset`` (the value read after reset, hardware-driven fields as 0) and its
    :class:`Field`\\ s, LSB first."""
    name: str
    offset: int
    access: str
    reset: int
    fields: tuple
    title: str = ""
    desc: str = ""

    def field(self, name):
        for f in self.fields:
            if f.name == name:
                return f
        raise KeyError(_unknown(f"field of {self.name}", name, [f.name for f in self.fields]))

    @property
    def field_names(self):
        return [f.name for f in self.fields]

    @property
    def sw_read_mask(self):
        return sum(f.mask for f in self.fields if f.sw_readable)

    @property
    def sw_write_mask(self):
        return sum(f.mask for f in self.fields if f.sw_writable)

    @property
    def rmw_safe(self):
        """Every field is plain storage, so a read-modify-write of one field keeps the
        others."""
        return all(f.plain for f in self.fields)

    def to_dict(self):
        return {"name": self.name, "offset": self.offset, "access": self.access,
                "reset": self.reset, "title": self.title, "desc": self.desc,
                "fields": [f.to_dict() for f in self.fields]}


def _access(fields):
    if all(f.sw == "r" for f in fields):
        return "RO"
    if all(f.onwrite == "woclr" for f in fields):
        return "W1C"
    if all(f.sw == "w" for f in fields):
        return "WO"
    return "RW"


def _unknown(what, name, choices):
    near = difflib.get_close_matches(str(name), choices, n=5, cutoff=0.5)
    hint = f"; did you mean {', '.join(near)}?" if near else ""
    return f"unknown {what} {name!r}{hint}"


def port_name(reg, field):
    """The hardware port of field ``field`` of register ``reg`` (names or objects) in
    :class:`~hotline_hw.gateware.registers.RegisterBlock`:

    the register path in lower case with ``[i]`` -> ``_i`` and ``.`` -> ``_``, then
    ``_<field>``, except that a register whose only field is ``value`` gives just the
    register's part: ``CTRL.cmd`` -> ``ctrl_cmd``, ``ROW_BYTES.value`` -> ``row_bytes``,
    ``TABLE_BASE[3].LO.value`` -> ``table_base_3_lo``, ``STATUS.busy`` -> ``status_busy``.
    """
    rname = reg.name if isinstance(reg, Register) else str(reg)
    fname = field.name if isinstance(field, Field) else str(field)
    base = re.sub(r"\[(\d+)\]", r"_\1", rname).replace(".", "_").lower()
    if fname == "value" and not (isinstance(reg, Register) and len(reg.fields) > 1):
        return base
    return f"{base}_{fname}"


def hw_kind(field):
    """How hardware sees a field (the rule the register block is built by):

    ``"const"`` (``sw=r, hw=na``: a constant, no port), ``"storage"`` (``sw=rw, hw=na``:
    software-only, no port), ``"input"`` (``sw=r, hw=w``: an ``In`` port software reads),
    ``"event"`` (an ``intr`` bit, ``sw=rw, onwrite=woclr``: an ``In`` pulse sets it),
    ``"value"`` (``sw=rw|w, hw=r``: an ``Out`` port with the stored value; ``swmod`` adds a
    ``<port>_stb`` strobe), ``"pulse"`` (a ``singlepulse`` field: an ``Out`` one-cycle pulse).

    Raises
    ------
    RegMapError
        For a combination the register block does not implement.
    """
    f = field
    if f.onread is not None:
        raise RegMapError(f"field {f.name}: onread={f.onread} is not supported")
    if f.onwrite not in (None, "woclr"):
        raise RegMapError(f"field {f.name}: onwrite={f.onwrite} is not supported")
    if f.intr:
        if not (f.sw == "rw" and f.onwrite == "woclr"):
            raise RegMapError(f"interrupt field {f.name}: must be sw=rw, onwrite=woclr")
        return "event"
    if f.onwrite is not None:
        raise RegMapError(f"field {f.name}: onwrite={f.onwrite} only on interrupt fields")
    if f.hw == "na":
        return "const" if f.sw == "r" else "storage"
    if f.hw == "w" and f.sw == "r":
        return "input"
    if f.hw == "r" and f.sw_writable:
        return "pulse" if f.singlepulse else "value"
    raise RegMapError(f"field {f.name}: sw={f.sw} hw={f.hw} is not supported")


class RegMap:
    """The register map as plain Python: :class:`Register`\\ s by offset.

    Build it from a compiled model (:meth:`from_rdl`, :func:`regmap`) or read ``regmap.json``
    (:meth:`load`, :meth:`from_json`, :meth:`from_dict`).
    """

    def __init__(self, name, registers, *, variant=None, map_version=None):
        self.name = name
        self.variant = variant
        self.map_version = tuple(map_version) if map_version else None
        self.registers = tuple(sorted(registers, key=lambda r: r.offset))
        self._by_name = {r.name: r for r in self.registers}
        self._by_offset = {r.offset: r for r in self.registers}
        if len(self._by_name) != len(self.registers):
            raise RegMapError("register map: duplicate register names")
        if len(self._by_offset) != len(self.registers):
            raise RegMapError("register map: two registers at one offset")

    # --- construction ----------------------------------------------------------------------
    @classmethod
    def from_rdl(cls, root, *, variant=None):
        """Read the registers of an elaborated SystemRDL model (``RootNode`` or the top
        ``AddrmapNode``)."""
        from systemrdl.node import FieldNode, RegNode, RootNode

        top = root.top if isinstance(root, RootNode) else root
        prefix = top.get_path() + "."
        regs = []
        for node in top.descendants(unroll=True):
            if not isinstance(node, RegNode):
                continue
            if node.get_property("regwidth") != 32:
                raise RegMapError(f"{node.get_path()}: only 32-bit registers are supported")
            fields = []
            for f in node.fields():
                assert isinstance(f, FieldNode)
                enable = f.get_property("enable") if f.get_property("intr") else None
                enc = f.get_property("encode")
                fields.append(Field(
                    name=f.inst_name, lsb=f.lsb, width=f.width,
                    sw=_name(f.get_property("sw")), hw=_name(f.get_property("hw")),
                    reset=f.get_property("reset"),
                    onwrite=_name(f.get_property("onwrite")),
                    onread=_name(f.get_property("onread")),
                    swmod=bool(f.get_property("swmod")),
                    singlepulse=bool(f.get_property("singlepulse")),
                    intr=bool(f.get_property("intr")),
                    enable=None if enable is None else enable.get_path()[len(prefix):],
                    enum=None if enc is None else {m.name: m.value for m in enc},
                    title=f.get_property("name") or "", desc=f.get_property("desc") or ""))
            regs.append(Register(
                name=node.get_path()[len(prefix):], offset=node.absolute_address,
                access=_access(fields),
                reset=sum((f.reset or 0) << f.lsb for f in fields if f.sw_readable),
                fields=tuple(fields), title=node.get_property("name") or "",
                desc=node.get_property("desc") or ""))
        return cls(top.inst_name, regs, variant=variant, map_version=MAP_VERSION)

    @classmethod
    def from_dict(cls, doc):
        if not isinstance(doc, dict) or doc.get("format") != REGMAP_FORMAT:
            raise RegMapError(f"regmap.json: 'format' must be {REGMAP_FORMAT!r}")
        if doc.get("version") != REGMAP_FORMAT_VERSION:
            raise RegMapError(f"regmap.json: version {doc.get('version')!r} is not supported "
                              f"(this tool reads {REGMAP_FORMAT_VERSION})")
        try:
            regs = [Register(name=r["name"], offset=r["offset"], access=r["access"],
                             reset=r["reset"], title=r.get("title", ""),
                             desc=r.get("desc", ""),
                             fields=tuple(Field(**{k: f[k] for k in _FIELD_KEYS if k in f})
                                          for f in r["fields"]))
                    for r in doc["registers"]]
        except (KeyError, TypeError) as e:
            raise RegMapError(f"regmap.json: malformed register entry ({e})") from None
        return cls(doc.get("name", "hotline"), regs, variant=doc.get("variant"),
                   map_version=doc.get("map_version"))

    @classmethod
    def from_json(cls, text):
        try:
            doc = json.loads(text)
        except json.JSONDecodeError as e:
            raise RegMapError(f"regmap.json: not valid JSON ({e.msg} at line {e.lineno})") from None
        return cls.from_dict(doc)

    @classmethod
    def load(cls, path):
        try:
            text = Path(path).read_text()
        except OSError as e:
            raise RegMapError(f"{path}: cannot read ({e.strerror})") from None
        return cls.from_json(text)

    # --- serialisation ---------------------------------------------------------------------
    def to_dict(self):
        return {"format": REGMAP_FORMAT, "version": REGMAP_FORMAT_VERSION, "name": self.name,
                "variant": self.variant,
                "map_version": list(self.map_version) if self.map_version else None,
                "data_bits": 32, "size": self.size,
                "registers": [r.to_dict() for r in self.registers]}

    def to_json(self):
        """The text of ``regmap.json``."""
        return json.dumps(self.to_dict(), indent=1) + "\n"

    def save(self, path):
        Path(path).write_text(self.to_json())

    def __eq__(self, other):
        return isinstance(other, RegMap) and self.to_dict() == other.to_dict()

    __hash__ = None

    # --- queries ---------------------------------------------------------------------------
    @property
    def size(self):
        """Bytes spanned by the map (the end of its last register)."""
        return max(r.offset for r in self.registers) + 4

    @property
    def addr_bits(self):
        """Byte-address bits the AXI4-Lite slave decodes."""
        return max(2, (self.size - 1).bit_length())

    @property
    def names(self):
        return [r.name for r in self.registers]

    def __iter__(self):
        return iter(self.registers)

    def __len__(self):
        return len(self.registers)

    def __contains__(self, name):
        return name in self._by_name

    def reg(self, name):
        """The register named ``name``; KeyError listing near matches."""
        try:
            return self._by_name[name]
        except KeyError:
            raise KeyError(_unknown("register", name, self.names)) from None

    def at(self, offset):
        """The register at byte ``offset``, or None."""
        return self._by_offset.get(offset)

    def field(self, reg, field):
        return self.reg(reg).field(field)

    def wide(self, name):
        """The (LO, HI) registers of the 64-bit quantity ``name``: ``POPULAR_BASE`` ->
        ``POPULAR_BASE_LO``/``_HI``, ``TABLE_BASE[3]`` -> ``TABLE_BASE[3].LO``/``.HI``."""
        for lo, hi in ((f"{name}_LO", f"{name}_HI"), (f"{name}.LO", f"{name}.HI")):
            if lo in self._by_name and hi in self._by_name:
                return self._by_name[lo], self._by_name[hi]
        wides = sorted({re.sub(r"[._](LO|HI)$", "", n) for n in self.names
                        if re.search(r"[._](LO|HI)$", n)})
        raise KeyError(_unknown("64-bit register pair", name, wides))

    def array(self, name):
        """The element names of register array ``name`` (``"TABLE_BASE"`` ->
        ``["TABLE_BASE[0]", ...]``), in index order."""
        pat = re.compile(re.escape(name) + r"\[(\d+)\]\.")
        idx = sorted({int(m.group(1)) for n in self.names if (m := pat.match(n))})
        if not idx:
            raise KeyError(_unknown("register array", name, sorted(
                {n.split("[")[0] for n in self.names if "[" in n})))
        return [f"{name}[{i}]" for i in idx]


@lru_cache(maxsize=32)
def regmap(cfg):
    """The :class:`RegMap` of ``cfg`` (compiled once per configuration)."""
    return RegMap.from_rdl(compile_regmap(cfg), variant=cfg.name)


# --- generated files -------------------------------------------------------------------------

def write_outputs(cfg, outdir):
    """Write the register map files of ``cfg`` into ``outdir`` (created if needed):
    :data:`OUTPUT_FILES`, i.e. ``hotline.rdl`` (the SystemRDL source), ``regmap.json``
    (:meth:`RegMap.to_json`), ``hotline_regs.h`` (C header, PeakRDL-cheader: a packed struct
    ``hotline_t`` whose members sit at the register offsets, plus ``_bm``/``_bp``/``_bw``/
    ``_reset`` macros per field), ``hotline_regs.md`` (documentation, PeakRDL-markdown) and
    ``hotline_regs.xml`` (IP-XACT IEEE 1685-2014, PeakRDL-ipxact). Return their paths.

    Raises
    ------
    RegMapError
        When the map does not compile or an exporter fails.
    """
    from peakrdl_cheader.exporter import CHeaderExporter
    from peakrdl_ipxact import IPXACTExporter
    from peakrdl_markdown import MarkdownExporter

    outdir = Path(outdir)
    outdir.mkdir(parents=True, exist_ok=True)
    text = rdl_source(cfg)
    root = compile_rdl(text)
    rm = RegMap.from_rdl(root, variant=cfg.name)
    paths = [outdir / n for n in OUTPUT_FILES]
    rdl, js, header, md, xml = paths
    rdl.write_text(text)
    rm.save(js)
    try:
        CHeaderExporter().export(root.top, str(header), reuse_typedefs=True)
        MarkdownExporter().export(root.top, str(md), input_files=[rdl.name])
        IPXACTExporter(vendor="hotline-hw", library="hotline",
                       version=f"{MAP_VERSION[0]}.{MAP_VERSION[1]}").export(
            root.top, str(xml), component_name="hotline")
    except Exception as e:      # an exporter's own failure: name it, keep the cause
        raise RegMapError(f"register map export failed: {type(e).__name__}: {e}") from e
    return paths
