/* Registered regions and the STag table that names them, as plain data: the
 * RDMAP core looks STags up and invalidates regions on the peer's word
 * (RFC 5040 6.10); verbs/objects.c registers and deregisters them. Nothing
 * here owns a descriptor or calls above it. */
#ifndef UW_UTIL_MR_TABLE_H
#define UW_UTIL_MR_TABLE_H

#include <stdbool.h>
#include <stdint.h>

#include "uwarp/verbs.h"

/* The public handle uw_mr. Validity, PD and bounds are checked by whoever
 * uses a region, since each check has its own error code. */
struct uw_mr {
    uw_pd *pd; /* only compared: the core never looks inside */
    uint8_t *addr;
    uint64_t len;
    unsigned access;
    uint32_t stag;
    bool valid;
};

/* STag layout: index << 8 | key. Index 0 is never used, so STag 0 (and the
 * STag 1 of a zero-length RTR Write) never names a region. */
struct uw__mrt {
    uw_mr **mrs;
    uint8_t *key;
    uint32_t cap, free_hint;
};

/* Gives mr a free index and a fresh key (mr->stag); 0, UW_ENOMEM or
 * UW_ENOBUFS (2^24 regions). The table grows through a. */
int uw__mrt_add(struct uw__mrt *t, const uw_allocator *a, uw_mr *mr);
/* A new key for the same index: old STags stop naming mr. */
void uw__mrt_rekey(struct uw__mrt *t, uw_mr *mr);
void uw__mrt_remove(struct uw__mrt *t, const uw_mr *mr);
void uw__mrt_free(struct uw__mrt *t, const uw_allocator *a);

/* The region an STag names, key included; NULL if none. */
static inline uw_mr *uw__mrt_lookup(const struct uw__mrt *t, uint32_t stag)
{
    uint32_t idx = stag >> 8;
    if (idx == 0 || idx >= t->cap || !t->mrs[idx] || t->mrs[idx]->stag != stag)
        return NULL;
    return t->mrs[idx];
}

#endif
