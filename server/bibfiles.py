"""Where the draft's bibliography lives on disk, and which keys it already holds.

Unlike :mod:`citewise.server.draft` this module touches the file system, on purpose and only
here: resolution follows what BibTeX/biber would do (document folder, then ``BIBINPUTS``) plus
what an editor user expects (the workspace root, a configured path, a default file to create).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

Origin = Literal["absolute", "document", "workspace", "bibinputs", "setting", "missing", "default"]

DEFAULT_BIB_NAME = "references.bib"
_MAX_WALK_DIRS = 5000  # bound on a recursive BIBINPUTS (dir//) search


@dataclass(frozen=True, slots=True)
class BibFile:
    """One bibliography file the draft writes to or reads from.

    ``origin`` says how it was found: ``absolute``/``document``/``workspace``/``bibinputs`` for
    a declared name found on disk, ``missing`` for a declared name found nowhere (``path`` is
    then where it would be created: next to the document), ``setting`` for a configured path,
    ``default`` for ``references.bib`` next to the document when nothing is declared or
    configured. ``exists`` is False when the file has to be created before entries are added.
    """

    path: Path
    name: str  # as declared in the draft or the setting; "" for the default
    origin: Origin
    exists: bool

    @property
    def to_create(self) -> bool:
        return not self.exists


def _candidates(name: str) -> list[str]:
    return [name] if name.lower().endswith(".bib") else [name, name + ".bib"]


def _bibinputs(env: Mapping[str, str], doc_dir: Path) -> list[tuple[Path, bool]]:
    """``BIBINPUTS`` folders as ``(folder, recursive)``.

    kpathsea syntax: ``os.pathsep``-separated; ``dir//`` searches all subfolders; an empty
    element stands for the TeX default path, which we cannot know without running kpsewhich
    and therefore skip (the document folder is searched anyway). Relative folders are relative
    to the document folder, where BibTeX runs.
    """
    value = env.get("BIBINPUTS", "")
    out = []
    for element in value.split(os.pathsep):
        element = element.strip()
        if not element:
            continue
        element = os.path.expandvars(os.path.expanduser(element))
        recursive = element.endswith("//")
        folder = Path(element.rstrip("/\\") or "/")
        if not folder.is_absolute():
            folder = doc_dir / folder
        out.append((folder, recursive))
    return out


def _find_recursive(root: Path, names: list[str]) -> Path | None:
    try:
        walked = 0
        for dirpath, dirnames, _files in os.walk(root):
            dirnames.sort()
            for name in names:
                p = Path(dirpath) / name
                if p.is_file():
                    return p
            walked += 1
            if walked >= _MAX_WALK_DIRS:
                return None
    except OSError:
        return None
    return None


def _resolve_one(name: str, doc_dir: Path, root: Path | None, env: Mapping[str, str]) -> BibFile:
    names = _candidates(name)
    expanded = Path(os.path.expanduser(name))
    if expanded.is_absolute():
        for cand in _candidates(str(expanded)):
            if Path(cand).is_file():
                return BibFile(Path(cand), name, "absolute", True)
        return BibFile(expanded, name, "missing", False)
    for folder, origin in ((doc_dir, "document"), (root, "workspace")):
        if folder is None:
            continue
        for cand in names:
            p = folder / cand
            if p.is_file():
                return BibFile(p, name, origin, True)  # type: ignore[arg-type]
    for folder, recursive in _bibinputs(env, doc_dir):
        for cand in names:
            p = folder / cand
            if p.is_file():
                return BibFile(p, name, "bibinputs", True)
        if recursive:
            found = _find_recursive(folder, names)
            if found is not None:
                return BibFile(found, name, "bibinputs", True)
    return BibFile(doc_dir / names[-1], name, "missing", False)


def resolve_bibliography(
    doc_path: str | os.PathLike[str],
    names: Iterable[str],
    setting_paths: Iterable[str | os.PathLike[str]] = (),
    env: Mapping[str, str] = os.environ,
    workspace_root: str | os.PathLike[str] | None = None,
) -> list[BibFile]:
    """The bibliography files of a draft, in declaration order, without duplicates.

    Each declared name (from :func:`citewise.server.draft.bibliography_files`) is looked up
    relative to the document's folder, then the workspace root, then each ``BIBINPUTS`` folder;
    a ``.bib`` suffix is tried when the name has none. A declared name found nowhere is kept
    (``origin="missing"``, next to the document): the draft says where its bibliography is,
    so that is where a new entry belongs. Only when the draft declares nothing are the
    configured ``setting_paths`` used (``~`` expanded, relative ones against the workspace root
    or the document folder), and failing those ``references.bib`` next to the document.
    """
    doc_dir = Path(doc_path).parent
    root = Path(workspace_root) if workspace_root is not None else None
    out: list[BibFile] = []
    seen: set[Path] = set()

    def add(bib: BibFile) -> None:
        path = Path(os.path.normpath(bib.path))  # "paper/../refs.bib" -> "refs.bib", symlinks kept
        if path not in seen:
            seen.add(path)
            out.append(BibFile(path, bib.name, bib.origin, bib.exists))

    for name in names:
        if name and name.strip():
            add(_resolve_one(name.strip(), doc_dir, root, env))
    if out:
        return out
    for setting in setting_paths:
        text = os.fspath(setting).strip()
        if not text:
            continue
        p = Path(os.path.expandvars(os.path.expanduser(text)))
        if not p.is_absolute():
            p = (root or doc_dir) / p
        add(BibFile(p, text, "setting", p.is_file()))
    if out:
        return out
    p = Path(os.path.normpath(doc_dir / DEFAULT_BIB_NAME))
    return [BibFile(p, "", "default", p.is_file())]


# --------------------------------------------------------------------------------------------
# Keys of a .bib file
# --------------------------------------------------------------------------------------------

_ENTRY_RE = re.compile(r"@[ \t]*([A-Za-z]+)[ \t\r\n]*[{(][ \t\r\n]*([^\s,{}()\"#%'=\\~]+)[ \t\r\n]*,")
_NOT_ENTRIES = frozenset({"comment", "string", "preamble"})


@dataclass(frozen=True, slots=True)
class BibEntryStart:
    """Where one entry of a ``.bib`` text starts: its key, ``@`` offset, end of ``@type{key,`` and line."""

    key: str
    start: int
    body_start: int
    line: int  # 0-based line of the @type


def iter_entries(text: str) -> Iterator[BibEntryStart]:
    """The entries of a ``.bib`` text in order, duplicates included, in one linear pass.

    A regex over ``@type{key,`` rather than a BibTeX parse: it runs whenever the draft's .bib
    changes, on files with tens of thousands of entries. ``@comment``/``@string``/``@preamble``
    are not entries. Entries behind a ``%`` on their line are skipped (biber and most editors
    treat such lines as comments). Lines are counted incrementally, never from the top.
    """
    line = 0
    last = 0
    for m in _ENTRY_RE.finditer(text):
        if m.group(1).lower() in _NOT_ENTRIES:
            continue
        lo = max(0, m.start() - 500)  # bounded look-back: a one-line file must stay linear
        if "%" in text[text.rfind("\n", lo, m.start()) + 1 or lo : m.start()]:
            continue
        line += text.count("\n", last, m.start())
        last = m.start()
        yield BibEntryStart(m.group(2), m.start(), m.end(), line)


def bib_keys(text: str) -> dict[str, int]:
    """Citation keys of a ``.bib`` text mapped to the 0-based line of their ``@type``; the first
    occurrence of a duplicated key wins, as in BibTeX."""
    keys: dict[str, int] = {}
    for e in iter_entries(text):
        keys.setdefault(e.key, e.line)
    return keys


def read_bib_keys(path: str | os.PathLike[str]) -> dict[str, int]:
    """:func:`bib_keys` of a file; an unreadable or missing file has no keys."""
    try:
        text = Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return {}
    return bib_keys(text)
