"""The boards ``hotline-hw fpga`` builds for: one entry each (adding a board is one entry).

Each :class:`BoardSpec` names the amaranth-boards platform class, the FPGA family (which
YoWASP tools run), the default preset and the configuration overrides of the board variant,
the role of each LED, the UART and the (optional) restart button. The clock is the board's
default clock (``platform.default_clk``), read from the platform.
"""

import importlib
from dataclasses import dataclass, field

__all__ = ["BoardSpec", "BOARDS", "BoardError", "get_board", "board_names"]


class BoardError(ValueError):
    """An unknown board name (the message lists the boards)."""


@dataclass(frozen=True)
class BoardSpec:
    name: str
    platform: str                 # "module:Class" of amaranth-boards
    family: str                   # "ecp5" or "ice40"
    default_preset: str
    description: str
    leds: tuple                   # role of LED i: heartbeat, running, pass, fail, pass_hb, runN
    uart: str = "uart"
    button: tuple = None          # (resource name, number): restart at once
    overrides: dict = field(default_factory=dict)   # board variant of the default preset
    # host-memory block RAM at most: fpga.program.make_program sizes the RAM to the program
    # (the smallest power of two in which its touched rows do not alias), up to this
    max_ram_bytes: int = 1 << 17
    bitstream: tuple = ()         # files of the build that are the bitstream
    synth_opts: str = ""          # extra synth_<family> options (e.g. -dsp on the UP5K)
    script_after_synth: str = ""  # Yosys commands after synth_<family> (amaranth override)
    nextpnr_opts: str = ""        # extra nextpnr options (--timing-allow-fail is always given)
    uart_line: str = "full"       # the UART line (fpga.board_top.LINES): "short" on the iCE40s

    def platform_class(self):
        mod, cls = self.platform.split(":")
        return getattr(importlib.import_module(mod), cls)

    def clock(self):
        """``(resource name, Hz)`` of the board's default clock."""
        p = self.platform_class()
        return p.default_clk, p().default_clk_frequency


#: iCE40 variant of ``tiny``. The ``tiny`` core needs ~12.8k LUT4 (yosys synth_ice40), more
#: than any iCE40 of amaranth-boards has (UP5K 5280, HX8K 7680); the register block, the
#: statistics and the 64-bit DMA address path did not scale with the configuration. These
#: overrides shrink everything: one lane, 2 tables of 2^4 rows (5-bit keys), 3-bit sample
#: ids, a 2-entry CAM, 2 direct-mapped counters of 3 bits, 2 staging rows per bank, one
#: outstanding read, one-beat (8-byte) rows, 10 address bits (the board program's host RAM
#: is 1 KiB) and 6-bit statistics (12-bit byte counts): every statistic the board program
#: checks stays below 2^6 (the largest, STAT_LOOKUPS and STAT_LEARNED_LOOKUPS, is 32; the
#: byte counts 128), so none wraps and each is compared at its full value. ``queue_ram``
#: "block" keeps the beat queue out of flip-flops (the iCE40 has no LUT RAM). With these,
#: the 32-bit board signatures (fpga/signature.py) and :data:`ICE40_BLOCK_RAM` the hx8k board
#: build fits (docs/fpga.md). It does not fit the UP5K.
ICE40_OVERRIDES = {
    "lanes": 1, "table_bits": 1, "row_bits": 4, "num_tables": 2, "max_sample_lookups": 2,
    "sample_id_bits": 3, "counter_sets": 2, "counter_ways": 1, "counter_banks": 1,
    "counter_bits": 3, "cam_entries": 2, "cam_ways": 2, "staging_rows": 2, "dedup_sets": 2,
    "dedup_ways": 1, "max_outstanding_reads": 1, "axi_id_bits": 1, "row_bytes": 8,
    "max_row_bytes": 8, "addr_bits": 10, "stats_bits": 6, "queue_ram": "block",
}

