/* Optimized (out-of-order) MPA receiver: properties, placement order, errors,
 * memory cap, allocation failure. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "mpa/fpdu_walk.h"
#include "testutil.h"
#include "uwarp/crc32c.h"
#include "uwarp/mpa.h"

#define MC (UW_MPA_MARKERS | UW_MPA_CRC)

/* ---- a test stream: ULPDUs and their encoding ------------------------------ */

typedef struct stream {
    size_t n;
    uint32_t start;
    unsigned flags;
    uint8_t **data;
    size_t *len;
    size_t *off; /* wire offset of FPDU i; off[n] is the total */
    uint8_t *wire;
    size_t total;
} stream;

static void stream_init(stream *st, size_t n, const size_t *lens, uint32_t start, unsigned flags,
                        tu_rng *g)
{
    memset(st, 0, sizeof(*st));
    st->n = n;
    st->start = start;
    st->flags = flags;
    st->data = calloc(n + 1, sizeof(*st->data));
    st->len = calloc(n + 1, sizeof(*st->len));
    st->off = calloc(n + 1, sizeof(*st->off));
    assert_non_null(st->data);
    for (size_t i = 0; i < n; i++) {
        st->len[i] = lens[i];
        st->data[i] = malloc(lens[i] + 1);
        assert_non_null(st->data[i]);
        tu_rng_fill(g, st->data[i], lens[i]);
    }
}

/* Frames every ULPDU back to back from st->start. */
static void stream_encode(stream *st)
{
    size_t total = 0;
    for (size_t i = 0; i < st->n; i++) {
        st->off[i] = total;
        total += uw_mpa_fpdu_wire_len(st->len[i], st->start + (uint32_t)total, st->flags);
    }
    st->off[st->n] = total;
    st->total = total;
    free(st->wire);
    st->wire = malloc(total + 1);
    assert_non_null(st->wire);
    for (size_t i = 0; i < st->n; i++) {
        ssize_t k = uw_mpa_fpdu_encode(st->wire + st->off[i], total - st->off[i], st->data[i],
                                       st->len[i], st->start + (uint32_t)st->off[i], st->flags);
        assert_int_equal(k, (ssize_t)(st->off[i + 1] - st->off[i]));
    }
}

static void stream_free(stream *st)
{
    for (size_t i = 0; i < st->n; i++)
        free(st->data[i]);
    free(st->data);
    free(st->len);
    free(st->off);
    free(st->wire);
}

/* Index of the FPDU at stream position pos, or SIZE_MAX. */
static size_t find_fpdu(const stream *st, uint32_t pos)
{
    size_t rel = (uint32_t)(pos - st->start), lo = 0, hi = st->n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (st->off[mid] < rel)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < st->n && st->off[lo] == rel ? lo : SIZE_MAX;
}

/* ---- the event checker ------------------------------------------------------ */

typedef struct checker {
    const stream *st;
    uint32_t seq0;
    bool *placed;
    size_t next; /* next FPDU to be delivered */
    size_t nplaced;
    size_t ooo_placed; /* placed while an earlier FPDU was not delivered */
    size_t min_placed; /* lowest index placed before anything was delivered */
    size_t events;
} checker;

static void checker_init(checker *c, const stream *st, uint32_t seq0)
{
    memset(c, 0, sizeof(*c));
    c->st = st;
    c->seq0 = seq0;
    c->placed = calloc(st->n + 1, sizeof(bool));
    c->min_placed = SIZE_MAX;
}

static void check_cb(void *ud, const uw_mpa_ooo_event *ev)
{
    checker *c = ud;
    const stream *st = c->st;
    c->events++;
    size_t i = find_fpdu(st, ev->pos);
    assert_true(i != SIZE_MAX);
    assert_int_equal(ev->seq, (uint32_t)(c->seq0 + ev->pos));
    assert_int_equal(ev->len, st->len[i]);
    if (ev->type == UW_MPA_OOO_PLACED) {
        assert_false(c->placed[i]);
        c->placed[i] = true;
        c->nplaced++;
        assert_non_null(ev->ulpdu);
        if (st->len[i])
            assert_memory_equal(ev->ulpdu, st->data[i], st->len[i]);
        if (i != c->next)
            c->ooo_placed++;
        if (c->next == 0 && i < c->min_placed)
            c->min_placed = i;
    } else {
        assert_int_equal(ev->type, UW_MPA_OOO_DELIVERED);
        assert_int_equal(i, c->next);
        assert_true(c->placed[i]);
        c->next++;
    }
}

