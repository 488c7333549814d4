/* The floor for loci's graph traversals: the same k-hop expansions over bare CSR arrays in C,
 * with nothing a store needs (no relations, labels, validity, decay or petgraph traits). Run it
 * on the graph `loci bench graph --write-edges FILE` gave loci, in the same sitting, so that
 * loci's figures have a baseline measured on the same machine under the same load:
 *
 *     cc -O2 -o /tmp/khop benches/floor/khop.c && /tmp/khop FILE [TWO_HOP_SAMPLES THREE_HOP_SAMPLES]
 *
 * FILE has one `src dst relation confidence` line per edge, nodes named `n<id>` (what the
 * generator writes); other names are refused. Prints one JSON object: 2-hop with confidence
 * >= 0.5 (the distinct nodes reached, collected into an array, as loci's `khop` returns them),
 * 3-hop counts with and without the filter, p50/p95 in microseconds over random starts, and
 * the mean number of nodes reached, which should match loci's `*_mean_nodes`. The starts are
 * the first 20,000 (2-hop) and 2,000 (3-hop) of one pseudo-random sequence, or as many as
 * given; `benches/peers/peers.py` asks its engines from the same ones.
 */
#define _POSIX_C_SOURCE 199309L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct {
    uint32_t node;
    float conf;
} Entry;

static uint32_t *offsets, *stamp, *frontier, *next;
static Entry *entries;
static uint32_t nodes, generation;

static double now_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

/* Distinct nodes within `depth` hops of `start` (not `start`), over edges whose confidence is
 * at least `min_conf`, both directions; written to `out` when it is not NULL. */
static size_t khop(uint32_t start, int depth, float min_conf, uint32_t *out) {
    size_t reached = 0, nf = 1;
    generation++;
    stamp[start] = generation;
    frontier[0] = start;
    for (int hop = 1; hop <= depth && nf > 0; hop++) {
        size_t nn = 0;
        for (size_t i = 0; i < nf; i++) {
            uint32_t from = frontier[i];
            for (uint32_t j = offsets[from]; j < offsets[from + 1]; j++) {
                Entry e = entries[j];
                if (stamp[e.node] == generation || e.conf < min_conf) continue;
                stamp[e.node] = generation;
                if (out) out[reached] = e.node;
                reached++;
                if (hop < depth) next[nn++] = e.node;
            }
        }
        uint32_t *t = frontier;
        frontier = next;
        next = t;
        nf = nn;
    }
    return reached;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Times `samples` expansions from pseudo-random starts; prints "name": {p50, p95, mean}. */
static void measure(const char *name, int depth, float min_conf, int collect, int samples,
                    int last) {
    double *t = malloc(sizeof(double) * samples);
    uint32_t *out = collect ? malloc(sizeof(uint32_t) * nodes) : NULL;
    uint64_t rng = 0x5eed, total = 0;
    for (int i = 0; i < samples; i++) {
        rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
        uint32_t start = (uint32_t)((rng >> 33) % nodes);
        double t0 = now_us();
        total += khop(start, depth, min_conf, out);
        t[i] = now_us() - t0;
    }
    qsort(t, samples, sizeof(double), cmp_double);
    printf("  \"%s\": {\"p50_us\": %.3f, \"p95_us\": %.3f, \"mean_nodes\": %.2f}%s\n", name,
           t[samples / 2], t[samples * 95 / 100], (double)total / samples, last ? "" : ",");
    free(t);
    free(out);
}

int main(int argc, char **argv) {
    int two_hop_samples = 20000, three_hop_samples = 2000;
    if (argc == 4) {
        two_hop_samples = atoi(argv[2]);
        three_hop_samples = atoi(argv[3]);
    }
    if ((argc != 2 && argc != 4) || two_hop_samples < 1 || three_hop_samples < 1) {
        fprintf(stderr, "usage: %s EDGES_FILE [TWO_HOP_SAMPLES THREE_HOP_SAMPLES]\n", argv[0]);
        return 2;
    }
    FILE *f = fopen(argv[1], "r");
    if (!f) {
        perror(argv[1]);
        return 1;
    }
    size_t cap = 1 << 20, m = 0;
    uint32_t *src = malloc(cap * 4), *dst = malloc(cap * 4);
    float *conf = malloc(cap * 4);
    char a[256], b[256], rel[256];
    float c;
    long line = 0;
    while (fscanf(f, "%255s %255s %255s %f", a, b, rel, &c) == 4) {
        line++;
        if (a[0] != 'n' || b[0] != 'n') {
            fprintf(stderr, "%s:%ld: node names must be n<id>\n", argv[1], line);
            return 1;
        }
        if (m == cap) {
            cap *= 2;
            src = realloc(src, cap * 4);
            dst = realloc(dst, cap * 4);
            conf = realloc(conf, cap * 4);
        }
        src[m] = (uint32_t)strtoul(a + 1, NULL, 10);
        dst[m] = (uint32_t)strtoul(b + 1, NULL, 10);
        conf[m] = c;
        if (src[m] + 1 > nodes) nodes = src[m] + 1;
        if (dst[m] + 1 > nodes) nodes = dst[m] + 1;
        m++;
    }
    fclose(f);
    if (nodes == 0) {
        fprintf(stderr, "%s: no edges\n", argv[1]);
        return 1;
    }
    offsets = calloc(nodes + 1, 4);
    for (size_t i = 0; i < m; i++) {
        offsets[src[i] + 1]++;
        offsets[dst[i] + 1]++;
    }
    for (uint32_t i = 0; i < nodes; i++) offsets[i + 1] += offsets[i];
    uint32_t *fill = malloc(sizeof(uint32_t) * nodes);
    memcpy(fill, offsets, sizeof(uint32_t) * nodes);
    entries = malloc(sizeof(Entry) * 2 * m);
    for (size_t i = 0; i < m; i++) {
        entries[fill[src[i]]++] = (Entry){dst[i], conf[i]};
        entries[fill[dst[i]]++] = (Entry){src[i], conf[i]};
    }
    free(fill);
    free(src);
    free(dst);
    free(conf);
    stamp = calloc(nodes, 4);
    frontier = malloc(sizeof(uint32_t) * nodes);
    next = malloc(sizeof(uint32_t) * nodes);
    printf("{\n  \"nodes\": %u,\n  \"edges\": %zu,\n", nodes, m);
    measure("two_hop_conf_0_5", 2, 0.5f, 1, two_hop_samples, 0);
    measure("three_hop_conf_0_5", 3, 0.5f, 0, three_hop_samples, 0);
    measure("three_hop_count", 3, 0.0f, 0, three_hop_samples, 1);
    printf("}\n");
    return 0;
}
