"""Verilog export of a ``wiring.Component`` with AXI-style single-underscore port names.

Amaranth names the ports of a flattened interface by joining the signature path with a double
underscore (``lookups__payload``), and Verilator mangles ``__`` in some VPI paths (TOOLCHAIN
gotcha 6). :func:`flatten` instead emits a thin wrapper module around the component whose
top-level ports follow the naming rule below (contract A3 of DESIGN.md), and :func:`port_map`
describes those ports (a JSON sidecar, ``ports.json``) so that testbenches pack and unpack
payloads without hard-coding bit offsets.

Naming rule
-----------
1. ``clk`` and ``rst``: the clock and the **synchronous, active-high** reset of the
   component's ``sync`` domain (always present, even for a combinational component). No other
   clock domain is exported.
2. Every other port is named by joining its signature path with single underscores:
   ``s_axis_lookup.tdata`` -> ``s_axis_lookup_tdata``, ``cfg.mode`` -> ``cfg_mode``; an
   index of a member array (``In(1).array(4)``) is written in decimal: ``irq.2`` -> ``irq_2``.
   A stream's ``valid`` and ``ready`` are therefore ``<stream>_valid`` and ``<stream>_ready``.
3. A port whose shape is a **struct** layout (``data.StructLayout``, a ``data.Struct``
   subclass) is split, one level deep, into one port per field, ``<path>_<field>``; when the
   port is named ``payload`` that path item is dropped, so ``lookups.payload.keys`` ->
   ``lookups_keys``. A port that is not a struct keeps its name:
   ``result.payload`` -> ``result_payload``.
4. Everything below that level stays packed, LSB first, as Amaranth lays it out: array fields
   (``keys`` of ``ArrayLayout(key_bits, lanes)``: lane ``i`` is bits
   ``[i*key_bits +: key_bits]``), nested structs, unions and enums.
5. A port member whose value is a constant (the ``ready`` of an ``always_ready`` stream, the
   ``valid`` of an ``always_valid`` one) is not exported; the sidecar records it as ``null``.

A name that would contain ``__``, begin or end with ``_``, collide with another port (a
payload field called ``valid``, say), be ``clk``/``rst`` or a Verilog keyword raises
:class:`ExportError` naming the member: rename the member, never work around the rule.

Memories are written as behavioural RAM modules without initial contents
(:mod:`.memories`), appended to the same text.

Generation is reproducible: :func:`flatten` always uses Amaranth's builtin Yosys
(``AMARANTH_USE_YOSYS=builtin``, TOOLCHAIN gotcha 8), whatever ``YOSYS`` says.
"""

import contextlib
import json
import os
import re
from dataclasses import dataclass, field

# Amaranth is imported where it is needed: testbenches read the sidecar (PortMap, LayoutInfo)
# inside the simulator, where importing Amaranth would only add start-up time.

__all__ = [
    "ExportError", "LayoutInfo", "PortInfo", "StreamInfo", "PortMap",
    "port_map", "flatten", "export", "write", "PORTS_FORMAT", "PORTS_VERSION",
]

PORTS_FORMAT = "hotline-hw-ports"
PORTS_VERSION = 1

_IDENT = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")
# Keywords of Verilog-2005 / SystemVerilog that could plausibly be member names.
_KEYWORDS = frozenset("""
    always and assign begin buf case casex casez cmos default defparam disable edge else end
    endcase endfunction endmodule endtask event for force forever fork function if initial
    inout input integer join logic macromodule module nand negedge nor not or output parameter
    posedge reg release repeat signed specify supply0 supply1 table task time tri unsigned
    wait while wire xor xnor bit byte int longint shortint string type void enum struct union
    interface package class final import export return break continue
""".split())


class ExportError(ValueError):
    """The component cannot be exported under the naming rule; the message names the member."""


# --- layouts -------------------------------------------------------------------------------

