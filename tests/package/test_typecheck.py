"""Type checking in CI: .ci/typecheck.py builds the installed layout from setup.py's ROOTS and runs mypy on it."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from types import ModuleType

import pytest

from ..conftest import REPO

SCRIPT = REPO / ".ci" / "typecheck.py"


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("ci_typecheck", SCRIPT)
    assert spec and spec.loader, f"{SCRIPT} cannot be loaded"
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_ci_runs_the_type_check() -> None:
    """CI calls the script with its own environment and stops on a failure (``set -e``)."""
    run = (REPO / ".ci" / "run").read_text()
    assert "set -euo pipefail" in run
    assert re.search(r"^\.ci-venv/bin/python \.ci/typecheck\.py\s*$", run, re.M), "CI does not type-check"
    config = (REPO / "pyproject.toml").read_text()
    assert "[tool.mypy]" in config and re.search(r'"mypy==[\d.]+"', config), "mypy is not pinned in [test]"


def _mapped_repo(root: Path) -> None:
    """A checkout laid out like citewise's: ``pkg.sub`` lives in ``sub/``, and ``sub/bad.py`` is wrong."""
    (root / "setup.py").write_text('ROOTS = {"pkg": "pkg", "pkg.sub": "sub"}\n')
    (root / "pyproject.toml").write_text('[tool.mypy]\npython_version = "3.11"\n')
    (root / "pkg").mkdir()
    (root / "pkg" / "__init__.py").write_text("")
    (root / "pkg" / "uses.py").write_text("from pkg.sub.good import half\n\nHALF: float = half(3)\n")
    (root / "sub").mkdir()
    (root / "sub" / "__init__.py").write_text("")
    (root / "sub" / "good.py").write_text("def half(n: int) -> float:\n    return n / 2\n")
    (root / "sub" / "bad.py").write_text('COUNT: int = "three"\n')


def test_mapped_folders_are_checked_and_reported_at_their_checkout_path(tmp_path: Path) -> None:
    """The recipe itself on a small tree: ``pkg.sub`` is found through the layout the script builds
    (``pkg/uses.py`` imports it without a missing-import error), its error is reported at
    ``sub/bad.py`` where an editor finds the file, and the status is mypy's failure."""
    if importlib.util.find_spec("mypy") is None:
        pytest.skip("mypy is not installed: pip install -e '.[test]'")
    _mapped_repo(tmp_path)
    status, lines, stderr = _script().check(tmp_path, [])
    report = "\n".join(lines)
    assert status == 1, report + stderr
    assert re.search(r"^sub/bad\.py:1: error: Incompatible types in assignment", report, re.M), report
    assert "import" not in report, report  # pkg.sub resolved: no missing-module error
    (tmp_path / "sub" / "bad.py").write_text("COUNT: int = 3\n")
    status, lines, stderr = _script().check(tmp_path, [])
    assert status == 0, "\n".join(lines) + stderr
    assert (tmp_path / ".mypy_cache" / "tree" / "pkg" / "sub").is_symlink()


def test_a_root_added_to_setup_py_is_checked_without_editing_the_script(tmp_path: Path) -> None:
    """ROOTS is read, not copied: a new mapped folder joins the tree, nested under its parent."""
    _mapped_repo(tmp_path)
    (tmp_path / "setup.py").write_text('ROOTS = {"pkg": "pkg", "pkg.sub": "sub", "pkg.more": "more"}\n')
    (tmp_path / "more").mkdir()
    tree = tmp_path / "tree"
    script = _script()
    script.build_tree(script.package_roots(tmp_path / "setup.py"), tmp_path, tree)
    assert (tree / "pkg" / "more").resolve() == (tmp_path / "more").resolve()
    assert (tree / "pkg" / "uses.py").resolve() == (tmp_path / "pkg" / "uses.py").resolve()
    assert script.to_checkout_path("pkg/more/x.py:2: error: e", {"pkg": "pkg", "pkg.more": "more"}) == (
        "more/x.py:2: error: e"
    )
