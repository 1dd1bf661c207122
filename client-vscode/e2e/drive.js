#!/usr/bin/env node
/**
 * End-to-end driver: the packaged citewise extension in a real VS Code (code-server 4.100.3, VS Code
 * 1.100.3) in headless Chromium, used the way a person would: keys and clicks, and what the page shows.
 *
 *   node drive.js PARAMS.json
 *
 * PARAMS (written by tests/editors/test_vscode_e2e.py or bench/bench_vscode_first_suggestion.py):
 *   codeServer, chromium, playwrightCore  paths of the code-server launcher, the browser, the module
 *   vsix                                   the packaged extension, installed into a private extensions dir
 *   workspace, draft, bib                  the folder opened and its files (absolute paths)
 *   settings                               VS Code user settings (citewise.server.command, citewise.store, ...)
 *   completionAt, suggestAt                {line, column} (1-based) where `typed` is typed / the command is run
 *   typed                                  what is typed for completion (default `\cite{`)
 *   artifacts                              folder for the code-server log, the VS Code logs, failure screenshots
 *   screenshots                            {completion, suggest}: where to save the two screenshots (optional)
 *   showDetails                            open the focused item's details before the completion screenshot
 *   mode                                   "full" (both scenarios) or "first-suggestion" (open, type, measure)
 *   secondDraft, secondAt                  with "first-suggestion": then the same in this file of the workspace
 *                                          at {line, column} (the window and the server already running)
 *   timeoutMs                              bound of every wait; only a state that never comes reaches it
 *
 * Every wait polls for a UI state (a widget visible, rows rendered, a file's text on disk); no fixed sleeps.
 * Prints one JSON object on stdout (also written to artifacts/result.json); exit 1 with {"error": ...} when
 * a step failed, after saving artifacts/failure.png and the logs. code-server runs in its own process group
 * and is killed in a finally block; its pid goes to artifacts/pids.json first so a caller can kill it too.
 */
"use strict";

const { spawn, spawnSync } = require("node:child_process");
const fs = require("node:fs");
const net = require("node:net");
const os = require("node:os");
const path = require("node:path");

const POLL_MS = 100;

function log(msg) {
  process.stderr.write(`[drive ${new Date().toISOString().slice(11, 23)}] ${msg}\n`);
}

/**
 * Poll `probe` (sync or async) until it returns a truthy value; that value, or an error naming `what` and,
 * with `describe`, what the page showed at that moment (so a failure says more than "timed out").
 */
