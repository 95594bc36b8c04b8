"""cocotb regression of the mini-batch fragmenter (``sim/tb_fragmenter.py``) on the
generated Verilog, Icarus and Verilator, against the golden model: a Criteo Kaggle-like
one-hot trace of 50 mini-batches and a DLRMv2 multi-hot trace (214 lookups per sample), with
random idle on the input and independent random backpressure on each output.

Both traces run on one build (26-bit rows, 256-lookup samples, 4 lanes). A small CAM and
staging bank make hits, staging-full and de-dup-full refusals all occur with mini-batches of
a few samples. The 8-lane variant (a long Verilator build) runs with ``--slow`` and in
``bench/fragmenter_bench.py``."""
import pytest

from hotline_hw.config import preset
from sim.runner import run_cocotb

FRAG = preset("ulx3s", name="frag-l4", lanes=4, row_bits=26, max_sample_lookups=256,
              cam_entries=512, cam_ways=8, staging_rows=128, dedup_sets=64, dedup_ways=4,
              counter_sets=1024)
FRAG8 = FRAG.replace(name="frag-l8", lanes=8, staging_rows=512, dedup_sets=128, dedup_ways=8)
#: One de-dup bank (two 16-way sets) behind 4 lanes: its write queue holds 4 indices and
#: drains one per cycle, and a retiring beat pushes up to 4.
FRAG_WQ = FRAG.replace(name="frag-wq", staging_rows=32, dedup_sets=2, dedup_ways=16)

TRACES = {
    # trace: environment of the testbench
    "kaggle": {"HOTLINE_TB_WORKLOAD": "kaggle", "HOTLINE_TB_BATCHES": "50",
               "HOTLINE_TB_BATCH_SIZE": "16"},
    "dlrmv2": {"HOTLINE_TB_WORKLOAD": "dlrmv2", "HOTLINE_TB_BATCHES": "6",
               "HOTLINE_TB_BATCH_SIZE": "4"},
}


@pytest.mark.parametrize("trace", list(TRACES))
def test_fragment_trace(trace, sim):
    r = run_cocotb("fragmenter", FRAG, sim=sim, test_module="sim.tb_fragmenter",
                   extra_env=TRACES[trace])
    assert r.tests == {"fragment_trace": "passed"}


def test_write_queue_full(sim):
    """The outputs stop for up to 24 cycles at a time while the bank looks up the next
    beats' misses; when they take again, beats of new rows retire back to back and would
    push more indices than the bank's write queue holds, so retire must wait for its room.
    Mini-batches of two Kaggle samples end with samples that repeat their rows, whose
    indices are read back after the queue drained: a retire that ignores the room (a full
    queue overwrites indices) fails here on both simulators."""
    env = {"HOTLINE_TB_WORKLOAD": "kaggle", "HOTLINE_TB_BATCHES": "40",
           "HOTLINE_TB_BATCH_SIZE": "2", "HOTLINE_TB_HOT": "0", "HOTLINE_TB_REPEATS": "3",
           "HOTLINE_TB_IDLE": "0", "HOTLINE_TB_BACKPRESSURE": "0.1", "HOTLINE_TB_STALL": "24"}
    r = run_cocotb("fragmenter", FRAG_WQ, sim=sim, test_module="sim.tb_fragmenter",
                   extra_env=env)
    assert r.tests == {"fragment_trace": "passed"}


@pytest.mark.slow
@pytest.mark.parametrize("trace", list(TRACES))
def test_fragment_trace_8_lanes(trace):
    r = run_cocotb("fragmenter", FRAG8, sim="verilator", test_module="sim.tb_fragmenter",
                   extra_env=TRACES[trace], timeout_s=3600)
    assert r.tests == {"fragment_trace": "passed"}
