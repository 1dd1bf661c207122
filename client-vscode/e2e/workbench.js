/**
 * What a person does in the VS Code workbench, through Playwright: quick open, go to line, the command
 * palette, the suggest widget and quick picks, read back from the DOM. Every step waits for the UI state it
 * needs (a widget shown or hidden, the status bar's cursor position, rows rendered), bounded by timeoutMs.
 * Selectors are VS Code 1.100's (code-server 4.100.3).
 */
"use strict";

const { waitFor } = require("./drive");

const QUICK_INPUT = ".quick-input-widget";
const SUGGEST = ".editor-widget.suggest-widget";

class Workbench {
  constructor(page, timeoutMs) {
    this.page = page;
    this.timeoutMs = timeoutMs;
  }

  async open(url, folder) {
    await this.page.goto(`${url}/?folder=${encodeURIComponent(folder)}`);
    const statusBar = this.page.locator(".monaco-workbench .part.statusbar");
    await waitFor("the workbench", () => statusBar.isVisible(), this.timeoutMs);
    await waitFor(
      `the explorer to list the files of ${folder}`,
      () => this.page.locator(`.explorer-folders-view .monaco-list-row[aria-label]`).count(),
      this.timeoutMs,
    );
  }

  quickInputVisible() {
    return this.page.locator(QUICK_INPUT).isVisible();
  }

  /** The quick input's rows: label, description, detail as shown. */
  quickInputRows() {
    return this.page.$$eval(`${QUICK_INPUT} .quick-input-list .monaco-list-row`, (rows) =>
      rows.map((r) => ({
        label: r.querySelector(".quick-input-list-rows .label-name")?.textContent ?? "",
        description: r.querySelector(".label-description")?.textContent ?? "",
        detail: r.querySelector(".quick-input-list-label-meta .label-name")?.textContent ?? "",
        aria: r.getAttribute("aria-label") ?? "",
        focused: r.classList.contains("focused"),
      })),
    );
  }

  /** Open the quick input with `key`, type `text`, wait for a row `accept(row)` says yes to, focus it, Enter. */
  async pick(key, text, accept, what) {
    await this.page.keyboard.press(key);
    await waitFor("the quick input", () => this.quickInputVisible(), this.timeoutMs);
    await this.page.keyboard.type(text);
    const rows = await waitFor(
      what,
      async () => {
        const rs = await this.quickInputRows();
        return rs.some(accept) ? rs : null;
      },
      this.timeoutMs,
      async () => JSON.stringify((await this.quickInputRows()).map((r) => r.aria)),
    );
    const target = rows.findIndex(accept);
    const focused = rows.findIndex((r) => r.focused);
    for (let i = Math.max(focused, 0); i < target; i++) {
      await this.page.keyboard.press("ArrowDown");
    }
    await this.page.keyboard.press("Enter");
    await waitFor("the quick input to close", async () => !(await this.quickInputVisible()), this.timeoutMs);
  }

  /** Quick open (Ctrl+P) the file `name`, and wait until its editor has the keyboard focus. */
  async openFile(name) {
    await this.pick("Control+P", name, (r) => r.aria.includes(name), `quick open to list ${name}`);
    await waitFor(
      `the editor of ${name}`,
      async () => {
        const tab = await this.page.locator(".tabs-container .tab.active").getAttribute("aria-label");
        return tab?.includes(name) && (await this.page.locator(".monaco-editor.focused").count());
      },
      this.timeoutMs,
    );
  }

  /** Go to Line/Column (Ctrl+G); waits for the status bar to show the new position. */
  async goTo(line, column) {
    await this.page.keyboard.press("Control+G");
    await waitFor("the go-to-line input", () => this.quickInputVisible(), this.timeoutMs);
    await this.page.keyboard.type(`${line}:${column}`);
    await this.page.keyboard.press("Enter");
    await waitFor(
      `the cursor at Ln ${line}, Col ${column}`,
      async () => {
        const text = await this.page.locator("#status\\.editor\\.selection").textContent();
        return text?.includes(`Ln ${line}, Col ${column}`) && !(await this.quickInputVisible());
      },
      this.timeoutMs,
    );
  }

  /** Run a command of the palette (F1) by its full title. */
  async command(title) {
    await this.pick("F1", title, (r) => r.label === title, `the command palette to list "${title}"`);
  }

  /** The suggest widget: whether shown, its message ("No suggestions.", "Loading..."), its rendered rows. */
  suggestState() {
    return this.page.evaluate((sel) => {
      const w = document.querySelector(`${sel}.visible`);
      if (!w) {
        return { visible: false, message: "", rows: [] };
      }
      const text = (el, q) => el.querySelector(q)?.textContent ?? "";
      const message = w.querySelector(".message");
      return {
        visible: true,
        message: message && message.offsetParent !== null ? message.textContent : "",
        // An item with labelDetails shows labelDetails.description on the right (.details-label), where a
        // plain-string label shows its `detail`; only the former lacks the .string-label class.
        rows: [...w.querySelectorAll(".monaco-list-row")].map((r) => ({
          label: text(r, ".label-name"),
          description: r.querySelector(".string-label") ? "" : text(r, ".details-label"),
          signature: text(r, ".signature-label"),
          aria: r.getAttribute("aria-label") ?? "",
          focused: r.classList.contains("focused"),
        })),
      };
    }, SUGGEST);
  }

  /** The texts of the status bar's items (citewise's shows the store's paper count once the server is up). */
  statusBarText() {
    return this.page.$$eval(".part.statusbar .statusbar-item", (items) => items.map((i) => i.textContent ?? ""));
  }

  /** The text of the editor's current line as rendered (for failure messages). */
  cursorLine() {
    return this.page.evaluate(() => {
      const line = document.querySelector(".monaco-editor.focused .view-overlays .current-line");
      const lines = [...document.querySelectorAll(".monaco-editor .view-lines .view-line")];
      const top = line ? line.parentElement.style.top : null;
      const at = lines.find((l) => l.style.top === top);
      return (at ?? lines[0])?.textContent.replace(/\u00a0/g, " ") ?? "(no editor)";
    });
  }

  /** How many unsaved files the Explorer's activity-bar badge counts (0 when it shows none). */
  dirtyCount() {
    return this.page.evaluate(() => {
      const badges = [...document.querySelectorAll(".activitybar .action-item .badge .badge-content")];
      const explorer = badges.find((b) => b.closest(".action-item")?.querySelector(".codicon-explorer-view-icon"));
      return explorer ? Number(explorer.textContent) || 0 : 0;
    });
  }
}

module.exports = { Workbench };
