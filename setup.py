"""Package discovery for the wheel: every Python package under the folders that make up ``citewise``.

The product's top-level folders (``server/``, ``indexer/``, ``models/``, ``evaluation/``, beside the
CLI in ``citewise/``) map into one ``citewise`` package. setuptools' own ``find`` cannot remap
folder names, and a hand-kept list once left ``citewise.server.handlers`` out of the wheel (the
server could not start), so the list is built here from the tree: every folder holding a module
is a package, and a folder with modules but no ``__init__.py`` stops the build instead of being
silently left out. ``training/``, ``bench/`` and ``tests/`` are not mapped: they never ship.
"""

from __future__ import annotations

from pathlib import Path

from setuptools import setup

ROOTS = {
    "citewise": "citewise",
    "citewise.server": "server",
    "citewise.indexer": "indexer",
    "citewise.models": "models",
    "citewise.evaluation": "evaluation",
}
SKIP = {"__pycache__", "node_modules"}


def discover(roots: dict[str, str]) -> tuple[list[str], dict[str, str]]:
    """(packages, package_dir) for every folder under ``roots`` that holds Python modules."""
    here = Path(__file__).resolve().parent
    packages, package_dir = [], {}
    for package, folder in roots.items():
        base = here / folder
        for init in sorted(base.rglob("*.py")):
            d = init.parent
            if any(part in SKIP for part in d.relative_to(base).parts):
                continue
            if not (d / "__init__.py").is_file():
                raise SystemExit(f"setup.py: {d.relative_to(here)} holds modules but no __init__.py; add one")
            name = ".".join([package, *d.relative_to(base).parts])
            if name not in package_dir:
                packages.append(name)
                package_dir[name] = str(d.relative_to(here))
    return packages, package_dir


packages, package_dir = discover(ROOTS)
setup(packages=packages, package_dir=package_dir)
