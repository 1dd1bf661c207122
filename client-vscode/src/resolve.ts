/**
 * Where the `citewise` executable is: the `citewise.server.command` setting, else `citewise` on
 * PATH, else next to the interpreter of the selected Python environment, else a virtual
 * environment inside a workspace folder. Pure (the file system is passed in as `isExecutable`),
 * so every branch is unit-tested without VS Code.
 */
import * as path from "node:path";

export interface ResolveInput {
  /** The `citewise.server.command` setting ("" when unset). */
  setting: string;
  /** `process.env.PATH`. */
  pathEnv: string;
  /** `process.platform`. */
  platform: string;
  /** The user's home folder, for `~` in the setting. */
  home: string;
  /** Workspace folders (file system paths), first one first. */
  workspaceFolders: string[];
  /** The selected Python environment's interpreter (or its folder), from the Python extension. */
  pythonPath?: string;
  /**
   * Whether the workspace is trusted (VS Code's workspace trust). An untrusted folder's own
   * `.venv/bin/citewise` is never run: it could be any program the folder's author put there.
   */
  trusted?: boolean;
  /** `PATHEXT` on Windows. */
  pathExt?: string;
  isExecutable: (file: string) => boolean;
}

export type Source = "setting" | "PATH" | "python" | "workspace";

export type Resolution =
  | { found: true; command: string; source: Source }
  | { found: false; reason: "setting" | "notFound"; tried: string[]; untrusted?: boolean };

/** Virtual environment folders looked for inside each workspace folder, in this order. */
export const WORKSPACE_VENVS = [".venv", "venv", "env", ".env"];

function pathApi(platform: string): path.PlatformPath {
  return platform === "win32" ? path.win32 : path.posix;
}

/** File names to try for `name`: on Windows also with each PATHEXT extension. */
export function executableNames(name: string, platform: string, pathExt?: string): string[] {
  if (platform !== "win32") {
    return [name];
  }
  const exts = (pathExt || ".EXE;.CMD;.BAT")
    .split(";")
    .filter((e) => e)
    .map((e) => e.toLowerCase());
  return [name, ...exts.map((e) => name + e)];
}

/** `~` and `${workspaceFolder}` / `${userHome}` in the setting, as users write them in settings.json. */
export function expandSetting(value: string, home: string, workspaceFolder: string | undefined): string {
  let out = value.trim();
  if (out === "~" || out.startsWith("~/") || out.startsWith("~\\")) {
    out = home + out.slice(1);
  }
  out = out.split("${userHome}").join(home);
  if (workspaceFolder !== undefined) {
    out = out.split("${workspaceFolder}").join(workspaceFolder);
  }
  return out;
}

/** The folder holding an environment's scripts, from its interpreter path or its own folder. */
export function scriptsDirOfPython(pythonPath: string, platform: string): string {
  const p = pathApi(platform);
  const base = p.basename(pythonPath).toLowerCase();
  if (/^python[0-9.]*(\.exe)?$/.test(base)) {
    const dir = p.dirname(pythonPath);
    // Windows: a venv's python.exe is in Scripts, a conda env's at the top (scripts in Scripts).
    if (platform === "win32" && p.basename(dir).toLowerCase() !== "scripts") {
      return p.join(dir, "Scripts");
    }
    return dir;
  }
  return p.join(pythonPath, platform === "win32" ? "Scripts" : "bin");
}

function firstIn(dirs: string[], names: string[], input: ResolveInput, tried: string[]): string | undefined {
  const p = pathApi(input.platform);
  for (const dir of dirs) {
    for (const name of names) {
      const file = p.join(dir, name);
      tried.push(file);
      if (input.isExecutable(file)) {
        return file;
      }
    }
  }
  return undefined;
}

function pathDirs(input: ResolveInput): string[] {
  return input.pathEnv.split(pathApi(input.platform).delimiter).filter((d) => d);
}

function fromSetting(input: ResolveInput): Resolution {
  const p = pathApi(input.platform);
  const value = expandSetting(input.setting, input.home, input.workspaceFolders[0]);
  const hasDir = value.includes("/") || (input.platform === "win32" && value.includes("\\"));
  if (hasDir) {
    const root = input.workspaceFolders[0];
    const file = p.isAbsolute(value) || root === undefined ? value : p.join(root, value);
    return input.isExecutable(file)
      ? { found: true, command: file, source: "setting" }
      : { found: false, reason: "setting", tried: [file] };
  }
  // A bare name ("citewise", "citewise-dev"): looked up on PATH, as a shell would.
  const tried: string[] = [];
  const hit = firstIn(pathDirs(input), executableNames(value, input.platform, input.pathExt), input, tried);
  return hit ? { found: true, command: hit, source: "setting" } : { found: false, reason: "setting", tried };
}

/** Find the server executable; `tried` lists every path looked at, for the output channel. */
export function resolveServerCommand(input: ResolveInput): Resolution {
  if (input.setting.trim()) {
    return fromSetting(input);
  }
  const p = pathApi(input.platform);
  const tried: string[] = [];
  const names = executableNames("citewise", input.platform, input.pathExt);
  const onPath = firstIn(pathDirs(input), names, input, tried);
  if (onPath) {
    return { found: true, command: onPath, source: "PATH" };
  }
  if (input.trusted === false) {
    return { found: false, reason: "notFound", tried, untrusted: true };
  }
  if (input.pythonPath) {
    const hit = firstIn([scriptsDirOfPython(input.pythonPath, input.platform)], names, input, tried);
    if (hit) {
      return { found: true, command: hit, source: "python" };
    }
  }
  const bin = input.platform === "win32" ? "Scripts" : "bin";
  const venvDirs = input.workspaceFolders.flatMap((folder) => WORKSPACE_VENVS.map((v) => p.join(folder, v, bin)));
  const inWorkspace = firstIn(venvDirs, names, input, tried);
  if (inWorkspace) {
    return { found: true, command: inWorkspace, source: "workspace" };
  }
  return { found: false, reason: "notFound", tried };
}

/** The notification shown when there is no server to start (plain text: notifications do not render Markdown). */
export function missingMessage(res: Resolution & { found: false }, setting: string): string {
  if (res.reason === "setting") {
    return (
      `citewise: the setting "citewise.server.command" is "${setting}", but no executable was found there ` +
      `(${res.tried.length === 1 ? res.tried[0] : "looked on PATH"}). Fix the setting or clear it to look for citewise ` +
      `automatically, then run "citewise: Restart server".`
    );
  }
  if (res.untrusted) {
    return (
      'citewise: no "citewise" executable on PATH, and this workspace is not trusted, so its Python environments ' +
      'are not searched. Trust the workspace, or set "citewise.server.command" in your user settings, then run ' +
      '"citewise: Restart server".'
    );
  }
  return (
    "citewise: the citewise language server is not installed, so there are no citation suggestions. " +
    'No "citewise" executable was found on PATH, in the selected Python environment or in a .venv/venv of ' +
    'this workspace. Install it (Python 3.11+), or set "citewise.server.command" to its path, ' +
    'then run "citewise: Restart server".'
  );
}
