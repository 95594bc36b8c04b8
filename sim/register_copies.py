"""Check a design's *register copies* in amaranth.sim.

Timing cuts often replace a combinational value by a flip-flop loaded with that value's next
state (e.g. the DMA's ``front_ok``). Such a flip-flop must equal the value in every cycle, and
a mistake in its next-state logic shows only in rare cycles (a soft reset landing in the cycle
a scatter completes). A component lists these pairs in ``register_copies`` - ``(name,
flip-flop, value)`` tuples, filled in by ``elaborate`` - and a parent names the children that
have them in ``register_copy_parts``. :func:`watch_register_copies` adds a background process
that compares every pair after every clock edge.
"""


def register_copies(component):
    """The ``(name, flip-flop, value)`` pairs of ``component`` and of its listed parts
    (available once the design has been elaborated, i.e. after ``Simulator(dut)``)."""
    pairs = list(getattr(component, "register_copies", ()))
    for part in getattr(component, "register_copy_parts", ()):
        pairs += register_copies(part)
    return pairs


def watch_register_copies(sim, dut, *, expect=True):
    """Add a background testbench to ``sim`` that fails at the first cycle in which a
    register copy of ``dut`` differs from its value. ``expect``: fail at once when ``dut``
    lists no pairs (catches a test that silently checks nothing). Returns the pairs."""
    pairs = register_copies(dut)
    if expect and not pairs:
        raise AssertionError(f"{type(dut).__name__} lists no register copies")

    async def watch(ctx):
        cycle = 0
        while True:
            await ctx.tick()
            cycle += 1
            for name, ff, value in pairs:
                got, want = ctx.get(ff), ctx.get(value)
                assert got == want, (f"register copy {name} is {got}, its value {want}, "
                                     f"at cycle {cycle}")

    sim.add_testbench(watch, background=True)
    return pairs
