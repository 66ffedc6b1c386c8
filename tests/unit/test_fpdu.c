/* FPDU transmit and streaming receive: RFC vectors, properties, errors. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "mpa/fpdu_walk.h"
#include "testutil.h"
#include "uwarp/crc32c.h"
#include "uwarp/mpa.h"

#define MC (UW_MPA_MARKERS | UW_MPA_CRC)

/* RFC 5044 Figure 5: first FPDU of the stream, leading marker, Send MSN 1. */
static const char *FIG5 = "00000000 002a 4143 00000000 00000000 00000001 00000000"
                          "000000000000000000000000000000000000000000000000"
                          "52239983";
/* RFC 5044 Figure 6: FPDU at 0x1ec, Send MSN 2, marker at 0x200 (FPDUPTR 0x14). */
static const char *FIG6 = "002a 4143 00000000 00000000 00000002 00000000"
                          "00000014"
                          "000000000000000000000000000000000000000000000000"
                          "84925898";

static void fig_ulpdu(uint8_t *u, uint32_t msn)
{
    memset(u, 0, 42);
    u[0] = 0x41;
    u[1] = 0x43;
    u[13] = (uint8_t)msn;
}

static void test_fig5_fig6_encode(void **state)
{
    (void)state;
    uint8_t u[42], want[64], got[128];
    fig_ulpdu(u, 1);
    long wl = tu_unhex(FIG5, want, sizeof(want));
    ssize_t n = uw_mpa_fpdu_encode(got, sizeof(got), u, sizeof(u), 0, MC);
    assert_int_equal(n, wl);
    assert_memory_equal(got, want, (size_t)wl);

    fig_ulpdu(u, 2);
    wl = tu_unhex(FIG6, want, sizeof(want));
    n = uw_mpa_fpdu_encode(got, sizeof(got), u, sizeof(u), 0x1ec, MC);
    assert_int_equal(n, wl);
    assert_memory_equal(got, want, (size_t)wl);
    assert_int_equal(uw_mpa_fpdu_wire_len(42, 0x1ec, MC), wl);
}

struct collect {
    uint8_t *data; /* concatenated ULPDUs */
    size_t len, cap;
    size_t count;
    uint32_t pos[4096];
    size_t ulen[4096];
    int zero_copy; /* ULPDUs whose iovecs pointed into the input */
    const uint8_t *in_lo, *in_hi;
    size_t pause_after;
};

static int collect_cb(void *ud, const uw_mpa_ulpdu *u)
{
    struct collect *c = ud;
    size_t tot = 0;
    for (size_t i = 0; i < u->iovcnt; i++) {
        const uint8_t *b = u->iov[i].iov_base;
        if (c->len + u->iov[i].iov_len > c->cap) {
            c->cap = (c->len + u->iov[i].iov_len) * 2;
            c->data = realloc(c->data, c->cap);
        }
        memcpy(c->data + c->len, b, u->iov[i].iov_len);
        c->len += u->iov[i].iov_len;
        tot += u->iov[i].iov_len;
        if (i == 0 && b >= c->in_lo && b < c->in_hi)
            c->zero_copy++;
    }
    assert_int_equal(tot, u->len);
    if (c->count < 4096) {
        c->pos[c->count] = u->pos;
        c->ulen[c->count] = u->len;
    }
    c->count++;
    return c->pause_after && c->count == c->pause_after;
}

static uw_mpa_rx *mkrx(unsigned flags, uint32_t pos, uint32_t max)
{
    uw_mpa_rx *rx = NULL;
    uw_mpa_rx_opts o = {.flags = flags, .pos = pos, .max_ulpdu = max};
    assert_int_equal(uw_mpa_rx_create(&rx, &o), 0);
    return rx;
}

