/* FPDU geometry: where markers fall inside one FPDU on the wire.
 *
 * Transmit, the streaming receiver and the out-of-order receiver all need the
 * same answer to "which wire octets of this FPDU are markers, which are data,
 * and which are covered by the CRC". Deriving it in one place keeps the three
 * from disagreeing by an octet.
 *
 * The logical FPDU (what it would be without markers) is
 *     ULPDU_Length (2) | ULPDU (n) | PAD (p) | CRC (4),   L = 2 + n + p + 4.
 * The walker yields runs in wire order. A data run never crosses a field
 * boundary or a marker position; a marker run is exactly one marker. The
 * marker that would fall right after the CRC field belongs to the next FPDU
 * (RFC 5044 4.3), so the walk ends when the logical octets are exhausted.
 */
#ifndef UW_MPA_FPDU_WALK_H
#define UW_MPA_FPDU_WALK_H

#include <stdbool.h>
#include <stdint.h>

#include "uwarp/mpa.h"

enum uw__field {
    UW__F_LEN = 0,
    UW__F_PAYLOAD = 1,
    UW__F_PAD = 2,
    UW__F_CRC = 3,
    UW__F_MARKER = 4,
};

typedef struct uw__run {
    uint32_t wire;    /* offset from the FPDU's first octet */
    uint32_t len;     /* octets in this run */
    uint32_t logical; /* data runs: offset in the logical FPDU */
    uint32_t fpduptr; /* marker runs: the value it must carry (0 for a leading marker) */
    uint8_t field;    /* enum uw__field */
    bool in_crc;      /* covered by the CRC */
} uw__run;

typedef struct uw__walk {
    uint32_t pos;      /* stream position of the FPDU's first octet */
    uint32_t wire;     /* wire offset of the next run */
    uint32_t logical;  /* logical offset of the next data octet */
    uint32_t bound[4]; /* ends of the LEN, PAYLOAD, PAD and CRC fields */
    uint32_t hdr;      /* wire offset of the ULPDU_Length field */
    bool markers;
} uw__walk;

/* Pad that makes 2 + n a multiple of 4 (RFC 5044 4.1). */
static inline uint32_t uw__mpa_pad(uint32_t n)
{
    return (4u - ((2u + n) & 3u)) & 3u;
}

static inline void uw__walk_set_len(uw__walk *w, uint32_t n)
{
    w->bound[0] = 2;
    w->bound[1] = 2 + n;
    w->bound[2] = 2 + n + uw__mpa_pad(n);
    w->bound[3] = w->bound[2] + 4;
}

/* Starts a walk of an FPDU at stream position pos whose ULPDU has n octets.
 * A receiver that does not know n yet may pass 0 and call uw__walk_set_len()
 * once the two length octets have been walked: the runs up to that point do
 * not depend on n. */
static inline void uw__walk_init(uw__walk *w, uint32_t pos, uint32_t n, bool markers)
{
    w->pos = pos;
    w->wire = 0;
    w->logical = 0;
    w->markers = markers;
    w->hdr = (markers && pos % UW_MPA_MARKER_INTERVAL == 0) ? UW_MPA_MARKER_LEN : 0;
    uw__walk_set_len(w, n);
}

static inline bool uw__walk_next(uw__walk *w, uw__run *r)
{
    if (w->logical >= w->bound[3])
        return false;
    uint32_t at = w->pos + w->wire; /* wraps mod 2^32, as marker spacing allows */
    if (w->markers && at % UW_MPA_MARKER_INTERVAL == 0) {
        r->wire = w->wire;
        r->len = UW_MPA_MARKER_LEN;
        r->logical = w->logical;
        r->fpduptr = w->wire == 0 ? 0 : w->wire - w->hdr;
        r->field = UW__F_MARKER;
        /* Covered when it comes before the CRC field, including one right
         * after the pad (RFC 5044 4.4). */
        r->in_crc = w->logical <= w->bound[2];
        w->wire += UW_MPA_MARKER_LEN;
        return true;
    }
    unsigned f = 0;
    while (w->logical >= w->bound[f])
        f++;
    uint32_t step = w->bound[f] - w->logical;
    if (w->markers) {
        uint32_t to_marker = UW_MPA_MARKER_INTERVAL - at % UW_MPA_MARKER_INTERVAL;
        if (to_marker < step)
            step = to_marker;
    }
    r->wire = w->wire;
    r->len = step;
    r->logical = w->logical;
    r->fpduptr = 0;
    r->field = (uint8_t)f;
    r->in_crc = f != UW__F_CRC;
    w->wire += step;
    w->logical += step;
    return true;
}

/* The FPDUPTR a received marker carries. RFC 5044 4.2: receivers treat its
 * two low bits as zero (and ignore the reserved first half). */
static inline uint32_t uw__marker_fpduptr(const uint8_t m[4])
{
    return ((uint32_t)m[2] << 8 | m[3]) & ~3u;
}

/* The one FPDUPTR check every receiver makes: marker m, as received, carries
 * the pointer the walk computed for its run (uw__run.fpduptr: RFC 5044 4.3,
 * back to the FPDU's ULPDU_Length field, 0 for a leading marker). Low bits
 * are masked on both sides, which is exact for aligned streams and lets
 * misaligned ones (docs/design.md) round-trip. */
static inline bool uw__marker_ok(const uint8_t m[4], uint32_t want)
{
    return uw__marker_fpduptr(m) == (want & ~3u);
}

/* Wire length of a whole FPDU (markers included). */
static inline uint32_t uw__fpdu_wire_len(uint32_t pos, uint32_t n, bool markers)
{
    uw__walk w;
    uw__run r;
    uw__walk_init(&w, pos, n, markers);
    if (!markers)
        return w.bound[3];
    while (uw__walk_next(&w, &r))
        ;
    return w.wire;
}

/* Framing without markers into caller storage (fpdu_tx.c): len2 holds the
 * ULPDU_Length field, trailer7 the pad and CRC; iov[] points into both.
 * Returns the iovec count or an error; *crc_out and *wire_len are results. */
ssize_t uw__fpdu_build_plain(uint8_t *len2, uint8_t *trailer7, struct iovec *iov, size_t iov_cap,
                             const struct iovec *ulpdu, size_t ulpdu_iovcnt, unsigned flags,
                             uint32_t *crc_out, size_t *wire_len);

/* Framing without markers by copy: the whole FPDU contiguous in out[cap].
 * Returns its wire length or an error (UW_ENOBUFS when it does not fit). */
ssize_t uw__fpdu_build_flat(uint8_t *out, size_t cap, const struct iovec *ulpdu,
                            size_t ulpdu_iovcnt, unsigned flags, uint32_t *crc_out);

/* Most markers one FPDU can hold: a 65535-octet ULPDU spans at most
 * ceil(65544 / 508) + 1 = 131 marker intervals. */
#define UW__MAX_MARKERS UW_MPA_FPDU_MAX_MARKERS

#endif
