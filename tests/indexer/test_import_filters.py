"""Filters at import (``citewise index --years --field --venue --around``), the estimate before a
long import (``--estimate``), and the progress of one (issue 25, item 2).

The filter itself (indexer/filters.py) is tested pure, on records made here. Then every source's
real sample goes through ``citewise index`` with filters, and the expected counts are computed
here from the sample files themselves (their JSON read directly, not through citewise's readers).
Where a relation is needed that the samples, drawn independently, do not have (S2AG papers that
the sample's citation rows name), the files are written from the sample's own rows with the ids
changed.
"""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import pytest

from citewise import cli_index
from citewise.cli import main
from citewise.indexer import estimate as estimate_module
from citewise.indexer.filter_seeds import LibraryError, load_library
from citewise.indexer.filters import (
    ImportFilter,
    Neighbourhood,
    YearRange,
    field_matches,
    parse_years,
)
from citewise.indexer.importer import import_sources
from citewise.indexer.records import PaperRecord
from citewise.indexer.sources import pipeline
from citewise.indexer.store import Store

from ..source_samples import read_jsonl, sample, write_jsonl

ARXIV = ("arxiv", "arxiv-metadata-oai-snapshot.first200.jsonl")
OPENALEX = ("openalex", "works_api_page_peneira_2024.json")
OPENALEX_2025 = ("openalex", "work_W2741809807_2025_b-vitamins.json")
S2_PAPERS = ("s2ag", "papers", "papers-sample.jsonl")
S2_CITATIONS = ("s2ag", "citations", "citations-sample.jsonl")
S2_ABSTRACTS = ("s2ag", "abstracts", "abstracts-sample.jsonl")
CROSSREF = ("crossref", "works_query_ecology_boettiger_20items.jsonl")
UNARXIVE = ("unarxive", "arXiv_src_2212_086.jsonl")


# -- the filter, pure --------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "span"),
    [
        ("2015-2024", YearRange(2015, 2024)),
        ("2015-", YearRange(2015, None)),
        ("-2010", YearRange(None, 2010)),
        ("2019", YearRange(2019, 2019)),
        (" 2015 - 2024 ", YearRange(2015, 2024)),
    ],
)
def test_year_ranges(text: str, span: YearRange) -> None:
    assert parse_years(text) == span


@pytest.mark.parametrize("text", ["", "-", "20x", "2015-2024-2030", "2024-2015", "15-20", "2015 2016"])
def test_bad_year_ranges_say_what_is_expected(text: str) -> None:
    with pytest.raises(ValueError, match=r"2015-2024|ends before it starts"):
        parse_years(text)


def test_year_range_membership() -> None:
    assert 2015 in YearRange(2015, 2024) and 2024 in YearRange(2015, 2024)
    assert 2014 not in YearRange(2015, 2024) and 2025 not in YearRange(2015, 2024)
    assert 1900 in YearRange(None, 2010) and 3000 in YearRange(2015, None)
    assert None not in YearRange(None, None)  # no year: not in any range


@pytest.mark.parametrize(
    ("pattern", "value", "matches"),
    [
        ("cs.cl", "cs.cl", True),
        ("cs", "cs.cl", True),  # an archive takes its categories
        ("cs.*", "cs.lg", True),
        ("cs.c", "cs.cl", False),  # not a prefix of the category's name
        ("cs", "cs-ai", False),
        ("hep-ph", "hep-ph", True),
        ("hep", "hep-ph", False),
        ("computer*", "computer science", True),
        ("computer science", "computer science", True),
        ("computer", "computer science", False),
    ],
)
def test_field_patterns(pattern: str, value: str, matches: bool) -> None:
    assert field_matches(pattern, value) is matches


def _rec(**kw) -> PaperRecord:
    return PaperRecord(title=kw.pop("title", "A paper about graph neural networks"), **kw)


