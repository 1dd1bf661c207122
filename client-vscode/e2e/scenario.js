/**
 * The two scenarios of issue 17 in the real workbench (see drive.js for the parameters):
 *  1. completion: open the draft, type `\cite{` in a sentence, wait for citewise's items (titles beside the
 *     keys), screenshot, accept the first; the key lands in the draft, the BibTeX entry in the .bib;
 *  2. "citewise: Suggest references for this draft" from the command palette: pick the first paper; the
 *     citation lands at the cursor, the entry in the .bib.
 * The server adds entries with workspace/applyEdit: VS Code opens the .bib in the background and leaves the
 * edit UNSAVED (as it does for any workspace edit). A user saves; so does this driver ("File: Save All Files" from
 * the palette) and then reads the files on disk. `bibOnDiskBeforeSave` records whether anything was saved
 * before that.
 */
"use strict";

const fs = require("node:fs");
const path = require("node:path");
const drive = require("./drive");

const { log, waitFor } = drive;
const { Workbench } = require("./workbench");

const ASK_AGAIN_MS = 300; // ask for completion again when citewise's items have not come this long
const SAVE_AGAIN_MS = 1500; // save again when the files on disk do not hold the edits yet

function hasEntry(text, key) {
  return text.includes(`{${key},`);
}

/**
 * Wait until the suggest widget shows citewise's rows (a title beside a key). Until the server has started,
 * VS Code shows its word-based items (or nothing) and does not ask again by itself: like a user, close the
 * widget and ask again (Ctrl+Space) every ASK_AGAIN_MS. `out` counts the re-asks and notes when the status
 * bar first showed the store's paper count (null when the items came first).
 */
async function citewiseItems(wb, t0, timeoutMs, out) {
  let asked = Date.now();
  return waitFor(
    "citewise's completion items (a key with a title beside it)",
    async () => {
      const s = await wb.suggestState();
      if (out.serverReadyMs === null && (await wb.statusBarText()).some((t) => /\d papers/.test(t))) {
        out.serverReadyMs = Date.now() - t0;
      }
      if (s.rows.some((r) => r.description.trim() !== "")) {
        return s;
      }
      if (Date.now() - asked > ASK_AGAIN_MS) {
        if (s.visible) {
          await wb.page.keyboard.press("Escape");
        }
        await wb.page.keyboard.press("Control+Space");
        out.retriggers += 1;
        asked = Date.now();
      }
      return null;
    },
    timeoutMs,
    async () => JSON.stringify({ suggest: await wb.suggestState(), line: await wb.cursorLine() }),
  );
}

/** Type `typed` at `at` and wait for citewise's rows; ms from `t0` to that moment. */
async function firstSuggestions(wb, at, typed, t0, timeoutMs) {
  await wb.goTo(at.line, at.column);
  await wb.page.keyboard.type(typed);
  const out = { retriggers: 0, serverReadyMs: null };
  const state = await citewiseItems(wb, t0, timeoutMs, out);
  return { ...out, ms: Date.now() - t0, rows: state.rows };
}

/** "File: Save All" until the files on disk show what `done(draft, bib)` wants (an edit may still come). */
async function saveUntil(wb, p, done) {
  let rounds = 0;
  let last = 0;
  await waitFor(
    "the draft and the .bib on disk to hold the citation and the entry",
    async () => {
      const draft = fs.readFileSync(p.draft, "utf8");
      const bib = fs.readFileSync(p.bib, "utf8");
      if (done(draft, bib)) {
        return true;
      }
      if (Date.now() - last > SAVE_AGAIN_MS && !(await wb.quickInputVisible())) {
        await wb.command("File: Save All Files");
        rounds += 1;
        last = Date.now();
      }
      return false;
    },
    p.timeoutMs,
    async () => `${rounds} saves; unsaved ${await wb.dirtyCount()}; draft on disk: ${fs.readFileSync(p.draft, "utf8")}`,
  );
  return rounds;
}

