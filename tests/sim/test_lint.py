"""``verilator --lint-only -Wall`` on every registered gateware unit (``sim.runner.UNITS``,
except the infrastructure's self-test units), in the variants the cocotb tier simulates.

:data:`sim.lint.GENERATED_WAIVERS` already waives what Amaranth emits in every design; the
waivers below add what this lint found in the generated Verilog of *these* units. Each was
checked by hand in the ``.v`` file and is scoped as narrowly as the message allows: a warning
about a signal or construct not listed here still fails the test.
"""

import importlib
import importlib.util

import pytest

from hotline_hw.config import preset
from hotline_hw.gateware.export import PortMap
from sim import runner
from sim.lint import Waiver, assert_lint_clean, lint_report

# Idioms of Yosys' Verilog writer (Amaranth's backend), in every unit. Each renders Amaranth's
# defined semantics faithfully; none is a choice the designer made.
YOSYS_IDIOMS = (
    # `x == 0` and `~x.any()` become a $logic_not cell, which Yosys writes as `!x` on the
    # whole vector: Verilog defines `!` for any width (1 iff every bit is 0).
    Waiver("WIDTHTRUNC", r"^Logical operator LOGNOT expects 1 bit on the LHS", reason=
           "Yosys writes `x == 0` / `~x.any()` as `!x`, defined for any width."),
    # Yosys writes constants at their own width (`sets[1:0] == 1'h1`, `x < 9'h100`); Verilog
    # zero-extends them to the other operand's width, exactly Amaranth's unsigned extension.
    Waiver("WIDTHEXPAND", r"^Operator \w+ expects \d+ bits on the [LR]HS, but [LR]HS's CONST '",
           reason="a constant written at its own width and extended by Verilog's context "
                  "rules, as Amaranth extends it"),
    # Binary cells whose operands differ in width (`learned + new_count`: 32 + 3 bits,
    # `phase + 1 >= period`: 17 vs 16 bits) take one operand from a numbered temporary; Verilog
    # zero-extends it, as Amaranth does. Only `$N` temporaries: a named signal stays reported.
    Waiver("WIDTHEXPAND", r"^Operator \w+ expects \d+ bits on the [LR]HS, but [LR]HS's "
           r"VARREF '\$\d+' generates", reason=
           "an operand temporary of an arithmetic/compare cell, extended as Amaranth extends it"),
    # A dynamic index into an array or a word_select (`setbuf[way]`, `payload[lane]`) is a
    # $shiftx cell: Yosys writes `assign $N = vector >> (index * width);` into a wire of the
    # element's width, which keeps the low bits, i.e. the selected element.
    Waiver("WIDTHTRUNC", r"^Operator ASSIGNW expects \d+ bits on the Assign RHS, but Assign "
           r"RHS's SHIFTR generates \d+ bits", reason=
           "a dynamic array index / word_select written as a shift into an element-wide wire"),
    # The `a__b` nets of interface members (memory ports `rp.addr`, `wp.data`, ...) that
    # Amaranth uniquifies with a `$N` suffix when a component has several (one memory per
    # bank): GENERATED_WAIVERS' `a__b` waiver has the same reason but its pattern stops at
    # the `$`.
    Waiver("UNUSEDSIGNAL", r"^Signal is not used: '[A-Za-z0-9_]+__[A-Za-z0-9_]+\$\d+'$", reason=
           "an alias net of an interface member, uniquified with `$N` (see GENERATED_WAIVERS)"),
)

