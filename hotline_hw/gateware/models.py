"""Behavioural models of unit ports for amaranth.sim testbenches (tests and benchmarks).

They live in the package, as stream helpers do in Glasgow, so a test and a benchmark drive a
unit the same way.
"""

__all__ = ["counter_read_port", "counter_set_words", "stream_sink"]


def counter_set_words(cfg, counters):
    """Every set of a golden :class:`~golden.counters.CounterArray` as the counter array's
    read port returns it (constants of :func:`~.install.counter_set_layout`)."""
    from .install import counter_set_layout
    valid, keys, counts = counters.state()
    layout = counter_set_layout(cfg)
    return [layout.const([{"valid": int(valid[s, w]), "key": int(keys[s, w]),
                           "count": int(counts[s, w])} for w in range(cfg.counter_ways)])
            for s in range(cfg.counter_sets)]


def counter_read_port(req, resp, words, *, rng=None, stall=0.0, delay=0, max_delay=None):
    """An amaranth.sim testbench (run it with ``background=True``) answering the read
    requests on stream ``req`` with ``words[set]`` on stream ``resp``, as the counter array's
    read port does: ``req.ready`` is low with probability ``stall``; a response comes
    ``delay`` (or, with ``max_delay``, a random ``delay..max_delay``) cycles after the
    cycle following its request, and is held until taken."""
    async def process(ctx):
        while True:
            ready = not (stall and rng.random() < stall)
            ctx.set(req.ready, ready)
            _, _, valid, s = await ctx.tick().sample(req.valid, req.payload)
            if not (ready and valid):
                continue
            ctx.set(req.ready, 0)
            wait = delay if max_delay is None else rng.randrange(delay, max_delay + 1)
            for _ in range(wait):
                await ctx.tick()
            ctx.set(resp.payload, words[s])
            ctx.set(resp.valid, 1)
            await ctx.tick().until(resp.ready)
            ctx.set(resp.valid, 0)
    return process


def stream_sink(port, received, convert=lambda p: p, *, rng=None, backpressure=0.0):
    """An amaranth.sim testbench (run it with ``background=True``) taking every beat of
    stream ``port`` into the list ``received`` (through ``convert``), with ``ready`` low at
    random with probability ``backpressure``."""
    async def process(ctx):
        while True:
            ready = not (backpressure and rng.random() < backpressure)
            ctx.set(port.ready, ready)
            _, _, valid, p = await ctx.tick().sample(port.valid, port.payload)
            if ready and valid:
                received.append(convert(p))
    return process
