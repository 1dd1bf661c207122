"""Train HAtten with a triplet loss, negative mining from the current checkpoint and Jaccard positive mining.

As in paper 004 (sections 4.3 and 5): every mini-batch holds, per query, its positive, ``n_hard``
non-positive papers drawn from the current checkpoint's top ``k_neg`` prefetch (negative mining)
and one random paper; a mined *textually close* paper (Jaccard overlap of token sets above
``jaccard_min`` among the prefetched candidates) is an extra positive against the random paper
(positive mining). The prefetch is recomputed with the current weights every ``mine_every``
iterations (the paper's N_iter). On top we add the in-batch negatives (every other query's documents),
which costs nothing and speeds up the short CPU runs this project can afford.

Runs are meant to be interrupted: the folder holds ``prep.pkl`` (vocabulary, tokenised corpus,
neighbours: built once), ``ckpt/`` (weights, optimiser, iteration, mined round) written every
``checkpoint_minutes`` and at the end, and ``log.jsonl``. Running the same command again resumes.
"""

from __future__ import annotations

import json
import math
import pickle
import random
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from citewise.models.vocab import Vocab, base_matrix, build_vocab, load_glove
from training.hatten import ABSTRACT, CITING_ABSTRACT, CITING_TITLE, LOCAL, TITLE, Hatten, HattenConfig
from training.hatten_data import (
    Corpus,
    Example,
    SelfSupervised,
    centroid_vectors,
    knn,
    load_release,
    store_rows,
)
from training.train_configs import HattenTrainConfig

TrainConfig = HattenTrainConfig  # the trainer's name for it


def log(out: Path, **rec) -> None:
    rec["time"] = time.strftime("%H:%M:%S")
    line = json.dumps(rec)
    print(line, flush=True)
    with open(out / "log.jsonl", "a") as fh:
        fh.write(line + "\n")


# -- preparation (once per run folder) ----------------------------------------------------------


def prepare(cfg: TrainConfig) -> dict:
    """Vocabulary, base vectors, tokenised corpus and centroid neighbours; cached in ``prep.pkl``."""
    out = Path(cfg.out)
    cache = out / "prep.pkl"
    if cache.exists():
        with open(cache, "rb") as fh:
            return pickle.load(fh)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    words, vectors = load_glove()
    release_examples: dict[str, list[Example]] = {}
    if cfg.release:
        papers = json.loads((Path(cfg.release) / "papers.json").read_text())
        texts = [p.get("title", "") + " " + p.get("abstract", "") for p in papers.values()]
        vocab_map = build_vocab(texts, words, out / "tokenizer.json", max_size=cfg.vocab_size)
        vocab = Vocab(out / "tokenizer.json")
        rel = load_release(cfg.release, vocab, cfg.max_local, cfg.max_abstract)
        corpus, release_examples = rel.corpus, rel.splits
    else:
        from citewise.indexer.store import Store

        blacklist: set[str] = set()
        if cfg.blacklist:
            blacklist = {ln.strip().lower() for ln in Path(cfg.blacklist).read_text().split() if ln.strip()}
        rows = store_rows(Store(cfg.store, create=False), blacklist)
        vocab_map = build_vocab(
            (r[1] + " " + r[2] + " " + r[3] for r in rows),
            words,
            out / "tokenizer.json",
            max_size=cfg.vocab_size,
        )
        vocab = Vocab(out / "tokenizer.json")
        from training.hatten_data import tokenise_corpus

        corpus = tokenise_corpus(vocab, rows, cfg.max_title)
    base = base_matrix(vocab_map, words, vectors)
    cent = centroid_vectors(corpus, base)
    nb = knn(cent, 60, cfg.threads)
    prep = {
        "corpus": corpus,
        "base": base,
        "neighbours": nb,
        "release": release_examples,
        "vocab_size": len(vocab_map),
    }
    with open(cache, "wb") as fh:
        pickle.dump(prep, fh, protocol=pickle.HIGHEST_PROTOCOL)
    log(out, event="prepared", papers=len(corpus), vocab=len(vocab_map), seconds=round(time.time() - t0, 1))
    return prep


# -- batching ---------------------------------------------------------------------------------------


