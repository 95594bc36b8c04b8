"""Bit-accurate model of the whole accelerator: what the RTL does, command by command.

:class:`HotlineModel` holds the counter array, the CAM, the gather logs of the staging banks,
the statistics and (optionally) a byte-addressed memory; its methods are the commands of the
hardware, in program order:

* :meth:`start_learning`, :meth:`minibatch` with ``learn=True``: LEARN (every
  ``learn_period``-th mini-batch of the learning phase is sampled; aging after every
  ``aging_period``-th sampled one);
* :meth:`install`: INSTALL (write back and clear the current popular set, then install the
  new one and copy each row from its host address to its slot);
* :meth:`minibatch` with ``train=True``: TRAIN (fragment, and gather the staged rows into
  bank ``n % staging_banks`` for the n-th trained mini-batch);
* :meth:`scatter`: SCATTER(bank) (copy every staged row of the bank back to the host);
* :meth:`evict`: EVICT (copy every popular row back to the host, clear the CAM);
* :meth:`gpu_update`: not a command: the modelled GPU (and CPU path) training a mini-batch.

**Hazards.** A gather of a row that an earlier, not yet scattered mini-batch staged waits
for that scatter (the hardware holds it; the model defers it), so it sees the updated value.
Software must not let the GPU use a bank before its gathers are done, nor scatter it before
then; the model raises :class:`ProtocolError` where the hardware would wait for ever.

**The modelled GPU update** adds, to every little-endian 32-bit word of a row, the number of
lookups of the mini-batch that used the row. A ``POPULAR(slot)`` lookup uses the slot's row,
``STAGED(i)`` the staged copy; an ``OVERFLOW(key)`` lookup (the CPU path) uses the row where
it currently lives: its popular slot, else its staged copy in this mini-batch's bank, else
the host row. Bad keys update nothing. Because additions commute, the final memory depends
only on which rows were used how often, never on the order of the updates: exactly what a
cocotb test can predict.
"""

import numpy as np

from .cam import Cam
from .counters import CounterArray
from .fragment import fragment
from .memory import SparseMemory
from .records import TAG_OVERFLOW, TAG_POPULAR, TAG_STAGED, BatchCounters

__all__ = ["HotlineModel", "ProtocolError", "fill_tables"]


class ProtocolError(RuntimeError):
    """Software broke the command protocol (the hardware would wait for ever)."""