static void checker_done(checker *c, uw_mpa_ooo *r)
{
    assert_int_equal(c->next, c->st->n);
    assert_int_equal(c->nplaced, c->st->n);
    assert_int_equal(uw_mpa_ooo_delivered_pos(r), c->st->start + (uint32_t)c->st->total);
    assert_int_equal(uw_mpa_ooo_buffered(r), 0);
    free(c->placed);
}

/* ---- segments ---------------------------------------------------------------- */

typedef struct seg {
    size_t off, len;
} seg;

typedef struct segs {
    seg *v;
    size_t n, cap;
} segs;

static void segs_add(segs *s, size_t off, size_t len)
{
    if (s->n == s->cap) {
        s->cap = s->cap ? 2 * s->cap : 64;
        s->v = realloc(s->v, s->cap * sizeof(*s->v));
        assert_non_null(s->v);
    }
    s->v[s->n].off = off;
    s->v[s->n++].len = len;
}

/* Cuts [from, to) into pieces of 1..maxlen octets. */
static void segs_cut(segs *s, tu_rng *g, size_t from, size_t to, size_t maxlen)
{
    while (from < to) {
        size_t l = 1 + (size_t)tu_rng_below(g, maxlen);
        if (l > to - from)
            l = to - from;
        segs_add(s, from, l);
        from += l;
    }
}

static void segs_shuffle(seg *v, size_t n, tu_rng *g)
{
    for (size_t i = n; i > 1; i--) {
        size_t j = (size_t)tu_rng_below(g, i);
        seg t = v[i - 1];
        v[i - 1] = v[j];
        v[j] = t;
    }
}

static int feed(uw_mpa_ooo *r, const stream *st, uint32_t seq0, seg s, uw_mpa_ooo_cb cb, void *ud)
{
    return uw_mpa_ooo_segment(r, seq0 + st->start + (uint32_t)s.off, st->wire + s.off, s.len, cb,
                              ud);
}

/* Feeds every segment in random order; those refused for the memory cap are
 * sent again in later rounds, as TCP would retransmit them. */
static void feed_all(uw_mpa_ooo *r, const stream *st, uint32_t seq0, segs *s, tu_rng *g, checker *c)
{
    size_t left = s->n, rounds = 0;
    while (left) {
        segs_shuffle(s->v, left, g);
        size_t keep = 0;
        for (size_t i = 0; i < left; i++) {
            int rc = feed(r, st, seq0, s->v[i], check_cb, c);
            if (rc == UW_ENOBUFS)
                s->v[keep++] = s->v[i];
            else
                assert_int_equal(rc, 0);
        }
        left = keep;
        if (++rounds >= 10000) {
            fprintf(stderr, "# stalled: start %u total %zu delivered %u buffered %zu left %zu\n",
                    st->start, st->total, uw_mpa_ooo_delivered_pos(r), uw_mpa_ooo_buffered(r),
                    left);
            for (size_t i = 0; i < st->n + 1; i++)
                fprintf(stderr, "#  fpdu %zu off %zu len %zu\n", i, st->off[i], st->len[i]);
            fail();
        }
    }
}

static uw_mpa_ooo *mk(unsigned flags, uint32_t seq0, uint32_t pos, uint32_t max, size_t cap)
{
    uw_mpa_ooo *r = NULL;
    uw_mpa_ooo_opts o = {.flags = flags, .seq0 = seq0, .pos = pos, .max_ulpdu = max, .cap = cap};
    assert_int_equal(uw_mpa_ooo_create(&r, &o), 0);
    return r;
}

/* ---- (i) property test -------------------------------------------------------- */

