"""Memories in the exported Verilog: behavioural RAM modules without initial contents.

Amaranth writes every ``lib.memory.Memory`` with an ``initial`` block that sets each word,
even when the contents are all zero. For the large presets (the ``terabyte`` counter array
alone holds 23 Mbit) that makes conversion take minutes and the Verilog tens of megabytes,
and the units never rely on power-up contents: each clears its memories with an explicit
sweep (the counter array on ``start``, the CAM on ``clear``, the install engine in its
CLEAR phase).

:class:`BehaviouralMemories` is passed as the ``platform`` of ``verilog.convert``;
Amaranth calls its :meth:`~BehaviouralMemories.get_memory` for every memory, and it returns
an instance of a plain synchronous RAM module, written once per shape and port set, in the
style every synthesis tool infers block RAM from (Yosys, Vivado, Quartus). Read ports keep
Amaranth's semantics: synchronous (or ``comb``) reads, with ``en``; a read port transparent
for a write port returns the written data when both address the same word in the same cycle
(forwarded by registers beside the RAM, not written into its always block, which would make
Yosys map it to LUT RAM on ECP5), others return the old word; write enables have Amaranth's
granularity. In simulation the contents start undefined (X in Icarus, 0 in Verilator), which the tests exercise.

Collisions. A non-transparent read of the word a write port writes in the same cycle returns
the old word in Amaranth; ECP5 block RAM (DP16KD, across its two ports) returns an undefined
one, so Yosys *emulates* the old word: it delays every write by a cycle and adds a register
and a forwarding multiplexer per bit after the RAM (about two flip-flops and one LUT4 per
bit, on the path out of the RAM). A read whose collisions do not matter says so, and the
RAM module reads ``X`` there (per write granule), which Yosys maps to a plain block RAM
(`"don't care on collision"`):

* the RAM read behind a transparent port, for the write ports it is transparent to: their
  data is forwarded over it anyway;
* every read port of a memory created with ``attrs={COLLISION_ATTR: "dont_care"}``: the unit
  promises not to use a word read in a cycle where a write port writes its address (the
  counter array forwards those writes itself). In Icarus the word then reads ``X``, so a
  unit that broke the promise fails its cocotb tests.

Memories with non-zero initial contents are left to Amaranth.
"""

import hashlib

from amaranth.hdl import ClockSignal, Instance, MemoryInstance, Shape

__all__ = ["BehaviouralMemories", "COLLISION_ATTR"]

#: Memory attribute: ``"dont_care"`` if no read port of the memory uses the word it reads in
#: a cycle where a write port writes the same address (see the module docstring).
COLLISION_ATTR = "hotline_read_collision"


def _read_expr(j, width, writes, domain, dont_care):
    """The word read port ``j`` registers: ``mem[r_addr]``, with ``X`` in the granules that a
    write port of ``dont_care`` (indices, same clock domain) writes to the read address in
    the same cycle."""
    conds = []                 # (lo, hi, condition) per write granule
    for i in dont_care:
        w_domain, en_w = writes[i]
        if w_domain != domain:
            continue
        gran = width // en_w
        for g in range(en_w):
            conds.append((g * gran, g * gran + gran - 1,
                          f"w{i}_en[{g}] && w{i}_addr == r{j}_addr"))
    if not conds:
        return f"mem[r{j}_addr]"
    cuts = sorted({0, width} | {lo for lo, _, _ in conds} | {hi + 1 for _, hi, _ in conds})
    parts = []
    for lo, nxt in zip(cuts, cuts[1:]):
        hi = nxt - 1
        expr = f"mem[r{j}_addr][{hi}:{lo}]"
        for clo, chi, c in reversed(conds):
            if clo <= lo and hi <= chi:
                expr = f"({c}) ? {{{hi - lo + 1}{{1'bx}}}} : {expr}"
        parts.append(expr)
    if len(parts) == 1:
        return parts[0]
    return "{" + ", ".join(f"({p})" for p in reversed(parts)) + "}"


