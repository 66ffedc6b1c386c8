/* Unit tests of the proxy's fault engine (tp_core.c) without sockets: bytes
 * go in with scripted read sizes and come out with scripted write sizes on a
 * virtual clock, and the output is compared with the input. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tp_core.h"

#define MS INT64_C(1000000)

static int failures;

#define CHECK(cond)                                                                  \
    do {                                                                             \
        if (!(cond)) {                                                               \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
            failures++;                                                              \
        }                                                                            \
    } while (0)

/* What came out of a direction, and the corruptions it reported. */
typedef struct sink {
    uint8_t *data;
    size_t len;
    size_t writes[1 << 16]; /* sizes of the first writes */
    size_t nwrites;
    uint64_t coff[64];
    uint8_t cold[64], cnew[64], cbit[64];
    size_t ncorrupt;
} sink;

static void on_corrupt(void *ctx, uint64_t off, unsigned bit, uint8_t old_byte, uint8_t new_byte)
{
    sink *s = ctx;
    if (s->ncorrupt < 64) {
        s->coff[s->ncorrupt] = off;
        s->cbit[s->ncorrupt] = (uint8_t)bit;
        s->cold[s->ncorrupt] = old_byte;
        s->cnew[s->ncorrupt] = new_byte;
    }
    s->ncorrupt++;
}

/* Writes everything that is due, at most `room` bytes per call (a socket
 * accepting partial writes). */
static void drain(tp_dir *d, sink *s, int64_t now, size_t room)
{
    struct iovec iov[2];
    int niov;
    size_t len;
    while ((len = tp_dir_ready(d, now, iov, &niov)) > 0) {
        size_t n = len < room ? len : room;
        size_t done = 0;
        for (int i = 0; i < niov && done < n; i++) {
            size_t k = iov[i].iov_len < n - done ? iov[i].iov_len : n - done;
            memcpy(s->data + s->len + done, iov[i].iov_base, k);
            done += k;
        }
        s->len += n;
        if (s->nwrites < sizeof(s->writes) / sizeof(s->writes[0]))
            s->writes[s->nwrites] = n;
        s->nwrites++;
        tp_dir_sent(d, n, on_corrupt, s);
    }
}

/* Pushes in[0..n) through d in reads of random size (up to max_read) and
 * writes of at most room bytes, on a clock advancing 1 ms per step. */
static void pump(tp_dir *d, const uint8_t *in, size_t n, sink *s, uint64_t seed, size_t max_read,
                 size_t room)
{
    tp_rng r;
    tp_rng_seed(&r, seed);
    size_t pos = 0;
    int64_t now = 0;
    for (int guard = 0; guard < 10000000 && !tp_dir_finished(d); guard++) {
        struct iovec iov[2];
        int niov;
        size_t space = tp_dir_read_space(d, iov, &niov);
        if (pos < n && space > 0) {
            size_t want = 1 + (size_t)tp_rng_below(&r, max_read);
            want = want < n - pos ? want : n - pos;
            want = want < space ? want : space;
            size_t done = 0;
            for (int i = 0; i < niov && done < want; i++) {
                size_t k = iov[i].iov_len < want - done ? iov[i].iov_len : want - done;
                memcpy(iov[i].iov_base, in + pos + done, k);
                done += k;
            }
            pos += want;
            tp_dir_received(d, want, now);
        } else if (pos == n && !d->eof) {
            tp_dir_set_eof(d, now);
        }
        tp_dir_schedule(d, now);
        drain(d, s, now, room);
        now += MS;
    }
}

static uint8_t *make_input(size_t n, uint64_t seed)
{
    uint8_t *p = malloc(n);
    tp_rng r;
    tp_rng_seed(&r, seed);
    for (size_t i = 0; i < n; i++)
        p[i] = (uint8_t)tp_rng_next(&r);
    return p;
}

static sink *new_sink(size_t n)
{
    sink *s = calloc(1, sizeof(*s));
    s->data = malloc(n);
    return s;
}

static void free_sink(sink *s)
{
    free(s->data);
    free(s);
}

/* No faults: identical output, one chunk per read, ring wrap-around. */
static void test_clean(void)
{
    size_t n = 300000;
    uint8_t *in = make_input(n, 1);
    tp_dir d;
    sink *s = new_sink(n);
    CHECK(tp_dir_init(&d, NULL, 4096, 1) == 0);
    pump(&d, in, n, s, 2, 3000, 1000);
    CHECK(s->len == n && memcmp(in, s->data, n) == 0);
    CHECK(d.st.bytes == n && d.st.corruptions == 0 && d.st.merged == 0);
    CHECK(s->ncorrupt == 0);
    tp_dir_free(&d);
    free_sink(s);
    free(in);
}

