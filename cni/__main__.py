"""`python -m cni`: the plugin executable."""

import sys

from cni.plugin import main

sys.exit(main())
