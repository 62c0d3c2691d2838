"""BGP for routing mode: the node's peering with its top-of-rack router, through ExaBGP."""

from .peering import BgpConfigError as BgpConfigError
from .peering import Peering as Peering
from .peering import bgp_oper as bgp_oper
from .peering import peering_from_object as peering_from_object
from .speaker import BgpSpeaker as BgpSpeaker
