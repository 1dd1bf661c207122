"""The server's one rule for files (server/confine.py): where a path really leads, what is read, where it writes."""

from __future__ import annotations

import os
from pathlib import Path

from citewise.server.confine import PathRule, inside, read_bounded, real


def test_links_are_judged_by_where_they_lead(tmp_path: Path) -> None:
    ws, out = tmp_path / "ws", tmp_path / "out"
    ws.mkdir()
    out.mkdir()
    (out / "secret.bib").write_text("x")
    (ws / "link.bib").symlink_to(out / "secret.bib")
    (ws / "own.bib").write_text("y")
    (ws / "alias.bib").symlink_to(ws / "own.bib")
    roots = (real(ws),)
    assert not inside(ws / "link.bib", roots) and inside(ws / "alias.bib", roots)
    assert not inside(ws / ".." / "out" / "secret.bib", roots)
    rule = PathRule.of([ws])
    assert rule.may_write(ws / "own.bib") and rule.may_write(ws / "alias.bib")
    assert rule.may_write(ws / "new" / "refs.bib") and not rule.may_write(ws / "link.bib")
    (ws / "dangling.bib").symlink_to(out / "created.bib")
    assert not rule.may_write(ws / "dangling.bib")
    named = PathRule.of([ws], [out / "secret.bib"])  # a bibliography the user named on purpose
    assert named.may_write(out / "secret.bib") and named.may_write(ws / "link.bib")


def test_only_regular_files_of_bounded_size_are_read(tmp_path: Path) -> None:
    (tmp_path / "refs.bib").write_text("@misc{a, title={A}}\n")
    assert read_bounded(tmp_path / "refs.bib", 100) == "@misc{a, title={A}}\n"
    assert read_bounded(tmp_path / "refs.bib", 5) is None  # over the cap
    os.mkfifo(tmp_path / "fifo.bib")
    assert read_bounded(tmp_path / "fifo.bib", 100) is None  # would block: not opened
    assert read_bounded("/dev/zero", 100) is None  # never ends: not read
    assert read_bounded(tmp_path, 100) is None and read_bounded(tmp_path / "missing.bib", 100) is None
    rule = PathRule.of([tmp_path])
    assert not rule.may_write(tmp_path / "fifo.bib")