static void test_fig5_fig6_decode(void **state)
{
    (void)state;
    uint8_t in[64];
    const char *figs[2] = {FIG5, FIG6};
    uint32_t at[2] = {0, 0x1ec};
    for (int f = 0; f < 2; f++) {
        long n = tu_unhex(figs[f], in, sizeof(in));
        uw_mpa_rx *rx = mkrx(MC, at[f], 0);
        struct collect c = {.in_lo = in, .in_hi = in + n};
        assert_int_equal(uw_mpa_rx_feed(rx, in, (size_t)n, collect_cb, &c), n);
        assert_int_equal(uw_mpa_rx_finish(rx), 0);
        assert_int_equal(c.count, 1);
        assert_int_equal(c.len, 42);
        assert_int_equal(c.pos[0], at[f]);
        assert_int_equal(c.data[13], f + 1);
        assert_int_equal(c.zero_copy, 1);
        free(c.data);
        uw_mpa_rx_destroy(rx);
    }
}

static void test_crc_known_values(void **state)
{
    (void)state;
    uint8_t z[32] = {0};
    assert_int_equal(uw_crc32c("123456789", 9), 0xE3069283u);
    assert_int_equal(uw_crc32c(z, 32), 0x8A9136AAu);
    /* On the wire least-significant octet first: aa 36 91 8a. An FPDU with
     * CRC on carries exactly the final value in that order. */
    uint8_t u[30] = {0}, out[64];
    ssize_t n = uw_mpa_fpdu_encode(out, sizeof(out), u, sizeof(u), 4, UW_MPA_CRC);
    assert_int_equal(n, 36);
    uint32_t crc = uw_crc32c(out, 32);
    assert_int_equal(out[32], (uint8_t)crc);
    assert_int_equal(out[35], (uint8_t)(crc >> 24));
    /* The literal wire octets of the CRC of 32 zero octets. */
    const uint8_t wire[4] = {0xaa, 0x36, 0x91, 0x8a};
    uint8_t le[4] = {(uint8_t)uw_crc32c(z, 32), (uint8_t)(uw_crc32c(z, 32) >> 8),
                     (uint8_t)(uw_crc32c(z, 32) >> 16), (uint8_t)(uw_crc32c(z, 32) >> 24)};
    assert_memory_equal(le, wire, 4);
}

/* RFC 5044 4.1: pad octets are sent as zero and ignored by the receiver
 * (except for the CRC). */
static void test_pad(void **state)
{
    (void)state;
    uint8_t u[3] = {0xff, 0xff, 0xff}, out[32];
    for (size_t n = 0; n <= 3; n++) {
        ssize_t w = uw_mpa_fpdu_encode(out, sizeof(out), u, n, 4, UW_MPA_CRC);
        size_t pad = (4 - (2 + n) % 4) % 4;
        assert_int_equal(w, 2 + n + pad + 4);
        for (size_t k = 0; k < pad; k++)
            assert_int_equal(out[2 + n + k], 0);
        if (pad == 0)
            continue;
        /* Non-zero pad with CRC off: delivered unchanged. */
        w = uw_mpa_fpdu_encode(out, sizeof(out), u, n, 4, 0);
        out[2 + n] = 0x5a;
        uw_mpa_rx *rx = mkrx(0, 4, 0);
        struct collect c = {0};
        assert_int_equal(uw_mpa_rx_feed(rx, out, (size_t)w, collect_cb, &c), w);
        assert_int_equal(c.count, 1);
        assert_int_equal(c.len, n);
        free(c.data);
        uw_mpa_rx_destroy(rx);
    }
}

