/**
 * The server's life in VS Code: find the executable, start `citewise serve` over stdio with the
 * settings, restart it when it crashes (a bounded number of times), and keep the status-bar item
 * in step with the server's own `citewise.status`.
 */
import * as fs from "node:fs";
import * as os from "node:os";
import * as vscode from "vscode";
import {
  CloseAction,
  ErrorAction,
  ExecuteCommandRequest,
  LanguageClient,
  LanguageClientOptions,
  RevealOutputChannelOn,
  ServerOptions,
  State,
  TransportKind,
} from "vscode-languageclient/node";
import { keepLabelDetails } from "./labels";
import { ServerProgress } from "./serverProgress";
import { findPythonEnvironment } from "./python";
import { missingMessage, Resolution, resolveServerCommand } from "./resolve";
import { crashMessage, RestartPolicy } from "./restartPolicy";
import { filterConfigurationResult, serverSettings } from "./settings";
import { parseStatus, pollDelayMs, ServerState, ServerStatus, stateOf, statusView } from "./status";

export const LANGUAGES = ["latex", "tex", "markdown", "quarto", "rmd"];
export const SERVER_COMMANDS = {
  suggest: "citewise.suggestForDraft",
  reindex: "citewise.reindex",
  insert: "citewise.insertCitation",
  status: "citewise.status",
  fetchAround: "citewise.fetchAround",
};
const INSTALL_CHOICE = "How to install";
const SETTINGS_CHOICE = "Open settings";
const OUTPUT_CHOICE = "Show output";
const RESTART_CHOICE = "Restart server";