def _pad(seqs: list[np.ndarray]) -> tuple[torch.Tensor, torch.Tensor]:
    ids, mask = Vocab.pad(seqs)
    return torch.from_numpy(ids), torch.from_numpy(mask)


def doc_paragraphs(
    corpus: Corpus,
    idx: list[int],
    max_abstract: int,
    drops: list[int] | None = None,
    drop_titles: list[bool] | None = None,
) -> list[tuple[torch.Tensor, torch.Tensor, int]]:
    empty = np.zeros(0, dtype=np.int64)
    titles = [empty if drop_titles and drop_titles[k] else corpus.title[i] for k, i in enumerate(idx)]
    abstracts = [corpus.abstract(i, drops[k] if drops else -1, max_abstract) for k, i in enumerate(idx)]
    t, tm = _pad(titles)
    a, am = _pad(abstracts)
    return [(t, tm, TITLE), (a, am, ABSTRACT)]


def query_paragraphs(exs: list[Example]) -> list[tuple[torch.Tensor, torch.Tensor, int]]:
    loc, lm = _pad([e.local for e in exs])
    ct, ctm = _pad([e.citing_title for e in exs])
    ca, cam = _pad([e.citing_abstract for e in exs])
    return [(loc, lm, LOCAL), (ct, ctm, CITING_TITLE), (ca, cam, CITING_ABSTRACT)]


@torch.no_grad()
def encode_docs(
    model: Hatten, corpus: Corpus, idx: list[int], max_abstract: int, bs: int = 256
) -> np.ndarray:
    model.eval()
    order = sorted(range(len(idx)), key=lambda k: len(corpus.sents[idx[k]]))
    out = np.zeros((len(idx), model.cfg.d_model), dtype=np.float32)
    for s in range(0, len(order), bs):
        ks = order[s : s + bs]
        out[ks] = model.encode(doc_paragraphs(corpus, [idx[k] for k in ks], max_abstract)).numpy()
    return out


@torch.no_grad()
def encode_queries(model: Hatten, exs: list[Example], bs: int = 256) -> np.ndarray:
    model.eval()
    return (
        np.concatenate(
            [model.encode(query_paragraphs(exs[s : s + bs])).numpy() for s in range(0, len(exs), bs)]
        )
        if exs
        else np.zeros((0, model.cfg.d_model), dtype=np.float32)
    )


def jaccard(a: frozenset[int], b: frozenset[int]) -> float:
    if not a or not b:
        return 0.0
    inter = len(a & b)
    return inter / (len(a) + len(b) - inter)


@dataclass
class Mined:
    hard: list[list[int]]  # per example: non-positive top-K candidates
    jpos: list[int]  # per example: a Jaccard-close candidate or -1


def mine(
    model: Hatten | None,
    cfg: TrainConfig,
    corpus: Corpus,
    exs: list[Example],
    nb: np.ndarray,
    rng: random.Random,
) -> Mined:
    """Top-``k_neg`` prefetch of each example with the current model over a pool of papers."""
    if model is None:  # round 0: centroid neighbours of the positive
        cands = [[int(j) for j in nb[e.positive] if j != e.positive][: cfg.k_neg] for e in exs]
    else:
        n = len(corpus)
        pool = set(rng.sample(range(n), min(cfg.pool_size, n)))
        pool.update(e.positive for e in exs)
        pool_idx = sorted(pool)
        dv = encode_docs(model, corpus, pool_idx, cfg.max_abstract)
        qv = encode_queries(model, exs)
        cands = []
        for s in range(0, len(exs), 512):
            sims = qv[s : s + 512] @ dv.T
            kk = min(cfg.k_neg + 5, sims.shape[1])  # tiny corpora (tests, small releases)
            top = np.argpartition(-sims, kk - 1, axis=1)[:, :kk]
            for r, row in enumerate(top):
                row = row[np.argsort(-sims[r, row])]
                cands.append([pool_idx[j] for j in row])
    hard, jpos = [], []
    for e, cs in zip(exs, cands, strict=True):
        skip = {e.positive, *e.extra_positives}
        cs = [c for c in cs if c not in skip][: cfg.k_neg]
        hard.append(cs)
        best, best_j = -1, cfg.jaccard_min
        for c in cs:
            j = jaccard(e.local_words, corpus.words[c]) if corpus.words else 0.0
            if j >= best_j:
                best, best_j = c, j
        jpos.append(best)
    return Mined(hard, jpos)


