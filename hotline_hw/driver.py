"""Python driver of the accelerator's registers, over any 32-bit read/write pair.

::

    from hotline_hw.driver import HotlineDriver
    drv = HotlineDriver(read32, write32, "regmap.json")     # or a dict, a RegMap, a config
    drv.check_id()
    drv.configure(params)                                   # a golden.params.RuntimeParams
    drv.learn(clear=True); ...; drv.stop(); drv.install(); drv.wait_idle()
    drv.train()
    print(drv.stats()["hits"])

``read32(addr) -> int`` and ``write32(addr, value)`` take byte addresses relative to the
register block (add ``base=`` when the block sits elsewhere). On hardware they are loads and
stores on an mmap of the PCIe BAR (see ``docs/registers.md``); in simulation cocotb's
``AxiLiteMaster``, whose calls are coroutines: use :class:`AsyncHotlineDriver` there, with
the same methods, each returning an awaitable (``await drv.train()``).

Every register is named from ``regmap.json`` (:class:`hotline_hw.regmap.RegMap`): this module
holds no address. Names are those of the map (``"ROW_BYTES"``, ``"TABLE_BASE[3].LO"``); a
wrong name raises ``KeyError`` listing near matches.

How one code base serves both: each operation is written once as a generator that yields bus
operations (``("r", addr)``, ``("w", addr, value)``, ``("sleep",)``) and receives the read
data; :class:`HotlineDriver` runs it with plain calls, :class:`AsyncHotlineDriver` with
``await``.
"""

import inspect
import os
import time

from .regmap import RegMap, regmap as _compile_regmap

__all__ = ["HotlineDriver", "AsyncHotlineDriver", "HotlineError", "DriverTimeout",
           "ERROR_FIELDS"]

#: STATUS fields that :meth:`HotlineDriver.check_errors` reports (``overflow`` is not one:
#: overflowing lookups are served by the host, nothing is lost).
ERROR_FIELDS = ("cmd_error", "dma_error", "param_error", "bad_key", "framing_error")

_RESP = {0: "OKAY", 1: "EXOKAY", 2: "SLVERR", 3: "DECERR"}


class HotlineError(RuntimeError):
    """STATUS reports errors. ``bits``: the error fields set; ``status``: every STATUS field;
    ``dma_addr``/``dma_resp``: DMA_ERROR_ADDR and DMA_ERROR_RESP (when ``dma_error``)."""

    def __init__(self, bits, status, dma_addr=None, dma_resp=None):
        self.bits, self.status, self.dma_addr, self.dma_resp = bits, status, dma_addr, dma_resp
        msg = "Hotline accelerator error: " + ", ".join(bits)
        if dma_addr is not None:
            msg += (f" (DMA {_RESP.get(dma_resp, dma_resp)} at address 0x{dma_addr:016x}; "
                    "soft_reset() recovers)")
        super().__init__(msg)


class DriverTimeout(TimeoutError):
    """A wait for the hardware ran out of time; the message shows the last STATUS."""


def _load_map(src):
    if isinstance(src, RegMap):
        return src
    if isinstance(src, dict):
        return RegMap.from_dict(src)
    if isinstance(src, (str, os.PathLike)):
        return RegMap.load(src)
    if hasattr(src, "key_bits"):                    # a HotlineConfig
        return _compile_regmap(src)
    raise TypeError(f"regmap: a RegMap, a regmap.json path or dict, or a HotlineConfig, "
                    f"not {type(src).__name__}")


