/* A cursor over a scatter/gather list: the one way the core turns "octet
 * off of this list" into addresses, for Send and Write payload sources and
 * for Sends placed into a posted receive (where it persists across the
 * FPDU's payload runs instead of walking the list from its start for each).
 *
 * Invariant: between calls the cursor never rests on an empty entry or at
 * the end of one; it sits inside an entry with octets left, or at the end of
 * the list (i == n). So zero-length entries and offsets that land exactly on
 * an entry boundary need no special case in take(). */
#ifndef UW_RDMAP_SGC_H
#define UW_RDMAP_SGC_H

#include <stdint.h>
#include <sys/uio.h>

#include "uwarp/verbs.h"

typedef struct uw__sgc {
    const uw_sge *sge;
    int n;        /* entries */
    int i;        /* current entry; n at the end */
    uint32_t off; /* into sge[i] */
    uint32_t pos; /* octets of the list before the cursor */
} uw__sgc;

/* Moves up to len octets on; returns how many (fewer at the end of the
 * list, where the cursor then stays). */
static inline uint32_t uw__sgc_advance(uw__sgc *c, uint32_t len)
{
    uint32_t done = 0;
    while (c->i < c->n) {
        uint32_t room = c->sge[c->i].length - c->off;
        if (len - done < room) {
            c->off += len - done;
            done = len;
            break;
        }
        done += room;
        c->i++;
        c->off = 0;
    }
    c->pos += done;
    return done;
}

/* At octet pos of sge[0..n) (at the end if the list is shorter). */
static inline void uw__sgc_init(uw__sgc *c, const uw_sge *sge, int n, uint32_t pos)
{
    *c = (uw__sgc){.sge = sge, .n = n};
    uw__sgc_advance(c, pos);
}

/* The contiguous piece at the cursor, at most max octets, and moves past
 * it. Returns its length: 0 at the end of the list or when max is 0. */
static inline uint32_t uw__sgc_take(uw__sgc *c, uint32_t max, uint8_t **p)
{
    if (c->i >= c->n || !max)
        return 0;
    const uw_sge *s = &c->sge[c->i];
    uint32_t room = s->length - c->off;
    uint32_t t = max < room ? max : room;
    *p = (uint8_t *)(uintptr_t)(s->addr + c->off);
    if (t < room) {
        c->off += t;
        c->pos += t;
    } else {
        c->i++;
        c->off = 0;
        c->pos += t;
        uw__sgc_advance(c, 0); /* past empty entries: the invariant */
    }
    return t;
}

/* The next len octets as at most cap iovecs; moves past what they cover
 * (c->pos tells how far: less than len when cap or the list runs out).
 * Returns the iovec count. */
static inline int uw__sgc_slice(uw__sgc *c, uint32_t len, struct iovec *out, int cap)
{
    int k = 0;
    uint8_t *p;
    uint32_t t;
    while (k < cap && (t = uw__sgc_take(c, len, &p)) != 0) {
        out[k].iov_base = p;
        out[k].iov_len = t;
        k++;
        len -= t;
    }
    return k;
}

#endif
