#include "testutil.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void tu_rng_init(tu_rng *r, uint64_t seed)
{
    r->s = seed ? seed : 0x9E3779B97F4A7C15ull;
}

uint64_t tu_rng_next(tu_rng *r)
{
    r->s ^= r->s >> 12;
    r->s ^= r->s << 25;
    r->s ^= r->s >> 27;
    return r->s * 0x2545F4914F6CDD1Dull;
}

uint64_t tu_rng_below(tu_rng *r, uint64_t n)
{
    return tu_rng_next(r) % n;
}

uint32_t tu_rng_size(tu_rng *r, uint32_t lo, uint32_t hi)
{
    uint32_t bits = 0;
    while ((hi >> bits) > 1)
        bits++;
    uint32_t top = 1u << tu_rng_below(r, bits + 1);
    uint32_t v = lo + (uint32_t)tu_rng_below(r, top < hi - lo + 1 ? top : hi - lo + 1);
    return v > hi ? hi : v;
}

void tu_rng_fill(tu_rng *r, void *buf, size_t len)
{
    uint8_t *p = buf;
    for (size_t i = 0; i < len; i++)
        p[i] = (uint8_t)(tu_rng_next(r) >> 56);
}

uint64_t tu_seed(uint64_t def)
{
    const char *e = getenv("UW_TEST_SEED");
    uint64_t s = e ? strtoull(e, NULL, 0) : def;
    fprintf(stderr, "# seed %llu (set UW_TEST_SEED to override)\n", (unsigned long long)s);
    return s;
}

long tu_unhex(const char *hex, uint8_t *out, size_t cap)
{
    size_t n = 0;
    int hi = -1;
    for (const char *p = hex; *p; p++) {
        if (isspace((unsigned char)*p))
            continue;
        int v;
        if (*p >= '0' && *p <= '9')
            v = *p - '0';
        else if (*p >= 'a' && *p <= 'f')
            v = *p - 'a' + 10;
        else if (*p >= 'A' && *p <= 'F')
            v = *p - 'A' + 10;
        else
            return -1;
        if (hi < 0) {
            hi = v;
        } else {
            if (n >= cap)
                return -1;
            out[n++] = (uint8_t)(hi << 4 | v);
            hi = -1;
        }
    }
    return hi < 0 ? (long)n : -1;
}

static void *fa_alloc(void *ud, size_t size)
{
    tu_failalloc *f = ud;
    if (f->fail_at && ++f->count == f->fail_at)
        return NULL;
    return malloc(size);
}

static void fa_free(void *ud, void *p)
{
    (void)ud;
    free(p);
}

void tu_failalloc_init(tu_failalloc *f, unsigned long fail_at)
{
    memset(f, 0, sizeof(*f));
    f->a.alloc = fa_alloc;
    f->a.free = fa_free;
    f->a.ud = f;
    f->fail_at = fail_at;
}
