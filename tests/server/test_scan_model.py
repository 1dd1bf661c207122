"""The scanner layout: both readers implement the Scanner protocol, import only the shared model,
and share the facade's one per-document cache."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest

from citewise.server import draft, latex, markdown, scan_model
from citewise.server.scan_model import Scanner

SERVER = Path(draft.__file__).parent


def _protocol_members() -> list[str]:
    return [n for n, v in vars(Scanner).items() if inspect.isfunction(v) and not n.startswith("_")]


@pytest.mark.parametrize("mod", [latex, markdown], ids=["latex", "markdown"])
def test_reader_is_a_scanner(mod: object) -> None:
    assert isinstance(mod, Scanner)
    for name in _protocol_members():
        want = list(inspect.signature(getattr(Scanner, name)).parameters)[1:]  # without self
        assert list(inspect.signature(getattr(mod, name)).parameters) == want, name


@pytest.mark.parametrize(
    "name", ["latex.py", "latex_cite.py", "markdown.py", "yaml_front.py", "scan_model.py"]
)
def test_readers_do_not_import_the_facade(name: str) -> None:
    tree = ast.parse((SERVER / name).read_text())
    imported = {n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    imported |= {a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) for a in n.names}
    assert not imported & {"draft", "latex", "markdown"} - {name[:-3]}
    assert "lsp" not in imported and "documents" not in imported


def test_facade_re_exports_the_model() -> None:
    for name in (
        "Citation",
        "CiteKey",
        "CursorCitation",
        "Placeholder",
        "Regions",
        "cut_text",
        "normalize_space",
    ):
        assert getattr(draft, name) is getattr(scan_model, name)


@pytest.mark.parametrize(
    ("lang", "text"),
    [("latex", "Deep nets \\cite{a, ?} work % \\cite{b}\n"), ("markdown", "Deep nets [@a; @?] work `@b`\n")],
)
def test_one_cache_for_regions_citations_and_cursor(lang: draft.Lang, text: str) -> None:
    draft.clear_cache()
    doc = draft.document(text, lang)
    assert draft.document(text, lang) is doc
    assert draft.excluded_regions(text, lang) is doc.regions
    cits = draft.find_citations(text, lang)
    assert len(cits) == len(doc.citations) == 1 and cits[0] is doc.citations[0]
    assert draft.citation_at(text, text.index("?") + 1, lang).placeholder  # type: ignore[union-attr]
    assert draft.document.cache_info().currsize == 1
    assert draft.plain_text(text, lang) == "Deep nets work"
