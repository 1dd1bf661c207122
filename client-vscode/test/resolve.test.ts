import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { executableNames, expandSetting, missingMessage, ResolveInput, resolveServerCommand, scriptsDirOfPython } from "../src/resolve";

function input(files: string[], over: Partial<ResolveInput> = {}): ResolveInput {
  const set = new Set(files);
  return {
    setting: "",
    pathEnv: "/usr/local/bin:/usr/bin",
    platform: "linux",
    home: "/home/ada",
    workspaceFolders: ["/work/paper"],
    isExecutable: (f) => set.has(f),
    ...over,
  };
}

describe("resolveServerCommand", () => {
  it("takes citewise from PATH first", () => {
    const r = resolveServerCommand(input(["/usr/bin/citewise", "/work/paper/.venv/bin/citewise"]));
    assert.deepEqual(r, { found: true, command: "/usr/bin/citewise", source: "PATH" });
  });

  it("then the selected Python environment's interpreter folder", () => {
    const r = resolveServerCommand(
      input(["/opt/envs/cw/bin/citewise", "/work/paper/.venv/bin/citewise"], { pythonPath: "/opt/envs/cw/bin/python3.12" }),
    );
    assert.deepEqual(r, { found: true, command: "/opt/envs/cw/bin/citewise", source: "python" });
  });

  it("then a workspace virtual environment, .venv before venv, first folder first", () => {
    const r = resolveServerCommand(
      input(["/work/paper/venv/bin/citewise", "/work/other/.venv/bin/citewise"], { workspaceFolders: ["/work/paper", "/work/other"] }),
    );
    assert.deepEqual(r, { found: true, command: "/work/paper/venv/bin/citewise", source: "workspace" });
  });

  it("never runs an untrusted workspace's own environment", () => {
    const files = ["/work/paper/.venv/bin/citewise", "/opt/envs/cw/bin/citewise"];
    const r = resolveServerCommand(input(files, { trusted: false, pythonPath: "/opt/envs/cw/bin/python" }));
    assert.equal(r.found, false);
    if (!r.found) {
      assert.equal(r.untrusted, true);
      assert.ok(!r.tried.some((t) => t.startsWith("/work/paper") || t.startsWith("/opt")));
      assert.match(missingMessage(r, ""), /not trusted/);
    }
    const onPath = resolveServerCommand(input(["/usr/bin/citewise", ...files], { trusted: false }));
    assert.equal(onPath.found && onPath.command, "/usr/bin/citewise");
    const trusted = resolveServerCommand(input(files, { trusted: true }));
    assert.equal(trusted.found && trusted.source, "workspace");
  });

  it("reports every place it looked when nothing is found", () => {
    const r = resolveServerCommand(input([], { pythonPath: "/opt/envs/cw/bin/python" }));
    assert.equal(r.found, false);
    if (!r.found) {
      assert.equal(r.reason, "notFound");
      assert.ok(r.tried.includes("/usr/bin/citewise"));
      assert.ok(r.tried.includes("/opt/envs/cw/bin/citewise"));
      assert.ok(r.tried.includes("/work/paper/.venv/bin/citewise"));
      assert.match(missingMessage(r, ""), /not installed/);
    }
  });

  it("uses the setting, expanding ~ and ${workspaceFolder}, and never falls back when it is wrong", () => {
    const ok = resolveServerCommand(input(["/home/ada/.local/bin/citewise"], { setting: "~/.local/bin/citewise" }));
    assert.deepEqual(ok, { found: true, command: "/home/ada/.local/bin/citewise", source: "setting" });
    const rel = resolveServerCommand(input(["/work/paper/tools/citewise"], { setting: "${workspaceFolder}/tools/citewise" }));
    assert.equal(rel.found && rel.command, "/work/paper/tools/citewise");
    const relative = resolveServerCommand(input(["/work/paper/bin/cw"], { setting: "bin/cw" }));
    assert.equal(relative.found && relative.command, "/work/paper/bin/cw");
    const wrong = resolveServerCommand(input(["/usr/bin/citewise"], { setting: "/nope/citewise" }));
    assert.equal(wrong.found, false);
    if (!wrong.found) {
      assert.equal(wrong.reason, "setting");
      assert.match(missingMessage(wrong, "/nope/citewise"), /"citewise.server.command" is "\/nope\/citewise"/);
    }
  });

  it("looks a bare command name up on PATH", () => {
    const r = resolveServerCommand(input(["/usr/local/bin/citewise-dev"], { setting: "citewise-dev" }));
    assert.deepEqual(r, { found: true, command: "/usr/local/bin/citewise-dev", source: "setting" });
  });

  it("finds citewise.exe on Windows, in PATH and in a venv's Scripts", () => {
    const win = { platform: "win32", pathEnv: "C:\\tools;C:\\bin", pathExt: ".COM;.EXE", workspaceFolders: ["C:\\paper"] };
    const onPath = resolveServerCommand(input(["C:\\bin\\citewise.exe"], win));
    assert.equal(onPath.found && onPath.command, "C:\\bin\\citewise.exe");
    const venv = resolveServerCommand(input(["C:\\paper\\.venv\\Scripts\\citewise.exe"], win));
    assert.deepEqual(venv, { found: true, command: "C:\\paper\\.venv\\Scripts\\citewise.exe", source: "workspace" });
  });
});

describe("helpers", () => {
  it("scriptsDirOfPython: interpreter or environment folder", () => {
    assert.equal(scriptsDirOfPython("/e/bin/python", "linux"), "/e/bin");
    assert.equal(scriptsDirOfPython("/e", "linux"), "/e/bin");
    assert.equal(scriptsDirOfPython("C:\\e\\Scripts\\python.exe", "win32"), "C:\\e\\Scripts");
    assert.equal(scriptsDirOfPython("C:\\conda\\envs\\x\\python.exe", "win32"), "C:\\conda\\envs\\x\\Scripts");
  });

  it("executableNames adds PATHEXT on Windows only", () => {
    assert.deepEqual(executableNames("citewise", "linux"), ["citewise"]);
    assert.deepEqual(executableNames("citewise", "win32", ".EXE;.CMD"), ["citewise", "citewise.exe", "citewise.cmd"]);
  });

  it("expandSetting leaves other text alone", () => {
    assert.equal(expandSetting(" /a/~b ", "/h", "/w"), "/a/~b");
    assert.equal(expandSetting("${userHome}/x", "/h", undefined), "/h/x");
  });
});
