"""Names the user types for ``citewise fetch --field`` and ``--venue``, resolved to the OpenAlex
entity whose works are fetched: a field, subfield or topic of OpenAlex's topic hierarchy, or a
source (a journal or a conference's proceedings).

Why resolve first, and refuse rather than guess: "linguistics" names a subfield of the Arts and
one of the Social Sciences; "Computational Linguistics" is a journal and the words of hundreds of
proceedings. Fetching the wrong slice costs the user hours at the rate limit and fills the store
with papers they did not want, so a name is taken only when it is unambiguous (one entity bears
exactly that name, or only one entity matches at all); the choice is always said with the
alternatives, and an ambiguous name is an error that lists the candidates by id, which the user
can then pass instead of the name (``--field subfields/1702``, ``--venue S137773608``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ..records import normalize_title
from .openalex import OpenAlex

# The levels --field searches, broadest first, and the works filter of each.
FIELD_LEVELS = (
    ("fields", "field", "primary_topic.field.id"),
    ("subfields", "subfield", "primary_topic.subfield.id"),
    ("topics", "topic", "primary_topic.id"),
)
SOURCE_FILTER = "primary_location.source.id"
SHOWN = 6  # candidates an ambiguity lists
_FIELD_ID = re.compile(
    r"(?:https://openalex\.org/)?(fields|subfields|domains)/(\d+)|(?:https://openalex\.org/)?([TC])(\d+)"
)
_SOURCE_ID = re.compile(r"(?:https://openalex\.org/)?S(\d+)", re.IGNORECASE)
_ID_FILTER = {"fields": "primary_topic.field.id", "subfields": "primary_topic.subfield.id"}
_ID_FILTER.update({"domains": "primary_topic.domain.id", "T": "primary_topic.id", "C": "concepts.id"})
_ID_KIND = {"fields": "field", "subfields": "subfield", "domains": "domain", "T": "topic", "C": "concept"}


class NameError_(ValueError):  # noqa: N801 - not the builtin NameError
    """A name that resolves to nothing or to several entities: the message is the user's one line."""


@dataclass
class Entity:
    """One OpenAlex entity: its kind (``field``, ``subfield``, ``topic``, ``source``...), short id
    (``17``, ``T10181``, ``S137773608``), name, works count, and the works filter it stands for."""

    kind: str
    id: str
    name: str
    works: int | None
    filter: str
    aliases: tuple[str, ...] = ()  # a source's other titles (``alternate_titles``): exact too

    def named(self, key: str) -> bool:
        """Whether the entity bears the name ``key`` (normalised: case and punctuation aside)."""
        return any(normalize_title(n) == key for n in (self.name, *self.aliases))

    def label(self) -> str:
        """``Computer Science (field 17, 1,234 works)``: how a choice or a candidate is shown."""
        works = f", {self.works:,} works" if isinstance(self.works, int) else ""
        return f"{self.name} ({self.kind} {self.id}{works})"

    @property
    def option(self) -> str:
        """The id as the user passes it back (``fields/17``, ``T10181``, ``S123``)."""
        return f"{self.kind}s/{self.id}" if self.kind in ("field", "subfield", "domain") else self.id


@dataclass
class Choice:
    """The entity resolved, why it was taken, and the other candidates (said with the choice)."""

    entity: Entity
    why: str
    others: list[Entity] = field(default_factory=list)

    def note(self, option: str, asked: str) -> str:
        """One line: which entity ``--option asked`` resolved to, and how to pick another."""
        line = f"--{option} {asked!r}: {self.entity.label()}, {self.why}"
        if self.others:
            shown = "; ".join(f"{e.label()} = --{option} {e.option}" for e in self.others[:SHOWN])
            more = f" and {len(self.others) - SHOWN} more" if len(self.others) > SHOWN else ""
            line += f"; also matching: {shown}{more}"
        return line


