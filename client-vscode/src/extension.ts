/** Entry point: one controller (server + status bar) and the palette commands. */
import * as vscode from "vscode";
import { fetchAround, reindex, suggestReferences } from "./commands";
import { Controller } from "./controller";

let controller: Controller | undefined;

export async function activate(context: vscode.ExtensionContext): Promise<void> {
  const ctl = new Controller(context);
  controller = ctl;
  context.subscriptions.push(
    ctl,
    // Not the server's own command names: the language client registers those (citewise.reindex, ...).
    vscode.commands.registerCommand("citewise.suggestReferences", () => suggestReferences(ctl)),
    vscode.commands.registerCommand("citewise.reindexStore", () => reindex(ctl)),
    vscode.commands.registerCommand("citewise.fetchAroundDraft", () => fetchAround(ctl)),
    vscode.commands.registerCommand("citewise.showOutput", () => ctl.output.show(true)),
    vscode.commands.registerCommand("citewise.restartServer", () => ctl.restart()),
  );
  await ctl.start();
}

export async function deactivate(): Promise<void> {
  await controller?.stop();
  controller = undefined;
}
