"""A plain wheel carries every module under the ``citewise.*`` names (package-dir mapping)."""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

from packaging.requirements import Requirement
from packaging.version import Version

from .conftest import REPO


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


def _installed_setuptools_fits() -> bool:
    try:
        import setuptools
    except ImportError:
        return False
    (req,) = [r for r in _build_requires() if r.name == "setuptools"]
    return req.specifier.contains(Version(setuptools.__version__), prereleases=True)


def test_wheel_contains_all_modules(tmp_path: Path) -> None:
    # The venv's own setuptools when it is recent enough (offline); else an isolated build, which
    # installs what [build-system] asks for.
    args = [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", str(REPO), "-w", str(tmp_path)]
    own = args[:4] + ["--no-build-isolation"] + args[4:]
    proc = subprocess.run(
        own if _installed_setuptools_fits() else args, capture_output=True, text=True, timeout=300
    )
    if proc.returncode != 0 and "No module named" in proc.stderr:
        proc = subprocess.run(args, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    wheel = next(tmp_path.glob("citewise-*.whl"))
    names = set(zipfile.ZipFile(wheel).namelist())
    for folder, package in (("indexer", "indexer"), ("models", "models"), ("server", "server")):
        for module in (REPO / folder).glob("*.py"):
            assert f"citewise/{package}/{module.name}" in names, module
    for module in (REPO / "citewise").glob("*.py"):
        assert f"citewise/{module.name}" in names
    for model in ("dense", "reranker", "static"):  # every shipped model folder
        for shipped in (REPO / "models" / model).glob("*"):
            assert f"citewise/models/{model}/{shipped.name}" in names, f"{shipped} is not packaged"
    entry_points = next(n for n in names if n.endswith("entry_points.txt"))
    assert "citewise = citewise.cli:main" in zipfile.ZipFile(wheel).read(entry_points).decode()


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
