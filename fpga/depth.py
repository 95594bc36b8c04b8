"""Logic depth of a synthesised ECP5 netlist: the long paths without place and route.

Placing and routing the ``ulx3s`` core takes half an hour or more; its synthesis ten minutes,
the ``tiny`` core's one. This module reads the Yosys JSON netlist that synthesis leaves
(``synth.json``, kept by ``hotline-hw impl --keep`` or written by ``hotline-hw impl --depth``)
and computes, for every register, block RAM and LUT-RAM input, the deepest chain of logic
that reaches it from a register or RAM output, in *levels*:

* a LUT4 and the routed net into it is one level (the unit nextpnr's delays are made of:
  ~0.4 ns of LUT and ~0.5-1 ns of routing at speed grade 6),
* the slice muxes that build LUT5-7 (``PFUMX``, ``L6MUX21``) add 0.25 from their LUT inputs
  (no routing) and a level from their routed select,
* a carry chain adds 0.05 per ``CCU2C`` (two bits) along the chain,
* a block RAM without output register (``DP16KD``, ``REGMODE=NOREG``) starts its data at
  4 levels (its clock-to-output delay is ~4 ns), a multiplier without registers adds 4,
* a net driving more than 16 loads adds ``0.25 * log2(fanout / 16)`` levels (its buffering
  and spread).

The figures rank paths; they are not a timing sign-off (routing on a congested device can
double a net's delay). Each path is printed as the registers and named nets it passes
through, so that it can be found in the Amaranth source.

    python -m fpga.depth build/impl/<digest>/synth.json [-n 20] [--json]
"""

import argparse
import collections
import json
import math
import re
import sys
from pathlib import Path

__all__ = ["analyse_netlist", "deepest", "main"]

LUT = 1.0                    # a LUT4 and its routed input net
MUX_LOCAL = 0.25             # PFUMX / L6MUX21 from the LUTs (or muxes) of its own slice
CARRY = 0.05                 # CCU2C carry-in to carry-out
CARRY_SUM = 0.3              # CCU2C carry-in to a sum output
BRAM_CLK_TO_OUT = 4.0        # DP16KD without output register
MULT = 4.0                   # MULT18X18D without registers
FANOUT_FREE = 16
FANOUT_WEIGHT = 0.25

# (cell type) -> {output port: {input port or prefix: delay}}; a cell type missing here is
# sequential: its outputs start paths (at the given clock-to-output level) and all its inputs
# end them
_SEQ_START = {"TRELLIS_FF": 0.0, "DP16KD": BRAM_CLK_TO_OUT, "TRELLIS_IO": 0.0}


def _comb_delay(ctype, out_port, in_port):
    """Delay (levels) from ``in_port`` to ``out_port`` of a combinational cell, or None when
    the input does not reach that output."""
    if ctype == "LUT4":
        return LUT
    if ctype == "PFUMX":
        return LUT if in_port == "C0" else MUX_LOCAL
    if ctype == "L6MUX21":
        return LUT if in_port == "SD" else MUX_LOCAL
    if ctype == "CCU2C":
        if in_port == "CIN":
            return CARRY if out_port == "COUT" else CARRY_SUM
        # A0..D0 feed S0, S1 and COUT; A1..D1 feed S1 and COUT
        if out_port == "S0" and in_port.endswith("1"):
            return None
        return LUT
    if ctype == "TRELLIS_DPR16X4":
        return LUT if in_port.startswith("RAD") else None
    if ctype == "MULT18X18D":
        return MULT if in_port[0] in "AB" else None
    return None


_COMB = {"LUT4", "PFUMX", "L6MUX21", "CCU2C", "TRELLIS_DPR16X4", "MULT18X18D"}
_BIT = re.compile(r"\[\d+\]$")


def _top_module(netlist):
    mods = netlist["modules"]
    for name, m in mods.items():
        if m.get("attributes", {}).get("top"):
            return name, m
    # the module with the most cells
    return max(mods.items(), key=lambda kv: len(kv[1].get("cells", {})))


def _name_score(name):
    """Lower is a better name to show for a net bit: user names before Yosys' derived ones."""
    derived = name.count("$") + name.count("_LUT4_") + name.count("_PFUMX_") \
        + name.count("_TRELLIS_") + name.count("_CCU2C_") + name.count("_L6MUX21_")
    return (derived, len(name))


