"""What a check finds, as plain data: a stable code, a severity, a message, the stored paper it
names, and the fix when there is one. The server turns findings into diagnostics and code
actions, ``citewise check`` into report lines; neither decides what was found."""

from __future__ import annotations

from dataclasses import dataclass, field

from citewise.indexer.store import StoredPaper

UNKNOWN_KEY = "unknown-key"
NOT_IN_STORE = "not-in-store"
SUSPECT = "suspect-reference"
MISMATCH = "metadata-mismatch"
UNLIKELY = "unlikely-citation"
DUPLICATE = "duplicate-entry"

# Every check's code in the order a report lists them, with its severity (LSP names) and
# whether it runs by default. ``not-in-store`` is off by default: most users' stores hold
# their field, not every paper they cite, so an entry the store lacks is no sign of a mistake.
CHECKS: dict[str, tuple[str, bool]] = {
    UNKNOWN_KEY: ("warning", True),
    SUSPECT: ("warning", True),
    DUPLICATE: ("warning", True),
    MISMATCH: ("information", True),
    NOT_IN_STORE: ("information", False),
    UNLIKELY: ("hint", True),
}
SEVERITIES = ("error", "warning", "information", "hint")  # LSP's 1..4


def default_enabled() -> dict[str, bool]:
    return {code: on for code, (_sev, on) in CHECKS.items()}


@dataclass(frozen=True)
class FieldFix:
    """Fields of a ``.bib`` entry to set from the store (name -> TeX value), the rest untouched."""

    fields: tuple[tuple[str, str], ...]


@dataclass
class Finding:
    """One finding about one cited key. ``suggested`` is the stored paper's key or id the user
    may want instead (or in addition); ``replace`` asks for the entry to be replaced by the
    stored one, ``update`` for some of its fields to be set from the store."""

    code: str
    key: str
    message: str
    paper: StoredPaper | None = None  # the stored paper the finding names
    suggested: str = ""
    replace: bool = False
    update: FieldFix | None = None
    details: dict = field(default_factory=dict)

    @property
    def severity(self) -> str:
        return CHECKS[self.code][0]
