"""Key slots wherever texlab completes (issue 24, item 4), the pure parts: the LaTeX scanner's new
commands, the key that filters a slot, the keys cited so far, what a slot offers from the
ranking and from the draft's ``.bib``, and title-less ``.bib`` entries in the importer and the
writer. End to end through the server: ``tests/lsp/test_lsp_completion_texlab.py``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from citewise.cli import main
from citewise.indexer.bibtex import iter_bibtex_text
from citewise.indexer.bibtex_writer import bibtex_entry, format_entry
from citewise.indexer.importer import import_sources
from citewise.indexer.records import ImportProblem, PaperRecord
from citewise.indexer.store import Store, StoredPaper
from citewise.models.query import Candidate, ContextQuery
from citewise.models.recommender import Recommendation
from citewise.server import draft
from citewise.server.bibindex import BibIndex
from citewise.server.completion.slot import bib_entry_matches, has_sentence, own_entries, slot_items
from citewise.server.latex_cite import CITE_COMMANDS, MULTICITE_COMMANDS, VOLUME_COMMANDS

from .test_scan_adversarial import BOUND_S, SIZE, scanners, timed

# texlab crates/parser/src/config.rs, DEFAULT_CITATION_COMMANDS (56 names, as of 2025).
TEXLAB_COMMANDS = """
cite cite* Cite nocite citet citet* citep citep* citeauthor citeauthor* Citeauthor Citeauthor*
citetitle citetitle* citeyear citeyear* citedate citedate* citeurl fullcite citeyearpar citealt
citealp citetext parencite parencite* Parencite footcite footfullcite footcitetext textcite Textcite
smartcite supercite autocite autocite* Autocite Autocite* volcite Volcite pvolcite Pvolcite fvolcite
ftvolcite svolcite Svolcite tvolcite Tvolcite avolcite Avolcite notecite pnotecite Pnotecite
fnotecite citeA citeA*
""".split()


def cursor(src: str) -> tuple[str, int]:
    i = src.index("|")
    return src[:i] + src[i + 1 :], i


def keys_of(text: str) -> list[tuple[str, tuple[str, ...]]]:
    return [(c.command, tuple(k.key for k in c.keys)) for c in draft.find_citations(text, "latex")]


# --------------------------------------------------------------------------------------------
# The command table
# --------------------------------------------------------------------------------------------


def test_every_texlab_command_but_citetext_is_a_citation_command() -> None:
    assert len(TEXLAB_COMMANDS) == 56
    names = {c.rstrip("*") for c in TEXLAB_COMMANDS}
    assert names - CITE_COMMANDS == {"citetext"}  # natbib's free text: docs/language-server.md
    assert {"Notecite", "Volcites", "Avolcites"} <= CITE_COMMANDS  # biblatex's, not texlab's
    assert VOLUME_COMMANDS <= CITE_COMMANDS and "volcites" in MULTICITE_COMMANDS


def test_citetext_stays_free_text() -> None:
    """``\\citetext{priv.\\ comm.}`` holds prose; its words must not become missing keys."""
    for src in (r"\citetext{see}", r"\citetext{personal communication}", r"\citetext{priv.\ comm.}"):
        assert keys_of(src) == []
    text, off = cursor(r"\citetext{|}")
    assert draft.citation_at(text, off, "latex") is None
    assert keys_of(r"\citetext{\citealp{a}, priv.\ comm.}") == [(r"\citealp", ("a",))]


# --------------------------------------------------------------------------------------------
# \volcite, \notecite and acro's \DeclareAcronym
# --------------------------------------------------------------------------------------------

VOLUME_SINGLE = sorted(n for n in VOLUME_COMMANDS if not n.endswith("s"))


@pytest.mark.parametrize("name", VOLUME_SINGLE)
def test_volcite_cites_the_key_after_the_volume(name: str) -> None:
    assert keys_of(f"\\{name}[see]{{3}}[pp. 4--5]{{knuth}}") == [(f"\\{name}", ("knuth",))]
    assert keys_of(f"\\{name}{{IV}}{{a}}") == [(f"\\{name}", ("a",))]
    text, off = cursor(f"\\{name}[p]{{3}}[pp]{{|}}")
    cc = draft.citation_at(text, off, "latex")
    assert cc is not None and (cc.start, cc.end) == (off, off) and cc.placeholder
    text, off = cursor(f"\\{name}[p]{{|}}[pp]{{}}")  # the volume is not a key slot
    assert draft.citation_at(text, off, "latex") is None


@pytest.mark.parametrize(
    ("src", "expected"),
    [
        (r"\volcite{3}", []),  # the volume typed, the key list not yet
        (r"\volcite{3}[p]", []),
        (r"\volcite", []),
        ("\\volcite{3\n}{a}", []),  # a volume is one short line
        (r"\volcite{" + "9" * 100 + "}{a}", []),
        (r"\volcite{3}{a}{b}", [(r"\volcite", ("a",))]),  # one key list only
        (r"\volcite{3}{smi", [(r"\volcite", ("smi",))]),  # being typed
        (r"\volcites{1}{a}{2}{b}", [(r"\volcites", ("a", "b"))]),
        (r"\Avolcites(see)(and)[p]{3}[pp]{x}[q]{4}{y}", [(r"\Avolcites", ("x", "y"))]),
        (r"\notecite[a][b]{x}", [(r"\notecite", ("x",))]),
        (r"\Notecite{x, y}", [(r"\Notecite", ("x", "y"))]),
        (r"\Pnotecite[p. 3]{x}", [(r"\Pnotecite", ("x",))]),
        (r"\fnotecite{x}", [(r"\fnotecite", ("x",))]),
    ],
)
def test_volcite_and_notecite_forms(src: str, expected: list) -> None:
    assert keys_of(src) == expected


@pytest.mark.parametrize(
    ("src", "expected"),
    [
        (r"\DeclareAcronym{foo}{cite={a}}", ("a",)),
        (r"\DeclareAcronym{foo}{short = FOO, long = Foo Object, cite = {a, b}}", ("a", "b")),
        ("\\DeclareAcronym{foo}{\n  short = FOO,\n  cite = [see][p. 3]{a},\n}", ("a",)),
        (r"\DeclareAcronym{foo}{cite={}}", ("",)),
        ("\\DeclareAcronym{foo}{cite={\n}}", ("",)),
        ("\\DeclareAcronym{foo}{short=F, cite={sm", ("sm",)),  # being typed
        (r"\DeclareAcronym*{foo}{cite={a}}", ("a",)),
        # Keys never contain a space: read as a list being typed, as "\cite{" + newline + "a b}" is.
        ("\\DeclareAcronym{foo}{cite={\na b}}", ("",)),
    ],
)
def test_acronym_cite_keys(src: str, expected: tuple[str, ...]) -> None:
    assert keys_of(src) == [(r"\DeclareAcronym", expected)]


@pytest.mark.parametrize(
    "src",
    [
        r"\DeclareAcronym{foo}{short=FOO}",
        r"\DeclareAcronym{foo}{cite=a}",  # unbraced: not read (a braced list is acro's usual form)
        r"\DeclareAcronym{foo}{excite={a}}",
        r"% \DeclareAcronym{foo}{cite={a}}",
        r"\\DeclareAcronym{foo}{cite={a}}",  # a line break, then text
        r"\DeclareAcronym{foo}",
        r"\DeclareAcronym{foo}{short=F}{cite={a}}",  # a third argument is not the properties
    ],
)
def test_acronym_without_a_cite_key_list(src: str) -> None:
    assert keys_of(src) == []


def test_acronyms_and_commands_come_in_document_order() -> None:
    text = r"\cite{a} \DeclareAcronym{x}{cite={b}} \citep{c} \DeclareAcronym{y}{long={\cite{d}}, cite={e}}"
    got = keys_of(text)
    assert [k for _c, k in got] == [("a",), ("b",), ("c",), ("e",), ("d",)]
    assert [c.start for c in draft.find_citations(text, "latex")] == sorted(
        c.start for c in draft.find_citations(text, "latex")
    )


# Runs of what the new scanning reads, at 100 KB: each must stay linear.
NEW_UNITS = {
    "volcite{ runs": "\\volcite{",
    "volcite[ runs": "\\volcite[p]{3}[",
    "volcite volume runs": "\\volcite{3}",
    "volcites runs": "\\volcites(a)(b)[p]{3}[pp]{x}",
    "acronym runs": "\\DeclareAcronym{a}{",
    "acronym cite runs": "\\DeclareAcronym{a}{cite={",
    "acronym nested": "\\DeclareAcronym{a}{long={",
    "cite= runs": "cite = ",
}


@pytest.mark.parametrize("name", sorted(NEW_UNITS))
def test_new_scans_of_adversarial_100kb_inputs_are_bounded(name: str) -> None:
    unit = NEW_UNITS[name]
    text = (unit * (SIZE // len(unit) + 1))[:SIZE]
    slow = [(scan, round(t, 2)) for scan, fn in scanners(text) if (t := timed(fn)) > BOUND_S]
    assert timed(lambda: draft.recent_keys(text, len(text), "latex")) < BOUND_S
    assert not slow, f"{name}: super-linear scans {slow}"


def test_deeply_nested_acronyms_scan_in_bounded_time() -> None:
    text = "\\DeclareAcronym{a}{cite={k}, long={" * 5000 + "}}" * 5000
    assert timed(lambda: draft.find_citations(text, "latex")) < BOUND_S
    # Properties past 5,000 characters are no acronym's: a few are read again, each once.
    assert {tuple(k.key for k in c.keys) for c in draft.find_citations(text, "latex")} == {("k",)}


# --------------------------------------------------------------------------------------------
# The key that filters a slot, and the keys cited so far
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("src", "lang", "key", "prefix"),
    [
        (r"\cite{|foo}", "latex", "foo", ""),
        (r"\cite{fo|o}", "latex", "foo", "fo"),
        (r"\cite{foo|}", "latex", "foo", "foo"),
        (r"\cite{a, b|ar, c}", "latex", "bar", "b"),
        (r"\volcite{2}{|knuth}", "latex", "knuth", ""),
        (r"\cite{|}", "latex", "", ""),
        (r"\cite{TO|DO}", "latex", "", ""),
        (r"\cite<|>", "latex", "", ""),
        (r"\cite{a,| b}", "latex", "", ""),  # in the space before a key: a new key goes there
        ("[@sm|ith]", "markdown", "smith", "sm"),
        ("[@|]", "markdown", "", ""),
    ],
)
def test_the_whole_key_filters_and_is_replaced(src: str, lang: draft.Lang, key: str, prefix: str) -> None:
    text, off = cursor(src)
    cc = draft.citation_at(text, off, lang)
    assert cc is not None
    assert cc.filter_key == key and cc.prefix == prefix
    if key:
        assert text[cc.start : cc.end] == key  # the edit replaces all of it


def test_recent_keys_are_the_nearest_first_each_once() -> None:
    text = r"\cite{a, b} text \citep{c, a} more \cite{?} and \cite{d} |\cite{e}"
    text, off = cursor(text)
    assert draft.recent_keys(text, off, "latex") == ["d", "a", "c", "b"]
    assert draft.recent_keys(text, off, "latex", limit=2) == ["d", "a"]
    assert draft.recent_keys(text, 0, "latex") == []
    many = "".join(f"\\cite{{k{i}}} " for i in range(1000))
    assert draft.recent_keys(many, len(many), "latex", limit=3) == ["k999", "k998", "k997"]
    assert draft.recent_keys("[@a; @b] and @c |", 16, "markdown") == ["c", "b", "a"]


# --------------------------------------------------------------------------------------------
# What a slot offers: the ranking and the draft's .bib
# --------------------------------------------------------------------------------------------

BIB = """@article{smith2020deep, title = {Deep Nets for Glaciers}}
@article{jones2019,}
@article{lee2018graph, title = {Graph Search}}
@misc{zhang2021,}
"""


def rec(key: str, pid: int, title: str = "") -> Recommendation:
    return Recommendation(StoredPaper(title=title or key, key=key, id=pid), Candidate(pid, 1.0))


def test_has_sentence_ignores_the_title_and_abstract() -> None:
    assert not has_sentence(ContextQuery(""))
    assert not has_sentence(ContextQuery("Deep Nets for glaciers.", "Deep nets for glaciers"))
    assert not has_sentence(ContextQuery("melt rates", "Deep nets", "We model melt rates."))
    assert has_sentence(ContextQuery("Recurrent networks forecast melt", "Deep nets for glaciers"))


@pytest.mark.parametrize(
    ("typed", "key", "title", "expected"),
    [
        ("", "x", "", True),
        ("smi", "smith2020deep", "deep nets", True),
        ("SMI", "smith2020deep", "", True),
        ("gla", "smith2020deep", "deep nets for glaciers", True),
        ("gla", "smith2020deep", "", False),
        ("nets", "smith2020deep", "deep nets", True),
        ("x", "smith2020deep", "deep nets", False),
    ],
)
def test_bib_entry_matches(typed: str, key: str, title: str, expected: bool) -> None:
    ids = BibIndex.from_texts([("r.bib", f"@article{{{key}, title={{{title}}}}}")]).entries[key]
    assert bib_entry_matches(key, ids, typed) is expected


def test_own_entries_first_the_given_keys_then_the_file_order() -> None:
    bib = BibIndex.from_texts([("r.bib", BIB)])
    stored = {"lee2018graph": StoredPaper(title="Graph Search", key="lee", id=7)}
    got = list(own_entries(bib, "", ["zhang2021", "unknown", "zhang2021"], lambda k, _i: stored.get(k)))
    assert [key for _r, key in got] == ["zhang2021", "smith2020deep", "jones2019", "lee2018graph"]
    papers = {key: r.paper for r, key in got}
    assert papers["lee2018graph"].id == 7  # the stored paper (its store key may differ)
    assert papers["jones2019"].title == "jones2019" and papers["jones2019"].id == 0  # title-less
    assert papers["smith2020deep"].title == "Deep Nets for Glaciers"
    typed = [key for _r, key in own_entries(bib, "gla", [], lambda k, _i: None)]
    assert typed == ["smith2020deep"]


def test_own_entries_are_lazy() -> None:
    bib = BibIndex.from_texts([("r.bib", "".join(f"@misc{{k{i},}}\n" for i in range(50_000)))])
    looked: list[str] = []
    gen = own_entries(bib, "", [], lambda k, _i: looked.append(k))
    assert [next(gen)[1] for _ in range(3)] == ["k0", "k1", "k2"] and len(looked) == 3


def _slot(ranked: list[Recommendation], own_keys: list[str], typed: str, k: int, own_first: bool):
    own = ((rec(key, 0), key) for key in own_keys)
    items, more = slot_items(ranked, own, typed, lambda p: p.key, k, own_first=own_first)
    return [r.paper.key for r in items], more


def test_a_sentence_ranks_first_and_the_bib_follows_only_what_was_typed() -> None:
    ranked = [rec("r1", 1), rec("mine", 2), rec("r2", 3)]
    # Unrelated .bib entries would be lifted above the sentence's papers: not added.
    assert _slot(ranked, ["mine", "b1", "b2"], "", 10, False) == (["r1", "mine", "r2"], False)
    assert _slot([], ["b1", "b2"], "", 10, False) == (["b1", "b2"], False)  # an empty store
    # Typed: the ranking's matches, then the .bib's (own_entries filtered them), each key once.
    assert _slot(ranked, ["rb", "r1"], "r", 10, False) == (["r1", "r2", "rb"], False)
    # Full: complete unless the server filters what was typed (the client filters a complete list).
    assert _slot(ranked, ["b1"], "", 2, False) == (["r1", "mine"], False)
    assert _slot(ranked, ["b1"], "r", 1, False) == (["r1"], True)


def test_no_sentence_puts_the_bib_first() -> None:
    ranked = [rec("r1", 1), rec("mine", 2)]
    assert _slot(ranked, ["mine", "b1"], "", 10, True) == (["mine", "b1", "r1"], False)
    # A .bib longer than the list: the rest is reached by typing, so the client must ask again.
    assert _slot(ranked, ["mine", "b1", "b2"], "", 2, True) == (["mine", "b1"], True)


def test_each_paper_once_and_two_versions_of_one_key_both() -> None:
    """Two stored versions of one work carry one key (completion tags them apart): both stay; a
    .bib entry the ranking already offered does not come again, nor a paper twice."""
    ranked = [rec("same", 1), rec("same", 2), rec("mine", 3), rec("same", 1)]
    assert _slot(ranked, ["mine", "b1"], "", 10, True) == (["mine", "b1", "same", "same"], False)
    # (own_entries filters the .bib by what was typed; here the .bib part comes unfiltered.)
    assert _slot(ranked, ["mine", "b1"], "m", 10, False) == (["mine", "b1"], False)


def test_what_was_typed_filters_the_ranking() -> None:
    ranked = [rec("alpha", 1, "Glacier melt"), rec("beta", 2, "Sea ice")]
    assert _slot(ranked, [], "gla", 10, False) == (["alpha"], False)
    assert _slot(ranked, [], "bet", 10, False) == (["beta"], False)


# --------------------------------------------------------------------------------------------
# Title-less .bib entries: imported under their key, written back without a made-up title
# --------------------------------------------------------------------------------------------

TITLELESS = """@article{foo,}
@misc{knuth:web, author = {Knuth, Donald}, year = {1984}, howpublished = {\\url{https://example.org}}}
@article{bar:2005,}
"""


def test_a_titleless_entry_is_imported_under_its_key() -> None:
    items = list(iter_bibtex_text(TITLELESS, "lib.bib"))
    assert not [p for p in items if isinstance(p, ImportProblem)]
    records = {r.key: r for r in items if isinstance(r, PaperRecord)}
    assert set(records) == {"foo", "knuth:web", "bar:2005"}
    knuth = records["knuth:web"]
    assert knuth.title == "knuth:web" and knuth.authors == ["Knuth, Donald"] and knuth.year == 1984


def test_titleless_entries_stay_distinct_papers_in_the_store(tmp_path: Path) -> None:
    (tmp_path / "lib.bib").write_text(TITLELESS, encoding="utf-8")
    store = Store(tmp_path / "papers.sqlite")
    stats = import_sources(store, [tmp_path / "lib.bib"])
    assert stats.imported == 3 and stats.broken == 0 and not stats.problems
    assert store.count() == 3
    store.close()


def test_citewise_index_accepts_a_bib_of_titleless_entries(tmp_path: Path, capsys) -> None:
    (tmp_path / "lib.bib").write_text(TITLELESS, encoding="utf-8")
    code = main(
        ["index", str(tmp_path / "lib.bib"), "--store", str(tmp_path / "s.sqlite"), "-q", "--no-embed"]
    )
    out = capsys.readouterr()
    assert code == 0, out.err
    assert out.out.startswith("3 imported") and "0 broken" in out.out and "warning" not in out.err


def test_a_built_entry_makes_no_title_up() -> None:
    (knuth,) = [r for r in iter_bibtex_text(TITLELESS, "lib.bib") if r.key == "knuth:web"]
    built = format_entry(knuth, "knuth1984")
    assert "title" not in built and "Knuth, Donald" in built and "1984" in built
    key, entry = bibtex_entry(knuth)  # the user's own entry goes back as written
    assert key == "knuth:web" and entry.strip() == knuth.bibtex.strip()
    titled = PaperRecord(title="knuth:web", key="knuth:web")  # no BibTeX text: the title is real
    assert "title = {knuth:web}" in format_entry(titled, "k")


@pytest.mark.parametrize(
    "src",
    [
        "We train with contrastive losses \\cite{big1234|.\nMore prose, and \\cite{foo} too.\n",
        "We train \\cite{big1234| more prose here",
    ],
)
def test_a_half_typed_citation_filters_by_what_was_typed(src: str) -> None:
    """With no closing brace yet, the sentence's period after the key is prose, not part of the
    key: the key filters without it, so the user's own ``big1234`` is still found."""
    text, off = cursor(src)
    cc = draft.citation_at(text, off, "latex")
    assert cc is not None and not cc.citation.closed
    assert cc.filter_key == "big1234"