def _sample_hard(cfg: TrainConfig, mined: Mined, offsets: list[int], n: int, rng: random.Random) -> list[int]:
    """``cfg.n_hard`` mined negatives per example, flattened in example order (the batch reshapes
    them to ``(b, n_hard)``): a random draw among the mined ones, topped up with random papers
    where mining found fewer, so every example has the same number."""
    hard = []
    for k in offsets:
        cs = mined.hard[k]
        hard.extend(
            rng.sample(cs, cfg.n_hard)
            if len(cs) >= cfg.n_hard
            else (cs + [rng.randrange(n) for _ in range(cfg.n_hard - len(cs))])
        )
    return hard


def _inbatch_loss(
    q: torch.Tensor,
    d: torch.Tensor,
    s_pos: torch.Tensor,
    exs: list[Example],
    docs: list[int],
    jp: list[int],
    margin: float,
) -> torch.Tensor:
    """Margin loss against every document of the batch (already encoded, so extra negatives for
    free): each is a negative of a query unless it is one of that query's positives (or its
    Jaccard-close paper, ``jp`` >= 0), which are masked out so the loss never pushes a query away
    from a paper it cites."""
    sims = q @ d.T  # every document of the batch is a negative unless it is the query's positive
    doc_ids = torch.tensor(docs)
    own = torch.zeros_like(sims, dtype=torch.bool)
    for i, e in enumerate(exs):
        ok = {e.positive, *e.extra_positives}
        if jp[i] >= 0:
            ok.add(jp[i])
        own[i] = torch.tensor([int(x) in ok for x in doc_ids])
    viol = F.relu(sims - s_pos[:, None] + margin).masked_fill(own, 0.0)
    return viol.sum(1).mean() / 8.0


def batch_loss(
    model: Hatten,
    cfg: TrainConfig,
    corpus: Corpus,
    exs: list[Example],
    mined: Mined,
    offsets: list[int],
    rng: random.Random,
) -> tuple[torch.Tensor, dict]:
    b = len(exs)
    n = len(corpus)
    pos = [e.positive for e in exs]
    hard = _sample_hard(cfg, mined, offsets, n, rng)
    rand = [rng.randrange(n) for _ in range(b)]
    jp = [mined.jpos[k] for k in offsets]
    has_j = [j >= 0 for j in jp]
    jdocs = [j for j in jp if j >= 0]
    docs = pos + hard + rand + jdocs
    drops = [e.drop for e in exs] + [-1] * (len(docs) - b)
    drop_titles = [e.drop_title for e in exs] + [False] * (len(docs) - b)
    model.train()
    q = model.encode(query_paragraphs(exs))
    d = model.encode(doc_paragraphs(corpus, docs, cfg.max_abstract, drops, drop_titles))
    dp = d[:b]
    dh = d[b : b + b * cfg.n_hard].reshape(b, cfg.n_hard, -1)
    dr = d[b + b * cfg.n_hard : 2 * b + b * cfg.n_hard]
    s_pos = (q * dp).sum(-1)
    s_hard = torch.einsum("bd,bkd->bk", q, dh)
    s_rand = (q * dr).sum(-1)
    m = cfg.margin
    l_neg = F.relu(s_hard - s_pos[:, None] + m).mean() + F.relu(s_rand - s_pos + m).mean()
    loss = l_neg
    l_jac = torch.zeros(())
    if jdocs:
        dj = d[2 * b + b * cfg.n_hard :]
        sel = torch.tensor([i for i, h in enumerate(has_j) if h])
        s_j = (q[sel] * dj).sum(-1)
        l_jac = F.relu(s_rand[sel] - s_j + m).mean()
        loss = loss + l_jac
    l_in = torch.zeros(())
    if cfg.inbatch_weight > 0:
        l_in = _inbatch_loss(q, d, s_pos, exs, docs, jp, m)
        loss = loss + cfg.inbatch_weight * l_in
    return loss, {
        "neg": l_neg.item(),
        "jac": l_jac.item(),
        "inb": l_in.item(),
        "acc": float((s_pos[:, None] > s_hard).float().mean()),
    }