static void test_mulpdu(void **state)
{
    (void)state;
    /* RFC 5044 4.5 formulas, worked by hand. */
    assert_int_equal(uw_mpa_mulpdu(1460, false), 1460 - 6);
    assert_int_equal(uw_mpa_mulpdu(1460, true), 1460 - (6 + 4 * 3 + 0));
    assert_int_equal(uw_mpa_mulpdu(1448, true), 1448 - (6 + 12 + 0));
    assert_int_equal(uw_mpa_mulpdu(1450, false), 1450 - (6 + 2));
    assert_int_equal(uw_mpa_mulpdu(1451, true), 1451 - (6 + 12 + 3));
    assert_int_equal(uw_mpa_mulpdu(9000, true), 9000 - (6 + 4 * 18));
    assert_int_equal(uw_mpa_mulpdu(536, true), 536 - (6 + 8));
    /* Never below 128, never above 64768. */
    assert_int_equal(uw_mpa_mulpdu(0, false), 128);
    assert_int_equal(uw_mpa_mulpdu(100, true), 128);
    assert_int_equal(uw_mpa_mulpdu(134, false), 128);
    assert_int_equal(uw_mpa_mulpdu(140, false), 134);
    assert_int_equal(uw_mpa_mulpdu(65535, false), 64768);
    assert_int_equal(uw_mpa_mulpdu(65495, true), 64768);
    assert_int_equal(uw_mpa_mulpdu(UINT32_MAX, true), 64768);
}

/* Builds a stream of nmsg random ULPDUs starting at pos; returns its length.
 * Also checks that the scatter list equals the flat encoding and that every
 * marker sits at a multiple of 512 with the right FPDUPTR. */
static size_t build_stream(tu_rng *r, uint8_t *out, size_t cap, uint8_t *plain, size_t *plain_len,
                           size_t *lens, size_t nmsg, uint32_t pos, unsigned flags, size_t maxlen)
{
    size_t off = 0;
    *plain_len = 0;
    for (size_t i = 0; i < nmsg; i++) {
        size_t n = tu_rng_below(r, 8) == 0 ? tu_rng_below(r, maxlen + 1) : tu_rng_below(r, 700);
        uint8_t *u = plain + *plain_len;
        tu_rng_fill(r, u, n);
        lens[i] = n;
        /* Scatter the ULPDU over up to 4 pieces to exercise the iovec walk. */
        struct iovec in[4];
        size_t pieces = 1 + tu_rng_below(r, 4), done = 0;
        for (size_t k = 0; k < pieces; k++) {
            size_t take = k + 1 == pieces ? n - done : tu_rng_below(r, n - done + 1);
            in[k].iov_base = u + done;
            in[k].iov_len = take;
            done += take;
        }
        uw_mpa_fpdu f;
        struct iovec iov[300];
        size_t need = uw_mpa_fpdu_iov_max(pieces, n);
        assert_true(need <= 300);
        ssize_t cnt = uw_mpa_fpdu_build(&f, iov, need, in, pieces, pos, flags);
        assert_true(cnt > 0);
        assert_int_equal(f.wire_len, uw_mpa_fpdu_wire_len(n, pos, flags));
        assert_true(off + f.wire_len <= cap);
        size_t start = off;
        for (ssize_t k = 0; k < cnt; k++) {
            memcpy(out + off, iov[k].iov_base, iov[k].iov_len);
            off += iov[k].iov_len;
        }
        assert_int_equal(off - start, f.wire_len);
        uint8_t flat[70000];
        assert_int_equal(uw_mpa_fpdu_encode(flat, sizeof(flat), u, n, pos, flags), f.wire_len);
        assert_memory_equal(flat, out + start, f.wire_len);
        if (flags & UW_MPA_MARKERS) {
            uint32_t hdr = pos % 512 == 0 ? 4 : 0;
            for (size_t k = 0; k < f.wire_len; k++) {
                uint32_t at = pos + (uint32_t)k;
                if (at % 512)
                    continue;
                uint32_t ptr = (uint32_t)out[start + k + 2] << 8 | out[start + k + 3];
                assert_int_equal(out[start + k] | out[start + k + 1], 0);
                assert_int_equal(ptr, k == 0 ? 0 : k - hdr);
            }
        }
        assert_int_equal(f.next_pos, pos + (uint32_t)f.wire_len);
        pos = f.next_pos;
        *plain_len += n;
    }
    return off;
}

