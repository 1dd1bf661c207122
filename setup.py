"""Package discovery for the wheel: every Python package under the folders that make up ``citewise``.

The product's top-level folders (``server/``, ``indexer/``, ``models/``, ``evaluation/``, beside the
CLI in ``citewise/``) map into one ``citewise`` package. setuptools' own ``find`` cannot remap
folder names, and a hand-kept list once left ``citewise.server.handlers`` out of the wheel (the
server could not start), so the list is built here from the tree: every folder holding a module
is a package, and a folder with modules but no ``__init__.py`` stops the build instead of being
silently left out. A folder of data only (the shipped models, the packaged VS Code extension) is
a package of data, all its files included, as setuptools asks of every folder Python could import.
``training/``, ``bench/`` and ``tests/`` are not mapped: they never ship.
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


def discover(roots: dict[str, str]) -> tuple[list[str], dict[str, str], dict[str, list[str]]]:
    """(packages, package_dir, package_data) for every folder under ``roots``: a folder of
    modules is a package (it must have ``__init__.py``), a folder of data files a data package."""
    here = Path(__file__).resolve().parent
    packages, package_dir, package_data = [], {}, {}
    for package, folder in roots.items():
        base = here / folder
        if not base.is_dir():  # a partial tree (the build's own test); the wheel test sees the rest
            continue
        for d in sorted([base, *(p for p in base.rglob("*") if p.is_dir())]):
            rel = d.relative_to(base).parts
            if any(part in SKIP or part.startswith(".") for part in rel):
                continue
            files = [f for f in d.iterdir() if f.is_file()]
            if not files:
                continue
            modules = [f for f in files if f.suffix == ".py"]
            if modules and not (d / "__init__.py").is_file():
                raise SystemExit(f"setup.py: {d.relative_to(here)} holds modules but no __init__.py; add one")
            name = ".".join([package, *rel])
            packages.append(name)
            package_dir[name] = str(d.relative_to(here))
            package_data[name] = ["py.typed"] if modules else ["*"]
    return packages, package_dir, package_data


packages, package_dir, package_data = discover(ROOTS)
setup(packages=packages, package_dir=package_dir, package_data=package_data)
