"""Each placeholder its own context: which words of a sentence belong to which citation (issue 16).

A sentence such as "rule-based [2, 11] and end-to-end [18, 31] systems were studied" cites
different papers at different places; a query made of the whole sentence gives every placeholder
the same list. The rule here follows how citations are written:

* A citation marker follows the words it supports ("Hidden Markov Models [50] and Neural
  Networks [7]"), so a placeholder's own words are those since the previous citation marker,
  cut at the last clause boundary (``;``, ``:``, ``, and``/``, or``/``, while``/``, which``...).
* A marker that opens its clause ("In a follow-up work, [27] proposed ...") supports what
  follows it: then its words run to the next marker or clause boundary.
* Markers with no content word between them ("\\cite{a}\\cite{}", "[35] and [9] addressed ...")
  are one group and share the sentence.
* Without another marker in the context, every word is the placeholder's own: a sentence with one
  citation is ranked exactly as before.

The rest of the sentence still counts (it often says what kind of thing is cited: "... systems
were studied"), at ``REST_WEIGHT`` of a focus word in the BM25 query (``local_weights``).

A context is passed around as one :class:`~citewise.models.query.ContextQuery`: the plain local
text plus ``at`` (the placeholder's offset) and ``others`` (other markers' offsets). Front ends
that work on marked text (the draft reader) write ``PLACEHOLDER_MARK``/``OTHER_MARK`` where the
markers were and call :func:`marked_query`, so the server, ``citewise suggest`` and the evaluation
build the same query.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterable

import numpy as np

from citewise.indexer.bm25 import STOPWORDS

from .query import _SPACE_BEFORE_PUNCT, MARKS, OTHER_MARK, PLACEHOLDER_MARK, ContextQuery, marked_query

__all__ = [
    "MARKS",
    "OTHER_MARK",
    "PLACEHOLDER_MARK",
    "focus_query",
    "focus_span",
    "focus_text",
    "focused_vector",
    "has_content",
    "local_weights",
    "marked_query",
    "marked_window",
    "window_parts",
    "strip_marks",
]

# Weight of a word outside the placeholder's own segment, relative to one inside it. Not tuned on
# dev: half keeps the shared words ("... systems were studied") as a tie-breaker without letting
# them outvote the two or three words that are the placeholder's own.
REST_WEIGHT = 0.5
RERANK_WINDOW = 200  # characters each side of the placeholder for the reranker (paper 004)
RERANK_MARK = "[CIT]"  # the reranker's placeholder token (models/reranker.py, its training data)

_WORD = re.compile(r"[^\W_]{2,}")
# Strong clause boundaries; a bare comma is not one (lists: "queries, clicks, likes"). Cues that
# open an enumeration ("e.g.", "such as", "including") are boundaries too: in "ranking models
# such as DRMM [5]" the item is the placeholder's own and the kind it belongs to is the rest.
_CLAUSE = re.compile(
    r"[;:]|\s[\u2013\u2014-]\s|,\s*(?:and|or|but|while|whereas|which|where|whose|although|though|yet)\b"
    r"|\b(?:e\.\s?g|i\.\s?e)\.,?|\b(?:such\s+as|for\s+example|for\s+instance|including|namely)\b,?",
    re.IGNORECASE,
)


def has_content(text: str) -> bool:
    """Whether ``text`` holds a word a search would use (not only stop words and punctuation)."""
    return any(w not in STOPWORDS for w in _WORD.findall(text.lower()))


def strip_marks(text: str) -> str:
    """``text`` without the placeholder/other-marker characters (what a user should see)."""
    return marked_query(text).local


def _content_bounds(text: str) -> tuple[int, int] | None:
    """``(end of the first content word, start of the last one)`` in ``text``; None without any.
    One pass, so that choosing a clause boundary stays linear in the sentence's length."""
    first = last = -1
    for m in _WORD.finditer(text):
        if m.group().lower() not in STOPWORDS:
            if first < 0:
                first = m.end()
            last = m.start()
    return (first, last) if first >= 0 else None


def _neighbour(local: str, at: int, others: Iterable[int], before: bool) -> int | None:
    """The nearest other marker on one side with a word between it and the placeholder
    (adjacent markers are one group); None when there is none on that side."""
    side = (
        sorted((o for o in others if o <= at), reverse=True)
        if before
        else sorted(o for o in others if o >= at)
    )
    prev = at
    for o in side:  # each stretch read once: linear however many markers there are
        if has_content(local[o:prev] if before else local[prev:o]):
            return o
        prev = o
    return None


def _left_segment(local: str, lo: int, at: int) -> tuple[int, int] | None:
    """The words since ``lo`` cut at the last clause boundary that still leaves a content word."""
    seg = local[lo:at]
    bounds = _content_bounds(seg)
    if bounds is None:
        return None
    start = lo
    for m in _CLAUSE.finditer(seg):
        if m.end() <= bounds[1]:
            start = lo + m.end()
    return start, at


def _right_segment(local: str, at: int, hi: int) -> tuple[int, int] | None:
    """The words up to ``hi`` cut at the first clause boundary that follows a content word."""
    seg = local[at:hi]
    bounds = _content_bounds(seg)
    if bounds is None:
        return None
    end = hi
    for m in _CLAUSE.finditer(seg, bounds[0]):
        end = at + m.start()
        break
    return at, end


