"""contivd: Contiv container networking as one node appliance (netmaster, netplugin, netctl and CNI)."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("contivd")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0.0.0+unknown"
