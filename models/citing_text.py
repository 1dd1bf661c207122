"""What the reranker reads of how a candidate is cited: the one citing sentence (or citing title)
most like the sentence being written.

Why one, and why this one: the cross-encoder reads 128 tokens for query and candidate together,
so the candidate gets about 64, and a cited ACL paper often has no abstract at all, only a title.
The citers' sentence that shares the query's rarest words says, in another author's words, what
the paper is cited *for*, which is what the query sentence asks (issue 26 item 2). Chosen by the
idf of the words it shares with the local context, the weighting the BM25 index already has.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping


def most_like(
    query_words: set[str],
    texts: list[str],
    tokenize: Callable[[str], list[str]],
    idf: Mapping[str, float],
) -> str:
    """The text sharing the most idf with ``query_words`` (the first of equals; "" for none). The
    shared words are summed in sorted order: a set's order changes with the process's string
    hashing, and float sums in another order broke near-ties differently from run to run."""
    best, best_score = "", -1.0
    for text in texts:
        score = sum(idf.get(w, 0.0) for w in sorted(set(tokenize(text)) & query_words))
        if score > best_score:
            best, best_score = text, score
    return best


def snippets(
    local: str,
    citing_texts: Mapping[int, list[str]],
    tokenize: Callable[[str], list[str]],
    idf_of: Callable[[set[str]], dict[str, float]],
) -> dict[int, str]:
    """For each paper with citing texts, the one most like ``local`` (the query's sentence)."""
    words = set(tokenize(local))
    if not citing_texts:
        return {}
    idf = idf_of(words)
    return {pid: most_like(words, texts, tokenize, idf) for pid, texts in citing_texts.items() if texts}