@dataclass(frozen=True)
class LayoutInfo:
    """A JSON-able description of a payload shape, with :meth:`pack` / :meth:`unpack`.

    ``kind`` is ``"bits"`` (plain, possibly signed), ``"struct"``, ``"union"`` or ``"array"``.
    For a struct or union, ``fields`` is a tuple of ``(name, offset, LayoutInfo)``; for an
    array, ``elem`` is the element layout and ``length`` the element count (element ``i`` at
    bit ``i * elem.width``).
    """

    kind: str
    width: int
    signed: bool = False
    fields: tuple = ()
    elem: "LayoutInfo | None" = None
    length: int = 0

    @classmethod
    def from_shape(cls, shape):
        """Describe an Amaranth shape-like (``int``, ``signed(n)``, enum, data layout)."""
        from amaranth.hdl import Shape
        from amaranth.lib import data

        try:
            layout = data.Layout.cast(shape)
        except TypeError:
            s = Shape.cast(shape)
            return cls("bits", s.width, s.signed)
        if isinstance(layout, data.ArrayLayout):
            return cls("array", layout.size, elem=cls.from_shape(layout.elem_shape),
                       length=layout.length)
        kind = "union" if isinstance(layout, data.UnionLayout) else "struct"
        fields = tuple((name, f.offset, cls.from_shape(f.shape)) for name, f in layout)
        return cls(kind, layout.size, fields=fields)

    # JSON ------------------------------------------------------------------------------
    def to_dict(self):
        d = {"kind": self.kind, "width": self.width}
        if self.kind == "bits":
            d["signed"] = self.signed
        elif self.kind == "array":
            d["length"] = self.length
            d["elem"] = self.elem.to_dict()
        else:
            d["fields"] = [{"name": n, "offset": o, "width": f.width, "layout": f.to_dict()}
                           for n, o, f in self.fields]
        return d

    @classmethod
    def from_dict(cls, d):
        kind = d["kind"]
        if kind == "bits":
            return cls("bits", d["width"], d.get("signed", False))
        if kind == "array":
            return cls("array", d["width"], elem=cls.from_dict(d["elem"]), length=d["length"])
        fields = tuple((f["name"], f["offset"], cls.from_dict(f["layout"])) for f in d["fields"])
        return cls(kind, d["width"], fields=fields)

    # packing ---------------------------------------------------------------------------
    @property
    def mask(self):
        return (1 << self.width) - 1

    def field(self, name):
        """``(offset, LayoutInfo)`` of the struct/union field ``name``."""
        for n, o, f in self.fields:
            if n == name:
                return o, f
        raise KeyError(f"no field {name!r} in {self.kind} layout (fields: "
                       f"{', '.join(n for n, _, _ in self.fields)})")

    def unpack(self, value):
        """Raw unsigned ``value`` -> Python value: ``int`` (signed when the shape is), ``dict``
        for a struct or union (every field), ``list`` for an array."""
        value = int(value) & self.mask
        if self.kind == "bits":
            if self.signed and self.width and value >> (self.width - 1):
                return value - (1 << self.width)
            return value
        if self.kind == "array":
            w = self.elem.width
            return [self.elem.unpack(value >> (i * w)) for i in range(self.length)]
        return {n: f.unpack(value >> o) for n, o, f in self.fields}

    def pack(self, value):
        """Python value -> raw unsigned ``int``. An ``int`` is taken as the raw bits (masked);
        a ``dict`` fills struct fields (missing fields are 0; a union takes exactly one); a
        sequence fills array elements (missing trailing elements are 0)."""
        if isinstance(value, bool) or isinstance(value, int):
            return int(value) & self.mask
        if self.kind == "array":
            items = list(value)
            if len(items) > self.length:
                raise ValueError(f"{len(items)} elements for an array of {self.length}")
            w = self.elem.width
            return sum(self.elem.pack(v) << (i * w) for i, v in enumerate(items)) & self.mask
        if self.kind in ("struct", "union") and isinstance(value, dict):
            names = {n for n, _, _ in self.fields}
            unknown = set(value) - names
            if unknown:
                raise KeyError(f"unknown field(s) {sorted(unknown)} (fields: {sorted(names)})")
            if self.kind == "union" and len(value) != 1:
                raise ValueError("a union is packed from exactly one field")
            raw = 0
            for n, v in value.items():
                o, f = self.field(n)
                raw |= f.pack(v) << o
            return raw & self.mask
        raise TypeError(f"cannot pack {value!r} into a {self.kind} layout")


