#!/usr/bin/env python3
"""loci's graph figures beside the embedded peers', on one graph, in one sitting.

Loads the edges file that `loci bench graph --write-edges FILE` wrote (one `src dst relation
confidence` line per edge, nodes named `n<id>`) into SQLite, DuckDB, igraph and Kuzu, each
in a process of its own, then opens each store in a fresh process with its files evicted
from the page cache, and times the traversals loci's bench times, over the C floor's starts
(`benches/floor/khop.c`: the same pseudo-random sequence), so every engine answers the same
questions and must reach the same number of nodes:

- 2-hop: the distinct nodes within two hops of a start (not the start), both directions,
  over edges whose confidence is at least 0.5;
- 3-hop filtered: the count of the same within three hops.

With `--loci BIN` it runs `BIN bench graph --edges-file FILE` on the same file, and with
`--floor BIN` the C floor, so that all of them are measured under the same load. Prints one
table; `--json OUT` writes every figure.

    python3 -m venv /tmp/peers && /tmp/peers/bin/pip install duckdb igraph kuzu
    loci bench graph --write-edges /tmp/g1m.txt --dir /tmp/g -q   # the 1M BA graph
    cc -O2 -o /tmp/khop benches/floor/khop.c
    /tmp/peers/bin/python benches/peers/peers.py /tmp/g1m.txt \
        --loci target/release/loci --floor /tmp/khop

What each engine is given, and what it is not:

- Every engine reads node ids as integers (`n17` is 17), as the C floor does; loci resolves
  each name through its key index. Parsing the file is not timed for SQLite and igraph
  (their rows are parsed before the clock starts, and held before it, so not in their
  peak); DuckDB and Kuzu load from a CSV written beforehand, untimed, which their own reader
  parses inside the timed load. loci's load reads and parses the file in batches, untimed.
- SQLite: one table of edges with a covering index on each end (`src, conf, dst` and
  `dst, conf, src`), WAL, `synchronous=FULL`, one transaction; each traversal is one query,
  level by level. DuckDB: the same table, and beside it both directions of each edge in one
  table sorted by its first end (it has no index its joins use), the same queries over that.
  igraph: an in-memory graph pickled to a file and fsynced; its open reads
  the pickle and builds the graph of the edges at confidence 0.5 or more, which its
  neighbourhood calls need (they take no edge filter). Kuzu: a node table and a relation
  table, loaded by COPY; shortest-path semantics for the reach (one path per node reached).
- Durable: each load returns after its engine's commit (fsync of its files). Ingest is the
  whole load's: edges over the seconds of nodes, edges and what ends the load (the peers'
  checkpoint, loci's close); loci's edges alone, its goal's figure, stand beside it.
- Open: timed in the fresh process from before the engine's open call to after it, and the
  first 2-hop answered after it; memory after open is the resident set's growth over the
  open, in that process (loci's figure is its `rss_bytes_per_edge`, against an empty store).
- Peak during the load: the load process's peak resident set over what it held before the
  load began (the interpreter, the engine's module, the parsed rows). loci's is its whole
  process's, about 17 MB more.
- Starts: SQLite and igraph are asked from the 20,000 (2-hop) and 2,000 (3-hop) starts loci's
  bench and the floor use; DuckDB and Kuzu, whose answers take milliseconds, from the first
  2,000 and 500 of them (`--slow-two-hop-samples`, `--slow-three-hop-samples`), and the
  floor is run at those counts too. Each engine's mean reach is checked against the floor's
  from the same starts, and the check printed under the table.
- 2-hop runs twice over the same starts (first pass, then again), as loci's bench does.
- Disk: the blocks the engine's files hold after the load, every file of its directory.
- Each engine is driven through its Python API, as its users drive it: each of its query
  timings includes a Python call (about a microsecond or two; loci and the floor have none).
"""

import argparse
import importlib
import importlib.util
import json
import os
import shutil
import tempfile
import subprocess
import sys
import time

