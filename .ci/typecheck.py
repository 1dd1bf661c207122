"""Type-check the ``citewise`` package with mypy, as it is laid out once installed.

The checkout does not have the installed layout: ``setup.py``'s ROOTS map ``citewise.server`` to
``server/``, ``citewise.indexer`` to ``indexer/`` and so on, so mypy run on the checkout cannot
find ``citewise.server``. This script builds that layout from symlinks (``citewise/`` with the
CLI's files and ``server``, ``indexer``, ... beside them), read from ROOTS rather than copied so a
new root is checked without editing this file, and runs ``mypy -p citewise`` on it with the
``[tool.mypy]`` settings of pyproject.toml. Reported paths are mapped back to the checkout's
(``server/ranking.py``, not ``citewise/server/ranking.py``) so an editor can jump to them.

The tree lives under ``.mypy_cache/`` at a fixed place, so mypy's incremental cache (also there)
stays valid from one run to the next: a first run takes minutes, later ones seconds.

Usage: ``python .ci/typecheck.py [extra mypy arguments]``; ``--module citewise.errors`` checks
one module instead of the whole package. Exits with mypy's status.
"""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SKIP = {"__pycache__"}


def package_roots(setup_py: Path) -> dict[str, str]:
    """``setup.py``'s ROOTS (package -> folder), read without running setup.py (it builds)."""
    for node in ast.parse(setup_py.read_text()).body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "ROOTS":
            return ast.literal_eval(node.value)
    raise SystemExit(f"typecheck: {setup_py} has no ROOTS; the installed layout cannot be built")


def build_tree(roots: dict[str, str], repo: Path, tree: Path) -> None:
    """The installed layout under ``tree``: a package that holds another root is a real folder of
    links to its entries (the nested root's link added beside them); any other root is one link."""
    if tree.exists():
        shutil.rmtree(tree)
    tree.mkdir(parents=True)
    names = sorted(roots, key=lambda n: n.count("."))
    for name in names:
        target = tree.joinpath(*name.split("."))
        source = repo / roots[name]
        if not any(other.startswith(name + ".") for other in names):
            target.symlink_to(source, target_is_directory=True)
            continue
        target.mkdir()
        for entry in source.iterdir():
            if entry.name not in SKIP:
                (target / entry.name).symlink_to(entry)


def to_checkout_path(line: str, roots: dict[str, str]) -> str:
    """``citewise/server/x.py:3: error`` -> ``server/x.py:3: error`` (the deepest root wins)."""
    for name in sorted(roots, key=lambda n: -n.count(".")):
        prefix = name.replace(".", "/") + "/"
        if line.startswith(prefix):
            folder = roots[name].rstrip("/")
            return f"{folder}/{line[len(prefix) :]}"
    return line


def check(repo: Path, argv: list[str]) -> tuple[int, list[str], str]:
    """mypy on ``repo``'s package as installed: (exit status, report lines in checkout paths, stderr).
    The package checked is ROOTS' top one (``citewise``); ``--module NAME`` checks one module."""
    roots = package_roots(repo / "setup.py")
    cache = repo / ".mypy_cache"
    tree = cache / "tree"
    build_tree(roots, repo, tree)
    top = min(roots, key=lambda n: n.count("."))
    target = ["-p", top]
    if argv[:1] == ["--module"] and len(argv) > 1:
        target, argv = ["-m", argv[1]], argv[2:]
    cmd = [sys.executable, "-m", "mypy", "--config-file", str(repo / "pyproject.toml")]
    cmd += ["--cache-dir", str(cache), *target, *argv]
    env = {**os.environ, "MYPYPATH": str(tree)}
    proc = subprocess.run(cmd, cwd=tree, env=env, capture_output=True, text=True)
    return proc.returncode, [to_checkout_path(line, roots) for line in proc.stdout.splitlines()], proc.stderr


def main(argv: list[str]) -> int:
    status, lines, stderr = check(REPO, argv)
    print("\n".join(lines))
    sys.stderr.write(stderr)
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
