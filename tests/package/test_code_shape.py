"""Code shape (issue 18): no function over 60 lines outside the tests.

A long function is one a reader has to hold in their head whole; past a screenful the pieces
want names. ``ruff`` checks branching (C901 at 15, in ``pyproject.toml``) but has no length rule,
so length is checked here with ``ast``: from the ``def`` line to the function's last line,
decorators excluded, nested functions and methods counted on their own (and inside their parent).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CHECKED_DIRS = ("citewise", "server", "indexer", "models", "bench", "evaluation", "training")
MAX_LINES = 60

# Functions allowed past MAX_LINES, as "path::qualified.name". Keep this empty but for a reason.
ALLOWED: frozenset[str] = frozenset()


def function_lengths(path: Path) -> Iterator[tuple[str, int, int]]:
    """``(qualified name, first line, length in lines)`` of every function and method in ``path``."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))

    def walk(node: ast.AST, prefix: str) -> Iterator[tuple[str, int, int]]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                assert child.end_lineno is not None
                yield prefix + child.name, child.lineno, child.end_lineno - child.lineno + 1
                yield from walk(child, f"{prefix}{child.name}.")
            elif isinstance(child, ast.ClassDef):
                yield from walk(child, f"{prefix}{child.name}.")
            else:
                yield from walk(child, prefix)

    yield from walk(tree, "")


def long_functions() -> dict[str, str]:
    """Every function over MAX_LINES in the checked folders: ``path::name`` -> where and how long."""
    found = {}
    for folder in CHECKED_DIRS:
        for path in sorted((REPO / folder).rglob("*.py")):
            rel = path.relative_to(REPO).as_posix()
            for name, line, length in function_lengths(path):
                if length > MAX_LINES:
                    found[f"{rel}::{name}"] = f"{rel}:{line} {name} is {length} lines"
    return found


def test_no_function_over_60_lines() -> None:
    too_long = {k: v for k, v in long_functions().items() if k not in ALLOWED}
    assert not too_long, (
        f"functions over {MAX_LINES} lines (extract helpers with names that say what they do):\n"
        + "\n".join(sorted(too_long.values()))
    )


def test_allow_list_is_not_stale() -> None:
    """An entry whose function is now short (or gone) must go, so the list only shrinks."""
    stale = ALLOWED - long_functions().keys()
    assert not stale, f"remove from ALLOWED in {Path(__file__).name}: {sorted(stale)}"


def test_lengths_count_from_def_to_last_line(tmp_path: Path) -> None:
    """The counting itself: decorators excluded, methods and nested functions named by their parents."""
    src = tmp_path / "m.py"
    src.write_text(
        "@decorator\n"
        "def f():\n"
        "    def inner():\n"
        "        return 1\n"
        "    return inner\n"
        "\n"
        "class C:\n"
        "    async def m(self):\n"
        "        pass\n"
    )
    assert list(function_lengths(src)) == [("f", 2, 4), ("f.inner", 3, 2), ("C.m", 8, 2)]