/* --split: sizes within 1..max_seg, small ones common, and the boundaries
 * depend on the seed only, not on how the bytes were read. */
static void test_split(void)
{
    size_t n = 200000;
    uint8_t *in = make_input(n, 3);
    tp_faults f = {.split = true, .max_seg = 1000, .hold_ms = 1000};
    sink *a = new_sink(n), *b = new_sink(n);
    tp_dir d;
    CHECK(tp_dir_init(&d, &f, 8192, 42) == 0);
    pump(&d, in, n, a, 5, 7000, SIZE_MAX);
    tp_dir_free(&d);
    CHECK(tp_dir_init(&d, &f, 8192, 42) == 0);
    pump(&d, in, n, b, 6, 13, SIZE_MAX); /* tiny reads: every segment is merged */
    CHECK(d.st.merged > 0);
    tp_dir_free(&d);
    CHECK(a->len == n && memcmp(in, a->data, n) == 0);
    CHECK(b->len == n && memcmp(in, b->data, n) == 0);
    CHECK(a->nwrites == b->nwrites);
    size_t small = 0, big = 0;
    for (size_t i = 0; i < a->nwrites && i < b->nwrites; i++) {
        CHECK(a->writes[i] == b->writes[i]);
        CHECK(a->writes[i] >= 1 && a->writes[i] <= 1000);
        small += a->writes[i] <= 16;
        big += a->writes[i] > 500;
    }
    CHECK(small > a->nwrites / 10 && big > 0);
    free_sink(a);
    free_sink(b);
    free(in);
}

/* A partial segment waits hold_ms for more bytes, then goes out short. */
static void test_hold(void)
{
    tp_faults f = {.split = true, .max_seg = 4096, .hold_ms = 5};
    tp_dir d;
    struct iovec iov[2];
    int niov;
    CHECK(tp_dir_init(&d, &f, 8192, 7) == 0);
    d.next_cut = 100; /* pin the first boundary for the test */
    tp_dir_read_space(&d, iov, &niov);
    memset(iov[0].iov_base, 'x', 10);
    tp_dir_received(&d, 10, 0);
    CHECK(tp_dir_ready(&d, 0, iov, &niov) == 0);
    CHECK(tp_dir_deadline(&d, 0) == 5 * MS);
    tp_dir_schedule(&d, 5 * MS - 1);
    CHECK(tp_dir_ready(&d, 5 * MS - 1, iov, &niov) == 0);
    /* Asked later than the hold ended, before anyone scheduled: still due
     * (an event loop must not lose the timer between two clock reads). */
    CHECK(tp_dir_deadline(&d, 7 * MS) == 5 * MS);
    tp_dir_schedule(&d, 5 * MS);
    CHECK(tp_dir_ready(&d, 5 * MS, iov, &niov) == 10);
    tp_dir_sent(&d, 10, NULL, NULL);
    /* The planned boundary stays: 200 more bytes give a 90-byte segment. */
    tp_dir_read_space(&d, iov, &niov);
    memset(iov[0].iov_base, 'y', 200);
    tp_dir_received(&d, 200, 6 * MS);
    CHECK(tp_dir_ready(&d, 6 * MS, iov, &niov) == 90);
    tp_dir_free(&d);
}

/* --delay-ms: nothing before its release time, releases never decrease,
 * and the deadline says when to come back. */
static void test_delay(void)
{
    tp_faults f = {.delay_min_ms = 10, .delay_max_ms = 50};
    tp_dir d;
    struct iovec iov[2];
    int niov;
    CHECK(tp_dir_init(&d, &f, 8192, 9) == 0);
    for (int i = 0; i < 20; i++) {
        tp_dir_read_space(&d, iov, &niov);
        memset(iov[0].iov_base, i, 10);
        tp_dir_received(&d, 10, i * MS);
    }
    CHECK(d.qlen == 20);
    for (size_t i = 1; i < d.qlen; i++)
        CHECK(d.q[i].release >= d.q[i - 1].release);
    CHECK(d.q[0].release >= 10 * MS && d.q[0].release <= 50 * MS);
    CHECK(tp_dir_ready(&d, 0, iov, &niov) == 0);
    CHECK(tp_dir_deadline(&d, 0) == d.q[0].release);
    CHECK(tp_dir_ready(&d, d.q[0].release, iov, &niov) == 10);
    tp_dir_free(&d);
}

