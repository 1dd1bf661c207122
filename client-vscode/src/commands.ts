/**
 * The palette commands. Ranking, the key and the BibTeX entry are the server's (its
 * `citewise.suggestForDraft` and `citewise.insertCitation` commands), so the .bib logic exists
 * once, in Python; the extension only picks, places the citation around the key, and shows progress.
 */
import * as vscode from "vscode";
import { citationWrapper, draftLanguage } from "./citeInsert";
import { Controller, LANGUAGES, SERVER_COMMANDS } from "./controller";
import { DraftSuggestion, parseSuggestions, pickRow } from "./suggestions";

interface SuggestionPick extends vscode.QuickPickItem {
  suggestion: DraftSuggestion;
}

export async function suggestReferences(ctl: Controller): Promise<void> {
  const editor = vscode.window.activeTextEditor;
  if (editor === undefined || !LANGUAGES.includes(editor.document.languageId)) {
    void vscode.window.showInformationMessage("citewise: open a LaTeX or Markdown draft first.");
    return;
  }
  if (ctl.running() === undefined) {
    return;
  }
  const uri = editor.document.uri.toString();
  const k = vscode.workspace.getConfiguration("citewise").get<number>("k", 20);
  let rows: DraftSuggestion[];
  try {
    rows = await vscode.window.withProgress(
      { location: vscode.ProgressLocation.Notification, title: "citewise: ranking papers for this draft…", cancellable: true },
      async (_progress, token) => parseSuggestions(await ctl.execute(SERVER_COMMANDS.suggest, { uri, k }, token)),
    );
  } catch (err) {
    if ((err as { code?: number } | undefined)?.code !== -32800) {
      ctl.log(`suggest for draft failed: ${String(err)}`);
      void vscode.window.showErrorMessage(`citewise: no suggestions: ${String(err)}`);
    }
    return;
  }
  if (rows.length === 0) {
    const empty = ctl.paperCount === 0 ? " The paper store is empty: import your library with `citewise index`." : "";
    void vscode.window.showInformationMessage(`citewise: no suggestions for this draft.${empty}`);
    return;
  }
  const picked = await vscode.window.showQuickPick<SuggestionPick>(
    rows.map((s) => ({ ...pickRow(s), suggestion: s })),
    {
      title: "citewise: references for this draft",
      placeHolder: "Pick a paper to cite at the cursor (its BibTeX entry is added to your .bib)",
      matchOnDescription: true,
      matchOnDetail: true,
    },
  );
  if (picked !== undefined) {
    await insertAtCursor(ctl, editor, picked.suggestion);
  }
}

/** Put the citation around the cursor, then let the server fill in the key and the .bib entry (one request). */
async function insertAtCursor(ctl: Controller, editor: vscode.TextEditor, s: DraftSuggestion): Promise<void> {
  const doc = editor.document;
  const pos = editor.selection.active;
  const line = doc.lineAt(pos.line).text;
  const wrap = citationWrapper(draftLanguage(doc.languageId, doc.fileName), line.slice(0, pos.character), line.slice(pos.character));
  const around = wrap.prefix + wrap.suffix;
  if (around && !(await editor.edit((b) => b.insert(pos, around), { undoStopBefore: true, undoStopAfter: false }))) {
    void vscode.window.showErrorMessage("citewise: the draft could not be edited.");
    return;
  }
  const slot = { line: pos.line, character: pos.character + wrap.prefix.length };
  let result: { applied?: boolean; reason?: string } | undefined;
  try {
    result = (await ctl.execute(SERVER_COMMANDS.insert, {
      uri: doc.uri.toString(),
      paperId: s.paperId,
      range: { start: slot, end: slot },
    })) as typeof result;
  } catch (err) {
    ctl.log(`insertCitation failed: ${String(err)}`);
  }
  if (!result?.applied) {
    if (around) {
      // Take the empty citation back out, unless the user typed into it meanwhile.
      const range = new vscode.Range(pos, pos.translate(0, around.length));
      if (doc.getText(range) === around) {
        await editor.edit((b) => b.delete(range), { undoStopBefore: false, undoStopAfter: true });
      }
    }
    void vscode.window.showErrorMessage(`citewise: could not cite ${s.key}${result?.reason ? ` (${result.reason})` : ""}.`);
    return;
  }
  const end = new vscode.Position(slot.line, slot.character + s.key.length + wrap.suffix.length);
  editor.selection = new vscode.Selection(end, end);
}

