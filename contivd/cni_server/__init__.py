"""The node's CNI server (the `contiv` plugin's other end): see docs/cni.md."""

from .server import CniServer as CniServer
from .server import CniStatistics as CniStatistics