ENGINES = ("sqlite", "duckdb", "igraph", "kuzu")
# Engines whose traversals take milliseconds, asked from fewer starts.
SLOW = ("duckdb", "kuzu")
# The starts loci's bench asks from (2-hop, 3-hop): the floor's defaults.
LOCI_SAMPLES = (20000, 2000)
# The Python module of an engine, where it is not the engine's name.
MODULES = {"sqlite": "sqlite3"}
MIN_CONF = 0.5


def starts(nodes, samples):
    """The C floor's starts: its LCG (`benches/floor/khop.c`, `measure`), seeded the same."""
    rng = 0x5EED
    out = []
    for _ in range(samples):
        rng = (rng * 6364136223846793005 + 1442695040888963407) & 0xFFFFFFFFFFFFFFFF
        out.append((rng >> 33) % nodes)
    return out


def read_edges(path):
    """(src, dst, relation, confidence) rows of the file, node ids as integers; exits with
    the first line that is not `n<id> n<id> relation confidence` (the floor's names)."""
    rows = list(edges_in(path))
    if not rows:
        sys.exit(f"{path}: holds no edges")
    return rows


def check_edges(path):
    """Reads the file through as `read_edges` does, holding no row: the parent's check
    before anything runs."""
    if sum(1 for _ in edges_in(path)) == 0:
        sys.exit(f"{path}: holds no edges")


def edges_in(path):
    """The rows of the file one at a time; exits naming the first line that is not an edge."""
    try:
        with open(path, encoding="utf-8") as f:
            for number, line in enumerate(f, 1):
                parts = line.split()
                if not parts:
                    continue
                row = edge_of(parts)
                if row is None:
                    sys.exit(
                        f"{path}:{number}: expected `n<id> n<id> relation confidence` "
                        f"(ids of digits, a confidence in 0..1), found {line.strip()[:80]!r}"
                    )
                yield row
    except (OSError, UnicodeDecodeError) as e:
        sys.exit(f"{path}: {e}")


def edge_of(parts):
    """The row of one line's fields, or None when they are not an edge."""
    if len(parts) != 4:
        return None
    src, dst, relation, confidence = parts
    ids = [name[1:] for name in (src, dst) if name[:1] == "n"]
    if len(ids) != 2 or not all(i.isascii() and i.isdigit() for i in ids):
        return None
    try:
        conf = float(confidence)
    except ValueError:
        return None
    if not 0.0 <= conf <= 1.0:
        return None
    return (int(ids[0]), int(ids[1]), relation, conf)


