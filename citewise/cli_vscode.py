"""``citewise vscode``: the VS Code extension that ships inside the Python package, without Node.

The ``.vsix`` is built from ``client-vscode/`` (``npm run package``) and committed as
``citewise/editors/citewise.vsix``, so ``pip install citewise`` (or ``pip install .`` from a clone
without Node) carries it; a test checks it against a fresh build so it never goes stale.
``citewise vscode install`` hands it to VS Code's own command-line installer
(``code --install-extension``), which also serves VSCodium, code-server and Insiders.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from importlib import resources
from pathlib import Path

from .cli_common import UserError

# VS Code's command-line launchers, the one a user most likely has first.
EDITOR_COMMANDS = ("code", "code-insiders", "codium", "code-server")


def vsix_path() -> Path:
    """The packaged extension inside the installed package."""
    path = Path(str(resources.files("citewise") / "editors" / "citewise.vsix"))
    if not path.is_file():
        raise UserError(
            f"{path}: the VS Code extension is missing from this install; reinstall citewise "
            "(pip install --force-reinstall citewise)"
        )
    return path


def find_editor(requested: str | None) -> str:
    """The editor launcher to install into: ``--code`` (a name on PATH or a path), else the first
    of :data:`EDITOR_COMMANDS` on PATH."""
    if requested:
        found = shutil.which(requested)
        if found is None:
            raise UserError(
                f"--code {requested}: no such program; give the path of code, codium or code-server"
            )
        return found
    for name in EDITOR_COMMANDS:
        found = shutil.which(name)
        if found:
            return found
    raise UserError(
        f"no VS Code command on PATH (looked for {', '.join(EDITOR_COMMANDS)}); pass --code PATH, or in "
        f"VS Code run 'Extensions: Install from VSIX...' and choose {vsix_path()}"
    )


def install_command(editor: str, vsix: Path, extensions_dir: str | None) -> list[str]:
    """The launcher's own install command; ``--force`` so a reinstall upgrades in place."""
    cmd = [editor, "--install-extension", str(vsix), "--force"]
    if extensions_dir:
        cmd += ["--extensions-dir", extensions_dir]
    return cmd


def cmd_vscode(args: argparse.Namespace) -> int:
    vsix = vsix_path()
    if args.action == "path":
        print(vsix)
        return 0
    cmd = install_command(find_editor(args.code), vsix, args.extensions_dir)
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    except subprocess.TimeoutExpired:
        raise UserError(f"{cmd[0]} --install-extension did not finish in 5 minutes") from None
    if proc.returncode != 0:
        detail = (proc.stderr or proc.stdout).strip().splitlines()
        raise UserError(
            f"{cmd[0]} could not install {vsix.name}: {detail[-1] if detail else proc.returncode}"
        )
    server = Path(sys.argv[0]).resolve() if Path(sys.argv[0]).name == "citewise" else None
    print(f"installed the citewise extension into {Path(cmd[0]).name}")
    on_path = shutil.which("citewise")
    if server and (on_path is None or Path(on_path).resolve() != server):
        print(f'this citewise is not first on PATH: set "citewise.server.command": "{server}" in VS Code')
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "vscode", help="install the VS Code extension that ships with citewise (no Node needed)"
    )
    p.add_argument("action", choices=("install", "path"), help="install it, or print the .vsix path")
    p.add_argument(
        "--code", help=f"the editor's launcher (default: the first of {', '.join(EDITOR_COMMANDS)})"
    )
    p.add_argument("--extensions-dir", help="install into this extensions folder (the launcher's own option)")
    p.set_defaults(func=cmd_vscode)