class HotlineModel:
    """The accelerator, bit for bit.

    Parameters
    ----------
    cfg : HotlineConfig
    params : golden.params.RuntimeParams or None
        Register values; needed only when ``memory`` is given.
    memory : golden.memory.SparseMemory or None
        The ``m_axi`` address space; with ``None`` no data moves (for fast analysis).
    """

    def __init__(self, cfg, params=None, memory=None):
        if memory is not None and params is None:
            raise ValueError("HotlineModel: memory effects need RuntimeParams")
        self.cfg = cfg
        self.params = params
        self.mem = memory
        self.counters = CounterArray(cfg)
        self.cam = Cam(cfg)
        self.totals = BatchCounters()
        self.install_skipped = 0
        self.learn_index = 0
        self.sampled = 0
        self.soft_reset()

    # --- control --------------------------------------------------------------------------
    def soft_reset(self):
        """Back to idle: bank sequence, learning phase and pending logs cleared; the counter
        array, the CAM and memory are kept."""
        self.train_index = 0
        self.learn_index = 0
        self.sampled = 0
        self.logs = [[] for _ in range(self.cfg.staging_banks)]   # (key, index) per bank
        self.deferred = [[] for _ in range(self.cfg.staging_banks)]  # (key, bank, index)
        self.pending_bank = {}     # key -> latest bank holding it, not yet scattered
        self.waiting = [0] * self.cfg.staging_banks    # deferred gathers into each bank

    def start_learning(self, clear=True):
        """Begin a learning phase (LEARN): the sampling period restarts; ``clear`` empties
        the counter array."""
        self.learn_index = 0
        self.sampled = 0
        if clear:
            self.counters.clear()

    @property
    def learn_period(self):
        return self.params.learn_period if self.params else self.cfg.learn_period

    @property
    def learn_threshold(self):
        return self.params.learn_threshold if self.params else self.cfg.learn_threshold

    # --- the lookup stream --------------------------------------------------------------
    def minibatch(self, keys, lengths, *, learn=False, train=True):
        """One mini-batch of the lookup stream. Returns the :class:`FragmentResult` when
        training, else ``None``."""
        keys = np.asarray(keys, dtype=np.uint64)
        if learn:
            self._learn(keys)
        if not train:
            return None
        bank = self.train_index % self.cfg.staging_banks
        if self.logs[bank]:
            raise ProtocolError(f"bank {bank} reused before SCATTER({bank})")
        res = fragment(self.cfg, self.cam, keys, lengths, bank)
        self.totals += res.counters
        self.train_index += 1
        log = list(zip(res.gather_keys.tolist(), res.gather_indices.tolist()))
        self.logs[bank] = log
        if self.mem is not None:
            for key, idx in log:
                src = self.pending_bank.get(key)
                if src is not None:
                    self.deferred[src].append((key, bank, idx))
                    self.waiting[bank] += 1
                else:
                    self._gather(key, bank, idx)
        self.pending_bank.update(dict.fromkeys(res.gather_keys.tolist(), bank))
        return res

    def _learn(self, keys):
        i = self.learn_index
        self.learn_index += 1
        if i % self.learn_period:
            return
        valid = keys[(keys >> np.uint64(self.cfg.row_bits)) < np.uint64(self.cfg.num_tables)]
        self.counters.update(valid)
        self.totals.learned_lookups += len(valid)
        self.sampled += 1
        if self.cfg.aging_period and self.sampled % self.cfg.aging_period == 0:
            self.counters.age()

    # --- data movement ----------------------------------------------------------------
    def _copy(self, dst, src):
        # the accelerator computes addresses modulo 2**addr_bits (HotlineConfig.addr_bits)
        m = self.cfg.addr_mask
        self.mem.copy(dst & m, src & m, self.params.row_bytes)

    def _gather(self, key, bank, idx):
        self._copy(self.params.staging_addr(bank, idx), self.params.host_addr(self.cfg, key))

    def scatter(self, bank):
        """SCATTER(bank): staged rows back to the host, in index order. Returns the keys."""
        if self.waiting[bank]:
            raise ProtocolError(f"SCATTER({bank}) while {self.waiting[bank]} of its gathers "
                                f"wait for an earlier scatter")
        log, self.logs[bank] = self.logs[bank], []
        pending = self.pending_bank
        for key, idx in log:
            if self.mem is not None:
                self._copy(self.params.host_addr(self.cfg, key), self.params.staging_addr(bank, idx))
            if pending.get(key) == bank:
                del pending[key]
        deferred, self.deferred[bank] = self.deferred[bank], []
        for key, b, idx in deferred:
            self._gather(key, b, idx)
            self.waiting[b] -= 1
        return [k for k, _ in log]

    def evict(self):
        """EVICT: every popular row back to its host address, then clear the CAM.
        Returns ``{slot: key}`` of what was evicted."""
        contents = self.cam.contents()
        if self.mem is not None:
            for slot, key in contents.items():
                self._copy(self.params.host_addr(self.cfg, key), self.params.popular_addr(slot))
        self.cam.clear()
        return contents

    def install(self):
        """INSTALL: evict the current popular set, then install the new one from the counter
        array and copy each row to its slot. Returns the :class:`InstallResult`."""
        if any(self.logs):
            raise ProtocolError("INSTALL while staging banks wait for SCATTER")
        self.evict()
        cand, _ = self.counters.install_candidates(self.learn_threshold)
        res = self.cam.install(cand)
        self.install_skipped += res.skipped
        if self.mem is not None:
            for key, slot in zip(res.keys.tolist(), res.slots.tolist()):
                self._copy(self.params.popular_addr(slot), self.params.host_addr(self.cfg, key))
        return res

    def cam_write(self, slot, key, valid=True):
        """A host write of a CAM entry (no data moves). False if rejected."""
        return self.cam.write(slot, key, valid)

    # --- the modelled GPU ---------------------------------------------------------------
    def row_uses(self, res, keys):
        """``{address: uses}`` of the rows the modelled GPU/CPU updates for the mini-batch
        ``res`` (made from ``keys``)."""
        cfg, p = self.cfg, self.params
        keys = np.asarray(keys, dtype=np.uint64)
        addr = np.full(len(keys), -1, dtype=np.int64)
        pop = res.tags == TAG_POPULAR
        addr[pop] = p.popular_base + res.values[pop].astype(np.int64) * p.row_bytes
        stg = res.tags == TAG_STAGED
        addr[stg] = p.staging_base[res.bank] + res.values[stg].astype(np.int64) * p.row_bytes
        ovf = np.flatnonzero(res.tags == TAG_OVERFLOW)
        if len(ovf):
            k = keys[ovf]
            good = (k >> np.uint64(cfg.row_bits)) < np.uint64(cfg.num_tables)
            ovf, k = ovf[good], k[good]
            hit, slot = self.cam.lookup(k)
            staged = dict(zip(res.gather_keys.tolist(), res.gather_indices.tolist()))
            for i, key, h, s in zip(ovf.tolist(), k.tolist(), hit.tolist(), slot.tolist()):
                if h:
                    addr[i] = p.popular_addr(s)
                elif key in staged:
                    addr[i] = p.staging_addr(res.bank, staged[key])
                else:
                    if self.pending_bank.get(key, res.bank) != res.bank:
                        raise ProtocolError(f"CPU-path update of key {key:#x} before the "
                                            f"SCATTER of bank {self.pending_bank[key]}")
                    addr[i] = p.host_addr(cfg, key)
        used = addr[addr >= 0]
        if cfg.addr_bits < 63:
            used = used & np.int64(cfg.addr_mask)
        a, n = np.unique(used, return_counts=True)
        return dict(zip(a.tolist(), n.tolist()))

    def gpu_update(self, res, keys):
        """The modelled GPU (and CPU path) trains the mini-batch ``res``: add the use count
        of each row to every 32-bit word of it."""
        if self.waiting[res.bank]:
            raise ProtocolError(f"GPU uses bank {res.bank} before its gathers are done")
        for a, n in self.row_uses(res, keys).items():
            self.mem.add_words(a, self.params.row_bytes, n)


def fill_tables(mem, cfg, params, cardinalities, seed=0):
    """Fill every host table with a deterministic pseudo-random pattern (rows only; the
    gaps of a ``row_stride`` larger than ``row_bytes`` stay zero), at the addresses the
    accelerator reads them from: modulo ``2**cfg.addr_bits``."""
    rng = np.random.default_rng(seed)
    m = cfg.addr_mask      # the accelerator sees host addresses modulo 2**addr_bits
    for t, n in enumerate(cardinalities):
        data = rng.integers(0, 256, size=(n, params.row_bytes), dtype=np.uint8)
        base = params.table_base[t] & m
        if params.row_stride == params.row_bytes and base + data.size <= m + 1:
            mem.write(base, data.ravel())
        else:                  # gaps between rows, or the table wraps past 2**addr_bits
            for r in range(n):
                mem.write((params.table_base[t] + r * params.row_stride) & m, data[r])
