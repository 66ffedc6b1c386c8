/* Fuzz target: the optimized receiver uw_mpa_ooo (RFC 5044 Appendix A.3-A.4)
 * with TCP segments in any order, overlapping and duplicated.
 *
 * Input:  b0  bit0 markers, bit1 CRC, bit2 valid stream, bit3 feed the segment
 *             list twice, bits4-5 cap mode, bit6 valid stream: max_ulpdu is the
 *             largest ULPDU (else 0), bit7 raw stream: repair most FPDUs
 *         b1  bits0-2 start position mode (fz_pick_pos)
 *         b2..b5 raw position, b6..b9 seq0, b10..b11 raw max_ulpdu, b12..b15 seed
 *         b16 number of segments, then 5 octets each: offset (24 bits, taken
 *             modulo the stream length) and length (16 bits: bit15 sends
 *             corrupted octets, like a broken retransmission; the rest modulo
 *             9000)
 *         rest    valid stream: ULPDU records (fz_ulpdus_read), framed with
 *                 uw_mpa_fpdu_encode; raw stream: the stream octets
 *
 * After the listed segments the whole stream is fed once more in order. A
 * model of the receive buffer (first copy wins, dropped segments leave no
 * trace) gives the octets the receiver must have seen.
 * Checked: every return is 0, UW_ENOBUFS (then nothing happened) or a sticky
 * protocol error; PLACED at most once per FPDU, inside the stream, with the
 * right sequence number; DELIVERED once per FPDU, in stream order, without
 * gaps, only after PLACED. Valid stream: in the end every FPDU was placed and
 * delivered with exactly the encoded ULPDU (unless corrupted segments were
 * sent). In every case: what was delivered is what the in-order reference
 * decoder finds in the modelled buffer, and an error from one side means an
 * error (or a truncated FPDU) for the other. */
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "uwarp/error.h"
#include "uwarp/mpa.h"

#define MAX_SEGS 255u
#define MAX_TOTAL (192u * 1024u)

typedef struct ostate {
    unsigned flags;
    uint32_t start, seq0, max;
    size_t slen;
    int32_t *placed_at;     /* per stream offset: index into placed, or -1 */
    const int32_t *want_at; /* valid stream: per offset, index into want, or -1 */
    const fz_log *want;
    fz_log placed, delivered;
    uint8_t *model; /* first copy of every octet the receiver accepted */
    uint8_t *have;
    uint32_t next; /* position the next DELIVERED must have */
    int err;
    unsigned events;
} ostate;

static void on_event(void *ud, const uw_mpa_ooo_event *ev)
{
    ostate *st = ud;
    FZ_CHECK(st->err == 0);
    st->events++;
    FZ_DEBUG("  %s pos %u (+%u) len %zu\n", ev->type == UW_MPA_OOO_PLACED ? "PLACED" : "DELIVERED",
             ev->pos, ev->pos - st->start, ev->len);
    uint32_t rel = ev->pos - st->start;
    FZ_CHECK(rel < st->slen);
    FZ_CHECK(ev->seq == st->seq0 + ev->pos);
    FZ_CHECK(ev->len <= st->max);
    if (ev->type == UW_MPA_OOO_PLACED) {
        FZ_CHECK(st->placed_at[rel] < 0); /* once per FPDU */
        FZ_CHECK(ev->len == 0 || ev->ulpdu != NULL);
        FZ_CHECK(
            rel + fz_ref_wire_len(ev->pos, (uint32_t)ev->len, st->flags & UW_MPA_MARKERS, NULL) <=
            st->slen);
        st->placed_at[rel] = (int32_t)st->placed.n;
        fz_log_add_flat(&st->placed, ev->pos, (uint32_t)ev->len, 0, ev->ulpdu);
        if (st->want) {
            /* A valid stream has no FPDUs but the encoded ones. */
            FZ_CHECK(st->want_at[rel] >= 0);
            FZ_CHECK(fz_rec_equal(&st->placed, st->placed.n - 1, st->want, (size_t)st->want_at[rel],
                                  false));
        }
    } else {
        FZ_CHECK(ev->type == UW_MPA_OOO_DELIVERED);
        FZ_CHECK(ev->pos == st->next); /* in order, no gap */
        FZ_CHECK(st->placed_at[rel] >= 0);
        const fz_rec *p = &st->placed.rec[st->placed_at[rel]];
        FZ_CHECK(p->len == ev->len);
        fz_log_add_flat(&st->delivered, ev->pos, p->len, 0, st->placed.data + p->off);
        st->next = ev->pos + (uint32_t)fz_ref_wire_len(ev->pos, (uint32_t)ev->len,
                                                       st->flags & UW_MPA_MARKERS, NULL);
    }
}

