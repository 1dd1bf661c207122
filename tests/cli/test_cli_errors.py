"""User mistakes at the command line: one clear line on stderr, the right exit status, no traceback.

The table below is the list of mistakes tried (issue 15, finding 7): each row runs through
``citewise.cli.main`` in-process; a few also run through a real ``python -m citewise.cli``
subprocess, and the read-only cases run as an unprivileged user (root can write anything, so
under root they go through ``setpriv``; they skip with a message when that is impossible).
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from citewise.cli import main

REPO = Path(__file__).resolve().parents[2]

ENTRY = """@inproceedings{{paper{i},
  title = {{Query Expansion Study Number {i} for Ad Hoc Retrieval}},
  author = {{Author{i}, Ann and Writer, Bob}},
  booktitle = {{Proceedings of a Retrieval Conference}},
  year = {{{year}}},
  abstract = {{Relevance feedback and query expansion with term weighting, experiment {i}, for
  document retrieval on test collections; we compare probabilistic and vector space models.}}
}}
"""


def _library(n: int = 40) -> str:
    return "\n".join(ENTRY.format(i=i, year=1990 + i % 30) for i in range(n))


@dataclass
class Mistake:
    """One row: arguments (``{d}`` is the fixture folder), exit status, a fragment of stderr."""

    argv: list[str]
    code: int
    message: str
    env: dict[str, str] = field(default_factory=dict)
    stdout: str = ""  # a fragment stdout must hold too (commands that succeed with a warning)

    def args(self, folder: Path) -> list[str]:
        return [a.replace("{d}", str(folder)) for a in self.argv]

    def __str__(self) -> str:
        return " ".join(self.argv)


MISTAKES = [
    # Usage errors: argparse's exit status 2 and the flag named.
    Mistake(["search", "", "--store", "{d}/good.sqlite"], 2, "empty query"),
    Mistake(["search", "   ", "--store", "{d}/good.sqlite"], 2, "empty query"),
    Mistake(
        ["search", "retrieval", "-k", "0", "--store", "{d}/good.sqlite"],
        2,
        "argument -k: must be at least 1, got 0",
    ),
    Mistake(
        ["search", "retrieval", "-k", "-3", "--store", "{d}/good.sqlite"], 2, "must be at least 1, got -3"
    ),
    Mistake(["search", "retrieval", "-k", "ten", "--store", "{d}/good.sqlite"], 2, "expected a whole number"),
    Mistake(
        ["index", "{d}/lib.bib", "--max-problems", "-1", "--store", "{d}/x.sqlite"], 2, "must be 0 or more"
    ),
    # Stores that are missing, empty, foreign, damaged or not files.
    Mistake(
        ["search", "retrieval", "--store", "/no/such/dir/x.sqlite"],
        1,
        "/no/such/dir/x.sqlite: no paper store here; create one with `citewise index FILE --store /no/such/dir/x.sqlite`",
    ),
    Mistake(
        ["info", "--store", "/no/such/dir/x.sqlite"],
        1,
        "no paper store here; create one with `citewise index",
    ),
    Mistake(
        ["search", "retrieval", "--store", "{d}/zero.sqlite"],
        1,
        "an empty file, not a paper store yet; create one with `citewise index FILE --store",
    ),
    Mistake(["info", "--store", "{d}/zero.sqlite"], 1, "an empty file, not a paper store yet"),
    Mistake(
        ["search", "retrieval", "--store", "{d}/empty.sqlite"],
        1,
        "the store is empty; add papers with `citewise index FILE --store",
    ),
    Mistake(
        ["info", "--store", "{d}/lib.bib"],
        1,
        "lib.bib is not a citewise store (not an SQLite file); move it away or pass another --store",
    ),
    Mistake(
        ["search", "retrieval", "--store", "{d}/text.sqlite"],
        1,
        "text.sqlite is not a citewise store (not an SQLite file)",
    ),
    Mistake(
        ["index", "{d}/lib.bib", "--store", "{d}/text.sqlite", "-q"], 1, "text.sqlite is not a citewise store"
    ),
    Mistake(
        ["info", "--store", "{d}/foreign.sqlite"],
        1,
        "foreign.sqlite is not a citewise store (an SQLite database with other tables); move it away",
    ),
    Mistake(["search", "retrieval", "--store", "{d}/damaged.sqlite"], 1, "the store is damaged"),
    Mistake(["info", "--store", "{d}/damaged.sqlite"], 1, "the store is damaged"),
    Mistake(
        ["index", "{d}/lib.bib", "--store", "{d}/damaged.sqlite", "-q"],
        1,
        "move it away and rebuild it with `citewise index FILE --store",
    ),
    Mistake(
        ["index", "{d}/lib.bib", "--store", "{d}", "-q"], 1, "is a folder; pass a store file, e.g. --store"
    ),
    Mistake(
        ["index", "{d}/lib.bib", "--store", "{d}/lib.bib/x.sqlite", "-q"],
        1,
        "lib.bib is not a folder; pass another --store",
    ),
    # Inputs that cannot be imported.
    Mistake(["index", "{d}/nope.bib", "--store", "{d}/x.sqlite"], 1, "nope.bib: no such file or folder"),
    Mistake(
        ["index", "{d}/docs", "--store", "{d}/x.sqlite"], 1, "docs: no importable files (looked for .bib"
    ),
    Mistake(["index", "{d}/notes.txt", "--store", "{d}/x.sqlite"], 1, "unknown format (use --format"),
    Mistake(
        ["index", "{d}/binary.bib", "--store", "{d}/x.sqlite", "-q"],
        1,
        "nothing imported: {d}/binary.bib:1: a binary file, not BibTeX text",
    ),
    Mistake(
        ["index", "{d}/broken.bib", "--store", "{d}/x.sqlite", "-q"],
        1,
        "nothing imported: all 3 records are broken (at {d}/broken.bib:1, {d}/broken.bib:3, {d}/broken.bib:5)",
    ),
    Mistake(
        ["index", "{d}/empty.bib", "--store", "{d}/x.sqlite", "-q"],
        1,
        "nothing imported: no entries found in",
    ),
    Mistake(
        ["index", "{d}/lib.bib", "--format", "jsonl", "--store", "{d}/x.sqlite", "-q"],
        1,
        "nothing imported: all 320 records are broken (at {d}/lib.bib:1, {d}/lib.bib:2,",
    ),
    # Succeeds, but says what it did or what was wrong.
    Mistake(
        [
            "index",
            "{d}/lib.bib",
            "--store",
            "{d}/new/dir/fresh.sqlite",
            "-q",
            "--no-embed",
            "--no-search-index",
        ],
        0,
        "created a new store at {d}/new/dir/fresh.sqlite",
        stdout="40 imported",
    ),
    Mistake(
        ["info", "--store", "{d}/good.sqlite"],
        0,
        "CITEWISE_LOG=loud is not a level",
        env={"CITEWISE_LOG": "loud"},
        stdout="papers:         40",
    ),
    Mistake(
        ["index", "--store", "{d}/good.sqlite", "--drop", "{d}/never.bib", "-q", "--no-embed"],
        0,
        "--drop {d}/never.bib: not a source of {d}/good.sqlite (sources are recorded by absolute path); "
        "nothing dropped",
        stdout="0 removed",
    ),
    # `index` without sources only rebuilds indexes: it does not create a store either.
    Mistake(["index", "--store", "{d}/none.sqlite"], 1, "none.sqlite: no paper store here; create one with"),
]


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    """Every file the mistakes need; ``good.sqlite`` is a real store of 40 papers."""
    d = tmp_path_factory.mktemp("mistakes")
    (d / "lib.bib").write_text(_library(), encoding="utf-8")
    (d / "binary.bib").write_bytes(bytes(range(256)) * 20)
    (d / "broken.bib").write_text(
        "@article{a, title={Unclosed\n\n@article{b title={No comma}}\n\n@book{c, title=\n", encoding="utf-8"
    )
    (d / "empty.bib").write_text("% nothing here yet\n", encoding="utf-8")
    (d / "notes.txt").write_text("not a bibliography\n", encoding="utf-8")
    (d / "docs").mkdir()
    (d / "docs" / "readme.md").write_text("# notes\n", encoding="utf-8")
    (d / "zero.sqlite").write_bytes(b"")
    (d / "text.sqlite").write_text("hello, I am a text file\n", encoding="utf-8")
    conn = sqlite3.connect(d / "foreign.sqlite")
    conn.execute("CREATE TABLE photos (id INTEGER PRIMARY KEY, path TEXT)")
    conn.commit()
    conn.close()
    from citewise.indexer.store import Store

    Store(d / "empty.sqlite").close()
    assert main(["index", str(d / "lib.bib"), "--store", str(d / "good.sqlite"), "-q", "--no-embed"]) == 0
    conn = sqlite3.connect(d / "good.sqlite")  # fold the WAL in, so copies of the file are whole
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    shutil.copy(d / "good.sqlite", d / "damaged.sqlite")
    size = (d / "damaged.sqlite").stat().st_size
    with open(d / "damaged.sqlite", "r+b") as fh:  # every page but the first overwritten
        fh.seek(4096)
        fh.write(b"\xa5" * (size - 4096))
    return d


@pytest.mark.parametrize("mistake", MISTAKES, ids=str)
def test_mistake_in_process(mistake: Mistake, folder: Path, capsys, monkeypatch) -> None:
    for key, value in mistake.env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("CITEWISE_DEBUG", raising=False)
    try:
        code = main(mistake.args(folder))
    except SystemExit as exc:  # argparse's usage errors
        code = exc.code
    out, err = capsys.readouterr()
    assert code == mistake.code, err
    assert mistake.message.replace("{d}", str(folder)) in err
    assert "Traceback" not in err
    assert mistake.stdout in out
    error_lines = [line for line in err.splitlines() if line.startswith("citewise: error")]
    assert len(error_lines) <= 1, err  # one clear line, not a cascade
    assert not (folder / "x.sqlite").exists(), "a failed index must not leave a new store behind"


def _run(
    *args: str, env: dict[str, str] | None = None, prefix: tuple[str, ...] = ()
) -> subprocess.CompletedProcess[str]:
    full_env = {**os.environ, **(env or {}), "PYTHONPATH": str(REPO)}
    full_env.pop("CITEWISE_DEBUG", None)
    return subprocess.run(
        [*prefix, sys.executable, "-m", "citewise.cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=full_env,
        cwd="/",
    )


@pytest.mark.parametrize("index", [0, 2, 7, 11, 23, 24])
def test_mistake_in_a_real_process(index: int, folder: Path) -> None:
    mistake = MISTAKES[index]
    proc = _run(*mistake.args(folder))
    assert proc.returncode == mistake.code, proc.stderr
    assert mistake.message.replace("{d}", str(folder)) in proc.stderr
    assert "Traceback" not in proc.stderr


def test_info_logging_is_info_not_error(folder: Path, tmp_path: Path) -> None:
    """With CITEWISE_LOG=INFO the CLI's own records say ``info``, never ``error``."""
    store = tmp_path / "s.sqlite"
    shutil.copy(folder / "good.sqlite", store)  # no search index beside it: search builds one
    proc = _run("search", "query expansion", "--store", str(store), "-k", "2", env={"CITEWISE_LOG": "INFO"})
    assert proc.returncode == 0, proc.stderr
    assert "citewise: info: " in proc.stderr and "building the search index" in proc.stderr
    assert "error" not in proc.stderr.lower()
    quiet = _run("search", "query expansion", "--store", str(store), "-k", "2")
    assert "citewise: info" not in quiet.stderr


