"""Starting citewise must not load the training stack: editors start ``citewise serve`` often.

Building the parser once imported torch through the trainers' settings (3-4 s a start here).
"""

from __future__ import annotations

import subprocess
import sys

CHECK = """
import sys
from citewise.cli import build_parser
from citewise.server.lsp import create_server
build_parser()
create_server()
heavy = sorted(m for m in ("torch", "transformers", "onnx", "matplotlib") if m in sys.modules)
print(",".join(heavy))
"""


def test_parser_and_server_load_without_torch() -> None:
    out = subprocess.run(
        [sys.executable, "-c", CHECK], capture_output=True, text=True, timeout=120, check=True
    )
    assert out.stdout.strip() == "", f"loaded at start: {out.stdout.strip()}"
