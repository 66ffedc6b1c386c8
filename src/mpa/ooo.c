/* Optimized MPA receiver (RFC 5044 Appendix A.3, A.4): TCP segments arrive in
 * any order, duplicated or overlapping, and every FPDU is validated and handed
 * to DDP ("placed") as soon as all of its octets are present, then
 * "delivered" once everything before it has arrived.
 *
 * Memory. Everything lives in a window of cap stream octets starting at the
 * delivered position D:
 *   - a ring of cap octets (rounded up to a multiple of 64), indexed by the
 *     64-bit offset from the first position received, modulo the ring size;
 *   - three bitmaps over the same ring: which octets are present, where a
 *     candidate FPDU start is known (from a marker or from the end of a
 *     validated FPDU), and where a validated-but-not-delivered FPDU starts;
 *   - one scratch buffer of max_ulpdu octets for the ULPDU of a PLACED event.
 * Nothing is allocated after create. A validated FPDU's length is not stored:
 * its octets stay in the ring, immutable (first copy wins), so it is re-read
 * from there when needed.
 *
 * Locating FPDUs (RFC 5044 6). The delivered position is always an FPDU
 * start (rule 1, the in-order chain). With markers, each marker received
 * names an FPDU start (rule 2), and a validated FPDU names the one after it
 * (rule 3); these "candidates" wait in their bitmap until complete. A
 * candidate that collides with an FPDU validated already is dropped without
 * an error: the marker that produced it lies in some FPDU whose own
 * validation, at the latest when the chain reaches it, checks that marker.
 * The chain is the authority: when it reaches a stretch where an FPDU was
 * validated out of order at another start, that is error 3 (RFC 5044 8).
 *
 * Complexity. Copying a segment costs its length plus a bitmap scan. After a
 * segment [a, b) only candidates that can have changed are retried: those
 * starting in [a - max_wire, b) whose FPDU may reach a (an FPDU is at most
 * max_wire octets). Retrying one costs a walk of its length field and a
 * bitmap scan of its span (64 octets per word); each FPDU is CRC-checked and
 * copied out once, when placed.
 *
 * Thread-safety: an object is used by one thread at a time; callbacks must
 * not call back into the same object.
 */
#include <stdlib.h>
#include <string.h>

#include "mpa/fpdu_walk.h"
#include "uwarp/crc32c.h"
#include "uwarp/mpa.h"
#include "util/alloc.h"

#define DEFAULT_CAP (256u * 1024u)
#define MAX_CAP ((uint64_t)1 << 30) /* well below 2^31: seq comparisons stay exact */
#define NONE UINT64_MAX

struct uw_mpa_ooo {
    uw_allocator alloc;
    unsigned flags;
    bool markers; /* also lets FPDUs be found out of order (RFC 5044 6, rule 2) */
    uint32_t seq0;
    uint32_t base; /* stream position of offset 0 */
    uint32_t max_ulpdu;
    uint32_t max_wire; /* largest FPDU on the wire for max_ulpdu */
    uint64_t cap;      /* window: octets held beyond d */
    uint64_t ring;     /* ring size: cap rounded up to 64 */
    uint64_t d;        /* offset of the delivered position (next chain FPDU) */
    uint64_t buffered; /* present octets at or after d */
    int err;
    uint8_t *buf;
    uint64_t *present, *cand, *vstart;
    uint8_t *scratch;
};

/* ---- ring and bitmaps ----------------------------------------------------- */

static uint32_t pos_of(const uw_mpa_ooo *r, uint64_t off)
{
    return r->base + (uint32_t)off; /* modulo 2^32 */
}

static size_t ix(const uw_mpa_ooo *r, uint64_t off)
{
    return (size_t)(off % r->ring);
}

/* Octets from off to the ring's physical end, capped at len. */
static size_t chunk(const uw_mpa_ooo *r, uint64_t off, uint64_t len)
{
    uint64_t room = r->ring - ix(r, off);
    return (size_t)(len < room ? len : room);
}

static void ring_read(const uw_mpa_ooo *r, uint64_t off, uint8_t *dst, size_t len)
{
    while (len) {
        size_t n = chunk(r, off, len);
        memcpy(dst, r->buf + ix(r, off), n);
        dst += n;
        off += n;
        len -= n;
    }
}

