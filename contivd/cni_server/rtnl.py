"""A minimal blocking rtnetlink client for the CNI hot path: pyroute2 encodes, a plain socket sends.

pyroute2 0.9's synchronous IPRoute runs every request through an event loop of its own: ~2 ms
to open a handle and 2–4 ms per request here, so the dozen requests of one pod's veth and
address set-up cost ~40 ms. The messages themselves are pyroute2's (`ifinfmsg`, `ifaddrmsg`,
`rtmsg`: encoding, nested attributes, decoding); this module only writes them to a netlink
socket and reads the kernel's acknowledgement, ~0.1 ms per request. It does what ADD and DEL
need and nothing else; the rare paths (CHECK, GC listings) keep using IPRoute.

A netlink socket works in the network namespace of the thread that created it: open one
inside the pod's namespace for the pod's side (see netlink.in_netns).
"""

from __future__ import annotations

import errno
import os
import socket
import struct
from types import TracebackType
from typing import Any

from pyroute2 import NetlinkError
from pyroute2.netlink import NLM_F_ACK, NLM_F_CREATE, NLM_F_EXCL, NLM_F_REQUEST, NLMSG_ERROR
from pyroute2.netlink.rtnl import RTM_DELLINK, RTM_GETLINK, RTM_NEWADDR, RTM_NEWLINK, RTM_NEWROUTE
from pyroute2.netlink.rtnl.ifaddrmsg import ifaddrmsg
from pyroute2.netlink.rtnl.ifinfmsg import ifinfmsg
from pyroute2.netlink.rtnl.rtmsg import rtmsg

IFF_UP = 0x1
_HEADER = struct.Struct("=LHHLL")  # nlmsghdr: length, type, flags, sequence, pid
_CREATE = NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_EXCL
RT_TABLE_MAIN, RTPROT_BOOT, RT_SCOPE_UNIVERSE, RT_SCOPE_LINK, RTN_UNICAST = 254, 3, 0, 253, 1


class Rtnl:
    """One NETLINK_ROUTE socket; each method is one request answered by the kernel (or NetlinkError)."""

    def __init__(self) -> None:
        self._sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0)  # protocol 0: NETLINK_ROUTE
        self._sock.bind((0, 0))
        self._sequence = 0

    def __enter__(self) -> Rtnl:
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None, tb: TracebackType | None) -> None:
        self._sock.close()

    def _request(self, message: Any, kind: int, flags: int) -> list[ifinfmsg]:
        """Send one request; the decoded link messages it answered (RTM_GETLINK), after its ack."""
        self._sequence += 1
        header = message["header"]
        header["type"], header["flags"], header["sequence_number"] = kind, flags, self._sequence
        message.encode()
        self._sock.send(message.data)
        answers: list[ifinfmsg] = []
        while True:
            data = self._sock.recv(65536)
            offset = 0
            while offset < len(data):
                length, answer_kind, _, sequence, _ = _HEADER.unpack_from(data, offset)
                if sequence == self._sequence:
                    if answer_kind == NLMSG_ERROR:
                        (code,) = struct.unpack_from("=i", data, offset + _HEADER.size)
                        if code:
                            raise NetlinkError(-code, os.strerror(-code))
                        return answers
                    if answer_kind == RTM_NEWLINK:
                        link = ifinfmsg(data[offset : offset + length])
                        link.decode()
                        answers.append(link)
                        if not flags & NLM_F_ACK:
                            return answers
                offset += (length + 3) & ~3

    def create_veth(self, host: str, peer: str, peer_netns_fd: int) -> None:
        """A veth pair: `host` here, `peer` created straight inside the namespace of `peer_netns_fd`."""
        message = ifinfmsg()
        peer_attrs = {"attrs": [("IFLA_IFNAME", peer), ("IFLA_NET_NS_FD", peer_netns_fd)]}
        info = {"attrs": [("IFLA_INFO_KIND", "veth"), ("IFLA_INFO_DATA", {"attrs": [("VETH_INFO_PEER", peer_attrs)]})]}
        message["attrs"] = [("IFLA_IFNAME", host), ("IFLA_LINKINFO", info)]
        self._request(message, RTM_NEWLINK, _CREATE)

    def link(self, name: str) -> tuple[int, str]:
        """(index, MAC) of the interface `name`; NetlinkError ENODEV if there is none."""
        message = ifinfmsg()
        message["attrs"] = [("IFLA_IFNAME", name)]
        found = self._request(message, RTM_GETLINK, NLM_F_REQUEST)
        if not found:
            raise NetlinkError(errno.ENODEV, f"no interface {name}")
        return int(found[0]["index"]), str(found[0].get_attr("IFLA_ADDRESS"))

    def set_link(self, index: int, *, up: bool | None = None, name: str = "", address: str = "") -> None:
        message = ifinfmsg()
        message["index"] = index
        if up is not None:
            message["flags"], message["change"] = (IFF_UP if up else 0), IFF_UP
        message["attrs"] = [*([("IFLA_IFNAME", name)] if name else []), *([("IFLA_ADDRESS", address)] if address else [])]
        self._request(message, RTM_NEWLINK, NLM_F_REQUEST | NLM_F_ACK)

    def delete_link(self, index: int) -> None:
        message = ifinfmsg()
        message["index"] = index
        self._request(message, RTM_DELLINK, NLM_F_REQUEST | NLM_F_ACK)

    def add_address(self, index: int, address: str, prefixlen: int) -> None:
        message = ifaddrmsg()
        message["family"], message["prefixlen"], message["index"] = socket.AF_INET, prefixlen, index
        message["attrs"] = [("IFA_LOCAL", address), ("IFA_ADDRESS", address)]
        self._request(message, RTM_NEWADDR, _CREATE)

    def add_default_route(self, gateway: str) -> None:
        self.add_route("0.0.0.0", 0, gateway=gateway)

    def add_route(self, dst: str, prefixlen: int, *, gateway: str = "", oif: int = 0, prefsrc: str = "") -> None:
        """A main-table route to dst/prefixlen: through `gateway`, or on-link out of `oif` when no
        gateway is given (scope link), optionally with a preferred source address."""
        message = rtmsg()
        message["family"], message["table"], message["proto"] = socket.AF_INET, RT_TABLE_MAIN, RTPROT_BOOT
        message["scope"], message["type"] = (RT_SCOPE_UNIVERSE if gateway else RT_SCOPE_LINK), RTN_UNICAST
        message["dst_len"] = prefixlen
        attrs: list[tuple[str, Any]] = [("RTA_DST", dst)] if prefixlen else []
        if gateway:
            attrs.append(("RTA_GATEWAY", gateway))
        if oif:
            attrs.append(("RTA_OIF", oif))
        if prefsrc:
            attrs.append(("RTA_PREFSRC", prefsrc))
        message["attrs"] = attrs
        self._request(message, RTM_NEWROUTE, _CREATE)