# --- ports ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class PortInfo:
    """One top-level Verilog port.

    ``path`` is the signature path of the member it comes from; for a port split from a struct,
    ``field`` is the field name and ``offset`` its bit offset inside the member.
    """

    name: str
    direction: str          # "input" or "output" (of the Verilog module)
    width: int
    path: tuple
    signed: bool = False
    field: "str | None" = None
    offset: int = 0
    layout: "LayoutInfo | None" = None

    def to_dict(self):
        d = {"name": self.name, "direction": self.direction, "width": self.width,
             "signed": self.signed, "path": list(self.path)}
        if self.field is not None:
            d["field"] = self.field
            d["offset"] = self.offset
        if self.layout is not None:
            d["layout"] = self.layout.to_dict()
        return d

    @classmethod
    def from_dict(cls, d):
        return cls(d["name"], d["direction"], d["width"], tuple(d["path"]), d.get("signed", False),
                   d.get("field"), d.get("offset", 0),
                   LayoutInfo.from_dict(d["layout"]) if "layout" in d else None)


@dataclass(frozen=True)
class StreamInfo:
    """A valid/ready/payload interface (an Amaranth ``stream.Signature`` or any interface with
    ``valid`` and ``payload`` members).

    ``direction`` is ``"in"`` when the DUT is the sink (the testbench drives ``valid``), ``"out"``
    when the DUT is the source. ``ready`` is ``None`` for a valid-only stream
    (``always_ready``). ``payload_ports`` lists ``(port name, offset, width)`` covering the
    payload ``layout``; ``extra`` names the interface's other ports (``{member: port name}``).
    """

    name: str
    direction: str
    valid: "str | None"
    ready: "str | None"
    layout: LayoutInfo
    payload_ports: tuple
    extra: dict = field(default_factory=dict)

    def to_dict(self):
        return {"name": self.name, "direction": self.direction, "valid": self.valid,
                "ready": self.ready, "payload": {
                    "layout": self.layout.to_dict(),
                    "ports": [{"name": n, "offset": o, "width": w}
                              for n, o, w in self.payload_ports]},
                "extra": dict(self.extra)}

    @classmethod
    def from_dict(cls, d):
        p = d["payload"]
        return cls(d["name"], d["direction"], d["valid"], d["ready"],
                   LayoutInfo.from_dict(p["layout"]),
                   tuple((q["name"], q["offset"], q["width"]) for q in p["ports"]),
                   dict(d.get("extra", {})))


@dataclass(frozen=True)
class PortMap:
    """Every top-level port of an exported module, and its streams (``ports.json``)."""

    top: str
    ports: tuple
    streams: dict
    clock: str = "clk"
    reset: str = "rst"

    def port(self, name):
        for p in self.ports:
            if p.name == name:
                return p
        raise KeyError(f"{self.top}: no port {name!r}")

    def stream(self, name):
        """The stream whose signature path, joined with ``_``, is ``name`` (e.g. ``lookups``)."""
        try:
            return self.streams[name]
        except KeyError:
            raise KeyError(f"{self.top}: no stream {name!r} (streams: "
                           f"{', '.join(self.streams) or 'none'})") from None

    @property
    def names(self):
        return [p.name for p in self.ports]

    def to_json(self):
        doc = {"format": PORTS_FORMAT, "version": PORTS_VERSION, "top": self.top,
               "clock": self.clock, "reset": self.reset, "reset_kind": "synchronous, active high",
               "ports": [p.to_dict() for p in self.ports],
               "streams": {k: s.to_dict() for k, s in self.streams.items()}}
        return json.dumps(doc, indent=2) + "\n"

    @classmethod
    def from_json(cls, text):
        doc = json.loads(text)
        if doc.get("format") != PORTS_FORMAT or doc.get("version") != PORTS_VERSION:
            raise ValueError(f"not a {PORTS_FORMAT} v{PORTS_VERSION} document")
        return cls(doc["top"], tuple(PortInfo.from_dict(p) for p in doc["ports"]),
                   {k: StreamInfo.from_dict(s) for k, s in doc["streams"].items()},
                   doc.get("clock", "clk"), doc.get("reset", "rst"))

    @classmethod
    def load(cls, path):
        with open(path) as f:
            return cls.from_json(f.read())


