"""The cross-encoder reranker: training data splits, train -> resume -> export -> ONNX serving,
the time budget, and (only with the shipped model) that it ranks a relevant paper first."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from citewise.evaluation.citances import acl_year, is_acl_dev, load_citances, local_context
from citewise.indexer.records import PaperRecord
from citewise.indexer.store import Store
from citewise.models.query import Candidate, ContextQuery
from citewise.models.reranker import SHIPPED_DIR, PairEncoder, candidate_text, load_shipped
from training.reranker_data import Group, write_groups

from ..conftest import SHARED_DATA, require

CITANCES = SHARED_DATA / "citations" / "scisummnet-citances.jsonl"
CITED = SHARED_DATA / "citations" / "scisummnet-cited-papers.jsonl"

WORDS = (
    "tagger markov model part speech trigram tags sentence parsing dependency graph retrieval "
    "ranking query document neural network translation alignment word sense bm25 dense"
).split()


# -- data: splits and markers ----------------------------------------------------------------------


def test_acl_year_and_dev_split() -> None:
    assert acl_year("P13-1001") == 2013 and acl_year("W14-3301") == 2014
    assert acl_year("J91-1003") == 1991 and acl_year("2020.acl-main.1") == 2020
    assert is_acl_dev("P13-2112") and is_acl_dev("W14-0101")
    assert not is_acl_dev("P12-1001") and not is_acl_dev("D15-1001") and not is_acl_dev("A00-1031")


def test_training_citances_never_come_from_dev_years(tmp_path: Path) -> None:
    require(CITANCES)
    train = load_citances(CITANCES)
    dev = load_citances(CITANCES, dev=True)
    assert train and dev
    assert not any(acl_year(c.citing) in (2013, 2014) for c in train)
    assert all(acl_year(c.citing) in (2013, 2014) for c in dev)
    assert not {(c.citing, c.text) for c in train} & {(c.citing, c.text) for c in dev}


def small_acl_store(tmp_path: Path, n_cited: int) -> tuple[Store, Path, list[dict], list[dict]]:
    """A store of the first ``n_cited`` ScisummNet cited papers and the papers citing them, and the
    citing sentences about them as a citances file: (store, that file, cited rows, sentence rows)."""
    require(CITANCES)
    require(CITED)
    from citewise.evaluation.citances import read_jsonl

    cited = [r for _, r in zip(range(n_cited), read_jsonl(CITED), strict=False)]
    ids = {r["id"] for r in cited}
    rows = [r for r in read_jsonl(CITANCES) if r["cited"] in ids]
    citing = sorted({r["citing"] for r in rows})
    store = Store(tmp_path / "acl.sqlite")
    recs = [PaperRecord(title=r["title"], abstract="", key=r["id"], acl_id=r["id"]) for r in cited]
    recs += [
        PaperRecord(title=f"Citing paper {c} on {WORDS[i % len(WORDS)]}", key=c, acl_id=c)
        for i, c in enumerate(citing)
    ]
    store.import_source("acl.jsonl", iter(recs), fmt="jsonl")
    sub = tmp_path / "citances.jsonl"
    sub.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return store, sub, cited, rows


def test_acl_groups_exclude_dev_years_and_the_positive_from_negatives(tmp_path: Path) -> None:
    """A small store from real data: the groups builder skips 2013/2014 citing papers."""
    from training.reranker_data import acl_groups

    store, sub, cited, rows = small_acl_store(tmp_path, 40)
    assert any(is_acl_dev(r["citing"]) for r in rows), "the sample should contain dev-year citing papers"
    groups = list(acl_groups(store, sub, CITED, negatives=3, limit=60))
    assert groups
    assert not any(is_acl_dev(g.citing) for g in groups)
    for g in groups:
        assert len(g.negs) == 3
        titles = {r["title"] for r in cited if r["id"] in g.positives}
        assert not any(n.split(". ")[0] in titles for n in g.negs), "a positive must not be a negative"


def test_local_context_masks_the_cited_marker_and_drops_the_others() -> None:
    s = (
        "For example, Petrov et al (2012) build taggers for 22 languages using the TNT tagger "
        "(Brants, 2000), with an average accuracy of 95.2%."
    )
    assert local_context(s, "Brants", 2000, "[CIT]") == (
        "For example, build taggers for 22 languages using the TNT tagger [CIT], with an average accuracy of 95.2%."
    )
    assert "(" not in local_context(s) and "2000" not in local_context(s)
    assert (
        local_context("Chelba and Acero (2004) use a prior.", "Chelba", 2004, "[CIT]") == "[CIT] use a prior."
    )
    assert local_context("No marker here at all", placeholder="[CIT]") == "No marker here at all [CIT]."
    # Linear on hostile input: a long run of parentheses is handled in bounded time.
    assert local_context("(" * 5000 + "2000" + ")" * 5000) is not None


# -- a tiny SciBERT-shaped model: train 2 steps, resume, export, serve -------------------------------


def _tiny_base(folder: Path) -> Path:
    """A BERT folder shaped like SciBERT's download (config.json, vocab.txt, weights; no tokenizer.json)."""
    from transformers import BertConfig, BertModel

    folder.mkdir(parents=True)
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "[", "]", ".", ",", "cit", "##s"] + WORDS
    (folder / "vocab.txt").write_text("\n".join(vocab) + "\n")
    (folder / "tokenizer_config.json").write_text(json.dumps({"do_lower_case": True}))
    cfg = BertConfig(
        vocab_size=len(vocab),
        hidden_size=16,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=64,
    )
    BertModel(cfg).save_pretrained(str(folder))
    return folder