def test_every_filter_must_pass_and_repeated_values_are_alternatives() -> None:
    filt = ImportFilter.build("2015-", ["cs.CL", "Computer Science"], ["ACL", "Transactions"])
    good = _rec(year=2019, venue="Proceedings of ACL 2019", subjects=["Computer Science"])
    assert filt.passes(good)
    assert filt.passes(_rec(year=2019, venue="TACL Transactions", extra={"categories": "cs.CL cs.LG"}))
    assert not filt.passes(_rec(year=2014, venue=good.venue, subjects=good.subjects))
    assert not filt.passes(_rec(year=None, venue=good.venue, subjects=good.subjects))
    assert not filt.passes(_rec(year=2019, venue="Nature", subjects=good.subjects))
    assert not filt.passes(_rec(year=2019, venue=good.venue, subjects=["Medicine"]))
    assert not filt.passes(_rec(year=2019, venue=good.venue))  # no subjects at all
    # JSON Lines records have keywords, not subjects.
    assert ImportFilter.build(fields=["retrieval"]).passes(_rec(keywords="ranking, Retrieval"))
    assert not ImportFilter().active and ImportFilter().passes(_rec())


def test_empty_field_or_venue_is_refused() -> None:
    with pytest.raises(ValueError, match="need a value"):
        ImportFilter.build(fields=[" "])
    with pytest.raises(ValueError, match="--years"):
        ImportFilter.build(years="soon")


def test_around_admits_the_library_and_one_hop_and_learns_aliases() -> None:
    around = Neighbourhood(seeds={"10.1/seed"}, near={"openalex:W9"}, titles={"attention is all you need"})
    seed = _rec(doi="10.1/SEED", ids=["corpusid:7", "openalex:W1"], references=["openalex:W2"])
    citing = _rec(doi="10.1/citing", references=["10.1/seed"])
    cited_by_library = _rec(ids=["openalex:W9"])
    by_title = _rec(title="Attention Is All You Need!", ids=["corpusid:8"])
    stranger = _rec(doi="10.1/other", references=["10.1/else"])
    assert all(around.admits(r) for r in (seed, citing, cited_by_library, by_title))
    assert not around.admits(stranger)
    # Nothing is learned by asking; learning gives the seed's other ids and what it cites.
    assert "corpusid:7" not in around.seeds
    around.learn(seed)
    assert {"corpusid:7", "openalex:W1"} <= around.seeds and "openalex:W2" in around.near
    assert around.late == {"openalex:W2"}
    assert around.admits(_rec(ids=["openalex:W2"]))  # cited by the seed, met later
    # Citation rows: an end that is a seed (by the alias just learned); the other end is learned.
    assert around.admits_edge("corpusid:100", "corpusid:7") and not around.admits_edge(
        "corpusid:1", "corpusid:2"
    )
    around.learn_edge("corpusid:100", "corpusid:7")
    assert around.admits(_rec(ids=["corpusid:100"]))
    around.learn(by_title)
    assert "corpusid:8" in around.seeds


def test_citation_rows_pass_by_their_papers() -> None:
    stored = {"corpusid:1", "corpusid:2"}
    filt = ImportFilter.build("2015-")
    assert filt.passes_edge("corpusid:1", "corpusid:2", stored.__contains__)
    assert not filt.passes_edge("corpusid:1", "corpusid:3", stored.__contains__)  # a paper never kept
    around = ImportFilter.build(around=Neighbourhood(seeds={"corpusid:3"}))
    assert around.passes_edge("corpusid:1", "corpusid:3", stored.__contains__)
    assert not around.passes_edge("corpusid:1", "corpusid:2", stored.__contains__)
    both = ImportFilter.build("2015-", around=Neighbourhood(seeds={"corpusid:1"}))
    assert both.passes_edge("corpusid:1", "corpusid:2", stored.__contains__)
    assert not both.passes_edge("corpusid:1", "corpusid:3", stored.__contains__)


# -- through `citewise index` on the real samples -------------------------------------------------------
def _index(capsys, *args: str) -> dict:
    """``citewise index ARGS --json -q`` in this process; its summary."""
    capsys.readouterr()
    assert main(["index", *args, "--json", "-q", "--no-search-index"]) == 0, capsys.readouterr().err
    return json.loads(capsys.readouterr().out)


def _arxiv_rows() -> list[dict]:
    return read_jsonl(sample(*ARXIV))


def _arxiv_year(row: dict) -> int:
    return int(row["versions"][0]["created"].split()[3])  # "Mon, 2 Apr 2007 19:18:42 GMT"


