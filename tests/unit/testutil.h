/* Helpers shared by the unit tests: deterministic PRNG, hex, failing allocator. */
#ifndef UW_TESTUTIL_H
#define UW_TESTUTIL_H

#include <stddef.h>
#include <stdint.h>

#include "uwarp/common.h"

/* xorshift64*: deterministic so failures reproduce; seed from UW_TEST_SEED if set. */
typedef struct tu_rng {
    uint64_t s;
} tu_rng;

void tu_rng_init(tu_rng *r, uint64_t seed);
uint64_t tu_rng_next(tu_rng *r);
/* Uniform in [0, n); n > 0. */
uint64_t tu_rng_below(tu_rng *r, uint64_t n);
void tu_rng_fill(tu_rng *r, void *buf, size_t len);
/* Log-uniform-ish in [lo, hi]: small sizes as often as large ones. */
uint32_t tu_rng_size(tu_rng *r, uint32_t lo, uint32_t hi);
/* Seed for a test: UW_TEST_SEED from the environment, else def. Printed once. */
uint64_t tu_seed(uint64_t def);

/* Parses hex (whitespace ignored) into out; returns octets or -1. */
long tu_unhex(const char *hex, uint8_t *out, size_t cap);

/* An allocator that fails the Nth allocation (1-based; 0 = never). */
typedef struct tu_failalloc {
    uw_allocator a;
    unsigned long count;
    unsigned long fail_at;
} tu_failalloc;

void tu_failalloc_init(tu_failalloc *f, unsigned long fail_at);

#endif
