"""One draft as the features see it: text, language, global context, bibliography (no LSP types).

An adapter over the pure draft-reading core (:mod:`citewise.server.draft`) and bibliography
discovery (:mod:`citewise.server.bibfiles`), shared by the language server and ``citewise
suggest`` so both read a draft the same way. File reads go through ``read_text`` so the server
can serve unsaved editor buffers (an ``\\input`` file or a ``.bib`` open in the editor) first.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from citewise.indexer.store import StoredPaper
from citewise.models.library import Library
from citewise.models.query import ContextQuery, marked_query

from . import draft
from .bibfiles import BibFile, resolve_bibliography
from .bibindex import BibEntryIds, BibIndex
from .biblibrary import BibSnapshot
from .confine import MAX_BIB_BYTES, MAX_TEXT_BYTES, PathRule, read_bounded, real
from .confine import inside as confine_inside

ReadText = Callable[[Path], "str | None"]


def read_disk(path: Path) -> str | None:
    """A draft's or bibliography's text from disk: a regular file of bounded size only
    (:func:`.confine.read_bounded`: a FIFO or ``/dev/zero`` named by a draft is never read)."""
    cap = MAX_BIB_BYTES if Path(path).suffix.lower() == ".bib" else MAX_TEXT_BYTES
    return read_bounded(path, cap)


@dataclass
class DraftView:
    """Everything derived from one version of a draft; build once per version, read many times."""

    path: Path
    text: str
    lang: draft.Lang
    version: int | None = None
    lines: draft.LineIndex = field(init=False)
    title: str = ""
    abstract: str = ""
    bib_files: list[BibFile] = field(default_factory=list)
    bib_texts: dict[str, str | None] = field(default_factory=dict)  # path -> text (None: missing)
    bib: BibIndex = field(default_factory=BibIndex)
    bib_complete: bool = True  # False while a large .bib is still being indexed
    write_rule: PathRule | None = None  # where the server may write for this draft (None: anywhere)

    def __post_init__(self) -> None:
        self.lines = draft.LineIndex(self.text)

    @property
    def target_bib(self) -> str:
        """The ``.bib`` new entries go to: the first the draft declares (or the configured/default
        one) that the server may write (:mod:`.confine`: a ``BIBINPUTS`` file is read, not written)."""
        default = str(self.path.parent / "references.bib")
        writable = [str(bf.path) for bf in self.bib_files if self.may_write(bf.path)]
        return writable[0] if writable else default

    def may_write(self, path: str | os.PathLike[str]) -> bool:
        return self.write_rule is None or self.write_rule.may_write(path)

    def target_bib_text(self) -> str | None:
        return self.bib_texts.get(self.target_bib)

    def citations(self) -> list[draft.Citation]:
        return draft.find_citations(self.text, self.lang)

    def placeholders(self, size: int) -> list[draft.Placeholder]:
        return draft.placeholders(self.text, self.lang, size)

    def query_for(self, local: str) -> ContextQuery:
        """The query of a local context, plain or marked (a placeholder's ``marked`` text, or
        :func:`draft.marked_local_context`: then the query knows where the placeholder is)."""
        return marked_query(local, self.title, self.abstract)

    def body_text(self) -> str:
        """The draft's prose for the whole-draft query (citations, comments and commands stripped)."""
        try:
            return draft.plain_text(self.text, self.lang)
        except Exception:  # never let a scanner bug cost the whole-draft suggestions
            return self.text

    def cited_keys(self) -> list[str]:
        out: list[str] = []
        for cit in self.citations():
            out.extend(k.key for k in cit.keys if not k.placeholder)
        return out