def status_kb(field):
    """A field of /proc/self/status, in kB (VmRSS, VmHWM, RssAnon)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def disk_bytes(path):
    """Bytes allocated to every file under `path` (blocks, as `du` counts them)."""
    total = 0
    for root, _, files in os.walk(path):
        for name in files:
            total += os.stat(os.path.join(root, name)).st_blocks * 512
    return total


def evict(path):
    """Drops the cached pages of every file under `path`, so the next open reads the disk."""
    for root, _, files in os.walk(path):
        for name in files:
            fd = os.open(os.path.join(root, name), os.O_RDONLY)
            try:
                os.fsync(fd)
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(fd)


def fsync_tree(path):
    for root, _, files in os.walk(path):
        for name in files:
            fd = os.open(os.path.join(root, name), os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)


def write_csvs(rows, nodes, work):
    """The node and edge CSV files DuckDB and Kuzu load from (written before their clocks)."""
    nodes_csv = os.path.join(work, "nodes.csv")
    edges_csv = os.path.join(work, "edges.csv")
    if not os.path.exists(edges_csv):
        with open(nodes_csv, "w") as f:
            f.writelines(f"{i}\n" for i in range(nodes))
        with open(edges_csv, "w") as f:
            f.writelines(f"{s},{d},{r},{c}\n" for s, d, r, c in rows)
    return nodes_csv, edges_csv


# The reach in SQL, level by level (each engine's fastest form of those tried: a recursive
# query over (node, depth) took 1.8x as long in SQLite, 9x in DuckDB): the distinct nodes
# within `depth` hops, both directions, over edges at the confidence or more, not the start.
# `first` names the neighbours of the start (`?1`), `step(k)` those of level k - 1's nodes.
def levels_sql(depth, first, step):
    levels = [f"l1(n) AS ({first})"] + [f"l{k}(n) AS ({step(k - 1)})" for k in range(2, depth + 1)]
    union = " UNION ".join(f"SELECT n FROM l{k}" for k in range(1, depth + 1))
    return "WITH " + ",\n".join(levels) + f"\nSELECT count(*) FROM ({union}) WHERE n <> ?1"


# SQLite: each direction through its own covering index.
def reach_sqlite(depth):
    c = f"conf >= {MIN_CONF}"
    return levels_sql(
        depth,
        f"SELECT dst FROM edges WHERE src = ?1 AND {c} UNION SELECT src FROM edges WHERE dst = ?1 AND {c}",
        lambda p: f"SELECT e.dst FROM l{p} JOIN edges e ON e.src = l{p}.n WHERE e.{c} "
        f"UNION SELECT e.src FROM l{p} JOIN edges e ON e.dst = l{p}.n WHERE e.{c}",
    )


# DuckDB: over `adj`, both directions of each edge in one table sorted by its first end, so
# that a start's rows are found through the row groups' min/max (it has no index a join uses).
def reach_duckdb(depth):
    c = f"conf >= {MIN_CONF}"
    return levels_sql(
        depth,
        f"SELECT n FROM adj WHERE a = ?1 AND {c}",
        lambda p: f"SELECT adj.n FROM l{p} JOIN adj ON adj.a = l{p}.n WHERE adj.{c}",
    )


class Sqlite:
    def load(self, db, rows, nodes, work):
        import sqlite3

        path = os.path.join(db, "graph.sqlite")
        conn = sqlite3.connect(path)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=FULL")
        conn.execute(
            "CREATE TABLE edges(src INTEGER NOT NULL, dst INTEGER NOT NULL, "
            "rel TEXT NOT NULL, conf REAL NOT NULL)"
        )
        conn.execute("BEGIN")
        conn.executemany("INSERT INTO edges VALUES (?, ?, ?, ?)", rows)
        conn.execute("CREATE INDEX edges_src ON edges(src, conf, dst)")
        conn.execute("CREATE INDEX edges_dst ON edges(dst, conf, src)")
        conn.execute("COMMIT")
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        conn.close()

    def open(self, db):
        import sqlite3

        self.conn = sqlite3.connect(os.path.join(db, "graph.sqlite"))
        self.two = reach_sqlite(2)
        self.three = reach_sqlite(3)

    def two_hop(self, s):
        return self.conn.execute(self.two, (s,)).fetchone()[0]

    def three_hop(self, s):
        return self.conn.execute(self.three, (s,)).fetchone()[0]


class Duckdb:
    def load(self, db, rows, nodes, work):
        import duckdb

        _, edges_csv = write_csvs(rows, nodes, work)
        conn = duckdb.connect(os.path.join(db, "graph.duckdb"))
        conn.execute(
            "CREATE TABLE edges AS SELECT * FROM read_csv(?, header = false, columns = "
            "{'src': 'INTEGER', 'dst': 'INTEGER', 'rel': 'VARCHAR', 'conf': 'DOUBLE'})",
            [edges_csv],
        )
        conn.execute(
            "CREATE TABLE adj AS SELECT * FROM (SELECT src AS a, dst AS n, conf FROM edges "
            "UNION ALL SELECT dst, src, conf FROM edges) ORDER BY a"
        )
        conn.execute("CHECKPOINT")
        conn.close()

    def open(self, db):
        import duckdb

        self.conn = duckdb.connect(os.path.join(db, "graph.duckdb"), read_only=True)
        self.two = reach_duckdb(2)
        self.three = reach_duckdb(3)

    def two_hop(self, s):
        return self.conn.execute(self.two, [s]).fetchone()[0]

    def three_hop(self, s):
        return self.conn.execute(self.three, [s]).fetchone()[0]


class Igraph:
    def load(self, db, rows, nodes, work):
        import igraph

        g = igraph.Graph(
            n=nodes,
            edges=[(s, d) for s, d, _, _ in rows],
            directed=False,
            edge_attrs={"rel": [r for _, _, r, _ in rows], "conf": [c for _, _, _, c in rows]},
        )
        path = os.path.join(db, "graph.pickle")
        g.write_pickle(path)
        fsync_tree(db)

    def open(self, db):
        import igraph

        g = igraph.Graph.Read_Pickle(os.path.join(db, "graph.pickle"))
        self.g = g.subgraph_edges(g.es.select(conf_ge=MIN_CONF), delete_vertices=False)

    def two_hop(self, s):
        return len(self.g.neighborhood(s, order=2, mindist=1))

    def three_hop(self, s):
        return self.g.neighborhood_size(s, order=3, mindist=1)


class Kuzu:
    def load(self, db, rows, nodes, work):
        import kuzu

        nodes_csv, edges_csv = write_csvs(rows, nodes, work)
        conn = kuzu.Connection(kuzu.Database(os.path.join(db, "graph.kuzu")))
        conn.execute("CREATE NODE TABLE N(id INT64, PRIMARY KEY (id))")
        conn.execute("CREATE REL TABLE E(FROM N TO N, rel STRING, conf DOUBLE)")
        conn.execute(f"COPY N FROM '{nodes_csv}' (header = false)")
        conn.execute(f"COPY E FROM '{edges_csv}' (header = false)")
        conn.execute("CHECKPOINT")

    def open(self, db):
        import kuzu

        self.conn = kuzu.Connection(kuzu.Database(os.path.join(db, "graph.kuzu")))
        self.two = self.reach(2)
        self.three = self.reach(3)

    def reach(self, depth):
        return (
            f"MATCH (a:N)-[:E* SHORTEST 1..{depth} (r, _ | WHERE r.conf >= {MIN_CONF})]-(b:N) "
            "WHERE a.id = $s RETURN count(DISTINCT b.id)"
        )

    def count(self, statement, s):
        return self.conn.execute(statement, {"s": s}).get_next()[0]

    def two_hop(self, s):
        return self.count(self.two, s)

    def three_hop(self, s):
        return self.count(self.three, s)


def engine(name):
    """The engine of `name`, its module imported (so that the baselines below hold it)."""
    importlib.import_module(MODULES.get(name, name))
    return {"sqlite": Sqlite, "duckdb": Duckdb, "igraph": Igraph, "kuzu": Kuzu}[name]()


def reset_peak():
    """Starts this process's peak resident set (VmHWM) again from what it holds now."""
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")


