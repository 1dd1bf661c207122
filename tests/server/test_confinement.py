"""The server reads only the workspace, the draft's folder, BIBINPUTS and configured files.

A draft is untrusted text: ``\\input``, ``\\include`` and bibliography paths that climb out of
the workspace (``../../``) or are absolute are not followed, and no entry is ever written there.
"""

from __future__ import annotations

from pathlib import Path

from citewise.server.documents import analyze


def _tree(tmp_path: Path) -> tuple[Path, Path, Path]:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.tex").write_text(
        "\\title{Secret Title}\n\\begin{abstract}private words\\end{abstract}\n"
    )
    (outside / "other.bib").write_text("@article{stolen,\n  title = {Not Yours},\n}\n")
    ws = tmp_path / "ws"
    (ws / "paper").mkdir(parents=True)
    (ws / "paper" / "intro.tex").write_text("\\title{Inside Title}\n")
    return ws, outside, ws / "paper" / "draft.tex"


def test_relative_and_absolute_escapes_are_not_followed(tmp_path: Path) -> None:
    ws, outside, draft = _tree(tmp_path)
    text = (
        "\\input{../../outside/secret}\n\\include{" + str(outside / "secret") + "}\n"
        "\\bibliography{../../outside/other," + str(outside / "other") + "}\n\\cite{stolen}\n"
    )
    view = analyze(draft, text, "latex", workspace_root=ws, env={})
    assert view.title == "" and view.abstract == ""
    assert all(str(outside) not in str(bf.path) for bf in view.bib_files)
    assert "stolen" not in view.bib
    assert Path(view.target_bib).parent == draft.parent  # new entries go next to the draft


def test_files_inside_the_workspace_are_followed(tmp_path: Path) -> None:
    ws, _outside, draft = _tree(tmp_path)
    (ws / "refs.bib").write_text("@article{mine,\n  title = {Mine},\n}\n")
    view = analyze(draft, "\\input{intro}\n\\bibliography{../refs}\n", "latex", workspace_root=ws, env={})
    assert view.title == "Inside Title"
    assert "mine" in view.bib


def test_bibinputs_and_settings_are_allowed(tmp_path: Path) -> None:
    ws, outside, draft = _tree(tmp_path)
    view = analyze(
        draft, "\\bibliography{other}\n", "latex", workspace_root=ws, env={"BIBINPUTS": str(outside)}
    )
    assert "stolen" in view.bib  # the user named that folder
    view = analyze(
        draft, "text\n", "latex", workspace_root=ws, env={}, bibliography_setting=[str(outside / "other.bib")]
    )
    assert "stolen" in view.bib


def test_the_command_line_is_not_confined(tmp_path: Path) -> None:
    _ws, _outside, draft = _tree(tmp_path)
    view = analyze(draft, "\\input{../../outside/secret}\n", "latex", env={})
    assert view.title == "Secret Title"  # the user ran citewise on their own draft