static uint32_t random_pos(tu_rng *r)
{
    switch (tu_rng_below(r, 4)) {
    case 0:
        return 0;
    case 1:
        return (uint32_t)(0 - 600 + tu_rng_below(r, 600)) & ~3u; /* near the 2^32 wrap */
    case 2:
        return (uint32_t)tu_rng_next(r) & ~3u;
    default:
        return (uint32_t)tu_rng_below(r, 2048) * 4;
    }
}

static void test_roundtrip_property(void **state)
{
    (void)state;
    tu_rng r;
    tu_rng_init(&r, tu_seed(5044));
    size_t cap = 1 << 20;
    uint8_t *stream = malloc(cap), *plain = malloc(cap);
    size_t lens[40];
    for (int it = 0; it < 400; it++) {
        unsigned flags = (unsigned)tu_rng_below(&r, 4);
        uint32_t pos = random_pos(&r);
        size_t nmsg = 1 + tu_rng_below(&r, 40), plain_len;
        size_t slen = build_stream(&r, stream, cap, plain, &plain_len, lens, nmsg, pos, flags,
                                   it % 10 == 0 ? 64768 : 3000);
        uw_mpa_rx *rx = mkrx(flags, pos, 0);
        struct collect c = {.in_lo = stream, .in_hi = stream + slen};
        /* Re-chunk: single octets, small pieces, or large random ones. */
        int mode = (int)tu_rng_below(&r, 3);
        size_t off = 0;
        while (off < slen) {
            size_t take = mode == 0   ? 1
                          : mode == 1 ? 1 + tu_rng_below(&r, 16)
                                      : 1 + tu_rng_below(&r, 9000);
            if (take > slen - off)
                take = slen - off;
            assert_int_equal(uw_mpa_rx_feed(rx, stream + off, take, collect_cb, &c), take);
            off += take;
        }
        assert_int_equal(uw_mpa_rx_finish(rx), 0);
        assert_int_equal(c.count, nmsg);
        assert_int_equal(c.len, plain_len);
        assert_memory_equal(c.data, plain, plain_len);
        for (size_t i = 0; i < nmsg; i++)
            assert_int_equal(c.ulen[i], lens[i]);
        assert_int_equal(c.pos[0], pos);
        assert_int_equal(uw_mpa_rx_pos(rx), pos + (uint32_t)slen);
        free(c.data);
        uw_mpa_rx_destroy(rx);
    }
    free(stream);
    free(plain);
}

/* The copying framer (the transmit path with markers) gives exactly the
 * octets of the zero-copy one, for payloads split over several pieces, at
 * every stream position modulo 512 that matters, with and without markers
 * and CRC; and it refuses a buffer one octet short. */
static void test_copy_matches_build(void **state)
{
    (void)state;
    tu_rng r;
    tu_rng_init(&r, tu_seed(5045));
    size_t cap = 70000;
    uint8_t *u = malloc(cap), *a = malloc(cap), *b = malloc(cap);
    struct iovec *iov = calloc(uw_mpa_fpdu_iov_max(4, 65535), sizeof(*iov));
    uw_mpa_fpdu *f = malloc(sizeof(*f)), g;
    for (size_t i = 0; i < cap; i++)
        u[i] = (uint8_t)tu_rng_below(&r, 256);
    for (int it = 0; it < 600; it++) {
        unsigned flags = (unsigned)(it & 3);
        size_t len = it < 300 ? (size_t)it : tu_rng_below(&r, 65536);
        uint32_t pos = it % 7 == 0 ? 512u * (uint32_t)it : random_pos(&r);
        struct iovec in[3];
        size_t c1 = len ? tu_rng_below(&r, len + 1) : 0,
               c2 = len - c1 ? tu_rng_below(&r, len - c1 + 1) : 0;
        in[0] = (struct iovec){u, c1};
        in[1] = (struct iovec){u + c1, c2};
        in[2] = (struct iovec){u + c1 + c2, len - c1 - c2};
        ssize_t k = uw_mpa_fpdu_build(f, iov, uw_mpa_fpdu_iov_max(3, len), in, 3, pos, flags);
        if (k == UW_EMSGSIZE) { /* a marker's FPDUPTR would pass 65535 */
            assert_int_equal(uw_mpa_fpdu_copy(&g, b, cap, in, 3, pos, flags), UW_EMSGSIZE);
            continue;
        }
        assert_true(k > 0);
        size_t w = 0;
        for (ssize_t i = 0; i < k; i++) {
            memcpy(a + w, iov[i].iov_base, iov[i].iov_len);
            w += iov[i].iov_len;
        }
        memset(b, 0xEE, cap);
        assert_int_equal(uw_mpa_fpdu_copy(&g, b, cap, in, 3, pos, flags), w);
        assert_memory_equal(a, b, w);
        assert_int_equal(g.crc, f->crc);
        assert_int_equal(g.next_pos, f->next_pos);
        assert_int_equal(uw_mpa_fpdu_copy(&g, b, w - 1, in, 3, pos, flags), UW_ENOBUFS);
    }
    free(u);
    free(a);
    free(b);
    free(iov);
    free(f);
}