def percentile(times, q):
    times = sorted(times)
    return times[min(len(times) - 1, int(len(times) * q))]


def child_load(name, edges_path, db, work):
    """Loads the graph into a new store of `name` in `db`; prints the figures as JSON."""
    rows = read_edges(edges_path)
    nodes = max(max(s, d) for s, d, _, _ in rows) + 1
    e = engine(name)
    if name in ("duckdb", "kuzu"):
        write_csvs(rows, nodes, work)
    rss_input = status_kb("VmRSS")
    reset_peak()
    t = time.perf_counter()
    e.load(db, rows, nodes, work)
    secs = time.perf_counter() - t
    print(
        json.dumps(
            {
                "nodes": nodes,
                "edges": len(rows),
                "ingest_s": secs,
                "peak_kb": status_kb("VmHWM"),
                "before_load_kb": rss_input,
            }
        )
    )


def child_query(name, db, nodes, two_samples, three_samples):
    """Opens the store of `name` in `db` and times its traversals; prints JSON."""
    e = engine(name)
    rss0, anon0 = status_kb("VmRSS"), status_kb("RssAnon")
    t = time.perf_counter()
    e.open(db)
    open_s = time.perf_counter() - t
    rss1, anon1 = status_kb("VmRSS"), status_kb("RssAnon")
    picks = starts(nodes, max(two_samples, three_samples))
    t = time.perf_counter()
    e.two_hop(picks[0])
    first_s = time.perf_counter() - t
    report = {
        "open_s": open_s,
        "first_two_hop_s": first_s,
        "rss_open_kb": rss1 - rss0,
        "rss_anon_open_kb": anon1 - anon0,
    }
    for key, depth_call, samples in (
        ("two_hop_conf_0_5", e.two_hop, two_samples),
        ("two_hop_conf_0_5_again", e.two_hop, two_samples),
        ("three_hop_conf_0_5", e.three_hop, three_samples),
    ):
        times, reached = [], 0
        for s in picks[:samples]:
            t = time.perf_counter()
            reached += depth_call(s)
            times.append(time.perf_counter() - t)
        report[key] = {
            "p50_us": percentile(times, 0.5) * 1e6,
            "p95_us": percentile(times, 0.95) * 1e6,
            "mean_nodes": reached / samples,
            "samples": samples,
        }
    report["peak_kb"] = status_kb("VmHWM")
    print(json.dumps(report))