def field_by_id(text: str) -> Entity | None:
    """An id typed for ``--field`` (``fields/17``, ``subfields/1702``, ``T10181``, a legacy concept
    ``C41008148``), or None when ``text`` is a name: an id needs no request."""
    m = _FIELD_ID.fullmatch(text.strip())
    if m is None:
        return None
    level, number = (m.group(1), m.group(2)) if m.group(1) else (m.group(3), m.group(3) + m.group(4))
    return Entity(_ID_KIND[level], number, text.strip(), None, f"{_ID_FILTER[level]}:{number}")


def source_by_id(text: str) -> Entity | None:
    """A source id typed for ``--venue`` (``S137773608`` or its URL), or None for a name."""
    m = _SOURCE_ID.fullmatch(text.strip())
    return (
        Entity("source", f"S{m.group(1)}", text.strip(), None, f"{SOURCE_FILTER}:S{m.group(1)}")
        if m
        else None
    )


def resolve_field(oa: OpenAlex, name: str) -> Choice:
    """The field, subfield or topic ``name`` stands for (an id is taken as is)."""
    if (given := field_by_id(name)) is not None:
        return Choice(given, "given by its id")
    found: list[Entity | None] = []
    for path, kind, filt in FIELD_LEVELS:
        found += [_entity(r, kind, filt) for r in oa.entities(path, name)]
    return _choose([e for e in found if e is not None], name, "field", "OpenAlex field, subfield or topic")


def resolve_venue(oa: OpenAlex, name: str) -> Choice:
    """The source (journal, proceedings) ``name`` stands for (an id is taken as is)."""
    if (given := source_by_id(name)) is not None:
        return Choice(given, "given by its id")
    found = [_entity(r, "source", SOURCE_FILTER, alternates=True) for r in oa.entities("sources", name)]
    return _choose(
        [e for e in found if e is not None], name, "venue", "OpenAlex source (journal or proceedings)"
    )


def _entity(result: object, kind: str, filt: str, alternates: bool = False) -> Entity | None:
    """An entity of one ``results[]`` item (its short id from the URL), or None when malformed."""
    if not isinstance(result, dict) or not isinstance(result.get("id"), str):
        return None
    name = result.get("display_name")
    if not isinstance(name, str) or not name:
        return None
    short = result["id"].rstrip("/").rsplit("/", 1)[-1]
    works = result.get("works_count")
    aliases = result.get("alternate_titles") if alternates else None
    aliases = tuple(a for a in aliases if isinstance(a, str)) if isinstance(aliases, list) else ()
    return Entity(kind, short, name, works if isinstance(works, int) else None, f"{filt}:{short}", aliases)


def _choose(found: list[Entity], name: str, option: str, what: str) -> Choice:
    """One entity named exactly ``name`` (the broadest if several levels bear it), else the only
    match; several inexact matches or none raise :class:`NameError_` with the candidates."""
    key = normalize_title(name)
    exact = [e for e in found if e.named(key)]  # in the order asked: broadest level first
    broadest = [e for e in exact if exact and e.kind == exact[0].kind]
    if len(broadest) == 1:
        chosen = broadest[0]
        why = "the one named exactly that" if len(exact) == 1 else f"the broadest of {len(exact)} named that"
        return Choice(chosen, why, [e for e in found if e is not chosen])
    if len(broadest) > 1:
        found = broadest  # several of one kind bear the very name: only those are candidates
    if len(found) == 1:
        return Choice(found[0], "the only match", [])
    if not found:
        raise NameError_(f"--{option} {name!r}: no {what} has that name; try fewer or other words")
    listed = "; ".join(f"{e.label()} = --{option} {e.option}" for e in found[:SHOWN])
    more = f" (and {len(found) - SHOWN} more)" if len(found) > SHOWN else ""
    raise NameError_(
        f"--{option} {name!r} is ambiguous: {len(found)} match{'' if broadest else ' and none is named exactly that'}: "
        f"{listed}{more}; pass one by its id, or its exact name"
    )
