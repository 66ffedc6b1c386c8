/* Fuzz target: the streaming FPDU decoder uw_mpa_rx on arbitrary octets.
 *
 * Input:  b0  bit0 markers, bit1 CRC, bit2 repair (rewrite markers and CRCs
 *             of most FPDUs so they are valid), bit3 let the callback pause
 *         b1  bits0-2 start position mode (fz_pick_pos), bits3-4 max_ulpdu mode
 *         b2..b5  raw position, b6..b7 raw max_ulpdu, b8..b11 chunk seed
 *         rest    the stream
 *
 * The same stream is decoded three ways: by the reference decoder in
 * common.c, by uw_mpa_rx in one call, and by uw_mpa_rx in chunks chosen by
 * the seed (1-octet chunks included, the callback pausing when bit3 is set).
 * All three must give the same ULPDUs (octets, positions, CRC field) and the
 * same error at the same FPDU position. Along the way: feed returns the
 * whole length, the octets up to a pause, or an error; an error is sticky
 * and silences the callback; ULPDUs are contiguous in the stream, their iovecs
 * add up to their length and no length exceeds max_ulpdu. */
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "uwarp/error.h"
#include "uwarp/mpa.h"

typedef struct run {
    fz_log log;
    unsigned flags;
    uint32_t start, max, next; /* next: where the next FPDU must start */
    size_t fed;                /* octets consumed so far */
    int err;                   /* error already returned: no callback allowed */
    fz_rng *pause;             /* NULL: never pause */
    unsigned calls;
} run;

static int on_ulpdu(void *ud, const uw_mpa_ulpdu *u)
{
    run *r = ud;
    FZ_CHECK(r->err == 0);
    FZ_CHECK(u->len <= r->max);
    FZ_CHECK(u->iovcnt <= UW_MPA_FPDU_MAX_MARKERS + 2);
    FZ_CHECK(u->iovcnt == 0 || u->iov != NULL);
    /* ULPDUs are contiguous: each starts where the previous one ended, so
     * positions relative to the start strictly increase. */
    FZ_CHECK(u->pos == r->next);
    size_t wire = uw_mpa_fpdu_wire_len(u->len, u->pos, r->flags);
    FZ_CHECK(wire == fz_ref_wire_len(u->pos, (uint32_t)u->len, r->flags & UW_MPA_MARKERS, NULL));
    r->next = u->pos + (uint32_t)wire;
    FZ_CHECK((uint32_t)(u->pos - r->start) < (uint32_t)(r->next - r->start) || r->next == r->start);
    fz_log_add(&r->log, u->pos, (uint32_t)u->len, u->crc, u->iov, u->iovcnt);
    r->calls++;
    return r->pause && fz_rng_below(r->pause, 3) == 0;
}

/* After an error: every call gives it again and delivers nothing. */
static void check_sticky(uw_mpa_rx *rx, run *r, const uint8_t *rest, size_t rest_len)
{
    unsigned calls = r->calls;
    FZ_CHECK(uw_mpa_rx_error(rx) == r->err);
    FZ_CHECK(uw_mpa_rx_feed(rx, rest, rest_len, on_ulpdu, r) == r->err);
    static const uint8_t zero[8];
    FZ_CHECK(uw_mpa_rx_feed(rx, zero, sizeof(zero), on_ulpdu, r) == r->err);
    FZ_CHECK(uw_mpa_rx_feed(rx, zero, 0, on_ulpdu, r) == r->err);
    FZ_CHECK(uw_mpa_rx_finish(rx) == r->err);
    FZ_CHECK(uw_mpa_rx_error(rx) == r->err);
    FZ_CHECK(r->calls == calls);
}

static void run_init(run *r, unsigned flags, uint32_t start, uint32_t max)
{
    memset(r, 0, sizeof(*r));
    fz_log_init(&r->log);
    r->flags = flags;
    r->start = r->next = start;
    r->max = max ? max : 65535u;
}

/* Feeds s in chunks (all at once when rng is NULL); returns the error or 0
 * and leaves the final state (after uw_mpa_rx_finish) in r. */