function isExecutable(file: string): boolean {
  try {
    if (!fs.statSync(file).isFile()) {
      return false;
    }
    fs.accessSync(file, process.platform === "win32" ? fs.constants.F_OK : fs.constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

export class Controller implements vscode.Disposable {
  readonly output: vscode.OutputChannel;
  private readonly statusItem: vscode.StatusBarItem;
  private client: LanguageClient | undefined;
  private progress: ServerProgress | undefined;
  private readonly policy = new RestartPolicy();
  private state: ServerState = "starting";
  private status: ServerStatus | undefined;
  private pollTimer: NodeJS.Timeout | undefined;
  private starting: Promise<void> | undefined;
  private localReindex = false;
  private readonly disposables: vscode.Disposable[] = [];

  constructor(private readonly context: vscode.ExtensionContext) {
    this.output = vscode.window.createOutputChannel("citewise");
    this.statusItem = vscode.window.createStatusBarItem("citewise.status", vscode.StatusBarAlignment.Right, 100);
    this.statusItem.name = "citewise";
    this.statusItem.command = "citewise.showOutput";
    this.render();
    this.statusItem.show();
    this.disposables.push(
      this.output,
      this.statusItem,
      vscode.workspace.onDidChangeConfiguration((e) => this.onConfigurationChanged(e)),
      // Trusting the workspace lets its Python environments be searched: try again if none was found.
      vscode.workspace.onDidGrantWorkspaceTrust(() => {
        if (this.state === "missing") {
          void this.restart();
        }
      }),
    );
  }

  log(message: string): void {
    this.output.appendLine(`[${new Date().toISOString()}] ${message}`);
  }

  /** The running client, or undefined with a message saying why there is none. */
  running(): LanguageClient | undefined {
    if (this.client?.state === State.Running) {
      return this.client;
    }
    const why =
      this.state === "missing" ? "the citewise server is not installed" : "the citewise server is not running";
    void vscode.window.showWarningMessage(`citewise: ${why}.`, OUTPUT_CHOICE, RESTART_CHOICE).then((c) => this.onChoice(c));
    return undefined;
  }

  /** `workspace/executeCommand` to the server, cancellable through `token`. */
  async execute(command: string, args: unknown, token?: vscode.CancellationToken): Promise<unknown> {
    const client = this.client;
    if (client === undefined) {
      throw new Error("the citewise server is not running");
    }
    return client.sendRequest(ExecuteCommandRequest.type, { command, arguments: [args] }, token);
  }

  start(): Promise<void> {
    this.starting ??= this.doStart().finally(() => (this.starting = undefined));
    return this.starting;
  }

  async restart(): Promise<void> {
    this.policy.reset();
    await this.stop();
    await this.start();
  }

  async stop(): Promise<void> {
    this.stopPolling();
    const client = this.client;
    this.client = undefined;
    if (client !== undefined) {
      try {
        await client.stop(5000);
      } catch (err) {
        this.log(`stopping the server: ${String(err)}`);
      }
    }
    this.setState("stopped");
  }

  dispose(): void {
    void this.stop();
    for (const d of this.disposables) {
      d.dispose();
    }
  }

  /** A reindex started from this window: shown in the status bar before the server says so. */
  setReindexing(on: boolean): void {
    this.localReindex = on;
    this.setState(stateOf(this.status, on));
    if (!on) {
      void this.poll();
    }
  }

  /** Run `work` (a request that makes the server create a progress) with that progress shown in `progress`. */
  withServerProgress<T>(
    progress: vscode.Progress<{ message?: string; increment?: number }>,
    cancel: vscode.CancellationToken,
    work: () => Promise<T>,
  ): Promise<T> {
    return this.progress ? this.progress.claimNext({ progress, cancel }, work) : work();
  }

  get paperCount(): number | undefined {
    return this.status?.papers;
  }

  private async resolve(): Promise<Resolution> {
    const config = vscode.workspace.getConfiguration("citewise");
    const folders = (vscode.workspace.workspaceFolders ?? []).filter((f) => f.uri.scheme === "file");
    const pythonPath = vscode.workspace.isTrusted
      ? await findPythonEnvironment(folders[0]?.uri, (m) => this.log(m))
      : undefined;
    return resolveServerCommand({
      setting: config.get<string>("server.command", ""),
      pathEnv: process.env.PATH ?? "",
      pathExt: process.env.PATHEXT,
      platform: process.platform,
      home: os.homedir(),
      workspaceFolders: folders.map((f) => f.uri.fsPath),
      trusted: vscode.workspace.isTrusted,
      pythonPath,
      isExecutable,
    });
  }

  private async doStart(): Promise<void> {
    this.setState("starting");
    const res = await this.resolve();
    if (!res.found) {
      this.reportMissing(res);
      return;
    }
    this.log(`starting ${res.command} serve (found via ${res.source})`);
    const cwd = vscode.workspace.workspaceFolders?.find((f) => f.uri.scheme === "file")?.uri.fsPath;
    const serverOptions: ServerOptions = {
      command: res.command,
      args: ["serve"],
      transport: TransportKind.stdio,
      options: cwd ? { cwd } : {},
    };
    const client = new LanguageClient("citewise", "citewise", serverOptions, this.clientOptions());
    this.progress = new ServerProgress(client);
    client.registerFeature(this.progress);
    this.client = client;
    client.onDidChangeState((e) => {
      if (client !== this.client) {
        return;
      }
      if (e.newState === State.Running) {
        this.setState("starting");
        this.schedulePoll(300);
      } else if (e.newState === State.Stopped && this.state !== "error") {
        this.setState("stopped");
      }
    });
    try {
      await client.start();
    } catch (err) {
      this.log(`the server did not start: ${String(err)}`);
      if (client === this.client) {
        this.setState("error", `the server did not start (${String(err)})`);
        void vscode.window
          .showErrorMessage(`citewise: the language server did not start: ${String(err)}`, OUTPUT_CHOICE, SETTINGS_CHOICE)
          .then((c) => this.onChoice(c));
      }
    }
  }

  private clientOptions(): LanguageClientOptions {
    // VS Code's "tex" language also covers .sty/.cls packages, which cite nothing: only .tex-like files.
    const fileDocs = LANGUAGES.map((language) =>
      language === "tex" ? { scheme: "file", language, pattern: "**/*.{tex,ltx,latex}" } : { scheme: "file", language },
    );
    return {
      // The .bib files too: an unsaved entry (added by a code action) then counts at once.
      documentSelector: [...fileDocs, { scheme: "file", pattern: "**/*.bib" }],
      initializationOptions: serverSettings(vscode.workspace.getConfiguration("citewise")),
      outputChannel: this.output,
      // The server's own problems reach the user as window/showMessage; the log stays in the channel.
      revealOutputChannelOn: RevealOutputChannelOn.Never,
      traceOutputChannel: this.output,
      errorHandler: {
        error: (_error, _message, count) => ({ action: count && count <= 3 ? ErrorAction.Continue : ErrorAction.Shutdown }),
        closed: () => this.onClosed(),
      },
      middleware: {
        workspace: {
          configuration: async (params, token, next) => {
            const result = await next(params, token);
            return Array.isArray(result)
              ? filterConfigurationResult(
                  params.items.map((i) => i.section),
                  result,
                )
              : result;
          },
        },
        resolveCompletionItem: async (item, token, next) => keepLabelDetails(item, await next(item, token)),
      },
    };
  }

  private onClosed(): { action: CloseAction; handled: boolean } {
    const decision = this.policy.onCrash(Date.now());
    const message = crashMessage(decision, this.policy);
    this.log(message);
    this.stopPolling();
    if (decision.restart) {
      this.setState("starting");
      void vscode.window.showWarningMessage(message, OUTPUT_CHOICE).then((c) => this.onChoice(c));
      return { action: CloseAction.Restart, handled: true };
    }
    this.setState("error", "the server crashed repeatedly and was not restarted");
    void vscode.window.showErrorMessage(message, OUTPUT_CHOICE, RESTART_CHOICE).then((c) => this.onChoice(c));
    return { action: CloseAction.DoNotRestart, handled: true };
  }

  private reportMissing(res: Resolution & { found: false }): void {
    const setting = vscode.workspace.getConfiguration("citewise").get<string>("server.command", "");
    const message = missingMessage(res, setting);
    this.log(message);
    this.log(`looked at: ${res.tried.join(", ") || "(nothing)"}`);
    this.setState("missing", res.reason === "setting" ? "check citewise.server.command" : "install it or set citewise.server.command");
    void vscode.window.showErrorMessage(message, INSTALL_CHOICE, SETTINGS_CHOICE).then((c) => this.onChoice(c));
  }

  private async onChoice(choice: string | undefined): Promise<void> {
    if (choice === INSTALL_CHOICE) {
      await this.showInstallHelp();
    } else if (choice === SETTINGS_CHOICE) {
      await this.openServerSetting();
    } else if (choice === OUTPUT_CHOICE) {
      this.output.show(true);
    } else if (choice === RESTART_CHOICE) {
      await this.restart();
    }
  }

  /**
   * The settings editor at `citewise.server.command`. In a remote window (Remote-SSH, WSL, code-server)
   * the server runs on the remote machine, and its machine-scoped settings are in the Remote tab.
   */
  private async openServerSetting(): Promise<void> {
    const query = { query: "citewise.server.command" }; // an object: the remote command ignores a bare string
    if (vscode.env.remoteName) {
      try {
        await vscode.commands.executeCommand("workbench.action.openRemoteSettings", query);
        return;
      } catch (err) {
        this.log(`remote settings: ${String(err)}`);
      }
    }
    await vscode.commands.executeCommand("workbench.action.openSettings", query);
  }

  /** The extension's README ("Install the server" comes first): bundled, so it works offline. */
  async showInstallHelp(): Promise<void> {
    // vsce stores README.md as readme.md in the .vsix; a development checkout has README.md.
    const names = ["readme.md", "README.md"];
    const name = names.find((n) => fs.existsSync(vscode.Uri.joinPath(this.context.extensionUri, n).fsPath)) ?? names[1];
    const readme = vscode.Uri.joinPath(this.context.extensionUri, name);
    try {
      await vscode.commands.executeCommand("markdown.showPreview", readme);
    } catch {
      await vscode.window.showTextDocument(readme);
    }
  }

  private onConfigurationChanged(e: vscode.ConfigurationChangeEvent): void {
    if (e.affectsConfiguration("citewise.server.command")) {
      this.log("citewise.server.command changed: restarting the server");
      void this.restart();
      return;
    }
    if (!e.affectsConfiguration("citewise") || this.client?.state !== State.Running) {
      return;
    }
    // Sent by hand (not `synchronize.configurationSection`): only the server's own settings.
    const settings = serverSettings(vscode.workspace.getConfiguration("citewise"));
    void this.client.sendNotification("workspace/didChangeConfiguration", { settings: { citewise: settings } });
    this.schedulePoll(1000);
  }

  // -- status bar -------------------------------------------------------------------------------
  private setState(state: ServerState, detail?: string): void {
    this.state = state;
    this.render(detail);
  }

  private render(detail?: string): void {
    const view = statusView(this.state, this.status, detail);
    this.statusItem.text = view.text;
    this.statusItem.tooltip = view.tooltip;
    const error = this.state === "error" || this.state === "missing";
    this.statusItem.backgroundColor = error ? new vscode.ThemeColor("statusBarItem.errorBackground") : undefined;
  }

  private schedulePoll(delayMs: number): void {
    this.stopPolling();
    this.pollTimer = setTimeout(() => void this.poll(), delayMs);
  }

  private stopPolling(): void {
    if (this.pollTimer !== undefined) {
      clearTimeout(this.pollTimer);
      this.pollTimer = undefined;
    }
  }

  private async poll(): Promise<void> {
    const client = this.client;
    if (client === undefined || client.state !== State.Running) {
      return;
    }
    try {
      const status = parseStatus(await this.execute(SERVER_COMMANDS.status, {}));
      if (client !== this.client) {
        return;
      }
      this.status = status;
      this.setState(stateOf(status, this.localReindex));
    } catch (err) {
      this.log(`citewise.status failed: ${String(err)}`);
    }
    if (client === this.client && client.state === State.Running) {
      this.schedulePoll(pollDelayMs(this.state));
    }
  }
}
