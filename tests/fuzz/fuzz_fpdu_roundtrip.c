/* Fuzz target: FPDU transmit then receive. ULPDUs from the input are framed
 * with uw_mpa_fpdu_build (payload split over several iovecs) at a chosen
 * position, the stream is decoded by uw_mpa_rx in chunks and by the reference
 * decoder, and everything must come back exactly.
 *
 * Input:  b0  bit0 markers, bit1 CRC, bits2-3 max_ulpdu mode (0: 0 = 65535,
 *             1: the largest ULPDU, 2: raw, 3: one less than the largest)
 *         b1  bits0-2 position mode (fz_pick_pos)
 *         b2..b5 raw position, b6..b7 raw max_ulpdu, b8..b11 seed
 *         rest    ULPDU records (fz_ulpdus_read)
 *
 * ULPDUs that cannot be framed with markers (FPDUPTR would pass 16 bits) must
 * fail with UW_EMSGSIZE and are left out; whether that is expected is decided
 * by the reference geometry. */
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "uwarp/error.h"
#include "uwarp/mpa.h"

#define MAX_ULPDUS 256u
#define MAX_TOTAL (256u * 1024u)

typedef struct rx_state {
    fz_log log;
    uint32_t max;
    int err;
} rx_state;

static int on_ulpdu(void *ud, const uw_mpa_ulpdu *u)
{
    rx_state *st = ud;
    FZ_CHECK(st->err == 0);
    FZ_CHECK(u->len <= st->max);
    fz_log_add(&st->log, u->pos, (uint32_t)u->len, u->crc, u->iov, u->iovcnt);
    return 0;
}

/* Frames one ULPDU at pos into out (cap octets); returns its wire length or
 * 0 when it cannot be framed (checked to be the documented case). */
