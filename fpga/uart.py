"""A transmit-only UART (8N1) and a printer of one-line reports built from signals.

:class:`UartTx` sends ``data`` when ``valid`` and ``ready`` (``divisor`` clock cycles per bit).
:class:`LinePrinter` prints a template on ``start``: the template is a list of items, each a
literal string, ``("hex", name, digits)`` (the low ``digits`` nibbles of field ``name``,
most significant first) or ``("text", name, {value: "WORD"})`` (a word chosen by the field's
value; all words the same length). Fields are the Amaranth values given as ``fields``.
"""

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

__all__ = ["UartTx", "LinePrinter"]


class UartTx(wiring.Component):
    def __init__(self, divisor):
        assert divisor >= 2
        self.divisor = divisor
        super().__init__({"data": In(8), "valid": In(1), "ready": Out(1), "tx": Out(1, init=1)})

    def elaborate(self, platform):
        m = Module()
        cnt = Signal(range(self.divisor))
        shreg = Signal(10)
        bits = Signal(range(11))
        m.d.comb += self.ready.eq(bits == 0)
        with m.If(bits == 0):
            with m.If(self.valid):
                m.d.sync += [shreg.eq(Cat(Const(0, 1), self.data, Const(1, 1))), bits.eq(10),
                             cnt.eq(0)]
        with m.Else():
            with m.If(cnt == 0):
                m.d.sync += [self.tx.eq(shreg[0]), shreg.eq(shreg >> 1)]
            with m.If(cnt == self.divisor - 1):
                m.d.sync += [cnt.eq(0), bits.eq(bits - 1)]
            with m.Else():
                m.d.sync += cnt.eq(cnt + 1)
        with m.If(bits == 0):
            m.d.sync += self.tx.eq(1)
        return m


def _hexchar(n):
    return Mux(n < 10, n + ord("0"), n + (ord("A") - 10))


class LinePrinter(wiring.Component):
    """See the module docstring. ``busy`` is high while the line is being sent."""

    def __init__(self, template, fields, divisor):
        self.fields = dict(fields)
        self.divisor = divisor
        # compile the template into (kind, arg) characters: kind 0 literal, 1 nibble, 2 word
        self.chars = []
        self.texts = []                  # per "text" item: (field name, {value: word})
        for it in template:
            if isinstance(it, str):
                self.chars += [(0, ord(c)) for c in it]
            elif it[0] == "hex":
                _, name, digits = it
                self.chars += [(1, (name, d)) for d in reversed(range(digits))]
            else:
                _, name, words = it
                n = len(next(iter(words.values())))
                k = len(self.texts)
                assert k < 16 and n <= 16, "at most 16 words of at most 16 letters"
                self.texts.append((name, words))
                self.chars += [(2, (k, i)) for i in range(n)]
        super().__init__({"start": In(1), "busy": Out(1), "tx": Out(1)})

    def elaborate(self, platform):
        m = Module()
        m.submodules.uart = uart = UartTx(self.divisor)
        m.d.comb += self.tx.eq(uart.tx)
        # Every hex digit of the line is a nibble of one flat vector of the fields' nibbles;
        # a character ROM (block RAM, a synchronous read) gives, per character, its kind,
        # the literal or the nibble's index in that vector, so that one nibble mux and one
        # hex conversion serve the whole line (a case per character costs ~1k LUT4).
        nibs, where = [], {}
        for kind, arg in self.chars:
            if kind == 1 and arg not in where:
                name, d = arg
                v = self.fields[name]
                where[arg] = len(nibs)
                nibs.append(Cat(v, Const(0, 4))[4 * d:4 * d + 4] if 4 * d < len(v)
                            else Const(0, 4))
        nib_bits = max(1, (len(nibs) - 1).bit_length())
        rom = []
        for kind, arg in self.chars:
            if kind == 0:
                rom.append(arg)
            elif kind == 1:
                rom.append(where[arg] | 1 << 8)
            else:
                k, j = arg
                rom.append(k | j << 4 | 2 << 8)
        rom_w = 10 + max(0, nib_bits - 8)
        m.submodules.chars = chars = Memory(shape=rom_w, depth=max(2, len(rom)), init=rom)
        rp = chars.read_port()
        idx = Signal(range(len(self.chars) + 1))
        m.d.comb += rp.addr.eq(idx)
        entry = rp.data
        kind = entry[8:10]
        sel = Cat(entry[:8], entry[10:]) if rom_w > 10 else entry[:8]
        char = Signal(8)
        nib = Cat(*nibs).word_select(sel[:nib_bits], 4) if nibs else Const(0, 4)
        with m.Switch(kind):
            with m.Case(0):
                m.d.comb += char.eq(entry[:8])
            with m.Case(1):
                m.d.comb += char.eq(_hexchar(nib))
            with m.Default():                    # a letter of a word chosen by a field
                for k, (name, words) in enumerate(self.texts):
                    v = self.fields[name]
                    default = next(iter(words.values()))
                    for j in range(len(default)):
                        with m.If((entry[:4] == k) & (entry[4:8] == j)):
                            with m.Switch(v):
                                for val, w in words.items():
                                    with m.Case(val):
                                        m.d.comb += char.eq(ord(w[j]))
                                with m.Default():
                                    m.d.comb += char.eq(ord(default[j]))
        with m.FSM(name="printer"):
            with m.State("IDLE"):
                with m.If(self.start):
                    m.d.sync += idx.eq(0)
                    m.next = "FETCH"
            with m.State("FETCH"):               # the ROM word of idx arrives next cycle
                m.d.comb += self.busy.eq(1)
                m.next = "SEND"
            with m.State("SEND"):
                m.d.comb += [self.busy.eq(1), uart.data.eq(char), uart.valid.eq(1)]
                with m.If(uart.ready):
                    m.d.sync += idx.eq(idx + 1)
                    with m.If(idx == len(self.chars) - 1):
                        m.next = "DRAIN"
                    with m.Else():
                        m.next = "FETCH"
            with m.State("DRAIN"):
                m.d.comb += self.busy.eq(1)
                with m.If(uart.ready):
                    m.next = "IDLE"
        return m