class _DriverBase:
    """Everything but the bus: the generators (``_g_*``) and the public methods, which
    return ``self._run(generator)`` (a value, or an awaitable in the async driver)."""

    def __init__(self, read32, write32, regmap, *, base=0, poll_delay=None):
        self._read32, self._write32 = read32, write32
        self.map = _load_map(regmap)
        self.base = base
        self._poll_delay = poll_delay

    # --- pure helpers (no bus access) -------------------------------------------------------
    def addr(self, name):
        """Byte address of register ``name`` (``base`` + offset)."""
        return self.base + self.map.reg(name).offset

    def encode(self, reg, field, value):
        """Field value from an int or an enum name (``"LEARN"``), range-checked."""
        f = self.map.field(reg, field)
        if isinstance(value, str):
            if not f.enum or value not in f.enum:
                raise ValueError(f"{reg}.{field}: {value!r} is not one of "
                                 f"{sorted(f.enum) if f.enum else 'its values (no enum)'}")
            value = f.enum[value]
        value = int(value)
        if not 0 <= value < (1 << f.width):
            raise ValueError(f"{reg}.{field}: {value} does not fit in {f.width} bits")
        return value

    def decode(self, reg, value):
        """``{field: value}`` of a raw register value (software-readable fields)."""
        r = self.map.reg(reg)
        return {f.name: (value >> f.lsb) & ((1 << f.width) - 1) for f in r.fields
                if f.sw_readable}

    def _array_names(self, name):
        return self.map.array(name)

    # --- generators ----------------------------------------------------------------------
    def _g_read(self, name):
        return (yield ("r", self.addr(name)))

    def _g_write(self, name, value):
        r = self.map.reg(name)
        if r.access == "RO":
            raise ValueError(f"{name} is read-only")
        value = int(value)
        if not 0 <= value <= 0xFFFF_FFFF:
            raise ValueError(f"{name}: {value} is not a 32-bit value")
        yield ("w", self.base + r.offset, value)

    def _g_write_fields(self, name, fields):
        r = self.map.reg(name)
        for fname in fields:
            if not r.field(fname).sw_writable:
                raise ValueError(f"{name}.{fname} is read-only")
        others = [f for f in r.fields if f.sw_writable and f.name not in fields]
        if not others:
            value = 0
        elif r.rmw_safe:
            value = yield from self._g_read(name)
        elif not any(f.plain for f in others):
            value = 0     # the others are write-only / W1C / pulses: writing 0 leaves them
        else:
            raise ValueError(f"{name}: cannot write some fields only (the register mixes "
                             f"plain fields with side effects); write the whole register")
        for fname, v in fields.items():
            f = r.field(fname)
            value = (value & ~f.mask) | (self.encode(name, fname, v) << f.lsb)
        yield from self._g_write(name, value & 0xFFFF_FFFF)

    def _g_read_field(self, name, field):
        f = self.map.field(name, field)
        v = yield from self._g_read(name)
        return (v >> f.lsb) & ((1 << f.width) - 1)

    def _g_read_fields(self, name):
        v = yield from self._g_read(name)
        return self.decode(name, v)

    def wide_bits(self, name):
        """Implemented bits of the 64-bit pair ``name``: 64, or fewer when the accelerator
        was generated with ``addr_bits`` (addresses) or ``stats_bits`` (statistics) < 64;
        then a constant HI register (reads 0) is not accessed and a value written must fit."""
        lo, hi = self.map.wide(name)
        hf = hi.field("value")
        if not (hf.sw_writable or hf.hw != "na"):     # a constant HI: not implemented
            return lo.field("value").width
        return 32 + hf.width

    def _g_read64(self, name):
        lo, hi = self.map.wide(name)
        if self.wide_bits(name) <= 32:
            return (yield ("r", self.base + lo.offset))
        for _ in range(4):        # HI, LO, HI: retry if a counter carried into HI between
            h1 = yield ("r", self.base + hi.offset)
            v = yield ("r", self.base + lo.offset)
            h2 = yield ("r", self.base + hi.offset)
            if h1 == h2:
                return (h1 << 32) | v
        return (h2 << 32) | v

    def _g_write64(self, name, value):
        lo, hi = self.map.wide(name)
        value = int(value)
        bits = self.wide_bits(name)
        if not 0 <= value < 1 << bits:
            raise ValueError(f"{name}: {value:#x} does not fit in the {bits} implemented bits"
                             + (" (addr_bits of the accelerator)" if bits < 64 else ""))
        yield from self._g_write(lo.name, value & 0xFFFF_FFFF)
        if bits > 32:
            yield from self._g_write(hi.name, value >> 32)

    def _g_command(self, cmd, **args):
        yield from self._g_write_fields("CTRL", {"cmd": cmd, **args})

    def _g_configure(self, params):
        tables = self._array_names("TABLE_BASE")
        banks = self._array_names("STAGING_BASE")
        if len(params.table_base) != len(tables):
            raise ValueError(f"configure: {len(params.table_base)} table bases for "
                             f"{len(tables)} TABLE_BASE registers")
        if len(params.staging_base) != len(banks):
            raise ValueError(f"configure: {len(params.staging_base)} staging bases for "
                             f"{len(banks)} STAGING_BASE registers")
        for name, v in zip(tables, params.table_base):
            yield from self._g_write64(name, v)
        for name, v in zip(banks, params.staging_base):
            yield from self._g_write64(name, v)
        yield from self._g_write64("POPULAR_BASE", params.popular_base)
        for reg, v in (("ROW_STRIDE", params.row_stride), ("ROW_BYTES", params.row_bytes),
                       ("LEARN_PERIOD", params.learn_period),
                       ("LEARN_THRESHOLD", params.learn_threshold)):
            yield from self._g_write_fields(reg, {"value": v})

    def _g_wait(self, reg, field, want, timeout, what):
        deadline = time.monotonic() + timeout
        while True:
            fields = yield from self._g_read_fields(reg)
            if fields[field] == want:
                return fields
            if time.monotonic() > deadline:
                raise DriverTimeout(f"{what}: still not done after {timeout} s; {reg} = "
                                    f"{fields}")
            if self._poll_delay is not None:
                yield ("sleep",)

    def _g_wait_idle(self, timeout):
        return (yield from self._g_wait("STATUS", "busy", 0, timeout, "wait_idle"))

    def _g_cam_op(self, slot, op, used, timeout):
        yield from self._g_write_fields("CAM_SLOT", {"value": slot})
        yield from self._g_write_fields("CAM_CTRL", {"op": op, "used": int(used)})
        return (yield from self._g_wait("CAM_STATUS", "done", 1, timeout, f"CAM {op}"))

    def _g_cam_write(self, slot, key, used, timeout):
        yield from self._g_write_fields("CAM_KEY_LO", {"value": key & 0xFFFF_FFFF})
        yield from self._g_write_fields("CAM_KEY_HI", {"value": key >> 32})
        st = yield from self._g_cam_op(slot, "WRITE", used, timeout)
        return not st["rejected"]

    def _g_cam_read(self, slot, timeout):
        st = yield from self._g_cam_op(slot, "READ", 0, timeout)
        lo = yield from self._g_read("CAM_READ_KEY_LO")
        hi = yield from self._g_read("CAM_READ_KEY_HI")
        return bool(st["used"]), (hi << 32) | lo

    def _g_stats(self):
        out = {}
        names = self.map.names
        for prefix, key_prefix in (("STAT_", ""), ("LAST_", "last_")):
            for n in names:
                if not n.startswith(prefix) or n.endswith("_HI"):
                    continue
                if n.endswith("_LO"):
                    base = n[:-3]
                    out[key_prefix + base[len(prefix):].lower()] = yield from self._g_read64(base)
                else:
                    out[key_prefix + n[len(prefix):].lower()] = yield from self._g_read(n)
        return out

    def _g_check_errors(self, ignore):
        status = yield from self._g_read_fields("STATUS")
        bits = [f for f in ERROR_FIELDS if f in status and status[f] and f not in ignore]
        if not bits:
            return status
        addr = resp = None
        if "dma_error" in bits:
            addr = yield from self._g_read64("DMA_ERROR_ADDR")
            resp = yield from self._g_read("DMA_ERROR_RESP")
        raise HotlineError(bits, status, addr, resp)

    def _irq_mask(self, events):
        r = self.map.reg("IRQ_ENABLE")
        return sum(r.field(e).mask for e in events) if events else 0

    def _g_irq_status(self):
        st = yield from self._g_read_fields("IRQ_STATUS")
        return frozenset(n for n, v in st.items() if v)

    def _g_check_id(self):
        ident = yield from self._g_read("ID")
        want = self.map.reg("ID").reset
        if ident != want:
            raise HotlineError([f"ID reads 0x{ident:08x}, not 0x{want:08x}: no Hotline "
                                f"accelerator at base 0x{self.base:x}"], {})
        ver = yield from self._g_read_fields("VERSION")
        want_major = self.map.field("VERSION", "major").reset
        if ver["major"] != want_major:
            raise HotlineError([f"register map version {ver['major']}.{ver['minor']} is not "
                                f"{want_major}.x of regmap.json"], {})
        return ver["major"], ver["minor"]

    # --- the public API: each returns a value (HotlineDriver) or an awaitable (Async) ----
    def read(self, name):
        """Read register ``name`` (32-bit raw value)."""
        return self._run(self._g_read(name))

    def write(self, name, value):
        """Write ``value`` to register ``name`` (ValueError for a read-only register)."""
        return self._run(self._g_write(name, value))

    def read_field(self, reg, field):
        return self._run(self._g_read_field(reg, field))

    def read_fields(self, reg):
        """``{field: value}`` of register ``reg`` (one read)."""
        return self._run(self._g_read_fields(reg))

    def write_field(self, reg, field, value):
        """Write one field. Plain read/write registers get a read-modify-write; registers whose
        other fields are write-only, pulses or write-1-to-clear (CTRL, CAM_CTRL, IRQ_STATUS)
        get a single write with the other fields 0, which leaves them alone. ``value`` may be
        an enum name (``"LEARN"``)."""
        return self._run(self._g_write_fields(reg, {field: value}))

    def write_fields(self, reg, **fields):
        """Write several fields at once (same rules as :meth:`write_field`)."""
        return self._run(self._g_write_fields(reg, fields))

    def read64(self, name):
        """A 64-bit pair (``"POPULAR_BASE"``, ``"TABLE_BASE[3]"``, ``"STAT_BYTES_READ"``):
        reads HI, LO, HI and retries when HI changed, so a running counter reads
        consistently; LO only when HI is not implemented (:meth:`wide_bits` <= 32)."""
        return self._run(self._g_read64(name))

    def write64(self, name, value):
        """Write a 64-bit pair, LO then HI (LO only when HI is not implemented); ``value``
        must fit in :meth:`wide_bits` bits (``addr_bits`` for an address), else
        ``ValueError``."""
        return self._run(self._g_write64(name, value))

    def check_id(self):
        """Check ID and the major VERSION against the map; return ``(major, minor)``."""
        return self._run(self._g_check_id())

    def configure(self, params):
        """Write a :class:`golden.params.RuntimeParams`: TABLE_BASE[t], STAGING_BASE[b],
        POPULAR_BASE, ROW_STRIDE, ROW_BYTES, LEARN_PERIOD, LEARN_THRESHOLD."""
        return self._run(self._g_configure(params))

    def command(self, cmd, **args):
        """Write CTRL with ``cmd`` (name or code) and its argument fields."""
        return self._run(self._g_command(cmd, **args))

    def learn(self, clear=True):
        """Start a learning phase; ``clear`` also clears the counter array."""
        return self.command("LEARN", clear=int(bool(clear)))

    def install(self):
        return self.command("INSTALL")

    def train(self):
        return self.command("TRAIN")

    def stop(self):
        return self.command("STOP")

    def scatter(self, bank):
        return self.command("SCATTER", bank=bank)

    def evict(self):
        return self.command("EVICT")

    def clear_stats(self):
        return self.command("CLEAR_STATS")

    def soft_reset(self):
        """Pulse CTRL.soft_reset: the datapath restarts, registers keep their values."""
        return self.write_field("CTRL", "soft_reset", 1)

    def wait_idle(self, timeout=1.0):
        """Poll STATUS until ``busy`` is 0; return the STATUS fields. Raises
        :class:`DriverTimeout` after ``timeout`` seconds of wall-clock time."""
        return self._run(self._g_wait_idle(timeout))

    def status(self):
        """``{field: value}`` of STATUS."""
        return self.read_fields("STATUS")

    def cam_write(self, slot, key, used=True, timeout=1.0):
        """Write ``key`` into CAM slot ``slot`` (``used=False`` empties it); wait for
        CAM_STATUS.done; return False if the CAM rejected it."""
        return self._run(self._g_cam_write(slot, key, used, timeout))

    def cam_read(self, slot, timeout=1.0):
        """``(used, key)`` of CAM slot ``slot``."""
        return self._run(self._g_cam_read(slot, timeout))

    def stats(self):
        """``{name: value}`` of every statistics register: ``STAT_<NAME>`` as ``name``
        (64-bit pairs combined), ``LAST_<NAME>`` as ``last_name``."""
        return self._run(self._g_stats())

    def check_errors(self, ignore=()):
        """Raise :class:`HotlineError` naming the STATUS error bits that are set
        (:data:`ERROR_FIELDS` less ``ignore``) and, for a DMA error, its address and
        response; return the STATUS fields otherwise."""
        return self._run(self._g_check_errors(tuple(ignore)))

    def irq_enable(self, *events):
        """Enable exactly the interrupt ``events`` (``"cmd_done"``, ``"dma_error"``, ...);
        none: disable all."""
        return self.write("IRQ_ENABLE", self._irq_mask(events))

    def irq_status(self):
        """The set of pending interrupt events (IRQ_STATUS bits that are 1)."""
        return self._run(self._g_irq_status())

    def irq_clear(self, *events):
        """Clear ``events`` in IRQ_STATUS (write 1 to clear); none: clear all."""
        r = self.map.reg("IRQ_STATUS")
        mask = sum(r.field(e).mask for e in events) if events else r.sw_write_mask
        return self.write("IRQ_STATUS", mask)