def focus_span(query: ContextQuery) -> tuple[int, int] | None:
    """``(start, end)`` of the placeholder's own words in ``query.local``, or None when every
    word is its own (no position, no other marker with words between, or nothing left outside
    the segment)."""
    local, at = query.local, query.at
    if at < 0 or not query.others:
        return None
    lo = _neighbour(local, at, query.others, before=True)
    hi = _neighbour(local, at, query.others, before=False)
    if lo is None and hi is None:  # only adjacent markers: one group, the sentence is its own
        return None
    lo, hi = lo or 0, len(local) if hi is None else hi
    left_words = local[lo:at].rstrip()
    # The marker opens its clause: only stop words since the last boundary ("..., whereas [15]
    # explored"), or a comma right before it ("In a follow-up work, [27] proposed").
    since = max((m.end() for m in _CLAUSE.finditer(left_words)), default=0)
    opens = not has_content(left_words[since:]) or left_words.endswith((",", ";", ":", "("))
    left = _left_segment(local, lo, at)
    right = _right_segment(local, at, hi)
    span = (right or left) if opens else (left or right)
    if span is None or not has_content(local[: span[0]] + " " + local[span[1] :]):
        return None
    return span


def focus_text(query: ContextQuery) -> tuple[str, str]:
    """``(own words, rest of the local context)``; the rest is empty when every word is its own."""
    span = focus_span(query)
    if span is None:
        return query.local, ""
    s, e = span
    return query.local[s:e].strip(), f"{query.local[:s]} {query.local[e:]}".strip()


def focus_query(query: ContextQuery) -> ContextQuery:
    """The query of the placeholder's own clause: ``local`` cut to its own words (the draft's title
    and abstract kept), for the stages that read a query as one text and cannot weigh its words
    (the dense list, the ``cited-as`` list, the teacher); ``query`` itself when every word is its own.

    Why the clause alone and not the sentence: an encoder reads a sentence with three citations as
    one meaning, so every placeholder gets the same nearest papers (measured on ACM-CR dev,
    docs/evaluation.md); the BM25 views still read the rest of the sentence at ``REST_WEIGHT``."""
    span = focus_span(query)
    if span is None:
        return query
    s, e = span
    raw = query.local[s:e]
    own = raw.strip(" ,;:")
    start = s + raw.index(own) if own else s
    return ContextQuery(
        own, query.citing_title, query.citing_abstract, min(max(query.at - start, 0), len(own))
    )


def focused_vector(
    encode: Callable[[ContextQuery], np.ndarray], query: ContextQuery, rest_weight: float = REST_WEIGHT
) -> np.ndarray:
    """The query vector of an encoder (``encode``: a :class:`ContextQuery` -> its unit vector) that
    weighs the placeholder's own clause as the BM25 views weigh its words: the clause's vector plus
    ``rest_weight`` times the whole sentence's, renormalised; the sentence's own vector when every
    word is the placeholder's (or ``rest_weight`` is 1, the whole sentence alike).

    Why a mix and not the clause alone: an item of a list ("DRMM [5]") says little by itself, and
    the sentence says what kind of thing it is. On ACM-CR dev's 410 placeholder queries the dense
    list alone gave R@10 0.353 with the sentence, 0.362 with the clause alone, 0.372 with the
    clause + 0.5 x the sentence (0.365 at 0.25, 0.370 at 1); the sentence alone gave all 53
    sentences with 2+ marker groups one top 10, every mix 3 of them (docs/evaluation.md)."""
    whole = np.asarray(encode(query), dtype=np.float32)
    own = focus_query(query)
    if own is query or rest_weight >= 1.0:
        return whole
    mixed = np.asarray(encode(own), dtype=np.float32) + max(rest_weight, 0.0) * whole
    norm = float(np.linalg.norm(mixed))
    return mixed / norm if norm > 0 else whole


def local_weights(
    query: ContextQuery, text: str, tokenize: Callable[[str], list[str]], rest_weight: float = REST_WEIGHT
) -> str | Counter[str]:
    """The BM25 query for ``text`` (a view containing ``query.local``): the text itself when the
    placeholder's words are the whole local context, else its term counts with the words outside
    the placeholder's segment counted at ``rest_weight``."""
    _own, rest = focus_text(query)
    if not rest or rest_weight == 1.0:
        return text
    terms: Counter[str] = Counter(tokenize(text))
    for term, n in Counter(tokenize(rest)).items():
        if term in terms:
            terms[term] = max(terms[term] - (1.0 - rest_weight) * n, rest_weight)  # type: ignore[assignment]  # typeshed types Counter values as int; float weights are documented
    return terms


def window_parts(query: ContextQuery, chars: int = RERANK_WINDOW) -> tuple[str, str]:
    """Up to ``chars`` characters of ``query.local`` each side of the placeholder, cut at word
    boundaries (paper 004's windows around the citation); ``(local, "")`` without a position.

    In a sentence with several citations the window keeps to the placeholder's own words
    (:func:`focus_span`): the words of the other segments describe the other citations, and a
    cross-encoder cannot weigh them down as the BM25 views do, so they are left out."""
    local, at = query.local, query.at
    if at < 0:
        return local, ""
    span = focus_span(query)
    lo, hi = (0, len(local)) if span is None else (min(span[0], at), max(span[1], at))
    before, after = local[max(lo, at - chars) : at], local[at : min(hi, at + chars)]
    if at - chars > lo and " " in before:
        before = before[before.index(" ") + 1 :]
    if at + chars < hi and " " in after:
        after = after[: after.rindex(" ")]
    return before.strip(), after.strip()


def marked_window(query: ContextQuery, chars: int = RERANK_WINDOW, mark: str = RERANK_MARK) -> str:
    """The window of :func:`window_parts` with ``mark`` where the placeholder stands; the local
    text itself when the position is not known."""
    if query.at < 0:
        return query.local
    before, after = window_parts(query, chars)
    text = " ".join(p for p in (before, mark, after) if p)
    return _SPACE_BEFORE_PUNCT.sub(r"\1", text)
