"""BibLibrary: texts re-read on change, indexes built off the caller's thread, pending entries.

A pool that holds its jobs until released stands for an index build in progress, so every
state between "the editor has the entry" and "the index holds it" is checked.
"""

from __future__ import annotations

from concurrent.futures import Executor, Future
from pathlib import Path

from citewise.server.bibfiles import BibFile
from citewise.server.biblibrary import BibLibrary

OWN = "@article{own2020,\n  title = {Mine},\n  year = 2020\n}\n"
ENTRY = "@inproceedings{karpukhin2020dense,\n  title = {Dense Passage Retrieval},\n  year = {2020}\n}\n"
KEY = "karpukhin2020dense"


class HeldPool(Executor):
    """Runs submitted jobs only when told to: an index build still in progress."""

    def __init__(self) -> None:
        self.jobs: list = []

    def submit(self, fn, /, *args, **kwargs):  # type: ignore[override]
        self.jobs.append((fn, args, kwargs))
        return Future()

    def run_all(self) -> None:
        jobs, self.jobs = self.jobs, []
        for fn, args, kwargs in jobs:
            fn(*args, **kwargs)


def _setup(tmp_path: Path) -> tuple[Path, dict, HeldPool, BibLibrary, list[BibFile]]:
    bib = tmp_path / "refs.bib"
    bib.write_text(OWN)
    buffers: dict[str, tuple[int, str]] = {}
    pool = HeldPool()
    lib = BibLibrary(pool, buffers.get)
    files = [BibFile(path=bib, name="refs", origin="document", exists=True)]
    first = lib.snapshot(files)
    assert not first.complete and "own2020" not in first.index  # building: never waited for
    pool.run_all()
    assert "own2020" in lib.snapshot(files).index
    return bib, buffers, pool, lib, files


def test_a_pending_entry_counts_until_the_served_index_holds_it(tmp_path: Path) -> None:
    bib, buffers, pool, lib, files = _setup(tmp_path)
    lib.add_pending(str(bib), KEY, ENTRY)
    assert KEY in lib.snapshot(files).index
    buffers[str(bib)] = (2, OWN + "\n" + ENTRY)  # the editor's buffer now holds it
    snap = lib.snapshot(files)  # the new text's index is still building
    assert not snap.complete
    assert KEY in snap.index and lib.pending_keys(str(bib)) == {KEY}
    pool.run_all()
    snap = lib.snapshot(files)
    assert snap.complete and KEY in snap.index and lib.pending_keys(str(bib)) == set()


def test_a_save_without_the_entry_drops_it(tmp_path: Path) -> None:
    bib, _buffers, pool, lib, files = _setup(tmp_path)
    lib.add_pending(str(bib), KEY, ENTRY)
    bib.write_text(OWN + "% saved after undoing the entry\n")
    snap = lib.snapshot(files)
    assert KEY not in snap.index and lib.pending_keys(str(bib)) == set()
    pool.run_all()


def test_unchanged_files_are_not_read_again(tmp_path: Path, monkeypatch) -> None:
    bib, _buffers, pool, lib, files = _setup(tmp_path)
    from citewise.server import biblibrary

    reads: list[Path] = []
    original = biblibrary.read_bounded

    def counting(path, cap: int) -> str | None:  # the one way the library reads a file
        reads.append(Path(path))
        return original(path, cap)

    monkeypatch.setattr(biblibrary, "read_bounded", counting)
    for _ in range(5):
        lib.snapshot(files)
    assert reads == []
    bib.write_text(OWN + "\n@misc{other,\n  title = {Other},\n}\n")
    lib.snapshot(files)
    pool.run_all()
    assert reads == [bib] and "other" in lib.snapshot(files).index


def test_a_missing_file_has_no_text_and_a_pending_entry_stays(tmp_path: Path) -> None:
    bib, _buffers, pool, lib, files = _setup(tmp_path)
    bib.unlink()
    lib.add_pending(str(bib), KEY, ENTRY)  # the client created it in a buffer only
    snap = lib.snapshot(files)
    assert snap.texts[str(bib)] is None and KEY in snap.index