@torch.no_grad()
def validate(model: Hatten, cfg: TrainConfig, corpus: Corpus, val: list[Example], seed: int = 123) -> dict:
    """Proxy recall of held-out examples among their positives + up to 20,000 random papers."""
    if not val:
        return {}
    rng = random.Random(seed)
    pool = set(rng.sample(range(len(corpus)), min(20000, len(corpus))))
    pool.update(e.positive for e in val)
    pool_idx = sorted(pool)
    where = {p: i for i, p in enumerate(pool_idx)}
    dv = encode_docs(model, corpus, pool_idx, cfg.max_abstract)
    qv = encode_queries(model, val)
    sims = qv @ dv.T
    target = np.array([where[e.positive] for e in val])
    rank = (sims > sims[np.arange(len(val)), target][:, None]).sum(1)
    return {f"val_R@{k}": round(float((rank < k).mean()), 4) for k in (10, 100)} | {
        "val_MRR": round(float((1.0 / (rank + 1)).mean()), 4)
    }


def log_idf(corpus: Corpus, vocab_size: int) -> np.ndarray:
    """log(idf) per token: as a pooling prior it makes the initial pooling an idf-weighted mean."""
    df = np.zeros(vocab_size, dtype=np.float64)
    for i in range(len(corpus)):
        parts = [corpus.title[i], *corpus.sents[i]]
        df[np.unique(np.concatenate(parts))] += 1
    idf = np.log((len(corpus) + 1) / (df + 1)) + 1e-3
    out = np.log(idf).astype(np.float32)
    out[:3] = 0.0
    return out


# -- the loop ---------------------------------------------------------------------------------------


def train(cfg: TrainConfig) -> Path:
    """Train (or resume) into ``cfg.out``; returns the checkpoint folder."""
    torch.set_num_threads(cfg.threads)
    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    cfg = _resume_config(cfg, out)
    prep = prepare(cfg)
    rng = random.Random(cfg.seed)
    torch.manual_seed(cfg.seed)
    ckpt = out / "ckpt"
    model, state = _load_or_init_model(cfg, prep, ckpt, out)
    opt = _optimizer(model, cfg, state)
    sampler, train_pool, val = _example_sources(cfg, prep)
    start = time.time()
    last_ckpt = time.time()
    run = _Run(
        cfg=cfg,
        out=out,
        prep=prep,
        model=model,
        opt=opt,
        state=state,
        rng=rng,
        sampler=sampler,
        train_pool=train_pool,
        val=val,
    )
    run.load_round()
    ema: dict[str, float] = {}
    while state["iteration"] < cfg.max_iters and (time.time() - start) / 60 < cfg.max_minutes:
        if run.mined is None or run.pos_in_round + cfg.batch > len(run.exs):
            if state["iteration"] > 0:
                run.validate_and_keep_best()
            run.new_round()
            run.save()
            last_ckpt = time.time()
        for k, v in run.step().items():
            ema[k] = v if k not in ema else 0.95 * ema[k] + 0.05 * v
        if state["iteration"] % 25 == 0:
            log(
                out,
                event="train",
                iteration=state["iteration"],
                **{k: round(v, 4) for k, v in ema.items()},
                minutes=round((time.time() - start) / 60, 1),
            )
        if time.time() - last_ckpt > cfg.checkpoint_minutes * 60:
            run.save()
            last_ckpt = time.time()
    run.save()
    run.validate_and_keep_best()
    if not math.isfinite(float(state.get("best", 0))):
        raise RuntimeError("training diverged")
    return ckpt


def _resume_config(cfg: TrainConfig, out: Path) -> TrainConfig:
    """The settings of the run in ``out``, saved beside it.

    A resumed run keeps its original settings (a different ``d_model`` or vocabulary would not
    fit the checkpoint); only the time budget (``max_minutes``, ``max_iters``) may change."""
    saved = out / "train_config.json"
    if saved.exists():
        old = json.loads(saved.read_text())
        old.update(max_minutes=cfg.max_minutes, max_iters=cfg.max_iters)
        cfg = TrainConfig(**old)
    saved.write_text(json.dumps(asdict(cfg), indent=2) + "\n")
    return cfg


