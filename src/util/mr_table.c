/* The STag table (mr_table.h). */
#include <string.h>

#include "util/mr_table.h"

static int slot(struct uw__mrt *t, const uw_allocator *a, uint32_t *idx)
{
    for (uint32_t i = 1; i < t->cap; i++) {
        uint32_t j = 1 + (t->free_hint + i - 1) % (t->cap - 1);
        if (!t->mrs[j]) {
            *idx = j;
            t->free_hint = j;
            return 0;
        }
    }
    uint32_t ncap = t->cap ? t->cap * 2 : 64;
    if (ncap > (1u << 24))
        return UW_ENOBUFS;
    uw_mr **m = a->alloc(a->ud, ncap * sizeof(*m));
    uint8_t *k = a->alloc(a->ud, ncap);
    if (!m || !k) {
        a->free(a->ud, m);
        a->free(a->ud, k);
        return UW_ENOMEM;
    }
    memset(m, 0, ncap * sizeof(*m));
    memset(k, 0, ncap);
    if (t->cap) {
        memcpy(m, t->mrs, t->cap * sizeof(*m));
        memcpy(k, t->key, t->cap);
    }
    a->free(a->ud, t->mrs);
    a->free(a->ud, t->key);
    *idx = t->cap ? t->cap : 1;
    t->mrs = m;
    t->key = k;
    t->cap = ncap;
    return 0;
}

int uw__mrt_add(struct uw__mrt *t, const uw_allocator *a, uw_mr *mr)
{
    uint32_t idx;
    int r = slot(t, a, &idx);
    if (r < 0)
        return r;
    t->key[idx]++;
    mr->stag = idx << 8 | t->key[idx];
    t->mrs[idx] = mr;
    return 0;
}

void uw__mrt_rekey(struct uw__mrt *t, uw_mr *mr)
{
    uint32_t idx = mr->stag >> 8;
    t->key[idx]++;
    mr->stag = idx << 8 | t->key[idx];
}

void uw__mrt_remove(struct uw__mrt *t, const uw_mr *mr)
{
    t->mrs[mr->stag >> 8] = NULL;
}

void uw__mrt_free(struct uw__mrt *t, const uw_allocator *a)
{
    a->free(a->ud, t->mrs);
    a->free(a->ud, t->key);
    memset(t, 0, sizeof(*t));
}
