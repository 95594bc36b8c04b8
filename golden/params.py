"""Run-time parameters: the values software writes into registers before training.

:class:`RuntimeParams` holds the address map of one training job (where each table, the
popular region and the staging banks live in the ``m_axi`` address space) and the learning
registers. :func:`layout` builds a packed, page-aligned map for a set of tables.
"""

from dataclasses import dataclass

__all__ = ["RuntimeParams", "layout"]

PAGE = 4096


def _align(a, n=PAGE):
    return (a + n - 1) // n * n


@dataclass(frozen=True)
class RuntimeParams:
    """Register values of one job.

    Members
    -------
    table_base: ``TABLE_BASE[t]``, byte address of row 0 of table ``t`` (one per table).
    row_stride: ``ROW_STRIDE``, bytes between consecutive rows of a host table.
    row_bytes: ``ROW_BYTES``, bytes moved per row (a multiple of the bus width).
    popular_base: ``POPULAR_BASE``, byte address of slot 0 of the popular region.
    staging_base: ``STAGING_BASE[b]``, byte address of index 0 of staging bank ``b``.
    learn_period: ``LEARN_PERIOD``, sample every n-th mini-batch while learning.
    learn_threshold: ``LEARN_THRESHOLD``, smallest count a row needs to be installed.
    """
    table_base: tuple
    row_stride: int
    row_bytes: int
    popular_base: int
    staging_base: tuple
    learn_period: int = 1
    learn_threshold: int = 2

    def host_addr(self, cfg, key):
        t, r = key >> cfg.row_bits, key & ((1 << cfg.row_bits) - 1)
        return self.table_base[t] + r * self.row_stride

    def popular_addr(self, slot):
        return self.popular_base + slot * self.row_bytes

    def staging_addr(self, bank, index):
        return self.staging_base[bank] + index * self.row_bytes


def layout(cfg, cardinalities, *, base=0x1000_0000, row_bytes=None, row_stride=None,
           learn_period=None, learn_threshold=None):
    """A packed address map: the host tables one after the other (each page-aligned), then
    the popular region, then the staging banks.

    ``cardinalities`` gives the rows of each of ``cfg.num_tables`` tables.
    """
    row_bytes = cfg.row_bytes if row_bytes is None else row_bytes
    row_stride = row_bytes if row_stride is None else row_stride
    if len(cardinalities) != cfg.num_tables:
        raise ValueError(f"layout: {len(cardinalities)} cardinalities for num_tables={cfg.num_tables}")
    a = base
    tb = []
    for c in cardinalities:
        tb.append(a)
        a = _align(a + c * row_stride)
    pop = a
    a = _align(a + cfg.cam_entries * row_bytes)
    sb = []
    for _ in range(cfg.staging_banks):
        sb.append(a)
        a = _align(a + cfg.staging_rows * row_bytes)
    return RuntimeParams(tuple(tb), row_stride, row_bytes, pop, tuple(sb),
                         cfg.learn_period if learn_period is None else learn_period,
                         cfg.learn_threshold if learn_threshold is None else learn_threshold)