async function waitFor(what, probe, timeoutMs, describe) {
  const end = Date.now() + timeoutMs;
  let last;
  for (;;) {
    try {
      const v = await probe();
      if (v) {
        return v;
      }
    } catch (e) {
      last = e;
    }
    if (Date.now() > end) {
      const seen = describe ? await Promise.resolve(describe()).catch((e) => `(could not tell: ${e})`) : "";
      const why = `${last ? `: ${last.message}` : ""}${seen ? `; seen: ${seen}` : ""}`;
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${why}`);
    }
    await new Promise((r) => setTimeout(r, POLL_MS));
  }
}

function freePort() {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once("error", reject);
    srv.listen(0, "127.0.0.1", () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

// -- code-server -------------------------------------------------------------------------------------------

/** A private profile: user settings, extensions dir, XDG folders (code-server writes its config there). */
function makeProfile(p) {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), "citewise-vscode-"));
  const profile = { root, userData: path.join(root, "user-data"), extensions: path.join(root, "extensions") };
  fs.mkdirSync(path.join(profile.userData, "User"), { recursive: true });
  const settings = {
    "workbench.startupEditor": "none", // the walkthrough takes focus otherwise
    "security.workspace.trust.enabled": false,
    "extensions.ignoreRecommendations": true, // no "install LaTeX Workshop?" toast over the editor
    "workbench.tips.enabled": false,
    "telemetry.telemetryLevel": "off",
    "update.mode": "none",
    "git.enabled": false,
    "files.autoSave": "off", // what a user has by default: edits stay in buffers until saved
    "editor.wordWrap": "on", // for the screenshots: the sentence and the list side by side, no scrolling
    "editor.minimap.enabled": false,
    ...p.settings,
  };
  fs.writeFileSync(path.join(profile.userData, "User", "settings.json"), JSON.stringify(settings, null, 2));
  profile.env = { ...process.env };
  for (const d of ["config", "data", "state", "cache"]) {
    profile.env[`XDG_${d.toUpperCase()}_HOME`] = path.join(root, "xdg", d);
  }
  return profile;
}

function installExtension(p, profile) {
  if (!p.vsix) {
    return null; // developing the driver itself: the bare workbench
  }
  const t0 = Date.now();
  const args = ["--install-extension", p.vsix, "--extensions-dir", profile.extensions];
  const r = spawnSync(p.codeServer, [...args, "--user-data-dir", profile.userData], {
    env: profile.env,
    encoding: "utf8",
    timeout: p.timeoutMs,
  });
  if (r.status !== 0) {
    throw new Error(`code-server --install-extension failed (${r.status}): ${r.stdout}${r.stderr}`);
  }
  return Date.now() - t0;
}

async function startCodeServer(p, profile) {
  const port = await freePort();
  const logFd = fs.openSync(path.join(p.artifacts, "code-server.log"), "w");
  const args = [
    "--auth", "none", "--bind-addr", `127.0.0.1:${port}`, "--disable-telemetry", "--disable-update-check",
    "--user-data-dir", profile.userData, "--extensions-dir", profile.extensions,
  ]; // prettier-ignore
  const child = spawn(p.codeServer, args, { env: profile.env, detached: true, stdio: ["ignore", logFd, logFd] });
  fs.closeSync(logFd);
  recordGroups(p.artifacts, { codeServer: child.pid });
  const url = `http://127.0.0.1:${port}`;
  await waitFor(
    "code-server to answer /healthz",
    async () => {
      if (child.exitCode !== null) {
        throw new Error(`code-server exited with ${child.exitCode} (see code-server.log)`);
      }
      const res = await fetch(`${url}/healthz`);
      return res.ok;
    },
    p.timeoutMs,
  );
  return { child, url };
}

/**
 * Note process-group leaders in artifacts/pids.json, for a caller that must clean up after a driver it had to
 * kill: code-server (spawned detached) and the browser (Playwright spawns it detached too).
 */
function recordGroups(artifacts, groups) {
  const file = path.join(artifacts, "pids.json");
  const known = fs.existsSync(file) ? JSON.parse(fs.readFileSync(file, "utf8")) : {};
  fs.writeFileSync(file, JSON.stringify({ ...known, ...groups }));
}

/** Pids of this process's children (Linux /proc): the browser Playwright has just started. */
function childPids() {
  const out = [];
  for (const name of fs.readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) {
      continue;
    }
    try {
      const stat = fs.readFileSync(`/proc/${name}/stat`, "utf8");
      const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
      if (ppid === process.pid) {
        out.push(Number(name));
      }
    } catch {
      /* gone meanwhile */
    }
  }
  return out;
}

/** SIGTERM to the whole group (code-server, its extension host, the citewise server), SIGKILL if it stays. */
async function killGroup(child) {
  if (!child || child.exitCode !== null) {
    return;
  }
  const signal = (s) => {
    try {
      process.kill(-child.pid, s);
    } catch {
      /* already gone */
    }
  };
  signal("SIGTERM");
  const end = Date.now() + 5000;
  while (child.exitCode === null && Date.now() < end) {
    await new Promise((r) => setTimeout(r, POLL_MS));
  }
  signal("SIGKILL");
}

module.exports = { log, waitFor, makeProfile, installExtension, startCodeServer, killGroup, recordGroups, childPids };

if (require.main === module) {
  require("./scenario").main(process.argv[2]);
}