# --- flattening ----------------------------------------------------------------------------

def _check_name(name, path, taken):
    where = ".".join(map(str, path))
    if not _IDENT.match(name) or "__" in name or name.endswith("_"):
        raise ExportError(f"member {where!r} gives the port name {name!r}, which breaks the "
                          f"naming rule (letters, digits and single '_', no '__', no leading or "
                          f"trailing '_'): rename the member")
    if name in ("clk", "rst"):
        raise ExportError(f"member {where!r} gives the port name {name!r}, reserved for the "
                          f"clock and reset")
    if name in _KEYWORDS:
        raise ExportError(f"member {where!r} gives the port name {name!r}, a Verilog keyword")
    if name in taken:
        raise ExportError(f"members {taken[name]!r} and {where!r} both give the port name "
                          f"{name!r}: rename one of them")
    taken[name] = where


def _silence_unused(component):
    # Amaranth warns (UnusedElaboratable, at garbage collection) about an elaboratable that
    # is never elaborated: port_map() alone, or an export refused by the naming rule, does
    # not use the component, and that is not the caller's mistake.
    component._MustUse__silence = True


def _plan(component, name):
    """``(PortMap, [(PortInfo, inner value)])`` for ``component``."""
    try:
        return _plan_unchecked(component, name)
    except ExportError:
        _silence_unused(component)
        raise


def _plan_unchecked(component, name):
    from amaranth.hdl import Const, Value
    from amaranth.lib import data, wiring

    if not isinstance(component, wiring.Component):
        raise TypeError(f"expected a wiring.Component, not {component!r}")
    if not _IDENT.match(name) or "__" in name or name in _KEYWORDS:
        raise ExportError(f"module name {name!r} must be a plain Verilog identifier without '__'")
    taken = {}
    ports, conns = [], []
    members = {}    # parent path -> {member name: [PortInfo...] | None (constant)}
    layouts = {}    # path -> LayoutInfo of the member
    for path, member, value in component.signature.flatten(component):
        direction = "input" if member.flow == wiring.In else "output"
        layout = LayoutInfo.from_shape(member.shape)
        layouts[path] = layout
        parent, leaf = path[:-1], path[-1]
        if isinstance(value, (Const, data.Const)):
            # A constant member (the ready of an always_ready stream): nothing to export.
            members.setdefault(parent, {})[leaf] = None
            continue
        raw = Value.cast(value)
        infos = []
        if layout.kind == "struct":
            base = [str(p) for p in (path[:-1] if leaf == "payload" else path)]
            for fname, off, flay in layout.fields:
                pname = "_".join(base + [str(fname)])
                _check_name(pname, path + (fname,), taken)
                info = PortInfo(pname, direction, flay.width, tuple(path),
                                flay.kind == "bits" and flay.signed, str(fname), off, flay)
                infos.append(info)
                conns.append((info, raw[off:off + flay.width]))
        else:
            pname = "_".join(str(p) for p in path)
            _check_name(pname, path, taken)
            info = PortInfo(pname, direction, layout.width, tuple(path), layout.signed,
                            layout=layout if layout.kind != "bits" else None)
            infos.append(info)
            conns.append((info, raw))
        ports.extend(infos)
        members.setdefault(parent, {})[leaf] = infos

    streams = {}
    for parent, leaves in members.items():
        if not parent or "valid" not in leaves or "payload" not in leaves:
            continue
        sname = "_".join(str(p) for p in parent)
        valid = leaves["valid"]
        ready = leaves.get("ready")
        if valid is None:
            # always_valid: take the direction from the payload.
            vdir = leaves["payload"][0].direction if leaves["payload"] else "input"
        else:
            vdir = valid[0].direction
        payload = leaves["payload"] or []
        streams[sname] = StreamInfo(
            sname, "in" if vdir == "input" else "out",
            valid[0].name if valid else None,
            ready[0].name if ready else None,
            layouts[parent + ("payload",)],
            tuple((p.name, p.offset, p.width) for p in payload),
            {k: v[0].name for k, v in leaves.items()
             if k not in ("valid", "ready", "payload") and v and len(v) == 1})
    pmap = PortMap(name, tuple(ports), streams)
    return pmap, conns


