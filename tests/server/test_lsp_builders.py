"""Fast table tests of the pure builders behind the language server (no LSP, no real data)."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from citewise.indexer.records import PaperRecord
from citewise.indexer.store import Store, StoredPaper
from citewise.models.draft_suggest import suggest_for_draft
from citewise.models.query import Candidate, ContextQuery
from citewise.models.recommender import Recommendation
from citewise.server import draft
from citewise.server.actions import bib_append, cite_plan, missing_entry_action, placeholder_actions
from citewise.server.bibindex import BibIndex, append_text, key_for_paper, tex_title_key
from citewise.server.completion.items import build_completion, short_authors
from citewise.server.completion.slot import matches_prefix
from citewise.server.diagnostic_items import placeholder_diagnostic
from citewise.server.hover_text import hover_markdown
from citewise.server.ranking import SpeculativeRanker, query_hash

from .slot_menu import menu_order

BIB = r"""@comment{ignored, x = 1}
@article{mine,
  title = {{BERT}: Pre-training of Deep Bidirectional Transformers},
  doi = {https://doi.org/10.18653/V1/N19-1423},
  year = 2019
}

@misc{arx, title = "Attention Is All You Need", eprint = {1706.03762v5}}
@book{hand, title = {A Hand Written Entry About Things}}
@article{mine, title = {Duplicate key, second one loses}}
@misc{bare, author = {Nobody}}
"""


def paper(pid: int = 1, **kw) -> StoredPaper:
    base = dict(
        title="Neural Ranking Models with Weak Supervision",
        authors=["Dehghani, Mostafa", "Zamani, Hamed"],
        year=2017,
        venue="SIGIR",
        entry_type="inproceedings",
        doi="10.1145/3077136.3080832",
    )
    base.update(kw)
    return StoredPaper(id=pid, **base)


def rec(p: StoredPaper, rank: int = 1) -> Recommendation:
    return Recommendation(p, Candidate(p.id, 1.0 / rank, {"bm25:local": 3.0}, {"bm25:local": rank}))


# -- bibliography index ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("record", "expected"),
    [
        (PaperRecord("Something else", doi="10.18653/v1/n19-1423"), "mine"),  # DOI, case and URL folded
        (PaperRecord("Other title", arxiv="arXiv:1706.03762"), "arx"),  # arXiv id, version dropped
        (PaperRecord("BERT: pre-training of deep bidirectional transformers"), "mine"),  # normalised title
        (PaperRecord("A hand-written entry about things!"), "hand"),
        (PaperRecord("Whatever", key="bare", doi="10.1/x"), "bare"),  # same key, nothing contradicts
        (PaperRecord("Unrelated", key="hand"), None),  # same key but another title: not the same work
        (PaperRecord("Unrelated paper on nothing"), None),
    ],
)
def test_bib_index_key_for(record: PaperRecord, expected: str | None) -> None:
    idx = BibIndex.from_texts([("refs.bib", BIB)])
    assert idx.key_for(record) == expected


def test_bib_index_lines_and_first_key_wins() -> None:
    idx = BibIndex.from_texts([("a.bib", BIB), ("b.bib", "@misc{extra, title={X}}\n@misc{mine, title={Y}}")])
    assert idx.entries["mine"].line == 1 and idx.files["mine"] == "a.bib"
    assert idx.files["extra"] == "b.bib" and "ignored" not in idx
    assert tex_title_key(r"{BERT}: Pre-training of \emph{Deep} Models") == "bert pre training of deep models"


@pytest.mark.parametrize(
    ("bib_text", "expected"),
    [("", "E"), ("x\n\n", "E"), ("x\n", "\nE"), ("x", "\n\nE")],
)
def test_append_text_separates_entries(bib_text: str, expected: str) -> None:
    assert append_text(bib_text, "E") == expected


def test_key_for_paper_existing_new_and_clash() -> None:
    idx = BibIndex.from_texts([("refs.bib", BIB)])
    pk = key_for_paper(paper(doi="10.18653/v1/N19-1423"), idx, "lastnameYEARfirstword")
    assert (pk.key, pk.in_bib, pk.entry) == ("mine", True, "")
    pk = key_for_paper(paper(), idx, "lastnameYEARfirstword")
    assert (
        pk.key == "dehghani2017neural"
        and not pk.in_bib
        and pk.entry.startswith("@inproceedings{dehghani2017neural,")
    )
    # A BibTeX-imported paper keeps its own key, unless that key is taken by another entry.
    own = paper(bibtex="@inproceedings{hand,\n  title = {Weak}\n}", key="hand", doi="10.1/other")
    idx2 = BibIndex.from_texts([("r.bib", "@misc{hand, title={Completely different}, doi={10.9/zzz}}")])
    pk = key_for_paper(own, idx2, "lastnameYEARfirstword")
    assert pk.key == "dehghani2017neural" and "@inproceedings{dehghani2017neural," in pk.entry


# -- completion -----------------------------------------------------------------------------------
def _cursor(text: str, lang: draft.Lang = "latex"):
    offset = text.index("|")
    text = text.replace("|", "")
    return text, draft.citation_at(text, offset, lang), draft.LineIndex(text)


@pytest.mark.parametrize(
    ("text", "start", "end", "prefix_filter"),
    [
        (r"See \cite{a, b,|}.", 15, 15, ""),
        (r"See \cite{a, |b}.", 13, 14, ""),  # at the start of a key: that key is the one replaced
        (r"See \cite{|}.", 10, 10, ""),
        (r"See \cite{deh|}.", 10, 13, "deh"),
        (r"See \cite{TODO|}.", 10, 14, "TODO"),
        ("See [@|].", 6, 6, ""),
        ("See [@a; @|].", 10, 10, ""),
    ],
)
def test_completion_edit_replaces_only_the_slot(text, start, end, prefix_filter) -> None:
    src, cur, lines = _cursor(text, "markdown" if "[@" in text else "latex")
    assert cur is not None
    res = build_completion(
        menu_order(
            [rec(paper(1), 1), rec(paper(2, title="Another Paper on Retrieval", doi="10.1/b"), 2)],
            BibIndex(),
            "lastnameYEARfirstword",
        ),
        cur,
        lines,
        doc_uri="file:///d.tex",
        bib_path="/refs.bib",
        complete=False,
        with_documentation=False,
    )
    assert res.is_incomplete
    assert [e.sort_text for e in res.items] == ["001", "002"]
    for e in res.items:
        assert e.edit.start == (0, start) and e.edit.end == (0, end)
        assert e.edit.new_text.endswith(e.label)
        assert e.filter_text.startswith(prefix_filter if prefix_filter == "TODO" else e.label)
        assert e.documentation is None and e.command is not None and e.command[1] == "citewise.insertCitation"
    assert "weak" in res.items[0].filter_text.lower() and "Dehghani" in res.items[0].filter_text


def test_completion_marks_bib_entries_and_documents() -> None:
    src, cur, lines = _cursor(r"\cite{|}")
    idx = BibIndex.from_texts([("refs.bib", "@article{dz17, doi = {10.1145/3077136.3080832}}")])
    res = build_completion(
        menu_order([rec(paper(1, abstract="We train on weak labels."))], idx, "lastnameYEARfirstword"),
        cur,
        lines,
        doc_uri="u",
        bib_path="/refs.bib",
        complete=True,
        with_documentation=True,
    )
    (e,) = res.items
    assert e.label == "dz17" and e.in_bib and e.command is None and "in .bib" in e.label_description
    assert (
        "**Neural Ranking Models with Weak Supervision**" in e.documentation
        and "weak labels" in e.documentation
    )
    assert (
        "*Why:* found by bm25:local #1" in e.documentation
        and e.detail
        == "✓ in .bib · Neural Ranking Models with Weak Supervision (Dehghani and Zamani 2017, SIGIR)"
    )
    assert not res.is_incomplete


@pytest.mark.parametrize(
    ("prefix", "ok"),
    [
        ("", True),
        ("dehg", True),
        ("DEHG", True),
        ("weak", True),
        ("supervis", True),
        ("zamani", True),
        ("neural r", True),
        ("transformer", False),
        ("10.1145", False),
    ],
)
def test_matches_prefix(prefix: str, ok: bool) -> None:
    assert matches_prefix(paper(), "dehghani2017neural", prefix) is ok


@pytest.mark.parametrize(
    ("authors", "expected"),
    [
        ([], "unknown authors"),
        (["Smith, J."], "Smith"),
        (["Smith, J.", "Lee, K."], "Smith and Lee"),
        (["A, x", "B, y", "C, z"], "A, B and C"),
        (["A, x", "B", "C", "D"], "A et al."),
        (["Jane Doe"], "Doe"),
    ],
)
def test_short_authors(authors, expected) -> None:
    assert short_authors(authors) == expected


# -- code actions / edits -------------------------------------------------------------------------
def test_cite_plan_creates_appends_or_reuses() -> None:
    text = r"Weak labels help \cite{?}."
    ph = draft.placeholders(text, "latex")[0]
    lines = draft.LineIndex(text)
    slot = (ph.start, ph.end, ph.before, ph.after)
    key, plan = cite_plan(
        paper(), "/d.tex", lines, slot, BibIndex(), "/refs.bib", None, "lastnameYEARfirstword"
    )
    assert key == "dehghani2017neural"
    assert [(c.path, c.create) for c in plan.changes] == [("/d.tex", False), ("/refs.bib", True)]
    assert plan.changes[0].edits[0].new_text == key and plan.changes[0].edits[0].start == (0, 23)
    bib_text = "@misc{x, title={X}}\n"
    key, plan = cite_plan(
        paper(),
        "/d.tex",
        lines,
        slot,
        BibIndex.from_texts([("/refs.bib", bib_text)]),
        "/refs.bib",
        bib_text,
        "lastnameYEARfirstword",
    )
    append = plan.changes[1]
    assert (
        not append.create
        and append.edits[0].start == (1, 0)
        and append.edits[0].new_text.startswith("\n@inproceedings")
    )
    idx = BibIndex.from_texts(
        [("/refs.bib", "@article{old, title = {Neural ranking models with weak supervision}}")]
    )
    key, plan = cite_plan(paper(), "/d.tex", lines, slot, idx, "/refs.bib", "...", "lastnameYEARfirstword")
    assert key == "old" and len(plan.changes) == 1


def test_todo_marker_and_top5_actions() -> None:
    text = "Weak labels help \\cite<>."
    ph = draft.placeholders(text, "latex")[0]
    items = [rec(paper(i, title=f"Paper number {i} about ranking", doi=f"10.1/{i}"), i) for i in range(1, 8)]
    actions = placeholder_actions(
        ph, items, "/d.tex", draft.LineIndex(text), BibIndex(), "/r.bib", "", "authoryear"
    )
    assert len(actions) == 5 and actions[0].preferred and not actions[1].preferred
    assert actions[0].title == "Cite: Paper number 1 about ranking (2017)"
    draft_edit = actions[0].plan.changes[0].edits[0]
    assert (
        draft_edit.new_text == "\\cite{dehghani2017}"
        and draft_edit.start == (0, 17)
        and draft_edit.end == (0, 24)
    )


def test_missing_entry_action_keeps_the_drafts_key() -> None:
    p = paper(
        bibtex="@inproceedings{10.1145/3077136.3080832,\n  title = {Neural}\n}", key="10.1145/3077136.3080832"
    )
    a = missing_entry_action("dz17", p, BibIndex(), "/r.bib", None)
    assert a is not None and a.diagnostic_key == "dz17"
    (change,) = a.plan.changes
    # A corpus entry (DOI key) is rebuilt clean from the record, under the draft's key.
    assert change.create and change.edits[0].new_text.startswith("@inproceedings{dz17,\n")
    assert "doi = {10.1145/3077136.3080832}" in change.edits[0].new_text
    assert missing_entry_action("x", p, BibIndex.from_texts([("r", "@misc{x,}")]), "/r.bib", "") is None
    assert bib_append("/r.bib", "a\n", "E").edits[0].start == (1, 0)


def test_hover_and_diagnostic_text() -> None:
    md = hover_markdown(paper(abstract="Abstract here.", arxiv="1704.08803"), "k", False)
    assert "https://doi.org/10.1145/3077136.3080832" in md and "arxiv.org/abs/1704.08803" in md
    assert "Dehghani, Mostafa; Zamani, Hamed" in md and "not in the draft's bibliography" in md
    text = r"x \cite{?}"
    ph = draft.placeholders(text, "latex")[0]
    d = placeholder_diagnostic(ph, draft.LineIndex(text), [rec(paper())] * 3)
    assert (
        d.message == "3 suggestions; top: Neural Ranking Models with Weak Supervision (2017)"
        and d.severity == 3
    )
    assert d.start == (0, 2) and d.end == (0, 10)


# -- speculative ranker ---------------------------------------------------------------------------
class FakeStore:
    generation = 0

    def get_many(self, ids):
        return {i: paper(i, doi=f"10.1/{i}") for i in ids}


class FakeRecommender:
    """Counts calls; ``recommend`` blocks until released, like a slow second stage."""

    second_stage = None

    def __init__(self) -> None:
        self.store = FakeStore()
        self.release = threading.Event()
        self.full_calls = 0

    def prefetch(self, query, k=200, *, excluded=(), fast=False):
        return [Candidate(i, 1.0 / i) for i in range(1, k + 1)]

    def with_papers(self, cands):
        papers = self.store.get_many([c.paper_id for c in cands])
        return [Recommendation(papers[c.paper_id], c) for c in cands]

    def recommend(self, query, k=10, *, candidates=200, excluded=(), rerank=True):
        self.full_calls += 1
        self.release.wait(5)
        return [rec(paper(i, doi=f"10.1/{i}"), i) for i in range(k, 0, -1)]


def test_speculative_ranker_cache_retain_and_swap() -> None:
    fake = FakeRecommender()
    with ThreadPoolExecutor(1) as pool:
        r = SpeculativeRanker(fake, pool, k=5, candidates=10)  # type: ignore[arg-type]
        q1, q2 = ContextQuery("first context"), ContextQuery("second context")
        fast = r.fast(q1)
        assert not fast.complete and [x.paper.id for x in fast.items] == [1, 2, 3, 4, 5]
        f1 = r.schedule(q1)
        f2 = r.schedule(q2)  # queued behind f1
        assert r.schedule(q1) is f1 and r.cached(q1) is None
        assert r.retain({r.key(q1)}) == 1 and f2.cancelled()
        fake.release.set()
        full = f1.result(5)
        assert full.complete and r.cached(q1) is full and fake.full_calls == 1
        assert r.schedule(q1).result(0).items == full.items  # served from the cache
        r.swap(FakeRecommender())
        assert r.cached(q1) is None
    assert query_hash(q1, 5, 10, True) != query_hash(q1, 5, 10, False)


def test_empty_context_ranks_nothing() -> None:
    with ThreadPoolExecutor(1) as pool:
        r = SpeculativeRanker(FakeRecommender(), pool)  # type: ignore[arg-type]
        assert r.fast(ContextQuery("  ")).items == []
        start = time.perf_counter()
        assert r.full(ContextQuery("")).items == [] and time.perf_counter() - start < 1


# -- whole-draft suggestions with citation-graph navigation --------------------------------------
def test_suggest_for_draft_follows_citations(tmp_path: Path) -> None:
    from citewise.models.recommender import Recommender

    store = Store(tmp_path / "s.sqlite")
    records = [
        PaperRecord(
            "Quokka burrow frobnication",
            abstract="quokka burrows frobnication",
            doi="10.1/a",
            references=["10.1/c"],
        ),
        PaperRecord(
            "Frobnication of quokka colonies",
            abstract="quokka frobnication",
            doi="10.1/b",
            references=["10.1/c"],
        ),
        PaperRecord("A classic on marsupial housing", abstract="marsupial dens", doi="10.1/c"),
        PaperRecord("Unrelated databases", abstract="B-trees and indexes", doi="10.1/d"),
    ]
    store.import_source(str(tmp_path / "x.jsonl"), records, fmt="jsonl")
    store.resolve_citations()
    rec_ = Recommender(store)
    a = store.find(doi="10.1/a")
    out = suggest_for_draft(
        rec_, "Quokka frobnication", "", "We frobnicate quokka burrows.", k=5, exclude={a.id}
    )
    titles = [s.paper.title for s in out]
    assert "Quokka burrow frobnication" not in titles  # already cited
    # The direct match and the classic that both quokka papers cite lead (the classic's citing
    # field holds their titles: docs/citation-expansion.md), then the rest.
    assert set(titles[:2]) == {"Frobnication of quokka colonies", "A classic on marsupial housing"}, titles
    classic = next(s for s in out if s.paper.doi == "10.1/c")
    assert any("cited by" in r for r in classic.reasons)


@pytest.mark.parametrize("bib_at", [0, 1, 2, 5, 7])
def test_the_menu_and_the_cite_actions_order_the_same_list_alike(bib_at: int) -> None:
    """Both order by models/bib_lift.lift: for the same ranked list the menu's first five keys are
    the five "Cite:" actions' keys, whichever rank the draft's .bib paper holds; and a .bib paper
    ranked below second keeps its place (the menu's old window lifted it first)."""
    items = [rec(paper(i, title=f"Paper number {i} about ranking", doi=f"10.1/{i}"), i) for i in range(1, 9)]
    mine = items[bib_at].paper
    idx = BibIndex.from_texts(
        [("/r.bib", f"@article{{mine, title = {{{mine.title}}}, doi = {{{mine.doi}}}}}")]
    )
    text = "Weak labels help \\cite{}."
    ph = draft.placeholders(text, "latex")[0]
    actions = placeholder_actions(ph, items, "/d.tex", draft.LineIndex(text), idx, "/r.bib", "", "authoryear")
    _src, cur, lines = _cursor(r"Weak labels help \cite{|}.")
    res = build_completion(
        menu_order(items, idx, "authoryear"),
        cur,
        lines,
        doc_uri="u",
        bib_path="/r.bib",
        complete=True,
        with_documentation=False,
    )
    menu = [e.label for e in res.items]
    cited = [a.plan.changes[0].edits[0].new_text.removeprefix("\\cite{").removesuffix("}") for a in actions]
    assert menu[:5] == cited
    assert menu.index("mine") == (0 if bib_at < 2 else bib_at)


def test_an_accented_own_entry_is_found_by_the_stored_title() -> None:
    """The store and the .bib index read TeX the same way: the user's entry is not offered anew."""
    from citewise.indexer.texclean import tex_to_unicode

    tex_title = r"Na\"ive Retrieval Methoden f\"{u}r Lange Dokumente"
    bib = BibIndex.from_texts(
        [("refs.bib", "@article{mueller2020,\n  title = {" + tex_title + "},\n  year = 2020\n}\n")]
    )
    stored = PaperRecord(title=tex_to_unicode(tex_title), year=2020)  # what the importer stores
    assert stored.title == "Naïve Retrieval Methoden für Lange Dokumente"
    assert bib.key_for(stored) == "mueller2020"
    assert bib.entries["mueller2020"].title == stored.title


def test_bib_index_lines_are_right_far_into_a_large_file() -> None:
    entries = "".join(
        f"@misc{{k{i},\n  title = {{Paper number {i} about retrieval}},\n}}\n\n" for i in range(3000)
    )
    bib = BibIndex.from_texts([("big.bib", entries)])
    assert len(bib.entries) == 3000
    assert bib.entries["k0"].line == 0 and bib.entries["k2999"].line == 4 * 2999
    assert bib.key_for(PaperRecord(title="Paper number 1234 about retrieval")) == "k1234"


def test_the_fields_setting_decides_whether_the_abstract_is_inserted() -> None:
    from citewise.settings import EntryStyle, Settings

    p = PaperRecord(
        title="Dense Passage Retrieval",
        abstract="We show that retrieval can be dense.",
        authors=["Karpukhin, Vladimir"],
        year=2020,
        venue="EMNLP",
        entry_type="inproceedings",
    )
    standard = key_for_paper(p, BibIndex(), Settings().entry_style)
    full = key_for_paper(p, BibIndex(), EntryStyle(fields="full"))
    assert standard.key == full.key == "karpukhin2020dense"
    assert "abstract" not in standard.entry and "abstract = {We show" in full.entry
    assert key_for_paper(p, BibIndex(), "lastnameYEARfirstword").entry == standard.entry  # a bare key style


def test_a_bib_entry_the_draft_cites_elsewhere_is_not_lifted() -> None:
    """A paper accepted for one sentence (cited there) keeps the next sentence's order, in the menu
    and in the code actions alike; the keys cited in the slot's own citation do not count."""
    from citewise.server.completion.slot import cited_elsewhere

    text = r"First \cite{mine}. Second \cite{other, }."
    cits = draft.find_citations(text, "latex")
    assert cited_elsewhere(cits, cits[1]) == {"mine"} and cited_elsewhere(cits, cits[0]) == {"other"}
    items = [rec(paper(i, title=f"Paper number {i} about ranking", doi=f"10.1/{i}"), i) for i in range(1, 4)]
    idx = BibIndex.from_texts([("/r.bib", "@article{mine, doi = {10.1/2}}")])
    ph_text = "Weak labels help \\cite{}."
    ph = draft.placeholders(ph_text, "latex")[0]
    lines = draft.LineIndex(ph_text)
    for cited, first in ((frozenset(), "mine"), (frozenset({"mine"}), "dehghani2017")):
        actions = placeholder_actions(
            ph, items, "/d.tex", lines, idx, "/r.bib", "", "authoryear", cited=cited
        )
        _src, cur, cl = _cursor(r"Weak labels help \cite{|}.")
        res = build_completion(
            menu_order(items, idx, "authoryear", cited),
            cur,
            cl,
            doc_uri="u",
            bib_path="/r.bib",
            complete=True,
            with_documentation=False,
        )
        assert res.items[0].label == first
        assert actions[0].plan.changes[0].edits[0].new_text == first