def _ram_verilog(name, width, depth, writes, reads, dont_care=False):
    """Verilog of one RAM module. ``writes``: list of (domain, en_width); ``reads``: list of
    (domain, transparent_for write indices). ``dont_care``: no read port uses the word it
    reads while a write port writes that address (the module docstring)."""
    abits = max(1, (depth - 1).bit_length())
    ports, body = [], []
    for i, (domain, en_w) in enumerate(writes):
        ports += [f"  input clk_w{i}", f"  input [{abits - 1}:0] w{i}_addr",
                  f"  input [{width - 1}:0] w{i}_data", f"  input [{en_w - 1}:0] w{i}_en"]
        gran = width // en_w
        body.append(f"  always @(posedge clk_w{i}) begin")
        for g in range(en_w):
            lo, hi = g * gran, g * gran + gran - 1
            body.append(f"    if (w{i}_en[{g}]) mem[w{i}_addr][{hi}:{lo}] <= w{i}_data[{hi}:{lo}];")
        body.append("  end")
    for j, (domain, transparent_for) in enumerate(reads):
        if domain == "comb":
            ports += [f"  input [{abits - 1}:0] r{j}_addr", f"  output [{width - 1}:0] r{j}_data"]
            body.append(f"  assign r{j}_data = mem[r{j}_addr];")
            continue
        ports += [f"  input clk_r{j}", f"  input r{j}_en", f"  input [{abits - 1}:0] r{j}_addr",
                  f"  output {'' if transparent_for else 'reg '}[{width - 1}:0] r{j}_data"]
        collide = range(len(writes)) if dont_care else transparent_for
        rd = _read_expr(j, width, writes, domain, collide)
        if not transparent_for:
            body += [f"  always @(posedge clk_r{j}) begin",
                     f"    if (r{j}_en) r{j}_data <= {rd};",
                     "  end"]
            continue
        # Transparency in soft logic beside a plain (read-first) RAM: register, with the
        # read, which granules each transparent write port writes to the read address and
        # the data it writes, and select them over the RAM's word. Writing the transparency
        # into the RAM's own always block (`if (w_en && w_addr == r_addr) r_data <= w_data`)
        # is equivalent, but Yosys (0.23 and 0.70) then maps the memory to LUT RAM instead
        # of block RAM on ECP5: a 4096 x 15 RAM became 9,043 LUT4 + 1,024 TRELLIS_DPR16X4
        # instead of 4 DP16KD.
        body += [f"  reg [{width - 1}:0] r{j}_q;",
                 f"  always @(posedge clk_r{j}) begin",
                 f"    if (r{j}_en) r{j}_q <= {rd};",
                 "  end"]
        sel = f"r{j}_q"
        for i in transparent_for:
            en_w = writes[i][1]
            gran = width // en_w
            body += [f"  reg [{en_w - 1}:0] r{j}_hit{i};",
                     f"  reg [{width - 1}:0] r{j}_wd{i};",
                     f"  always @(posedge clk_r{j}) begin",
                     f"    if (r{j}_en) begin",
                     f"      r{j}_hit{i} <= w{i}_en & {{{en_w}{{w{i}_addr == r{j}_addr}}}};",
                     f"      r{j}_wd{i} <= w{i}_data;",
                     "    end",
                     "  end"]
            parts = []
            for g in reversed(range(en_w)):
                lo, hi = g * gran, g * gran + gran - 1
                parts.append(f"r{j}_hit{i}[{g}] ? r{j}_wd{i}[{hi}:{lo}] : {sel}[{hi}:{lo}]"
                             if en_w > 1 else f"r{j}_hit{i}[0] ? r{j}_wd{i} : {sel}")
            body.append(f"  wire [{width - 1}:0] r{j}_t{i} = "
                        + (f"{{{', '.join(f'({x})' for x in parts)}}};" if en_w > 1
                           else f"{parts[0]};"))
            sel = f"r{j}_t{i}"
        body.append(f"  assign r{j}_data = {sel};")
    return "\n".join([
        f"// {depth} x {width} RAM, {len(writes)} write / {len(reads)} read ports, no initial contents",
        f"module {name} (",
        ",\n".join(ports),
        ");",
        f"  reg [{width - 1}:0] mem [0:{depth - 1}];",
        *body,
        "endmodule",
        ""])


class BehaviouralMemories:
    """A ``platform`` for :func:`amaranth.back.verilog.convert` that writes memories as
    behavioural RAM modules (see the module docstring). After conversion, append
    :meth:`verilog` to the converted text."""

    def __init__(self, prefix="hotline_ram"):
        self.prefix = prefix
        self.modules = {}

    def get_memory(self, mem):
        width = Shape.cast(mem.shape).width
        if any(int(v) for v in _init_words(mem)):
            return _amaranth_memory(mem)
        writes = [(p.domain, len(p.en)) for p in mem.write_ports]
        reads = [(p.domain, tuple(mem.write_ports.index(w) for w in p.transparent_for))
                 for p in mem.read_ports]
        dont_care = (mem.attrs or {}).get(COLLISION_ATTR) == "dont_care"
        digest = hashlib.sha1(repr((width, mem.depth, writes, reads, dont_care))
                              .encode()).hexdigest()[:10]
        name = f"{self.prefix}_{mem.depth}x{width}_{digest}"
        if name not in self.modules:
            self.modules[name] = _ram_verilog(name, width, mem.depth, writes, reads,
                                              dont_care=dont_care)
        kw = {}
        for i, p in enumerate(mem.write_ports):
            kw.update({f"i_clk_w{i}": ClockSignal(p.domain), f"i_w{i}_addr": p.addr,
                       f"i_w{i}_data": p.data, f"i_w{i}_en": p.en})
        for j, p in enumerate(mem.read_ports):
            if p.domain == "comb":
                kw.update({f"i_r{j}_addr": p.addr, f"o_r{j}_data": p.data})
            else:
                kw.update({f"i_clk_r{j}": ClockSignal(p.domain), f"i_r{j}_en": p.en,
                           f"i_r{j}_addr": p.addr, f"o_r{j}_data": p.data})
        return Instance(name, **kw)

    def verilog(self):
        """The RAM modules used so far."""
        return "\n".join(self.modules.values())


def _init_words(mem):
    """The initial contents as raw integers (``MemoryData.Init`` keeps them in ``_raw``;
    its public items are ``None`` for layouts given no value)."""
    return getattr(mem.init, "_raw", [int(v or 0) for v in mem.init])


def _amaranth_memory(mem):
    """What ``Memory.elaborate`` builds without a platform hook."""
    inst = MemoryInstance(data=mem._data, attrs=mem.attrs, src_loc=mem.src_loc)
    wp = {p: inst.write_port(domain=p.domain, addr=p.addr, data=p.data, en=p.en)
          for p in mem.write_ports}
    for p in mem.read_ports:
        inst.read_port(domain=p.domain, data=p.data, addr=p.addr, en=p.en,
                       transparent_for=tuple(wp[w] for w in p.transparent_for))
    return inst