def tiny_reranker(tmp_path: Path) -> Path:
    """An exported cross-encoder: the tiny BERT of ``_tiny_base``, trained one step (for tests of
    how a reranker is served, not of what it learnt)."""
    from training.reranker_export import export

    return export(tiny_checkpoint(tmp_path), tmp_path / "served")


def tiny_checkpoint(tmp_path: Path) -> Path:
    """The checkpoint folder of ``_tiny_base`` trained one step on the CPU."""
    from training.reranker_train import TrainConfig, train

    data = tmp_path / "g.jsonl"
    write_groups(iter(_groups(4)), data)
    cfg = TrainConfig(
        out=str(tmp_path / "run"),
        data=str(data),
        base=str(_tiny_base(tmp_path / "tiny")),
        negatives=3,
        groups_per_step=2,
        max_len=32,
        query_max=16,
        local_max=10,
        val_groups=0,
        device="cpu",
    )
    return train(cfg, stop_after_steps=1)


def _groups(n: int) -> list[Group]:
    out = []
    for i in range(n):
        w = WORDS[i % len(WORDS)]
        out.append(
            Group(
                f"a {w} model [CIT].",
                "neural ranking",
                "",
                f"{w} {w} model",
                [f"{v} graph" for v in WORDS[:3]],
                "acl",
                f"P0{i % 9}-1001",
            )
        )
    return out


