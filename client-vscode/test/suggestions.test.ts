import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { keepLabelDetails } from "../src/labels";
import { parseSuggestions, pickRow, shortAuthors } from "../src/suggestions";

const row = {
  paperId: 42,
  key: "vaswani2017attention",
  title: "Attention Is All You Need",
  year: 2017,
  authors: ["Ashish Vaswani", "Noam Shazeer", "Niki Parmar", "Jakob Uszkoreit"],
  venue: "NeurIPS",
  doi: null,
  score: 0.9,
  reasons: ["matches the draft's abstract", "cited by 3 close papers"],
  inBib: false,
};

describe("draft suggestions", () => {
  it("shows title, authors and year, and the reason and key", () => {
    const [s] = parseSuggestions([row]);
    assert.deepEqual(pickRow(s), {
      label: "Attention Is All You Need",
      description: "Ashish Vaswani, Noam Shazeer, Niki Parmar et al. · 2017",
      detail: "matches the draft's abstract; cited by 3 close papers — adds vaswani2017attention to your .bib",
    });
    const mine = pickRow({ ...s, inBib: true, reasons: [], year: null, authors: [] });
    assert.deepEqual(mine, { label: "Attention Is All You Need", description: "n.d.", detail: "already in your .bib as vaswani2017attention" });
  });

  it("shortens author lists", () => {
    assert.equal(shortAuthors([]), "");
    assert.equal(shortAuthors(["A"]), "A");
    assert.equal(shortAuthors(["A", "B"]), "A and B");
    assert.equal(shortAuthors(["A", "B", "C"]), "A, B and C");
  });

  it("drops malformed rows and keeps the rest", () => {
    const out = parseSuggestions([null, { key: "x" }, { paperId: 1, key: "k", authors: [3, "Ann"], reasons: "no" }]);
    assert.equal(out.length, 1);
    assert.deepEqual(out[0].authors, ["Ann"]);
    assert.deepEqual(out[0].reasons, []);
    assert.deepEqual(parseSuggestions({}), []);
  });
});

describe("keepLabelDetails", () => {
  it("puts the shown title and year back on an item resolved without them", () => {
    const shown = { label: { label: "vaswani2017attention", description: "Attention Is All You Need (2017)" } };
    const resolved = keepLabelDetails(shown, { label: "vaswani2017attention", documentation: "..." });
    assert.deepEqual(resolved?.label, shown.label);
  });

  it("leaves items alone when the server sends its own details or another label", () => {
    const shown = { label: { label: "a", description: "old" } };
    const own = { label: { label: "a", description: "new" } };
    assert.deepEqual(keepLabelDetails(shown, own)?.label, { label: "a", description: "new" });
    assert.equal(keepLabelDetails(shown, { label: "b" })?.label, "b");
    assert.equal(keepLabelDetails({ label: "a" }, { label: "a" })?.label, "a");
    assert.equal(keepLabelDetails(shown, undefined), undefined);
  });
});
