"""What the recommender is asked: the local context of a placeholder plus the draft's global context.

The language server, the CLI and the evaluation all build this one type, so a ranking measured
by ``citewise eval`` is exactly the ranking an editor gets.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class ContextQuery:
    """A citation need: the text around the placeholder and the citing draft's title and abstract."""

    local: str
    citing_title: str = ""
    citing_abstract: str = ""

    def text(self, with_title: bool = True, with_abstract: bool = True) -> str:
        parts = [self.local]
        if with_title and self.citing_title:
            parts.append(self.citing_title)
        if with_abstract and self.citing_abstract:
            parts.append(self.citing_abstract)
        return " ".join(p for p in parts if p)


@dataclass
class Candidate:
    """One recommended paper with the score of every source that found it (for explanations)."""

    paper_id: int
    score: float
    sources: dict[str, float] = field(default_factory=dict)  # e.g. {"bm25": 12.3, "hatten": 0.71}
    ranks: dict[str, int] = field(default_factory=dict)  # 1-based rank within each source