static void property_once(tu_rng *g, unsigned flags, size_t *ooo_iters, bool allow_misaligned)
{
    size_t n = 1 + (size_t)tu_rng_below(g, 40);
    int mode = (int)tu_rng_below(g, 10); /* 0: tiny segments, 1-2: large, else MSS-like */
    if (mode == 0)
        n = 1 + (size_t)tu_rng_below(g, 8);
    size_t lens[40];
    for (size_t i = 0; i < n; i++)
        lens[i] =
            tu_rng_below(g, 10) ? (size_t)tu_rng_below(g, 3001) : (size_t)tu_rng_below(g, 20001);

    uint32_t start;
    switch (tu_rng_below(g, 3)) {
    case 0: /* positions wrap past 2^32 */
        start = 0u - 4u - (uint32_t)tu_rng_below(g, 600);
        break;
    case 1:
        start = (uint32_t)tu_rng_next(g);
        break;
    default:
        start = (uint32_t)tu_rng_below(g, 2048);
        break;
    }
    /* A conformant stream starts at a marker (RFC 5044 4.3), so every FPDU
     * is 4-aligned; a few runs check misaligned ones too. */
    if (!allow_misaligned || tu_rng_below(g, 8))
        start &= ~3u;
    uint32_t seq0 = (uint32_t)tu_rng_next(g);

    uint32_t max = 0;
    size_t cap = 0;
    if (tu_rng_below(g, 3) == 0) {
        /* A small window: the ring wraps and the cap is hit. */
        max = 20000;
        cap = 0;
    }
    size_t maxseg = mode == 0 ? 16 : mode <= 2 ? 9000 : 1460;
    if (max) {
        /* Room for the FPDU at the delivered position plus any segment that
         * ends inside it, or the test could wait forever. */
        for (uint32_t p = 0; p < 512; p++)
            if (uw_mpa_fpdu_wire_len(max, p, flags) > cap)
                cap = uw_mpa_fpdu_wire_len(max, p, flags);
        cap += maxseg + (size_t)tu_rng_below(g, 30000);
    }

    stream st;
    stream_init(&st, n, lens, start, flags, g);
    stream_encode(&st);

    segs s = {0};
    segs_cut(&s, g, 0, st.total, maxseg);
    size_t base = s.n;
    size_t dups = (size_t)tu_rng_below(g, base / 2 + 2);
    for (size_t i = 0; i < dups; i++) {
        seg d = s.v[tu_rng_below(g, base)];
        segs_add(&s, d.off, d.len);
    }
    /* Re-cuts: overlapping ranges at arbitrary boundaries. */
    size_t recuts = (size_t)tu_rng_below(g, base / 2 + 2);
    for (size_t i = 0; st.total && i < recuts; i++) {
        size_t x = (size_t)tu_rng_below(g, st.total);
        size_t room = st.total - x < maxseg ? st.total - x : maxseg;
        segs_add(&s, x, 1 + (size_t)tu_rng_below(g, room));
    }

    uw_mpa_ooo *r = mk(flags, seq0, start, max, cap);
    checker c;
    checker_init(&c, &st, seq0);
    feed_all(r, &st, seq0, &s, g, &c);
    checker_done(&c, r);
    if (c.ooo_placed)
        (*ooo_iters)++;
    /* Everything is delivered: any retransmission is now ignored. */
    if (st.total)
        assert_int_equal(uw_mpa_ooo_segment(r, seq0 + start, st.wire, st.total, check_cb, &c), 0);
    uw_mpa_ooo_destroy(r);
    free(s.v);
    stream_free(&st);
}

static void test_property(void **state)
{
    (void)state;
    tu_rng g;
    tu_rng_init(&g, tu_seed(0x0005044A));
    size_t ooo_iters = 0, iters = 400;
    for (size_t it = 0; it < iters; it++)
        property_once(&g, UW_MPA_MARKERS | (it % 2 ? UW_MPA_CRC : 0), &ooo_iters, true);
    /* Markers must really let FPDUs be placed ahead of the in-order chain. */
    assert_true(ooo_iters > iters / 4);
}

/* (vi) Without markers an FPDU can only be found through the chain of
 * ULPDU_Length fields: nothing is placed out of order, yet the result is the
 * same. */
static void test_no_markers(void **state)
{
    (void)state;
    tu_rng g;
    tu_rng_init(&g, tu_seed(0x6A));
    size_t ooo_iters = 0;
    for (int it = 0; it < 120; it++)
        property_once(&g, it % 2 ? UW_MPA_CRC : 0, &ooo_iters, true);
    assert_int_equal(ooo_iters, 0);
}

/* ---- (ii) out-of-order placement ------------------------------------------------ */