static size_t frame_one(const uint8_t *u, uint32_t len, uint32_t pos, unsigned flags, fz_rng *r,
                        uint8_t *out, size_t cap, uint32_t *crc)
{
    uint32_t max_off = 0;
    size_t ref_wire = fz_ref_wire_len(pos, len, flags & UW_MPA_MARKERS, &max_off);
    bool too_far = max_off > 65535u;

    /* Split the payload into up to 8 pieces, empty ones included. */
    struct iovec pieces[8];
    size_t np = 1 + (size_t)fz_rng_below(r, 8), at = 0;
    for (size_t i = 0; i < np; i++) {
        size_t take = i + 1 == np ? len - at : (size_t)fz_rng_below(r, len - at + 1);
        pieces[i].iov_base = (void *)(u + at);
        pieces[i].iov_len = take;
        at += take;
    }
    size_t iov_max = uw_mpa_fpdu_iov_max(np, len);
    struct iovec *iov = calloc(iov_max, sizeof(*iov));
    FZ_CHECK(iov != NULL);
    uw_mpa_fpdu *f = malloc(sizeof(*f));
    FZ_CHECK(f != NULL);
    ssize_t cnt = uw_mpa_fpdu_build(f, iov, iov_max, pieces, np, pos, flags);
    if (too_far) {
        FZ_CHECK(cnt == UW_EMSGSIZE);
        FZ_CHECK(uw_mpa_fpdu_encode(out, cap, u, len, pos, flags) == UW_EMSGSIZE);
        free(iov);
        free(f);
        return 0;
    }
    FZ_CHECK(cnt > 0 && (size_t)cnt <= iov_max);
    FZ_CHECK(f->wire_len == ref_wire);
    FZ_CHECK(uw_mpa_fpdu_wire_len(len, pos, flags) == ref_wire);
    FZ_CHECK(f->next_pos == pos + (uint32_t)ref_wire);
    FZ_CHECK(ref_wire <= cap);
    size_t w = 0;
    for (ssize_t i = 0; i < cnt; i++) {
        FZ_CHECK(w + iov[i].iov_len <= ref_wire);
        memcpy(out + w, iov[i].iov_base, iov[i].iov_len);
        w += iov[i].iov_len;
    }
    FZ_CHECK(w == ref_wire);
    /* The reference decoder takes this one FPDU back; the CRC result matches
     * the CRC field (which a marker may split); the flat encoder gives the
     * same octets. */
    fz_log one;
    fz_log_init(&one);
    fz_ref_result rr;
    fz_ref_decode(out, w, pos, flags, 0, NULL, &one, &rr);
    FZ_CHECK(rr.err == 0 && rr.good_end == w && one.n == 1);
    FZ_CHECK(one.rec[0].len == len && (len == 0 || memcmp(one.data, u, len) == 0));
    FZ_CHECK((flags & UW_MPA_CRC) ? f->crc == one.rec[0].crc : f->crc == 0);
    *crc = one.rec[0].crc;
    fz_log_free(&one);
    uint8_t *flat = malloc(ref_wire);
    FZ_CHECK(flat != NULL);
    FZ_CHECK(uw_mpa_fpdu_encode(flat, ref_wire, u, len, pos, flags) == (ssize_t)ref_wire);
    FZ_CHECK(memcmp(flat, out, ref_wire) == 0);
    FZ_CHECK(uw_mpa_fpdu_encode(flat, ref_wire - 1, u, len, pos, flags) == UW_ENOBUFS);
    /* The copying framer from the same pieces: same octets, same results. */
    uw_mpa_fpdu f2;
    memset(flat, 0xA5, ref_wire);
    FZ_CHECK(uw_mpa_fpdu_copy(&f2, flat, ref_wire, pieces, np, pos, flags) == (ssize_t)ref_wire);
    FZ_CHECK(memcmp(flat, out, ref_wire) == 0);
    FZ_CHECK(f2.crc == f->crc && f2.next_pos == f->next_pos && f2.wire_len == ref_wire);
    free(flat);
    /* One iovec short is not enough. */
    FZ_CHECK(uw_mpa_fpdu_build(f, iov, (size_t)cnt - 1, pieces, np, pos, flags) == UW_ENOBUFS);
    free(iov);
    free(f);
    return ref_wire;
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
    fz_rng r;
    fz_rng_init(&r, seed);

    fz_ulpdus us;
    fz_ulpdus_read(&us, &in, &r, MAX_ULPDUS, MAX_TOTAL);
    uint32_t largest = 0;
    for (size_t i = 0; i < us.count; i++)
        if (us.len[i] > largest)
            largest = us.len[i];
    uint32_t max;
    switch ((b0 >> 2) & 3u) {
    case 0:
        max = 0;
        break;
    case 1:
        max = largest;
        break;
    case 2:
        max = raw_max;
        break;
    default:
        max = largest ? largest - 1 : 0;
        break;
    }
    uint32_t eff_max = max ? max : 65535u;

    /* Transmit. */
    size_t cap = us.total + us.total / 32u + us.count * 32u + 64u;
    uint8_t *stream = malloc(cap);
    FZ_CHECK(stream != NULL);
    fz_log want;
    fz_log_init(&want);
    size_t slen = 0;
    uint32_t pos = start;
    int want_err = 0;
    uint32_t want_err_pos = 0;
    for (size_t i = 0; i < us.count; i++) {
        uint32_t crc = 0;
        size_t w = frame_one(us.data + us.off[i], us.len[i], pos, flags, &r, stream + slen,
                             cap - slen, &crc);
        if (w == 0)
            continue;
        if (!want_err && us.len[i] > eff_max) {
            want_err = UW_EMPA_ULPDU_TOO_LONG;
            want_err_pos = pos;
        }
        if (!want_err)
            fz_log_add_flat(&want, pos, us.len[i], crc, us.data + us.off[i]);
        slen += w;
        pos += (uint32_t)w;
    }

    /* The reference decoder accepts it all (a check of the encoder). */
    fz_log ref;
    fz_log_init(&ref);
    fz_ref_result rr;
    fz_ref_decode(stream, slen, start, flags, max, NULL, &ref, &rr);
    FZ_CHECK(rr.err == want_err);
    FZ_CHECK(!want_err || rr.err_pos == want_err_pos);
    FZ_CHECK(fz_log_equal(&ref, &want, true));

    /* Receive in chunks. */
    uw_mpa_rx_opts o = {.flags = flags, .pos = start, .max_ulpdu = max};
    uw_mpa_rx *rx = NULL;
    FZ_CHECK(uw_mpa_rx_create(&rx, &o) == 0);
    rx_state st;
    fz_log_init(&st.log);
    st.max = eff_max;
    st.err = 0;
    size_t off = 0;
    while (off < slen) {
        size_t len = fz_chunk(&r, slen - off);
        ssize_t got = uw_mpa_rx_feed(rx, stream + off, len, on_ulpdu, &st);
        if (got < 0) {
            st.err = (int)got;
            break;
        }
        FZ_CHECK((size_t)got == len);
        off += len;
    }
    if (!st.err) {
        FZ_CHECK(uw_mpa_rx_finish(rx) == 0);
        FZ_CHECK(uw_mpa_rx_pos(rx) == pos);
    }
    FZ_CHECK(st.err == want_err);
    FZ_CHECK(!want_err || uw_mpa_rx_error_pos(rx) == want_err_pos);
    FZ_CHECK(fz_log_equal(&st.log, &want, true));

    uw_mpa_rx_destroy(rx);
    fz_log_free(&st.log);
    fz_log_free(&ref);
    fz_log_free(&want);
    free(stream);
    fz_ulpdus_free(&us);
    return 0;
}
