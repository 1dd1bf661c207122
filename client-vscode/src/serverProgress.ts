/**
 * The server's `window/workDoneProgress` in VS Code, with a working Cancel for "citewise: Reindex".
 *
 * The server's reindex stops when its progress is cancelled (`window/workDoneProgress/cancel`), not
 * on `$/cancelRequest` of the command: pygls runs `workspace/executeCommand` handlers in a way that a
 * request cancellation answers the request but leaves the job running. So the progress the server
 * creates while the Reindex command waits is shown in that command's cancellable notification, and
 * its Cancel button sends `window/workDoneProgress/cancel` for the server's token. Any other
 * progress goes to the status bar, as the language client's own handler (which this one replaces,
 * being registered after it) would show it.
 */
import * as vscode from "vscode";
import {
  BaseLanguageClient,
  FeatureState,
  StaticFeature,
  WorkDoneProgress,
  WorkDoneProgressCancelNotification,
  WorkDoneProgressCreateRequest,
} from "vscode-languageclient/node";
import { PercentTracker, ProgressValue } from "./progress";

interface Claim {
  progress: vscode.Progress<{ message?: string; increment?: number }>;
  cancel: vscode.CancellationToken;
}

export class ServerProgress implements StaticFeature {
  private claim: Claim | undefined;
  private readonly open = new Set<vscode.Disposable>();

  constructor(private readonly client: BaseLanguageClient) {}

  fillClientCapabilities(capabilities: { window?: { workDoneProgress?: boolean } }): void {
    capabilities.window = { ...capabilities.window, workDoneProgress: true };
  }

  initialize(): void {
    this.client.onRequest(WorkDoneProgressCreateRequest.type, (params) => this.create(params.token));
  }

  getState(): FeatureState {
    return { kind: "static" };
  }

  clear(): void {
    for (const d of this.open) {
      d.dispose();
    }
    this.open.clear();
    this.claim = undefined;
  }

  /** Run `work` with the next progress the server creates shown in `progress`, cancelled by `cancel`. */
  async claimNext<T>(claim: Claim, work: () => Promise<T>): Promise<T> {
    this.claim = claim;
    try {
      return await work();
    } finally {
      this.claim = undefined;
    }
  }

  private create(token: string | number): void {
    const claim = this.claim;
    this.claim = undefined;
    if (claim !== undefined) {
      this.follow(token, claim.progress, claim.cancel);
      return;
    }
    void vscode.window.withProgress({ location: vscode.ProgressLocation.Window, title: "citewise" }, (progress) =>
      this.follow(token, progress),
    );
  }

  /** Forward the token's reports until its end; resolves then (or when the server goes away). */
  private follow(
    token: string | number,
    progress: vscode.Progress<{ message?: string; increment?: number }>,
    cancel?: vscode.CancellationToken,
  ): Promise<void> {
    const tracker = new PercentTracker();
    return new Promise<void>((resolve) => {
      const subs: vscode.Disposable[] = [];
      const done: vscode.Disposable = {
        dispose: () => {
          subs.forEach((s) => s.dispose());
          this.open.delete(done);
          resolve();
        },
      };
      this.open.add(done);
      subs.push(
        this.client.onProgress(WorkDoneProgress.type, token, (value) => {
          const v = value as ProgressValue;
          progress.report(tracker.step(v.kind === "begin" ? { ...v, message: v.message ?? v.title } : v));
          if (v.kind === "end") {
            done.dispose();
          }
        }),
      );
      if (cancel !== undefined) {
        const send = () => void this.client.sendNotification(WorkDoneProgressCancelNotification.type, { token });
        if (cancel.isCancellationRequested) {
          send(); // cancelled before the server had created its progress
        } else {
          subs.push(cancel.onCancellationRequested(send));
        }
      }
    });
  }
}