static void test_placed_before_delivered(void **state)
{
    (void)state;
    tu_rng g;
    tu_rng_init(&g, 77);
    size_t lens[24];
    lens[0] = 1000;
    for (size_t i = 1; i < 24; i++)
        lens[i] = 60 + (size_t)tu_rng_below(&g, 700);
    stream st;
    stream_init(&st, 24, lens, 0, MC, &g);
    stream_encode(&st);
    const size_t held = 300; /* inside FPDU 0 */

    /* Expected: every FPDU from the first one (other than FPDU 0) that holds
     * a marker in the received part, and all after it by chaining. */
    size_t kmin = SIZE_MAX;
    for (size_t m = 512; m < st.total; m += 512) {
        size_t k = 0;
        while (k + 1 < st.n && st.off[k + 1] <= m)
            k++;
        if (k != 0 && k < kmin)
            kmin = k;
    }
    assert_true(kmin < st.n);

    uint32_t seq0 = 0xFFFFFF00u;
    uw_mpa_ooo *r = mk(MC, seq0, 0, 0, 0);
    checker c;
    checker_init(&c, &st, seq0);
    segs s = {0};
    segs_cut(&s, &g, held, st.total, 700);
    segs_shuffle(s.v, s.n, &g);
    for (size_t i = 0; i < s.n; i++)
        assert_int_equal(feed(r, &st, seq0, s.v[i], check_cb, &c), 0);
    assert_int_equal(c.next, 0);
    assert_int_equal(c.nplaced, st.n - kmin);
    assert_int_equal(c.min_placed, kmin);
    assert_int_equal(uw_mpa_ooo_buffered(r), st.total - held);
    assert_int_equal(uw_mpa_ooo_delivered_pos(r), 0);

    seg first = {0, held};
    assert_int_equal(feed(r, &st, seq0, first, check_cb, &c), 0);
    checker_done(&c, r);
    uw_mpa_ooo_destroy(r);
    free(s.v);
    stream_free(&st);
}

/* ---- (iii) duplicates never overwrite -------------------------------------------- */

static void test_corrupt_duplicate(void **state)
{
    (void)state;
    tu_rng g;
    tu_rng_init(&g, 99);
    size_t lens[12];
    for (size_t i = 0; i < 12; i++)
        lens[i] = 200 + (size_t)tu_rng_below(&g, 1500);
    stream st;
    stream_init(&st, 12, lens, 512 * 3, MC, &g);
    stream_encode(&st);
    uint32_t seq0 = 12345;
    uw_mpa_ooo *r = mk(MC, seq0, st.start, 0, 0);
    checker c;
    checker_init(&c, &st, seq0);

    const size_t held = 100;
    segs s = {0};
    segs_cut(&s, &g, held, st.total, 1460);
    for (size_t i = 0; i < s.n; i++)
        assert_int_equal(feed(r, &st, seq0, s.v[i], check_cb, &c), 0);
    assert_true(c.nplaced > 0);
    size_t placed = c.nplaced, buffered = uw_mpa_ooo_buffered(r);

    /* A retransmission of everything received, with every octet changed. */
    uint8_t *bad = malloc(st.total);
    for (size_t i = 0; i < st.total; i++)
        bad[i] = (uint8_t)~st.wire[i];
    assert_int_equal(
        uw_mpa_ooo_segment(r, seq0 + st.start + held, bad + held, st.total - held, check_cb, &c),
        0);
    assert_int_equal(c.nplaced, placed);
    assert_int_equal(uw_mpa_ooo_buffered(r), buffered);

    seg first = {0, held};
    assert_int_equal(feed(r, &st, seq0, first, check_cb, &c), 0);
    /* And after delivery, a corrupt copy of the whole stream is ignored too. */
    size_t events = c.events;
    assert_int_equal(uw_mpa_ooo_segment(r, seq0 + st.start, bad, st.total, check_cb, &c), 0);
    assert_int_equal(c.events, events);
    checker_done(&c, r);
    uw_mpa_ooo_destroy(r);
    free(bad);
    free(s.v);
    stream_free(&st);
}

/* ---- (iv) protocol errors ------------------------------------------------------- */

typedef struct rec {
    size_t n;
    int type[256];
    uint32_t pos[256];
    size_t len[256];
} rec;

static void rec_cb(void *ud, const uw_mpa_ooo_event *ev)
{
    rec *c = ud;
    assert_true(c->n < 256);
    c->type[c->n] = ev->type;
    c->pos[c->n] = ev->pos;
    c->len[c->n++] = ev->len;
}

/* Wire offset inside FPDU i of its k-th marker that is not a leading one. */
static size_t marker_in(const stream *st, size_t i, size_t k)
{
    uw__walk w;
    uw__run run;
    uw__walk_init(&w, st->start + (uint32_t)st->off[i], (uint32_t)st->len[i], true);
    while (uw__walk_next(&w, &run))
        if (run.field == UW__F_MARKER && run.wire != 0 && k-- == 0)
            return run.wire;
    fail_msg("FPDU %zu has too few markers", i);
    return 0;
}

