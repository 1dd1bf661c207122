import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { filterConfigurationResult, serverSettings } from "../src/settings";

describe("serverSettings", () => {
  it("drops the extension's own keys and keeps the server's", () => {
    const section = { server: { command: "/x" }, trace: { server: "verbose" }, k: 5, store: "/s.sqlite", bibliography: ["a.bib"], rerank: false };
    assert.deepEqual(serverSettings(section), { k: 5, store: "/s.sqlite", bibliography: ["a.bib"], rerank: false });
  });

  it("copies plain JSON (functions of a WorkspaceConfiguration are not sent)", () => {
    const section = { k: 7, get: () => 1, has: () => true };
    assert.deepEqual(serverSettings(section), { k: 7 });
  });

  it("sends a value outside package.json's enum as it is (the server maps prefetch 'hatten' to 'dense' and says so)", () => {
    assert.deepEqual(serverSettings({ prefetch: "hatten" }), { prefetch: "hatten" });
    assert.deepEqual(serverSettings({ prefetch: "dense" }), { prefetch: "dense" });
  });

  it("answers {} for anything that is not an object", () => {
    for (const v of [undefined, null, 3, "x", [1]]) {
      assert.deepEqual(serverSettings(v), {});
    }
  });

  it("filters only the citewise items of a workspace/configuration answer", () => {
    const out = filterConfigurationResult(["citewise", "editor"], [{ k: 3, trace: { server: "off" } }, { tabSize: 2 }]);
    assert.deepEqual(out, [{ k: 3 }, { tabSize: 2 }]);
  });
});
