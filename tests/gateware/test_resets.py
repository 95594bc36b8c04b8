"""Which flip-flops reset: control registers do, data registers behind a valid bit do not.

A data register whose value matters only while its stage's valid bit says so has no reset
(``reset_less``): it stays off the reset nets, which on ``ulx3s`` reached ~8.7k flip-flops
and were among the start points of the slowest routed paths (``bench/timing_wall.py``).
These tests pin that split down from the elaborated design: the valid bits (whose reset
the design's correctness rests on) reset, the named data registers do not, and the reset
bits of a preset stay within a budget. Behaviour after a reset with stale data in those
registers is checked by the soft-reset tests (``test_dma.py::test_soft_reset_in_flight``,
``sim/tb_dma.py::soft_reset_in_flight``, the fragmenter and top flush tests).
"""

import fnmatch

import pytest

from hotline_hw.config import preset
from hotline_hw.gateware.top import HotlineAccelerator
from sim.elaborated import sync_registers


@pytest.fixture(scope="module")
def ulx3s_regs():
    return sync_registers(HotlineAccelerator(preset("ulx3s")))


def _find(regs, unit, pattern):
    got = [s for s in regs.get(unit, []) if fnmatch.fnmatchcase(s.name, pattern)]
    assert got, f"no register {pattern!r} in {unit!r}"
    return got


# (unit, registers without reset, valid bits of the same stages that must reset)
SPLIT = [
    ("popularity.cam", ["s2_set*", "s3_key", "s4_word*", "s5_word*", "s6_set*"],
     ["s2_live", "s3_live", "s4_live", "s5_live", "s6_valid", "s6_match*"]),
    ("popularity.counters", ["s2_pre_b*", "s3_old_b*", "s3_cnt_b*", "lw_data_b*", "lw_row_b*"],
     ["s1_b*", "s2_b*", "s3_b*", "lw_valid_b*", "s2_f1_0_b*"]),
    ("fragmenter.dedup0", ["b1_op", "b2_op", "b3_op", "b2_raw", "b3_word"],
     ["touched", "newcnt", "rptr"]),   # (b1..b3_valid are unnamed: a tuple assignment)
    ("fragmenter", ["d0", "d0s", "e0", "e0s", "rp_beat", "rp_res*", "h*_ord*", "h*_val*"],
     ["d0_valid", "d0s_valid", "e0_valid", "e0s_valid", "rp_valid", "h*_new"]),
    ("dma.core", ["j1_key", "j2i_row", "j2i_n", "j2_p*", "j2_nprod", "j2o_p*", "j2o_tbase",
                  "j2s1_t*", "j2s1_other", "j3_src", "j3_dst",
                  "rj_src", "wr_dst", "r1_data", "t_ptr*", "t_len*"],
     ["j1_bad", "j2i_v", "j2o_v", "j2s1_v", "j3_v", "rj_v", "wr_v", "r1_last", "t_done*",
      "beat_spare", "buf_spare"]),
]


@pytest.mark.parametrize("unit, data_regs, valid_regs", SPLIT, ids=[s[0] for s in SPLIT])
def test_data_registers_have_no_reset_valid_bits_do(ulx3s_regs, unit, data_regs, valid_regs):
    for pat in data_regs:
        with_reset = [s.name for s in _find(ulx3s_regs, unit, pat) if not s.reset_less]
        assert not with_reset, f"{unit}: data registers with a reset: {with_reset}"
    for pat in valid_regs:
        without = [s.name for s in _find(ulx3s_regs, unit, pat) if s.reset_less]
        assert not without, f"{unit}: control registers without reset: {without}"


def test_reset_bits_within_budget(ulx3s_regs):
    """21,084 flip-flop bits reset on ``ulx3s`` before the data registers lost theirs;
    13,510 after (the register block's 2.5k and the statistics are architectural)."""
    bits = sum(len(s) for sigs in ulx3s_regs.values() for s in sigs if not s.reset_less)
    assert bits <= 14_000, bits