static uint32_t ring_crc(const uw_mpa_ooo *r, uint32_t crc, uint64_t off, size_t len)
{
    while (len) {
        size_t n = chunk(r, off, len);
        crc = uw_crc32c_update(crc, r->buf + ix(r, off), n);
        off += n;
        len -= n;
    }
    return crc;
}

static bool bit(const uint64_t *bm, const uw_mpa_ooo *r, uint64_t off)
{
    size_t i = ix(r, off);
    return bm[i / 64] >> (i % 64) & 1;
}

static void bit_put(uint64_t *bm, const uw_mpa_ooo *r, uint64_t off, bool v)
{
    size_t i = ix(r, off);
    if (v)
        bm[i / 64] |= 1ull << (i % 64);
    else
        bm[i / 64] &= ~(1ull << (i % 64));
}

/* Sets or clears the bits of offsets [lo, hi); hi - lo <= ring. */
static void bits_put(uint64_t *bm, const uw_mpa_ooo *r, uint64_t lo, uint64_t hi, bool v)
{
    while (lo < hi) {
        size_t i = ix(r, lo), j = i + chunk(r, lo, hi - lo);
        lo += j - i;
        while (i < j) {
            size_t end = (i | 63) + 1 < j ? (i | 63) + 1 : j;
            uint64_t m = (end - i == 64) ? ~0ull : ((1ull << (end - i)) - 1) << (i % 64);
            if (v)
                bm[i / 64] |= m;
            else
                bm[i / 64] &= ~m;
            i = end;
        }
    }
}

/* First offset in [lo, hi) whose bit equals want, else hi. */
static uint64_t bits_find(const uint64_t *bm, const uw_mpa_ooo *r, uint64_t lo, uint64_t hi,
                          bool want)
{
    while (lo < hi) {
        size_t i = ix(r, lo), j = i + chunk(r, lo, hi - lo);
        uint64_t base = lo - i;
        while (i < j) {
            uint64_t w = want ? bm[i / 64] : ~bm[i / 64];
            w &= ~0ull << (i % 64);
            if (w) {
                size_t k = (i & ~(size_t)63) + (size_t)__builtin_ctzll(w);
                return k < j ? base + k : hi;
            }
            i = (i & ~(size_t)63) + 64;
        }
        lo = base + j;
    }
    return hi;
}

/* Last offset in [lo, hi) whose bit is set, else NONE. */
static uint64_t bits_rfind(const uint64_t *bm, const uw_mpa_ooo *r, uint64_t lo, uint64_t hi)
{
    while (hi > lo) {
        size_t top = ix(r, hi - 1);
        uint64_t start = hi - 1 - top; /* offset of ring index 0 */
        size_t i = start > lo ? 0 : (size_t)(lo - start);
        size_t j = top + 1;
        while (j > i) {
            size_t t = j - 1;
            uint64_t w = bm[t / 64];
            if (t % 64 != 63)
                w &= (1ull << (t % 64 + 1)) - 1;
            if (w) {
                size_t k = (t & ~(size_t)63) + 63 - (size_t)__builtin_clzll(w);
                return k >= i ? start + k : NONE;
            }
            j = t & ~(size_t)63;
        }
        hi = start + i;
    }
    return NONE;
}

static bool all_present(const uw_mpa_ooo *r, uint64_t lo, uint64_t hi)
{
    if (hi > r->d + r->cap)
        return false; /* cannot be: and the ring would alias */
    return bits_find(r->present, r, lo, hi, false) == hi;
}

/* ---- create / destroy ------------------------------------------------------ */

static void release(uw_mpa_ooo *r)
{
    r->alloc.free(r->alloc.ud, r->buf);
    r->alloc.free(r->alloc.ud, r->present);
    r->alloc.free(r->alloc.ud, r->scratch);
    r->alloc.free(r->alloc.ud, r);
}