@pytest.mark.parametrize(
    ("args", "wanted"),
    [
        (["--field", "cs"], lambda r: any(c == "cs" or c.startswith("cs.") for c in r["categories"].split())),
        (
            ["--field", "math.CO", "--field", "HEP-TH"],
            lambda r: {"math.CO", "hep-th"} & set(r["categories"].split()),
        ),
        (["--venue", "phys.rev"], lambda r: "phys.rev" in (r.get("journal-ref") or "").lower()),
        (
            ["--years", "2007", "--field", "math.*"],
            lambda r: _arxiv_year(r) == 2007 and "math." in r["categories"],
        ),
        (["--years", "-2006"], lambda r: _arxiv_year(r) <= 2006),
    ],
)
def test_arxiv_snapshot(tmp_path: Path, capsys, args: list[str], wanted) -> None:
    rows = _arxiv_rows()
    expected = sum(1 for r in rows if wanted(r))
    summary = _index(capsys, str(sample(*ARXIV)), "--store", str(tmp_path / "s.sqlite"), *args)
    assert (summary["imported"], summary["filtered"]) == (expected, len(rows) - expected)
    assert Store(tmp_path / "s.sqlite").count() == expected


def _topic_names(work: dict) -> set[str]:
    names = set()
    for topic in work.get("topics") or []:
        names.add(topic["display_name"].lower())
        names |= {topic[level]["display_name"].lower() for level in ("subfield", "field", "domain")}
    return names | {c["display_name"].lower() for c in work.get("concepts") or []}


def _openalex_venue(work: dict) -> str:
    source = (work.get("primary_location") or {}).get("source") or {}
    return (source.get("display_name") or "").lower()


@pytest.mark.parametrize(
    ("args", "wanted"),
    [
        (["--field", "Environmental Science"], lambda w: "environmental science" in _topic_names(w)),
        (  # a topic, a subfield, a legacy concept
            ["--field", "health informatics", "--field", "Public health", "--field", "COVID-19"],
            lambda w: bool({"health informatics", "public health", "covid-19"} & _topic_names(w)),
        ),
        (["--venue", "journal"], lambda w: "journal" in _openalex_venue(w)),
        (["--years", "2021-2022"], lambda w: w["publication_year"] in (2021, 2022)),
        (
            ["--years", "2020-", "--venue", "JMIR"],
            lambda w: w["publication_year"] >= 2020 and "jmir" in _openalex_venue(w),
        ),
    ],
)
def test_openalex_works(tmp_path: Path, capsys, args: list[str], wanted) -> None:
    works = json.loads(sample(*OPENALEX).read_text(encoding="utf-8"))["results"]
    expected = sum(1 for w in works if wanted(w))
    assert 0 < expected < len(works)
    summary = _index(capsys, str(sample(*OPENALEX)), "--store", str(tmp_path / "s.sqlite"), *args)
    assert (summary["imported"], summary["filtered"]) == (expected, len(works) - expected)


def _s2_subjects(row: dict) -> set[str]:
    found = {f["category"].lower() for f in row.get("s2fieldsofstudy") or []}
    return found | {f.lower() for f in row.get("fieldsofstudy") or []}


def _s2_venue(row: dict) -> str:
    for value in (row.get("venue"), (row.get("journal") or {}).get("name")):
        if value and value.strip():
            return value.lower()
    return ""


@pytest.mark.parametrize(
    ("args", "wanted"),
    [
        (
            ["--field", "computer science", "--field", "Mathematics"],
            lambda r: bool({"computer science", "mathematics"} & _s2_subjects(r)),
        ),
        (["--years", "2010-2017"], lambda r: r["year"] is not None and 2010 <= r["year"] <= 2017),
        (["--venue", "journal"], lambda r: "journal" in _s2_venue(r)),
    ],
)
def test_s2ag_papers(tmp_path: Path, capsys, args: list[str], wanted) -> None:
    rows = read_jsonl(sample(*S2_PAPERS))
    expected = sum(1 for r in rows if wanted(r))
    assert 0 < expected < len(rows)
    summary = _index(capsys, str(sample(*S2_PAPERS)), "--store", str(tmp_path / "s.sqlite"), *args)
    assert (summary["imported"], summary["filtered"]) == (expected, len(rows) - expected)


def _crossref_year(work: dict) -> int | None:
    for name in ("issued", "published", "published-print", "published-online", "created"):
        parts = (work.get(name) or {}).get("date-parts") or [[None]]
        if parts[0] and isinstance(parts[0][0], int):
            return parts[0][0]
    return None