/* Recomputes the CRC of FPDU i in st->wire after a test changed it. */
static void refresh_crc(stream *st, size_t i)
{
    uint8_t *f = st->wire + st->off[i];
    uw__walk w;
    uw__run run;
    uint32_t crc = uw_crc32c_init();
    uint8_t *field[4] = {0};
    uw__walk_init(&w, st->start + (uint32_t)st->off[i], (uint32_t)st->len[i],
                  st->flags & UW_MPA_MARKERS);
    while (uw__walk_next(&w, &run)) {
        if (run.in_crc)
            crc = uw_crc32c_update(crc, f + run.wire, run.len);
        if (run.field == UW__F_CRC)
            for (uint32_t k = 0; k < run.len; k++)
                field[run.logical - w.bound[2] + k] = f + run.wire + k;
    }
    crc = uw_crc32c_final(crc);
    for (int k = 0; k < 4; k++)
        *field[k] = (uint8_t)(crc >> (8 * k));
}

static stream err_stream(tu_rng *g)
{
    size_t lens[8] = {100, 300, 40, 2000, 500, 600, 100, 800};
    stream st;
    stream_init(&st, 8, lens, 0, MC, g);
    stream_encode(&st);
    return st;
}

/* Feeds st in one piece; FPDUs 0..2 come out, then err; nothing after. */
static void expect_error_at3(stream *st, int err)
{
    uw_mpa_ooo *r = mk(MC, 7, 0, 0, 0);
    checker c;
    checker_init(&c, st, 7);
    seg all = {0, st->total};
    assert_int_equal(feed(r, st, 7, all, check_cb, &c), err);
    assert_int_equal(c.next, 3);
    assert_int_equal(c.nplaced, 3);
    size_t events = c.events;
    assert_int_equal(feed(r, st, 7, all, check_cb, &c), err);
    seg some = {st->off[4], 10};
    assert_int_equal(feed(r, st, 7, some, check_cb, &c), err);
    assert_int_equal(c.events, events);
    free(c.placed);
    uw_mpa_ooo_destroy(r);
}

static void test_crc_error(void **state)
{
    (void)state;
    tu_rng g;
    tu_rng_init(&g, 5);
    stream st = err_stream(&g);
    st.wire[st.off[3] + 700] ^= 0x10;
    expect_error_at3(&st, UW_EMPA_CRC);

    /* Out of order: the damaged FPDU is found through a marker while FPDU 0
     * is still missing; nothing is placed or delivered from then on. */
    uw_mpa_ooo *r = mk(MC, 0, 0, 0, 0);
    rec c = {0};
    segs s = {0};
    segs_cut(&s, &g, 50, st.total, 400);
    int rc = 0;
    size_t i = 0;
    for (; i < s.n && rc == 0; i++)
        rc = feed(r, &st, 0, s.v[i], rec_cb, &c);
    assert_int_equal(rc, UW_EMPA_CRC);
    for (size_t k = 0; k < c.n; k++)
        assert_int_equal(c.type[k], UW_MPA_OOO_PLACED);
    size_t n = c.n;
    for (; i < s.n; i++)
        assert_int_equal(feed(r, &st, 0, s.v[i], rec_cb, &c), UW_EMPA_CRC);
    seg first = {0, 50};
    assert_int_equal(feed(r, &st, 0, first, rec_cb, &c), UW_EMPA_CRC);
    assert_int_equal(c.n, n);
    uw_mpa_ooo_destroy(r);
    free(s.v);
    stream_free(&st);
}

static void test_marker_error(void **state)
{
    (void)state;
    tu_rng g;
    tu_rng_init(&g, 6);
    stream st = err_stream(&g);
    /* A marker pointing elsewhere, with a CRC that covers the change: error 3. */
    st.wire[st.off[3] + marker_in(&st, 3, 1) + 3] += 4;
    refresh_crc(&st, 3);
    expect_error_at3(&st, UW_EMPA_MARKER);
    /* The same with a stale CRC is a CRC error (RFC 5044 8: code 3 only when
     * the CRC is valid). */
    st.wire[st.off[3] + marker_in(&st, 3, 0) + 3] += 4;
    expect_error_at3(&st, UW_EMPA_CRC);
    /* Reserved marker bits and the low two FPDUPTR bits are ignored. */
    stream_encode(&st);
    st.wire[st.off[3] + marker_in(&st, 3, 0) + 0] = 0xAB;
    st.wire[st.off[3] + marker_in(&st, 3, 1) + 3] |= 3;
    refresh_crc(&st, 3);
    uw_mpa_ooo *r = mk(MC, 7, 0, 0, 0);
    checker c;
    checker_init(&c, &st, 7);
    seg all = {0, st.total};
    assert_int_equal(feed(r, &st, 7, all, check_cb, &c), 0);
    checker_done(&c, r);
    uw_mpa_ooo_destroy(r);
    stream_free(&st);
}

