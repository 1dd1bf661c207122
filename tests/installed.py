"""The wheel, built from this checkout, and a virtual environment it is installed in (not editable).

``.ci/run`` builds the sdist and the wheel once, installs the wheel with its dependencies into a
fresh virtual environment and names both (``CITEWISE_WHEEL``, ``CITEWISE_INSTALLED``). Without
them (README set-up command 2 on a developer's machine) the tests build the wheel from an sdist
themselves and install it, offline, into a new environment whose dependencies come from this one:
its ``site-packages`` is added by a ``.pth`` line, which Python reads without running that folder's
own ``.pth`` files, so this checkout's editable finder is not inherited.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def package_roots() -> dict[str, str]:
    """``setup.py``'s ROOTS (package -> folder): what the wheel is made of, read, not copied."""
    tree = ast.parse((REPO / "setup.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "ROOTS":
            return ast.literal_eval(node.value)
    raise AssertionError("setup.py has no ROOTS")


def build_wheel(out: Path) -> Path:
    """sdist, then the wheel from that sdist (as PyPI users get it), with this environment's
    setuptools (offline)."""
    proc = subprocess.run(
        [sys.executable, "-m", "build", "--no-isolation", "--outdir", str(out), str(REPO)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return next(out.glob("citewise-*.whl"))


def install_wheel(wheel: Path, env_dir: Path) -> Path:
    """A new virtual environment with ``wheel`` installed (no deps: they come from this one)."""
    venv.EnvBuilder(with_pip=True).create(env_dir)
    python = env_dir / "bin" / "python"
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    (Path(site) / "citewise-test-deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    proc = subprocess.run(
        [str(python), "-m", "pip", "install", "-q", "--no-deps", "--no-index", str(wheel)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return env_dir


def clean_env(**extra: str) -> dict[str, str]:
    """The environment a user's shell gives the installed ``citewise``: no PYTHONPATH into the checkout."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    return {**env, **extra}
