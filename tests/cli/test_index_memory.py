"""``citewise index`` gives the heap a finished phase freed back to the system before the next
phase grows (``cli_index.return_freed_memory``): what kept the peak RSS of a big index high."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from citewise.cli_index import return_freed_memory


def _anon_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("RssAnon:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no RssAnon in /proc/self/status")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="malloc_trim and /proc are Linux's")
def test_freed_arrays_go_back_to_the_system() -> None:
    # A phase's working arrays (a BM25 build's blocks, an encoder's batches): once a big block
    # was freed, glibc serves arrays of a few MB from its heap and keeps their pages when freed.
    np.ones(16 << 20, dtype=np.uint8)  # raises the threshold past which glibc maps
    held = [np.ones(1 << 20, dtype=np.uint8) for _ in range(300)]
    keep = held[::50]  # a few survivors scattered over the heap, as in a real phase
    del held
    before = _anon_mb()
    return_freed_memory()
    after = _anon_mb()
    assert keep and before - after > 100, f"RssAnon {before:.0f} MB -> {after:.0f} MB"