/* A marker in FPDU B points into the middle of FPDU A, where A's payload holds
 * a well-formed FPDU with a valid CRC. It is placed (nothing contradicts it
 * yet); when the gap before A closes, A's length says otherwise: error 3. */
static void test_marker_disagrees_with_chain(void **state)
{
    (void)state;
    tu_rng g;
    tu_rng_init(&g, 8);
    size_t lens[8] = {1500, 40, 700, 700, 700, 700, 700, 700};
    stream st;
    stream_init(&st, 8, lens, 0, MC, &g);
    /* A starts with a leading marker, so its payload begins at position 6. */
    const uint32_t fake = 100;
    uint8_t fake_ulpdu[20];
    memset(fake_ulpdu, 0x5A, sizeof(fake_ulpdu));
    ssize_t fl = uw_mpa_fpdu_encode(st.data[0] + (fake - 6), 64, fake_ulpdu, 20, fake, MC);
    assert_int_equal(fl, 28);
    /* What follows the fake FPDU reads as an oversized length: not chained. */
    st.data[0][fake - 6 + 28] = 0xFF;
    st.data[0][fake - 6 + 29] = 0xFF;
    stream_encode(&st);
    assert_int_equal(st.off[1], 1520);
    size_t mb = marker_in(&st, 1, 0);
    uint32_t m = (uint32_t)(st.off[1] + mb);
    assert_int_equal(m, 1536);
    st.wire[m + 2] = (uint8_t)((m - fake) >> 8);
    st.wire[m + 3] = (uint8_t)(m - fake);
    refresh_crc(&st, 1);

    uw_mpa_ooo *r = mk(MC, 0, 0, 4000, 0);
    rec c = {0};
    segs s = {0};
    segs_cut(&s, &g, 50, st.total, 300);
    segs_shuffle(s.v, s.n, &g);
    for (size_t i = 0; i < s.n; i++)
        assert_int_equal(feed(r, &st, 0, s.v[i], rec_cb, &c), 0);
    bool saw_fake = false;
    for (size_t k = 0; k < c.n; k++) {
        assert_int_equal(c.type[k], UW_MPA_OOO_PLACED);
        saw_fake |= c.pos[k] == fake && c.len[k] == 20;
    }
    assert_true(saw_fake);
    size_t n = c.n;
    seg first = {0, 50};
    assert_int_equal(feed(r, &st, 0, first, rec_cb, &c), UW_EMPA_MARKER);
    assert_int_equal(c.n, n);
    assert_int_equal(feed(r, &st, 0, first, rec_cb, &c), UW_EMPA_MARKER);
    uw_mpa_ooo_destroy(r);
    free(s.v);
    stream_free(&st);
}

static void test_too_long(void **state)
{
    (void)state;
    tu_rng g;
    tu_rng_init(&g, 9);
    size_t lens[3] = {100, 1500, 100};
    stream st;
    stream_init(&st, 3, lens, 0, MC, &g);
    stream_encode(&st);
    uw_mpa_ooo *r = mk(MC, 0, 0, 1000, 4096);
    checker c;
    checker_init(&c, &st, 0);
    /* Only the length field of FPDU 1 is needed to see it is too long. */
    seg head = {0, st.off[1] + 8};
    assert_int_equal(feed(r, &st, 0, head, check_cb, &c), UW_EMPA_ULPDU_TOO_LONG);
    assert_int_equal(c.next, 1);
    assert_int_equal(uw_mpa_ooo_segment(r, 0, st.wire, 1, check_cb, &c), UW_EMPA_ULPDU_TOO_LONG);
    free(c.placed);
    uw_mpa_ooo_destroy(r);
    stream_free(&st);
}

/* ---- (v) memory cap --------------------------------------------------------------- */