class Netlist:
    """The bits, drivers, loads and names of the top module of a Yosys JSON netlist."""

    def __init__(self, netlist):
        self.top, m = _top_module(netlist)
        self.cells = m.get("cells", {})
        self.driver = {}                     # bit -> (cell name, port)
        self.loads = collections.defaultdict(list)     # bit -> [(cell name, port)]
        for cname, c in self.cells.items():
            dirs = c.get("port_directions", {})
            for port, bits in c["connections"].items():
                out = dirs.get(port) == "output"
                for b in bits:
                    if isinstance(b, str):
                        continue
                    if out:
                        self.driver[b] = (cname, port)
                    else:
                        self.loads[b].append((cname, port))
        self.name = {}                        # bit -> (best name, index)
        for nname, n in m.get("netnames", {}).items():
            bits = n["bits"]
            for i, b in enumerate(bits):
                if isinstance(b, str):
                    continue
                label = nname if len(bits) == 1 else f"{nname}[{i}]"
                old = self.name.get(b)
                if old is None or _name_score(label) < _name_score(old):
                    self.name[b] = label
        self.inputs = set()
        for pname, p in m.get("ports", {}).items():
            if p["direction"] in ("input", "inout"):
                self.inputs.update(b for b in p["bits"] if not isinstance(b, str))

    def fanout(self, bit):
        return len(self.loads.get(bit, ()))

    def net_penalty(self, bit):
        f = self.fanout(bit)
        return FANOUT_WEIGHT * math.log2(f / FANOUT_FREE) if f > FANOUT_FREE else 0.0


def analyse_netlist(net):
    """Arrival level of every bit of :class:`Netlist` ``net``: ``(arrival, pred)`` where
    ``pred[bit]`` is the input bit on its deepest path (None at a path start)."""
    arrival, pred = {}, {}
    cells = net.cells

    def start_level(bit):
        drv = net.driver.get(bit)
        if drv is None:
            return 0.0                      # top input or constant
        ctype = cells[drv[0]]["type"]
        if ctype in _COMB:
            return None
        return _SEQ_START.get(ctype, 0.0)

    for root in list(net.driver) + list(net.inputs):
        if root in arrival:
            continue
        stack, on_stack = [root], {root}
        while stack:
            bit = stack[-1]
            if bit in arrival:
                on_stack.discard(stack.pop())
                continue
            s = start_level(bit)
            if s is not None:
                arrival[bit], pred[bit] = s, None
                on_stack.discard(stack.pop())
                continue
            cname, oport = net.driver[bit]
            c = cells[cname]
            dirs = c["port_directions"]
            pending = False
            best, best_in, found = 0.0, None, False
            for iport, bits in c["connections"].items():
                if dirs.get(iport) != "input":
                    continue
                d = _comb_delay(c["type"], oport, iport)
                if d is None:
                    continue
                for b in bits:
                    if isinstance(b, str):
                        continue
                    if b not in arrival:
                        if b in on_stack:       # combinational loop: cut the back edge
                            if not found or d > best:
                                best, best_in, found = d, None, True
                            continue
                        # descend one input at a time: the stack is then exactly the
                        # chain of ancestors, and on_stack detects loops only
                        stack.append(b)
                        on_stack.add(b)
                        pending = True
                        break
                    routed = d >= LUT
                    a = arrival[b] + d + (net.net_penalty(b) if routed else 0.0)
                    if not found or a > best:
                        best, best_in, found = a, b, True
                if pending:
                    break
            if pending:
                continue
            arrival[bit], pred[bit] = best, best_in
            on_stack.discard(stack.pop())
    return arrival, pred


def _endpoints(net):
    """(cell name, port, bit) of every path end: sequential cell inputs (not clocks)."""
    for cname, c in net.cells.items():
        if c["type"] in _COMB:
            # LUT-RAM write side ends paths
            if c["type"] == "TRELLIS_DPR16X4":
                for port, bits in c["connections"].items():
                    if port.startswith(("WAD", "DI", "WRE")):
                        for b in bits:
                            if not isinstance(b, str):
                                yield cname, port, b
            continue
        dirs = c.get("port_directions", {})
        for port, bits in c["connections"].items():
            if dirs.get(port) != "input" or port.startswith("CLK") or port == "WCK":
                continue
            for b in bits:
                if not isinstance(b, str):
                    yield cname, port, b


def _group(label):
    """A register's name without its bit index: paths into the bits of one signal group."""
    return _BIT.sub("", label)


def _path(net, pred, bit):
    chain = []
    while bit is not None:
        chain.append(bit)
        bit = pred.get(bit)
    return list(reversed(chain))


