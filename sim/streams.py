"""cocotb 2 bus models for Amaranth-style streams on a module exported by
:mod:`hotline_hw.gateware.export` (valid / ready / payload, single-underscore port names).

- :class:`StreamSource` drives a stream into the DUT, with random idle cycles;
- :class:`StreamSink` takes a stream out of the DUT, with random backpressure;
- :class:`StreamMonitor` passively records a stream's handshakes; it is *the* way to receive a
  valid-only stream (no ``ready``: an ``always_ready`` signature, e.g. CAM results).

Each takes the stream by its name (``"lookups"`` for the members ``lookups.*``) and finds the
ports and payload layout in the ``ports.json`` sidecar (:class:`PortMap`), so no testbench
hard-codes a bit offset. Payloads are given and returned as raw ``int`` or as Python values
(``dict`` for structs, ``list`` for arrays), see :class:`Beat`.

Timing: every model drives its outputs right after a rising edge and samples in the
``ReadOnly`` phase of the same cycle; a handshake is one where ``valid`` and ``ready`` are both
high there (never while ``rst`` is high). It completes at the next rising edge, and that is
when :meth:`StreamSource.send` returns and :meth:`StreamSink.recv` delivers the beat, so the
caller resumes in a phase where it may write signals. Sources hold ``valid`` low during reset
and keep ``valid`` and the payload stable until the beat is taken. ``await send()`` per beat
leaves one idle cycle between beats; queue beats with ``send_nowait()`` for back-to-back
traffic.

Helpers: :func:`start_clock`, :func:`reset`, :func:`load_config`, :func:`load_ports`.
AXI4-Stream ports (``tdata``/``tkeep``/``tuser``/``tlast``) use cocotbext-axi's
``AxiStreamSource``/``AxiStreamSink`` instead (see ``sim/README.md``).
"""

import os
import random
from collections import deque
from dataclasses import dataclass

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, Event, ReadOnly, RisingEdge

from hotline_hw.config import HotlineConfig
from hotline_hw.gateware.export import PortMap

__all__ = [
    "Beat", "StreamSource", "StreamSink", "StreamMonitor",
    "start_clock", "reset", "load_config", "load_ports",
]


# --- environment from the runner ---------------------------------------------------------

def load_config(path=None):
    """The :class:`HotlineConfig` the DUT was generated from (``$HOTLINE_CONFIG``): build the
    golden model from this, never from a preset name."""
    path = path or os.environ.get("HOTLINE_CONFIG")
    assert path, "HOTLINE_CONFIG is not set: run this module through sim.runner.run_cocotb"
    return HotlineConfig.load(path)


_port_maps = {}


def load_ports(path=None):
    """The :class:`PortMap` of the DUT (``$HOTLINE_PORTS``, the ``ports.json`` sidecar)."""
    path = path or os.environ.get("HOTLINE_PORTS")
    assert path, "HOTLINE_PORTS is not set: run this module through sim.runner.run_cocotb"
    if path not in _port_maps:
        _port_maps[path] = PortMap.load(path)
    return _port_maps[path]


def start_clock(dut, period_ns=10, *, signal="clk"):
    """Start a free-running clock on ``dut.<signal>``; return the :class:`Clock`."""
    clock = Clock(getattr(dut, signal), period_ns, unit="ns")
    clock.start()
    return clock


async def reset(dut, cycles=4, *, clock="clk", signal="rst"):
    """Hold the synchronous, active-high reset for ``cycles`` rising edges, then release it
    right after an edge."""
    clk, rst = getattr(dut, clock), getattr(dut, signal)
    rst.value = 1
    await ClockCycles(clk, cycles, rising=True)
    rst.value = 0


# --- beats -------------------------------------------------------------------------------

@dataclass(frozen=True)
class Beat:
    """One transferred payload: ``value`` is the raw bits, ``fields`` the decoded Python value
    (``dict`` for a struct payload, ``list`` for an array, ``int`` otherwise). ``beat["tag"]``
    is ``beat.fields["tag"]``. ``cycle`` counts rising edges since the model started."""

    value: int
    fields: object
    cycle: int = 0

    def __getitem__(self, key):
        return self.fields[key]


def _read(handle, what):
    v = handle.value
    try:
        return int(v)
    except ValueError:
        raise AssertionError(f"{what} is {v} (X/Z) while valid") from None


