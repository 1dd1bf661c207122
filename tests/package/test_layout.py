"""The layout shows the jobs: imports run one way between them, with no cycles, and nothing that
ships reaches into the checkout (``training/``, ``bench/``, ``../shared``).

Read from the source with ``ast`` (function-level imports included: a lazy import is still a
dependency), over the folders ``setup.py`` puts into the wheel.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

from ..conftest import REPO
from ..installed import package_roots

# What each job may import from the others (its own modules always). ``shared`` is the package's
# own ``__init__`` and the old-name notices (``citewise.deprecated``); ``settings`` is the one typed
# settings model (it checks an engine spec with the indexer).
ALLOWED = {
    "indexer": {"shared"},
    "settings": {"shared", "indexer"},
    "models": {"shared", "settings", "indexer"},
    "evaluation": {"shared", "settings", "indexer", "models"},
    "server": {"shared", "settings", "indexer", "models"},
    "cli": {"shared", "settings", "indexer", "models", "evaluation", "server"},
    "shared": {"shared"},
}
# No cycle is allowed: the Milvus engine's factory lives beside it (indexer/engine_milvus.py).
DOCUMENTED_CYCLES: list[set[str]] = []
JOBS = ("server", "indexer", "models", "evaluation")


def modules() -> dict[str, Path]:
    """Every module of the wheel by its installed name."""
    out = {}
    for package, folder in package_roots().items():
        for path in (REPO / folder).rglob("*.py"):
            parts = list(path.relative_to(REPO / folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join([package, *parts])] = path
    return out


def job(module: str) -> str:
    parts = module.split(".")
    if parts[0] != "citewise":
        return parts[0]  # training, bench, or a third-party library
    if len(parts) > 1 and parts[1] in JOBS:
        return parts[1]
    if len(parts) > 1 and parts[1] == "settings":
        return "settings"
    return "cli" if len(parts) > 1 and parts[1].startswith(("cli", "__main__")) else "shared"


def imports(name: str, path: Path) -> Iterator[str]:
    """Absolute names of what ``path`` imports (``from x import y`` yields x and x.y)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            yield from (a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            yield mod
            yield from (f"{mod}.{a.name}" for a in node.names)


def graph() -> dict[str, set[str]]:
    mods = modules()
    return {name: {m for m in imports(name, path) if m in mods and m != name} for name, path in mods.items()}


def cycles(edges: dict[str, set[str]]) -> list[set[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[set[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = set()
            while True:
                w = stack.pop()
                comp.add(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(comp)

    for v in edges:
        if v not in index:
            visit(v)
    return found


def test_no_import_cycle() -> None:
    found = cycles(graph())
    assert all(c in DOCUMENTED_CYCLES for c in found), [
        sorted(c) for c in found if c not in DOCUMENTED_CYCLES
    ]


def test_imports_run_one_way_between_the_jobs() -> None:
    """indexer <- models <- (evaluation, server) <- cli; nothing shipped imports training or bench."""
    wrong = []
    for name, path in modules().items():
        for target in imports(name, path):
            a, b = job(name), job(target)
            if (
                b in (*JOBS, "cli", "shared", "settings", "training", "bench")
                and a != b
                and b not in ALLOWED[a]
            ):
                wrong.append(f"{name} ({a}) imports {target} ({b})")
    # The CLI's deprecated `citewise train` forwards to a checkout's training/ when it is importable.
    wrong = [w for w in wrong if not w.startswith("citewise.cli (cli) imports training")]
    assert not wrong, "\n".join(sorted(set(wrong)))


def test_nothing_shipped_reaches_into_the_checkout() -> None:
    """No module of the wheel puts folders on sys.path or looks for ../shared data beside itself."""
    bad = []
    for name, path in modules().items():
        text = path.read_text(encoding="utf-8")
        for needle in ("sys.path.insert", "sys.path.append", '"shared" / "data"', "../shared"):
            if needle in text:
                bad.append(f"{name}: {needle}")
    assert not bad, bad


def test_the_checks_see_what_they_check() -> None:
    """The graph holds the server's handlers and a known edge, and the cycle finder finds a cycle."""
    edges = graph()
    assert "citewise.server.handlers.completion" in edges
    assert "citewise.models.recommender" in edges["citewise.server.state"] | edges["citewise.server.jobs"]
    assert cycles({"a": {"b"}, "b": {"a"}, "c": set()}) == [{"a", "b"}]


def test_training_does_not_import_bench() -> None:
    """Training code is run as ``python -m training...``; what it needs of a benchmark's logic lives in
    ``citewise.evaluation``, so training works without ``bench/`` on the path."""
    bad = []
    for path in sorted((REPO / "training").rglob("*.py")):
        name = "training." + ".".join(path.relative_to(REPO / "training").with_suffix("").parts)
        bad += [f"{name}: {m}" for m in imports(name, path) if m == "bench" or m.startswith("bench.")]
    assert not bad, bad