# Named Signals that Amaranth writes as alias wires (`assign hit = {$381, ...};`) whose readers
# use the driving net instead: waveform names, never read by logic. Each checked in the .v.
# Instance patterns match the unit standalone (`counters.dut`) and inside another unit
# (`popularity.dut.counters`).
COUNTERS = r"(counters\.dut|.*\.counters)"
CAM = r"(cam\.dut|.*\.cam)"
INSTALL = r"(install\.dut|.*\.install)"
UNIT_WAIVERS = {
    "counters": (
        # AccessCounterArray._update's per-bank intermediates `hit` and `victim_count`, the
        # input's `new_sets` (lanes == 1: the one lane's hash), and the response FIFO's
        # outputs `r_data`/`r_rdy` (= read_resp.payload/valid).
        Waiver("UNUSEDSIGNAL", r"^Signal is not used: '(hit|victim_count|new_sets|r_data|r_rdy)"
               r"(\$\d+)?'$", instance=COUNTERS, reason=
               "alias wires of named signals, read through their driving nets"),
        # The row and valid bit of the write before `lw` (`lw2_*`): S1W's selects are
        # registers made from S1's compares, and these are only the reference the
        # amaranth.sim register copy checks them against; no logic reads them.
        Waiver("UNUSEDSIGNAL", r"^Signal is not used: 'lw2_(row|valid)_b\d+'$",
               instance=COUNTERS, reason=
               "the reference of a register copy checked in amaranth.sim only"),
        # amaranth.lib.fifo.SyncFIFO (the read-response queue): `produce`/`consume` alias the
        # memory port addresses, `w_level`/`r_level` alias `level`, `w_data` the write port.
        Waiver("UNUSEDSIGNAL", r"^Signal is not used: '(produce|consume|w_level|r_level|"
               r"w_data)'$", instance=COUNTERS + r"\.resp_queue", reason=
               "alias wires inside Amaranth's own SyncFIFO"),
    ),
    "cam": (
        # PopularityCAM: `resp`/`resp_valid` = read_resp.payload/valid, `port_free`
        # (constant 1 in a `full` CAM, so folded away), `s2_set<odd>` = the B-port read
        # address it drives directly.
        Waiver("UNUSEDSIGNAL", r"^Signal is not used: '(resp|resp_valid|port_free|s2_set\d+)'$",
               instance=CAM, reason="alias wires of named signals, read through their "
                                    "driving nets"),
    ),
    "install": (
        # InstallEngine's PREFIX walk: `level == eff_thr` compares the (counter_bits + 1)-bit
        # level counter with the counter_bits-bit effective threshold; zero-extension is what
        # the design means (both are unsigned count values).
        Waiver("WIDTHEXPAND", r"^Operator EQ expects \d+ bits on the RHS, but RHS's VARREF "
               r"'eff_thr' generates", instance=INSTALL, reason=
               "unsigned threshold zero-extended to the level counter's width, as intended"),
    ),
}
# PopularityEngine holds the three units above. (Its instance of the counter array leaves
# `idle` unread: PopularityEngine does not use AccessCounterArray.idle, its install reads
# queue behind every accepted lookup instead; the member-alias waiver below covers it.)
UNIT_WAIVERS["popularity"] = (UNIT_WAIVERS["counters"] + UNIT_WAIVERS["cam"]
                              + UNIT_WAIVERS["install"])


#: Units built from other registered units (their members' alias wires appear there too).
SUBUNITS = {"popularity": ("counters", "cam", "install"),
            "hotline": ("popularity", "fragmenter", "dma", "registers")}


def _rescoped(waivers, old, new):
    """``waivers`` with ``old`` replaced by ``new`` in their instance pattern: a unit's own
    waivers, for the same unit inside the accelerator top."""
    import dataclasses
    return tuple(dataclasses.replace(w, instance=w.instance.replace(old, new))
                 if w.instance and old in w.instance else w for w in waivers)


def hotline_waivers():
    """The top holds every unit under its registered name (``hotline.dut.fragmenter``...)."""
    return (UNIT_WAIVERS["popularity"]
            + _rescoped(unit_waivers("fragmenter"), r"fragmenter\.dut", r"hotline\.dut\.fragmenter")
            + _rescoped(unit_waivers("dma"), r"dma\.dut", r"hotline\.dut\.dma")
            + _rescoped(unit_waivers("registers"), r"registers\.dut", r"hotline\.dut\.registers"))


def _members(unit, cfg):
    pmap = PortMap.load(runner.prepare(unit, cfg).ports)
    return {pmap.port(n).path[0] for n in pmap.names if len(pmap.port(n).path) == 1}


