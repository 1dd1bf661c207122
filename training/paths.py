"""Where the training and evaluation scripts find the shared corpora.

Training lives in the checkout, beside ``../shared/data`` (the project's data folder); the
installed package never reads it. ``CITEWISE_SHARED_DATA`` points elsewhere, as for the tests.
"""

from __future__ import annotations

import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = Path(os.environ.get("CITEWISE_SHARED_DATA", REPO.parent / "shared" / "data"))
