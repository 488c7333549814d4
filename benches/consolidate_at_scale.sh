#!/usr/bin/env bash
# Consolidation at scale: time and peak memory (each a process of its own, measured by
# /usr/bin/time) of `consolidate`, of a `consolidate` with nothing to do, of the first
# search and context of a store after it, and of a `forget` down to a budget, on N demo
# worlds of 10,000 days lived one after another (about 23,000 events each; their node keys
# apart, so they do not merge).
#
#   benches/consolidate_at_scale.sh [LOCI] [WORLDS] [SCRATCH]
#
# LOCI defaults to target/release/loci, WORLDS to 5 (115k events), SCRATCH to a new
# temporary directory (removed at the end). Compare two builds in one sitting: the machine
# is shared, and its speed varies by a factor of two between sittings.
set -euo pipefail

loci=${1:-target/release/loci}
worlds=${2:-5}
keep=${3:-}
scratch=${3:-$(mktemp -d)}
case "$loci" in /*) ;; *) loci="$PWD/$loci" ;; esac
[ -x "$loci" ] || { echo "no loci binary at $loci (cargo build --release)" >&2; exit 2; }
command -v python3 >/dev/null || { echo "python3 is needed to join the worlds" >&2; exit 2; }
[ -x /usr/bin/time ] || { echo "/usr/bin/time is needed (apt-get install time)" >&2; exit 2; }
mkdir -p "$scratch"
cleanup() { [ -n "$keep" ] || rm -rf "$scratch"; }
trap cleanup EXIT

events="$scratch/worlds.jsonl"
for ((w = 0; w < worlds; w++)); do
    "$loci" world --seed $((100 + w)) --scale 1 --days 10000 --out "$scratch/w$w.jsonl" \
        --answers /dev/null >/dev/null 2>&1
done
# World w lives after world w-1 (its times shifted past them), with its own places and
# villagers (keys prefixed); the agent and the items are shared.
python3 - "$scratch" "$worlds" >"$events" <<'EOF'
import json, sys
scratch, worlds = sys.argv[1], int(sys.argv[2])
shift = 10000 * 24000 + 100000
def key(k, w):
    return k if k == "bot" or k.startswith("item:") else f"w{w}/{k}"
for w in range(worlds):
    for line in open(f"{scratch}/w{w}.jsonl"):
        e = json.loads(line)
        e["ts"] += w * shift
        for a in e.get("assert", []):
            for field in ("key", "from", "to"):
                if field in a:
                    a[field] = key(a[field], w)
        if "place" in e:
            e["place"] = key(e["place"], w)
        if isinstance(e.get("payload"), dict) and "with" in e["payload"]:
            e["payload"]["with"] = key(e["payload"]["with"], w)
        e["evidence"] = [f"w{w}-{x}" for x in e.get("evidence", [])]
        print(json.dumps(e))
EOF

store="$scratch/store"
measure() { # what, then the command
    local what=$1
    shift
    /usr/bin/time -f "%e %M" -o "$scratch/time" "$@" >/dev/null 2>"$scratch/stderr" ||
        { cat "$scratch/stderr" >&2; exit 1; }
    read -r secs kb <"$scratch/time"
    printf '%-26s %8.2f s %8.0f MB\n' "$what" "$secs" "$((kb / 1024))"
}
"$loci" init --store "$store" >/dev/null
echo "$(wc -l <"$events") events, $worlds worlds; $loci"
measure "ingest" "$loci" ingest --store "$store" --commit-every 50000 "$events"
measure "consolidate" "$loci" consolidate --store "$store"
measure "consolidate, nothing to do" "$loci" consolidate --store "$store"
measure "search (first)" "$loci" search --store "$store" spider --limit 10
measure "context (first)" "$loci" context --store "$store" --budget 2000 --no-record \
    --question "where did I die"
# Down to about 10,000 events a world: most of the raw events and many summaries go.
measure "forget" "$loci" forget --store "$store" --budget $((worlds * 10000))
"$loci" replay --store "$store" --verify | tail -1