def deepest(netlist, n=20, distinct="end"):
    """The ``n`` deepest paths of a Yosys JSON netlist (a dict, or a path to ``synth.json``),
    deepest first, one per distinct end signal (``distinct="end"``), start signal
    (``"start"``) or (start, end) pair (``"both"``). Each is a dict: ``levels``, ``start``,
    ``end`` (signal names), ``end_cell``, ``through`` (named nets on the way, in order) and
    ``lut_levels`` (the LUT4-equivalents along it)."""
    if not isinstance(netlist, dict):
        netlist = json.loads(Path(netlist).read_text())
    net = Netlist(netlist)
    arrival, pred = analyse_netlist(net)
    ends = []
    for cname, port, b in _endpoints(net):
        a = arrival.get(b, 0.0)
        if a <= 0:
            continue
        ends.append((a, cname, port, b))
    ends.sort(key=lambda t: -t[0])
    out, seen = [], set()
    for a, cname, port, b in ends:
        chain = _path(net, pred, b)
        start = _group(net.name.get(chain[0], f"bit{chain[0]}"))
        q = net.cells[cname]["connections"].get("Q") or \
            net.cells[cname]["connections"].get("DOA0") or [None]
        end_sig = _group(net.name.get(q[0], cname)) if q[0] is not None else cname
        if net.cells[cname]["type"] != "TRELLIS_FF":
            end_sig = f"{cname}.{re.sub(r'[0-9]+$', '', port)}"
        key = {"end": end_sig, "start": start, "both": (start, end_sig)}[distinct]
        if key in seen:
            continue
        seen.add(key)
        through = []
        for bit in chain[1:]:
            nm = net.name.get(bit)
            if nm is None:
                continue
            g = _group(nm)
            if _name_score(g)[0] == 0 and (not through or through[-1] != g) and g != start:
                through.append(g)
        luts = sum(1 for bit in chain[1:] if net.driver.get(bit)
                   and net.cells[net.driver[bit][0]]["type"] in ("LUT4", "CCU2C"))
        out.append({"levels": round(a, 2), "start": start, "end": end_sig,
                    "end_port": port, "end_cell": cname, "through": through,
                    "lut_levels": luts, "fanout_start": net.fanout(chain[0])})
        if len(out) >= n:
            break
    return out


def histogram(netlist, width=1.0):
    """``{level bucket: endpoints}`` of all path ends (how many bits sit at each depth)."""
    if not isinstance(netlist, dict):
        netlist = json.loads(Path(netlist).read_text())
    net = Netlist(netlist)
    arrival, _ = analyse_netlist(net)
    h = collections.Counter()
    for _c, _p, b in _endpoints(net):
        h[int(arrival.get(b, 0.0) // width)] += 1
    return dict(sorted(h.items()))


def _strip(name, prefix):
    return name[len(prefix):] if prefix and name.startswith(prefix) else name


def format_paths(paths, prefix="dut.dut."):
    lines = []
    for i, p in enumerate(paths, 1):
        lines.append(f"{i:3d}. {p['levels']:5.2f} levels ({p['lut_levels']} LUT)  "
                     f"{_strip(p['start'], prefix)} -> {_strip(p['end'], prefix)}")
        if p["through"]:
            thr = [_strip(t, prefix) for t in p["through"]]
            if len(thr) > 8:
                thr = thr[:4] + ["..."] + thr[-3:]
            lines.append("       via " + " > ".join(thr))
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m fpga.depth", description=__doc__.split("\n")[0])
    ap.add_argument("netlist", help="Yosys JSON netlist (synth.json)")
    ap.add_argument("-n", type=int, default=20, help="paths to list (20)")
    ap.add_argument("--distinct", choices=("end", "start", "both"), default="end",
                    help="one path per end signal (default), start signal or pair")
    ap.add_argument("--histogram", action="store_true", help="also print endpoints per level")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    p = Path(args.netlist)
    if not p.is_file():
        print(f"python -m fpga.depth: error: netlist {p}: no such file", file=sys.stderr)
        return 2
    nl = json.loads(p.read_text())
    paths = deepest(nl, n=args.n, distinct=args.distinct)
    if args.json:
        print(json.dumps(paths, indent=2))
    else:
        print(format_paths(paths))
        if args.histogram:
            for k, v in histogram(nl).items():
                print(f"  [{k:3d}, {k + 1:3d}) levels: {v}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
