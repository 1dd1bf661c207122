import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { formatCount, parseStatus, pollDelayMs, stateOf, statusView } from "../src/status";

const ready = { ready: true, papers: 109569, store: "/d/acm.sqlite", reindexing: false, rssMB: 310.5 };

describe("status bar", () => {
  it("formats counts with thousands separators", () => {
    assert.equal(formatCount(0), "0");
    assert.equal(formatCount(999), "999");
    assert.equal(formatCount(1000), "1,000");
    assert.equal(formatCount(109569), "109,569");
    assert.equal(formatCount(1234567), "1,234,567");
  });

  it("shows the paper count when ready", () => {
    const v = statusView(stateOf(ready), ready);
    assert.equal(v.state, "ready");
    assert.equal(v.text, "$(book) 109,569 papers");
    assert.match(v.tooltip, /\/d\/acm\.sqlite/);
  });

  it("warns when the store is empty", () => {
    const empty = { ...ready, papers: 0 };
    const v = statusView(stateOf(empty), empty);
    assert.match(v.text, /0 papers/);
    assert.match(v.tooltip, /citewise index/);
  });

  it("is starting before the store is loaded and indexing during a reindex", () => {
    assert.equal(stateOf(undefined), "starting");
    assert.equal(stateOf({ ...ready, ready: false }), "starting");
    assert.equal(stateOf({ ...ready, reindexing: true }), "indexing");
    assert.equal(stateOf(ready, true), "indexing");
    assert.match(statusView("indexing", ready).text, /indexing \(109,569 papers\)/);
  });

  it("says when the server is missing or broken", () => {
    assert.match(statusView("missing", undefined, "install it").text, /not installed/);
    assert.match(statusView("error", undefined, "crashed").tooltip, /crashed/);
  });

  it("polls often while things change", () => {
    assert.ok(pollDelayMs("starting") < pollDelayMs("ready"));
    assert.ok(pollDelayMs("indexing") < pollDelayMs("ready"));
  });

  it("parses the server's answer defensively", () => {
    assert.equal(parseStatus(null), undefined);
    assert.deepEqual(parseStatus({ ready: true, papers: 3, store: "s", reindexing: false, rssMB: 1 }), {
      ready: true,
      papers: 3,
      store: "s",
      reindexing: false,
      pendingEntries: undefined,
      rssMB: 1,
    });
    assert.equal(parseStatus({})?.papers, 0);
  });
});
