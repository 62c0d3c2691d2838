"""The one exception type of the Open vSwitch boundary."""

from __future__ import annotations


class OvsError(RuntimeError):
    """An OVS daemon or OVSDB operation failed; the message names the daemon, bridge or port."""
