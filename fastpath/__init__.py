"""fastpath: C hot paths for contivd, with a pure-Python twin.

Bitsets for IPAM / VLAN / VNI / EPG ids, IPv4 pool helpers, and OpenFlow 1.3
flow-mod + ONF bundle encoding.  The C library (``fastpath._native``, built
by ``pip install`` through cffi) is used unless ``CONTIVD_FASTPATH=python``
selects the twin in ``fastpath._reference``; if the extension is missing and
the variable does not ask for Python, importing fastpath fails loudly rather
than silently running 50x slower.  Nothing here imports contivd.
"""

from fastpath._backend import DEFAULT as DEFAULT
from fastpath._backend import ENV_VAR as ENV_VAR
from fastpath._backend import PYTHON as PYTHON
from fastpath._backend import Backend as Backend
from fastpath._backend import C as C
from fastpath.addr import IPPool as IPPool
from fastpath.addr import Subnet as Subnet
from fastpath.addr import apply_pool as apply_pool
from fastpath.addr import format_ipv4 as format_ipv4
from fastpath.addr import host_to_ip as host_to_ip
from fastpath.addr import ip_to_host as ip_to_host
from fastpath.addr import parse_ipv4 as parse_ipv4
from fastpath.addr import parse_pool as parse_pool
from fastpath.addr import reserve as reserve
from fastpath.bitset import Bitset as Bitset
from fastpath.flowmod import ONF_BF_ATOMIC as ONF_BF_ATOMIC
from fastpath.flowmod import ONF_BF_ORDERED as ONF_BF_ORDERED
from fastpath.flowmod import BundleCtrl as BundleCtrl
from fastpath.flowmod import Command as Command
from fastpath.flowmod import FlowSpec as FlowSpec
from fastpath.flowmod import Messages as Messages
from fastpath.flowmod import Output as Output
from fastpath.flowmod import SetField as SetField
from fastpath.flowmod import bundle_ctrl as bundle_ctrl
from fastpath.flowmod import encode_bundle as encode_bundle
from fastpath.flowmod import encode_bundle_adds as encode_bundle_adds
from fastpath.flowmod import encode_flow_mods as encode_flow_mods
from fastpath.flowmod import port_range_masks as port_range_masks
from fastpath.flowmod import split_messages as split_messages