def _load_or_init_model(cfg: TrainConfig, prep: dict, ckpt: Path, out: Path) -> tuple[Hatten, dict]:
    """The checkpointed model and its state when there is one, else a new model.

    A new model starts from the GloVe-based word vectors and, with ``token_bias``, from log idf
    as each token's pooling prior: an informed start is what makes small corpora trainable."""
    if (ckpt / "model.pt").exists():
        model, state = Hatten.load(ckpt)
        log(out, event="resumed", iteration=state["iteration"])
        return model, state
    mcfg = HattenConfig(
        vocab_size=prep["vocab_size"],
        emb_dim=prep["base"].shape[1],
        d_model=cfg.d_model,
        n_heads=cfg.n_heads,
        ff_dim=cfg.ff_dim,
        pool_heads=cfg.pool_heads,
        dropout=cfg.dropout,
        freeze_emb=cfg.freeze_emb,
        token_bias=cfg.token_bias,
        max_title=cfg.max_title,
        max_abstract=cfg.max_abstract,
        max_local=cfg.max_local,
    )
    model = Hatten(mcfg)
    with torch.no_grad():
        model.emb.weight.copy_(torch.from_numpy(prep["base"]))
        if model.tok_bias is not None:
            model.tok_bias.weight.copy_(
                torch.from_numpy(log_idf(prep["corpus"], prep["vocab_size"]))[:, None]
            )
    return model, {"iteration": 0, "round": 0, "best": -1.0}


def _optimizer(model: Hatten, cfg: TrainConfig, state: dict) -> torch.optim.Adam:
    """Adam with its own learning rate for the word embeddings (0 when frozen: they are large and
    overfit first), restored from the checkpoint's state so a resume continues the same moments."""
    emb_params = [model.emb.weight]
    other = [p for n, p in model.named_parameters() if n != "emb.weight"]
    opt = torch.optim.Adam(
        [
            {"params": other, "lr": cfg.lr},
            {"params": emb_params, "lr": cfg.emb_lr if not cfg.freeze_emb else 0.0},
        ]
    )
    if "optim" in state:
        opt.load_state_dict(state.pop("optim"))
    return opt