int uw_mpa_ooo_create(uw_mpa_ooo **out, const uw_mpa_ooo_opts *o)
{
    if (!out || !o || o->max_ulpdu > UINT16_MAX)
        return UW_EINVAL;
    bool mk = o->flags & UW_MPA_MARKERS;
    uint32_t max = o->max_ulpdu ? o->max_ulpdu : UINT16_MAX;
    uint64_t cap = o->cap ? o->cap : DEFAULT_CAP;
    /* The FPDU at the delivered position must always fit, or reception could
     * stall with a full window: take the worst marker alignment. */
    uint32_t max_wire = 0;
    for (uint32_t p = 0; p < (mk ? UW_MPA_MARKER_INTERVAL : 1u); p++) {
        uint32_t w = uw__fpdu_wire_len(p, max, mk);
        if (w > max_wire)
            max_wire = w;
    }
    if (cap < max_wire || cap > MAX_CAP)
        return UW_EINVAL;

    uw_allocator a = uw__allocator(o->alloc);
    uw_mpa_ooo *r = a.alloc(a.ud, sizeof(*r));
    if (!r)
        return UW_ENOMEM;
    memset(r, 0, sizeof(*r));
    r->alloc = a;
    r->flags = o->flags & (UW_MPA_MARKERS | UW_MPA_CRC);
    r->markers = mk;
    r->seq0 = o->seq0;
    r->base = o->pos;
    r->max_ulpdu = max;
    r->max_wire = max_wire;
    r->cap = cap;
    r->ring = (cap + 63) / 64 * 64;
    size_t words = (size_t)(r->ring / 64);
    r->buf = a.alloc(a.ud, (size_t)r->ring);
    r->present = a.alloc(a.ud, 3 * words * sizeof(uint64_t));
    r->scratch = a.alloc(a.ud, max);
    if (!r->buf || !r->present || !r->scratch) {
        release(r);
        return UW_ENOMEM;
    }
    memset(r->present, 0, 3 * words * sizeof(uint64_t));
    r->cand = r->present + words;
    r->vstart = r->cand + words;
    *out = r;
    return 0;
}

void uw_mpa_ooo_destroy(uw_mpa_ooo *r)
{
    if (r)
        release(r);
}

uint32_t uw_mpa_ooo_delivered_pos(const uw_mpa_ooo *r)
{
    return pos_of(r, r->d);
}

size_t uw_mpa_ooo_buffered(const uw_mpa_ooo *r)
{
    return (size_t)r->buffered;
}

/* ---- FPDU validation ----------------------------------------------------- */

static void emit(uw_mpa_ooo_cb cb, void *ud, int type, const uw_mpa_ooo *r, uint64_t s,
                 const uint8_t *ulpdu, uint32_t n)
{
    if (!cb)
        return;
    uint32_t pos = pos_of(r, s);
    uw_mpa_ooo_event ev = {type, pos, r->seq0 + pos, ulpdu, n};
    cb(ud, &ev);
}

/* Reads the ULPDU_Length of the FPDU starting at s. The walker says where the
 * field is: after a leading marker, and in a misaligned stream possibly split
 * by one. Returns false if those octets are not all present yet. */
static bool read_len(const uw_mpa_ooo *r, uint64_t s, uint32_t *n)
{
    uw__walk w;
    uw__run run;
    uint8_t f[2] = {0};
    uw__walk_init(&w, pos_of(r, s), 0, r->markers);
    while (uw__walk_next(&w, &run) && run.field != UW__F_PAYLOAD && run.field != UW__F_PAD) {
        if (run.field == UW__F_LEN) {
            if (!all_present(r, s + run.wire, s + run.wire + run.len))
                return false;
            ring_read(r, s + run.wire, f + run.logical, run.len);
            if (run.logical + run.len == 2)
                break;
        }
    }
    *n = (uint32_t)f[0] << 8 | f[1];
    return true;
}

/* Wire length of the (present) FPDU at s. */
static uint32_t wire_at(const uw_mpa_ooo *r, uint64_t s)
{
    uint32_t n = 0;
    read_len(r, s, &n);
    return uw__fpdu_wire_len(pos_of(r, s), n, r->markers);
}

/* Checks a complete FPDU at s with ULPDU_Length n and copies its ULPDU into
 * scratch, markers removed (RFC 5044 4.3: DDP gets neither markers, header nor
 * CRC). The CRC is decided first: RFC 5044 8 reports a marker that disagrees
 * with the length (code 3) only "in the event that the CRC is valid". */
