import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { citationWrapper, draftLanguage, endsWithCiteCommand } from "../src/citeInsert";

/** The line after inserting KEY at "|" of `line`. */
function cite(lang: "latex" | "markdown", line: string): string {
  const at = line.indexOf("|");
  const before = line.slice(0, at);
  const after = line.slice(at + 1);
  const w = citationWrapper(lang, before, after);
  return before + w.prefix + "KEY" + w.suffix + after;
}

describe("citationWrapper (LaTeX)", () => {
  it("wraps a key in \\cite{} outside a citation", () => {
    assert.equal(cite("latex", "as shown by |."), "as shown by \\cite{KEY}.");
    assert.equal(cite("latex", "see \\cite{a} and |"), "see \\cite{a} and \\cite{KEY}");
    assert.equal(cite("latex", "\\textbf{bold |}"), "\\textbf{bold \\cite{KEY}}");
  });

  it("adds only the key inside a citation, with commas where needed", () => {
    assert.equal(cite("latex", "\\cite{|}"), "\\cite{KEY}");
    assert.equal(cite("latex", "\\citep[see][p.~3]{a|}"), "\\citep[see][p.~3]{a,KEY}");
    assert.equal(cite("latex", "\\parencite*{a, |}"), "\\parencite*{a, KEY}");
    assert.equal(cite("latex", "\\cite{|b}"), "\\cite{KEY,b}");
    assert.equal(cite("latex", "\\citet{a,|,b}"), "\\citet{a,KEY,b}");
  });

  it("recognises cite commands only", () => {
    assert.equal(endsWithCiteCommand("\\autocite[x]"), true);
    assert.equal(endsWithCiteCommand("\\Citeauthor"), true);
    assert.equal(endsWithCiteCommand("\\ref"), false);
    assert.equal(endsWithCiteCommand("cite"), false);
    assert.equal(endsWithCiteCommand("\\cite]"), false);
  });
});

describe("citationWrapper (Markdown)", () => {
  it("wraps a key in [@] outside a citation", () => {
    assert.equal(cite("markdown", "as shown by |."), "as shown by [@KEY].");
    assert.equal(cite("markdown", "a [link](x) |"), "a [link](x) [@KEY]");
  });

  it("adds the key inside a Pandoc citation", () => {
    assert.equal(cite("markdown", "[|]"), "[@KEY]");
    assert.equal(cite("markdown", "[@a|]"), "[@a; @KEY]");
    assert.equal(cite("markdown", "[see @a, p. 3;|]"), "[see @a, p. 3; @KEY]");
    assert.equal(cite("markdown", "as @| says"), "as @KEY says");
  });

  it("picks the syntax from the language id, then the file name", () => {
    assert.equal(draftLanguage("latex", "x.tex"), "latex");
    assert.equal(draftLanguage("quarto", "x.qmd"), "markdown");
    assert.equal(draftLanguage("plaintext", "/a/x.TEX"), "latex");
    assert.equal(draftLanguage("plaintext", "/a/x.md"), "markdown");
  });
});
