"""What ``citewise fetch --around`` gives and costs, measured against the simulated APIs over the ACL
graph (``bench/fetch_simulator.py``); prints JSON.

Why these figures (issue: "your field in one command"): a user seeds a fetch with their draft's
bibliography, so the question is how much of what the draft goes on to cite lands in the store,
for how many requests and how long at the public rate limits; whether the client, not the API, is
ever the bottleneck; and whether a fetch killed at any moment and run again leaves the very store
an uninterrupted run leaves.

- coverage: for ACL dev papers (ScisummNet citing papers of 2013-2014), each paper's references
  in the ACL edges (those the API can know: not of the dev years) are cut in half at random
  (seeded); the first half becomes a ``.bib`` (title, authors, year, venue, DOI where the Anthology
  has one, as its BibTeX export gives them) and ``citewise fetch --around`` it one hop fetches
  into a new store; the share of the other half that lands in it is the coverage. The simulator
  runs unthrottled and the client's rate limits are lifted for speed; the time at the public rate
  limits (S2 1 request/s, OpenAlex's polite pool 10/s) is computed from the requests counted.
- speed: the unmodified client against a simulator throttled at the public S2 limit (and at the
  key limit, 10/s): requests per second achieved over the S2 phase, 429s met, and the client's own
  CPU seconds; ``--speed-repeats`` runs each (the median reported), ``--profile DIR`` a cProfile
  of each.
- kills: one fetch killed with SIGKILL at a random moment (after a random number of requests
  served, plus a random few milliseconds) and run again, N times; each final store is compared
  with an uninterrupted run's (papers, edges with their sentences, ``PRAGMA integrity_check``).
  A fetch under seeded 500s and truncated bodies is compared the same way.

    python bench/bench_fetch.py --papers 60 --kills 10 --out /tmp/bench_fetch.json
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fetch_simulator import DATA, Graph, SimConfig, Simulator, View, load_graph  # noqa: E402

from citewise.evaluation.citances import is_acl_dev, read_jsonl  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
CITEWISE = Path(sys.executable).parent / "citewise"
S2_RATE, OPENALEX_RATE = 1.0, 10.0  # public S2 without a key; OpenAlex polite pool (mailto)
# The client with its rate limits lifted (coverage and kills run unthrottled; the speed runs do not).
UNTHROTTLED = (
    "import sys\n"
    "from citewise.indexer.fetch import openalex, s2\n"
    "s2.PUBLIC_RATE = s2.KEY_RATE = openalex.POLITE_RATE = openalex.COMMON_RATE = 10000.0\n"
    "from citewise.cli import main\n"
    "sys.exit(main(sys.argv[1:]))\n"
)
FETCH_FLAGS = ["--no-search-index", "--no-embed", "--json", "-q"]


# -- the library of a dev paper -----------------------------------------------------------------
def dev_papers(graph: Graph) -> list[str]:
    """The ACL dev papers: citing papers of the ScisummNet sentences of the dev years."""
    rows = read_jsonl(DATA / "citations" / "scisummnet-citances.jsonl")
    return sorted({r["citing"] for r in rows if is_acl_dev(r["citing"]) and r["citing"] in graph.papers})


def knowable_refs(graph: Graph, view: View, acl: str) -> list[str]:
    """A paper's references that the API can know (not of the dev years), in file order."""
    return [r for r in graph.refs.get(acl, []) if r in view.visible]


def split_half(refs: list[str], seed: int, acl: str) -> tuple[list[str], list[str]]:
    """The references cut in half at random (seeded by the paper): (seed half, held-out half)."""
    shuffled = sorted(refs)
    random.Random(f"{seed}:{acl}").shuffle(shuffled)
    half = len(shuffled) // 2
    return shuffled[:half], shuffled[half:]


def bib_entry(graph: Graph, acl: str) -> str:
    """A BibTeX entry as the Anthology exports it (no Anthology id field: citewise's .bib reader
    keeps none, so the paper is found by its DOI, else by title and year, as a user's would be)."""
    p = graph.papers[acl]
    clean = {
        "title": p.title,
        "author": " and ".join(p.authors),
        "year": str(p.year or ""),
        "journal" if p.journal else "booktitle": p.venue,
        "doi": p.doi,
        "url": f"https://aclanthology.org/{acl}",
    }
    fields = ",\n".join(f"  {k} = {{{_tex(v) if k != 'url' else v}}}" for k, v in clean.items() if v)
    kind = "article" if p.journal else "inproceedings"
    return f"@{kind}{{{acl.replace('.', '-')},\n{fields}\n}}\n"