/* Markers at any offset, not only multiples of 4: the geometry still
 * round-trips and every marker lands on a multiple of 512. */
static void test_unaligned_offsets(void **state)
{
    (void)state;
    tu_rng r;
    tu_rng_init(&r, tu_seed(77));
    size_t cap = 1 << 19;
    uint8_t *stream = malloc(cap), *plain = malloc(cap);
    size_t lens[20];
    for (int it = 0; it < 200; it++) {
        uint32_t pos = (uint32_t)tu_rng_next(&r);
        if (it % 2)
            pos = (uint32_t)(0u - 1 - tu_rng_below(&r, 1100));
        size_t nmsg = 1 + tu_rng_below(&r, 20), plain_len;
        size_t slen = build_stream(&r, stream, cap, plain, &plain_len, lens, nmsg, pos, MC, 2000);
        uw_mpa_rx *rx = mkrx(MC, pos, 0);
        struct collect c = {.in_lo = stream, .in_hi = stream + slen};
        size_t off = 0;
        while (off < slen) {
            size_t take = 1 + tu_rng_below(&r, it % 3 ? 700 : 3);
            if (take > slen - off)
                take = slen - off;
            assert_int_equal(uw_mpa_rx_feed(rx, stream + off, take, collect_cb, &c), take);
            off += take;
        }
        assert_int_equal(uw_mpa_rx_finish(rx), 0);
        assert_int_equal(c.count, nmsg);
        assert_memory_equal(c.data, plain, plain_len);
        free(c.data);
        uw_mpa_rx_destroy(rx);
    }
    free(stream);
    free(plain);
}

/* With CRC on every single-bit flip of an FPDU is detected (as a CRC error,
 * or as a length/marker fault that the CRC would also catch), and nothing of
 * the damaged FPDU is delivered. */
static void test_every_bit_flip_detected(void **state)
{
    (void)state;
    tu_rng r;
    tu_rng_init(&r, tu_seed(2));
    uint8_t stream[4096], plain[4096];
    size_t lens[3], plain_len;
    for (int variant = 0; variant < 4; variant++) {
        unsigned flags = UW_MPA_CRC | (variant & 1 ? UW_MPA_MARKERS : 0);
        uint32_t pos = variant < 2 ? 0 : 0x1ec;
        size_t slen =
            build_stream(&r, stream, sizeof(stream), plain, &plain_len, lens, 3, pos, flags, 600);
        for (size_t bit = 0; bit < slen * 8; bit++) {
            stream[bit / 8] ^= (uint8_t)(1u << (bit % 8));
            uw_mpa_rx *rx = mkrx(flags, pos, 0);
            struct collect c = {0};
            ssize_t rc = uw_mpa_rx_feed(rx, stream, slen, collect_cb, &c);
            int fin = uw_mpa_rx_finish(rx);
            stream[bit / 8] ^= (uint8_t)(1u << (bit % 8));
            /* A flip in a length field can make the stream end mid-FPDU. */
            if (!(rc < 0 || fin < 0))
                fail_msg("variant %d bit %zu of %zu undetected", variant, bit, slen * 8);
            /* Whatever was delivered is an undamaged prefix. */
            assert_true(c.count < 3);
            assert_true(c.len <= plain_len);
            if (c.len)
                assert_memory_equal(c.data, plain, c.len);
            free(c.data);
            uw_mpa_rx_destroy(rx);
        }
    }
}

