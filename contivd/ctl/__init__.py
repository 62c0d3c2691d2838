"""`contivd ctl`: netctl's command tree over contivd's REST API (declared in commands.py)."""

from .client import Client as Client
from .client import CtlError as CtlError
from .main import build as build
from .main import ctl_group as ctl_group