def test_reader_closing_the_pipe_is_not_an_error(tmp_path: Path) -> None:
    """``citewise search ... | head -1``: the reader leaves early; no error line, no traceback."""
    (tmp_path / "big.bib").write_text(_library(3000), encoding="utf-8")
    store = str(tmp_path / "big.sqlite")
    assert _run("index", str(tmp_path / "big.bib"), "--store", store, "-q", "--no-embed").returncode == 0
    full_env = {**os.environ, "PYTHONPATH": str(REPO)}
    full_env.pop("CITEWISE_DEBUG", None)
    proc = subprocess.Popen(
        [sys.executable, "-m", "citewise.cli", "search", "retrieval", "--store", store, "-k", "3000"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=full_env,
        cwd="/",
    )
    assert proc.stdout is not None and proc.stderr is not None
    assert proc.stdout.readline()  # one line read, then the pipe closed (as head does)
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 141, err
    assert "error" not in err.lower() and "Traceback" not in err, err


# -- read-only stores ------------------------------------------------------------------------------


def _unprivileged() -> tuple[str, ...]:
    """A command prefix that drops root (permission bits mean nothing to root)."""
    if os.geteuid() != 0:
        return ()
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("running as root without setpriv: cannot make a folder read-only for the test")
    return (setpriv, "--reuid=65534", "--regid=65534", "--clear-groups")


@pytest.fixture()
def shared_tmp() -> Iterator[Path]:
    """A temporary folder an unprivileged user can enter (pytest's own is private to root)."""
    d = Path(tempfile.mkdtemp(prefix="citewise-ro-"))
    d.chmod(0o755)
    yield d
    for p in [d, *d.rglob("*")]:
        if p.is_dir():
            p.chmod(0o755)
    shutil.rmtree(d, ignore_errors=True)


def _read_only_copy(folder: Path, dest: Path) -> Path:
    ro = dest / "ro"
    ro.mkdir()
    shutil.copy(folder / "good.sqlite", ro / "papers.sqlite")
    shutil.copy(folder / "lib.bib", dest / "lib.bib")
    (ro / "papers.sqlite").chmod(0o444)
    (dest / "lib.bib").chmod(0o444)
    ro.chmod(0o555)
    return ro / "papers.sqlite"


def test_read_only_store_is_readable_and_refuses_index(folder: Path, shared_tmp: Path) -> None:
    store = _read_only_copy(folder, shared_tmp)
    prefix = _unprivileged()
    searched = _run(
        "search",
        "query expansion relevance feedback",
        "--store",
        str(store),
        "-k",
        "3",
        "--json",
        prefix=prefix,
    )
    assert searched.returncode == 0, searched.stderr
    assert f"{store}: opened read-only (the file and its folder are read-only)" in searched.stderr
    assert searched.stdout.count('"key"') == 3
    info = _run("info", "--store", str(store), prefix=prefix)
    assert info.returncode == 0 and "papers:         40" in info.stdout, info.stderr
    indexed = _run("index", str(shared_tmp / "lib.bib"), "--store", str(store), "-q", prefix=prefix)
    assert indexed.returncode == 1
    assert (
        f"{store}: cannot write to the store (the file and its folder are read-only); "
        "make it writable or pass another --store"
    ) in indexed.stderr
    assert "Traceback" not in indexed.stderr
    created = _run(
        "index", str(shared_tmp / "lib.bib"), "--store", str(store.parent / "new.sqlite"), prefix=prefix
    )
    assert created.returncode == 1 and "is not writable; pass another --store" in created.stderr
    assert "Traceback" not in searched.stderr + info.stderr + created.stderr


def test_every_user_facing_error_shares_one_base() -> None:
    """The CLI prints any ``CitewiseError`` as one line; every error class of the shipped code that
    carries a message for the user derives from it (found by name, so a new one cannot be missed)."""
    import ast
    import importlib

    from citewise.errors import CitewiseError

    from ..installed import package_roots

    internal = {"FramingError", "_MathError"}  # protocol and parser internals, never shown as such
    found = []
    for package, folder in package_roots().items():
        for path in (REPO / folder).rglob("*.py"):
            for node in ast.parse(path.read_text(encoding="utf-8")).body:
                if isinstance(node, ast.ClassDef) and node.name.endswith("Error"):
                    if node.name not in internal:
                        parts = path.relative_to(REPO / folder).with_suffix("").parts
                        found.append((".".join([package, *parts]), node.name))
    assert len(found) >= 10, found
    loose = [
        f"{m}.{n}" for m, n in found if not issubclass(getattr(importlib.import_module(m), n), CitewiseError)
    ]
    assert not loose, loose