static void expect_error(const uint8_t *s, size_t n, unsigned flags, uint32_t pos, uint32_t max,
                         int err, uint32_t err_pos, size_t delivered)
{
    for (size_t chunk = 1; chunk <= n; chunk = chunk < 8 ? chunk + 1 : chunk * 3) {
        uw_mpa_rx *rx = mkrx(flags, pos, max);
        struct collect c = {0};
        ssize_t rc = 0;
        for (size_t off = 0; off < n && rc >= 0; off += chunk)
            rc = uw_mpa_rx_feed(rx, s + off, off + chunk > n ? n - off : chunk, collect_cb, &c);
        if (rc >= 0)
            rc = uw_mpa_rx_finish(rx);
        assert_int_equal(rc, err);
        assert_int_equal(uw_mpa_rx_error(rx), err);
        assert_int_equal(uw_mpa_rx_error_pos(rx), err_pos);
        assert_int_equal(c.count, delivered);
        if (err) {
            /* Sticky: nothing more, ever (RFC 5044 8). */
            assert_int_equal(uw_mpa_rx_feed(rx, s, n, collect_cb, &c), err);
            assert_int_equal(c.count, delivered);
        }
        free(c.data);
        uw_mpa_rx_destroy(rx);
    }
}

static void test_errors(void **state)
{
    (void)state;
    uint8_t s[256];
    uint8_t u[42];
    fig_ulpdu(u, 1);
    size_t a = (size_t)uw_mpa_fpdu_encode(s, sizeof(s), u, 42, 0, MC);
    size_t b = (size_t)uw_mpa_fpdu_encode(s + a, sizeof(s) - a, u, 42, (uint32_t)a, MC);
    size_t n = a + b;

    /* CRC: flip a CRC octet of the second FPDU. */
    s[n - 1] ^= 1;
    expect_error(s, n, MC, 0, 0, UW_EMPA_CRC, (uint32_t)a, 1);
    s[n - 1] ^= 1;

    /* Truncated: the stream ends inside the second FPDU. */
    expect_error(s, n - 3, MC, 0, 0, UW_EMPA_TRUNCATED, (uint32_t)a, 1);

    /* Too long for the configured maximum (checked before any payload). */
    expect_error(s, n, MC, 0, 41, UW_EMPA_ULPDU_TOO_LONG, 0, 0);

    /* Marker with a wrong FPDUPTR, CRC off: error 3. With CRC on, the same
     * damage is a CRC error first (RFC 5044 8: code 3 only with a valid CRC). */
    fig_ulpdu(u, 2);
    uint8_t f6[64];
    size_t l6 = (size_t)uw_mpa_fpdu_encode(f6, sizeof(f6), u, 42, 0x1ec, UW_MPA_MARKERS);
    f6[23] = 0x18;
    expect_error(f6, l6, UW_MPA_MARKERS, 0x1ec, 0, UW_EMPA_MARKER, 0x1ec, 0);
    l6 = (size_t)uw_mpa_fpdu_encode(f6, sizeof(f6), u, 42, 0x1ec, MC);
    f6[23] = 0x18;
    expect_error(f6, l6, MC, 0x1ec, 0, UW_EMPA_CRC, 0x1ec, 0);
    /* The low two FPDUPTR bits are ignored by receivers (RFC 5044 4.2). */
    l6 = (size_t)uw_mpa_fpdu_encode(f6, sizeof(f6), u, 42, 0x1ec, UW_MPA_MARKERS);
    f6[23] = 0x17;
    expect_error(f6, l6, UW_MPA_MARKERS, 0x1ec, 0, 0, 0, 1);

    /* A leading marker must be 0: a non-zero one disagrees. */
    uint8_t f5[64];
    size_t l5 = (size_t)uw_mpa_fpdu_encode(f5, sizeof(f5), u, 42, 0, UW_MPA_MARKERS);
    f5[3] = 0x04;
    expect_error(f5, l5, UW_MPA_MARKERS, 0, 0, UW_EMPA_MARKER, 0, 0);

    /* With CRC off, the CRC field is not checked at all. */
    l5 = (size_t)uw_mpa_fpdu_encode(f5, sizeof(f5), u, 42, 0, UW_MPA_MARKERS);
    f5[l5 - 1] ^= 0xff;
    expect_error(f5, l5, UW_MPA_MARKERS, 0, 0, 0, 0, 1);

    assert_int_equal(uw_mpa_error_code(UW_EMPA_CRC), 2);
    assert_int_equal(uw_mpa_error_code(UW_EMPA_MARKER), 3);
    assert_int_equal(uw_mpa_error_code(UW_EMPA_TRUNCATED), 1);
}