def run_child(args):
    out = subprocess.run(
        [sys.executable, os.path.abspath(__file__), *args],
        check=True,
        stdout=subprocess.PIPE,
        text=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def samples_of(name, a):
    """(2-hop, 3-hop) starts an engine is asked from: the first of the floor's sequence."""
    if name in SLOW:
        return a.slow_two_hop_samples, a.slow_three_hop_samples
    return LOCI_SAMPLES


def measure_engine(name, a, work):
    db = os.path.join(work, name)
    os.makedirs(db)
    load = run_child(["--child-load", name, a.edges, db, work])
    disk = disk_bytes(db)
    evict(db)
    two, three = samples_of(name, a)
    query = run_child(["--child-query", name, db, str(load["nodes"]), str(two), str(three)])
    edges = load["edges"]
    return {
        "engine": name,
        "engine_samples": [two, three],
        "edges": edges,
        "ingest_edges_per_s": edges / load["ingest_s"],
        "open_s": query["open_s"],
        "first_two_hop_s": query["first_two_hop_s"],
        "rss_bytes_per_edge": query["rss_open_kb"] * 1024 / edges,
        "peak_rss_ingest_bytes_per_edge": (load["peak_kb"] - load["before_load_kb"]) * 1024 / edges,
        "disk_bytes_per_edge": disk / edges,
        "two_hop_conf_0_5": query["two_hop_conf_0_5"],
        "two_hop_conf_0_5_again": query["two_hop_conf_0_5_again"],
        "three_hop_conf_0_5": query["three_hop_conf_0_5"],
        "raw": {"load": load, "query": query},
    }


def measure_loci(a, work):
    out = os.path.join(work, "loci.json")
    store = os.path.join(work, "loci")
    # Its report goes to `out`; what it prints besides is not this script's table.
    subprocess.run(
        [a.loci, "bench", "graph", "--edges-file", a.edges, "--json", "--out", out, "--dir", store, "-q"],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    with open(out) as f:
        r = json.load(f)
    # The whole load, as the peers' figures are: its nodes, its edges and the close after them
    # (the peers' loads end with their checkpoint); the edges' part alone beside it.
    whole_s = r["ingest_nodes_s"] + r["ingest_edges_s"] + r["ingest_close_s"]
    return {
        "engine": "loci",
        "edges": r["edges"],
        "ingest_edges_per_s": r["edges"] / whole_s,
        "ingest_edges_phase_per_s": r["ingest_edges_per_s"],
        "open_s": r["open_fresh_process_open_ms"] / 1e3,
        "first_two_hop_s": None,
        "rss_bytes_per_edge": r["rss_bytes_per_edge"],
        "peak_rss_ingest_bytes_per_edge": r["peak_rss_ingest_bytes_per_edge"],
        "disk_bytes_per_edge": r["disk_bytes_per_edge_total"],
        "two_hop_conf_0_5": {
            "p50_us": r["two_hop_conf_0_5"]["p50_us"],
            "p95_us": r["two_hop_conf_0_5"]["p95_us"],
            "mean_nodes": r["two_hop_mean_nodes"],
        },
        "two_hop_conf_0_5_again": {
            "p50_us": r["two_hop_conf_0_5_again"]["p50_us"],
            "p95_us": r["two_hop_conf_0_5_again"]["p95_us"],
            "mean_nodes": r["two_hop_mean_nodes"],
        },
        "three_hop_conf_0_5": {
            "p50_us": r["three_hop_conf_0_5"]["p50_us"],
            "p95_us": r["three_hop_conf_0_5"]["p95_us"],
            "mean_nodes": r["three_hop_conf_0_5_mean_nodes"],
        },
        "raw": r,
    }


def measure_floor(a, samples):
    counts = [str(n) for n in samples]
    out = subprocess.run([a.floor, a.edges, *counts], check=True, stdout=subprocess.PIPE, text=True)
    r = json.loads(out.stdout)
    return {
        "engine": "C floor" if samples == LOCI_SAMPLES else "C floor ({:,} / {:,} starts)".format(*samples),
        "samples": list(samples),
        "edges": r["edges"],
        "two_hop_conf_0_5": r["two_hop_conf_0_5"],
        "three_hop_conf_0_5": r["three_hop_conf_0_5"],
        "raw": r,
    }


def reach_check(results):
    """Whether each engine reached as many nodes as the floor from the same starts."""
    floors = {tuple(r["samples"]): r for r in results if "samples" in r}
    for r in results:
        if "samples" in r or not floors:
            continue
        samples = tuple(r.get("engine_samples") or LOCI_SAMPLES)
        floor = floors.get(samples)
        if floor is None:
            continue
        same = all(
            abs(r[k]["mean_nodes"] - floor[k]["mean_nodes"]) < 0.01
            for k in ("two_hop_conf_0_5", "three_hop_conf_0_5")
        )
        yield "{}: {} the floor's from the same {:,} / {:,} starts".format(
            r["engine"], "reach equals" if same else "REACH DIFFERS FROM", *samples
        )


def table(results):
    """The figures as one Markdown table, a row an engine."""

    def cell(v, fmt):
        return "" if v is None else fmt.format(v)

    lines = [
        "| engine | ingest, edges/s | open (then the first 2-hop) | resident after open, B/edge "
        "| peak during load, B/edge | disk, B/edge | 2-hop p50, first pass / again (mean reach) "
        "| 3-hop filtered p50 (mean reach) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        two, three = r["two_hop_conf_0_5"], r["three_hop_conf_0_5"]
        again = r.get("two_hop_conf_0_5_again")
        ingest = cell(r.get("ingest_edges_per_s"), "{:,.0f}")
        if r.get("ingest_edges_phase_per_s") is not None:
            ingest += " (edges alone {:,.0f})".format(r["ingest_edges_phase_per_s"])
        opened = cell(r.get("open_s") and r["open_s"] * 1e3, "{:.1f} ms")
        if r.get("first_two_hop_s") is not None:
            opened += " ({:.1f} ms)".format(r["first_two_hop_s"] * 1e3)
        name = r["engine"]
        if tuple(r.get("engine_samples") or LOCI_SAMPLES) != LOCI_SAMPLES:
            name += " ({:,} / {:,} starts)".format(*r["engine_samples"])
        lines.append(
            "| {} | {} | {} | {} | {} | {} | {:.1f}{} µs ({:.1f}) | {:.1f} µs ({:.1f}) |".format(
                name,
                ingest,
                opened,
                cell(r.get("rss_bytes_per_edge"), "{:.1f}"),
                cell(r.get("peak_rss_ingest_bytes_per_edge"), "{:.1f}"),
                cell(r.get("disk_bytes_per_edge"), "{:.1f}"),
                two["p50_us"],
                cell(again and again["p50_us"], " / {:.1f}"),
                two["mean_nodes"],
                three["p50_us"],
                three["mean_nodes"],
            )
        )
    return "\n".join(lines)


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--child-load":
        return child_load(*sys.argv[2:6])
    if len(sys.argv) > 1 and sys.argv[1] == "--child-query":
        name, db, nodes, two, three = sys.argv[2:7]
        return child_query(name, db, int(nodes), int(two), int(three))
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("edges", help="edges file: `n<id> n<id> relation confidence` lines")
    p.add_argument("--engines", default=",".join(ENGINES), help="comma-separated: " + ",".join(ENGINES))
    p.add_argument(
        "--work",
        default=tempfile.gettempdir(),
        help="where this run's directory of stores is made (and removed after, unless --keep)",
    )
    p.add_argument("--keep", action="store_true", help="keep the run's stores")
    p.add_argument("--loci", help="a loci binary: run its `bench graph` on the same file")
    p.add_argument("--floor", help="the C floor's binary (benches/floor/khop.c), run on the same file")
    # DuckDB and Kuzu answer in milliseconds: asked from fewer starts than loci's bench, the
    # floor, SQLite and igraph (20,000 and 2,000), the first of the same ones. The floor is
    # run with their counts too, so that each engine's reach has a floor's to equal.
    p.add_argument("--slow-two-hop-samples", type=int, default=2000)
    p.add_argument("--slow-three-hop-samples", type=int, default=500)
    p.add_argument("--json", help="write every figure here")
    a = p.parse_args()
    names = [n for n in a.engines.split(",") if n]
    unknown = [n for n in names if n not in ENGINES]
    if unknown:
        p.error(f"unknown engines {unknown}; known: {', '.join(ENGINES)}")
    # The file is read through once before anything runs (holding no row), so that a bad
    # line stops the run at once, named, rather than in a child's traceback after the floor
    # and loci have run.
    check_edges(a.edges)
    # Everything this run writes is in a directory of its own, so nothing of the user's under
    # --work is replaced or removed.
    os.makedirs(a.work, exist_ok=True)
    run = tempfile.mkdtemp(prefix="loci-peers-", dir=a.work)
    try:
        results = measure_all(a, names, run)
    finally:
        if a.keep:
            print(f"the stores are in {run}", file=sys.stderr)
        else:
            shutil.rmtree(run, ignore_errors=True)
    print(table(results))
    for line in reach_check(results):
        print(line)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(results, f, indent=1)


def measure_all(a, names, work):
    """The floor's, loci's and each engine's figures, each engine's store under `work`."""
    results = []
    if a.floor:
        results.append(measure_floor(a, LOCI_SAMPLES))
        slow = (a.slow_two_hop_samples, a.slow_three_hop_samples)
        if slow != LOCI_SAMPLES and any(n in SLOW for n in names):
            results.append(measure_floor(a, slow))
    if a.loci:
        results.append(measure_loci(a, work))
    for name in names:
        module = MODULES.get(name, name)
        if importlib.util.find_spec(module) is None:
            print(f"{name}: skipped, its module is not installed (pip install {module})", file=sys.stderr)
            continue
        print(f"{name}...", file=sys.stderr, flush=True)
        results.append(measure_engine(name, a, work))
    return results


if __name__ == "__main__":
    main()