@pytest.mark.parametrize(
    ("args", "wanted"),
    [
        (["--years", "2021-"], lambda w: (_crossref_year(w) or 0) >= 2021),
        (["--venue", "ecolog"], lambda w: "ecolog" in " ".join(w.get("container-title") or []).lower()),
    ],
)
def test_crossref_works(tmp_path: Path, capsys, args: list[str], wanted) -> None:
    works = read_jsonl(sample(*CROSSREF))
    expected = sum(1 for w in works if wanted(w))
    assert 0 < expected < len(works)
    summary = _index(capsys, str(sample(*CROSSREF)), "--store", str(tmp_path / "s.sqlite"), *args)
    assert (summary["imported"], summary["filtered"]) == (expected, len(works) - expected)


def test_unarxive_papers_keep_their_own_citing_sentences(tmp_path: Path, capsys) -> None:
    """A paper left out takes its citing sentences with it; a kept one keeps all of its own."""
    papers = read_jsonl(sample(*UNARXIVE))
    kept = {p["metadata"]["id"] for p in papers if "math." in p["metadata"]["categories"]}
    assert 0 < len(kept) < len(papers)
    whole = _index(capsys, str(sample(*UNARXIVE)), "--store", str(tmp_path / "all.sqlite"))
    all_store = Store(tmp_path / "all.sqlite")
    own = all_store.conn.execute(
        f"SELECT count(*) FROM citation_edges WHERE citing_ref IN ({','.join('?' * len(kept))})", sorted(kept)
    ).fetchone()[0]
    assert whole["citations"] > own > 0
    summary = _index(capsys, str(sample(*UNARXIVE)), "--store", str(tmp_path / "s.sqlite"), "--field", "math")
    assert summary["imported"] == len(kept) and summary["citations"] == own
    assert summary["filtered"] == (len(papers) - len(kept)) + (whole["citations"] - own)


# -- S2AG papers, abstracts and citation rows together ---------------------------------------------------
@pytest.fixture()
def s2_linked(tmp_path: Path) -> dict:
    """S2AG papers, abstracts and citation rows that name each other: the sample's citation rows
    with a cited paper, and for each end a papers row and an abstracts row (the samples' own rows,
    their corpus ids changed to the ends', their DOIs made from the corpus id)."""
    rows = [r for r in read_jsonl(sample(*S2_CITATIONS)) if r["citedcorpusid"]][:40]
    templates = read_jsonl(sample(*S2_PAPERS))
    abstracts = [a for a in read_jsonl(sample(*S2_ABSTRACTS)) if a.get("abstract")]
    ends = list(dict.fromkeys(c for r in rows for c in (r["citingcorpusid"], r["citedcorpusid"])))
    papers, years = [], {}
    for i, corpusid in enumerate(ends):
        row = dict(templates[i % len(templates)])
        row["corpusid"] = int(corpusid)
        row["externalids"] = {"CorpusId": corpusid, "DOI": f"10.5555/s2.{corpusid}"}
        row["title"] = f"{row['title']} {i}"
        papers.append(row)
        years[corpusid] = row["year"]
    texts = [{**abstracts[i % len(abstracts)], "corpusid": int(c)} for i, c in enumerate(ends)]
    return {
        "rows": rows,
        "years": years,
        "papers": write_jsonl(tmp_path / "papers.jsonl", papers),
        "abstracts": write_jsonl(tmp_path / "abstracts.jsonl", texts),
        "citations": write_jsonl(tmp_path / "citations.jsonl", rows),
    }


def _edges_of(row: dict) -> int:
    """The edges one citation row becomes: one per citing sentence, or one without."""
    return len([c for c in row.get("contexts") or [] if c and c.strip()]) or 1


def test_s2ag_citation_rows_keep_both_ends_kept(s2_linked: dict, tmp_path: Path, capsys) -> None:
    years = s2_linked["years"]
    kept = {c for c, y in years.items() if y is not None and y >= 2010}
    rows = s2_linked["rows"]
    edges = sum(_edges_of(r) for r in rows if r["citingcorpusid"] in kept and r["citedcorpusid"] in kept)
    all_edges = sum(_edges_of(r) for r in rows)
    assert 0 < len(kept) < len(years) and 0 < edges < all_edges
    files = [str(s2_linked[k]) for k in ("citations", "abstracts", "papers")]  # any order given
    summary = _index(capsys, *files, "--store", str(tmp_path / "s.sqlite"), "--years", "2010-")
    assert summary["imported"] == len(kept) and summary["citations"] == edges
    assert summary["abstracts"] == len(kept)  # only the kept papers' abstracts
    left_out = (len(years) - len(kept)) + (all_edges - edges) + (len(years) - len(kept))
    assert summary["filtered"] == left_out
    store = Store(tmp_path / "s.sqlite")
    assert store.count("abstract != ''") == len(kept)


