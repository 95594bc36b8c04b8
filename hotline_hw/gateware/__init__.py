"""Amaranth gateware of the Hotline accelerator, one unit per module."""
