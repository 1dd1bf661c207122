/**
 * The answer of the server's `citewise.suggestForDraft` (server/handlers/commands.py) as quick-pick
 * rows: title first (what a user recognises), then authors and year, then why it was suggested
 * and the key it will be cited as.
 */

export interface DraftSuggestion {
  paperId: number;
  key: string;
  title: string;
  year: number | null;
  authors: string[];
  venue: string;
  reasons: string[];
  inBib: boolean;
}

export interface PickRow {
  label: string;
  description: string;
  detail: string;
}

/** `Vaswani, Shazeer and Parmar`, `Vaswani, Shazeer, Parmar et al.` past three. */
export function shortAuthors(authors: string[], max = 3): string {
  const names = authors.filter((a) => a.trim() !== "");
  if (names.length === 0) {
    return "";
  }
  if (names.length > max) {
    return `${names.slice(0, max).join(", ")} et al.`;
  }
  if (names.length === 1) {
    return names[0];
  }
  return `${names.slice(0, -1).join(", ")} and ${names[names.length - 1]}`;
}

export function pickRow(s: DraftSuggestion): PickRow {
  const year = s.year ? String(s.year) : "n.d.";
  const authors = shortAuthors(s.authors);
  const why = s.reasons.filter((r) => r).join("; ");
  const where = s.inBib ? `already in your .bib as ${s.key}` : `adds ${s.key} to your .bib`;
  return {
    label: s.title || s.key,
    description: authors ? `${authors} · ${year}` : year,
    detail: why ? `${why} — ${where}` : where,
  };
}

/** The server's list, with malformed rows dropped (a partial answer is still useful). */
export function parseSuggestions(value: unknown): DraftSuggestion[] {
  if (!Array.isArray(value)) {
    return [];
  }
  const out: DraftSuggestion[] = [];
  for (const v of value) {
    if (v === null || typeof v !== "object") {
      continue;
    }
    const r = v as Record<string, unknown>;
    if (typeof r.paperId !== "number" || typeof r.key !== "string") {
      continue;
    }
    out.push({
      paperId: r.paperId,
      key: r.key,
      title: typeof r.title === "string" ? r.title : "",
      year: typeof r.year === "number" ? r.year : null,
      authors: Array.isArray(r.authors) ? r.authors.filter((a): a is string => typeof a === "string") : [],
      venue: typeof r.venue === "string" ? r.venue : "",
      reasons: Array.isArray(r.reasons) ? r.reasons.filter((a): a is string => typeof a === "string") : [],
      inBib: r.inBib === true,
    });
  }
  return out;
}