/** Wait until the accepted entry is in an open buffer (2 unsaved files: draft and .bib) or already on disk. */
async function entryArrived(wb, p, key) {
  return waitFor(
    `the entry ${key} to reach the .bib (a buffer or the file)`,
    async () => {
      if (hasEntry(fs.readFileSync(p.bib, "utf8"), key)) {
        return "on disk";
      }
      return (await wb.dirtyCount()) >= 2 ? "unsaved buffer" : null;
    },
    p.timeoutMs,
    async () => `unsaved files ${await wb.dirtyCount()}; cursor line: ${await wb.cursorLine()}`,
  );
}

/**
 * The screenshot of the list, once the status bar has the store's paper count (best effort: the list may come
 * first); with `showDetails`, the focused paper's details too (Ctrl+Space, as a user opens them).
 */
async function completionScreenshot(wb, p) {
  const ready = async () => (await wb.statusBarText()).some((t) => /\d papers/.test(t));
  await waitFor("the status bar's paper count", ready, 15000).catch(() => log("no paper count in the status bar"));
  if (p.showDetails) {
    await wb.page.keyboard.press("Control+Space");
    const details = () =>
      wb.page.evaluate(() => document.querySelector(".suggest-details-container .suggest-details")?.textContent);
    await waitFor("the focused paper's details", async () => (await details())?.trim(), p.timeoutMs);
  }
  await wb.page.screenshot({ path: p.screenshots.completion });
}

async function completionScenario(wb, p, t0) {
  const first = await firstSuggestions(wb, p.completionAt, p.typed ?? "\\cite{", t0, p.timeoutMs);
  log(`first suggestions after ${first.ms} ms (asked again ${first.retriggers} times)`);
  if (p.screenshots?.completion) {
    await completionScreenshot(wb, p);
  }
  const result = {
    firstSuggestionMs: first.ms,
    serverReadyMs: first.serverReadyMs,
    retriggers: first.retriggers,
    rows: first.rows,
  };
  if (p.mode === "first-suggestion") {
    return result;
  }
  // The list must still be there (a screenshot step or a late notification may have closed it).
  const state = await citewiseItems(wb, t0, p.timeoutMs, { retriggers: 0, serverReadyMs: 0 });
  const accepted = state.rows.find((r) => r.focused) ?? state.rows[0];
  await wb.page.keyboard.press("Enter");
  await waitFor("the suggest widget to close", async () => !(await wb.suggestState()).visible, p.timeoutMs);
  const key = accepted.label;
  result.accepted = accepted;
  result.entryArrived = await entryArrived(wb, p, key);
  result.bibOnDiskBeforeSave = hasEntry(fs.readFileSync(p.bib, "utf8"), key);
  result.saveRounds = await saveUntil(wb, p, (d, b) => d.includes(`\\cite{${key}}`) && hasEntry(b, key));
  return result;
}

/** The same measure for another draft opened in the running window (the server is up by then). */
async function secondDraftScenario(wb, p) {
  await wb.page.keyboard.press("Escape");
  const t = Date.now();
  log(`opening ${p.secondDraft}`);
  await wb.openFile(p.secondDraft);
  const editorMs = Date.now() - t;
  const first = await firstSuggestions(wb, p.secondAt, p.typed ?? "\\cite{", t, p.timeoutMs);
  log(`${p.secondDraft}: first suggestions after ${first.ms} ms (asked again ${first.retriggers} times)`);
  return { editorMs, firstSuggestionMs: first.ms, retriggers: first.retriggers, rows: first.rows };
}

async function suggestScenario(wb, p) {
  await wb.goTo(p.suggestAt.line, p.suggestAt.column);
  const t0 = Date.now();
  await wb.command("citewise: Suggest references for this draft");
  const rows = await waitFor(
    "the quick pick of suggested papers",
    async () => {
      const rs = (await wb.quickInputVisible()) ? await wb.quickInputRows() : [];
      return rs.length > 0 && rs.every((r) => r.detail.includes(".bib")) ? rs : null;
    },
    p.timeoutMs,
  );
  const result = { listMs: Date.now() - t0, rows };
  if (p.screenshots?.suggest) {
    await wb.page.screenshot({ path: p.screenshots.suggest });
  }
  const chosen = rows.find((r) => r.focused) ?? rows[0];
  const key = /(?:adds|as) (\S+) to your \.bib|already in your \.bib as (\S+)/.exec(chosen.detail);
  result.chosen = chosen;
  result.key = key ? key[1] ?? key[2] : null;
  await wb.page.keyboard.press("Enter");
  await waitFor("the quick pick to close", async () => !(await wb.quickInputVisible()), p.timeoutMs);
  if (result.key) {
    result.entryArrived = await entryArrived(wb, p, result.key);
    result.bibOnDiskBeforeSave = hasEntry(fs.readFileSync(p.bib, "utf8"), result.key);
    const k = result.key;
    result.saveRounds = await saveUntil(wb, p, (d, b) => d.includes(`\\cite{${k}}`) && hasEntry(b, k));
  }
  return result;
}

