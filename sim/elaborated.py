"""The registers of an elaborated design, per module (for tests that check which flip-flops
a design has: ``tests/gateware/test_resets.py``, the DMA's partial-sum stages)."""

from amaranth.hdl import Fragment
from amaranth.hdl._ast import Assign, Switch    # (amaranth pinned in pyproject.toml)


def _lhs(stmt, out):
    if isinstance(stmt, Assign):
        for s in stmt.lhs._lhs_signals():
            out[id(s)] = s
    elif isinstance(stmt, Switch):
        for _patterns, stmts, *_ in stmt.cases:
            for st in stmts:
                _lhs(st, out)


def sync_registers(elaboratable):
    """``{"unit.path": [Signal, ...]}``: the signals driven in a clocked domain, per module."""
    regs = {}

    def walk(frag, path):
        for domain, stmts in frag.statements.items():
            if domain == "comb":
                continue
            sigs = {}
            for st in stmts:
                _lhs(st, sigs)
            regs.setdefault(path, []).extend(sigs.values())
        for sub, name, *_ in frag.subfragments:
            walk(sub, f"{path}.{name}" if path else str(name))

    walk(Fragment.get(elaboratable, None), "")
    return regs
