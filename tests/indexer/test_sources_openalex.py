"""OpenAlex works (indexer/sources/openalex.py) on the real sample: an API ``/works`` page of 49
works, one work of the 2025 schema, and snapshot parts written from them (gzipped JSON Lines, named
as the snapshot names them)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from citewise.cli import main
from citewise.indexer import citations
from citewise.indexer.importer import ImportError_, expand_sources, import_sources
from citewise.indexer.sources.openalex import _references, abstract_text
from citewise.indexer.store import Store
from citewise.indexer.texclean import clean_text

from ..source_samples import paper_by_ref, refs_of, sample, write_jsonl

PAGE = ("openalex", "works_api_page_peneira_2024.json")
WORK_2025 = ("openalex", "work_W2741809807_2025_b-vitamins.json")


def _page() -> dict:
    return json.loads(sample(*PAGE).read_text(encoding="utf-8"))


def test_an_api_page_imports_every_work_with_abstract_ids_venue_and_references(tmp_path: Path) -> None:
    page = _page()
    store = Store(tmp_path / "s.sqlite")
    stats = import_sources(store, [sample(*PAGE)])
    assert (stats.imported, stats.broken) == (49, 0)
    assert store.count() == 49 and store.count("abstract != ''") == 46  # the sample's README figures
    refs = store.conn.execute("SELECT count(*), count(DISTINCT citing) FROM citations").fetchone()
    assert refs == (930, 35)
    pid = paper_by_ref(store, "openalex:W2068311567")
    paper = store.get(pid)
    assert paper.doi == "10.4081/gh.2014.294" and paper.key == "W2068311567"
    assert refs_of(store, pid) == {"openalex:W2068311567", "mag:2068311567", "pmid:25599636"}
    assert paper.venue == "Geospatial Health" and paper.year == 2014 and paper.entry_type == "article"
    assert paper.authors[:2] == ["Alexander Liss", "Magaly Koch"]
    assert paper.abstract.startswith("Existing climate classification has not been designed for an efficient")
    assert paper.extra["volume"] == "8" and paper.extra["number"] == "3"
    # Every work's abstract is its inverted index in order, word for word (HTML such as the
    # structured abstracts' <sec><title> dropped, as texclean.clean_text drops it).
    for work in page["results"]:
        if work.get("abstract_inverted_index"):
            words = sorted((p, w) for w, ps in work["abstract_inverted_index"].items() for p in ps)
            stored = store.get(paper_by_ref(store, "openalex:" + work["id"].rsplit("/", 1)[1]))
            assert stored.abstract == clean_text(" ".join(w for _, w in words))
    store.close()


def test_the_2025_schema_work_with_pubmed_central_and_references(tmp_path: Path) -> None:
    store = Store(tmp_path / "s.sqlite")
    import_sources(store, [sample(*WORK_2025)])
    (paper,) = list(store.iter_papers())
    assert paper.title.startswith("The state of OA: a large-scale analysis")
    assert paper.doi == "10.7717/peerj.4375" and paper.venue == "PeerJ" and paper.year == 2018
    assert refs_of(store, paper.id) == {
        "openalex:W2741809807",
        "mag:2741809807",
        "pmid:29456894",
        "pmcid:5815332",
    }
    cited = [r for (r,) in store.conn.execute("SELECT cited_ref FROM citations WHERE citing=?", (paper.id,))]
    assert len(cited) == 45 and all(r.startswith("openalex:W") for r in cited)
    store.close()


def test_snapshot_parts_are_found_by_content_and_their_references_resolve(tmp_path: Path) -> None:
    """Snapshot parts are gzipped JSON Lines named ``0000_part_00.gz``: no .jsonl in the name. A work
    of one part cited by a work of another resolves whichever part comes first, and its citers'
    titles index it."""
    page = _page()
    citing = next(w for w in page["results"] if w.get("referenced_works"))
    cited_id = citing["referenced_works"][0]
    cited = {**json.loads(sample(*WORK_2025).read_text(encoding="utf-8")), "id": cited_id, "doi": None}
    cited["ids"] = {"openalex": cited_id}
    parts = tmp_path / "works" / "updated_date=2024-05-14"
    parts.mkdir(parents=True)
    write_jsonl(parts / "0000_part_00.gz", [cited], gz=True)
    write_jsonl(parts / "0001_part_00.gz", page["results"], gz=True)
    assert [f for _, f in expand_sources([tmp_path / "works"])] == ["openalex", "openalex"]
    for order in (
        [parts / "0000_part_00.gz", parts / "0001_part_00.gz"],
        [parts / "0001_part_00.gz", parts / "0000_part_00.gz"],
    ):
        store = Store(tmp_path / f"s{order[0].name}.sqlite")
        for path in order:
            import_sources(store, [path])
        pid = paper_by_ref(store, "openalex:" + cited_id.rsplit("/", 1)[1])
        assert store.count() == 50
        found = citations.expansions(store, [pid])[pid]
        assert citing["title"] in found.texts and len(found.citing) >= 1
        store.close()


def test_bad_works_are_reported_with_their_line_and_the_rest_imports(tmp_path: Path) -> None:
    works = _page()["results"][:3]
    no_title = {**works[1], "title": None, "display_name": ""}
    bad_index = {**works[2], "abstract_inverted_index": {"word": "zero"}}
    author = {"id": "https://openalex.org/A5040992156", "display_name": "Alexander Liss"}
    path = write_jsonl(
        tmp_path / "part_000.gz",
        [works[0], '{"id": "https://openalex.org/W1", "title": ', no_title, bad_index, author],
        gz=True,
    )
    store = Store(tmp_path / "s.sqlite")
    stats = import_sources(store, [path], fmt="openalex")
    assert stats.imported == 1
    problems = {p.line: p.message for p in stats.problems}
    assert set(problems) == {2, 3, 4, 5}
    assert problems[2].startswith("invalid JSON") and problems[3] == "no title"
    assert (
        "abstract_inverted_index" in problems[4] and problems[5] == "an OpenAlex authors record, not a work"
    )
    assert all(str(p).startswith(f"{path}:") for p in stats.problems)
    store.close()


def test_a_page_with_a_bad_work_names_its_place_in_results(tmp_path: Path) -> None:
    page = _page()
    page["results"][7] = {**page["results"][7], "authorships": "nobody"}
    path = tmp_path / "page.json"
    path.write_text(json.dumps(page, indent=2), encoding="utf-8")  # pretty-printed: one document
    stats = import_sources(Store(tmp_path / "s.sqlite"), [path])
    assert stats.imported == 48
    (problem,) = stats.problems
    assert problem.line == 1 and problem.message == "results[7]: 'authorships' must be a list, not str"


def test_an_authors_part_says_what_it_is(tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path / "0000_part_00.gz",
        [{"id": "https://openalex.org/A5040992156", "display_name": "A. Liss"}],
        gz=True,
    )
    with pytest.raises(ImportError_, match="an OpenAlex authors file; citewise imports OpenAlex works"):
        expand_sources([path])
    assert expand_sources([tmp_path]) == []  # in a folder it is passed over, like a README


def test_the_abstract_fast_path_agrees_with_the_checked_one() -> None:
    assert abstract_text({"b": [1], "a": [0, 2]}) == "a b a"
    assert abstract_text({"gap": [0, 2]}) == "gap gap"  # a gap: the checked path, which allows it
    with pytest.raises(ValueError, match="positions"):
        abstract_text({"a": [0], "b": ["one"]})


def test_the_fast_paths_give_what_clean_text_and_the_one_by_one_spelling_give() -> None:
    """Plain words skip clean_text and a list of usual W URLs is rewritten whole; anything else
    (whitespace or markup in a word, an empty word, an odd reference) takes the slow path."""
    assert abstract_text({"plain": [0], "words": [1]}) == "plain words"
    for odd in ("two  spaces", " lead", "a\u00a0b", "x\ny", "<i>it</i>", "&amp;", ""):
        index = {"a": [0], odd: [1], "b": [2]}
        assert abstract_text(index) == clean_text(f"a {odd} b")
    url = "https://openalex.org/W"
    assert _references({"referenced_works": [f"{url}1", f"{url}22", f"{url}1"]}) == [
        "openalex:W1",
        "openalex:W22",
    ]
    odd = [f"{url}1", f"{url}2\n{url}3", "W4", 5, f"{url}", "https://api.openalex.org/works/W6", f"{url}1 "]
    assert _references({"referenced_works": odd}) == ["openalex:W1", "openalex:W4", "openalex:W6"]
    assert _references({"referenced_works": []}) == []


def test_reimporting_an_unchanged_part_changes_nothing(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "part.gz", _page()["results"], gz=True)
    store = Store(tmp_path / "s.sqlite")
    import_sources(store, [path])
    generation = store.generation
    again = import_sources(store, [path])
    assert (again.imported, again.updated, again.unchanged) == (0, 0, 49) and store.generation == generation
    store.close()


def test_citewise_index_reads_the_sample_folder(tmp_path: Path, capsys) -> None:
    store = tmp_path / "s.sqlite"
    assert main(["index", str(sample("openalex")), "--store", str(store), "--json", "-q"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["imported"] == 50 and summary["files"] == 2 and summary["broken"] == 0
    assert (
        main(["search", "climate regions remote sensing public health", "--store", str(store), "--json"]) == 0
    )
    hits = json.loads(capsys.readouterr().out)
    assert "climate regions" in json.dumps(hits[:1]).lower()


def test_a_gzip_stream_without_an_extension_is_found_by_content(tmp_path: Path) -> None:
    """S2AG and OpenAlex downloads are often saved without a suffix; a README beside them is not."""
    path = tmp_path / "0000_part_00"
    with gzip.open(path, "wt", encoding="utf-8") as fh:
        fh.write(json.dumps(_page()["results"][0]) + "\n")
    (tmp_path / "README").write_text("not data\n", encoding="utf-8")
    assert expand_sources([tmp_path]) == [(path.resolve(), "openalex")]