async function runScenarios(p, url, browser, out) {
  const context = await browser.newContext({ viewport: { width: 1440, height: 810 }, deviceScaleFactor: 1 });
  const page = await context.newPage();
  out.page = page;
  const wb = new Workbench(page, p.timeoutMs);
  let t = Date.now();
  await wb.open(url, p.workspace);
  out.result.workbenchMs = Date.now() - t;
  t = Date.now(); // the draft is asked for: the figure a user feels starts here
  log("opening the draft");
  await wb.openFile(path.basename(p.draft));
  out.result.editorMs = Date.now() - t;
  out.result.completion = await completionScenario(wb, p, t);
  if (p.mode === "first-suggestion" && p.secondDraft) {
    out.result.secondDraft = await secondDraftScenario(wb, p);
  }
  if (p.mode !== "first-suggestion") {
    out.result.suggest = await suggestScenario(wb, p);
    out.result.draftText = fs.readFileSync(p.draft, "utf8");
    out.result.bibText = fs.readFileSync(p.bib, "utf8");
  }
}

async function saveFailure(out, p, err) {
  out.result.error = String(err && err.stack ? err.stack : err);
  if (out.page) {
    const widget = await out.page.locator(".editor-widget.suggest-widget").evaluate((w) => w.outerHTML).catch(() => "");
    fs.writeFileSync(path.join(p.artifacts, "suggest-widget.html"), widget);
    const shot = path.join(p.artifacts, "failure.png");
    await out.page.screenshot({ path: shot }).catch(() => {});
    out.result.failureScreenshot = shot;
  }
}

/** VS Code's logs (the extension's output channel, "N-citewise.log", among them) into artifacts/vscode-logs. */
function keepLogs(profile, p, result) {
  const logs = path.join(profile.userData, "logs");
  if (fs.existsSync(logs)) {
    fs.cpSync(logs, path.join(p.artifacts, "vscode-logs"), { recursive: true });
    result.vscodeLogs = path.join(p.artifacts, "vscode-logs");
  }
}

async function main(paramsPath) {
  const p = JSON.parse(fs.readFileSync(paramsPath, "utf8"));
  fs.mkdirSync(p.artifacts, { recursive: true });
  const out = { result: { codeServerLog: path.join(p.artifacts, "code-server.log") } };
  let server;
  let browser;
  try {
    out.profile = drive.makeProfile(p);
    out.result.installExtensionMs = drive.installExtension(p, out.profile);
    server = await drive.startCodeServer(p, out.profile);
    const { chromium } = require(p.playwrightCore);
    browser = await chromium.launch({
      executablePath: p.chromium,
      headless: true,
      args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"],
    });
    drive.recordGroups(p.artifacts, { browser: drive.childPids().filter((pid) => pid !== server.child.pid) });
    await runScenarios(p, server.url, browser, out);
  } catch (err) {
    await saveFailure(out, p, err).catch((e) => log(`could not save the failure's artifacts: ${e}`));
  } finally {
    await browser?.close().catch(() => {});
    await drive.killGroup(server?.child);
    if (out.profile) {
      keepLogs(out.profile, p, out.result);
    }
    if (out.profile && !out.result.error) {
      fs.rmSync(out.profile.root, { recursive: true, force: true });
    }
  }
  const text = JSON.stringify(out.result);
  fs.writeFileSync(path.join(p.artifacts, "result.json"), text);
  process.stdout.write(text + "\n");
  process.exitCode = out.result.error ? 1 : 0;
}

module.exports = { main };
