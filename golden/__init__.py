"""The NumPy golden model of Hotline: traces, the algorithmic reference, the bit-accurate
model of the hardware, and the timing model.

It imports no simulator and no HDL: the configuration (:mod:`hotline_hw.config`) and the
hash functions (:mod:`hotline_hw.hashing`) are the only things it shares with the gateware.
"""