static void decode(run *r, uw_mpa_rx *rx, const uint8_t *s, size_t n, fz_rng *chunks)
{
    size_t off = 0;
    while (off < n) {
        size_t len = chunks ? fz_chunk(chunks, n - off) : n - off;
        /* An exact-size copy so ASan catches reads past the chunk. */
        uint8_t *c = malloc(len);
        FZ_CHECK(c != NULL);
        memcpy(c, s + off, len);
        size_t done = 0;
        while (done < len) {
            unsigned calls = r->calls;
            ssize_t got = uw_mpa_rx_feed(rx, c + done, len - done, on_ulpdu, r);
            if (got < 0) {
                FZ_CHECK(got == UW_EMPA_CRC || got == UW_EMPA_MARKER ||
                         got == UW_EMPA_ULPDU_TOO_LONG);
                r->err = (int)got;
                free(c);
                check_sticky(rx, r, s + off + done, n - off - done);
                return;
            }
            FZ_CHECK((size_t)got <= len - done);
            if ((size_t)got < len - done) {
                /* Only a pause stops short, right after a delivered FPDU. */
                FZ_CHECK(r->pause != NULL && r->calls > calls);
                FZ_CHECK(uw_mpa_rx_pos(rx) == r->next);
            }
            done += (size_t)got;
            r->fed += (size_t)got;
            FZ_CHECK(uw_mpa_rx_pos(rx) == r->start + (uint32_t)r->fed);
            FZ_CHECK(uw_mpa_rx_error(rx) == 0);
        }
        free(c);
        off += len;
    }
    /* An empty feed is harmless. */
    unsigned calls = r->calls;
    FZ_CHECK(uw_mpa_rx_feed(rx, NULL, 0, on_ulpdu, r) == 0);
    FZ_CHECK(r->calls == calls);
    int fin = uw_mpa_rx_finish(rx);
    FZ_CHECK(fin == 0 || fin == UW_EMPA_TRUNCATED);
    FZ_CHECK(fin == 0 ? r->next == uw_mpa_rx_pos(rx) : r->next != uw_mpa_rx_pos(rx));
    if (fin) {
        r->err = fin;
        check_sticky(rx, r, NULL, 0);
    }
}

static uint32_t pick_max(unsigned mode, uint16_t raw)
{
    switch (mode & 3u) {
    case 0:
        return 0;
    case 1:
        return raw;
    case 2:
        return raw % 256u;
    default:
        return 65536u + raw; /* invalid */
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fz_in in;
    fz_in_init(&in, data, size);
    uint8_t b0 = fz_u8(&in), b1 = fz_u8(&in);
    uint32_t raw_pos = fz_u32(&in);
    uint16_t raw_max = fz_u16(&in);
    uint32_t seed = fz_u32(&in);
    unsigned flags = b0 & (UW_MPA_MARKERS | UW_MPA_CRC);
    uint32_t start = fz_pick_pos(b1 & 7u, raw_pos);
    uint32_t max = pick_max(b1 >> 3, raw_max);

    uw_mpa_rx_opts o = {.flags = flags, .pos = start, .max_ulpdu = max};
    uw_mpa_rx *rx1 = NULL, *rx2 = NULL;
    if (max > 65535u) {
        FZ_CHECK(uw_mpa_rx_create(&rx1, &o) == UW_EINVAL);
        return 0;
    }
    /* Allocation failures are reported, and nothing leaks (LeakSanitizer). */
    for (unsigned long k = 1; k <= 3; k++) {
        fz_failalloc fa;
        fz_failalloc_init(&fa, k);
        uw_mpa_rx_opts fo = o;
        fo.alloc = &fa.a;
        int rc = uw_mpa_rx_create(&rx1, &fo);
        FZ_CHECK(rc == 0 || rc == UW_ENOMEM);
        FZ_CHECK(rc == 0 || fa.count == k);
        if (rc == 0)
            uw_mpa_rx_destroy(rx1);
    }
    rx1 = NULL;

    size_t n = fz_left(&in);
    uint8_t *s = malloc(n ? n : 1);
    FZ_CHECK(s != NULL);
    if (n)
        memcpy(s, data + in.off, n);

    /* Reference, repairing the stream first when asked. */
    fz_log ref;
    fz_log_init(&ref);
    fz_ref_result rr;
    fz_rng repair;
    fz_rng_init(&repair, seed ^ 0x5EEDull);
    fz_ref_decode(s, n, start, flags, max, (b0 & 4) ? &repair : NULL, &ref, &rr);

    run one, chunked;
    run_init(&one, flags, start, max);
    run_init(&chunked, flags, start, max);
    FZ_CHECK(uw_mpa_rx_create(&rx1, &o) == 0);
    FZ_CHECK(uw_mpa_rx_create(&rx2, &o) == 0);
    FZ_CHECK(uw_mpa_rx_pos(rx1) == start && uw_mpa_rx_error(rx1) == 0);

    decode(&one, rx1, s, n, NULL);
    fz_rng chunks, pause;
    fz_rng_init(&chunks, seed);
    fz_rng_init(&pause, (uint64_t)seed << 32 | 0xA5u);
    chunked.pause = (b0 & 8) ? &pause : NULL;
    decode(&chunked, rx2, s, n, &chunks);

    /* Same ULPDUs, same error, same place. */
    FZ_CHECK(fz_log_equal(&one.log, &ref, true));
    FZ_CHECK(fz_log_equal(&chunked.log, &ref, true));
    FZ_CHECK(one.err == rr.err && chunked.err == rr.err);
    if (rr.err) {
        FZ_CHECK(uw_mpa_rx_error_pos(rx1) == rr.err_pos);
        FZ_CHECK(uw_mpa_rx_error_pos(rx2) == rr.err_pos);
    } else {
        FZ_CHECK(uw_mpa_rx_pos(rx1) == start + (uint32_t)n);
        FZ_CHECK(uw_mpa_rx_pos(rx2) == start + (uint32_t)n);
    }

    uw_mpa_rx_destroy(rx1);
    uw_mpa_rx_destroy(rx2);
    fz_log_free(&one.log);
    fz_log_free(&chunked.log);
    fz_log_free(&ref);
    free(s);
    return 0;
}
