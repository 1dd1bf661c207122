import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { PercentTracker } from "../src/progress";

describe("PercentTracker", () => {
  it("turns the server's absolute percentages into increments", () => {
    const t = new PercentTracker();
    assert.deepEqual(t.step({ kind: "begin", title: "citewise: reindexing", percentage: 0 }), {});
    assert.deepEqual(t.step({ kind: "report", message: "importing a.bib (1/2)", percentage: 40 }), {
      message: "importing a.bib (1/2)",
      increment: 40,
    });
    assert.deepEqual(t.step({ kind: "report", percentage: 92 }), { increment: 52 });
  });

  it("never goes backwards or past 100", () => {
    const t = new PercentTracker();
    t.step({ kind: "report", percentage: 50 });
    assert.deepEqual(t.step({ kind: "report", message: "m", percentage: 30 }), { message: "m" });
    assert.deepEqual(t.step({ kind: "report", percentage: 250 }), { increment: 50 });
  });
});
