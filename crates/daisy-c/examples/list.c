/* The README's linked-list example, in C: each run adds a node holding the count so far to
 * a persistent list, inside one crash-consistent transaction, then prints the list.
 *
 *   cc -O2 list.c $(pkg-config --cflags --libs daisy) -o list && ./list /dev/shm/list.pool
 */
#define _POSIX_C_SOURCE 200809L
#include <daisy.h>
#include <stddef.h>
#include <stdio.h>

struct root { uint64_t count; uint64_t head; };  /* head: offset of the first node, 0: none */
struct node { uint64_t value; uint64_t next; };

static int die(const char *what, int rc) {
    fprintf(stderr, "%s: %s: %s\n", what, daisy_strerror(rc), daisy_errmsg());
    return 1;
}

int main(int argc, char **argv) {
    const char *path = argc > 1 ? argv[1] : "/dev/shm/example.pool";
    daisy_pool *pool;
    /* Opened when it exists, created otherwise (64 MiB, growing up to 1 GiB). */
    int rc = daisy_pool_open(path, "example", &pool);
    if (rc == DAISY_EIO) rc = daisy_pool_create(path, "example", 64 << 20, 1 << 30, NULL, &pool);
    if (rc) return die("open", rc);
    uint64_t root;
    if ((rc = daisy_root(pool, sizeof(struct root), &root))) return die("root", rc);

    /* All of it or none of it survives a crash; when the commit returns, it is durable. */
    daisy_tx *tx;
    if ((rc = daisy_tx_begin(pool, &tx))) return die("begin", rc);
    struct root r;
    uint64_t node;
    if ((rc = daisy_tx_read(tx, root, &r, sizeof r)) ||
        (rc = daisy_tx_alloc(tx, sizeof(struct node), &node))) {
        daisy_tx_abort(tx);
        return die("tx", rc);
    }
    struct node n = {r.count, r.head};
    struct root nr = {r.count + 1, node};
    /* A failing call aborts the transaction: the commit then reports it. */
    daisy_tx_write(tx, node, &n, sizeof n);
    daisy_tx_write(tx, root, &nr, sizeof nr);
    if ((rc = daisy_tx_commit(tx))) return die("commit", rc);

    /* An abort rolls everything back, allocations included. */
    if ((rc = daisy_tx_begin(pool, &tx))) return die("begin", rc);
    uint64_t zero = 0;
    daisy_tx_write(tx, root + offsetof(struct root, count), &zero, 8);
    daisy_tx_abort(tx);

    /* Reading outside a transaction: committed data, through the mapping. */
    const struct root *rp = daisy_direct(pool, root);
    for (uint64_t p = rp->head; p != 0;) {
        const struct node *np = daisy_direct(pool, p);
        printf("%llu\n", (unsigned long long)np->value);
        p = np->next;
    }
    return (rc = daisy_pool_close(pool)) ? die("close", rc) : 0;
}
