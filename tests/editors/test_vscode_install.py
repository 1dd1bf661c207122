"""The VS Code extension that ships inside the Python package: fresh, and installed by one command.

``citewise/editors/citewise.vsix`` is committed so that an install without Node carries the
extension; these tests keep it equal to a fresh ``npm run package`` of ``client-vscode/`` and install it
with ``citewise vscode install`` into a real code-server (the one the end-to-end test uses).
"""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from ..conftest import REPO
from .test_vscode_e2e import E2E_CACHE, newest_vsix

SHIPPED = REPO / "citewise" / "editors" / "citewise.vsix"
# What a vsix holds that comes from our sources (the rest is vsce's manifest, stamped per build).
CONTENT = (
    "extension/package.json",
    "extension/out/extension.js",
    "extension/readme.md",
    "extension/LICENSE.txt",
)
REFRESH = (
    "cd client-vscode && npm ci && npm run package && cp citewise-*.vsix ../citewise/editors/citewise.vsix"
)


def citewise(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "citewise", *args], capture_output=True, text=True, timeout=300, env=env
    )


def test_the_shipped_extension_is_the_current_build() -> None:
    """Equal, file by file, to the newest ``npm run package`` of ``client-vscode/`` (CI builds it
    before the tests); a change to the extension without refreshing the shipped copy fails here."""
    fresh = newest_vsix()
    if fresh is None:
        pytest.skip(f"no client-vscode/citewise-*.vsix to compare with: {REFRESH}")
    shipped, built = zipfile.ZipFile(SHIPPED), zipfile.ZipFile(fresh)
    for name in CONTENT:
        assert shipped.read(name) == built.read(name), (
            f"{SHIPPED.name}: {name} is stale; refresh it: {REFRESH}"
        )


def test_install_into_code_server(tmp_path: Path) -> None:
    """``citewise vscode install`` with VS Code's own installer (code-server's, here)."""
    code_server = E2E_CACHE / "node_modules" / ".bin" / "code-server"
    if not code_server.exists():
        pytest.skip(f"code-server not found at {code_server}; run .ci/vscode-e2e-setup")
    extensions = tmp_path / "extensions"
    env = {**os.environ, "HOME": str(tmp_path / "home"), "XDG_DATA_HOME": str(tmp_path / "data")}
    proc = citewise(
        "vscode", "install", "--code", str(code_server), "--extensions-dir", str(extensions), env=env
    )
    assert proc.returncode == 0, proc.stderr
    assert "installed the citewise extension" in proc.stdout
    (installed,) = [p for p in extensions.iterdir() if p.name.startswith("citewise.citewise-")]
    assert (installed / "out" / "extension.js").read_bytes() == zipfile.ZipFile(SHIPPED).read(
        "extension/out/extension.js"
    )


def test_without_an_editor_on_path_it_says_what_to_do(tmp_path: Path) -> None:
    proc = citewise("vscode", "install", env={**os.environ, "PATH": str(tmp_path)})
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert "no VS Code command on PATH" in proc.stderr and "Install from VSIX" in proc.stderr
    assert str(SHIPPED) in proc.stderr
