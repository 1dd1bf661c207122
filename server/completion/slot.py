"""Which papers a citation key slot offers, and in what order: one path from the ranking to the menu.

:func:`order` is every decision a slot's menu makes, in one place: what was typed filters the
ranking (word prefixes of the key, the title and the authors, :func:`matches_prefix`), the draft's
``.bib`` joins (it leads a slot with no sentence, as in texlab; it follows where something was typed
or the ranking is empty), each paper's key is computed once, the ``.bib`` papers the draft does not
cite elsewhere are lifted by :func:`citewise.models.bib_lift.lift` (the rule the code actions order
by), and the list is cut at ``k``. Pure: the store look-ups come in as functions.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Collection, Iterable, Iterator

from citewise.indexer.records import normalize_title
from citewise.indexer.store import StoredPaper
from citewise.models.bib_lift import lift
from citewise.models.query import Candidate, ContextQuery
from citewise.models.recommender import Recommendation

from ..bibindex import BibEntryIds, BibIndex, PaperKey
from ..draft import Citation

# --------------------------------------------------------------------------------------------
# Typed-prefix filtering (the server filters, so the client never hides a context-ranked paper)
# --------------------------------------------------------------------------------------------


def _words(text: str) -> list[str]:
    return normalize_title(text).split()


def matches_prefix(paper: StoredPaper, key: str, prefix: str) -> bool:
    """Whether what the user typed in the key slot selects this paper.

    A prefix of the key, of any title word, or of any author's last name (case and accents
    ignored). Matching word starts rather than fuzzy subsequences keeps the server's choice
    compatible with every client's own filter on the ``filterText`` we send.
    """
    p = prefix.strip().lower()
    if not p:
        return True
    if key.lower().startswith(p):
        return True
    np_ = normalize_title(p)
    if not np_:
        return False
    first = np_.split()[0]
    words = _words(paper.title)
    for author in paper.authors:
        words.extend(_words(author.split(",")[0]))
    return any(w.startswith(first) for w in words)


def filter_by_prefix(
    items: list[Recommendation], prefix: str, key_of: Callable[[StoredPaper], str]
) -> list[Recommendation]:
    """Items whose key, title word or author matches the typed prefix, keeping the ranking."""
    if not prefix.strip():
        return items
    return [r for r in items if matches_prefix(r.paper, key_of(r.paper), prefix)]


# --------------------------------------------------------------------------------------------
# What a key slot offers: the ranking, and the draft's own .bib (texlab lists every key there)
# --------------------------------------------------------------------------------------------

PaperLookup = Callable[[str, BibEntryIds], "StoredPaper | None"]
"""``lookup(key, ids)``: the stored paper of a ``.bib`` entry, or None (not imported, no store)."""


def has_sentence(query: ContextQuery) -> bool:
    """Whether a key slot has words of its own around it, beyond the draft's title and abstract.

    A fresh draft's ``\\cite{`` right after ``\\maketitle`` (or the abstract) reads the title (or the
    abstract's last sentence) as its local context; those words are in the query anyway, and they
    say nothing about this slot that they do not say about every other: such a slot is ranked
    as one with no sentence (the draft's ``.bib`` first, :func:`slot_items`)."""
    words = set(_words(query.local))
    if not words:
        return False
    return bool(words - set(_words(query.citing_title)) - set(_words(query.citing_abstract)))


def bib_entry_matches(key: str, ids: BibEntryIds, typed: str) -> bool:
    """Whether a ``.bib`` entry fits what the key slot holds: a prefix of its key or of a title
    word, the words :func:`matches_prefix` reads, from the ``.bib``'s own text (no store look-up,
    so a 50,000-entry library is filtered without 50,000 queries)."""
    p = typed.strip().lower()
    if not p or key.lower().startswith(p):
        return True
    np_ = normalize_title(p)
    if not np_ or not ids.norm_title:
        return False
    first = np_.split()[0]
    return any(w.startswith(first) for w in ids.norm_title.split())


def own_entries(
    bib: BibIndex, typed: str, first: Iterable[str], lookup: PaperLookup
) -> Iterator[tuple[Recommendation, str]]:
    """The draft's ``.bib`` entries that fit ``typed``: the keys of ``first`` (in that order) that
    the ``.bib`` holds, then the others in the file's order. Lazy: a slot shows a few of them.

    An entry the store lacks (not imported yet, no store, a title-less ``@misc{foo,}``) is offered
    as the ``.bib`` has it: its key, and its title when it has one. Each comes with its key in
    the ``.bib`` (a stored paper may carry another source's key)."""
    seen: set[str] = set()
    for key in itertools.chain(first, bib.entries):
        ids = bib.entries.get(key)
        if ids is None or key in seen:
            continue
        seen.add(key)
        if not bib_entry_matches(key, ids, typed):
            continue
        paper = lookup(key, ids) or StoredPaper(title=ids.title or key, key=key, id=0)
        rec = Recommendation(paper, Candidate(paper.id, 0.0, {"your .bib": 1.0}, {"your .bib": len(seen)}))
        yield rec, key


def slot_items(
    ranked: list[Recommendation],
    own: Iterable[tuple[Recommendation, str]],
    typed: str,
    key_of: Callable[[StoredPaper], str],
    k: int,
    *,
    own_first: bool,
    bib_fallback: bool = True,
) -> tuple[list[Recommendation], bool]:
    """The ``k`` papers a key slot offers, and whether the client must ask again as the user types.

    ``ranked`` is the recommender's list for the slot's context, filtered here by ``typed`` (the
    whole key under the cursor); ``own`` the draft's ``.bib`` entries (:func:`own_entries`).

    * No sentence around the slot (``\\cite{`` on a line of its own, a fresh draft): there is
      nothing to rank by but the title and the keys cited so far, so the ``.bib`` leads, as in
      texlab, and the ranking follows.
    * A sentence: the ranking leads. The ``.bib`` follows where something was typed (entries whose
      key or title it starts) or where the ranking found nothing (an empty store); not otherwise:
      the draft's own entries the store lacks are already in the ranking where their words place
      them (:mod:`.bib_overlay`), the completion lifts a ``.bib`` paper only between the sentence's
      first two (:mod:`citewise.models.bib_lift`), and entries the sentence did not find must not
      pass papers it did.

    Each paper once. The list is incomplete when more papers fit than were sent and the server
    filters them: something was typed, or the ``.bib`` leads (entries past ``k`` are reached only
    by typing). ``bib_fallback`` False (the store is still opening): an empty ranking stays empty,
    not the ``.bib`` in file order; the client asks again.
    """
    ranked_part = filter_by_prefix(ranked, typed, key_of) if typed else ranked
    keyed = [(r, key_of(r.paper)) for r in ranked_part]
    if own_first:
        parts: list[tuple[bool, Iterable[tuple[Recommendation, str]]]] = [(True, own), (False, keyed)]
    else:
        parts = [(False, keyed), (True, own)] if typed or (not keyed and bib_fallback) else [(False, keyed)]
    out: list[Recommendation] = []
    keys: set[str] = set()  # every key offered
    own_keys: set[str] = set()  # the .bib's keys offered
    ids: set[int] = set()  # the stored papers offered
    for is_own, part in parts:
        for rec, key in part:
            pid = rec.paper.id
            # A stored paper once; a .bib entry once, whichever list found it. Two stored papers
            # may share a key (two versions of one work): both stay, completion tells them apart.
            if (pid and pid in ids) or key in own_keys or (is_own and key in keys):
                continue
            keys.add(key)
            ids.add(pid)
            if is_own:
                own_keys.add(key)
            out.append(rec)
            if len(out) > k:
                return out[:k], bool(typed) or own_first
    return out, False


def cited_elsewhere(citations: Iterable[Citation], here: Citation) -> frozenset[str]:
    """The keys the draft cites in citations other than ``here`` (placeholders left out)."""
    return frozenset(
        k.key for c in citations if c.start != here.start for k in c.keys if k.key and not k.placeholder
    )


def waiting_in_bib(bib: BibIndex, cited: Collection[str]) -> Callable[[StoredPaper], bool]:
    """Whether a paper is a ``.bib`` entry the draft does not cite yet: the papers
    :func:`citewise.models.bib_lift.lift` may raise, in the menu and in the code actions alike.

    Why not every ``.bib`` entry: an entry the draft does not cite yet is one the author gathered
    for a sentence still to be written, while one the draft cites has found its sentence; a paper
    accepted for one sentence must not lead the next, unrelated one (measured in
    ``docs/own-bibliography-ranking.md``)."""

    def waiting(paper: StoredPaper) -> bool:
        key = bib.key_for(paper)
        return key is not None and key not in cited

    return waiting


def order(
    ranked: list[Recommendation],
    query: ContextQuery,
    bib: BibIndex,
    typed: str,
    k: int,
    *,
    key_of: Callable[[StoredPaper], PaperKey],
    lookup: PaperLookup,
    recent: Iterable[str] = (),
    cited: Collection[str] = frozenset(),
    bib_fallback: bool = True,
) -> tuple[list[tuple[Recommendation, PaperKey]], bool]:
    """The papers a key slot offers, each with its key, in the menu's order, and whether the client
    must ask again as the user types (:func:`slot_items`).

    ``ranked``: the recommender's list for the slot (the draft's own entries the store lacks
    already in it, :mod:`..bib_overlay`); ``key_of``: how the draft cites a paper; ``lookup``: the
    stored paper of a ``.bib`` entry; ``recent``: the keys cited just before the slot, offered
    first among the ``.bib``'s; ``cited``: the keys the draft cites elsewhere
    (:func:`cited_elsewhere`), which the ``.bib`` lift leaves where they are."""
    keys = {id(r.paper): key_of(r.paper) for r in ranked}
    first = [*recent, *(pk.key for pk in keys.values() if pk.key in bib)]
    own = own_entries(bib, typed, first, lookup)
    sentence = has_sentence(query)
    items, truncated = slot_items(
        ranked, own, typed, lambda p: keys[id(p)].key, k, own_first=not sentence, bib_fallback=bib_fallback
    )
    keyed = [(rec, keys.get(id(rec.paper)) or key_of(rec.paper)) for rec in items]
    if sentence:  # a slot with no sentence keeps its own order, the .bib's
        waiting = waiting_in_bib(bib, cited)
        keyed = lift(keyed, lambda pair: pair[1].in_bib and waiting(pair[0].paper))
    return keyed, truncated