static void test_tx_limits(void **state)
{
    (void)state;
    static uint8_t big[65536];
    uint8_t *out = malloc(70000);
    struct iovec in = {big, 65536}, iov[300];
    uw_mpa_fpdu f;
    assert_int_equal(uw_mpa_fpdu_build(&f, iov, 300, &in, 1, 0, 0), UW_EMSGSIZE);
    /* Without markers any 16-bit length frames. */
    assert_int_equal(uw_mpa_fpdu_encode(out, 70000, big, 65535, 0, UW_MPA_CRC), 2 + 65535 + 3 + 4);
    /* With markers the FPDUPTR must fit 16 bits: MULPDU_MAX always does. */
    for (uint32_t pos = 0; pos < 4096; pos += 4)
        assert_true(uw_mpa_fpdu_encode(out, 70000, big, UW_MPA_MULPDU_MAX, pos, MC) > 0);
    assert_int_equal(uw_mpa_fpdu_encode(out, 70000, big, 65535, 0, MC), UW_EMSGSIZE);
    /* Too few iovecs is reported, not overrun. */
    in.iov_len = 2000;
    assert_int_equal(uw_mpa_fpdu_build(&f, iov, 3, &in, 1, 0, MC), UW_ENOBUFS);
    assert_int_equal(uw_mpa_fpdu_encode(out, 10, big, 100, 0, MC), UW_ENOBUFS);
    /* Zero-length ULPDU: length, pad of 2, CRC. */
    assert_int_equal(uw_mpa_fpdu_encode(out, 70000, NULL, 0, 4, UW_MPA_CRC), 8);
    free(out);
}

/* The marker that falls right after the pad (before the CRC field) belongs
 * to this FPDU and is covered by its CRC; one that falls right after the CRC
 * belongs to the next FPDU, with FPDUPTR 0. */
static void test_marker_at_boundaries(void **state)
{
    (void)state;
    uint8_t u[600] = {0}, out[800];
    /* FPDU at 4 (after the leading marker at 0 of a previous FPDU ... here we
     * start at 4): 2 + n + pad = 508 puts the CRC field at 512, so the marker
     * at 512 sits between pad and CRC. */
    size_t n = 506;
    ssize_t w = uw_mpa_fpdu_encode(out, sizeof(out), u, n, 4, MC);
    assert_int_equal(w, 2 + 506 + 0 + 4 + 4);
    /* The marker at wire 508 = position 512 points back 508 octets. */
    assert_int_equal(out[508 + 2] << 8 | out[508 + 3], 508);
    uint32_t crc = uw_crc32c(out, 512); /* covers the marker */
    assert_int_equal(out[512] | out[513] << 8 | out[514] << 16 | (uint32_t)out[515] << 24, crc);
    /* Ending exactly at 512: the next FPDU starts with a leading marker. */
    n = 502;
    w = uw_mpa_fpdu_encode(out, sizeof(out), u, n, 4, MC);
    assert_int_equal(w, 508);
    w = uw_mpa_fpdu_encode(out, sizeof(out), u, 10, 512, MC);
    assert_int_equal(w, 4 + 2 + 10 + 0 + 4);
    assert_int_equal(out[0] | out[1] | out[2] | out[3], 0);
}

