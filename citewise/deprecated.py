"""Old names that keep working for one release, each with a one-line notice given once per process.

Issue 24: the shipped dense model is a MiniLM bi-encoder, yet users met it as "hatten" (a prefetch
mode, an environment variable, the ``<store>.hatten/`` index folder). The new names are ``dense``,
``CITEWISE_DENSE_MODEL`` and ``<store>.dense/``. Every old name a user may still type, have in a
settings file or on disk is listed here, so the next release drops them by deleting this module and
its few callers. The notice goes to stderr once per process (not on every keystroke or query),
which is where the CLI talks to a person and where editors collect a language server's log.

Leaf module (standard library only): the CLI, the settings, the indexer and the models all use it,
and it imports none of them, so it adds no cycle and no start-up cost.
"""

from __future__ import annotations

import os
import sys
import threading

# old value of ``--prefetch`` / the ``prefetch`` setting -> the new one
PREFETCH_MODES: dict[str, str] = {"hatten": "dense"}
# new environment variable -> the old one it replaces
ENV_VARS: dict[str, str] = {"CITEWISE_DENSE_MODEL": "CITEWISE_HATTEN_MODEL"}
# the old suffix of the dense index folder beside a store (now ``<store>.dense/``)
OLD_INDEX_SUFFIX = ".hatten"

_told: set[str] = set()
_lock = threading.Lock()


def notice(old: str, new: str) -> str:
    """The one-line deprecation notice (also what the language server shows for a setting)."""
    return f"citewise: {old} is deprecated, use {new} instead (the old name still works in this release)"


def warn_once(message: str) -> bool:
    """Print ``message`` (one line) to stderr the first time it is given in this process; True then.

    Why once: the server re-reads its settings and reopens the dense index often; repeating the
    line would bury the editor's log without telling the user anything new."""
    with _lock:
        if message in _told:
            return False
        _told.add(message)
    print(message, file=sys.stderr, flush=True)
    return True


def prefetch_mode(mode: str, where: str = "--prefetch") -> str:
    """``mode`` under its current name (``hatten`` -> ``dense``, with the notice); other values as given.

    ``where`` names what the user wrote (``--prefetch``), so the notice says what to change."""
    new = PREFETCH_MODES.get(mode)
    if new is None:
        return mode
    warn_once(notice(f"{where} {mode}", f"{where} {new}"))
    return new


def env(name: str) -> str | None:
    """The environment variable ``name``, else the old variable it replaces (with the notice).

    The old one is announced whenever it is set, even when the new one wins, since it will stop
    working in the next release either way."""
    old = ENV_VARS[name]
    old_value = os.environ.get(old)
    if old_value is not None:
        warn_once(notice(old, name))
    return os.environ.get(name) or old_value or None