def _example_sources(
    cfg: TrainConfig, prep: dict
) -> tuple[SelfSupervised | None, list[Example], list[Example]]:
    """``(sampler, train_pool, val)``: the supervised release's splits when there is one, else a
    self-supervised sampler over the store.

    Self-supervised validation targets are drawn with a fixed seed and removed from the
    sampler's targets, so validation never scores a paper the model was trained to find."""
    if prep["release"]:
        return None, prep["release"].get("train", []), prep["release"].get("val", [])[: cfg.val_examples]
    corpus: Corpus = prep["corpus"]
    sampler = SelfSupervised(corpus, prep["neighbours"], cfg.max_local, cfg.max_abstract, seed=cfg.seed)
    vrng = random.Random(999)
    held = set(vrng.sample(sampler.targets, min(cfg.val_examples, len(sampler.targets) // 10)))
    sampler.targets = [t for t in sampler.targets if t not in held]
    vs = SelfSupervised(corpus, prep["neighbours"], cfg.max_local, cfg.max_abstract, seed=999)
    return sampler, [], [vs.example(p) for p in sorted(held)]


@dataclass
class _Run:
    """The moving parts of one training run, with the round of mined examples in progress.

    Examples are drawn and mined a round at a time (``mine_every`` batches): mining needs the
    whole round's encodings. The round and the position in it are checkpointed with the model,
    so a resumed run continues mid-round with the same examples instead of re-mining them."""

    cfg: TrainConfig
    out: Path
    prep: dict
    model: Hatten
    opt: torch.optim.Adam
    state: dict
    rng: random.Random
    sampler: SelfSupervised | None
    train_pool: list[Example]
    val: list[Example]
    exs: list[Example] = field(default_factory=list)
    mined: Mined | None = None
    pos_in_round: int = 0

    @property
    def ckpt(self) -> Path:
        return self.out / "ckpt"

    @property
    def round_file(self) -> Path:
        return self.ckpt / "round.pkl"

    def load_round(self) -> None:
        """Pick up the checkpointed round (only together with its model: a round without the
        model it was mined for is not resumed)."""
        if self.round_file.exists() and (self.ckpt / "model.pt").exists():
            with open(self.round_file, "rb") as fh:
                self.exs, self.mined, self.pos_in_round = pickle.load(fh)

    def save(self) -> None:
        """Checkpoint the model, the optimiser and the round in progress."""
        self.model.save(self.ckpt, {**self.state, "optim": self.opt.state_dict()})
        with open(self.round_file, "wb") as fh:
            pickle.dump((self.exs, self.mined, self.pos_in_round), fh, protocol=pickle.HIGHEST_PROTOCOL)

    def new_round(self) -> None:
        """Draw the next round's examples and mine their negatives and positives.

        The first self-supervised round mines without the model (an untrained one would pick
        random negatives); later rounds, and every supervised one, mine with the current model."""
        cfg = self.cfg
        n = cfg.mine_every * cfg.batch
        if self.sampler is not None:
            self.exs = self.sampler.examples(n)
        else:
            self.exs = [self.train_pool[self.rng.randrange(len(self.train_pool))] for _ in range(n)]
        t = time.time()
        use_model = self.state["round"] > 0 or self.sampler is None
        self.mined = mine(
            self.model if use_model else None,
            cfg,
            self.prep["corpus"],
            self.exs,
            self.prep["neighbours"],
            self.rng,
        )
        self.pos_in_round = 0
        log(
            self.out,
            event="mined",
            round=self.state["round"],
            examples=len(self.exs),
            seconds=round(time.time() - t, 1),
            jaccard_pos=sum(j >= 0 for j in self.mined.jpos),
        )
        self.state["round"] += 1

    def step(self) -> dict[str, float]:
        """One optimiser step on the next batch of the round; returns the loss and its parts."""
        cfg = self.cfg
        offsets = list(range(self.pos_in_round, self.pos_in_round + cfg.batch))
        batch = [self.exs[k] for k in offsets]
        self.pos_in_round += cfg.batch
        loss, parts = batch_loss(self.model, cfg, self.prep["corpus"], batch, self.mined, offsets, self.rng)
        self.opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), 5.0)
        self.opt.step()
        self.state["iteration"] += 1
        return {"loss": loss.item(), **parts}

    def validate_and_keep_best(self) -> None:
        """Validate, log, and save the model to ``best`` when its R@100 beats the best so far
        (the exported model is the best one, not the last: late rounds can overfit)."""
        metrics = validate(self.model, self.cfg, self.prep["corpus"], self.val)
        log(self.out, event="val", iteration=self.state["iteration"], **metrics)
        key = metrics.get("val_R@100", 0.0)
        if key > self.state.get("best", -1):
            self.state["best"] = key
            self.model.save(self.out / "best", {"iteration": self.state["iteration"], **metrics})


def main(argv: list[str] | None = None) -> None:
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_arguments(ap)
    args = ap.parse_args(argv)
    train(config_from_args(args))


def add_arguments(ap) -> None:
    ap.add_argument("--out", required=True, help="run folder (resumed when it exists)")
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--store", help="paper store for self-supervised pairs")
    src.add_argument("--release", help="folder in the HAtten authors' layout (supervised)")
    for f in TrainConfig.__dataclass_fields__.values():
        if f.name in ("out", "store", "release", "extra"):
            continue
        flag = "--" + f.name.replace("_", "-")
        if f.type in ("bool", bool):
            ap.add_argument(flag, action="store_true", default=f.default)
        else:
            typ = {"int": int, "float": float, "str": str}.get(str(f.type), str)
            ap.add_argument(flag, type=typ, default=f.default)


def config_from_args(args) -> TrainConfig:
    kwargs = {k: getattr(args, k) for k in TrainConfig.__dataclass_fields__ if hasattr(args, k)}
    kwargs["store"] = args.store or ""
    kwargs["release"] = args.release or ""
    return TrainConfig(**kwargs)


if __name__ == "__main__":
    main()
