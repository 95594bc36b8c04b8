"""cocotb regression of the GatherScatterDMA (``sim/tb_dma.py``) on the generated Verilog,
Icarus and Verilator: cocotbext-axi AxiRam with latency, reordering and pauses, whole-memory
comparison with the golden prediction, error injection and recovery, and a soft reset with
AXI transactions in flight (``busy`` high until every AR and AW issued has been answered)."""
import pytest

from hotline_hw.config import preset
from sim.runner import run_cocotb

#: variant name -> config. ``tiny``: 64-bit bus, 4 reads in flight, 16-row banks, rows up to
#: 64 B. ``w128``: 128-bit bus, 8 IDs for 16 reads in flight (IDs reused), rows up to 256 B.
#: ``rows24``: ``tiny`` with 24-bit rows.
VARIANTS = {
    "tiny": preset("tiny"),
    "w128": preset("tiny", name="dma-w128", axi_data_bits=128, axi_id_bits=3,
                   max_outstanding_reads=16, row_bytes=32, max_row_bytes=256,
                   staging_rows=32, dedup_sets=16),
    # 24-bit rows: wider than one multiplier input, so the J pipeline has a partial-sum
    # stage (J2s1) between the products and the addresses
    "rows24": preset("tiny", name="dma-rows24", row_bits=24),
}

@pytest.mark.parametrize("variant", list(VARIANTS))
def test_dma_cocotb(variant, sim):
    r = run_cocotb("dma", VARIANTS[variant], sim=sim, test_module="sim.tb_dma")
    ran = {n for n, s in r.tests.items() if s == "passed"}
    assert len(ran) == 7, r.tests


@pytest.mark.slow
@pytest.mark.parametrize("variant", list(VARIANTS))
def test_dma_cocotb_long(variant, sim):
    run_cocotb("dma", VARIANTS[variant], sim=sim, test_module="sim.tb_dma",
               extra_env={"HOTLINE_TB_SCALE": "8"}, timeout_s=1800)
