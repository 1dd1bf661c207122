"""Schema 5: the drafts' bibliographies that earlier editor servers imported leave the shared store."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from citewise.cli import main
from citewise.indexer.importer import import_sources
from citewise.indexer.store import Store
from citewise.indexer.workspace_sources import beside_a_draft

SHARED = """@article{vaswani2017attention,
  title = {Attention Is All You Need},
  author = {Vaswani, Ashish and Shazeer, Noam},
  year = {2017},
  doi = {10.48550/arXiv.1706.03762}
}
"""
MADE_UP = """@inproceedings{smith2023hallucinated,
  title = {Pointer Networks for Citation Span Prediction},
  author = {Smith, Jane},
  year = {2023}
}
"""


def _as_schema_4(path: Path) -> None:
    """Turn a store back into what an earlier version left (schema 4, no record of moves)."""
    conn = sqlite3.connect(path)
    conn.execute("DROP TABLE moved_sources")
    conn.execute("UPDATE meta SET value='4' WHERE key='schema_version'")
    conn.commit()
    conn.close()


def _titles(store: Store) -> set[str]:
    return {t for (t,) in store.conn.execute("SELECT title FROM papers")}


def test_upgrade_moves_a_drafts_bibliography_and_keeps_the_library(tmp_path: Path, capsys) -> None:
    project, papers, gone = tmp_path / "proj", tmp_path / "papers", tmp_path / "old"
    for d in (project, papers, gone):
        d.mkdir()
    (project / "draft.tex").write_text("\\cite{smith2023hallucinated}\n", encoding="utf-8")
    (project / "refs.bib").write_text(SHARED + MADE_UP, encoding="utf-8")
    (papers / "library.bib").write_text(SHARED, encoding="utf-8")
    (gone / "draft.tex").write_text("x\n", encoding="utf-8")
    (gone / "refs.bib").write_text(
        MADE_UP.replace("smith2023", "jones2023").replace("Pointer", "Graph"), encoding="utf-8"
    )
    path = tmp_path / "s.sqlite"
    store = Store(path)
    import_sources(store, [papers / "library.bib", project / "refs.bib", gone / "refs.bib"])
    assert store.count() == 3
    generation = store.generation
    store.close()
    (gone / "refs.bib").unlink()  # a file that is gone cannot be served by its draft: it stays
    _as_schema_4(path)

    store = Store(path)
    assert _titles(store) == {"Attention Is All You Need", "Graph Networks for Citation Span Prediction"}
    moved = store.moved_sources()
    assert [(m["path"], m["papers"], m["removed"]) for m in moved] == [(str(project / "refs.bib"), 2, 1)]
    assert {s["path"] for s in store.sources()} == {str(papers / "library.bib"), str(gone / "refs.bib")}
    assert store.generation > generation  # the search index is rebuilt without the moved papers
    assert store.conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"

    store.close()
    assert main(["info", "--store", str(path)]) == 0
    out = capsys.readouterr().out
    assert "moved:          1 .bib file(s) beside drafts" in out and str(project / "refs.bib") in out
    assert main(["info", "--store", str(path), "--json"]) == 0
    moved_json = json.loads(capsys.readouterr().out)["moved_sources"]
    assert [m["path"] for m in moved_json] == [str(project / "refs.bib")]
    store = Store(path)

    # Imported on purpose afterwards: shared again, and no longer listed as moved.
    import_sources(store, [project / "refs.bib"])
    assert store.moved_sources() == []
    assert "Pointer Networks for Citation Span Prediction" in _titles(store)


def test_a_new_store_moves_nothing(tmp_path: Path) -> None:
    (tmp_path / "draft.tex").write_text("x\n", encoding="utf-8")
    (tmp_path / "refs.bib").write_text(SHARED, encoding="utf-8")
    store = Store(tmp_path / "s.sqlite")
    import_sources(store, [tmp_path / "refs.bib"])  # `citewise index refs.bib`: on purpose, shared
    store.close()
    store = Store(tmp_path / "s.sqlite")
    assert store.count() == 1 and store.moved_sources() == []


def test_beside_a_draft(tmp_path: Path) -> None:
    (tmp_path / "home" / "papers").mkdir(parents=True)
    (tmp_path / "home" / "README.md").write_text("x", encoding="utf-8")
    lib = tmp_path / "home" / "papers" / "library.bib"
    lib.write_text(SHARED, encoding="utf-8")
    assert not beside_a_draft(lib)  # a README one folder up is no draft
    (tmp_path / "thesis" / "bib").mkdir(parents=True)
    (tmp_path / "thesis" / "main.tex").write_text("x", encoding="utf-8")
    refs = tmp_path / "thesis" / "bib" / "refs.bib"
    refs.write_text(SHARED, encoding="utf-8")
    assert beside_a_draft(refs)  # a TeX draft one folder up
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "paper.qmd").write_text("x", encoding="utf-8")
    assert beside_a_draft_of(tmp_path / "notes")
    assert not beside_a_draft(tmp_path / "notes" / "missing.bib")


def beside_a_draft_of(folder: Path) -> bool:
    bib = folder / "refs.bib"
    bib.write_text(SHARED, encoding="utf-8")
    return beside_a_draft(bib)
