"""Shared fixtures: where the real corpora are, and a store of the whole ACM-CR collection.

Real-data tests skip with a clear message when ``../shared/data`` is absent; everything else
writes its own small files under ``tmp_path``.
"""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
import pytest_asyncio

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = Path(os.environ.get("CITEWISE_SHARED_DATA", REPO.parent / "shared" / "data"))
# A virtual environment with citewise installed from its wheel (not editable): ``.ci/run`` sets it,
# so every test that starts the language server (the pytest-lsp harness, Neovim, eglot, VS Code)
# runs the server that users install. Unset, they run this environment's (editable) install.
INSTALLED = os.environ.get("CITEWISE_INSTALLED")


def citewise_scripts() -> Path:
    """The folder whose ``citewise`` console script the end-to-end tests start."""
    return Path(INSTALLED) / "bin" if INSTALLED else Path(sys.executable).parent


def server_command(*args: str) -> list[str]:
    """``citewise serve ARGS`` as an editor starts it: the console script, never ``python -m`` from
    the checkout (which would import the checkout's folders instead of the installed package)."""
    script = citewise_scripts() / "citewise"
    if not script.exists():
        pytest.skip(f"no citewise console script in {script.parent} (pip install -e . there)")
    return [str(script), "serve", *args]


ACM_DL = SHARED_DATA / "acm-cr" / "acm-dl"
ACM_DEV = SHARED_DATA / "acm-cr" / "dev"
ACM_BLACKLIST = SHARED_DATA / "acm-cr" / "blacklist.txt"
ACL_XML = SHARED_DATA / "acl-anthology" / "xml"


def require(path: Path) -> Path:
    """Skip the test, saying what is missing, when a real corpus is not on this machine."""
    if not path.exists():
        pytest.skip(f"real data not found at {path} (see shared/data/README.md); skipping")
    return path


@pytest.fixture(scope="session")
def acm_store(tmp_path_factory):
    """A store of the full ACM-CR collection with its BM25 index, built once per test session."""
    require(ACM_DL)
    from citewise.indexer import bm25_files
    from citewise.indexer.importer import import_sources
    from citewise.indexer.store import Store

    cached = os.environ.get("CITEWISE_TEST_ACM_STORE")
    if cached and Path(cached).exists():
        store = Store(cached)
        store.import_stats = None  # type: ignore[attr-defined]
    else:
        store = Store(tmp_path_factory.mktemp("acm") / "acm.sqlite")
        store.import_stats = import_sources(store, [ACM_DL])  # type: ignore[attr-defined]
    bm25_files.load_or_build(store)
    return store


# CI replays a fixed set of examples (derandomized), so a landing never depends on a lucky seed;
# local runs keep exploring new examples.
from hypothesis import settings as _hypothesis_settings  # noqa: E402

_hypothesis_settings.register_profile("ci", derandomize=True, deadline=None, print_blob=True)
if os.environ.get("CI"):
    _hypothesis_settings.load_profile("ci")


@pytest.fixture(scope="session")
def built_wheel(tmp_path_factory) -> Path:
    """The wheel under test: ``$CITEWISE_WHEEL`` (``.ci/run`` builds it), else built here from an sdist."""
    from .installed import build_wheel

    given = os.environ.get("CITEWISE_WHEEL")
    return Path(given) if given else build_wheel(tmp_path_factory.mktemp("dist"))


@pytest.fixture(scope="session")
def installed_env(tmp_path_factory, built_wheel: Path) -> Path:
    """A virtual environment with citewise installed from the wheel, not editable."""
    from .installed import install_wheel

    if INSTALLED:
        return Path(INSTALLED)
    return install_wheel(built_wheel, tmp_path_factory.mktemp("installed") / "venv")


# -- a real ACM-CR store for the language server's end-to-end tests ----------------------------------
# Every LSP feature module ends with tests on it, and the Neovim and ``citewise suggest``/``serve``
# tests serve it too. The sessions come from tests/lsp_harness.py (imported in the fixtures: the
# harness imports this module). Sessions are function-scoped but run on the module's event loop,
# as the feature modules' tests do (``pytestmark = pytest.mark.asyncio(loop_scope="module")``).

if TYPE_CHECKING:
    from .lsp_harness import Session


@pytest.fixture(scope="session")
def lsp_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """SIGIR 2015-2019 and CHIIR from ACM-CR (~1,600 real papers) with the BM25 index, built once per
    test session: big enough that ranking, reindex progress and its cancellation are real."""
    require(ACM_DL)
    from citewise.indexer import bm25_files
    from citewise.indexer.importer import import_sources
    from citewise.indexer.store import Store

    path = tmp_path_factory.mktemp("lsp-store") / "papers.sqlite"
    store = Store(path)
    files = sorted((ACM_DL / "sigir").glob("sigir-201[5-9].bib")) + sorted((ACM_DL / "chiir").glob("*.bib"))
    import_sources(store, files)
    bm25_files.load_or_build(store)
    store.close()
    return path


@pytest.fixture
def acm_workspace(tmp_path: Path, lsp_store: Path) -> Path:
    """A workspace with the ACM draft and its .bib, and a private copy of the store (tests import into it)."""
    from .lsp_harness import make_acm_workspace

    return make_acm_workspace(tmp_path, lsp_store)


@pytest_asyncio.fixture(params=["visual-studio-code", "neovim"], loop_scope="module")
async def acm_lsp(request: pytest.FixtureRequest, acm_workspace: Path) -> AsyncIterator[Session]:
    """A session on the ACM store with VS Code's and with Neovim's client capabilities: they differ
    in lazily resolved documentation, ``documentChanges``/``CreateFile`` and file watchers."""
    from .lsp_harness import start_on_acm, stop

    session = await start_on_acm(acm_workspace, request.param)
    yield session
    await stop(session)


@pytest_asyncio.fixture(loop_scope="module")
async def acm_vscode(acm_workspace: Path) -> AsyncIterator[Session]:
    """A VS Code-like session on the ACM store, for tests that change the workspace or the store."""
    from .lsp_harness import start_on_acm, stop

    session = await start_on_acm(acm_workspace)
    yield session
    await stop(session)


@pytest.fixture(scope="module")
def acm_shared_workspace(tmp_path_factory: pytest.TempPathFactory, lsp_store: Path) -> Path:
    """One workspace for a module's read-only tests (each opens its own document)."""
    from .lsp_harness import make_acm_workspace

    return make_acm_workspace(tmp_path_factory.mktemp("shared"), lsp_store, draft=False)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def acm_shared(acm_shared_workspace: Path) -> AsyncIterator[Session]:
    """One VS Code-like session per module for the read-only tests: a server start costs seconds."""
    from .lsp_harness import start_on_acm, stop

    session = await start_on_acm(acm_shared_workspace)
    yield session
    await stop(session)
