/* The allocator every object falls back to when the caller injects none. */
#ifndef UW_UTIL_ALLOC_H
#define UW_UTIL_ALLOC_H

#include <stdlib.h>

#include "uwarp/common.h"

static inline void *uw__malloc(void *ud, size_t n)
{
    (void)ud;
    return malloc(n);
}

static inline void uw__free(void *ud, void *p)
{
    (void)ud;
    free(p);
}

/* The caller's allocator, or malloc/free when a is NULL. */
static inline uw_allocator uw__allocator(const uw_allocator *a)
{
    uw_allocator d = {uw__malloc, uw__free, NULL};
    return a ? *a : d;
}

#endif
