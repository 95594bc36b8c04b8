"""hotline-hw: a generator of the Hotline recommendation-training accelerator.

The package holds the one configuration object (:mod:`hotline_hw.config`), the hash
functions shared by the gateware and the golden model (:mod:`hotline_hw.hashing`), the
command line (:mod:`hotline_hw.cli`) and, in later modules, the Amaranth gateware.
Importing the package does not import Amaranth, so the golden model stays light.
"""

__version__ = "0.1.0.dev0"
