/* The C API's test: every function, every error code, a crash test (a child committing
 * transactions is SIGKILLed; the parent reopens and verifies). Built with the system cc by
 * tests/c.rs (also with AddressSanitizer and UBSan) and run as: api_test DIR SEED.
 * Prints "api_test: ok, N checks" at the end; any failed check prints its line and exits 1. */
#define _GNU_SOURCE
#include "daisy.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static int checks;
#define CHECK(c)                                                                         \
    do {                                                                                 \
        checks++;                                                                        \
        if (!(c)) {                                                                      \
            fprintf(stderr, "api_test.c:%d: check failed: %s (errmsg: %s)\n", __LINE__, \
                    #c, daisy_errmsg());                                                 \
            exit(1);                                                                     \
        }                                                                                \
    } while (0)
#define OK(e) CHECK((e) == DAISY_OK)
#define ERR(e, code) CHECK((e) == (code))

static char dir[512];
static unsigned long long seed;
static int codes_seen[64];
static void seen(int code) { codes_seen[-code] = 1; }
#define ERRC(e, code)        \
    do {                     \
        ERR(e, code);        \
        seen(code);          \
        CHECK(strlen(daisy_errmsg()) > 0); \
    } while (0)

static unsigned long long rnd(void) {
    seed ^= seed << 13;
    seed ^= seed >> 7;
    seed ^= seed << 17;
    return seed;
}

static void path_of(char *out, const char *name) { snprintf(out, 600, "%s/%s", dir, name); }

struct root {
    uint64_t counter;
    uint64_t map;
    uint64_t tree;
    uint64_t seq;
    uint64_t list;
    uint64_t big;
};

/* ---- errors, version ---- */
static void test_errors(void) {
    CHECK(daisy_version() == DAISY_VERSION);
    for (int c = DAISY_ERR_LAST; c <= 0; c++) {
        const char *s = daisy_strerror(c);
        CHECK(s != NULL && strlen(s) > 0 && strcmp(s, "unknown error code") != 0);
    }
    CHECK(strcmp(daisy_strerror(1), "unknown error code") == 0);
    CHECK(strcmp(daisy_strerror(DAISY_ERR_LAST - 1), "unknown error code") == 0);
}

/* ---- pools ---- */
static void test_pools(void) {
    char p[600], junk[600];
    path_of(p, "pools.pool");
    path_of(junk, "junk.bin");
    daisy_pool *pool = NULL, *other = NULL;
    daisy_options o;
    daisy_options_init(&o);
    CHECK(o.mode == DAISY_MODE_AUTO && o.lanes == 0 && o.log_slot_size == 0);
    daisy_options_init(NULL);

    ERRC(daisy_pool_create(NULL, "t", 0, 0, NULL, &pool), DAISY_EINVAL);
    ERRC(daisy_pool_create(p, "t", 0, 0, NULL, NULL), DAISY_EINVAL);
    o.mode = 7;
    ERRC(daisy_pool_create(p, "t", 0, 0, &o, &pool), DAISY_EINVAL);
    daisy_options_init(&o);
    o.log_slot_size = 100; /* not a multiple of 64 */
    ERRC(daisy_pool_create(p, "t", 8 << 20, 0, &o, &pool), DAISY_EINVAL);
    daisy_options_init(&o);
    o.mode = DAISY_MODE_PMEM;
    o.lanes = 4;
    OK(daisy_pool_create(p, "t", 8 << 20, 64 << 20, &o, &pool));
    CHECK(pool != NULL);
    ERRC(daisy_pool_create(p, "t", 8 << 20, 0, NULL, &other), DAISY_EEXIST);

    daisy_info info;
    OK(daisy_pool_info(pool, &info));
    CHECK(info.mode == DAISY_MODE_PMEM && strlen(info.flush) > 0);
    CHECK(strcmp(info.layout, "t") == 0 && info.lanes == 4);
    CHECK(info.max_size > (32 << 20) && info.max_size <= (64 << 20));
    CHECK(info.root_off == 0 && info.objects == 0 && info.size >= info.heap_size);
    CHECK(strlen(info.fs_type) > 0);
    ERRC(daisy_pool_info(NULL, &info), DAISY_EINVAL);
    OK(daisy_pool_check(pool));
    ERRC(daisy_pool_check(NULL), DAISY_EINVAL);

    /* The same pool twice: busy. */
    ERRC(daisy_pool_open(p, "t", &other), DAISY_EBUSY);
    OK(daisy_pool_close(pool));
    ERRC(daisy_pool_close(NULL), DAISY_EINVAL);

    ERRC(daisy_pool_open(p, "other", &pool), DAISY_ELAYOUT);
    ERRC(daisy_pool_open(p, NULL, &pool), DAISY_EINVAL);
    char missing[600];
    path_of(missing, "missing.pool");
    ERRC(daisy_pool_open(missing, "t", &pool), DAISY_EIO);
    /* A file of zeros is no pool. */
    int fd = open(junk, O_CREAT | O_RDWR | O_TRUNC, 0644);
    CHECK(fd >= 0);
    char zeros[65536] = {0};
    CHECK(write(fd, zeros, sizeof zeros) == (ssize_t)sizeof zeros);
    close(fd);
    ERRC(daisy_pool_open(junk, "t", &pool), DAISY_ENOTPOOL);
    unlink(junk);

    /* A truncated pool is corrupt. */
    OK(daisy_pool_open(p, "t", &pool));
    OK(daisy_pool_info(pool, &info));
    OK(daisy_pool_close(pool));
    CHECK(truncate(p, 1 << 20) == 0);
    ERRC(daisy_pool_open(p, "t", &pool), DAISY_ECORRUPT);
    unlink(p);
}

/* ---- root, direct, transactions ---- */
struct thread_arg {
    daisy_tx *tx;
    int r_write, r_commit, r_abort;
};
static void *other_thread(void *a) {
    struct thread_arg *t = a;
    uint64_t v = 1;
    t->r_write = daisy_tx_write(t->tx, 0, &v, 8);
    t->r_commit = daisy_tx_commit(t->tx);
    t->r_abort = daisy_tx_abort(t->tx);
    return NULL;
}

struct body_arg {
    uint64_t root;
    uint64_t value;
    int ret;
};
static int body(daisy_tx *tx, void *a) {
    struct body_arg *b = a;
    if (daisy_tx_write(tx, b->root, &b->value, 8) != 0) return -100;
    return b->ret;
}
static int failing_body(daisy_tx *tx, void *a) {
    (void)a;
    uint64_t v = 5;
    daisy_tx_write(tx, 1, &v, 8); /* EPTR: aborts the transaction */
    return 0;
}

static void test_tx(daisy_pool *pool) {
    uint64_t root = 0, root2 = 0;
    ERRC(daisy_root(pool, 0, &root), DAISY_EINVAL);
    ERRC(daisy_root(NULL, 8, &root), DAISY_EINVAL);
    OK(daisy_root(pool, sizeof(struct root), &root));
    CHECK(root != 0);
    OK(daisy_root(pool, sizeof(struct root), &root2));
    CHECK(root == root2);
    ERRC(daisy_root(pool, 16, &root2), DAISY_EROOTSIZE);
    struct root *r = daisy_direct(pool, root);
    CHECK(r != NULL && r->counter == 0 && r->map == 0);
    CHECK(daisy_direct(pool, 0) == NULL);
    CHECK(daisy_direct(pool, 1ull << 60) == NULL);
    CHECK(daisy_direct(NULL, root) == NULL);

    /* Commit: a logged write, read back before and after. */
    daisy_tx *tx = NULL;
    ERRC(daisy_tx_begin(NULL, &tx), DAISY_EINVAL);
    OK(daisy_tx_begin(pool, &tx));
    uint64_t v = 42, got = 0;
    OK(daisy_tx_write(tx, root, &v, 8));
    OK(daisy_tx_read(tx, root, &got, 8));
    CHECK(got == 42);
    CHECK(r->counter == 0); /* not applied before commit */
    ERRC(daisy_pool_close(pool), DAISY_EBUSY);
    OK(daisy_tx_commit(tx));
    CHECK(r->counter == 42);

    /* Abort: nothing visible; allocations returned. */
    daisy_info before, after;
    OK(daisy_pool_info(pool, &before));
    OK(daisy_tx_begin(pool, &tx));
    v = 7;
    OK(daisy_tx_write(tx, root, &v, 8));
    uint64_t obj = 0, zobj = 0;
    OK(daisy_tx_alloc(tx, 100, &obj));
    OK(daisy_tx_alloc_zeroed(tx, 200, &zobj));
    CHECK(obj != 0 && zobj != 0 && obj != zobj);
    OK(daisy_tx_abort(tx));
    CHECK(r->counter == 42);
    OK(daisy_pool_info(pool, &after));
    CHECK(after.objects == before.objects);

    /* Alloc, zeroed contents, link, free. */
    OK(daisy_tx_begin(pool, &tx));
    OK(daisy_tx_alloc_zeroed(tx, 64, &zobj));
    unsigned char buf[64];
    memset(buf, 0xAA, sizeof buf);
    OK(daisy_tx_read(tx, zobj, buf, 64));
    for (int i = 0; i < 64; i++) CHECK(buf[i] == 0);
    OK(daisy_tx_alloc(tx, 32, &obj));
    const char msg[32] = "hello, persistent world";
    OK(daisy_tx_write(tx, obj, msg, sizeof msg));
    OK(daisy_tx_write(tx, root + offsetof(struct root, list), &obj, 8));
    OK(daisy_tx_commit(tx));
    CHECK(memcmp(daisy_direct(pool, obj), msg, sizeof msg) == 0);
    OK(daisy_pool_info(pool, &after));
    CHECK(after.objects == before.objects + 2);
    OK(daisy_tx_begin(pool, &tx));
    OK(daisy_tx_free(tx, zobj));
    OK(daisy_tx_commit(tx));
    OK(daisy_pool_info(pool, &after));
    CHECK(after.objects == before.objects + 1);

    /* add_range: declare, store directly, commit. */
    OK(daisy_tx_begin(pool, &tx));
    OK(daisy_tx_add_range(tx, root, 8));
    r->counter = 1000;
    OK(daisy_tx_commit(tx));
    CHECK(r->counter == 1000);
    /* ... and abort restores the snapshot. */
    OK(daisy_tx_begin(pool, &tx));
    OK(daisy_tx_add_range(tx, obj, 8));
    memcpy(daisy_direct(pool, obj), "XXXXXXXX", 8);
    OK(daisy_tx_abort(tx));
    CHECK(memcmp(daisy_direct(pool, obj), msg, sizeof msg) == 0);
    /* ... and an add_range of a fresh object is made durable with it. */
    OK(daisy_tx_begin(pool, &tx));
    uint64_t fresh = 0;
    OK(daisy_tx_alloc(tx, 16, &fresh));
    OK(daisy_tx_add_range(tx, fresh, 16));
    memcpy(daisy_direct(pool, fresh), "0123456789abcdef", 16);
    OK(daisy_tx_write(tx, root + offsetof(struct root, big), &fresh, 8));
    OK(daisy_tx_commit(tx));
    CHECK(memcmp(daisy_direct(pool, fresh), "0123456789abcdef", 16) == 0);

    /* Errors inside a transaction abort it all. */
    OK(daisy_tx_begin(pool, &tx));
    v = 99;
    OK(daisy_tx_write(tx, root, &v, 8));
    ERRC(daisy_tx_write(tx, 8, &v, 8), DAISY_EPTR); /* the header: outside the heap */
    ERRC(daisy_tx_write(tx, root, &v, 8), DAISY_EABORTED);
    ERRC(daisy_tx_commit(tx), DAISY_EABORTED);
    CHECK(r->counter == 1000);
    OK(daisy_tx_begin(pool, &tx));
    ERRC(daisy_tx_free(tx, root + 8), DAISY_EPTR);
    OK(daisy_tx_abort(tx));
    OK(daisy_tx_begin(pool, &tx));
    ERRC(daisy_tx_write(tx, root, NULL, 8), DAISY_EINVAL);
    OK(daisy_tx_abort(tx));
    OK(daisy_tx_begin(pool, &tx));
    ERRC(daisy_tx_read(tx, 1ull << 50, buf, 8), DAISY_EPTR);
    OK(daisy_tx_abort(tx));
    OK(daisy_tx_begin(pool, &tx));
    ERRC(daisy_tx_add_range(tx, 1ull << 50, 8), DAISY_EPTR);
    ERRC(daisy_tx_alloc(tx, 8, &obj), DAISY_EABORTED);
    OK(daisy_tx_abort(tx));
    OK(daisy_tx_begin(pool, &tx));
    ERRC(daisy_tx_alloc(tx, 8, NULL), DAISY_EINVAL);
    OK(daisy_tx_abort(tx));
    OK(daisy_tx_begin(pool, &tx));
    ERRC(daisy_tx_alloc_zeroed(tx, 8, NULL), DAISY_EINVAL);
    OK(daisy_tx_abort(tx));
    ERRC(daisy_tx_commit(NULL), DAISY_EINVAL);
    ERRC(daisy_tx_abort(NULL), DAISY_EINVAL);
    ERRC(daisy_tx_add_range(NULL, root, 8), DAISY_EINVAL);

    /* A full pool (64 MiB at most). */
    OK(daisy_tx_begin(pool, &tx));
    ERRC(daisy_tx_alloc(tx, 1ull << 30, &obj), DAISY_ENOSPC);
    OK(daisy_tx_abort(tx));
    /* A logged write larger than the log slot with no room for the overflow. */
    OK(daisy_tx_begin(pool, &tx));
    uint64_t huge = 0;
    OK(daisy_tx_alloc(tx, 30 << 20, &huge));
    OK(daisy_tx_commit(tx));
    OK(daisy_tx_begin(pool, &tx));
    char *big = calloc(1, 30 << 20);
    CHECK(big != NULL);
    memset(big, 1, 30 << 20);
    int w = daisy_tx_write(tx, huge, big, 30 << 20);
    int c = w == 0 ? daisy_tx_commit(tx) : (daisy_tx_abort(tx), w);
    ERRC(c, DAISY_ETXTOOLARGE);
    free(big);
    OK(daisy_tx_begin(pool, &tx));
    OK(daisy_tx_free(tx, huge));
    OK(daisy_tx_commit(tx));

    /* Another thread may not use a transaction. */
    OK(daisy_tx_begin(pool, &tx));
    struct thread_arg ta = {tx, 0, 0, 0};
    pthread_t th;
    CHECK(pthread_create(&th, NULL, other_thread, &ta) == 0);
    pthread_join(th, NULL);
    CHECK(ta.r_write == DAISY_ETHREAD && ta.r_commit == DAISY_ETHREAD &&
          ta.r_abort == DAISY_ETHREAD);
    seen(DAISY_ETHREAD);
    v = 1001;
    OK(daisy_tx_write(tx, root, &v, 8)); /* still usable by its own thread */
    OK(daisy_tx_commit(tx));
    CHECK(r->counter == 1001);

    /* The callback form. */
    struct body_arg ba = {root, 2002, 0};
    OK(daisy_tx_run(pool, body, &ba));
    CHECK(r->counter == 2002);
    ba.value = 3003;
    ba.ret = 17;
    CHECK(daisy_tx_run(pool, body, &ba) == 17);
    CHECK(r->counter == 2002);
    ERRC(daisy_tx_run(pool, failing_body, NULL), DAISY_EABORTED);
    ERRC(daisy_tx_run(pool, NULL, NULL), DAISY_EINVAL);
    CHECK(r->counter == 2002);
}

/* ---- collections ---- */
struct collect {
    int n;
    size_t bytes;
    char last[64];
    int stop_at;
};
static int entry_cb(void *a, const void *k, size_t kl, const void *v, size_t vl) {
    struct collect *c = a;
    c->n++;
    c->bytes += kl + vl;
    size_t n = kl < 63 ? kl : 63;
    memcpy(c->last, k, n);
    c->last[n] = 0;
    (void)v;
    return c->n == c->stop_at ? 77 : 0;
}
static void value_cb(void *a, const void *v, size_t len) {
    struct collect *c = a;
    c->n++;
    c->bytes += len;
    size_t n = len < 63 ? len : 63;
    memcpy(c->last, v, n);
    c->last[n] = 0;
}

static void test_map(daisy_pool *pool, uint64_t root) {
    daisy_tx *tx;
    uint64_t id = 0;
    OK(daisy_tx_begin(pool, &tx));
    OK(daisy_map_create(tx, &id));
    OK(daisy_tx_write(tx, root + offsetof(struct root, map), &id, 8));
    OK(daisy_tx_commit(tx));
    daisy_map *m = NULL, *m2 = NULL;
    ERRC(daisy_map_open(pool, root, &m), DAISY_ENOTCOLL);
    OK(daisy_map_open(pool, id, &m));
    ERRC(daisy_map_open(pool, id, &m2), DAISY_EBUSY);

    CHECK(daisy_map_insert(m, NULL, "k1", 2, "v1", 2) == 0);
    CHECK(daisy_map_insert(m, NULL, "k1", 2, "value-1", 7) == 1);
    ERRC(daisy_map_insert(NULL, NULL, "k", 1, "v", 1), DAISY_EINVAL);
    ERRC(daisy_map_insert(m, NULL, NULL, 1, "v", 1), DAISY_EINVAL);
    char buf[16];
    size_t len = 0;
    OK(daisy_map_get(m, NULL, "k1", 2, buf, sizeof buf, &len));
    CHECK(len == 7 && memcmp(buf, "value-1", 7) == 0);
    ERRC(daisy_map_get(m, NULL, "k1", 2, buf, 3, &len), DAISY_ENOBUFS);
    CHECK(len == 7 && memcmp(buf, "val", 3) == 0);
    ERRC(daisy_map_get(m, NULL, "zz", 2, buf, sizeof buf, &len), DAISY_ENOTFOUND);
    struct collect c = {0};
    OK(daisy_map_get_cb(m, NULL, "k1", 2, value_cb, &c));
    CHECK(c.n == 1 && c.bytes == 7 && strcmp(c.last, "value-1") == 0);
    ERRC(daisy_map_get_cb(m, NULL, "k1", 2, NULL, &c), DAISY_EINVAL);
    ERRC(daisy_map_get_cb(m, NULL, "nope", 4, value_cb, &c), DAISY_ENOTFOUND);

    /* Many random 4-byte pairs (seeded), then every one read back. */
    enum { N = 2000 };
    static uint32_t keys[N], vals[N];
    for (int i = 0; i < N; i++) {
        keys[i] = (uint32_t)(rnd() | 0x80000000u) ^ (uint32_t)i;
        vals[i] = (uint32_t)rnd();
        CHECK(daisy_map_insert(m, NULL, &keys[i], 4, &vals[i], 4) >= 0);
    }
    uint64_t n = 0;
    OK(daisy_map_len(m, NULL, &n));
    for (int i = 0; i < N; i++) {
        uint32_t got = 0;
        OK(daisy_map_get(m, NULL, &keys[i], 4, &got, 4, &len));
        /* A key drawn twice keeps its later value. */
        int later = 0;
        for (int j = i + 1; j < N && !later; j++) later = keys[j] == keys[i];
        CHECK(len == 4 && (later || got == vals[i]));
    }
    memset(&c, 0, sizeof c);
    OK(daisy_map_foreach(m, NULL, entry_cb, &c));
    CHECK((uint64_t)c.n == n);
    memset(&c, 0, sizeof c);
    c.stop_at = 5;
    CHECK(daisy_map_foreach(m, NULL, entry_cb, &c) == 77 && c.n == 5);
    ERRC(daisy_map_foreach(m, NULL, NULL, &c), DAISY_EINVAL);

    /* Inside a transaction: its own writes read back, then abort. */
    OK(daisy_tx_begin(pool, &tx));
    CHECK(daisy_map_insert(m, tx, "txkey", 5, "txval", 5) == 0);
    OK(daisy_map_get(m, tx, "txkey", 5, buf, sizeof buf, &len));
    CHECK(len == 5 && memcmp(buf, "txval", 5) == 0);
    ERRC(daisy_map_get(m, NULL, "txkey", 5, buf, sizeof buf, &len), DAISY_ENOTFOUND);
    uint64_t ntx = 0;
    OK(daisy_map_len(m, tx, &ntx));
    CHECK(ntx == n + 1);
    OK(daisy_map_remove(m, tx, "k1", 2));
    memset(&c, 0, sizeof c);
    OK(daisy_map_foreach(m, tx, entry_cb, &c));
    CHECK((uint64_t)c.n == n);
    OK(daisy_tx_abort(tx));
    OK(daisy_map_get(m, NULL, "k1", 2, buf, sizeof buf, &len));
    OK(daisy_map_len(m, NULL, &ntx));
    CHECK(ntx == n);
    /* ... and committed. */
    OK(daisy_tx_begin(pool, &tx));
    CHECK(daisy_map_insert(m, tx, "txkey", 5, "txval", 5) == 0);
    OK(daisy_tx_commit(tx));
    OK(daisy_map_get(m, NULL, "txkey", 5, buf, sizeof buf, &len));
    OK(daisy_map_remove(m, NULL, "txkey", 5));
    ERRC(daisy_map_remove(m, NULL, "txkey", 5), DAISY_ENOTFOUND);
    ERRC(daisy_map_len(m, NULL, NULL), DAISY_EINVAL);
    daisy_map_close(m);
    daisy_map_close(NULL);
    OK(daisy_map_open(pool, id, &m));
    OK(daisy_map_len(m, NULL, &ntx));
    CHECK(ntx == n);
    daisy_map_close(m);
}

static void test_tree(daisy_pool *pool, uint64_t root) {
    daisy_tx *tx;
    uint64_t id = 0;
    OK(daisy_tx_begin(pool, &tx));
    OK(daisy_tree_create(tx, &id));
    OK(daisy_tx_write(tx, root + offsetof(struct root, tree), &id, 8));
    OK(daisy_tx_commit(tx));
    daisy_tree *t = NULL;
    ERRC(daisy_tree_open(pool, root, &t), DAISY_ENOTCOLL);
    OK(daisy_tree_open(pool, id, &t));
    char k[16], v[16];
    for (int i = 99; i >= 0; i--) {
        snprintf(k, sizeof k, "key%03d", i);
        snprintf(v, sizeof v, "val%d", i);
        CHECK(daisy_tree_insert(t, NULL, k, strlen(k), v, strlen(v)) == 0);
    }
    CHECK(daisy_tree_insert(t, NULL, "key000", 6, "zero", 4) == 1);
    uint64_t n = 0;
    OK(daisy_tree_len(t, NULL, &n));
    CHECK(n == 100);
    char buf[16];
    size_t len;
    OK(daisy_tree_get(t, NULL, "key000", 6, buf, sizeof buf, &len));
    CHECK(len == 4 && memcmp(buf, "zero", 4) == 0);
    ERRC(daisy_tree_get(t, NULL, "key000", 6, buf, 2, &len), DAISY_ENOBUFS);
    ERRC(daisy_tree_get(t, NULL, "nokey", 5, buf, sizeof buf, &len), DAISY_ENOTFOUND);
    struct collect c = {0};
    OK(daisy_tree_foreach(t, 0, entry_cb, &c));
    CHECK(c.n == 100 && strcmp(c.last, "key099") == 0);
    memset(&c, 0, sizeof c);
    OK(daisy_tree_foreach(t, 1, entry_cb, &c));
    CHECK(c.n == 100 && strcmp(c.last, "key000") == 0);
    memset(&c, 0, sizeof c);
    c.stop_at = 3;
    CHECK(daisy_tree_foreach(t, 0, entry_cb, &c) == 77 && strcmp(c.last, "key002") == 0);
    ERRC(daisy_tree_foreach(t, 0, NULL, NULL), DAISY_EINVAL);
    OK(daisy_tx_begin(pool, &tx));
    OK(daisy_tree_remove(t, tx, "key050", 6));
    CHECK(daisy_tree_insert(t, tx, "a", 1, "b", 1) == 0);
    OK(daisy_tree_len(t, tx, &n));
    CHECK(n == 100);
    ERRC(daisy_tree_get(t, tx, "key050", 6, buf, sizeof buf, &len), DAISY_ENOTFOUND);
    OK(daisy_tree_get(t, tx, "a", 1, buf, sizeof buf, &len));
    OK(daisy_tx_commit(tx));
    OK(daisy_tree_remove(t, NULL, "a", 1));
    ERRC(daisy_tree_remove(t, NULL, "a", 1), DAISY_ENOTFOUND);
    OK(daisy_tree_len(t, NULL, &n));
    CHECK(n == 99);
    daisy_tree_close(t);
    daisy_tree_close(NULL);
}

static void test_seq(daisy_pool *pool, uint64_t root) {
    daisy_tx *tx;
    uint64_t id = 0;
    OK(daisy_tx_begin(pool, &tx));
    OK(daisy_seq_create(tx, &id));
    OK(daisy_tx_write(tx, root + offsetof(struct root, seq), &id, 8));
    OK(daisy_tx_commit(tx));
    daisy_seq *s = NULL;
    ERRC(daisy_seq_open(pool, root, &s), DAISY_ENOTCOLL);
    OK(daisy_seq_open(pool, id, &s));
    OK(daisy_seq_push(s, NULL, 0, "b", 1));
    OK(daisy_seq_push(s, NULL, 0, "c", 1));
    OK(daisy_seq_push(s, NULL, 1, "a", 1));
    uint64_t n = 0;
    OK(daisy_seq_len(s, NULL, &n));
    CHECK(n == 3);
    char buf[8];
    size_t len;
    OK(daisy_seq_get(s, NULL, 0, buf, sizeof buf, &len));
    CHECK(len == 1 && buf[0] == 'a');
    OK(daisy_seq_get(s, NULL, -1, buf, sizeof buf, &len));
    CHECK(buf[0] == 'c');
    ERRC(daisy_seq_get(s, NULL, 100, buf, sizeof buf, &len), DAISY_ERANGE);
    struct collect c = {0};
    OK(daisy_seq_foreach(s, NULL, value_cb, &c));
    CHECK(c.n == 3 && strcmp(c.last, "c") == 0);
    ERRC(daisy_seq_foreach(s, NULL, NULL, NULL), DAISY_EINVAL);
    OK(daisy_tx_begin(pool, &tx));
    OK(daisy_seq_push(s, tx, 0, "longer item", 11));
    ERRC(daisy_seq_pop(s, tx, 0, buf, 4, &len), DAISY_ENOBUFS);
    OK(daisy_seq_push(s, tx, 0, "d", 1));
    memset(&c, 0, sizeof c);
    OK(daisy_seq_foreach(s, tx, value_cb, &c));
    CHECK(c.n == 4 && strcmp(c.last, "d") == 0);
    OK(daisy_seq_len(s, tx, &n));
    CHECK(n == 4);
    OK(daisy_seq_get(s, tx, 3, buf, sizeof buf, &len));
    CHECK(buf[0] == 'd');
    OK(daisy_tx_commit(tx));
    OK(daisy_seq_pop(s, NULL, 1, buf, sizeof buf, &len));
    CHECK(len == 1 && buf[0] == 'a');
    for (int i = 0; i < 3; i++) OK(daisy_seq_pop(s, NULL, 0, buf, sizeof buf, &len));
    ERRC(daisy_seq_pop(s, NULL, 0, buf, sizeof buf, &len), DAISY_ENOTFOUND);
    ERRC(daisy_seq_pop(s, NULL, 0, buf, sizeof buf, NULL), DAISY_EINVAL);
    daisy_seq_close(s);
    daisy_seq_close(NULL);
}

/* ---- nested lanes, poisoning, panics ---- */
static void test_lanes_and_panics(void) {
    char p[600];
    path_of(p, "lanes.pool");
    daisy_options o;
    daisy_options_init(&o);
    o.lanes = 1;
    daisy_pool *pool;
    OK(daisy_pool_create(p, "t", 4 << 20, 0, &o, &pool));
    uint64_t root;
    OK(daisy_root(pool, 8, &root));
    daisy_tx *a, *b;
    OK(daisy_tx_begin(pool, &a));
    ERRC(daisy_tx_begin(pool, &b), DAISY_ENESTED);
    OK(daisy_tx_abort(a));

    unsetenv("DAISY_TEST_HOOKS");
    ERRC(daisy_test_panic(pool), DAISY_EUNSUPPORTED);
    setenv("DAISY_TEST_HOOKS", "1", 1);
    ERRC(daisy_test_panic(pool), DAISY_EPANIC);
    ERRC(daisy_tx_begin(pool, &a), DAISY_EPOISONED);
    ERRC(daisy_test_panic(NULL), DAISY_EINVAL);
    OK(daisy_pool_close(pool));
    /* Reopened, it works again. */
    OK(daisy_pool_open(p, "t", &pool));
    uint64_t v = 5;
    OK(daisy_tx_begin(pool, &a));
    OK(daisy_tx_write(a, root, &v, 8));
    OK(daisy_tx_commit(a));
    OK(daisy_pool_close(pool));
    unlink(p);
}

/* ---- crash: a child commits, is killed, the parent recovers ---- */
static void test_crash(void) {
    char p[600];
    path_of(p, "crash.pool");
    daisy_pool *pool;
    OK(daisy_pool_create(p, "crash", 16 << 20, 0, NULL, &pool));
    uint64_t root, id;
    OK(daisy_root(pool, sizeof(struct root), &root));
    daisy_tx *tx;
    OK(daisy_tx_begin(pool, &tx));
    OK(daisy_map_create(tx, &id));
    OK(daisy_tx_write(tx, root + offsetof(struct root, map), &id, 8));
    OK(daisy_tx_commit(tx));
    OK(daisy_pool_close(pool));

    int fds[2];
    CHECK(pipe(fds) == 0);
    pid_t child = fork();
    CHECK(child >= 0);
    if (child == 0) {
        close(fds[0]);
        daisy_pool *cp;
        if (daisy_pool_open(p, "crash", &cp) != 0) _exit(2);
        daisy_map *m;
        if (daisy_map_open(cp, id, &m) != 0) _exit(3);
        for (uint64_t i = 1;; i++) {
            /* One transaction: the counter and a map entry keyed by it, together. */
            daisy_tx *t;
            if (daisy_tx_begin(cp, &t) != 0) _exit(4);
            if (daisy_tx_write(t, root, &i, 8) != 0) _exit(5);
            if (daisy_map_insert(m, t, &i, 8, &i, 8) != 0) _exit(6);
            if (daisy_tx_commit(t) != 0) _exit(7);
            if (write(fds[1], &i, 8) != 8) _exit(8); /* reported only once durable */
        }
    }
    close(fds[1]);
    uint64_t reported = 0, x;
    uint64_t kill_after = 200 + rnd() % 800;
    while (reported < kill_after && read(fds[0], &x, 8) == 8) reported = x;
    kill(child, SIGKILL);
    int st;
    waitpid(child, &st, 0);
    CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
    while (read(fds[0], &x, 8) == 8) reported = x;
    close(fds[0]);

    OK(daisy_pool_open(p, "crash", &pool));
    OK(daisy_pool_check(pool));
    struct root *r = daisy_direct(pool, root);
    CHECK(r->counter >= reported);
    daisy_map *m;
    OK(daisy_map_open(pool, id, &m));
    uint64_t n;
    OK(daisy_map_len(m, NULL, &n));
    CHECK(n == r->counter); /* all of each transaction or none */
    for (uint64_t i = 1; i <= r->counter; i++) {
        uint64_t got;
        size_t len;
        OK(daisy_map_get(m, NULL, &i, 8, &got, 8, &len));
        CHECK(got == i);
    }
    printf("crash: killed after %llu reported commits, recovered %llu\n",
           (unsigned long long)reported, (unsigned long long)r->counter);
    daisy_map_close(m);
    OK(daisy_pool_close(pool));
    unlink(p);
}

/* ---- crash with direct stores: a child stores into declared ranges and is killed ---- */
/* The undo records of daisy_tx_add_range (docs/FORMAT.md 2.5): a kill after direct stores
 * and before the commit point must leave the declared bytes as they were; committed ones
 * must all be there. The child loops (two words stored directly, same value, then commit),
 * and its last transaction stays open with the stores made. */
static void test_crash_direct(void) {
    char p[600];
    path_of(p, "direct.pool");
    daisy_pool *pool;
    OK(daisy_pool_create(p, "direct", 16 << 20, 0, NULL, &pool));
    uint64_t root;
    OK(daisy_root(pool, sizeof(struct root), &root));
    OK(daisy_pool_close(pool));
    uint64_t commits = 1 + rnd() % 500;

    int fds[2];
    CHECK(pipe(fds) == 0);
    pid_t child = fork();
    CHECK(child >= 0);
    if (child == 0) {
        close(fds[0]);
        daisy_pool *cp;
        if (daisy_pool_open(p, "direct", &cp) != 0) _exit(2);
        struct root *r = daisy_direct(cp, root);
        for (uint64_t i = 1;; i++) {
            daisy_tx *t;
            if (daisy_tx_begin(cp, &t) != 0) _exit(4);
            if (daisy_tx_add_range(t, root + offsetof(struct root, counter), 8) != 0) _exit(5);
            r->counter = i;
            if (daisy_tx_add_range(t, root + offsetof(struct root, big), 8) != 0) _exit(6);
            r->big = i;
            if (i > commits) {
                /* Also bytes no committed transaction wrote (recovery's replay of the last
                 * commit's redo record rewrites counter and big, and cannot hide a missing
                 * undo of these). */
                if (daisy_tx_add_range(t, root + offsetof(struct root, tree), 8) != 0) _exit(9);
                r->tree = 0xdead;
                /* Stores made, transaction open: tell the parent, wait to be killed. */
                uint64_t done = ~0ull;
                if (write(fds[1], &done, 8) != 8) _exit(8);
                for (;;) pause();
            }
            if (daisy_tx_commit(t) != 0) _exit(7);
            if (write(fds[1], &i, 8) != 8) _exit(8);
        }
    }
    close(fds[1]);
    uint64_t reported = 0, x;
    int open_tx_seen = 0;
    while (read(fds[0], &x, 8) == 8) {
        if (x == ~0ull) {
            open_tx_seen = 1;
            break;
        }
        reported = x;
    }
    kill(child, SIGKILL);
    int st;
    waitpid(child, &st, 0);
    CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
    close(fds[0]);
    CHECK(open_tx_seen && reported == commits);

    OK(daisy_pool_open(p, "direct", &pool));
    OK(daisy_pool_check(pool));
    struct root *r = daisy_direct(pool, root);
    /* The open transaction's stores (commits + 1) are gone; every commit is there. */
    CHECK(r->counter == commits && r->big == commits && r->tree == 0);
    printf("crash with direct stores: %llu commits, the open transaction undone\n",
           (unsigned long long)commits);
    OK(daisy_pool_close(pool));
    unlink(p);
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: api_test DIR SEED\n");
        return 2;
    }
    snprintf(dir, sizeof dir, "%s", argv[1]);
    seed = strtoull(argv[2], NULL, 10) | 1;
    printf("api_test: seed %s\n", argv[2]);
    test_errors();
    test_pools();

    char p[600];
    path_of(p, "main.pool");
    daisy_pool *pool;
    OK(daisy_pool_create(p, "main", 16 << 20, 64 << 20, NULL, &pool));
    test_tx(pool);
    uint64_t root;
    OK(daisy_root(pool, sizeof(struct root), &root));
    test_map(pool, root);
    test_tree(pool, root);
    test_seq(pool, root);
    OK(daisy_pool_check(pool));
    OK(daisy_pool_close(pool));
    /* Everything is there after a reopen. */
    OK(daisy_pool_open(p, "main", &pool));
    struct root *r = daisy_direct(pool, root);
    CHECK(r->counter == 2002 && r->map != 0 && r->tree != 0 && r->seq != 0);
    CHECK(memcmp(daisy_direct(pool, r->list), "hello", 5) == 0);
    OK(daisy_pool_close(pool));
    unlink(p);

    test_lanes_and_panics();
    test_crash();
    test_crash_direct();

    int missing = 0;
    for (int c = DAISY_ERR_LAST; c < 0; c++)
        if (!codes_seen[-c]) {
            fprintf(stderr, "error code %d (%s) not exercised\n", c, daisy_strerror(c));
            missing++;
        }
    CHECK(missing == 0);
    printf("api_test: ok, %d checks\n", checks);
    return 0;
}