class _StreamModel:
    def __init__(self, dut, prefix, clock, ports, seed):
        self.dut = dut
        self.ports = ports if isinstance(ports, PortMap) else load_ports(ports)
        self.info = self.ports.stream(prefix)
        self.name = prefix
        self.clock = clock
        self.layout = self.info.layout
        self.valid = getattr(dut, self.info.valid) if self.info.valid else None
        self.ready = getattr(dut, self.info.ready) if self.info.ready else None
        self.payload = [(getattr(dut, n), off, w) for n, off, w in self.info.payload_ports]
        self._payload_names = [n for n, _, _ in self.info.payload_ports]
        self.rst = getattr(dut, self.ports.reset) if self.ports.reset else None
        self.rng = random.Random(random.getrandbits(32) if seed is None else seed)
        self.cycle = 0
        self.count = 0       # beats transferred
        self._task = None

    def _in_reset(self):
        return self.rst is not None and str(self.rst.value) == "1"

    def _sample_payload(self):
        raw = 0
        for (h, off, _), name in zip(self.payload, self._payload_names):
            raw |= _read(h, f"{self.name}: payload port {name}") << off
        return Beat(raw, self.layout.unpack(raw), self.cycle)

    def _check_dir(self, want):
        if self.info.direction != want:
            role = "source" if want == "in" else "sink"
            raise ValueError(f"stream {self.name!r} goes {self.info.direction} of the DUT: "
                             f"it cannot take a {type(self).__name__} ({role})")

    def stop(self):
        if self._task is not None:
            self._task.cancel()
            self._task = None


class StreamSource(_StreamModel):
    """Drives stream ``prefix`` into the DUT.

    Parameters
    ----------
    dut, prefix, clock
        The toplevel handle, the stream's name (``"i"`` for ports ``i_valid``, ``i_ready``,
        ``i_<field>``) and the clock handle (``dut.clk``).
    ports : PortMap or path, optional
        The port sidecar; default ``$HOTLINE_PORTS``.
    idle_prob : float
        Probability of inserting an idle cycle (valid low) before each beat; may be changed
        at any time through the attribute of the same name.
    seed : int, optional
        Seed of this model's random generator; default: drawn from ``random`` (which cocotb
        seeds from ``COCOTB_RANDOM_SEED``), so runs replay with the same seed.
    """

    def __init__(self, dut, prefix, clock, ports=None, *, idle_prob=0.0, seed=None):
        super().__init__(dut, prefix, clock, ports, seed)
        self._check_dir("in")
        if self.ready is None or self.valid is None:
            raise ValueError(f"stream {prefix!r} has no ready or no valid (always_ready/"
                             f"always_valid): drive its ports directly")
        self.idle_prob = idle_prob
        self._queue = deque()      # (raw, Event)
        self._current = None       # the beat on the bus
        self._idle_event = Event()
        self._idle_event.set()
        self.valid.value = 0
        self._task = cocotb.start_soon(self._run())

    def _raw(self, payload):
        return self.layout.pack(payload)

    def send_nowait(self, payload):
        """Queue one beat (``int`` raw bits, or a ``dict``/``list`` packed with the layout);
        return an :class:`Event` set when the DUT has accepted it."""
        ev = Event()
        self._queue.append((self._raw(payload), ev))
        self._idle_event.clear()
        return ev

    async def send(self, payload):
        """Queue one beat and wait until the DUT has accepted it."""
        await self.send_nowait(payload).wait()

    async def wait_idle(self):
        """Wait until every queued beat has been accepted."""
        await self._idle_event.wait()

    @property
    def idle(self):
        """No beat queued or on the bus."""
        return not self._queue and self._current is None

    def _drive(self, raw):
        for h, off, w in self.payload:
            h.value = (raw >> off) & ((1 << w) - 1)

    async def _run(self):
        accepted = False
        while True:
            await RisingEdge(self.clock)
            self.cycle += 1
            if accepted:        # the handshake sampled last cycle happened at this edge
                self.count += 1
                self._current[1].set()
                self._current = None
                if not self._queue:
                    self._idle_event.set()
            if self._current is not None and self._in_reset():
                # A beat offered while reset is asserted is offered again afterwards.
                self._queue.appendleft(self._current)
                self._current = None
            if self._current is None and self._queue and not self._in_reset():
                if not (self.idle_prob and self.rng.random() < self.idle_prob):
                    self._current = self._queue.popleft()
                    self._drive(self._current[0])
            self.valid.value = 1 if self._current is not None else 0
            await ReadOnly()
            accepted = (self._current is not None and str(self.ready.value) == "1"
                        and not self._in_reset())