def _wrapper(component, conns):
    """The top module: the component as submodule ``dut``, the ``sync`` domain on ``clk`` and
    ``rst``, and one assignment per struct field split off a payload. A member exported whole
    uses the component's own signal as the top-level port (renamed), so that no unread alias
    net is left in the top for the lint to trip on, and an unused input stays visible."""
    from amaranth.hdl import ClockDomain, Elaboratable, Module, Signal

    class Wrapper(Elaboratable):
        def __init__(self):
            self.cd = ClockDomain("sync")   # its clk/rst become the top-level `clk` and `rst`
            self.top, self.assigns = {}, []
            used = set()
            for info, inner in conns:
                if isinstance(inner, Signal) and id(inner) not in used:
                    used.add(id(inner))
                    self.top[info.name] = inner
                else:
                    outer = Signal(info.width, name=info.name)
                    self.top[info.name] = outer
                    self.assigns.append((info.direction, inner, outer))

        def elaborate(self, platform):
            m = Module()
            m.domains.sync = self.cd
            m.submodules.dut = component
            for direction, inner, outer in self.assigns:
                if direction == "input":
                    m.d.comb += inner.eq(outer)
                else:
                    m.d.comb += outer.eq(inner)
            return m

    return Wrapper()


@contextlib.contextmanager
def _builtin_yosys():
    old = os.environ.get("AMARANTH_USE_YOSYS")
    os.environ["AMARANTH_USE_YOSYS"] = "builtin"
    try:
        yield
    finally:
        if old is None:
            del os.environ["AMARANTH_USE_YOSYS"]
        else:
            os.environ["AMARANTH_USE_YOSYS"] = old


def port_map(component, name):
    """The :class:`PortMap` that :func:`flatten` gives ``component`` under module ``name``
    (no elaboration, no Yosys)."""
    pmap = _plan(component, name)[0]
    _silence_unused(component)
    return pmap


def export(component, name, *, emit_src=False):
    """``(verilog_text, PortMap)`` of ``component`` wrapped as module ``name``.

    ``emit_src=False`` leaves Python source locations out of the Verilog, so that the text
    depends only on the design (stable digests for build caches)."""
    from amaranth.back import verilog
    # Port directions must be explicit (an inferred direction turns an undriven output into
    # an input); Amaranth 0.5 exports the enum only from this module.
    from amaranth.hdl._ir import PortDirection

    from .memories import BehaviouralMemories

    pmap, conns = _plan(component, name)
    wrapper = _wrapper(component, conns)
    memories = BehaviouralMemories()
    ports = {"clk": (wrapper.cd.clk, PortDirection.Input),
             "rst": (wrapper.cd.rst, PortDirection.Input)}
    for info, _ in conns:
        ports[info.name] = (wrapper.top[info.name], PortDirection.Input if info.direction == "input"
                            else PortDirection.Output)
    with _builtin_yosys():
        text = verilog.convert(wrapper, name=name, platform=memories, ports=ports,
                               emit_src=emit_src)
    return text + memories.verilog(), pmap


def flatten(component, name, *, emit_src=False):
    """Verilog text of ``component`` as a module ``name`` with the single-underscore ports of
    the naming rule (see the module docstring), plus ``clk`` and ``rst``."""
    return export(component, name, emit_src=emit_src)[0]


def write(component, name, directory, *, emit_src=False):
    """Write ``<name>.v`` and ``ports.json`` into ``directory``; return their paths."""
    from pathlib import Path

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    text, pmap = export(component, name, emit_src=emit_src)
    vpath, jpath = directory / f"{name}.v", directory / "ports.json"
    vpath.write_text(text)
    jpath.write_text(pmap.to_json())
    return vpath, jpath
