"""Fixtures of the cocotb tier (tests/sim): the ``sim`` fixture runs a test once per simulator.

``HOTLINE_SIMS=icarus`` (comma-separated) restricts the simulators; a simulator that is
missing or too old skips its tests with the reason (see sim/runner.py).
"""

import os
import sys
from pathlib import Path

import pytest

# `sim.*` (testbenches, runner) lives at the repository root, which is not an installed
# package: make it importable however pytest was started (cocotb's runner then passes this
# sys.path to the simulator's Python).
_ROOT = str(Path(__file__).resolve().parents[2])
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)

SIMS = tuple(s.strip() for s in os.environ.get("HOTLINE_SIMS", "icarus,verilator").split(",")
             if s.strip())


@pytest.fixture(params=SIMS)
def sim(request):
    """The simulator name, ``"icarus"`` or ``"verilator"``."""
    return request.param