static int check(uw_mpa_ooo *r, uint64_t s, uint32_t n)
{
    uw__walk w;
    uw__run run;
    uint8_t f[4] = {0}, crcf[4] = {0};
    bool want_crc = r->flags & UW_MPA_CRC, marker_bad = false;
    uint32_t crc = uw_crc32c_init();
    uw__walk_init(&w, pos_of(r, s), n, r->markers);
    while (uw__walk_next(&w, &run)) {
        uint64_t at = s + run.wire;
        if (want_crc && run.in_crc)
            crc = ring_crc(r, crc, at, run.len);
        switch (run.field) {
        case UW__F_MARKER:
            ring_read(r, at, f, 4);
            marker_bad |= !uw__marker_ok(f, run.fpduptr);
            break;
        case UW__F_PAYLOAD:
            ring_read(r, at, r->scratch + (run.logical - 2), run.len);
            break;
        case UW__F_CRC:
            ring_read(r, at, crcf + (run.logical - w.bound[2]), run.len);
            break;
        default: /* length: already read; pad: only CRC-covered (4.1) */
            break;
        }
    }
    if (want_crc) {
        /* RFC 5044 4.4: the CRC goes on the wire least-significant octet first. */
        uint32_t got = (uint32_t)crcf[0] | (uint32_t)crcf[1] << 8 | (uint32_t)crcf[2] << 16 |
                       (uint32_t)crcf[3] << 24;
        if (got != uw_crc32c_final(crc))
            return UW_EMPA_CRC;
    }
    return marker_bad ? UW_EMPA_MARKER : 0;
}

enum { PENDING = 0, VALID = 1, DROPPED = 2 };

/* Whether offset s lies strictly inside (not at the start of) an FPDU
 * validated already. Validated FPDUs never overlap, so the nearest validated
 * start before s decides. */
static bool inside_validated(const uw_mpa_ooo *r, uint64_t s)
{
    uint64_t lo = s - r->d >= r->max_wire ? s - r->max_wire + 1 : r->d;
    uint64_t v = bits_rfind(r->vstart, r, lo, s);
    return v != NONE && v + wire_at(r, v) > s;
}

/* Tries the FPDU starting at s. chain: s is the delivered position, where the
 * in-order chain of ULPDU_Length fields has put an FPDU start (RFC 5044 6,
 * rule 1); otherwise s is a candidate from a marker or from the end of a
 * validated FPDU (rules 2 and 3). Returns PENDING (octets missing), VALID
 * (PLACED emitted, *wire set), DROPPED (a candidate that conflicts with what
 * is validated already; the chain will judge that stretch), or an error. */
static int try_fpdu(uw_mpa_ooo *r, uint64_t s, bool chain, uint32_t *wire, uw_mpa_ooo_cb cb,
                    void *ud)
{
    uint32_t n;
    if (!read_len(r, s, &n))
        return PENDING;
    if (n > r->max_ulpdu) {
        /* A candidate comes from a marker whose CRC nobody has checked yet:
         * an oversized length there proves nothing about the stream. */
        return chain ? UW_EMPA_ULPDU_TOO_LONG : DROPPED;
    }
    uint32_t w = uw__fpdu_wire_len(pos_of(r, s), n, r->markers);
    if (!all_present(r, s, s + w))
        return PENDING;
    /* First octet after s that starts a validated FPDU, if inside this one. */
    bool overlap = bits_find(r->vstart, r, s + 1, s + w, true) != s + w;
    if (!chain && (overlap || inside_validated(r, s)))
        return DROPPED;
    int err = check(r, s, n);
    if (err)
        return err;
    /* RFC 5044 8 code 3: marker-located FPDUs and the ULPDU_Length chain must
     * agree; the check is made when the gap before them closes. */
    if (chain && overlap)
        return UW_EMPA_MARKER;
    emit(cb, ud, UW_MPA_OOO_PLACED, r, s, r->scratch, n);
    *wire = w;
    return VALID;
}

/* Validates the candidate at c and, while that works, the FPDUs that follow
 * it back to back (RFC 5044 6, rule 3). What stays incomplete is kept as a
 * candidate for the segments still to come. */