def port_alias_waiver(unit, cfg):
    """Amaranth keeps a wire named after each plain port member (`learn_start`, `busy`, ...,
    `$N`-suffixed when the name is taken); when the member is forwarded to or from a
    submodule (`connect()`, an assignment) the port net carries the value and that wire is
    read by nothing. The names come from the unit's own ports.json (and those of the units it
    is built from); only whole plain members, in the unit's instances."""
    subs = SUBUNITS.get(unit, ())
    names = set(_members(unit, cfg)).union(*(_members(u, cfg) for u in subs))
    inst = rf"{unit}\.dut" + (rf"(\.({'|'.join(subs)}))?" if subs else "")
    return Waiver("UNUSEDSIGNAL", rf"^Signal is not used: '({'|'.join(sorted(names))})(\$\d+)?'$",
                  instance=inst, reason="alias wire of a forwarded port member")


# The counter variants of tests/sim/test_counters_cocotb.py (same names, so the same
# generated Verilog): lanes 1/2/4, 1024 x 4 x 12 bits and 64 x 8 x 4 bits, aging.
COUNTER_VARIANTS = {
    "l1-1k4": dict(lanes=1, counter_sets=1024, counter_ways=4),
    "l2-64x8": dict(lanes=2, counter_sets=64, counter_ways=8, counter_banks=4, counter_bits=4),
    "l4-64x8-age2": dict(lanes=4, counter_sets=64, counter_ways=8, counter_banks=4,
                         counter_bits=4, aging_period=2),
    "l4-1k4": dict(lanes=4, counter_sets=1024, counter_ways=4),
}


def _cases():
    units = sorted(u for u in runner.UNITS if not u.startswith("selftest"))
    cases = []
    for unit in units:
        cases += [pytest.param(unit, preset("tiny"), id=f"{unit}-tiny"),
                  pytest.param(unit, preset("ulx3s"), id=f"{unit}-ulx3s")]
    cases += [pytest.param("counters", preset("ulx3s", name=f"cnt-{n}", **kw), id=f"counters-{n}")
              for n, kw in COUNTER_VARIANTS.items()]
    return cases


def _variant(unit, cfg, *, skip=True):
    try:
        return runner.prepare(unit, cfg)
    except ImportError as e:        # registered, but its module does not exist (yet)
        if skip:
            pytest.skip(f"unit {unit!r} cannot be built: {e}")
        return None


def unit_waivers(unit):
    """The waivers of ``unit``: :data:`UNIT_WAIVERS`, else ``LINT_WAIVERS`` of its testbench
    module ``sim.tb_<unit>`` (a unit can keep its justified waivers beside its testbench)."""
    if unit == "hotline":
        return hotline_waivers() + tuple(getattr(importlib.import_module("sim.tb_hotline"),
                                                 "LINT_WAIVERS", ())) if _has_tb("hotline") \
            else hotline_waivers()
    if unit in UNIT_WAIVERS:
        return UNIT_WAIVERS[unit]
    try:
        mod = importlib.import_module(f"sim.tb_{unit}")
    except ImportError:
        return ()
    return tuple(getattr(mod, "LINT_WAIVERS", ()))


def _has_tb(unit):
    return importlib.util.find_spec(f"sim.tb_{unit}") is not None


def _waivers(unit, cfg):
    return YOSYS_IDIOMS + unit_waivers(unit) + (port_alias_waiver(unit, cfg),)


@pytest.mark.parametrize("unit, cfg", _cases())
def test_lint_clean(unit, cfg):
    v = _variant(unit, cfg)
    assert_lint_clean(v.verilog, waivers=_waivers(unit, cfg))


def test_every_waiver_is_needed():
    """A waiver that matches nothing in any linted variant must go (the design changed)."""
    used = {}
    for param in _cases():
        unit, cfg = param.values
        v = _variant(unit, cfg, skip=False)
        if v is None:
            continue
        _, waived = lint_report(v.verilog, waivers=_waivers(unit, cfg))
        for w in YOSYS_IDIOMS + unit_waivers(unit):
            used[w] = used.get(w, False) or any(w.matches(x) for x in waived)
    assert all(used.values()), "waivers that match nothing: " + "; ".join(
        f"{w.code} {w.pattern!r} ({w.instance})" for w, u in used.items() if not u)
