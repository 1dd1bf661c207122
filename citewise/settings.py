"""One typed settings model for the CLI and the language server.

Settings arrive as untyped JSON (LSP ``initializationOptions`` / ``workspace/configuration``) or
from flags and the environment. :meth:`Settings.from_dict` validates every field, keeps the
default for a bad value and returns a message for each, so the editor can show *why* a setting
was ignored instead of failing or silently misbehaving.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

import platformdirs

from . import deprecated

# dense: the dense model alone; hybrid: the BM25 views and the dense list, reciprocal-rank fused.
# (The old name of ``dense``, ``hatten``, is still accepted for one release: citewise/deprecated.py.)
PREFETCH_MODES = ("auto", "bm25", "dense", "hybrid")
BIB_FIELD_PRESETS = ("minimal", "standard", "full")  # indexer.bibtex_writer.FIELD_PRESETS
# The reference checks (issue 27) by their diagnostic code, and whether each runs by default: the
# codes and defaults of ``models.checks.findings.CHECKS`` (settings may not import ``models``:
# tests/package/test_layout.py; tests/lsp/test_lsp_checks.py keeps the two equal).
CHECK_DEFAULTS: dict[str, bool] = {
    "unknown-key": True,
    "suspect-reference": True,
    "duplicate-entry": True,
    "metadata-mismatch": True,
    "not-in-store": False,
    "unlikely-citation": True,
}


def default_store_path() -> Path:
    """``$CITEWISE_STORE``, else ``<XDG data dir>/citewise/papers.sqlite``."""
    env = os.environ.get("CITEWISE_STORE")
    if env:
        return Path(env).expanduser()
    return Path(platformdirs.user_data_dir("citewise", appauthor=False)) / "papers.sqlite"


@dataclass(frozen=True)
class EntryStyle:
    """Key style and field preset of inserted entries, passed where a key style goes."""

    key_style: str = "lastnameYEARfirstword"
    fields: str = "standard"


@dataclass(frozen=True)
class Settings:
    """Everything a user can configure; defaults are what we measured to work best."""

    store: str = ""  # path of the paper store ("" = default_store_path())
    bibliography: tuple[str, ...] = ()  # .bib files to use when a draft names none
    k: int = 20  # suggestions shown per placeholder
    candidates: int = 200  # prefetch depth handed to the second stage
    budget_ms: int = 1500  # time budget of the background (reranking) stage
    rerank: bool = True  # run the second stage in the background
    prefetch: str = "auto"  # auto | bm25 | dense | hybrid
    context_chars: int = 400  # local context around a placeholder, cut at sentence bounds (400 measured best)
    key_style: str = "lastnameYEARfirstword"  # BibTeX key style for new entries
    bib_fields: str = "standard"  # fields of inserted entries: minimal | standard (no abstract) | full
    debounce_ms: int = 300  # delay before diagnostics / speculative reranking
    # Import the workspace's .bib files into the shared store, as `citewise index` would (on purpose:
    # off by default, a draft's .bib serves its own workspace beside the store: server/bib_overlay.py).
    import_workspace_bibs: bool = False
    # A Zotero database (zotero.sqlite) kept imported into the store while the server runs ("" = off).
    zotero: str = ""
    # Search engine: "local" (the index beside the store), milvus://HOST:PORT/COLLECTION (a lab's
    # Milvus cluster) or milvus-lite:PATH.db[#COLLECTION]; papers' metadata stays in the store.
    engine: str = "local"
    # Which reference checks run (code -> on/off): ``{"not-in-store": true}`` adds one, the rest
    # keep their defaults (:data:`CHECK_DEFAULTS`).
    checks: dict[str, bool] = field(default_factory=lambda: dict(CHECK_DEFAULTS))
    # Who citewise.fetchAround asks as: a Semantic Scholar API key ("" = $CITEWISE_S2_KEY, else none:
    # the shared public rate) and the OpenAlex polite-pool address ("" = $CITEWISE_MAILTO). Kept out
    # of repr: a key must not reach a log.
    s2_key: str = field(default="", repr=False)
    mailto: str = ""
    extra: dict[str, Any] = field(default_factory=dict, compare=False)

    @property
    def entry_style(self) -> EntryStyle:
        """How new BibTeX entries are written: key style and which fields they keep."""
        return EntryStyle(self.key_style, self.bib_fields)

    def store_path(self) -> Path:
        return Path(self.store).expanduser() if self.store else default_store_path()

    @classmethod
    def from_dict(
        cls, data: dict[str, Any] | None, base: Settings | None = None
    ) -> tuple[Settings, list[str]]:
        """Settings from JSON-like data (camelCase or snake_case keys); bad values keep the default."""
        base = base or cls()
        if not data:
            return base, []
        if not isinstance(data, dict):
            return base, [f"citewise settings must be an object, got {type(data).__name__}; using defaults"]
        data = data.get("citewise", data) if isinstance(data.get("citewise"), dict) else data
        known = {f.name: f for f in fields(cls) if f.name != "extra"}
        aliases = {_camel(name): name for name in known}
        changes: dict[str, Any] = {}
        problems: list[str] = []
        for raw_key, value in data.items():
            name = aliases.get(raw_key, raw_key)
            if name not in known:
                problems.append(f"citewise: unknown setting {raw_key!r} ignored")
                continue
            default = getattr(base, name)
            if name == "checks":
                changes[name], bad = _checks(raw_key, value, default)
                problems.extend(bad)
                continue
            ok, converted = _convert(name, value, default)
            if ok:
                changes[name] = converted
                problems.extend(_deprecation(raw_key, value))
            else:
                problems.append(
                    f"citewise: setting {raw_key!r} = {value!r} is invalid ({converted}); using {default!r}"
                )
        return replace(base, **changes), problems


def _deprecation(key: str, value: Any) -> list[str]:
    """The notice for an old value that is still accepted (``prefetch: hatten``), else nothing.

    Why a message and not a silent alias: the old value goes in the next release, and an editor
    shows settings messages to the user (once each), who then knows to change the setting."""
    if _camel(key) == "prefetch" and value in deprecated.PREFETCH_MODES:
        new = deprecated.PREFETCH_MODES[value]
        return [deprecated.notice(f"setting {key!r} = {value!r}", repr(new))]
    return []


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(p.title() for p in rest)


_LIMITS = {
    "k": (1, 500),
    "candidates": (1, 5000),
    "budget_ms": (0, 60000),
    "context_chars": (20, 5000),
    "debounce_ms": (0, 10000),
}


def _checks(raw_key: str, value: Any, default: dict[str, bool]) -> tuple[dict[str, bool], list[str]]:
    """The checks setting merged over ``default``: a code it names is switched on or off, the
    others keep their value; an unknown code or a value other than true/false keeps the default
    and gets a message (each one: the editor shows why that part was ignored)."""
    if not isinstance(value, dict):
        why = "expected an object of check names and true/false"
        return default, [f"citewise: setting {raw_key!r} = {value!r} is invalid ({why}); using {default!r}"]
    out = dict(default)
    problems = []
    for code, on in value.items():
        if code not in CHECK_DEFAULTS:
            why = f"unknown check; the checks are {', '.join(CHECK_DEFAULTS)}"
        elif not isinstance(on, bool):
            why = "expected true or false"
        else:
            out[code] = on
            continue
        kept = f"; using {default[code]!r}" if code in default else "; ignored"
        problems.append(f"citewise: setting {raw_key!r} entry {code!r} = {on!r} is invalid ({why}){kept}")
    return out, problems


def _convert(name: str, value: Any, default: Any) -> tuple[bool, Any]:
    if isinstance(default, bool):
        if isinstance(value, bool):
            return True, value
        return False, "expected true or false"
    if isinstance(default, int):
        if isinstance(value, bool) or not isinstance(value, int | float) or int(value) != value:
            return False, "expected a whole number"
        lo, hi = _LIMITS.get(name, (-(2**31), 2**31))
        if not lo <= value <= hi:
            return False, f"expected {lo}..{hi}"
        return True, int(value)
    if isinstance(default, tuple):
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            return False, "expected a path or a list of paths"
        return True, tuple(value)
    if isinstance(default, str):
        if not isinstance(value, str):
            return False, "expected a string"
        if name == "prefetch":
            return _prefetch(value)
        if name == "bib_fields" and value not in BIB_FIELD_PRESETS:
            return False, f"expected one of {', '.join(BIB_FIELD_PRESETS)}"
        if name == "key_style" and not value:
            return False, "expected a non-empty key style"
        if name == "engine":
            return _engine(value)
        return True, value
    return False, "unsupported type"


def _prefetch(value: str) -> tuple[bool, Any]:
    """A prefetch mode under its current name: ``hatten``, the old name of ``dense``, is accepted
    for one release (``from_dict`` adds the notice)."""
    value = deprecated.PREFETCH_MODES.get(value, value)
    if value not in PREFETCH_MODES:
        return False, f"expected one of {', '.join(PREFETCH_MODES)}"
    return True, value


def _engine(value: str) -> tuple[bool, Any]:
    """An engine spec, checked (the module is imported only for a non-local one: startup cost)."""
    if value.strip() == "local":
        return True, "local"
    from citewise.indexer.engine import EngineError, parse_engine

    try:
        return True, str(parse_engine(value))
    except EngineError as exc:
        return False, str(exc).removeprefix(f"--engine {value}: ")