def test_s2ag_around_a_bib_learns_corpus_ids_and_the_next_run_adds_the_neighbours(
    s2_linked: dict, tmp_path: Path, capsys
) -> None:
    """The library is a .bib with DOIs; S2AG citation rows name papers by corpus id. The papers
    rows with those DOIs give their corpus ids (the seeds' aliases), so the rows with a library
    paper at one end are kept. S2AG papers rows carry no references: the papers at the other end
    are known only from those rows, read after the papers; the second run knows them from the
    store and adds them."""
    rows = s2_linked["rows"]
    library = [r["citingcorpusid"] for r in rows[:3]] + [rows[3]["citedcorpusid"]]
    bib = tmp_path / "library.bib"
    bib.write_text(
        "".join(f"@article{{p{c}, title={{Library paper {c}}}, doi={{10.5555/s2.{c}}}}}\n" for c in library),
        encoding="utf-8",
    )
    touching = [r for r in rows if r["citingcorpusid"] in library or r["citedcorpusid"] in library]
    neighbours = {c for r in touching for c in (r["citingcorpusid"], r["citedcorpusid"])} - set(library)
    args = [str(s2_linked["papers"]), str(s2_linked["citations"]), "--store", str(tmp_path / "s.sqlite")]
    capsys.readouterr()
    assert main(["index", *args, "--around", str(bib), "--json", "--no-search-index"]) == 0
    first = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert first["imported"] == len(library) and first["citations"] == sum(_edges_of(r) for r in touching)
    second = _index(capsys, *args, "--around", str(bib))
    assert (second["imported"], second["unchanged"]) == (len(neighbours), len(library))
    assert second["citations"] == first["citations"]


def test_the_late_neighbours_note(s2_linked: dict, tmp_path: Path, capsys) -> None:
    rows = s2_linked["rows"]
    bib = tmp_path / "library.bib"
    c = rows[0]["citingcorpusid"]
    bib.write_text(f"@article{{k, title={{T}}, doi={{10.5555/s2.{c}}}}}\n", encoding="utf-8")
    args = [str(s2_linked["papers"]), str(s2_linked["citations"]), "--store", str(tmp_path / "s.sqlite")]
    capsys.readouterr()
    assert main(["index", *args, "--around", str(bib), "--no-search-index"]) == 0
    err = capsys.readouterr().err
    assert "1 paper(s) one hop from the library were learned of during this import" in err
    assert main(["index", *args, "--around", str(bib), "--no-search-index"]) == 0
    assert "one hop" not in capsys.readouterr().err  # the second run had them


def test_a_citation_tsv_keeps_the_rows_between_kept_papers(tmp_path: Path, capsys) -> None:
    """A citation file of citewise's own (TSV, DOIs) is judged like S2AG rows: by its papers."""
    with_doi = [r for r in _arxiv_rows() if r.get("doi")]
    rows = [r for r in with_doi if "math" in r["categories"]][:3] + [
        r for r in with_doi if "math" not in r["categories"]
    ][:3]
    store = str(tmp_path / "s.sqlite")
    papers = write_jsonl(tmp_path / "snapshot.jsonl", rows)
    kept = [r for r in rows if "math" in r["categories"]]
    assert 0 < len(kept) < len(rows)
    dois = [r["doi"].split()[0].lower() for r in rows]
    tsv = tmp_path / "edges.tsv"
    pairs = [(a, b) for a in dois for b in dois if a != b] + [(dois[0], "10.9999/elsewhere")]
    tsv.write_text("citing\tcited\n" + "".join(f"{a}\t{b}\n" for a, b in pairs), encoding="utf-8")
    kept_dois = {r["doi"].split()[0].lower() for r in kept}
    expected = sum(1 for a, b in pairs if a in kept_dois and b in kept_dois)
    summary = _index(capsys, str(papers), str(tsv), "--store", store, "--field", "math")
    assert (summary["imported"], summary["citations"]) == (len(kept), expected)
    assert summary["filtered"] == (len(rows) - len(kept)) + (len(pairs) - expected)


