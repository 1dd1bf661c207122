"""``python -m training train|export ...``: train and export models from a checkout."""

import sys

from training.cli import main

sys.exit(main())
