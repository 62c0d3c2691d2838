"""BGP for routing mode: the node's peering with its top-of-rack router, through ExaBGP.

The speaker (`BgpSpeaker`, which runs ExaBGP beside the node agent) loads on first use (PEP
562): the API and the status page only read peerings (`bgp_oper`), on nodes that may run no
speaker at all.
"""

from importlib import import_module
from typing import TYPE_CHECKING, Any

from .peering import BgpConfigError as BgpConfigError
from .peering import Peering as Peering
from .peering import bgp_oper as bgp_oper
from .peering import peering_from_object as peering_from_object

if TYPE_CHECKING:
    from .speaker import BgpSpeaker as BgpSpeaker


def __getattr__(name: str) -> Any:
    """Load the speaker on first use."""
    if name != "BgpSpeaker":
        raise AttributeError(f"module 'contivd.bgp' has no attribute {name!r}")
    value = import_module(".speaker", __name__).BgpSpeaker
    globals()[name] = value
    return value