static void test_pause_and_alloc(void **state)
{
    (void)state;
    uint8_t s[512], u[10] = {1, 2, 3};
    size_t n = 0;
    for (int i = 0; i < 3; i++)
        n += (size_t)uw_mpa_fpdu_encode(s + n, sizeof(s) - n, u, 10, (uint32_t)n, UW_MPA_CRC);
    uw_mpa_rx *rx = mkrx(UW_MPA_CRC, 0, 0);
    struct collect c = {.pause_after = 1};
    ssize_t used = uw_mpa_rx_feed(rx, s, n, collect_cb, &c);
    assert_int_equal(used, n / 3);
    assert_int_equal(c.count, 1);
    c.pause_after = 0;
    assert_int_equal(uw_mpa_rx_feed(rx, s + used, n - (size_t)used, collect_cb, &c),
                     n - (size_t)used);
    assert_int_equal(c.count, 3);
    free(c.data);
    uw_mpa_rx_destroy(rx);

    for (unsigned long k = 1; k <= 2; k++) {
        tu_failalloc fa;
        tu_failalloc_init(&fa, k);
        uw_mpa_rx_opts o = {.flags = MC, .alloc = &fa.a};
        uw_mpa_rx *x = NULL;
        assert_int_equal(uw_mpa_rx_create(&x, &o), UW_ENOMEM);
        assert_null(x);
    }
    uw_mpa_rx_opts bad = {.max_ulpdu = 70000};
    assert_int_equal(uw_mpa_rx_create(&rx, &bad), UW_EINVAL);
}

/* uw__marker_ok(), the FPDUPTR check all three receivers share: the two low
 * bits are ignored on both sides (RFC 5044 4.2), the reserved half is not
 * read, and a pointer the walk computes past 16 bits never matches. */
static void test_fpduptr_check(void **st)
{
    (void)st;
    const uint8_t m14[4] = {0, 0, 0, 0x14}, m17[4] = {0, 0, 0, 0x17};
    const uint8_t m18[4] = {0, 0, 0, 0x18}, rsvd[4] = {0xff, 0xff, 0, 0x14};
    const uint8_t zero[4] = {0, 0, 0, 0}, big[4] = {0, 0, 0xff, 0xfc};
    assert_true(uw__marker_ok(m14, 0x14));
    assert_true(uw__marker_ok(m17, 0x14));
    assert_true(uw__marker_ok(m14, 0x17));
    assert_false(uw__marker_ok(m18, 0x14));
    assert_true(uw__marker_ok(rsvd, 0x14));
    assert_true(uw__marker_ok(zero, 0)); /* a leading marker */
    assert_false(uw__marker_ok(zero, 4));
    assert_true(uw__marker_ok(big, 0xfffc));
    assert_false(uw__marker_ok(m14, 0x10014));
    assert_int_equal(uw__marker_fpduptr(m17), 0x14);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fig5_fig6_encode),
        cmocka_unit_test(test_fig5_fig6_decode),
        cmocka_unit_test(test_crc_known_values),
        cmocka_unit_test(test_pad),
        cmocka_unit_test(test_mulpdu),
        cmocka_unit_test(test_roundtrip_property),
        cmocka_unit_test(test_unaligned_offsets),
        cmocka_unit_test(test_copy_matches_build),
        cmocka_unit_test(test_every_bit_flip_detected),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_tx_limits),
        cmocka_unit_test(test_marker_at_boundaries),
        cmocka_unit_test(test_fpduptr_check),
        cmocka_unit_test(test_pause_and_alloc),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