def _tex(text: str) -> str:
    """Plain text as BibTeX reads it back: braces dropped, ``% & # _ $`` escaped (a bare ``%``
    starts a comment: "OntoNotes: The 90% Solution" would lose its title's end)."""
    text = text.replace("{", "").replace("}", "").replace("\\", " ")
    for char in "%&#_$":
        text = text.replace(char, "\\" + char)
    return text


def write_bib(path: Path, graph: Graph, papers: list[str]) -> Path:
    path.write_text("\n".join(bib_entry(graph, a) for a in papers), encoding="utf-8")
    return path


# -- running the client ------------------------------------------------------------------------------
def fetch_env(s2: Simulator, oa: Simulator) -> dict[str, str]:
    """The environment pointing every API at the simulators (nothing leaves the machine)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CITEWISE_")}
    env.update(
        CITEWISE_S2_URL=f"{s2.url}/graph/v1",
        CITEWISE_OPENALEX_URL=oa.url,
        CITEWISE_CROSSREF_URL=f"{oa.url}/crossref",
        CITEWISE_ARXIV_URL=f"{oa.url}/arxiv",
        CITEWISE_MAILTO="bench@example.org",
    )
    return env


def fetch_command(bib: Path, store: Path, *, throttled: bool, extra: list[str] | None = None) -> list[str]:
    """``citewise fetch --around BIB`` (the unmodified client when ``throttled``)."""
    head = [str(CITEWISE)] if throttled else [sys.executable, "-c", UNTHROTTLED]
    return [*head, "fetch", "--around", str(bib), "--store", str(store), *FETCH_FLAGS, *(extra or [])]


def run_fetch(cmd: list[str], env: dict[str, str], timeout: float = 900) -> dict:
    """Run one fetch to its end; its JSON summary (or the error it printed)."""
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout, check=False)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode != 0 or not lines:
        return {"rc": proc.returncode, "error": proc.stderr.strip()[-500:]}
    return json.loads(lines[-1])


def store_figures(path: Path) -> dict:
    """Papers, edges, citing sentences and bytes of a fetched store, and its Anthology ids."""
    conn = sqlite3.connect(path)
    try:
        acl = {a for (a,) in conn.execute("SELECT acl_id FROM papers WHERE acl_id != ''")}
        papers = conn.execute("SELECT count(*) FROM papers").fetchone()[0]
        edges, sentences = conn.execute(
            "SELECT count(*), coalesce(sum(context != ''), 0) FROM citation_edges"
        ).fetchone()
    finally:
        conn.close()
    size = sum(p.stat().st_size for p in path.parent.glob(path.name + "*") if p.is_file())
    return {"papers": papers, "edges": edges, "sentences": sentences, "bytes": size, "acl": acl}


# -- coverage ------------------------------------------------------------------------------------------
def one_hop(view: View, seeds: list[str]) -> set[str]:
    """What one hop around the seeds could reach at most (no --limit): seeds, references, citers."""
    out = set(seeds)
    for s in seeds:
        out.update(view.refs.get(s, ()), view.cites.get(s, ()))
    return out


def coverage_one(
    graph: Graph, sims: tuple[Simulator, Simulator], acl: str, work: Path, args, limit: int
) -> dict:
    """One dev paper: seed half fetched one hop; what of the held-out half landed, at what cost."""
    s2, oa = sims
    seeds, held = split_half(knowable_refs(graph, s2.view, acl), args.seed, acl)
    folder = work / acl.replace(".", "-")
    folder.mkdir(parents=True, exist_ok=True)
    bib = write_bib(folder / "draft.bib", graph, seeds)
    s2.reset()
    oa.reset()
    t0 = time.perf_counter()
    cmd = fetch_command(bib, folder / "store.sqlite", throttled=False, extra=["--limit", str(limit)])
    summary = run_fetch(cmd, fetch_env(s2, oa))
    seconds = time.perf_counter() - t0
    figures = store_figures(folder / "store.sqlite") if "error" not in summary else {"acl": set()}
    s2_req, oa_req = s2.stats()["requests"], oa.stats()["requests"]
    landed = len(set(held) & figures.pop("acl"))
    return {
        "paper": acl,
        "seeds": len(seeds),
        "held_out": len(held),
        "landed": landed,
        "reachable": len(set(held) & one_hop(s2.view, seeds)),
        "resolved": summary.get("resolved"),
        "s2_requests": s2_req,
        "openalex_requests": oa_req,
        "seconds_at_rate_limit": round(s2_req / S2_RATE + oa_req / OPENALEX_RATE, 1),
        "wall_seconds": round(seconds, 1),
        "error": summary.get("error"),
        **figures,
    }


def _median(rows: list[dict], key: str) -> float:
    return statistics.median(r[key] for r in rows if r.get(key) is not None)


def coverage(graph: Graph, args, work: Path, limit: int) -> dict:
    """Coverage over a seeded sample of dev papers with at least four knowable references."""
    cfg = SimConfig(data=DATA)
    with Simulator(cfg, graph=graph) as s2, Simulator(cfg, graph=graph) as oa:
        pool = [a for a in dev_papers(graph) if len(knowable_refs(graph, s2.view, a)) >= 4]
        sample = sorted(random.Random(args.seed).sample(pool, min(args.papers, len(pool))))
        rows = [coverage_one(graph, (s2, oa), acl, work / f"limit{limit}", args, limit) for acl in sample]
    ok = [r for r in rows if not r["error"]]  # a failed fetch lands nothing: counted in the shares
    held, landed = sum(r["held_out"] for r in rows), sum(r["landed"] for r in rows)
    return {
        "dev_papers_eligible": len(pool),
        "dev_papers_measured": len(rows),
        "fetch_failed": [{"paper": r["paper"], "error": r["error"]} for r in rows if r["error"]][:5],
        "limit": limit,
        "hops": 1,
        "held_out": held,
        "landed": landed,
        "share_landed": round(landed / held, 4) if held else None,
        "share_landed_mean_per_paper": round(statistics.mean(r["landed"] / r["held_out"] for r in rows), 4),
        "share_reachable_in_one_hop": round(sum(r["reachable"] for r in rows) / held, 4) if held else None,
        "seeds_resolved": f"{sum(r['resolved'] or 0 for r in rows)}/{sum(r['seeds'] for r in rows)}",
        "median": {
            k: _median(ok, k)
            for k in (
                "papers",
                "edges",
                "sentences",
                "bytes",
                "s2_requests",
                "openalex_requests",
                "seconds_at_rate_limit",
                "wall_seconds",
            )
        },
        "max_seconds_at_rate_limit": max(r["seconds_at_rate_limit"] for r in ok),
        "papers": [
            {k: r[k] for k in ("paper", "seeds", "held_out", "landed", "s2_requests", "papers")} for r in ok
        ],
    }


# -- speed at the rate limit -----------------------------------------------------------------------------
def speed(graph: Graph, args, work: Path, rate: float, key: bool, n_seeds: int, run: int = 0) -> dict:
    """The unmodified client against S2 throttled at ``rate``: requests/s achieved in the S2 phase.
    With ``--profile``, the client runs under cProfile (its ``.prof`` beside the store)."""
    with (
        Simulator(SimConfig(data=DATA, s2_rate=rate), graph=graph) as s2,
        Simulator(SimConfig(data=DATA), graph=graph) as oa,
    ):
        pool = sorted(
            {r for a in dev_papers(graph) for r in knowable_refs(graph, s2.view, a) if graph.papers[r].doi}
        )
        seeds = random.Random(args.seed).sample(pool, min(n_seeds, len(pool)))
        folder = work / f"speed-{rate:g}-{run}"
        folder.mkdir(parents=True, exist_ok=True)
        bib = write_bib(folder / "draft.bib", graph, seeds)
        env = fetch_env(s2, oa)
        if key:
            env["CITEWISE_S2_KEY"] = "simulated-key"
        t0 = time.perf_counter()
        extra = ["--limit", "100"]
        cmd = fetch_command(bib, folder / "store.sqlite", throttled=True, extra=extra)
        if args.profile:
            cmd = [
                sys.executable,
                "-m",
                "cProfile",
                "-o",
                str(args.profile / f"speed-{rate:g}-{run}.prof"),
                *cmd,
            ]
        cpu0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        summary = run_fetch(cmd, env)
        cpu1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        stats = s2.stats()
    cpu = cpu1.ru_utime - cpu0.ru_utime + cpu1.ru_stime - cpu0.ru_stime
    achieved = stats["ok_per_second"]
    return {
        "limit_per_second": rate,
        "with_key": key,
        "seeds": len(seeds),
        "s2_requests_ok": stats["ok"],
        "s2_429": stats["by_status"].get("429", 0),
        "achieved_per_second": achieved,
        "share_of_limit": round(achieved / rate, 4) if achieved else None,
        "simulator_seconds_per_request": round(stats["serve_seconds"] / max(1, stats["requests"]), 4),
        "wall_seconds": round(time.perf_counter() - t0, 1),
        "client_cpu_seconds": round(cpu, 2),  # the whole fetch process, start-up included
        "client_cpu_seconds_per_s2_request": round(cpu / max(1, stats["requests"]), 4),
        "load": os.getloadavg(),
        "error": summary.get("error"),
    }


def speed_runs(graph: Graph, args, work: Path, rate: float) -> dict:
    """``--speed-repeats`` runs at one limit; the median share of the limit, and each run."""
    key = rate > S2_RATE
    runs = [speed(graph, args, work, rate, key, 30 if not key else 150, i) for i in range(args.speed_repeats)]
    shares = [r["share_of_limit"] for r in runs if r["share_of_limit"] is not None]
    return {
        "limit_per_second": rate,
        "median_share_of_limit": statistics.median(shares) if shares else None,
        "median_achieved_per_second": statistics.median(r["achieved_per_second"] or 0 for r in runs),
        "runs": runs,
    }


# -- kill -9 ---------------------------------------------------------------------------------------------
def snapshot(path: Path) -> dict:
    """What must be equal between two stores: papers, edges with sentences, no duplicates, integrity."""
    conn = sqlite3.connect(path)
    try:
        integrity = conn.execute("PRAGMA integrity_check").fetchone()[0]
        papers = sorted(
            conn.execute("SELECT acl_id, doi, title, abstract, authors, year, venue FROM papers"), key=repr
        )
        edges = sorted(
            conn.execute(
                "SELECT citing_ref, cited_ref, context, intents, coalesce(influential, -1) FROM citation_edges"
            ),
            key=repr,
        )
        ids = sorted(
            conn.execute("SELECT i.ref, p.acl_id FROM paper_ids i JOIN papers p ON p.id = i.paper_id")
        )
    finally:
        conn.close()
    return {"integrity": integrity, "papers": papers, "edges": edges, "ids": ids}


def compare(ref: dict, got: dict) -> dict:
    """Equal or not, part by part, with the sizes that differ."""
    parts = ("papers", "edges", "ids")
    out = {p: got[p] == ref[p] for p in parts}
    out["sentences"] = [e for e in got["edges"] if e[2]] == [e for e in ref["edges"] if e[2]]
    out["integrity"] = got["integrity"]
    out["duplicates"] = (
        len(got["edges"]) - len(set(got["edges"])) + len(got["papers"]) - len(set(got["papers"]))
    )
    if not all(out[p] for p in parts):
        out["sizes"] = {p: [len(ref[p]), len(got[p])] for p in parts}
    return out


def kill_library(graph: Graph, view: View, args, folder: Path) -> Path:
    """A library big enough for a fetch of some seconds: the seed halves of a few dev papers."""
    pool = [a for a in dev_papers(graph) if len(knowable_refs(graph, view, a)) >= 6]
    papers = random.Random(args.seed + 1).sample(pool, 4)
    seeds = sorted({s for a in papers for s in split_half(knowable_refs(graph, view, a), args.seed, a)[0]})
    folder.mkdir(parents=True, exist_ok=True)
    return write_bib(folder / "draft.bib", graph, seeds)


def kill_at(
    cmd: list[str], env: dict[str, str], sims: tuple[Simulator, ...], after: int, delay: float
) -> bool:
    """Start a fetch, SIGKILL it once the simulators served ``after`` requests (plus ``delay`` s);
    False when it finished first."""
    base = sum(s.stats()["requests"] for s in sims)
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 600
    while proc.poll() is None and time.monotonic() < deadline:
        if sum(s.stats()["requests"] for s in sims) - base >= after:
            time.sleep(delay)
            break
        time.sleep(0.002)
    finished = proc.poll() is not None
    if not finished:
        os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    return not finished


def kills(graph: Graph, args, work: Path) -> dict:
    """N fetches each killed at a random moment and run again, compared with an uninterrupted run."""
    with (
        Simulator(SimConfig(data=DATA), graph=graph) as s2,
        Simulator(SimConfig(data=DATA), graph=graph) as oa,
    ):
        env, folder = fetch_env(s2, oa), work / "kills"
        bib = kill_library(graph, s2.view, args, folder)
        t0 = time.perf_counter()
        reference = run_fetch(fetch_command(bib, folder / "reference.sqlite", throttled=False), env)
        ref_seconds, total = time.perf_counter() - t0, s2.stats()["requests"] + oa.stats()["requests"]
        ref = snapshot(folder / "reference.sqlite")
        rng, results = random.Random(args.seed + 2), []
        for i in range(args.kills):
            store = folder / f"killed-{i}.sqlite"
            s2.reset()
            oa.reset()
            after, delay = rng.randrange(1, max(2, total)), rng.uniform(0.0, 0.03)
            killed = kill_at(fetch_command(bib, store, throttled=False), env, (s2, oa), after, delay)
            rerun = run_fetch(fetch_command(bib, store, throttled=False), env)
            results.append(
                {
                    "after_requests": after,
                    "killed": killed,
                    "rerun_error": rerun.get("error"),
                    **compare(ref, snapshot(store)),
                }
            )
    equal = [r for r in results if r["papers"] and r["edges"] and r["ids"] and r["integrity"] == "ok"]
    return {
        "library_seeds": sum(1 for line in bib.read_text().splitlines() if line.startswith("@")),
        "reference": {k: reference.get(k) for k in ("pages", "papers_added", "edges_added", "requests")},
        "reference_requests_served": total,
        "reference_seconds": round(ref_seconds, 1),
        "runs": len(results),
        "killed_mid_fetch": sum(r["killed"] for r in results),
        "final_store_equal": len(equal),
        "results": results,
    }


def faulted(graph: Graph, args, work: Path) -> dict:
    """The same library fetched under seeded 500s and truncated bodies: the same store at the end?"""
    cfg = SimConfig(data=DATA, seed=args.seed, error_rate=0.05, truncate_rate=0.03)
    with Simulator(cfg, graph=graph) as s2, Simulator(cfg, graph=graph) as oa:
        folder = work / "kills"
        bib = folder / "draft.bib"
        t0 = time.perf_counter()
        summary = run_fetch(fetch_command(bib, folder / "faulted.sqlite", throttled=False), fetch_env(s2, oa))
        faults = {
            k: s2.stats()["faults"].get(k, 0) + oa.stats()["faults"].get(k, 0) for k in ("error", "truncate")
        }
    result = compare(snapshot(folder / "reference.sqlite"), snapshot(folder / "faulted.sqlite"))
    return {
        "faults_met": faults,
        "retries": summary.get("retries"),
        "seconds": round(time.perf_counter() - t0, 1),
        "error": summary.get("error"),
        **result,
    }


# -- main ------------------------------------------------------------------------------------------------
def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--papers", type=int, default=60, help="dev papers in the coverage sample")
    ap.add_argument("--limits", default="500", help="citewise fetch --limit values (its default: 500)")
    ap.add_argument("--kills", type=int, default=10)
    ap.add_argument("--seed", type=int, default=13)
    ap.add_argument("--parts", default="coverage,speed,kills,faults")
    ap.add_argument("--speed-rates", default="1,10", help="S2 limits to measure (10: with a key)")
    ap.add_argument(
        "--speed-repeats", type=int, default=3, help="runs at each limit (the median is reported)"
    )
    ap.add_argument("--profile", type=Path, default=None, help="folder for a cProfile of each speed run")
    ap.add_argument(
        "--work", type=Path, default=None, help="folder for the stores (default: a temporary one)"
    )
    ap.add_argument("--out", type=Path, default=None, help="also write the JSON here")
    args = ap.parse_args()
    graph = load_graph(DATA)
    parts = set(args.parts.split(","))
    out: dict = {"load_before": os.getloadavg(), "command": " ".join(sys.argv)}
    with tempfile.TemporaryDirectory(prefix="bench-fetch-") as tmp:
        work = args.work or Path(tmp)
        if "coverage" in parts:
            out["coverage"] = [coverage(graph, args, work, int(n)) for n in args.limits.split(",")]
        if "speed" in parts:
            rates = [float(r) for r in args.speed_rates.split(",")]
            out["speed"] = [speed_runs(graph, args, work, r) for r in rates]
        if "kills" in parts:
            out["kills"] = kills(graph, args, work)
        if "faults" in parts and "kills" in parts:
            out["faults"] = faulted(graph, args, work)
    out["load_after"] = os.getloadavg()
    out["uptime"] = subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()
    text = json.dumps(out, indent=1, default=str)
    if args.out:
        args.out.write_text(text, encoding="utf-8")
    print(text)


if __name__ == "__main__":
    main()
