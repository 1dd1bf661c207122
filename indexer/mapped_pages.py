"""How much of a memory-mapped BM25 index a process keeps mapped (issue 28's server memory).

Why: past a million papers the postings and impacts are memory-mapped (``bm25_files.MMAP_BYTES``;
5.6 GB at ten million) so that a server reads only the lists its queries use. But each page a
search reads stays mapped into the process, and counts in its resident size, until the kernel
wants the memory back: after the scale bench's 45 placeholders, 3.6 GB of the server's 4.5 GB.
Those pages are the kernel's page cache, not the server's heap, yet a task manager shows them as
the server's memory, and a user judges the server by that figure.

Past a budget the process unmaps them (``madvise(MADV_DONTNEED)``: for a shared file mapping it
drops the process's page-table entries, and the pages stay in the page cache). The next search
maps again the pages it reads, in minor faults: trimming a gigabyte took 24 ms, and summing it
again took 106 ms against 114 ms the first time it was mapped (the faults are lost in the reading).

Where ``/proc`` or ``madvise`` is missing (macOS, Windows) nothing is trimmed: the kernel's own
reclaim still bounds what the mapping costs.
"""

from __future__ import annotations

import logging
import mmap
import os
from dataclasses import dataclass

import numpy as np

log = logging.getLogger(__name__)

_PAGE = mmap.PAGESIZE


def file_resident_bytes() -> int:
    """Bytes of file-backed pages this process has mapped and resident (the ``shared`` field of
    ``/proc/self/statm``: mapped files and libraries); 0 where there is no ``/proc``."""
    try:
        with open("/proc/self/statm", "rb") as f:
            return int(f.read().split()[2]) * _PAGE
    except (OSError, IndexError, ValueError):
        return 0


@dataclass
class MappedBudget:
    """The memory-mapped arrays of one index and the most of their pages (with the process's
    other mapped files) to keep mapped, in bytes."""

    arrays: list[np.memmap]
    budget_bytes: int
    trims: int = 0

    def trim(self) -> bool:
        """Unmap every page of the arrays when the process's mapped files pass the budget; True
        when it did. Safe while another thread searches: that search maps the pages again."""
        if file_resident_bytes() <= self.budget_bytes:
            return False
        for arr in self.arrays:
            mapping = getattr(arr, "_mmap", None)
            if mapping is not None:
                mapping.madvise(mmap.MADV_DONTNEED)
        self.trims += 1
        log.debug("unmapped the index's pages (trim %d)", self.trims)
        return True


def budget_for(arrays: list[np.ndarray], budget_mb: int) -> MappedBudget | None:
    """A budget over the arrays that are memory-mapped (None when none is, or the system cannot
    unmap pages on request)."""
    mapped = [a for a in arrays if isinstance(a, np.memmap) and getattr(a, "_mmap", None) is not None]
    if not mapped or os.name != "posix" or not hasattr(mmap, "MADV_DONTNEED"):
        return None
    return MappedBudget(mapped, budget_mb * 1024 * 1024)
