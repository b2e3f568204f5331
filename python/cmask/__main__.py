"""`python -m cmask`: the command line (cmask.cli)."""

import sys

from .cli import main

sys.exit(main())
