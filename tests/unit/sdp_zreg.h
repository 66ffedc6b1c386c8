/* The verbs layer's STag table as the zero-copy tests of two SDP cores in
 * memory (sdp_pair.h) see it: buffers "registered" for a transfer, valid
 * until a Send with Invalidate names them (reg_tap, installed with
 * sp_setup_tap) or the test revokes them, so an RDMA access after the
 * transfer ended is caught. Header-only, one table per test program. */
#ifndef UW_TEST_SDP_ZREG_H
#define UW_TEST_SDP_ZREG_H

#include "sdp_pair.h"

#define NREG 16

typedef struct zreg {
    uint32_t stag;
    uint8_t *addr;
    uint64_t va;
    uint32_t len;
    bool valid;
} zreg;

static zreg regs[NREG];
static uint32_t next_stag = 0x100;
static unsigned invalidations, bad_invalidations;

static inline void reg_reset(void)
{
    memset(regs, 0, sizeof(regs));
    invalidations = bad_invalidations = 0;
}

static inline zreg *reg_find(uint32_t stag)
{
    for (int i = 0; i < NREG; i++)
        if (regs[i].stag == stag && regs[i].addr)
            return &regs[i];
    return NULL;
}

/* A zeroed buffer of len under a fresh STag, at a VA that is not its
 * address; NULL when the table is full. */
static inline zreg *reg_new(uint32_t len)
{
    for (int i = 0; i < NREG; i++) {
        zreg *r = &regs[i];
        if (r->addr)
            continue;
        r->addr = calloc(1, len ? len : 1);
        r->len = len;
        r->va = 0x7f0000000000ull + (uint64_t)next_stag * 0x100000000ull;
        r->stag = next_stag++;
        r->valid = true;
        return r;
    }
    return NULL;
}

static inline void reg_drop(zreg *r)
{
    free(r->addr);
    memset(r, 0, sizeof(*r));
}

/* The engine's view of a Send with Invalidate: the STag stops working
 * before the message is delivered. */
static inline void reg_tap(void *ud, const sp_side *from, const sp_msg *m)
{
    (void)ud;
    (void)from;
    if (!m->inv)
        return;
    zreg *r = reg_find(m->inv_stag);
    if (r && r->valid) {
        r->valid = false;
        invalidations++;
    } else {
        bad_invalidations++;
    }
}

static inline void fill_pattern(uint8_t *b, size_t n, uint32_t seed)
{
    for (size_t i = 0; i < n; i++)
        b[i] = (uint8_t)((i * 2654435761u + seed) >> 13);
}

static inline uint32_t be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

#endif