# -- --around: libraries of every kind --------------------------------------------------------------------
def _arxiv_library(tmp_path: Path) -> tuple[Path, set[str]]:
    """A .bib naming four snapshot papers: by DOI (upper case), by title alone (no id), by arXiv
    eprint, and by an arXiv id with a version in its journal field; and one paper not in the
    snapshot."""
    rows = [r for r in _arxiv_rows() if r.get("doi")]
    plain = [r for r in _arxiv_rows() if not r.get("doi")]
    by_doi, by_title = rows[0], rows[1]
    by_eprint, by_journal = plain[0], plain[1]
    bib = tmp_path / "library.bib"
    bib.write_text(
        f"@article{{a, title={{Anything}}, doi={{{by_doi['doi'].split()[0].upper()}}}}}\n"
        f"@article{{b, title={{{by_title['title']}}}, year={{2007}}}}\n"
        f"@misc{{c, title={{Other}}, eprint={{{by_eprint['id']}}}, archiveprefix={{arXiv}}}}\n"
        f"@article{{d, title={{Else}}, journal={{arXiv:{by_journal['id']}v2}}}}\n"
        "@article{e, title={A paper that is not in the snapshot at all}, doi={10.9999/none}}\n",
        encoding="utf-8",
    )
    return bib, {r["id"] for r in (by_doi, by_title, by_eprint, by_journal)}


def test_around_a_bib_a_store_and_a_zotero_library(tmp_path: Path, capsys) -> None:
    bib, wanted = _arxiv_library(tmp_path)
    snapshot = str(sample(*ARXIV))
    summary = _index(capsys, snapshot, "--store", str(tmp_path / "a.sqlite"), "--around", str(bib))
    assert (summary["imported"], summary["filtered"]) == (len(wanted), 200 - len(wanted))
    assert {p.arxiv for p in Store(tmp_path / "a.sqlite").iter_papers()} == wanted
    # The same library as a citewise store.
    _index(capsys, str(bib), "--store", str(tmp_path / "library.sqlite"))
    summary = _index(
        capsys, snapshot, "--store", str(tmp_path / "b.sqlite"), "--around", str(tmp_path / "library.sqlite")
    )
    assert summary["imported"] == len(wanted)
    # A Zotero library (built from Zotero's schema, as tests/indexer/test_zotero.py does).
    from .test_zotero import Zotero

    row = _arxiv_rows()[5]
    z = Zotero(tmp_path / "zotero").create()
    z.add("ITEM0001", "preprint", {"title": "x", "DOI": f"10.48550/arXiv.{row['id']}"})
    summary = _index(capsys, snapshot, "--store", str(tmp_path / "c.sqlite"), "--around", str(z.path))
    assert summary["imported"] == 1
    assert [p.arxiv for p in Store(tmp_path / "c.sqlite").iter_papers()] == [row["id"]]


def test_around_openalex_citing_and_cited_works(tmp_path: Path, capsys) -> None:
    """The library is one OpenAlex work (its JSON given as the library): the page's works that cite
    it (``referenced_works``) and the works it cites pass."""
    works = json.loads(sample(*OPENALEX).read_text(encoding="utf-8"))["results"]
    cited_by_page = "https://openalex.org/W2781122472"  # cited by several works of the page
    citing = {w["id"] for w in works if cited_by_page in (w.get("referenced_works") or [])}
    it_cites = [works[0]["id"], works[7]["id"]]
    assert len(citing) >= 2 and not citing & set(it_cites)
    mine = json.loads(sample(*OPENALEX_2025).read_text(encoding="utf-8"))
    mine.update(id=cited_by_page, doi=None, ids={"openalex": cited_by_page}, referenced_works=it_cites)
    library = tmp_path / "mine.json"
    library.write_text(json.dumps(mine), encoding="utf-8")
    summary = _index(
        capsys, str(sample(*OPENALEX)), "--store", str(tmp_path / "s.sqlite"), "--around", str(library)
    )
    assert summary["imported"] == len(citing) + len(it_cites)
    keys = {p.key for p in Store(tmp_path / "s.sqlite").iter_papers()}
    assert keys == {w.rsplit("/", 1)[1] for w in citing | set(it_cites)}


