"""The draft-level checks (server/citation_checks.py): which keys get which findings, where the
entries stand in the .bib, what a report lists once, and what the cache saves after an edit.
Real ACM-CR entries in a small real store; the drafts and .bib files are written here."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from citewise.indexer import bm25_files
from citewise.indexer.importer import import_sources
from citewise.indexer.store import Store
from citewise.models.checks.findings import DUPLICATE, SUSPECT, UNKNOWN_KEY, UNLIKELY
from citewise.models.recommender import Recommender
from citewise.server.citation_checks import ReferenceChecker, first_per_key, scan_bib
from citewise.server.documents import analyze

from ..conftest import ACM_DL, require

SIGIR_2018 = ACM_DL / "sigir" / "sigir-2018.bib"


@pytest.fixture(scope="module")
def rec(tmp_path_factory: pytest.TempPathFactory) -> Recommender:
    store = Store(tmp_path_factory.mktemp("cc") / "s.sqlite")
    import_sources(store, [require(SIGIR_2018)])
    bm25_files.load_or_build(store)
    return Recommender(store, use_dense=False, use_reranker=False)


def entries(n: int) -> list[str]:
    text = require(SIGIR_2018).read_text(encoding="utf-8")
    out = [e.strip() for e in re.split(r"\n(?=@)", text) if "abstract = {" in e and "author = {" in e]
    return out[:n]


def key_of(entry: str) -> str:
    return re.match(r"@\w+\{([^,]+),", entry).group(1)  # type: ignore[union-attr]


def title_of(entry: str) -> str:
    return re.search(r"\ntitle = \{(.*)\},\n", entry).group(1)  # type: ignore[union-attr]


def write(tmp_path: Path, body: str, bib: str) -> Path:
    (tmp_path / "refs.bib").write_text(bib, encoding="utf-8")
    draft = tmp_path / "draft.tex"
    draft.write_text("\\title{Learning to rank}\n" + body + "\n\\bibliography{refs}\n", encoding="utf-8")
    return draft


def run(rec: Recommender, draft: Path, **kw):
    view = analyze(draft, draft.read_text(encoding="utf-8"), "latex")
    return view, ReferenceChecker(rec).check(view, **kw)


def test_findings_per_key_in_draft_order(rec: Recommender, tmp_path: Path) -> None:
    a, b, c = entries(3)
    fake = re.sub(r"\ndoi = \{[^}]*\}", "\ndoi = {" + key_of(b) + "}", a.replace(key_of(a), "fake", 1))
    copy = a.replace(key_of(a), "copy", 1)
    bib = "\n\n".join([a, b, c, fake, copy, c]) + "\n"
    body = (
        f"{title_of(a)} is what we build on \\cite{{{key_of(a)}}}.\n"
        f"We cite a made-up entry \\cite{{fake, nowhere}} and a copy \\cite{{copy}}.\n"
        f"Cooking pasta with tomatoes and basil tastes good \\cite{{{key_of(b)}}}.\n"
        f"{title_of(c)} again \\cite{{{key_of(c)}}}.\n"
    )
    draft = write(tmp_path, body, bib)
    view, found = run(rec, draft)
    got = [(f.key.key, f.finding.code) for f in found]
    assert got == [
        (key_of(a), DUPLICATE),  # 'copy' has its DOI
        ("fake", DUPLICATE),  # it carries b's DOI: b under another key
        ("fake", SUSPECT),
        ("nowhere", UNKNOWN_KEY),
        ("copy", DUPLICATE),
        (key_of(b), UNLIKELY),
        (key_of(c), DUPLICATE),  # defined twice
    ], got
    for f in found:
        assert view.text[f.key.start : f.key.end] == f.key.key
    suspect = next(f for f in found if f.finding.code == SUSPECT)
    bib_text = (tmp_path / "refs.bib").read_text(encoding="utf-8")
    assert suspect.span is not None and bib_text[suspect.span.start : suspect.span.end] == fake
    assert suspect.finding.paper is not None and suspect.finding.paper.doi == key_of(b)
    assert suspect.suggested_key == key_of(b)  # the paper is in the .bib under its own key
    unlikely = next(f for f in found if f.finding.code == UNLIKELY)
    assert "reads like" in unlikely.finding.message and unlikely.finding.paper is not None
    twice = next(f for f in found if f.key.key == key_of(c))
    assert "defined 2 times" in twice.finding.message


def test_duplicate_never_points_at_the_made_up_entry(rec: Recommender, tmp_path: Path) -> None:
    """A made-up entry reusing a genuine paper's DOI: the genuine entry's ``duplicate-entry``
    says keep it (no suggestion), the made-up one's points at the genuine key, and no finding
    suggests a key that another finding calls suspect."""
    a, b = entries(2)
    genuine = key_of(b)
    fake = (
        "@inproceedings{smith2023hallucinated,\n author = {Smith, Jane},\n"
        "title = {Pointer Networks for Citation Span Prediction in Legal Text},\n"
        "booktitle = {Proceedings of Nowhere}, year = {2023},\n doi = {" + genuine + "}\n}"
    )
    bib = "\n\n".join([a, b, fake]) + "\n"
    body = (
        f"{title_of(b)} is genuine \\cite{{{genuine}}}; pointer networks \\cite{{smith2023hallucinated}}.\n"
    )
    draft = write(tmp_path, body, bib)
    _view, found = run(rec, draft)
    by = {(f.key.key, f.finding.code): f.finding for f in found}
    assert (genuine, DUPLICATE) in by and ("smith2023hallucinated", SUSPECT) in by, by.keys()
    assert by[(genuine, DUPLICATE)].suggested == ""
    assert "keep" in by[(genuine, DUPLICATE)].message
    assert by[("smith2023hallucinated", DUPLICATE)].suggested == genuine
    suspects = {f.key.key for f in found if f.finding.code == SUSPECT}
    assert not {f.finding.suggested for f in found} & suspects


def test_a_key_defined_differently_in_two_bib_files(rec: Recommender, tmp_path: Path) -> None:
    """Two .bib files of one draft define a key differently: the finding names both files and the
    one BibTeX uses; the same entry in both files is no finding."""
    a, b = entries(2)
    other = a.replace(title_of(a), "A Different Paper Altogether", 1)
    (tmp_path / "one.bib").write_text(a + "\n" + b + "\n", encoding="utf-8")
    (tmp_path / "two.bib").write_text(other + "\n" + b + "\n", encoding="utf-8")
    draft = tmp_path / "draft.tex"
    draft.write_text(
        f"\\title{{x}}\n{title_of(a)} \\cite{{{key_of(a)}}} and \\cite{{{key_of(b)}}}.\n\\bibliography{{one,two}}\n",
        encoding="utf-8",
    )
    _view, found = run(rec, draft)
    dups = {f.key.key: f.finding.message for f in found if f.finding.code == DUPLICATE}
    assert list(dups) == [key_of(a)], dups
    assert "one.bib and two.bib" in dups[key_of(a)] and "uses the one in one.bib (line 1)" in dups[key_of(a)]


def test_switches_and_one_line_per_key(rec: Recommender, tmp_path: Path) -> None:
    a, b = entries(2)
    body = f"{title_of(a)} \\cite{{x}}. Again \\cite{{x}} and \\cite{{{key_of(a)}}}."
    draft = write(tmp_path, body, a + "\n")
    _view, found = run(rec, draft)
    assert [f.finding.code for f in found] == [UNKNOWN_KEY, UNKNOWN_KEY]
    assert len(first_per_key(found)) == 1
    _view, off = run(rec, draft, enabled={UNKNOWN_KEY: False})
    assert off == []


def test_reprint_under_another_doi_is_no_duplicate(rec: Recommender, tmp_path: Path) -> None:
    """One title under two DOIs is two publications (ACM reprints SIGIR classics in SIGIR Forum)."""
    a = entries(1)[0]
    reprint = a.replace(key_of(a), "10.1145/9999999.9999999").replace(
        "doi = {" + key_of(a) + "}", "doi = {10.1145/9999999.9999999}"
    )
    assert reprint != a
    draft = write(tmp_path, "\\cite{" + key_of(a) + ",10.1145/9999999.9999999}", a + "\n\n" + reprint + "\n")
    _view, found = run(rec, draft, enabled={UNLIKELY: False})
    assert DUPLICATE not in {f.finding.code for f in found}


def test_entry_spans_survive_nesting_and_parentheses() -> None:
    text = "@article{a, title={A {Nested} title}, year=2020}\n@misc(b, note={x})\n% @misc{c, x={}}\n@book{a, title={again}}\n"
    scan = scan_bib("r.bib", text)
    assert (
        text[scan.spans["a"].start : scan.spans["a"].end]
        == "@article{a, title={A {Nested} title}, year=2020}"
    )
    assert text[scan.spans["b"].start : scan.spans["b"].end] == "@misc(b, note={x})"
    assert "c" not in scan.spans
    assert scan.twice == {"a": [0, 3]}


def test_an_edit_reuses_the_cached_work(rec: Recommender, tmp_path: Path) -> None:
    es = entries(12)
    body = "\n".join(f"{title_of(e)} was studied \\cite{{{key_of(e)}}}." for e in es)
    draft = write(tmp_path, body, "\n\n".join(es) + "\n")
    view = analyze(draft, draft.read_text(encoding="utf-8"), "latex")
    checker = ReferenceChecker(rec)
    assert checker.check(view) == []
    cached = len(checker._entries)
    assert cached == len(es)
    edited = analyze(draft, view.text.replace("was studied", "was examined", 1), "latex")
    assert checker.check(edited) == []
    assert len(checker._entries) == cached  # no entry was checked again
