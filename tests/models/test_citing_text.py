"""What the reranker reads of how a candidate is cited (issue 26 item 2): the citing sentence
most like the sentence being written, chosen by the idf of the words they share, and handed to
the second stage by the recommender for the papers the store knows citers of."""

from __future__ import annotations

from pathlib import Path

from citewise.indexer.citations import import_citation_file
from citewise.indexer.records import PaperRecord
from citewise.indexer.store import Store
from citewise.models import citing_text
from citewise.models.query import ContextQuery
from citewise.models.recommender import Recommender
from citewise.models.reranker import candidate_text


def words(text: str) -> list[str]:
    return text.lower().replace(".", "").split()


def test_the_text_sharing_the_rarest_words_wins() -> None:
    idf = {"tagger": 3.0, "the": 0.1, "we": 0.1, "markov": 2.0, "use": 0.5}
    texts = ["We use the tagger of Brants", "We use the the the model", "A Markov tagger"]
    assert (
        citing_text.most_like({"we", "use", "the", "markov", "tagger"}, texts, words, idf)
        == "A Markov tagger"
    )
    assert citing_text.most_like({"zzz"}, texts, words, idf) == texts[0]  # no overlap: the first
    assert citing_text.most_like({"x"}, [], words, idf) == ""
    got = citing_text.snippets(
        "we use a markov tagger", {1: texts, 2: [], 3: ["the use"]}, words, lambda ws: idf
    )
    assert got == {1: "A Markov tagger", 3: "the use"}


def test_the_citing_text_comes_after_the_title_and_before_the_abstract() -> None:
    """The token budget cuts from the end: the short citing sentence must not be what is cut."""
    assert (
        candidate_text("TnT.", "An abstract.", "kw", "we tag with TnT")
        == "TnT. we tag with TnT. An abstract.. kw"
    )
    assert candidate_text("TnT", "An abstract") == "TnT. An abstract"


class Spy:
    """The second stage at its boundary (the ONNX model): records what it is handed."""

    name = "spy"

    def __init__(self) -> None:
        self.citing: list[dict] = []

    def rerank(self, query, candidates, papers, citing=None):
        self.citing.append(dict(citing or {}))
        return candidates


def test_the_recommender_hands_the_stage_how_the_store_cites_each_candidate(tmp_path: Path) -> None:
    store = Store(tmp_path / "s.sqlite")
    recs = [
        PaperRecord(title="TnT: a statistical part-of-speech tagger", key="tnt"),
        PaperRecord(title="Conditional random fields", key="crf"),
        PaperRecord(title="Parsing with treebanks", key="user1"),
        PaperRecord(title="Tagging for low-resource languages", key="user2"),
    ]
    store.import_source("lib.jsonl", iter(recs), fmt="jsonl")
    edges = tmp_path / "edges.tsv"
    edges.write_text(
        "citing\tcited\tcontext\n"
        "user1\ttnt\tWe tag the corpus with a second order Markov model tagger.\n"
        "user2\ttnt\tOur baseline is a statistical tagger.\n",
        encoding="utf-8",
    )
    import_citation_file(store, edges)
    spy = Spy()
    rec = Recommender(store, second_stage=spy, use_dense=False)
    rec.recommend(ContextQuery("a second order Markov model tagger for the corpus"), k=3)
    tnt = store.find(key="tnt").id
    assert spy.citing[-1][tnt] == "We tag the corpus with a second order Markov model tagger."
    assert store.find(key="crf").id not in spy.citing[-1]  # nobody cites it: nothing to read


def test_a_store_without_citation_data_hands_nothing(tmp_path: Path) -> None:
    store = Store(tmp_path / "s.sqlite")
    store.import_source("lib.jsonl", iter([PaperRecord(title="A tagger", key="a")]), fmt="jsonl")
    spy = Spy()
    Recommender(store, second_stage=spy, use_dense=False).recommend(ContextQuery("a tagger"), k=1)
    assert spy.citing == [{}]
