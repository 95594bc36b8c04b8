"""The one configuration object of the accelerator: :class:`HotlineConfig`.

A :class:`HotlineConfig` fixes everything that is decided when the Verilog is generated:
the lookup stream format, the sizes of the counter array, the popularity CAM and the staging
buffers, and the AXI widths. It drives the gateware, the golden model, the command line (each
field is a ``--flag``) and the test parametrisation, and is written as ``config.json`` beside
the Verilog. Values that software may change at run time (table base addresses, the learning
period and threshold, ...) are registers; the configuration only gives their reset values.

Every rule is checked in one place, :meth:`HotlineConfig.validate`, called on construction; a
bad value raises :class:`ConfigError`, whose message names the field, the value and the rule.
"""

import dataclasses
import json
from dataclasses import dataclass, field, fields

__all__ = [
    "ConfigError", "HotlineConfig", "PRESETS", "DEFAULT_PRESET", "preset", "preset_names",
    "CONFIG_FORMAT", "CONFIG_VERSION",
]

CONFIG_FORMAT = "hotline-hw-config"
CONFIG_VERSION = 1


class ConfigError(ValueError):
    """A configuration value breaks a rule. ``field`` names the offending field."""

    def __init__(self, field_name, message):
        super().__init__(message)
        self.field = field_name


def _is_pow2(v):
    return isinstance(v, int) and v > 0 and (v & (v - 1)) == 0


def _log2(v):
    return v.bit_length() - 1


def _doc(text):
    return field(metadata={"doc": text})


