"""cocotb regression of the mini-batch fragmenter (``sim/tb_fragmenter.py``) on the
generated Verilog, Icarus and Verilator, against the golden model: a Criteo Kaggle-like
one-hot trace of 50 mini-batches and a DLRMv2 multi-hot trace (214 lookups per sample), with
random idle on the input and independent random backpressure on each output."""
import pytest

from hotline_hw.config import preset
from sim.runner import run_cocotb

# A small CAM and staging bank so that, with 16-sample mini-batches, hits, staging-full and
# de-dup-full refusals all occur.
KAGGLE = preset("ulx3s", name="frag-kaggle", cam_entries=512, cam_ways=8, staging_rows=128,
                dedup_sets=64, dedup_ways=4, counter_sets=1024)
DLRMV2 = preset("ulx3s", name="frag-dlrmv2", lanes=8, row_bits=26, max_sample_lookups=256,
                cam_entries=512, cam_ways=8, staging_rows=512, dedup_sets=128, dedup_ways=8,
                counter_sets=1024)

VARIANTS = {
    # variant: (config, environment)
    "kaggle": (KAGGLE, {"HOTLINE_TB_BATCHES": "50", "HOTLINE_TB_BATCH_SIZE": "16"}),
    "dlrmv2": (DLRMV2, {"HOTLINE_TB_BATCHES": "6", "HOTLINE_TB_BATCH_SIZE": "4"}),
}


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_fragment_trace(variant, sim):
    cfg, env = VARIANTS[variant]
    r = run_cocotb("fragmenter", cfg, sim=sim, test_module="sim.tb_fragmenter", extra_env=env)
    assert r.tests == {"fragment_trace": "passed"}