static int chain_from(uw_mpa_ooo *r, uint64_t c, uw_mpa_ooo_cb cb, void *ud)
{
    while (c < r->d + r->cap) {
        if (bit(r->vstart, r, c)) {
            bit_put(r->cand, r, c, false);
            return 0;
        }
        uint32_t w = 0;
        int t = try_fpdu(r, c, false, &w, cb, ud);
        if (t < 0)
            return t;
        bit_put(r->cand, r, c, t == PENDING);
        if (t != VALID)
            return 0;
        bit_put(r->vstart, r, c, true);
        c += w;
    }
    return 0;
}

/* Delivers FPDUs at the delivered position while they are complete (RFC 5044
 * A.3: ordering established), placing those not placed yet. */
static int deliver(uw_mpa_ooo *r, uw_mpa_ooo_cb cb, void *ud)
{
    uint64_t d0 = r->d;
    for (;;) {
        uint64_t s = r->d;
        uint32_t n = 0, w = 0;
        if (bit(r->vstart, r, s)) {
            read_len(r, s, &n);
            w = uw__fpdu_wire_len(pos_of(r, s), n, r->markers);
        } else {
            int t = try_fpdu(r, s, true, &w, cb, ud);
            if (t < 0)
                return t;
            if (t == PENDING)
                break;
            read_len(r, s, &n);
        }
        emit(cb, ud, UW_MPA_OOO_DELIVERED, r, s, NULL, n);
        /* Free the ring slots: they now stand for octets cap further on. */
        bits_put(r->present, r, s, s + w, false);
        bits_put(r->cand, r, s, s + w, false);
        bits_put(r->vstart, r, s, s + w, false);
        r->buffered -= w;
        r->d = s + w;
    }
    /* An FPDU validated out of order that ended exactly at the old window end
     * could not leave a candidate after it (rule 3): that offset was outside
     * the window and its ring slot belonged to another. Now it is inside. */
    uint64_t end0 = d0 + r->cap;
    if (r->markers && r->d > d0 && end0 > r->d) {
        uint64_t lo = end0 - r->d > r->max_wire ? end0 - r->max_wire : r->d;
        uint64_t v = bits_rfind(r->vstart, r, lo, end0);
        if (v != NONE && v + wire_at(r, v) == end0 && !bit(r->vstart, r, end0))
            bit_put(r->cand, r, end0, true);
    }
    return 0;
}

/* Candidate FPDU start from the marker at offset m (all 4 octets present),
 * or NONE. RFC 5044 4.3: FPDUPTR 0 means an FPDU starts at the marker;
 * otherwise the ULPDU_Length field is FPDUPTR octets before it, and the FPDU
 * begins 4 earlier when a marker sits right before that field. */
static uint64_t marker_target(const uw_mpa_ooo *r, uint64_t m)
{
    uint8_t f[4];
    ring_read(r, m, f, 4);
    uint64_t p = uw__marker_fpduptr(f);
    if (p > m - r->d)
        return NONE;
    uint64_t len = m - p;
    /* Every FPDU start, and so every length field, lies at the start
     * position modulo 4. In a conformant stream that is already true; in a
     * misaligned one it restores the low bits 4.2 makes us ignore. */
    len -= (pos_of(r, len) - r->base) & 3u;
    if (len < r->d)
        return NONE;
    if (len == m)
        return m;
    if (pos_of(r, len) % UW_MPA_MARKER_INTERVAL == 0)
        return NONE; /* a length field cannot sit on a marker */
    uint64_t c = len;
    if (pos_of(r, len) % UW_MPA_MARKER_INTERVAL == UW_MPA_MARKER_LEN) {
        if (len - r->d < UW_MPA_MARKER_LEN)
            return NONE;
        c = len - UW_MPA_MARKER_LEN;
    }
    /* The FPDU must contain the marker, so it cannot start further back
     * than the largest FPDU. */
    return m - c < r->max_wire ? c : NONE;
}

/* Whether the FPDU at candidate c, whose length field is present, certainly
 * ends at or before offset a. A cheap upper bound on its wire length (every
 * 512 octets hold at most one 4-octet marker) avoids walking it: this runs
 * for every candidate near every segment. */