class HotlineDriver(_DriverBase):
    """Synchronous driver: ``read32(addr) -> int`` and ``write32(addr, value)`` are plain
    calls.

    Parameters
    ----------
    read32, write32 : callables
        32-bit accesses at byte addresses.
    regmap : RegMap, dict, path or HotlineConfig
        The register map (``regmap.json`` as written by ``hotline-hw generate``).
    base : int
        Added to every register offset.
    poll_delay : callable, optional
        Called between two polls of a wait (e.g. ``lambda: time.sleep(1e-4)``).
    """

    def _run(self, gen):
        try:
            op = next(gen)
            while True:
                if op[0] == "r":
                    res = int(self._read32(op[1]))
                elif op[0] == "w":
                    res = self._write32(op[1], op[2])
                else:
                    res = self._poll_delay()
                op = gen.send(res)
        except StopIteration as stop:
            return stop.value


class AsyncHotlineDriver(_DriverBase):
    """The same driver over coroutine accessors (cocotb's ``AxiLiteMaster``): every method
    returns an awaitable. ``read32``/``write32``/``poll_delay`` may be ``async`` functions or
    plain ones."""

    async def _run(self, gen):
        try:
            op = next(gen)
            while True:
                if op[0] == "r":
                    res = self._read32(op[1])
                elif op[0] == "w":
                    res = self._write32(op[1], op[2])
                else:
                    res = self._poll_delay()
                if inspect.isawaitable(res):
                    res = await res
                if op[0] == "r":
                    res = int(res)
                op = gen.send(res)
        except StopIteration as stop:
            return stop.value
