"""The node agent's OpenFlow pipeline as data and its pure flow builders.

``desired(NodeInputs(...))`` gives every flow and group a bridge should hold,
``diff`` turns that and what is installed into a hitless plan, ``encode_*``
turns flows and groups into OpenFlow 1.3 messages, and ``text`` renders them
as ovs-ofctl prints them.  No I/O here: the OpenFlow session
(openflow.switch) sends what this package computes.

What needs os-ken (the OpenFlow session, the message encoders and parsers: `openflow.switch`,
`openflow.encode`, `openflow._ofp`) loads on first use of one of its names (PEP 562), so a
process that only reads the pure inputs (contivd.state's records, the model) never imports it.
"""

from importlib import import_module
from typing import TYPE_CHECKING, Any

from openflow.desired import Desired as Desired
from openflow.desired import desired as desired
from openflow.diff import Plan as Plan
from openflow.diff import diff as diff
from openflow.diff import round_sweep as round_sweep
from openflow.fields import Category as Category
from openflow.fields import cookie as cookie
from openflow.flow import Flow as Flow
from openflow.flow import Group as Group
from openflow.flow import PipelineError as PipelineError
from openflow.inputs import HostPort as HostPort
from openflow.inputs import InputError as InputError
from openflow.inputs import LocalPort as LocalPort
from openflow.inputs import NetworkRef as NetworkRef
from openflow.inputs import NodeInputs as NodeInputs
from openflow.inputs import PolicyRuleSpec as PolicyRuleSpec
from openflow.inputs import RemoteEndpoint as RemoteEndpoint
from openflow.inputs import ServiceSpec as ServiceSpec
from openflow.inputs import TunnelPort as TunnelPort
from openflow.pipeline import PIPELINE as PIPELINE
from openflow.pipeline import TABLES as TABLES
from openflow.pipeline import Table as Table
from openflow.pipeline import Tables as Tables
from openflow.pipeline import TableSpec as TableSpec
from openflow.text import flow_text as flow_text
from openflow.text import group_text as group_text

if TYPE_CHECKING:
    from openflow._ofp import ConnectionClosed as ConnectionClosed
    from openflow._ofp import FlowRecord as FlowRecord
    from openflow._ofp import OpenFlowError as OpenFlowError
    from openflow._ofp import SwitchError as SwitchError
    from openflow._ofp import flow_records as flow_records
    from openflow.encode import GroupCommand as GroupCommand
    from openflow.encode import encode_flows as encode_flows
    from openflow.encode import encode_groups as encode_groups
    from openflow.switch import Controller as Controller
    from openflow.switch import SwitchConnected as SwitchConnected
    from openflow.switch import SwitchConnection as SwitchConnection
    from openflow.switch import SwitchDisconnected as SwitchDisconnected

_ON_OS_KEN = {
    **dict.fromkeys(["ConnectionClosed", "FlowRecord", "OpenFlowError", "SwitchError", "flow_records"], "._ofp"),
    **dict.fromkeys(["GroupCommand", "encode_flows", "encode_groups"], ".encode"),
    **dict.fromkeys(["Controller", "SwitchConnected", "SwitchConnection", "SwitchDisconnected"], ".switch"),
}


def __getattr__(name: str) -> Any:
    """Load what needs os-ken on first use."""
    module = _ON_OS_KEN.get(name)
    if module is None:
        raise AttributeError(f"module 'openflow' has no attribute {name!r}")
    value = getattr(import_module(module, __name__), name)
    globals()[name] = value
    return value