def test_around_a_library_without_ids_or_missing_says_so(tmp_path: Path, capsys) -> None:
    bib = tmp_path / "bare.bib"
    bib.write_text("@misc{k, title={Notes}}\n", encoding="utf-8")
    with pytest.raises(LibraryError, match="none of its 1 papers has a DOI"):
        load_library(bib)
    assert (
        main(
            [
                "index",
                str(sample(*ARXIV)),
                "--store",
                str(tmp_path / "s.sqlite"),
                "--around",
                str(tmp_path / "no.bib"),
            ]
        )
        == 1
    )
    assert "--around" in capsys.readouterr().err and not (tmp_path / "s.sqlite").exists()


def test_a_bib_given_with_filters_is_imported_whole(tmp_path: Path, capsys) -> None:
    """The filters are for corpora: the user's own .bib is never filtered."""
    bib, _ = _arxiv_library(tmp_path)
    summary = _index(capsys, str(bib), "--store", str(tmp_path / "s.sqlite"), "--years", "1990")
    assert (summary["imported"], summary["filtered"]) == (5, 0)


def test_a_narrower_filter_mirrors_the_file(tmp_path: Path, capsys) -> None:
    """Importing the same file again with a narrower filter leaves the store with what passes."""
    store = str(tmp_path / "s.sqlite")
    first = _index(capsys, str(sample(*ARXIV)), "--store", store, "--field", "math")
    second = _index(capsys, str(sample(*ARXIV)), "--store", store, "--field", "math.CO")
    rows = _arxiv_rows()
    co = sum(1 for r in rows if "math.CO" in r["categories"].split())
    assert second["removed"] == first["imported"] - co and Store(store).count() == co