#: Yosys commands between synth_ice40's ``coarse`` and ``map_ram`` steps (the memories are
#: flattened and their read registers merged by then). First, memories Yosys puts in block
#: RAM beyond its own choice: every memory with a synchronous read port that is at most 16
#: bits wide (one SB_RAM40_4K each at these depths) or a ROM. Yosys' cost model keeps such
#: small memories (the FIFOs, the DMA's filter, the de-dup and counter words) in flip-flops
#: and multiplexers, which on the HX8K cost ~700 logic cells that its 32 block RAMs hold for
#: free. Second, a memory with the ``no_rw_check`` attribute (the board's host RAM,
#: ``fpga.axi_ram``) reads don't-care on a read/write collision: Yosys applies the attribute
#: only where ``memory_dff`` merges a read register into a port, and Amaranth's read ports
#: are synchronous already, so without this the host RAM gets old-word emulation (a write
#: register and a multiplexer per data bit). Its one read and one write port: mask 1'1.
ICE40_BLOCK_RAM = ("setattr -set ram_style \"block\" t:$mem_v2 r:RD_CLK_ENABLE=1'1 %i "
                   "r:WIDTH<=16 r:WR_PORTS=0 %u %i\n"
                   "setparam -set RD_COLLISION_X_MASK 1'1 t:$mem_v2 a:no_rw_check %i "
                   "r:RD_PORTS=1 %i r:WR_PORTS=1 %i")


def ice40_synth(opts=""):
    """``synth_opts`` / ``script_after_synth`` of an iCE40 board: synth_ice40 stops before
    ``map_ram``, :data:`ICE40_BLOCK_RAM` marks the memories, synth_ice40 runs on."""
    pre = f"{opts} " if opts else ""
    return {"synth_opts": f"{pre}-run begin:map_ram",
            "script_after_synth": f"{ICE40_BLOCK_RAM}\nsynth_ice40 {pre}-top top -run map_ram:"}


BOARDS = {b.name: b for b in (
    BoardSpec("ulx3s", "amaranth_boards.ulx3s:ULX3S_85F_Platform", "ecp5", "ulx3s",
              "Radiona ULX3S, ECP5-85F (LFE5U-85F-6BG381C), 25 MHz",
              leds=("heartbeat", "running", "pass", "fail", "run0", "run1", "run2", "run3"),
              button=("button_fire", 0), max_ram_bytes=1 << 14,
              bitstream=("top.bit", "top.svf"),
              # synth_ecp5's last step, `check`, starts with `autoname`, which ran for 15+
              # minutes without end on the ULX3S board top in Yosys 0.23 (the core alone:
              # seconds); stop before it and run the rest of the step. nextpnr's default
              # router1: with one de-dup bank per lane the board top fills 60 % of the
              # logic cells, and router2 stopped converging on it (overused wires 69,967
              # -> 481 at iteration 42, then rising; docs/implementation.md).
              synth_opts="-run begin:check",
              script_after_synth="hierarchy -check\nstat\ncheck -noinit\nblackbox =A:whitebox"),
    BoardSpec("icebreaker", "amaranth_boards.icebreaker:ICEBreakerPlatform", "ice40", "tiny",
              "1BitSquared iCEBreaker, iCE40 UP5K (5280 LUT4, 30 BRAM), 12 MHz",
              leds=("fail", "pass_hb"), button=("button", 0), overrides=ICE40_OVERRIDES,
              max_ram_bytes=1 << 11, bitstream=("top.bin",), uart_line="short",
              **ice40_synth("-dsp")),
    BoardSpec("hx8k", "amaranth_boards.ice40_hx8k_b_evn:ICE40HX8KBEVNPlatform", "ice40", "tiny",
              "Lattice iCE40-HX8K breakout (7680 LUT4, 32 BRAM), 12 MHz",
              leds=("heartbeat", "running", "pass", "fail", "run0", "run1", "run2", "run3"),
              overrides=ICE40_OVERRIDES, max_ram_bytes=1 << 11, bitstream=("top.bin",),
              uart_line="short", **ice40_synth()),
)}


def board_names():
    return list(BOARDS)


def get_board(name):
    try:
        return BOARDS[name]
    except KeyError:
        raise BoardError(f"--board {name!r}: unknown board (choose from "
                         f"{', '.join(BOARDS)})") from None