/* --corrupt N: exactly N reported, one per stratum after corrupt_after, and
 * the output differs from the input at exactly those bytes, by that bit. */
static void test_corrupt(void)
{
    size_t n = 50000;
    uint8_t *in = make_input(n, 11);
    tp_faults f = {.split = true,
                   .max_seg = 300,
                   .hold_ms = 1,
                   .corrupt_count = 10,
                   .corrupt_span = 20000,
                   .corrupt_after = 100};
    sink *s = new_sink(n);
    tp_dir d;
    CHECK(tp_dir_init(&d, &f, 4096, 13) == 0);
    pump(&d, in, n, s, 14, 900, 77); /* partial writes split corrupted chunks */
    CHECK(s->len == n);
    CHECK(s->ncorrupt == 10 && d.st.corruptions == 10);
    size_t diffs = 0, j = 0;
    for (size_t i = 0; i < n; i++) {
        if (in[i] == s->data[i])
            continue;
        diffs++;
        CHECK(j < 10 && s->coff[j] == i);
        CHECK(s->cold[j] == in[i] && s->cnew[j] == s->data[i]);
        CHECK((s->cold[j] ^ s->cnew[j]) == (1u << s->cbit[j]));
        CHECK(s->coff[j] >= 100 + j * 2000 && s->coff[j] < 100 + (j + 1) * 2000);
        j++;
    }
    CHECK(diffs == 10);
    tp_dir_free(&d);
    free_sink(s);
    free(in);
}

/* --corrupt-every: one per window, none before corrupt_after; a stream that
 * ends early reports only what was written. */
static void test_corrupt_every(void)
{
    size_t n = 10000;
    uint8_t *in = make_input(n, 15);
    tp_faults f = {.corrupt_every = 1000, .corrupt_after = 500};
    sink *s = new_sink(n);
    tp_dir d;
    CHECK(tp_dir_init(&d, &f, 4096, 17) == 0);
    pump(&d, in, n, s, 18, 2000, SIZE_MAX);
    CHECK(s->ncorrupt == 9 || s->ncorrupt == 10);
    for (size_t j = 0; j < s->ncorrupt && j < 64; j++)
        CHECK(s->coff[j] >= 500 + j * 1000 && s->coff[j] < 500 + (j + 1) * 1000);
    size_t diffs = 0;
    for (size_t i = 0; i < n; i++)
        diffs += in[i] != s->data[i];
    CHECK(diffs == s->ncorrupt);
    tp_dir_free(&d);
    free_sink(s);
    free(in);
}

/* Backpressure: a full ring, or a full chunk queue, stops reading. */
static void test_backpressure(void)
{
    tp_faults f = {.split = true, .max_seg = 1, .hold_ms = 0};
    tp_dir d;
    struct iovec iov[2];
    int niov;
    CHECK(tp_dir_init(&d, NULL, 4096, 1) == 0);
    CHECK(tp_dir_read_space(&d, iov, &niov) == 4096);
    tp_dir_received(&d, 4096, 0);
    CHECK(tp_dir_read_space(&d, iov, &niov) == 0);
    tp_dir_sent(&d, 100, NULL, NULL);
    CHECK(tp_dir_read_space(&d, iov, &niov) == 100 && niov == 1);
    tp_dir_free(&d);
    /* 1-byte segments: TP_QCAP chunks fill the queue before the ring. */
    CHECK(tp_dir_init(&d, &f, 2 * TP_QCAP, 1) == 0);
    tp_dir_received(&d, TP_QCAP + 10, 0);
    CHECK(d.qlen == TP_QCAP);
    CHECK(tp_dir_read_space(&d, iov, &niov) == 0);
    CHECK(tp_dir_deadline(&d, 0) == INT64_MAX); /* waits for writes, not time */
    tp_dir_ready(&d, 0, iov, &niov);
    tp_dir_sent(&d, 1, NULL, NULL);
    CHECK(tp_dir_deadline(&d, 0) <= 0); /* room again: schedule at once */
    tp_dir_schedule(&d, 0);
    CHECK(d.qlen == TP_QCAP && d.cut == TP_QCAP + 1);
    tp_dir_free(&d);
}

int main(void)
{
    test_clean();
    test_split();
    test_hold();
    test_delay();
    test_corrupt();
    test_corrupt_every();
    test_backpressure();
    if (failures != 0) {
        fprintf(stderr, "%d checks failed\n", failures);
        return 1;
    }
    puts("tp_core: all tests passed");
    return 0;
}