# -- the estimate ---------------------------------------------------------------------------------------
def test_estimate_alone_imports_nothing(tmp_path: Path, capsys) -> None:
    works = json.loads(sample(*OPENALEX).read_text(encoding="utf-8"))["results"]
    recent = sum(1 for w in works if w["publication_year"] >= 2020)
    store = tmp_path / "s.sqlite"
    capsys.readouterr()
    assert (
        main(["index", str(sample(*OPENALEX)), "--store", str(store), "--estimate", "--years", "2020-"]) == 0
    )
    err = capsys.readouterr().err
    assert f"{len(works)} records; {recent / len(works):.1%} pass the filters" in err
    assert "store +" in err and "nothing imported (--estimate)" in err and not store.exists()
    assert (
        main(
            [
                "index",
                str(sample(*OPENALEX)),
                "--store",
                str(store),
                "--estimate",
                "--json",
                "--years",
                "2020-",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    (file,) = json.loads(out)["files"]
    assert (file["records"], file["kept"], file["exact"]) == (len(works), recent, True)
    assert file["store_bytes"] == recent * estimate_module.STORE_BYTES["openalex"][0]


def _arxiv_gz(tmp_path: Path, copies: int) -> tuple[Path, int]:
    rows = _arxiv_rows()
    out = []
    for i in range(copies):
        for r in rows:
            new_id = f"{1100 + i % 800:04d}.{len(out) % 99999 + 1:05d}"
            out.append({**r, "id": new_id, "title": f"{r['title']} {i}", "doi": None})
    return write_jsonl(tmp_path / "snapshot.json.gz", out, gz=True), len(out)


def test_estimate_of_a_gzip_from_its_first_bytes(tmp_path: Path, monkeypatch) -> None:
    """Records per byte on disk between two moves of the gzip reader: close to the true count."""
    path, n = _arxiv_gz(tmp_path, 40)
    monkeypatch.setattr(estimate_module, "SAMPLE_BYTES", path.stat().st_size // 3)
    filt = ImportFilter.build(fields=["math"])
    (est,) = estimate_module.estimate([(path, "arxiv")], filt)
    assert not est.complete and est.compression == "gzip" and est.sampled < n / 2
    assert abs(est.records - n) / n < 0.05, (est.records, n)
    share = sum(1 for r in _arxiv_rows() if "math" in r["categories"]) / 200
    assert abs(est.pass_rate - share) < 0.02


def test_a_long_import_prints_its_estimate_first(tmp_path: Path, capsys, monkeypatch) -> None:
    path, n = _arxiv_gz(tmp_path, 5)
    monkeypatch.setattr(cli_index, "LONG_IMPORT_BYTES", path.stat().st_size - 1)
    capsys.readouterr()
    args = ["index", str(path), "--store", str(tmp_path / "s.sqlite"), "--no-search-index", "--json"]
    assert main(args) == 0
    captured = capsys.readouterr()
    assert "citewise: estimate:" in captured.err and f"{n:,} records" in captured.err
    summary = json.loads(captured.out)  # stdout is the summary alone
    assert summary["imported"] == n and summary["estimate"][0]["records"] == n
    assert main([*args, "-q"]) == 0
    captured = capsys.readouterr()
    assert captured.err == "" and json.loads(captured.out)["estimate"][0]["records"] == n


# -- progress -------------------------------------------------------------------------------------------
def test_progress_follows_the_bytes_of_the_compressed_file(tmp_path: Path, monkeypatch) -> None:
    """In this process and through the parser process, positions rise to the file's size."""
    path, n = _arxiv_gz(tmp_path, 30)
    size = path.stat().st_size
    for min_bytes in (1 << 40, 0):  # read here, then parsed ahead in a second process
        monkeypatch.setattr(pipeline, "MIN_BYTES", min_bytes)
        monkeypatch.setattr(pipeline, "POSITION_EVERY", 200)
        positions: list[int] = []
        store = Store(tmp_path / f"s{min_bytes}.sqlite")
        stats = import_sources(store, [path], on_bytes=lambda _, pos, seen=positions: seen.append(pos))
        assert stats.imported == n
        assert len(positions) > 5 and positions == sorted(positions)
        assert 0.8 * size <= positions[-1] <= size


def test_the_bar_counts_bytes_and_records(tmp_path: Path, capsys, monkeypatch) -> None:
    from tqdm import tqdm

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    path, n = _arxiv_gz(tmp_path, 10)
    shown = Terminal()
    monkeypatch.setattr(sys, "stderr", shown)
    assert main(["index", str(path), "--store", str(tmp_path / "s.sqlite"), "--no-search-index"]) == 0
    text = shown.getvalue()
    every = cli_index._ImportProgress.RECORDS_EVERY
    assert "importing: 100%" in text and f"{n // every * every:,} records" in text
    assert tqdm.format_sizeof(path.stat().st_size, divisor=1024) in text  # the total: bytes on disk
    shown.truncate(0)
    shown.seek(0)
    assert main(["index", str(path), "--store", str(tmp_path / "s.sqlite"), "--no-search-index", "-q"]) == 0
    assert "importing" not in shown.getvalue()


# -- stopping ------------------------------------------------------------------------------------------
def test_citations_left_unresolved_by_a_stop_are_resolved_by_the_next_run(
    tmp_path: Path, monkeypatch
) -> None:
    """The citations of the papers just imported are pointed at stored papers after the paper files;
    an import stopped in between leaves a mark in the file's own transaction, and the next run
    resolves them even though its files are unchanged (it imports nothing new)."""
    works = json.loads(sample(*OPENALEX).read_text(encoding="utf-8"))["results"]
    cited = dict(works[1], id="https://openalex.org/W2781122472", doi=None, referenced_works=[])
    part = write_jsonl(tmp_path / "part.jsonl", [cited, *works[:1], *works[2:]])
    citing = sum(1 for w in works if "https://openalex.org/W2781122472" in (w.get("referenced_works") or []))
    assert citing >= 2
    store = Store(tmp_path / "s.sqlite")

    def stopped() -> int:
        raise KeyboardInterrupt

    monkeypatch.setattr(store, "resolve_citations", stopped)
    with pytest.raises(KeyboardInterrupt):
        import_sources(store, [part])
    assert store.get_meta("resolve_pending") == "1"
    resolved = "SELECT count(*) FROM citations WHERE cited IS NOT NULL"
    assert store.conn.execute(resolved).fetchone()[0] == 0
    monkeypatch.undo()
    stats = import_sources(store, [part])
    assert (stats.imported, stats.unchanged) == (0, len(works))
    assert store.conn.execute(resolved).fetchone()[0] == citing
    assert store.get_meta("resolve_pending") is None