static void test_cap(void **state)
{
    (void)state;
    tu_rng g;
    tu_rng_init(&g, 10);
    size_t lens[8];
    for (size_t i = 0; i < 8; i++)
        lens[i] = 600;
    stream st;
    stream_init(&st, 8, lens, 0, MC, &g);
    stream_encode(&st);
    assert_true(st.total > 4000);
    uint32_t seq0 = 0xFFFFFC00u;
    uw_mpa_ooo *r = mk(MC, seq0, 0, 1000, 2048);
    checker c;
    checker_init(&c, &st, seq0);

    seg far = {3000, 300};
    assert_int_equal(feed(r, &st, seq0, far, check_cb, &c), UW_ENOBUFS);
    assert_int_equal(uw_mpa_ooo_buffered(r), 0);
    seg mid = {1000, 1048}; /* ends exactly at the cap */
    assert_int_equal(feed(r, &st, seq0, mid, check_cb, &c), 0);
    assert_int_equal(uw_mpa_ooo_buffered(r), 1048);
    seg over = {1000, 1049};
    assert_int_equal(feed(r, &st, seq0, over, check_cb, &c), UW_ENOBUFS);
    assert_int_equal(uw_mpa_ooo_buffered(r), 1048);
    assert_int_equal(c.next, 0);

    seg head = {0, 1000};
    assert_int_equal(feed(r, &st, seq0, head, check_cb, &c), 0);
    assert_true(c.next >= 2);
    assert_int_equal(uw_mpa_ooo_delivered_pos(r), (uint32_t)st.off[c.next]);
    /* The window moved on: the segment refused before now fits. */
    assert_int_equal(feed(r, &st, seq0, far, check_cb, &c), 0);

    segs s = {0};
    segs_cut(&s, &g, 2000, st.total, 500);
    feed_all(r, &st, seq0, &s, &g, &c);
    checker_done(&c, r);
    uw_mpa_ooo_destroy(r);
    free(s.v);
    stream_free(&st);
}

/* ---- (vii) allocation failure, create arguments -------------------------------- */

typedef struct counting {
    uw_allocator a;
    tu_failalloc *inner;
    long live;
} counting;

static void *cnt_alloc(void *ud, size_t n)
{
    counting *c = ud;
    void *p = c->inner->a.alloc(c->inner->a.ud, n);
    if (p)
        c->live++;
    return p;
}

static void cnt_free(void *ud, void *p)
{
    counting *c = ud;
    if (p)
        c->live--;
    c->inner->a.free(c->inner->a.ud, p);
}

static void test_alloc_failure(void **state)
{
    (void)state;
    int failures = 0;
    for (unsigned long at = 1;; at++) {
        tu_failalloc fa;
        tu_failalloc_init(&fa, at);
        counting c = {{cnt_alloc, cnt_free, NULL}, &fa, 0};
        c.a.ud = &c;
        uw_mpa_ooo_opts o = {.flags = MC, .alloc = &c.a};
        uw_mpa_ooo *r = NULL;
        int rc = uw_mpa_ooo_create(&r, &o);
        if (rc == 0) {
            assert_non_null(r);
            uw_mpa_ooo_destroy(r);
            assert_int_equal(c.live, 0);
            break;
        }
        assert_int_equal(rc, UW_ENOMEM);
        assert_int_equal(c.live, 0);
        failures++;
        assert_true(at < 20);
    }
    assert_true(failures >= 1);
}

static void test_create_args(void **state)
{
    (void)state;
    uw_mpa_ooo *r = NULL;
    uw_mpa_ooo_opts o = {.flags = MC, .cap = 60000};
    assert_int_equal(uw_mpa_ooo_create(&r, &o), UW_EINVAL); /* 64 KiB FPDUs do not fit */
    assert_int_equal(uw_mpa_ooo_create(NULL, &o), UW_EINVAL);
    assert_int_equal(uw_mpa_ooo_create(&r, NULL), UW_EINVAL);
    o.cap = 0;
    o.max_ulpdu = 70000;
    assert_int_equal(uw_mpa_ooo_create(&r, &o), UW_EINVAL);
    /* The smallest cap that holds the largest FPDU for max_ulpdu works. */
    o.max_ulpdu = 500;
    size_t need = 0;
    for (uint32_t p = 0; p < 512; p++)
        if (uw_mpa_fpdu_wire_len(500, p, MC) > need)
            need = uw_mpa_fpdu_wire_len(500, p, MC);
    o.cap = need - 1;
    assert_int_equal(uw_mpa_ooo_create(&r, &o), UW_EINVAL);
    o.cap = need;
    assert_int_equal(uw_mpa_ooo_create(&r, &o), 0);
    uw_mpa_ooo_destroy(r);
    uw_mpa_ooo_destroy(NULL);
}