static bool proto_err(int rc)
{
    return rc == UW_EMPA_CRC || rc == UW_EMPA_MARKER || rc == UW_EMPA_ULPDU_TOO_LONG;
}

/* Feeds stream[off, off+len), corrupted when asked; returns the result
 * after checking it. */
static int segment(uw_mpa_ooo *r, ostate *st, const uint8_t *stream, size_t off, size_t len,
                   bool corrupt)
{
    /* An exact-size copy so ASan catches reads past the segment. */
    uint8_t *c = malloc(len ? len : 1);
    FZ_CHECK(c != NULL);
    if (len)
        memcpy(c, stream + off, len);
    for (size_t i = 0; corrupt && i < len; i++)
        c[i] ^= (uint8_t)(0x5A + i);
    /* First copy wins (RFC 5044 A.3): what the receiver must now hold. */
    uint8_t *model_new = malloc(len ? len : 1);
    FZ_CHECK(model_new != NULL);
    for (size_t i = 0; i < len; i++)
        model_new[i] = st->have[off + i] ? st->model[off + i] : c[i];
    uint32_t seq = st->seq0 + st->start + (uint32_t)off;
    uint32_t dpos = uw_mpa_ooo_delivered_pos(r);
    size_t buffered = uw_mpa_ooo_buffered(r);
    unsigned events = st->events;
    FZ_DEBUG("segment +%zu len %zu%s\n", off, len, corrupt ? " corrupt" : "");
    int rc = uw_mpa_ooo_segment(r, seq, c, len, on_event, st);
    if (rc)
        FZ_DEBUG("  -> %d\n", rc);
    if (!st->err && rc != UW_ENOBUFS) {
        /* Taken (an error found afterwards does not undo that). */
        memcpy(st->model + off, model_new, len);
        memset(st->have + off, 1, len);
    }
    free(model_new);
    free(c);
    if (st->err) {
        FZ_CHECK(rc == st->err && st->events == events);
        return rc;
    }
    FZ_CHECK(rc == 0 || rc == UW_ENOBUFS || proto_err(rc));
    if (rc == UW_ENOBUFS) {
        /* Dropped: nothing else changes. */
        FZ_CHECK(st->events == events);
        FZ_CHECK(uw_mpa_ooo_delivered_pos(r) == dpos && uw_mpa_ooo_buffered(r) == buffered);
    } else if (rc) {
        st->err = rc;
    } else {
        FZ_CHECK(uw_mpa_ooo_delivered_pos(r) == st->next);
    }
    return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fz_in in;
    fz_in_init(&in, data, size);
    uint8_t b0 = fz_u8(&in), b1 = fz_u8(&in);
    uint32_t raw_pos = fz_u32(&in), seq0 = fz_u32(&in);
    uint16_t raw_max = fz_u16(&in);
    uint32_t seed = fz_u32(&in);
    unsigned nseg = fz_u8(&in);
    uint32_t seg_off[MAX_SEGS];
    uint16_t seg_len[MAX_SEGS];
    bool corrupt_any = false;
    for (unsigned i = 0; i < nseg; i++) {
        uint32_t hi = fz_u8(&in);
        seg_off[i] = hi << 16 | fz_u16(&in);
        seg_len[i] = fz_u16(&in);
        corrupt_any |= (seg_len[i] & 0x8000) != 0;
    }
    unsigned flags = b0 & (UW_MPA_MARKERS | UW_MPA_CRC);
    bool valid = b0 & 4;
    uint32_t start = fz_pick_pos(b1 & 7u, raw_pos);
    fz_rng r;
    fz_rng_init(&r, seed);

    /* The stream. */
    uint8_t *stream = NULL;
    size_t slen = 0;
    uint32_t max = raw_max;
    fz_log want;
    fz_log_init(&want);
    int32_t *want_at = NULL;
    fz_ulpdus us;
    memset(&us, 0, sizeof(us));
    if (valid) {
        fz_ulpdus_read(&us, &in, &r, 512, MAX_TOTAL);
        uint32_t largest = 0;
        for (size_t i = 0; i < us.count; i++)
            largest = us.len[i] > largest ? us.len[i] : largest;
        max = (b0 & 64) ? largest : 0;
        size_t cap = us.total + us.total / 32u + us.count * 32u + 64u;
        stream = malloc(cap);
        FZ_CHECK(stream != NULL);
        uint32_t pos = start;
        for (size_t i = 0; i < us.count; i++) {
            ssize_t w = uw_mpa_fpdu_encode(stream + slen, cap - slen, us.data + us.off[i],
                                           us.len[i], pos, flags);
            if (w == UW_EMSGSIZE)
                continue; /* FPDUPTR would not fit: checked by fuzz_fpdu_roundtrip */
            FZ_CHECK(w > 0);
            fz_log_add_flat(&want, pos, us.len[i], 0, us.data + us.off[i]);
            slen += (size_t)w;
            pos += (uint32_t)w;
        }
        want_at = malloc((slen + 1) * sizeof(*want_at));
        FZ_CHECK(want_at != NULL);
        for (size_t i = 0; i <= slen; i++)
            want_at[i] = -1;
        for (size_t i = 0; i < want.n; i++)
            want_at[want.rec[i].pos - start] = (int32_t)i;
    } else {
        slen = fz_left(&in);
        stream = malloc(slen ? slen : 1);
        FZ_CHECK(stream != NULL);
        memcpy(stream, data + in.off, slen);
    }
    /* Raw stream: the in-order truth (repairing most FPDUs when asked). */
    fz_log ref;
    fz_log_init(&ref);
    fz_ref_result rr;
    memset(&rr, 0, sizeof(rr));
    if (!valid) {
        fz_rng repair;
        fz_rng_init(&repair, seed ^ 0x0000BEEFull);
        fz_ref_decode(stream, slen, start, flags, max, (b0 & 128) ? &repair : NULL, &ref, &rr);
    }

    size_t cap;
    switch ((b0 >> 4) & 3u) {
    case 0:
        cap = 128u * 1024u;
        break;
    case 1:
        cap = 0; /* default, 256 KiB */
        break;
    case 2:
        cap = 70000;
        break;
    default:
        cap = 1 + seed % 140000u;
        break;
    }
    uw_mpa_ooo_opts o = {.flags = flags, .seq0 = seq0, .pos = start, .max_ulpdu = max, .cap = cap};
    uw_mpa_ooo *q = NULL;
    int rc = uw_mpa_ooo_create(&q, &o);
    FZ_DEBUG("ooo: flags %u valid %d start %u seq0 %u max %u cap %zu slen %zu -> %d\n", flags,
             valid, start, seq0, max, cap, slen, rc);
    if (cap >= 128u * 1024u || cap == 0)
        FZ_CHECK(rc == 0);
    else
        FZ_CHECK(rc == 0 || rc == UW_EINVAL);
    if (rc)
        goto out;
    FZ_CHECK(uw_mpa_ooo_delivered_pos(q) == start && uw_mpa_ooo_buffered(q) == 0);

    ostate st;
    memset(&st, 0, sizeof(st));
    st.flags = flags;
    st.start = start;
    st.seq0 = seq0;
    st.max = max ? max : 65535u;
    st.slen = slen;
    st.next = start;
    st.want = valid && !corrupt_any ? &want : NULL;
    st.want_at = want_at;
    fz_log_init(&st.placed);
    fz_log_init(&st.delivered);
    st.placed_at = malloc((slen + 1) * sizeof(*st.placed_at));
    st.model = malloc(slen + 1);
    st.have = calloc(slen + 1, 1);
    FZ_CHECK(st.placed_at && st.model && st.have);
    for (size_t i = 0; i <= slen; i++)
        st.placed_at[i] = -1;

    /* The listed segments, maybe twice. */
    for (unsigned rep = 0; rep < ((b0 & 8) ? 2u : 1u); rep++) {
        for (unsigned i = 0; i < nseg && slen; i++) {
            size_t off = seg_off[i] % slen, len = (seg_len[i] & 0x7FFFu) % 9000u;
            if (len > slen - off)
                len = slen - off;
            segment(q, &st, stream, off, len, seg_len[i] & 0x8000);
        }
    }
    /* Then everything in order: whatever was dropped arrives again. */
    size_t off = 0, step = 1460;
    while (off < slen && !st.err) {
        size_t len = step < slen - off ? step : slen - off;
        rc = segment(q, &st, stream, off, len, false);
        if (rc == UW_ENOBUFS) {
            /* The cap is measured from the delivered position, which only
             * moves when an FPDU completes: shrink and go on. One octet in
             * order must always fit when the cap holds the largest FPDU. */
            FZ_CHECK(len > 1);
            step = len / 2;
            continue;
        }
        off += len;
        step = step < 1460 ? 2 * step : 1460;
    }

    /* The in-order truth about what the receiver holds. After an error the
     * octets it never got are taken from the stream: they cannot change what
     * it saw, and the in-order decoder must then find an error too (or an
     * FPDU cut off by the end of the stream, inside which a marker may have
     * pointed the receiver at a broken FPDU). */
    for (size_t i = 0; i < slen; i++) {
        FZ_CHECK(st.err || st.have[i]);
        if (!st.have[i])
            st.model[i] = stream[i];
    }
    fz_log_free(&ref);
    fz_ref_decode(st.model, slen, start, flags, max, NULL, &ref, &rr);
    FZ_DEBUG("ooo err %d; reference: %zu ULPDUs, err %d at +%u, good end +%zu of %zu\n", st.err,
             ref.n, rr.err, rr.err_pos - start, rr.good_end, slen);
    if (st.err) {
        FZ_CHECK(rr.err != 0);
        FZ_CHECK(st.delivered.n <= ref.n);
        for (size_t i = 0; i < st.delivered.n; i++)
            FZ_CHECK(fz_rec_equal(&st.delivered, i, &ref, i, false));
    }
    if (valid && !corrupt_any) {
        FZ_CHECK(st.err == 0);
        FZ_CHECK(fz_log_equal(&st.delivered, &want, false));
        FZ_CHECK(st.placed.n == want.n);
        FZ_CHECK(uw_mpa_ooo_delivered_pos(q) == start + (uint32_t)slen);
        FZ_CHECK(uw_mpa_ooo_buffered(q) == 0);
    } else if (!st.err) {
        /* Delivered: what the in-order decoder finds. */
        FZ_CHECK(rr.err == 0 || rr.err == UW_EMPA_TRUNCATED);
        FZ_CHECK(fz_log_equal(&st.delivered, &ref, false));
        FZ_CHECK(uw_mpa_ooo_delivered_pos(q) == start + (uint32_t)rr.good_end);
    }

    uw_mpa_ooo_destroy(q);
    free(st.placed_at);
    free(st.model);
    free(st.have);
    fz_log_free(&st.placed);
    fz_log_free(&st.delivered);
out:
    fz_log_free(&ref);
    fz_log_free(&want);
    fz_ulpdus_free(&us);
    free(want_at);
    free(stream);
    return 0;
}
