"""cocotb simulation of the generated Verilog: the runner (:mod:`sim.runner`), stream bus
models (:mod:`sim.streams`), the Verilator lint (:mod:`sim.lint`) and the testbenches
(``sim/tb_<unit>.py``). See ``sim/README.md``.

Importing this package (which every ``sim.tb_*`` module does, inside the simulator too)
ignores the ``DeprecationWarning``\\ s that cocotbext-axi 0.1.28 raises on cocotb 2: it still
calls cocotb 1 APIs (``setimmediatevalue``, ``Task.kill``). ``PYTHONWARNINGS=error`` reaches
the simulator's Python, where these would fail every AXI testbench. The filter is scoped to
warnings raised from ``cocotbext.*`` modules: deprecated calls in our own code still fail.
"""

import warnings

warnings.filterwarnings("ignore", category=DeprecationWarning, module=r"cocotbext\.")
