import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { formatCount, parseStatus, pollDelayMs, sourceLine, stateOf, statusView } from "../src/status";

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
      sources: undefined,
    });
    assert.equal(parseStatus({})?.papers, 0);
  });

  // The figures of `citewise info` on the ACM-CR store with the shared ACL citation files.
  const acm = [
    { kind: "bibtex", files: 903, papers: 109569, abstracts: 98556, edges: 0, resolvedEdges: 0, sentences: 0 },
    { kind: "jsonl", files: 1, papers: 967, abstracts: 946, edges: 0, resolvedEdges: 0, sentences: 0 },
    { kind: "citations", files: 2, papers: 0, abstracts: 0, edges: 116977, resolvedEdges: 54056, sentences: 14987 },
  ];

  it("lists what each kind of source gave the store in the tooltip", () => {
    const status = parseStatus({ ...ready, sources: acm });
    const v = statusView(stateOf(status), status);
    const lines = v.tooltip.split("\n");
    const at = lines.indexOf("By source:");
    assert.ok(at > 0, v.tooltip);
    assert.deepEqual(lines.slice(at + 1, at + 4), [
      "  bibtex (903 files): 109,569 papers, 98,556 with abstract",
      "  jsonl: 967 papers, 946 with abstract",
      "  citations (2 files): 116,977 citation edges (46% to stored papers), 14,987 citing sentences",
    ]);
    assert.equal(v.text, "$(book) 109,569 papers");
  });

  it("names abstracts kept apart and sources that gave nothing", () => {
    const row = { kind: "s2ag-abstracts", files: 1, papers: 0, abstracts: 1, edges: 0, resolvedEdges: 0, sentences: 0 };
    assert.equal(sourceLine(row), "s2ag-abstracts: 1 abstract");
    assert.equal(sourceLine({ ...row, abstracts: 0 }), "s2ag-abstracts: nothing");
    const edge = { ...row, kind: "s2ag-citations", abstracts: 0, edges: 3, resolvedEdges: 1, sentences: 1 };
    assert.equal(sourceLine(edge), "s2ag-citations: 3 citation edges (33% to stored papers), 1 citing sentence");
  });

  it("leaves the block out until the server has a summary, and reads bad rows safely", () => {
    const none = statusView("ready", parseStatus({ ...ready }));
    assert.doesNotMatch(none.tooltip, /By source/);
    const parsed = parseStatus({ ...ready, sources: [null, { papers: 3 }, { kind: "bibtex", papers: "x", edges: 2, resolvedEdges: 9 }] });
    assert.deepEqual(parsed?.sources, [
      { kind: "bibtex", files: 0, papers: 0, abstracts: 0, edges: 2, resolvedEdges: 2, sentences: 0 },
    ]);
    assert.equal(parseStatus({ ...ready, sources: "no" })?.sources, undefined);
  });
});