static bool ends_before(const uw_mpa_ooo *r, uint64_t c, uint64_t a)
{
    uint32_t n;
    if (c >= a || !read_len(r, c, &n) || n > r->max_ulpdu)
        return false;
    uint64_t l = 2u + n + uw__mpa_pad(n) + 4u;
    if (r->markers)
        l += UW_MPA_MARKER_LEN * (l / (UW_MPA_MARKER_INTERVAL - UW_MPA_MARKER_LEN) + 3);
    return c + l <= a;
}

/* ---- segments --------------------------------------------------------------- */

static int fail(uw_mpa_ooo *r, int err)
{
    r->err = err;
    return err;
}

int uw_mpa_ooo_segment(uw_mpa_ooo *r, uint32_t seq, const void *data, size_t len, uw_mpa_ooo_cb cb,
                       void *ud)
{
    if (!r || (len && !data))
        return UW_EINVAL;
    if (r->err)
        return r->err;
    if (len == 0)
        return 0;
    const uint8_t *p = data;

    /* Place the segment relative to the delivered position, with TCP's
     * modular sequence arithmetic: up to 2^31 ahead, otherwise behind. */
    uint32_t ahead = (seq - r->seq0) - pos_of(r, r->d);
    uint64_t a = r->d;
    if (ahead < 0x80000000u) {
        a += ahead;
    } else {
        uint64_t behind = (uint64_t)(0u - ahead);
        if (behind >= len)
            return 0; /* all delivered already: a retransmission */
        p += behind;
        len -= (size_t)behind;
    }
    uint64_t b = a + len;
    if (b - r->d > r->cap)
        return UW_ENOBUFS; /* dropped whole; TCP will send it again */

    /* Copy only what is missing: RFC 5044 A.3 item 1, duplicates must not
     * overwrite already received (possibly validated) octets. */
    uint64_t added = 0;
    for (uint64_t x = bits_find(r->present, r, a, b, false); x < b;) {
        uint64_t y = bits_find(r->present, r, x, b, true);
        for (uint64_t o = x; o < y;) {
            size_t n = chunk(r, o, y - o);
            memcpy(r->buf + ix(r, o), p + (o - a), n);
            o += n;
        }
        bits_put(r->present, r, x, y, true);
        added += y - x;
        x = bits_find(r->present, r, y, b, false);
    }
    if (added == 0)
        return 0; /* nothing new, nothing can have completed */
    r->buffered += added;

    /* In-order chain first: it is the authority on FPDU boundaries. */
    int rc = deliver(r, cb, ud);
    if (rc < 0)
        return fail(r, rc);
    if (!r->markers)
        return 0;

    /* Markers whose octets this segment touched give candidates (RFC 5044 6,
     * rule 2; 4.3: markers sit at multiples of 512 in the stream). */
    uint64_t lo = a > r->d + 3 ? a - 3 : r->d;
    lo += (0u - pos_of(r, lo)) % UW_MPA_MARKER_INTERVAL;
    for (uint64_t m = lo; m < b; m += UW_MPA_MARKER_INTERVAL) {
        if (m < r->d || !all_present(r, m, m + UW_MPA_MARKER_LEN))
            continue;
        uint64_t c = marker_target(r, m);
        if (c == NONE || bit(r->vstart, r, c))
            continue;
        /* Tried now: its FPDU may lie wholly before this segment, which
         * the filter below would skip. */
        bit_put(r->cand, r, c, true);
        rc = chain_from(r, c, cb, ud);
        if (rc < 0)
            return fail(r, rc);
    }

    /* Retry the older candidates whose FPDU could include the new octets. */
    uint64_t back = r->max_wire;
    uint64_t from = a > r->d + back ? a - back : r->d;
    for (uint64_t c = bits_find(r->cand, r, from, b, true); c < b;
         c = bits_find(r->cand, r, c + 1, b, true)) {
        if (ends_before(r, c, a))
            continue; /* unchanged since it was last tried */
        rc = chain_from(r, c, cb, ud);
        if (rc < 0)
            return fail(r, rc);
    }

    /* A candidate may have been the FPDU at the delivered position. */
    rc = deliver(r, cb, ud);
    return rc < 0 ? fail(r, rc) : 0;
}