/**
 * Reindex with a cancellable notification that shows the server's own progress. Cancel goes to the
 * server as `window/workDoneProgress/cancel` (see serverProgress.ts); the request then answers
 * `{cancelled: true}` once the job has stopped, at the next source file or embedding batch.
 */
export async function reindex(ctl: Controller): Promise<void> {
  if (ctl.running() === undefined) {
    return;
  }
  ctl.setReindexing(true);
  try {
    await vscode.window.withProgress(
      { location: vscode.ProgressLocation.Notification, title: "citewise: reindexing", cancellable: true },
      async (progress, token) => {
        progress.report({ message: "starting…" });
        try {
          const result = await ctl.withServerProgress(progress, token, () =>
            ctl.execute(SERVER_COMMANDS.reindex, { force: false }),
          );
          reportReindex(ctl, result as Record<string, unknown> | undefined);
        } catch (err) {
          ctl.log(`reindex failed: ${String(err)}`);
          void vscode.window.showErrorMessage(`citewise: reindex failed: ${String(err)}`);
        }
      },
    );
  } finally {
    ctl.setReindexing(false);
  }
}

function reportReindex(ctl: Controller, result: Record<string, unknown> | undefined): void {
  ctl.log(`reindex: ${JSON.stringify(result)}`);
  if (result?.done === true) {
    const papers = typeof result.papers === "number" ? `${result.papers} papers indexed` : "done";
    const seconds = typeof result.seconds === "number" ? ` in ${result.seconds} s` : "";
    void vscode.window.showInformationMessage(`citewise: reindex ${papers}${seconds}.`);
  } else if (result?.cancelled === true) {
    void vscode.window.showInformationMessage("citewise: reindex cancelled; the previous index keeps serving.");
  } else {
    void vscode.window.showWarningMessage(`citewise: reindex not run: ${String(result?.reason ?? "unknown reason")}.`);
  }
}

/**
 * Build the field's store around the draft's bibliography: the server's `citewise.fetchAround`,
 * the one command that goes online (Semantic Scholar and OpenAlex), with its progress in a
 * cancellable notification. The active draft's .bib files, else the workspace's. Cancel stops it
 * after the page in flight; running it again continues where it stopped.
 */
export async function fetchAround(ctl: Controller): Promise<void> {
  if (ctl.running() === undefined) {
    return;
  }
  const editor = vscode.window.activeTextEditor;
  const draft = editor !== undefined && LANGUAGES.includes(editor.document.languageId);
  const args = draft ? { uri: editor.document.uri.toString() } : {};
  await vscode.window.withProgress(
    { location: vscode.ProgressLocation.Notification, title: "citewise: building the store", cancellable: true },
    async (progress, token) => {
      progress.report({ message: "starting…" });
      try {
        const result = await ctl.withServerProgress(progress, token, () =>
          ctl.execute(SERVER_COMMANDS.fetchAround, args),
        );
        reportFetch(ctl, result as Record<string, unknown> | undefined);
      } catch (err) {
        ctl.log(`fetch failed: ${String(err)}`);
        void vscode.window.showErrorMessage(`citewise: fetch failed: ${String(err)}`);
      }
    },
  );
}

function reportFetch(ctl: Controller, result: Record<string, unknown> | undefined): void {
  ctl.log(`fetch: ${JSON.stringify(result)}`);
  if (result?.done === true) {
    const added = `${String(result.papers_added ?? 0)} papers and ${String(result.edges_added ?? 0)} citations added`;
    void vscode.window.showInformationMessage(`citewise: ${added}; the store holds ${String(result.papers ?? "?")} papers.`);
  } else if (result?.cancelled === true) {
    void vscode.window.showInformationMessage("citewise: fetch cancelled; what was fetched is kept, run it again to continue.");
  } else {
    void vscode.window.showWarningMessage(`citewise: fetch not done: ${String(result?.error ?? result?.reason ?? "unknown reason")}.`);
  }
}
