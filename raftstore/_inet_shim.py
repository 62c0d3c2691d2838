"""Keep PySyncObj's Windows address shim out of the process, without loading PySyncObj.

Imported (and so run) first by `raftstore/__init__.py`: also on a follower of the store, which
never loads PySyncObj, and in a process that imports PySyncObj itself later.
"""

from __future__ import annotations

import _socket
import socket
import sys
import types

_INET_SHIM = "pysyncobj.win_inet_pton"


def keep_socket_inet_ntop() -> None:
    """Keep PySyncObj's Windows address shim from replacing `socket.inet_ntop` for the process.

    `pysyncobj.win_inet_pton`, imported by its TCP connection module, sets `socket.inet_ntop`
    on every OS to a Windows-only function that always fails, so libraries that format
    addresses with it (pyroute2) hand out raw bytes. PySyncObj itself never calls inet_ntop
    (and replaces inet_pton only on Windows), so the module is registered here, before
    PySyncObj loads, as an empty stand-in: its import then changes nothing outside PySyncObj.
    If PySyncObj was imported before raftstore, the shim already ran: only its own
    replacement is undone.
    """
    loaded = sys.modules.get(_INET_SHIM)
    if loaded is None:
        sys.modules[_INET_SHIM] = types.ModuleType(_INET_SHIM, "raftstore: PySyncObj's Windows inet_ntop shim, disabled (it broke socket.inet_ntop)")
    elif socket.inet_ntop is getattr(loaded, "inet_ntop", None):
        socket.inet_ntop = _socket.inet_ntop


keep_socket_inet_ntop()
