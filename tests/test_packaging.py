"""A plain wheel carries every module under the ``citewise.*`` names (package-dir mapping)."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

from .conftest import REPO


def test_wheel_contains_all_modules(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", str(REPO), "-w", str(tmp_path)],
        capture_output=True, text=True, timeout=300,
    )
    if proc.returncode != 0 and "No module named" in proc.stderr:
        proc = subprocess.run(
            [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", str(REPO), "-w", str(tmp_path)],
            capture_output=True, text=True, timeout=300,
        )
    assert proc.returncode == 0, proc.stderr[-2000:]
    wheel = next(tmp_path.glob("citewise-*.whl"))
    names = set(zipfile.ZipFile(wheel).namelist())
    for folder, package in (("indexer", "indexer"), ("models", "models"), ("server", "server")):
        for module in (REPO / folder).glob("*.py"):
            assert f"citewise/{package}/{module.name}" in names, module
    for module in (REPO / "citewise").glob("*.py"):
        assert f"citewise/{module.name}" in names
    for shipped in (REPO / "models" / "default").glob("*"):
        assert f"citewise/models/default/{shipped.name}" in names, f"{shipped} is not packaged"
    entry_points = next(n for n in names if n.endswith("entry_points.txt"))
    assert "citewise = citewise.cli:main" in zipfile.ZipFile(wheel).read(entry_points).decode()