/* ---- small cases ------------------------------------------------------------------ */

/* RFC 5044 Figure 5 (first FPDU, leading marker) and a Figure 6-like second
 * FPDU, fed back to front one octet at a time. */
static void test_rfc_figures(void **state)
{
    (void)state;
    uint8_t u1[42] = {0x41, 0x43}, u2[42] = {0x41, 0x43};
    u1[13] = 1;
    u2[13] = 2;
    uint8_t wire[256];
    ssize_t a = uw_mpa_fpdu_encode(wire, sizeof(wire), u1, 42, 0, MC);
    assert_int_equal(a, 52);
    static const uint8_t crc5[4] = {0x52, 0x23, 0x99, 0x83};
    assert_memory_equal(wire + 48, crc5, 4);
    uint32_t pos2 = (uint32_t)a;
    ssize_t b = uw_mpa_fpdu_encode(wire + a, sizeof(wire) - (size_t)a, u2, 42, pos2, MC);
    assert_true(b > 0);
    size_t total = (size_t)(a + b);

    uw_mpa_ooo *r = mk(MC, 1000, 0, 0, 0);
    rec c = {0};
    for (size_t i = total; i-- > 0;)
        assert_int_equal(uw_mpa_ooo_segment(r, 1000 + (uint32_t)i, wire + i, 1, rec_cb, &c), 0);
    assert_int_equal(c.n, 4);
    assert_int_equal(c.type[0], UW_MPA_OOO_PLACED);
    assert_int_equal(c.type[1], UW_MPA_OOO_DELIVERED);
    assert_int_equal(c.pos[1], 0);
    assert_int_equal(c.type[3], UW_MPA_OOO_DELIVERED);
    assert_int_equal(c.pos[3], pos2);
    assert_int_equal(uw_mpa_ooo_delivered_pos(r), total);
    uw_mpa_ooo_destroy(r);
}

/* Old octets are ignored, duplicates are not counted twice, and sequence
 * numbers wrap. */
static void test_accounting(void **state)
{
    (void)state;
    tu_rng g;
    tu_rng_init(&g, 11);
    size_t lens[3] = {1000, 10, 0};
    stream st;
    stream_init(&st, 3, lens, 0, UW_MPA_CRC, &g);
    stream_encode(&st);
    uint32_t seq0 = 0xFFFFFFF0u; /* positions 16.. have sequence numbers 0.. */
    uw_mpa_ooo *r = mk(UW_MPA_CRC, seq0, 0, 0, 0);
    checker c;
    checker_init(&c, &st, seq0);
    seg s1 = {10, 100}, s2 = {50, 100}, s0 = {0, 20};
    assert_int_equal(feed(r, &st, seq0, s1, check_cb, &c), 0);
    assert_int_equal(uw_mpa_ooo_buffered(r), 100);
    assert_int_equal(feed(r, &st, seq0, s2, check_cb, &c), 0);
    assert_int_equal(uw_mpa_ooo_buffered(r), 140);
    assert_int_equal(feed(r, &st, seq0, s0, check_cb, &c), 0);
    assert_int_equal(uw_mpa_ooo_buffered(r), 150);
    assert_int_equal(uw_mpa_ooo_segment(r, 0, NULL, 0, check_cb, &c), 0);
    assert_int_equal(uw_mpa_ooo_segment(r, 0, NULL, 5, check_cb, &c), UW_EINVAL);
    seg rest = {150, st.total - 150};
    assert_int_equal(feed(r, &st, seq0, rest, check_cb, &c), 0);
    /* A stale segment ending before the delivered position. */
    seg old = {0, 500};
    assert_int_equal(feed(r, &st, seq0, old, check_cb, &c), 0);
    checker_done(&c, r);
    uw_mpa_ooo_destroy(r);
    stream_free(&st);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_create_args),
        cmocka_unit_test(test_alloc_failure),
        cmocka_unit_test(test_rfc_figures),
        cmocka_unit_test(test_accounting),
        cmocka_unit_test(test_placed_before_delivered),
        cmocka_unit_test(test_corrupt_duplicate),
        cmocka_unit_test(test_crc_error),
        cmocka_unit_test(test_marker_error),
        cmocka_unit_test(test_marker_disagrees_with_chain),
        cmocka_unit_test(test_too_long),
        cmocka_unit_test(test_cap),
        cmocka_unit_test(test_no_markers),
        cmocka_unit_test(test_property),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
