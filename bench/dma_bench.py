#!/usr/bin/env python3
"""Read-channel efficiency of the GatherScatterDMA during a gather of random rows.

    .venv/bin/python bench/dma_bench.py [--quick] [--rows N] [--json] [--sim verilator]

For each case (row size 64 or 512 bytes, bus 64 or 256 bits, memory latency 0 or 200 cycles)
it generates the DMA for a variant with enough reads in flight (``max_outstanding_reads =
128``, 16 IDs, so several IDs are reused), builds it with Verilator and runs the
``bench_gather`` test of ``sim/tb_dma.py`` through ``run_cocotb``: a gather of ``--rows``
random rows (10,000 by default, 1,000 with ``--quick``) from three host tables into one
staging bank, the memory being cocotbext-axi's RAM with the given pipelined latency on reads
and write responses (read data reordered across IDs). The figure is

    efficiency = R data beats / cycles from the first AR handshake to the last R beat

(1.0 = the read channel carried a beat every cycle). The staging writes run at the same time
on the write channels.
"""

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from hotline_hw.config import preset                             # noqa: E402
from sim.runner import run_cocotb                                # noqa: E402

ROW_BYTES = (64, 512)
BUS_BITS = (64, 256)
LATENCIES = (0, 200)


def bench_cfg(row_bytes, bus_bits):
    return preset("tiny", name=f"dmabench-r{row_bytes}-b{bus_bits}", row_bits=14,
                  staging_rows=16384, dedup_sets=4096, axi_data_bits=bus_bits,
                  axi_id_bits=4, max_outstanding_reads=128, row_bytes=row_bytes,
                  max_row_bytes=512)


def run_case(row_bytes, bus_bits, latency, rows, sim):
    cfg = bench_cfg(row_bytes, bus_bits)
    with tempfile.TemporaryDirectory() as d:
        out = Path(d) / "bench.json"
        t0 = time.monotonic()
        run_cocotb("dma", cfg, sim=sim, test_module="sim.tb_dma", testcase="bench_gather",
                   extra_env={"HOTLINE_BENCH": f"{rows},{latency}",
                              "HOTLINE_BENCH_OUT": str(out)},
                   timeout_s=3600)
        res = json.loads(out.read_text())
    res["seconds"] = round(time.monotonic() - t0, 1)
    return res


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="1,000 rows per case")
    ap.add_argument("--rows", type=int, default=None)
    ap.add_argument("--sim", default="verilator", choices=("verilator", "icarus"))
    ap.add_argument("--json", action="store_true", help="print JSON instead of a table")
    args = ap.parse_args(argv)
    rows = args.rows or (1000 if args.quick else 10_000)
    results = []
    for rb in ROW_BYTES:
        for bus in BUS_BITS:
            for lat in LATENCIES:
                r = run_case(rb, bus, lat, rows, args.sim)
                results.append(r)
                if not args.json:
                    print(f"row {rb:4d} B  bus {bus:3d} b  ({rb * 8 // bus:3d} beats/row)  "
                          f"latency {lat:3d}:  {r['beats']:7d} beats / {r['cycles']:7d} cycles"
                          f"  = {r['efficiency']:.3f}   ({r['seconds']} s)", flush=True)
    if args.json:
        print(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
