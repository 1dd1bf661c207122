"""The wheel: every module of the product, the shipped models and extension, and nothing else."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

from packaging.requirements import Requirement
from packaging.version import Version

from ..conftest import REPO
from ..installed import package_roots


def _build_requires() -> list[Requirement]:
    data = tomllib.loads((REPO / "pyproject.toml").read_text())
    return [Requirement(r) for r in data["build-system"]["requires"]]


def test_build_requirement_covers_the_license_expression() -> None:
    """``license = "MIT"`` (an SPDX string, PEP 639) needs setuptools 77; an older one fails the build."""
    data = tomllib.loads((REPO / "pyproject.toml").read_text())
    if not isinstance(data["project"].get("license"), str):
        return
    (setuptools,) = [r for r in _build_requires() if r.name == "setuptools"]
    assert not setuptools.specifier.contains(Version("76.9")), setuptools
    assert setuptools.specifier.contains(Version("77.0.0")), setuptools


# Never in the wheel: training and export (torch), the GPU-trip helpers, benchmarks, tests.
NOT_SHIPPED = ("training/", "bench/", "tests/", "client-vscode/")
NOT_SHIPPED_MODULES = ("_train", "_export", "_transfer", "_distill", "train_configs", "gpu_", "hatten_data")


def test_wheel_contains_every_module_and_nothing_else(built_wheel: Path) -> None:
    """Every module under every folder that makes up ``citewise`` (subfolders too: a hand-kept
    package list once left ``citewise.server.handlers`` out and the server could not start), the
    shipped models and the VS Code extension; no training code, benchmarks or GPU-trip helpers."""
    names = set(zipfile.ZipFile(built_wheel).namelist())
    expected = set()
    for package, folder in package_roots().items():
        for module in (REPO / folder).rglob("*.py"):
            if "__pycache__" in module.parts:
                continue
            rel = module.relative_to(REPO / folder).as_posix()
            expected.add(f"{package.replace('.', '/')}/{rel}")
    assert not expected - names, f"missing from the wheel: {sorted(expected - names)}"
    shipped_py = {n for n in names if n.endswith(".py")}
    assert not shipped_py - expected, f"in the wheel but not in the tree: {sorted(shipped_py - expected)}"
    for model in ("dense", "reranker", "static"):  # every shipped model folder
        for shipped in (REPO / "models" / model).glob("*"):
            assert f"citewise/models/{model}/{shipped.name}" in names, f"{shipped} is not packaged"
    assert "citewise/editors/citewise.vsix" in names, "the VS Code extension is not packaged"
    leaked = [
        n for n in names if n.startswith(NOT_SHIPPED) or any(s in Path(n).stem for s in NOT_SHIPPED_MODULES)
    ]
    assert not leaked, f"training, benchmark or GPU-trip code in the wheel: {leaked}"
    entry_points = next(n for n in names if n.endswith("entry_points.txt"))
    assert "citewise = citewise.cli:main" in zipfile.ZipFile(built_wheel).read(entry_points).decode()


def test_a_folder_of_modules_without_init_stops_the_build(tmp_path: Path) -> None:
    """Discovery cannot silently skip a folder: one with modules but no ``__init__.py`` is an error."""
    (tmp_path / "server" / "handlers").mkdir(parents=True)
    (tmp_path / "server" / "__init__.py").write_text("")
    (tmp_path / "server" / "handlers" / "completion.py").write_text("")
    shutil.copy(REPO / "setup.py", tmp_path / "setup.py")
    probe = (
        "import runpy, setuptools; setuptools.setup = lambda **kw: print(sorted(kw['packages'])); "
        "runpy.run_path('setup.py')"
    )
    proc = subprocess.run(
        [sys.executable, "-c", probe], cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode != 0
    assert "server/handlers holds modules but no __init__.py" in proc.stderr + proc.stdout
    (tmp_path / "server" / "handlers" / "__init__.py").write_text("")
    proc = subprocess.run(
        [sys.executable, "-c", probe], cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    assert "'citewise.server.handlers'" in proc.stdout


def test_shipped_models_are_small_intact_and_described() -> None:
    """Each shipped model folder: files under the 40 MB rule, hashes as its manifest lists them
    (``verify_model``, which also checks a static model's query model), and its dev figures."""
    from citewise.models import dense_index

    for name in ("dense", "reranker", "static"):
        folder = REPO / "models" / name
        manifest = json.loads((folder / "manifest.json").read_text())
        assert manifest.get("dev"), f"{folder}: no dev figures in the manifest"
        for f in folder.iterdir():
            assert f.stat().st_size < 40 * 1024 * 1024, f"{f} is over 40 MB"
        if name != "reranker":  # the reranker's own loader checks its files (models/reranker.py)
            dense_index.verify_model(folder)
