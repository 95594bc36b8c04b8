"""Lint waivers of the accelerator top (the end-to-end cocotb testbench comes with the next
issue). tests/sim/test_lint.py adds the waivers of every unit the top holds, rescoped to
their instances inside it."""

from sim.lint import Waiver

LINT_WAIVERS = (
    # HotlineAccelerator: named registers that drive register-block inputs directly
    # (`sticky_*`, the CAM access results), the fragmenter's CAM lanes forwarded to the CAM,
    # and unit outputs the top has no use for: alias wires read through their driving nets.
    Waiver("UNUSEDSIGNAL", r"^Signal is not used: '(sticky_\w+|cam_(used|rej|key|done)|"
           r"cam_lookup_valid|cam_lookup_keys)'$", instance=r"hotline\.dut", reason=
           "alias wires of named signals, read through their driving nets"),
    Waiver("UNUSEDSIGNAL", r"^Signal is not used: '(idle|busy|done|busy\$\d+|popular_base|"
           r"w_level)'$", instance=r"hotline\.dut\.\w+(\.\w+)?", reason=
           "alias wires of unit ports that the top reads through their driving nets"),
    # Each key of s_axis_lookup is padded to whole bytes; the padding bits carry nothing.
    Waiver("UNUSEDSIGNAL", r"^Bits of signal are not used: 's_axis_lookup__tdata'",
           instance=r"hotline\.dut", reason="the byte padding of each key in tdata"),
)