def analyze(
    path: str | os.PathLike[str],
    text: str,
    lang: draft.Lang,
    *,
    version: int | None = None,
    bibliography_setting: Iterable[str] = (),
    workspace_root: str | os.PathLike[str] | None = None,
    read_text: ReadText = read_disk,
    env: dict[str, str] | None = None,
    bibs: Callable[[list[BibFile]], BibSnapshot] | None = None,
) -> DraftView:
    """Read a draft: title/abstract (following ``\\input``), its bibliography files and their keys.

    ``bibs`` supplies the bibliography texts and index (the server's :class:`BibLibrary`, which
    caches them and builds big indexes in the background); without it the files are read and
    indexed here, as the command line wants.
    """
    p = Path(path)
    doc_dir = p.parent
    env = env if env is not None else dict(os.environ)
    roots = _allowed_roots(doc_dir, workspace_root, bibliography_setting, env)

    def read_file(name: str) -> str | None:
        cand = Path(name) if os.path.isabs(name) else doc_dir / name
        if roots is not None and not _inside(cand, roots):
            return None  # \input{../../x} or an absolute path out of the workspace: not followed
        for c in (cand, cand.with_name(cand.name + ".tex")) if cand.suffix == "" else (cand,):
            got = read_text(c)
            if got is not None:
                return got
        return None

    view = DraftView(p, text, lang, version)
    try:
        view.title, view.abstract = draft.global_context(text, lang, read_file)
    except Exception:  # a broken \input chain must not break completion
        view.title, view.abstract = "", ""
    names = draft.bibliography_files(text, lang, read_file)
    view.bib_files = resolve_bibliography(p, names, list(bibliography_setting), env, workspace_root)
    if roots is not None:
        view.bib_files, view.write_rule = _confined(p, view.bib_files, workspace_root, env)
    if bibs is not None:
        snap = bibs(view.bib_files)
        view.bib_texts, view.bib, view.bib_complete = snap.texts, snap.index, snap.complete
        return view
    texts = []
    for bf in view.bib_files:
        t = read_text(bf.path)
        view.bib_texts[str(bf.path)] = t
        if t is not None:
            texts.append((str(bf.path), t))
    view.bib = BibIndex.from_texts(texts)
    return view


def _confined(
    draft_path: Path,
    bib_files: list[BibFile],
    workspace_root: str | os.PathLike[str] | None,
    env: dict[str, str],
) -> tuple[list[BibFile], PathRule]:
    """The draft's bibliography files the server may read, judged by where they really lead (a
    symlink out of the workspace is out), and the rule of where it may write: the workspace, the
    draft's folder, and the files the user named in the ``bibliography`` setting. ``BIBINPUTS``
    files are read (the user's TeX set-up names them), never written."""
    folders = [draft_path.parent] + ([Path(workspace_root)] if workspace_root is not None else [])
    rule = PathRule.of(folders, [bf.path for bf in bib_files if bf.origin == "setting"])
    roots = rule.roots
    kept = [bf for bf in bib_files if bf.origin in ("bibinputs", "setting") or confine_inside(bf.path, roots)]
    if not kept and bib_files:  # every declared .bib leaves the workspace: write next to the draft
        kept = [
            bf
            for bf in resolve_bibliography(draft_path, [], [], env, workspace_root)
            if confine_inside(bf.path, roots)
        ]
    return kept, rule


def _allowed_roots(
    doc_dir: Path, workspace_root: str | os.PathLike[str] | None, settings: Iterable[str], env: dict[str, str]
) -> list[str] | None:
    """Folders the server may read for this draft: the workspace, the draft's folder, the
    ``BIBINPUTS`` folders and the configured bibliography files. None: no confinement (the
    command line, where the user names the draft)."""
    if workspace_root is None:
        return None
    root = Path(workspace_root)
    roots: list[Path] = [root, doc_dir]
    for element in env.get("BIBINPUTS", "").split(os.pathsep):
        if element.strip():  # relative BIBINPUTS folders are relative to the draft, as for BibTeX
            roots.append(doc_dir / os.path.expanduser(os.path.expandvars(element.strip().rstrip("/\\"))))
    roots += [root / os.path.expanduser(str(x)) for x in settings]  # an absolute setting stays absolute
    return [real(r) for r in roots]


def _inside(path: str | os.PathLike[str], roots: list[str]) -> bool:
    """Whether ``path`` really lies in one of ``roots``: symlinks resolved (:func:`.confine.inside`)."""
    return confine_inside(path, roots)


def paper_for_key(library: Library, key: str, ids: BibEntryIds | None) -> StoredPaper | None:
    """The stored paper a cited key stands for: by the bib entry's identifiers, else by the key."""
    if ids is None:
        return library.by_key(key)
    return library.for_entry(key, ids.doi, ids.arxiv, ids.norm_title)


def cited_paper_ids(library: Library, view: DraftView) -> set[int]:
    """Store ids of the papers the draft already cites (excluded from whole-draft suggestions)."""
    out: set[int] = set()
    for key in set(view.cited_keys()):
        p = paper_for_key(library, key, view.bib.entries.get(key))
        if p is not None:
            out.add(p.id)
    return out
