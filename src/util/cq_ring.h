/* The ring of a completion queue, as plain data: the RDMAP core pushes into
 * it and the verbs layer takes from it. It owns no descriptor and wakes
 * nobody, so the core can use it without knowing what waits on a CQ; the
 * one who pushes or takes tells the engine (verbs/objects.c kicks QPs paused
 * on a full ring; the core reports its pushes as news). */
#ifndef UW_UTIL_CQ_RING_H
#define UW_UTIL_CQ_RING_H

#include <stdbool.h>
#include <stdint.h>

#include "uwarp/error.h"
#include "uwarp/verbs.h"

struct uw__cqr {
    uw_wc *wc; /* cap entries, from the context's allocator */
    uint32_t cap, head, count;
    uint64_t pushed; /* completions ever queued */
};

static inline bool uw__cqr_full(const struct uw__cqr *r)
{
    return r->count == r->cap;
}

static inline int uw__cqr_push(struct uw__cqr *r, const uw_wc *wc)
{
    if (r->count == r->cap)
        return UW_ENOBUFS;
    r->wc[(r->head + r->count) % r->cap] = *wc;
    r->count++;
    r->pushed++;
    return 0;
}

/* Moves up to n completions, oldest first, into out; returns how many. */
static inline int uw__cqr_take(struct uw__cqr *r, uw_wc *out, int n)
{
    int k = 0;
    while (k < n && r->count) {
        out[k++] = r->wc[r->head];
        r->head = (r->head + 1) % r->cap;
        r->count--;
    }
    return k;
}

#endif
