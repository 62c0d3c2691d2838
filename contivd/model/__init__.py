"""contivd.model: the pure core of the control plane (no I/O, no clock, no store).

Contiv's object model declared as data (`objects`), request validation (`validate`), checks
against stored objects through a read-only `Lookup` (`integrity`), links derived from references
(`links.render`), VLAN/VXLAN tag ranges (`ranges`), the endpoint inspect shape (`endpoint`) and
policy rule compilation (`policy`). Every error is a `ModelError`.
"""

from ._addresses import Subnet as Subnet
from ._addresses import parse_pool as parse_pool
from ._addresses import parse_subnet as parse_subnet
from ._addresses import parse_subnet6 as parse_subnet6
from .contiv_messages import CONTIV_MESSAGES as CONTIV_MESSAGES
from .contiv_messages import contiv_line as contiv_line
from .endpoint import EndpointOper as EndpointOper
from .endpoint import go_map_string as go_map_string
from .endpoint import omit_empty as omit_empty
from .errors import ConflictError as ConflictError
from .errors import ModelError as ModelError
from .errors import NotFoundError as NotFoundError
from .errors import ValidationError as ValidationError
from .integrity import check_create as check_create
from .integrity import check_delete as check_delete
from .integrity import check_update as check_update
from .links import REFS as REFS
from .links import Ref as Ref
from .links import render as render
from .lookup import Lookup as Lookup
from .objects import COLLECTIONS as COLLECTIONS
from .objects import SPECS as SPECS
from .objects import UNSUPPORTED_COLLECTIONS as UNSUPPORTED_COLLECTIONS
from .objects import ObjectSpec as ObjectSpec
from .objects import kind_for as kind_for
from .objects import validate as validate
from .policy import Attachment as Attachment
from .policy import PolicyRule as PolicyRule
from .policy import Remotes as Remotes
from .policy import compile_attachment as compile_attachment
from .policy import compile_rule as compile_rule
from .policy import directions as directions
from .policy import with_network_subnets as with_network_subnets
from .ranges import VLAN as VLAN
from .ranges import VXLAN as VXLAN
from .ranges import TagRange as TagRange
from .ranges import TagSpace as TagSpace
from .ranges import format_tag_ranges as format_tag_ranges
from .ranges import format_tags as format_tags
from .ranges import in_ranges as in_ranges
from .ranges import parse_tag_ranges as parse_tag_ranges