class StreamSink(_StreamModel):
    """Takes stream ``prefix`` out of the DUT, deasserting ``ready`` at random.

    ``backpressure_prob`` is the probability that ``ready`` is low in a cycle (changeable at
    any time). With ``stall_cycles`` N > 1 each stall drawn that way lasts 1..N cycles
    (uniform), so ``ready`` comes in long low and high runs: a consumer that stops for a
    while and then takes a burst, which fills the DUT's queues as random single-cycle
    stalls rarely do. Received beats queue up; read them with :meth:`recv` / :meth:`recv_nowait`.
    With ``check_protocol`` (the default) the sink also fails the test when the DUT breaks the
    stream rule: once ``valid`` is high, it stays high and the payload stays unchanged until
    the beat is taken. Other parameters as :class:`StreamSource`.
    """

    def __init__(self, dut, prefix, clock, ports=None, *, backpressure_prob=0.0, seed=None,
                 check_protocol=True, stall_cycles=1):
        super().__init__(dut, prefix, clock, ports, seed)
        self._check_dir("out")
        if self.ready is None or self.valid is None:
            raise ValueError(f"stream {prefix!r} has no ready or no valid: use StreamMonitor")
        self.backpressure_prob = backpressure_prob
        self.stall_cycles = stall_cycles
        self.check_protocol = check_protocol
        self._queue = deque()
        self._event = Event()
        self.ready.value = 0
        self._task = cocotb.start_soon(self._run())

    async def recv(self):
        """The next :class:`Beat` (waits for it)."""
        while not self._queue:
            self._event.clear()
            await self._event.wait()
        return self._queue.popleft()

    def recv_nowait(self):
        """The next :class:`Beat`, or ``None`` when none has arrived."""
        return self._queue.popleft() if self._queue else None

    def empty(self):
        return not self._queue

    async def _run(self):
        pending = None
        stalled = None          # the beat offered but not taken last cycle
        hold = 0                # cycles of the current stall still to come
        while True:
            await RisingEdge(self.clock)
            self.cycle += 1
            if pending is not None:     # transferred at this edge
                self.count += 1
                self._queue.append(pending)
                self._event.set()
                pending = None
            if hold:
                hold, r = hold - 1, False
            else:
                r = not (self.backpressure_prob and self.rng.random() < self.backpressure_prob)
                if not r and self.stall_cycles > 1:
                    hold = self.rng.randrange(self.stall_cycles)
            self.ready.value = 1 if r else 0
            await ReadOnly()
            if self._in_reset():
                stalled = None
                continue
            valid = str(self.valid.value) == "1"
            if self.check_protocol and stalled is not None:
                assert valid, (f"{self.name}: valid dropped at cycle {self.cycle} before beat "
                               f"{stalled.fields} was taken (stream protocol)")
                now = self._sample_payload()
                assert now.value == stalled.value, (
                    f"{self.name}: payload changed from {stalled.fields} to {now.fields} at "
                    f"cycle {self.cycle} while waiting for ready (stream protocol)")
            if valid:
                beat = self._sample_payload()
                if r:
                    pending, stalled = beat, None
                else:
                    stalled = beat
            else:
                stalled = None


class StreamMonitor(_StreamModel):
    """Records every handshake of stream ``prefix`` without driving anything: ``valid`` (and
    ``ready`` when the stream has one) high in the ``ReadOnly`` phase of a cycle. For a
    valid-only stream this is the receiver; on a stream with ready, it watches a
    :class:`StreamSource` or :class:`StreamSink` (or the DUT's own handshakes)."""

    def __init__(self, dut, prefix, clock, ports=None):
        super().__init__(dut, prefix, clock, ports, 0)
        self._queue = deque()
        self._event = Event()
        self._task = cocotb.start_soon(self._run())

    async def recv(self):
        while not self._queue:
            self._event.clear()
            await self._event.wait()
        return self._queue.popleft()

    def recv_nowait(self):
        return self._queue.popleft() if self._queue else None

    def empty(self):
        return not self._queue

    async def _run(self):
        pending = None
        while True:
            await RisingEdge(self.clock)
            self.cycle += 1
            if pending is not None:
                self.count += 1
                self._queue.append(pending)
                self._event.set()
                pending = None
            await ReadOnly()
            if self._in_reset():
                continue
            if self.valid is not None and str(self.valid.value) != "1":
                continue
            if self.ready is not None and str(self.ready.value) != "1":
                continue
            pending = self._sample_payload()
