/**
 * What the status-bar item says: the server's state and the store's paper count, from the
 * answer of the server's `citewise.status` command (see server/state.py `status`).
 */

/**
 * What one kind of source gave the store (server/state.py `source_summary`, computed by
 * indexer/store_summary.py): papers, abstracts, citation edges and how many reach a stored paper,
 * citing sentences.
 */
export interface SourceSummary {
  kind: string;
  files: number;
  papers: number;
  abstracts: number;
  edges: number;
  resolvedEdges: number;
  sentences: number;
}

/** The fields of `citewise.status` the status bar uses (the server sends more). */
export interface ServerStatus {
  ready: boolean;
  papers: number;
  store: string;
  reindexing: boolean;
  pendingEntries?: number;
  rssMB?: number | null;
  /** Per kind of source; absent from an older server, and until the server has summarised its store. */
  sources?: SourceSummary[];
}

export type ServerState = "starting" | "ready" | "indexing" | "error" | "missing" | "stopped";

export interface StatusView {
  text: string;
  tooltip: string;
  state: ServerState;
}

/** The server's state from its status answer (undefined: no answer yet). */
export function stateOf(status: ServerStatus | undefined, reindexing = false): ServerState {
  if (status === undefined) {
    return "starting";
  }
  if (status.reindexing || reindexing) {
    return "indexing";
  }
  return status.ready ? "ready" : "starting";
}

/** `109,569` (locale independent, so the tests and every user read the same). */
export function formatCount(n: number): string {
  const digits = String(Math.abs(Math.round(n)));
  const groups: string[] = [];
  for (let end = digits.length; end > 0; end -= 3) {
    groups.unshift(digits.slice(Math.max(0, end - 3), end));
  }
  return (n < 0 ? "-" : "") + groups.join(",");
}

function papers(n: number): string {
  return `${formatCount(n)} ${n === 1 ? "paper" : "papers"}`;
}

function counted(n: number, one: string, many: string): string {
  return `${formatCount(n)} ${n === 1 ? one : many}`;
}

/**
 * One tooltip line for a kind of source, naming only what it gave: "openalex (2 files): 49 papers,
 * 46 with abstract, 930 citation edges (12% to stored papers)". The share says whether the edges
 * help: an edge to a paper the store lacks feeds neither the citing-sentence index nor the prior.
 */
export function sourceLine(s: SourceSummary): string {
  const parts: string[] = [];
  if (s.papers > 0) {
    parts.push(papers(s.papers));
  }
  if (s.abstracts > 0) {
    parts.push(s.papers > 0 ? `${formatCount(s.abstracts)} with abstract` : counted(s.abstracts, "abstract", "abstracts"));
  }
  if (s.edges > 0) {
    const share = Math.round((100 * s.resolvedEdges) / s.edges);
    parts.push(`${counted(s.edges, "citation edge", "citation edges")} (${share}% to stored papers)`);
  }
  if (s.sentences > 0) {
    parts.push(counted(s.sentences, "citing sentence", "citing sentences"));
  }
  const files = s.files === 1 ? "" : ` (${counted(s.files, "file", "files")})`;
  return `${s.kind}${files}: ${parts.length > 0 ? parts.join(", ") : "nothing"}`;
}

/** The tooltip's per-source block ("" when the server sent none). */
export function sourcesBlock(sources: SourceSummary[] | undefined): string {
  if (sources === undefined || sources.length === 0) {
    return "";
  }
  return `\nBy source:\n${sources.map((s) => `  ${sourceLine(s)}`).join("\n")}`;
}

/** The status-bar text ($(icon) codicons) and tooltip for a state. */
export function statusView(state: ServerState, status?: ServerStatus, detail?: string): StatusView {
  const tail = "\nClick to show the citewise output.";
  const store = status ? `\nStore: ${status.store}` : "";
  switch (state) {
    case "ready": {
      const n = status?.papers ?? 0;
      const empty = n === 0 ? "\nThe store is empty: import your library with `citewise index YOUR_LIBRARY.bib`." : "";
      const mem = status?.rssMB ? `\nServer memory: ${status.rssMB} MB` : "";
      const sources = sourcesBlock(status?.sources);
      return {
        state,
        text: n === 0 ? "$(warning) citewise: 0 papers" : `$(book) ${papers(n)}`,
        tooltip: `citewise is ready: ${papers(n)} in the store.${store}${sources}${mem}${empty}${tail}`,
      };
    }
    case "indexing":
      return {
        state,
        text: `$(sync~spin) citewise: indexing${status ? ` (${papers(status.papers)})` : ""}`,
        tooltip: `citewise is reindexing the paper store; suggestions come from the old index until it is done.${store}${tail}`,
      };
    case "starting":
      return { state, text: "$(loading~spin) citewise", tooltip: `citewise is starting.${store}${tail}` };
    case "missing":
      return {
        state,
        text: "$(error) citewise: not installed",
        tooltip: `The citewise language server was not found${detail ? `: ${detail}` : ""}.${tail}`,
      };
    case "stopped":
      return { state, text: "$(circle-slash) citewise", tooltip: `citewise is stopped.${tail}` };
    default:
      return {
        state,
        text: "$(error) citewise",
        tooltip: `citewise: ${detail ?? "the server is not running"}.${tail}`,
      };
  }
}

/** How long to wait before asking the server again: often while it changes, rarely when idle. */
export function pollDelayMs(state: ServerState): number {
  return state === "starting" || state === "indexing" ? 1500 : 15000;
}

/** Parse the server's answer, tolerating a server that sends fewer fields (an older citewise). */
export function parseStatus(value: unknown): ServerStatus | undefined {
  if (value === null || typeof value !== "object") {
    return undefined;
  }
  const v = value as Record<string, unknown>;
  return {
    ready: v.ready === true,
    papers: typeof v.papers === "number" ? v.papers : 0,
    store: typeof v.store === "string" ? v.store : "",
    reindexing: v.reindexing === true,
    pendingEntries: typeof v.pendingEntries === "number" ? v.pendingEntries : undefined,
    rssMB: typeof v.rssMB === "number" ? v.rssMB : null,
    sources: parseSources(v.sources),
  };
}

function count(value: unknown): number {
  return typeof value === "number" && Number.isFinite(value) && value >= 0 ? value : 0;
}

/** The per-source summary, rows without a kind dropped and missing counts read as 0. */
function parseSources(value: unknown): SourceSummary[] | undefined {
  if (!Array.isArray(value)) {
    return undefined;
  }
  const out: SourceSummary[] = [];
  for (const item of value) {
    if (item === null || typeof item !== "object" || typeof (item as { kind?: unknown }).kind !== "string") {
      continue;
    }
    const r = item as Record<string, unknown>;
    out.push({
      kind: r.kind as string,
      files: count(r.files),
      papers: count(r.papers),
      abstracts: count(r.abstracts),
      edges: count(r.edges),
      resolvedEdges: Math.min(count(r.resolvedEdges), count(r.edges)),
      sentences: count(r.sentences),
    });
  }
  return out;
}
