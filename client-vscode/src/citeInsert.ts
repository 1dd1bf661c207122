/**
 * What goes around a key inserted at the cursor by "Suggest references for this draft": inside
 * a citation (`\citep[p.~3]{smith2020,|}`, `[@smith2020; |]`) only a separator, elsewhere a whole
 * citation (`\cite{KEY}`, `[@KEY]`). The key itself and the BibTeX entry come from the server
 * (`citewise.insertCitation`), which fills the slot between `prefix` and `suffix`.
 * Linear scans of the current line only; no regular expressions over the user's text.
 */
export type DraftLanguage = "latex" | "markdown";

export interface Wrapper {
  /** Inserted before the key. */
  prefix: string;
  /** Inserted after the key. */
  suffix: string;
  /** True when the cursor is inside an existing citation. */
  inside: boolean;
}

const LATEX_IDS = new Set(["latex", "tex", "plaintex", "context", "latex-expl3", "doctex"]);

/** Which syntax a VS Code language id (or, failing that, the file name) calls for. */
export function draftLanguage(languageId: string, fileName: string): DraftLanguage {
  if (LATEX_IDS.has(languageId.toLowerCase())) {
    return "latex";
  }
  if (languageId === "markdown" || languageId === "quarto" || languageId === "rmd") {
    return "markdown";
  }
  return fileName.toLowerCase().endsWith(".tex") ? "latex" : "markdown";
}

function isLetter(ch: string): boolean {
  return (ch >= "a" && ch <= "z") || (ch >= "A" && ch <= "Z");
}

/** Whether `text` (everything before an opening `{`) ends with a cite command and its options. */
export function endsWithCiteCommand(text: string): boolean {
  let i = text.length - 1;
  for (let groups = 0; groups < 2 && i >= 0 && text[i] === "]"; groups++) {
    const open = text.lastIndexOf("[", i);
    if (open < 0) {
      return false;
    }
    i = open - 1;
  }
  if (i >= 0 && text[i] === "*") {
    i--;
  }
  const end = i + 1;
  while (i >= 0 && isLetter(text[i])) {
    i--;
  }
  if (i < 0 || text[i] !== "\\" || i + 1 === end) {
    return false;
  }
  return text.slice(i + 1, end).toLowerCase().includes("cite");
}

function latexWrapper(before: string, after: string): Wrapper {
  const open = before.lastIndexOf("{");
  if (open >= 0 && open > before.lastIndexOf("}") && endsWithCiteCommand(before.slice(0, open))) {
    const inner = before.slice(open + 1).trimEnd();
    const next = after.trimStart();
    return {
      prefix: inner === "" || inner.endsWith(",") ? "" : ",",
      suffix: next === "" || next.startsWith("}") || next.startsWith(",") ? "" : ",",
      inside: true,
    };
  }
  return { prefix: "\\cite{", suffix: "}", inside: false };
}

function markdownWrapper(before: string, after: string): Wrapper {
  if (before.endsWith("@")) {
    return { prefix: "", suffix: "", inside: true };
  }
  const open = before.lastIndexOf("[");
  if (open >= 0 && open > before.lastIndexOf("]")) {
    const inner = before.slice(open + 1).trimEnd();
    if (inner === "" || inner.includes("@")) {
      const next = after.trimStart();
      return {
        prefix: inner === "" ? "@" : inner.endsWith(";") ? " @" : "; @",
        suffix: next === "" || next.startsWith("]") || next.startsWith(";") ? "" : ";",
        inside: true,
      };
    }
  }
  return { prefix: "[@", suffix: "]", inside: false };
}

/** The text around a key inserted between `before` and `after` (the cursor's line, split at the cursor). */
export function citationWrapper(lang: DraftLanguage, before: string, after: string): Wrapper {
  return lang === "latex" ? latexWrapper(before, after) : markdownWrapper(before, after);
}
