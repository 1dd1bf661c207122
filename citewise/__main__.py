"""``python -m citewise``: the ``citewise`` command."""

import sys

from .cli import main

sys.exit(main())
