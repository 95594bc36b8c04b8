"""Placeholder: `add_command` is filled in by the FPGA flow work."""


def add_command(sub, add_config_args, config_from_args, usage_error):
    """Add this module's subcommand to the `hotline-hw` parser ``sub``."""