@pytest.mark.needs_torch
def test_train_resume_export_and_onnx_serving_agree_with_torch(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    pytest.importorskip("transformers")
    pytest.importorskip("onnxruntime")
    from citewise.models.reranker import CrossEncoderReranker, RerankSettings
    from training.reranker_export import export
    from training.reranker_train import TrainConfig, load_checkpoint_model, train

    base = _tiny_base(tmp_path / "scibert-tiny")
    data = tmp_path / "groups.jsonl"
    write_groups(iter(_groups(12)), data)
    cfg = TrainConfig(
        out=str(tmp_path / "run"),
        data=str(data),
        base=str(base),
        negatives=3,
        groups_per_step=2,
        max_steps=50,
        max_len=32,
        query_max=16,
        local_max=10,
        val_groups=2,
        log_every=1,
        warmup=2,
    )
    latest = train(cfg, stop_after_steps=2)
    assert json.loads((latest / "progress.json").read_text())["step"] == 2
    latest = train(TrainConfig(out=cfg.out), resume=True, stop_after_steps=2)
    progress = json.loads((latest / "progress.json").read_text())
    assert progress["step"] == 4 and progress["pairs_seen"] == 4 * 2 * 4
    assert json.loads((latest / "train_config.json").read_text())["max_len"] == 32  # saved settings win
    cfg_t = TrainConfig(
        out=str(tmp_path / "run_t"),
        data=str(data),
        base=str(base),
        loss="triplet",
        negatives=3,
        groups_per_step=2,
        max_len=32,
        query_max=16,
        local_max=10,
        val_groups=2,
        warmup=2,
    )
    assert (train(cfg_t, stop_after_steps=1) / "state.pt").exists()

    out = export(latest, tmp_path / "served", check_groups=_groups(3))
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["use_by_default"] is False and manifest["encode"]["max_len"] == 32
    assert manifest["agreement"]["max_abs_diff_torch_fp32"] < 1e-4

    model = load_checkpoint_model(latest)
    served = CrossEncoderReranker(out, RerankSettings(batch_size=2), model_file="model.onnx")
    enc = PairEncoder.from_file(out / "tokenizer.json", served.encoder.settings)
    q = ContextQuery("a ranking model [CIT].", "neural retrieval")
    texts = [
        candidate_text("tagger markov model"),
        candidate_text("dense retrieval", "query document ranking"),
        candidate_text("word sense"),
    ]
    onnx_scores = served.score_texts(q, texts)
    feeds = enc.batch([enc.pair(enc.query_ids(q), enc.candidate_ids(t)) for t in texts])
    with torch.no_grad():
        ref = model(**{k: torch.from_numpy(v) for k, v in feeds.items()}).numpy()
    assert max(abs(a - b) for a, b in zip(onnx_scores, ref.tolist(), strict=True)) < 1e-4
    int8 = CrossEncoderReranker(out)  # the served default file
    assert len(int8.score_texts(q, texts)) == 3


@pytest.mark.needs_torch
def test_time_budget_scores_the_best_prefetched_first(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    pytest.importorskip("onnxruntime")
    from citewise.models.reranker import CrossEncoderReranker, RerankSettings

    out = tiny_reranker(tmp_path)
    store = Store(tmp_path / "s.sqlite")
    store.import_source(
        "lib.jsonl", iter(PaperRecord(title=f"{w} paper", key=w) for w in WORDS[:6]), fmt="jsonl"
    )
    papers = store.get_many([store.find(key=w).id for w in WORDS[:6]])
    cands = [Candidate(pid, 1.0) for pid in papers]
    rr = CrossEncoderReranker(out, RerankSettings(batch_size=2, budget_s=0.0, max_candidates=4))
    ranked = rr.rerank(ContextQuery("markov model"), cands, papers)
    # Budget 0: only the first batch (the 2 best-prefetched) is scored; the rest keep prefetch order.
    assert [c.paper_id for c in ranked[2:]] == [c.paper_id for c in cands[2:]]
    assert {c.paper_id for c in ranked[:2]} == {c.paper_id for c in cands[:2]}
    assert sum("cross-encoder" in c.sources for c in ranked) == 2


def test_unshipped_or_not_default_reranker_is_not_loaded(tmp_path: Path) -> None:
    assert load_shipped(tmp_path / "nothing") is None
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "model.int8.onnx").write_bytes(b"")
    (tmp_path / "m" / "manifest.json").write_text(json.dumps({"use_by_default": False}))
    assert load_shipped(tmp_path / "m") is None


# -- the shipped model ---------------------------------------------------------------------------


def test_shipped_reranker_orders_a_relevant_candidate_first() -> None:
    if not (SHIPPED_DIR / "model.int8.onnx").exists():
        pytest.skip(f"no shipped reranker in {SHIPPED_DIR} (see docs/reranker.md); skipping")
    from citewise.models.reranker import CrossEncoderReranker

    rr = CrossEncoderReranker(SHIPPED_DIR)
    q = ContextQuery(
        "We tag the corpus with parts of speech using the TnT tagger [CIT].",
        "Unsupervised dependency parsing for low-resource languages",
    )
    texts = [
        candidate_text(
            "TnT - A Statistical Part-Of-Speech Tagger",
            "Trigrams'n'Tags (TnT) is an efficient statistical part-of-speech tagger.",
        ),
        candidate_text("Query expansion with word embeddings for ad-hoc retrieval"),
        candidate_text("A survey of graph neural networks for molecules"),
        candidate_text("Collaborative filtering for implicit feedback datasets"),
    ]
    scores = rr.score_texts(q, texts)
    assert scores[0] == max(scores)


def test_fused_order_puts_scored_first_and_can_lean_on_the_prefetch() -> None:
    from citewise.models.reranker import fused_order

    inf = float("-inf")
    assert fused_order([0.1, 0.9, 0.5, inf, inf]) == [1, 2, 0, 3, 4]
    # With a heavy prefetch weight the prefetch order wins; with none the cross-encoder's.
    assert fused_order([0.1, 0.2, 0.3], prefetch_weight=100.0) == [0, 1, 2]
    assert fused_order([0.1, 0.2, 0.3], prefetch_weight=0.0) == [2, 1, 0]


def test_offline_metrics_match_the_served_order() -> None:
    """reranker_eval.metrics reorders exactly as CrossEncoderReranker.rerank does (same fused_order)."""
    from citewise.evaluation import protocol as ev
    from training.reranker_eval import metrics

    run = [{"relevant": ["c"], "ids": ["a", "b", "c", "d"], "scores": [0.1, 0.2, 0.9]}]
    assert metrics(run, 0, 0)["MRR"] == pytest.approx(1 / 3, abs=1e-3)
    assert metrics(run, 3, 0)["MRR"] == 1.0
    assert metrics(run, 2, 0) == ev.aggregate([ev.query_metrics(["b", "a", "c", "d"], {"c"})])


def test_acl_groups_read_citing_text_never_from_the_query_paper(tmp_path: Path) -> None:
    """With ``citing_rate``, candidates read the citing sentence most like the query (as the
    shipped reranker does): never one of the query's own citing paper, and within a group the
    positive and the hard negatives carry it alike. A store whose edges hold dev-year citers is
    refused; with ``citing_rate=0`` no candidate reads citers."""
    from citewise.indexer.citations import import_citation_file
    from training.reranker_data import acl_groups, citing_shares

    store, sub, _, rows = small_acl_store(tmp_path, 60)
    before = list(acl_groups(store, sub, CITED, negatives=3, limit=40))

    with pytest.raises(SystemExit, match="dev years"):
        import_citation_file(store, sub)
        next(acl_groups(store, sub, CITED, negatives=3, limit=1, citing_rate=1.0))
    import_citation_file(store, sub, keep=lambda e: not is_acl_dev(e.citing))
    groups = list(acl_groups(store, sub, CITED, negatives=3, limit=40, citing_rate=1.0))
    own_sentences: dict[str, set[str]] = {}
    for r in rows:
        own_sentences.setdefault(r["citing"], set()).add(r["text"])
    read = [g for g in groups if 0 in g.with_citing]
    assert len(read) >= 10, "most positives are cited by another paper of the sample"
    for g in read:
        own = own_sentences[g.citing]
        assert not any(text in g.pos for text in own), "the query paper's own sentence leaked"
        assert all(not any(text in n for text in own) for n in g.negs)
    shares = citing_shares(groups)
    assert shares["positives_with_citing"] > 0 and shares["negatives_with_citing"] > 0
    assert not any(g.with_citing for g in before)
    again = list(acl_groups(store, sub, CITED, negatives=3, limit=40, citing_rate=0.0))
    assert again and not any(g.with_citing for g in again)


# -- the shipped model back into a checkpoint, and fine-tuning from it ------------------------------


@pytest.mark.needs_torch
def test_shipped_int8_model_comes_back_exactly_and_trains_on(tmp_path: Path) -> None:
    """The recovered checkpoint, exported and quantised again, gives the shipped file's int8 weights
    bit for bit; a run started from it (``init``) keeps its encode budget and its trained head."""
    pytest.importorskip("torch")
    onnx = pytest.importorskip("onnx")
    pytest.importorskip("transformers")
    pytest.importorskip("onnxruntime")
    from onnx import numpy_helper

    from training.reranker_export import export
    from training.reranker_train import TrainConfig, load_checkpoint_model, train
    from training.reranker_unquantize import unquantise

    if not (SHIPPED_DIR / "model.int8.onnx").exists():
        pytest.skip(f"no shipped reranker in {SHIPPED_DIR}")
    ckpt = unquantise(SHIPPED_DIR, tmp_path / "ckpt")
    again = export(ckpt, tmp_path / "again")

    def weights(path: Path) -> dict:
        return {i.name: numpy_helper.to_array(i) for i in onnx.load(str(path)).graph.initializer}

    shipped, rebuilt = weights(SHIPPED_DIR / "model.int8.onnx"), weights(again / "model.int8.onnx")
    assert shipped.keys() == rebuilt.keys() and len(shipped) > 100
    different = [k for k in shipped if not (shipped[k] == rebuilt[k]).all()]
    assert different == []
    encode = json.loads((SHIPPED_DIR / "manifest.json").read_text())["encode"]
    assert json.loads((again / "manifest.json").read_text())["encode"] == encode

    data = tmp_path / "groups.jsonl"
    write_groups(iter(_groups(4)), data)
    cfg = TrainConfig(
        out=str(tmp_path / "run"),
        data=str(data),
        init=str(SHIPPED_DIR),  # the served folder as installed: recovered into run/init first
        negatives=3,
        groups_per_step=2,
        lr=1e-6,
        warmup=1,
        val_groups=0,
        device="cpu",
    )
    latest = train(cfg, stop_after_steps=1)
    assert (tmp_path / "run" / "init" / "state.pt").exists()
    saved = json.loads((latest / "train_config.json").read_text())
    assert {k: saved[k] for k in encode} == encode  # the init's budget, not the trainer's default
    start, tuned = load_checkpoint_model(ckpt), load_checkpoint_model(latest)
    head_moved = float((start.head.weight - tuned.head.weight).detach().abs().max())
    assert 0 < head_moved < 1e-4  # one small step away from the shipped head, not a fresh one
