/* Internal: what crc32c.c and crc32c_x86.c share, and what the unit test
 * checks (every constant hard-coded in crc32c_x86.c is exported here so that
 * tests/unit/test_crc32c.c can recompute it bit by bit). */
#ifndef UW_UTIL_CRC32C_IMPL_H
#define UW_UTIL_CRC32C_IMPL_H

#include <stddef.h>
#include <stdint.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define UW_CRC_X86 1
#endif

/* One crc32 chain, 8 octets at a time (crc32c.c); short buffers and the
 * hybrid's head and tail. Raw register in and out; needs SSE4.2. */
uint32_t uw__crc32c_sse42(uint32_t crc, const unsigned char *p, size_t len);

/* Octets one step of the hybrid loop consumes. */
#define UW__CRC32C_HYBRID_STEP 136
/* The least uw__crc32c_hybrid accepts: a step (136) after up to 15 split off. */
#define UW__CRC32C_HYBRID_MIN 256

/* The hybrid loop: carry-less folding and three crc32 streams side by side.
 * Takes and returns the raw register. len >= UW__CRC32C_HYBRID_MIN. Needs
 * SSE4.2 and PCLMULQDQ, and with avx512 nonzero also AVX-512F and VL; x86-64
 * only (UW_CRC_X86). */
uint32_t uw__crc32c_hybrid(uint32_t crc, const unsigned char *p, size_t len, int avx512);

/* Folding constants for a distance of 16 * (i + 1) octets, D = 128 * (i + 1)
 * bits: [2i] = x^(D + 31) mod P and [2i + 1] = x^(D - 33) mod P, reflected
 * (bit 31 is x^0). */
extern const uint32_t uw__crc32c_fold_k[8];

/* Shift constants: x^(8 * 2^i - 33) mod P, reflected. For i < 3 the exponent
 * is negative, i.e. the entry is the inverse of x^(33 - 8 * 2^i). */
#define UW__CRC32C_XPOW_BITS 30
extern const uint32_t uw__crc32c_xpow_k[UW__CRC32C_XPOW_BITS];

#endif
