"""The learning and lookup half of the accelerator: counter array, install engine and CAM.

:class:`PopularityEngine` wires the three units of this half together the way the top
uses them:

* the ``lookups`` stream feeds the :class:`~.counters.AccessCounterArray` (LEARN);
* ``install_start`` runs the :class:`~.install.InstallEngine`, which reads the counter array
  through its read port and writes the :class:`~.cam.PopularityCAM` through its write port,
  emitting one ``placed`` record (key, slot) per installed row for the DMA's placement copy;
* the CAM answers ``lanes`` lookups per cycle on ``lookup_*`` / ``result_*`` (TRAIN);
* the host reaches the CAM through ``host_write`` / ``host_read_req`` / ``host_read_resp``
  (loading an offline profile, reading back where rows live, eviction) whenever no install
  is running; ``cam_clear`` empties it.

Protocol (what the top's control logic does): INSTALL = evict (read back every slot), pulse
``cam_clear``, wait until ``busy`` is low, pulse ``install_start``, wait for
``install_done``. Lookups to the CAM are not made during an install.
"""

from amaranth.hdl import Module
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out, connect, flipped

from .cam import PopularityCAM
from .counters import AccessCounterArray
from .install import InstallEngine, placed_layout

__all__ = ["PopularityEngine"]


class PopularityEngine(wiring.Component):
    """Counter array + install engine + popularity CAM.

    Parameters
    ----------
    cfg : HotlineConfig

    Members
    -------
    lookups : In(stream)
        To the counter array: ``keys`` (``lanes`` keys), ``keep``, ``last`` (end of a
        mini-batch); see :class:`~.counters.AccessCounterArray`.
    learn_start : In(1)
        Pulse: clear the counter array and begin a learning phase.
    learn_period : In(16)
        LEARN_PERIOD.
    install_start : In(1)
        Pulse: install the popular set into the (cleared) CAM.
    threshold : In(counter_bits)
        LEARN_THRESHOLD.
    install_done : Out(1)
        One-cycle pulse at the end of an install.
    installed, skipped, candidates : Out(32)
        Figures of the last install (see :class:`~.install.InstallEngine`).
    sampled, learned, minibatches : Out(32)
        Learning figures (see :class:`~.counters.AccessCounterArray`).
    placed : Out(stream(key, slot))
        Placement records of the last install, in install order.
    lookup_valid, lookup_keys, result_valid, result_hit, result_slot
        The CAM's lookup lanes, ``LATENCY`` cycles from key to result.
    host_write, host_read_req, host_read_resp
        The CAM's host port (held off while an install runs).
    cam_clear : In(1)
        Pulse: erase every CAM entry.
    write_rejected : Out(32)
        Host writes the CAM rejected.
    busy : Out(1)
        A counter sweep, a CAM clear or an install is running.
    cam_busy : Out(1)
        A CAM clear or an install is running (the CAM's contents are changing; lookups must
        wait). It rises only the cycle after ``cam_clear`` / ``install_start`` (or with the
        reset): a registered copy, taken with ``init=1``, stays high whenever it is.
    """

    def __init__(self, cfg):
        self.cfg = cfg
        self._counters = AccessCounterArray(cfg)
        # parts whose `register_copies` the amaranth.sim tests check (sim/register_copies.py)
        self.register_copy_parts = [self._counters]
        self._install = InstallEngine(cfg)
        self._cam = PopularityCAM(cfg)
        self.LATENCY = self._cam.LATENCY
        c, i = self._counters.signature.members, self._cam.signature.members
        super().__init__({
            "lookups": c["lookups"],
            "learn_start": In(1),
            "learn_period": In(16),
            "install_start": In(1),
            "threshold": In(cfg.counter_bits),
            "install_done": Out(1),
            "installed": Out(32),
            "skipped": Out(32),
            "candidates": Out(32),
            "sampled": Out(32),
            "learned": Out(32),
            "minibatches": Out(32),
            "placed": Out(stream.Signature(placed_layout(cfg))),
            "lookup_valid": i["lookup_valid"],
            "lookup_keys": i["lookup_keys"],
            "result_valid": i["result_valid"],
            "result_hit": i["result_hit"],
            "result_slot": i["result_slot"],
            "host_write": i["write"],
            "host_read_req": i["read_req"],
            "host_read_resp": i["read_resp"],
            "cam_clear": In(1),
            "write_rejected": Out(32),
            "busy": Out(1),
            "cam_busy": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.counters = ctr = self._counters
        m.submodules.install = ins = self._install
        m.submodules.cam = cam = self._cam

        connect(m, flipped(self.lookups), ctr.lookups)
        m.d.comb += [
            ctr.start.eq(self.learn_start),
            ctr.learn_period.eq(self.learn_period),
            self.sampled.eq(ctr.sampled),
            self.learned.eq(ctr.learned),
            self.minibatches.eq(ctr.minibatches),
        ]
        connect(m, ins.counter_req, ctr.read_req)
        connect(m, ctr.read_resp, ins.counter_resp)
        connect(m, ins.placed, flipped(self.placed))
        m.d.comb += [
            ins.start.eq(self.install_start),
            ins.threshold.eq(self.threshold),
            self.install_done.eq(ins.done),
            self.installed.eq(ins.installed),
            self.skipped.eq(ins.skipped),
            self.candidates.eq(ins.candidates),
        ]

        # the CAM's write port: the install engine while it runs, else the host
        with m.If(ins.busy):
            m.d.comb += [
                cam.write.valid.eq(ins.cam_write.valid),
                cam.write.payload.eq(ins.cam_write.payload),
                ins.cam_write.ready.eq(cam.write.ready),
            ]
        with m.Else():
            m.d.comb += [
                cam.write.valid.eq(self.host_write.valid),
                cam.write.payload.eq(self.host_write.payload),
                self.host_write.ready.eq(cam.write.ready),
            ]
        connect(m, flipped(self.host_read_req), cam.read_req)
        connect(m, cam.read_resp, flipped(self.host_read_resp))
        m.d.comb += [
            cam.clear.eq(self.cam_clear),
            cam.lookup_valid.eq(self.lookup_valid),
            cam.lookup_keys.eq(self.lookup_keys),
            self.result_valid.eq(cam.result_valid),
            self.result_hit.eq(cam.result_hit),
            self.result_slot.eq(cam.result_slot),
            self.write_rejected.eq(cam.write_rejected),
            self.busy.eq(ctr.busy | ins.busy | cam.busy),
            self.cam_busy.eq(ins.busy | cam.busy),
        ]
        return m