@dataclass(frozen=True)
class HotlineConfig:
    """Generate-time parameters of one Hotline accelerator.

    The defaults are those of the ``ulx3s`` preset. Use :func:`preset` for a named preset and
    :func:`dataclasses.replace` (or :meth:`replace`) to change fields; both re-validate.

    Raises
    ------
    ConfigError
        On any value that breaks a rule; the message names the field, the value and the rule.
    """

    name: str = field(default="ulx3s", metadata={"doc":
        "Name of the variant; used for build directories and reports."})

    # --- lookup stream ------------------------------------------------------------------
    lanes: int = field(default=4, metadata={"doc":
        "Keys per beat of the lookup stream and lookups per cycle of the CAM (power of two, 1..16)."})
    table_bits: int = field(default=5, metadata={"doc":
        "Bits of the table id in a key: key = (table << row_bits) | row (1..16)."})
    row_bits: int = field(default=24, metadata={"doc":
        "Bits of the row index in a key (1..40)."})
    num_tables: int = field(default=26, metadata={"doc":
        "Embedding tables in use; a key whose table id is >= num_tables is a bad key "
        "(1..2**table_bits)."})
    max_sample_lookups: int = field(default=32, metadata={"doc":
        "Longest sample the fragmenter buffers whole; lookups past it leave as OVERFLOW and "
        "the sample is flagged (>= lanes)."})
    sample_id_bits: int = field(default=12, metadata={"doc":
        "Bits of the sample id on the output streams; ids count from 0 in each mini-batch and "
        "wrap past 2**sample_id_bits - 1, which is flagged (1..24)."})

    # --- access-frequency counter array -------------------------------------------------
    counter_sets: int = field(default=4096, metadata={"doc":
        "Sets of the counter array (power of two)."})
    counter_ways: int = field(default=4, metadata={"doc":
        "Tagged counters per set (1..16)."})
    counter_bits: int = field(default=12, metadata={"doc":
        "Width of each saturating counter (2..20; the install engine sorts by count with a "
        "2**counter_bits-entry histogram)."})
    counter_banks: int = field(default=4, metadata={"doc":
        "Independent banks of the counter array (power of two, <= counter_sets); the array "
        "accepts one lookup per bank per cycle."})
    aging_period: int = field(default=0, metadata={"doc":
        "Halve every count after each aging_period-th sampled mini-batch; 0 turns aging off "
        "(0..2**16)."})

    # --- popularity CAM ----------------------------------------------------------------
    cam_kind: str = field(default="hash", metadata={"doc":
        "'full': fully associative (registers, tens to a few hundred entries); 'hash': "
        "set-associative in block RAM, slot = set * cam_ways + way."})
    cam_entries: int = field(default=4096, metadata={"doc":
        "Popular rows the CAM holds (power of two); the size of the popular region in rows."})
    cam_ways: int = field(default=8, metadata={"doc":
        "Ways per set of a 'hash' CAM (power of two, <= cam_entries); a 'full' CAM must have "
        "cam_ways == cam_entries."})

    # --- staging buffers ---------------------------------------------------------------
    staging_rows: int = field(default=4096, metadata={"doc":
        "Rows per staging bank: unique non-popular rows one mini-batch can gather (power of two)."})
    staging_banks: int = field(default=2, metadata={"doc":
        "Staging banks; mini-batch n uses bank n % staging_banks (power of two, 2..8)."})
    dedup_sets: int = field(default=2048, metadata={"doc":
        "Sets of the table that de-duplicates misses within a mini-batch (power of two)."})
    dedup_ways: int = field(default=4, metadata={"doc":
        "Ways per de-dup set; a miss whose de-dup set is full leaves as OVERFLOW "
        "(1..16; dedup_sets * dedup_ways >= staging_rows)."})
    dedup_banks: int = field(default=0, metadata={"doc":
        "Banks of the de-dup table, each looking up one miss per cycle (power of two, at most "
        "dedup_sets / 2); 0: lanes banks (at least 2, at most dedup_sets / 2)."})

    # --- AXI and rows --------------------------------------------------------------------
    axi_data_bits: int = field(default=128, metadata={"doc":
        "Data width of the m_axi master (64, 128, 256 or 512)."})
    axi_id_bits: int = field(default=4, metadata={"doc":
        "ID width of the m_axi master (1..8)."})
    max_outstanding_reads: int = field(default=16, metadata={"doc":
        "Read bursts the DMA keeps in flight (1..256, <= 2**axi_id_bits * 16)."})
    row_bytes: int = field(default=64, metadata={"doc":
        "Reset value of ROW_BYTES: bytes per embedding row (a multiple of the bus width in "
        "bytes, <= max_row_bytes)."})
    max_row_bytes: int = field(default=256, metadata={"doc":
        "Largest ROW_BYTES the DMA supports (a multiple of the bus width, <= 4096)."})
    addr_bits: int = field(default=64, metadata={"doc":
        "Bits of host address the accelerator computes and stores (8..64). The m_axi "
        "address ports stay 64 bits wide; bits >= addr_bits are driven 0, the base-address "
        "registers implement addr_bits bits (the rest read 0, writes to them are ignored) and "
        "every address wraps modulo 2**addr_bits. Size it to the memory behind m_axi: a "
        "small board RAM needs few bits, and each bit less trims the DMA's adders and "
        "registers."})

    # --- statistics ----------------------------------------------------------------------
    stats_bits: int = field(default=32, metadata={"doc":
        "Width of the 32-bit statistics counters (STAT_*, LAST_*; 4..32); the 64-bit ones "
        "(bytes read/written, busy cycles) are 2*stats_bits wide. Every counter wraps modulo "
        "2**width; the register's bits above it read 0. Narrow counters save logic on small "
        "FPGAs."})

    # --- target technology -------------------------------------------------------------
    queue_ram: str = field(default="lut", metadata={"doc":
        "Memory of the fragmenter's beat queue, the one queue whose next entry is read "
        "asynchronously: 'lut' (LUT RAM: ECP5, most FPGAs, ASIC register files) or 'block' "
        "(for FPGAs without LUT RAM, such as the iCE40: only the bits read ahead stay "
        "asynchronous, the rest sits in a synchronous-read RAM that maps to block RAM "
        "instead of flip-flops). Same behaviour, cycle for cycle."})

    # --- reset values of run-time registers --------------------------------------------
    learn_period: int = field(default=1, metadata={"doc":
        "Reset value of LEARN_PERIOD: mini-batch n of a learning phase is sampled iff "
        "n % learn_period == 0 (1..65535)."})
    learn_threshold: int = field(default=2, metadata={"doc":
        "Reset value of LEARN_THRESHOLD: the smallest count a row needs to be installed "
        "(1..2**counter_bits - 1)."})

    def __post_init__(self):
        self.validate()

    # --- derived values ------------------------------------------------------------------
    @property
    def key_bits(self):
        """Bits of a key: ``table_bits + row_bits``."""
        return self.table_bits + self.row_bits

    @property
    def key_bytes(self):
        """Bytes a key takes in ``tdata`` of the lookup stream."""
        return (self.key_bits + 7) // 8

    @property
    def counter_max(self):
        """Value at which a counter saturates."""
        return (1 << self.counter_bits) - 1

    @property
    def counter_set_bits(self):
        return _log2(self.counter_sets)

    @property
    def cam_sets(self):
        """Sets of the CAM (1 for a ``full`` CAM)."""
        return self.cam_entries // self.cam_ways

    @property
    def cam_set_bits(self):
        return _log2(self.cam_sets)

    @property
    def slot_bits(self):
        """Bits of a CAM slot number."""
        return max(1, _log2(self.cam_entries))

    @property
    def staging_index_bits(self):
        return max(1, _log2(self.staging_rows))

    @property
    def dedup_set_bits(self):
        return _log2(self.dedup_sets)

    @property
    def bus_bytes(self):
        return self.axi_data_bits // 8

    @property
    def addr_mask(self):
        """``2**addr_bits - 1``: the host addresses the accelerator computes wrap at it."""
        return (1 << self.addr_bits) - 1

    def stat_bits(self, nominal):
        """Implemented width of a statistics counter of ``nominal`` (32 or 64) bits."""
        return self.stats_bits * (nominal // 32)

    def wrap_stat(self, nominal, value):
        """``value`` of a statistics counter of ``nominal`` bits as the hardware holds it
        (modulo ``2**stat_bits(nominal)``)."""
        return int(value) & ((1 << self.stat_bits(nominal)) - 1)

    # --- validation ----------------------------------------------------------------------
    def validate(self):
        """Check every rule; raise :class:`ConfigError` naming the first broken one."""

        def fail(name, rule):
            raise ConfigError(name, f"{name}={getattr(self, name)!r}: {rule}")

        def integer(name, lo, hi=None, pow2=False):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool):
                fail(name, "must be an integer")
            if v < lo or (hi is not None and v > hi):
                fail(name, f"must be in {lo}..{hi}" if hi is not None else f"must be >= {lo}")
            if pow2 and not _is_pow2(v):
                fail(name, "must be a power of two")

        if not isinstance(self.name, str) or not self.name.replace("-", "").replace("_", "").isalnum():
            fail("name", "must be a non-empty string of letters, digits, '-' and '_'")
        integer("lanes", 1, 16, pow2=True)
        integer("table_bits", 1, 16)
        integer("row_bits", 1, 40)
        if self.key_bits > 48:
            fail("row_bits", f"table_bits + row_bits must be <= 48 (is {self.key_bits})")
        integer("num_tables", 1, 1 << self.table_bits)
        integer("max_sample_lookups", self.lanes, 1 << 16)
        integer("sample_id_bits", 1, 24)

        integer("counter_sets", 1, 1 << 24, pow2=True)
        integer("counter_ways", 1, 16)
        integer("counter_bits", 2, 20)
        integer("counter_banks", 1, self.counter_sets, pow2=True)
        integer("aging_period", 0, 1 << 16)

        if self.cam_kind not in ("full", "hash"):
            fail("cam_kind", "must be 'full' or 'hash'")
        integer("cam_entries", 1, 1 << 24, pow2=True)
        if self.cam_kind == "full":
            integer("cam_entries", 1, 1024, pow2=True)
            if self.cam_ways != self.cam_entries:
                fail("cam_ways", f"must equal cam_entries ({self.cam_entries}) for a 'full' CAM")
        else:
            integer("cam_ways", 1, min(16, self.cam_entries), pow2=True)
            if self.cam_entries // self.cam_ways < 2:
                fail("cam_ways", "a 'hash' CAM needs at least 2 sets (use cam_kind='full')")

        integer("staging_rows", 1, 1 << 24, pow2=True)
        integer("staging_banks", 2, 8, pow2=True)
        integer("dedup_sets", 1, 1 << 24, pow2=True)
        integer("dedup_ways", 1, 16)
        if self.dedup_sets * self.dedup_ways < self.staging_rows:
            fail("dedup_ways", f"dedup_sets * dedup_ways must be >= staging_rows ({self.staging_rows})")
        integer("dedup_banks", 0, max(1, self.dedup_sets // 2))
        if self.dedup_banks and not _is_pow2(self.dedup_banks):
            fail("dedup_banks", "must be 0 (automatic) or a power of two")

        if self.axi_data_bits not in (64, 128, 256, 512):
            fail("axi_data_bits", "must be 64, 128, 256 or 512")
        integer("axi_id_bits", 1, 8)
        integer("max_outstanding_reads", 1, 256)
        if self.max_outstanding_reads > 16 << self.axi_id_bits:
            fail("max_outstanding_reads", f"must be <= 16 * 2**axi_id_bits ({16 << self.axi_id_bits})")
        integer("max_row_bytes", self.bus_bytes, 4096)
        if self.max_row_bytes % self.bus_bytes:
            fail("max_row_bytes", f"must be a multiple of the bus width in bytes ({self.bus_bytes})")
        integer("row_bytes", self.bus_bytes, self.max_row_bytes)
        if self.row_bytes % self.bus_bytes:
            fail("row_bytes", f"must be a multiple of the bus width in bytes ({self.bus_bytes})")

        integer("addr_bits", 8, 64)
        if (1 << self.addr_bits) < 2 * self.max_row_bytes:
            fail("addr_bits", f"2**addr_bits must hold two rows of max_row_bytes "
                              f"({2 * self.max_row_bytes} bytes)")
        integer("stats_bits", 4, 32)
        if self.queue_ram not in ("lut", "block"):
            fail("queue_ram", "must be 'lut' or 'block'")

        integer("learn_period", 1, (1 << 16) - 1)
        integer("learn_threshold", 1, self.counter_max)

    # --- construction and serialisation --------------------------------------------------
    def replace(self, **changes):
        """A copy with ``changes`` applied (validated)."""
        for k in changes:
            if k not in _FIELD_NAMES:
                raise ConfigError(k, f"{k}: unknown configuration field")
        return dataclasses.replace(self, **changes)

    def to_dict(self):
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def from_dict(cls, d):
        """Build from a mapping of field names; unknown names are an error, missing ones
        take the defaults."""
        if not isinstance(d, dict):
            raise ConfigError("config", "config: must be a JSON object of field names")
        for k in d:
            if k not in _FIELD_NAMES:
                raise ConfigError(k, f"{k}: unknown configuration field")
        return cls(**d)

    def to_json(self):
        """The text of ``config.json``."""
        doc = {"format": CONFIG_FORMAT, "version": CONFIG_VERSION, "config": self.to_dict()}
        return json.dumps(doc, indent=2) + "\n"

    @classmethod
    def from_json(cls, text):
        try:
            doc = json.loads(text)
        except json.JSONDecodeError as e:
            raise ConfigError("config", f"config.json: not valid JSON ({e.msg} at line {e.lineno})") from None
        if not isinstance(doc, dict) or doc.get("format") != CONFIG_FORMAT:
            raise ConfigError("format", f"config.json: 'format' must be {CONFIG_FORMAT!r}")
        if doc.get("version") != CONFIG_VERSION:
            raise ConfigError("version", f"config.json: version {doc.get('version')!r} is not "
                                         f"supported (this tool reads {CONFIG_VERSION})")
        return cls.from_dict(doc.get("config"))

    def save(self, path):
        with open(path, "w") as f:
            f.write(self.to_json())

    @classmethod
    def load(cls, path):
        try:
            with open(path) as f:
                text = f.read()
        except OSError as e:
            raise ConfigError("config", f"{path}: cannot read ({e.strerror})") from None
        return cls.from_json(text)

    @classmethod
    def field_docs(cls):
        """``{field name: (type, default, doc)}`` in declaration order."""
        return {f.name: (f.type, f.default, f.metadata.get("doc", "")) for f in fields(cls)}

    @classmethod
    def stored_fields(cls, doc):
        """The fields of a stored configuration (a ``config.json`` document or its
        ``config`` mapping), each field it lacks at its default as :meth:`from_dict` fills
        it (a file written before the field existed), ``name`` left out: what identifies a
        configuration when stored results are matched to it."""
        out = {f.name: f.default for f in fields(cls)}
        out.update(doc.get("config", doc))
        out.pop("name", None)
        return out

    @classmethod
    def parse_changes(cls, items):
        """``{field: value}`` from ``FIELD=VALUE`` texts (the benches' ``--set``), each value
        converted to its field's type; raises :class:`ConfigError` naming the field."""
        docs = cls.field_docs()
        out = {}
        for item in items:
            name, sep, text = item.partition("=")
            name = name.strip().replace("-", "_")
            if not sep:
                raise ConfigError(name, f"{item!r}: expected FIELD=VALUE")
            if name not in docs:
                raise ConfigError(name, f"{name}: unknown configuration field")
            if docs[name][0] in (int, "int"):
                try:
                    out[name] = int(text, 0)
                except ValueError:
                    raise ConfigError(name, f"{name}: {text!r} is not an integer") from None
            else:
                out[name] = text
        return out

    def summary(self):
        """One line with the key figures."""
        return (f"{self.lanes} lanes, {self.num_tables} tables x 2^{self.row_bits} rows, "
                f"counters {self.counter_sets}x{self.counter_ways}x{self.counter_bits}b, "
                f"{self.cam_kind} CAM {self.cam_entries} entries"
                + (f" ({self.cam_ways}-way)" if self.cam_kind == "hash" else "")
                + f", staging {self.staging_banks}x{self.staging_rows} rows, "
                f"AXI {self.axi_data_bits}b, rows {self.row_bytes} B")


_FIELD_NAMES = frozenset(f.name for f in fields(HotlineConfig))

_BASE = HotlineConfig()

#: Named presets. Each is a copy of the base (the ``ulx3s`` preset) with some fields changed.
PRESETS = {
    # Small everything, for fast unit tests: 3 tables in a 2-bit table id, so table 3 is a
    # bad key; a fully associative CAM of 16 rows.
    "tiny": _BASE.replace(
        name="tiny", lanes=2, table_bits=2, row_bits=10, num_tables=3,
        max_sample_lookups=8, sample_id_bits=8,
        counter_sets=16, counter_ways=4, counter_bits=8, counter_banks=2,
        cam_kind="full", cam_entries=16, cam_ways=16,
        staging_rows=16, dedup_sets=8, dedup_ways=4,
        axi_data_bits=64, axi_id_bits=2, max_outstanding_reads=4,
        row_bytes=16, max_row_bytes=64),
    # Fits an ECP5-85F (ULX3S): Criteo Kaggle keys, 4 lanes, a 4096-row 8-way hash CAM,
    # 16K counters, 4K staging rows per bank (mini-batches of a few hundred Kaggle samples),
    # a 2048 x 4 de-dup table and 256-byte rows at most: about 180 of the 208 DP16KD blocks
    # (docs/implementation.md); 8K staging rows and an 8-way de-dup table need ~265.
    "ulx3s": _BASE,
    # Criteo Kaggle (26 tables, 24-bit rows, dim 16 -> 64-byte rows), FAE batch 1024.
    "kaggle": _BASE.replace(
        name="kaggle", lanes=4, sample_id_bits=16,
        counter_sets=16384, counter_ways=8, counter_bits=16, counter_banks=4,
        cam_kind="hash", cam_entries=32768, cam_ways=8,
        staging_rows=16384, dedup_sets=4096, dedup_ways=8,
        axi_data_bits=256, axi_id_bits=4, max_outstanding_reads=32, row_bytes=64,
        max_row_bytes=1024),
    # Criteo 1TB / MLPerf (26-bit rows, dim 128 -> 512-byte rows), multi-hot able (DLRMv2:
    # 214 lookups per sample), 8 lanes. ASIC scale.
    "terabyte": _BASE.replace(
        name="terabyte", lanes=8, row_bits=26, max_sample_lookups=256, sample_id_bits=16,
        counter_sets=65536, counter_ways=8, counter_bits=16, counter_banks=8,
        cam_kind="hash", cam_entries=262144, cam_ways=8,
        staging_rows=65536, dedup_sets=16384, dedup_ways=8,
        axi_data_bits=512, axi_id_bits=6, max_outstanding_reads=64,
        row_bytes=512, max_row_bytes=1024),
}

DEFAULT_PRESET = "ulx3s"


def preset_names():
    return list(PRESETS)


def preset(name, /, **changes):
    """The named preset, with ``changes`` applied.

    Raises
    ------
    ConfigError
        If the preset is unknown (field ``preset``) or a change breaks a rule.
    """
    try:
        cfg = PRESETS[name]
    except KeyError:
        raise ConfigError("preset", f"preset={name!r}: unknown preset (choose from "
                                    f"{', '.join(PRESETS)})") from None
    return cfg.replace(**changes) if changes else cfg
