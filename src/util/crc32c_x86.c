/* CRC32c on x86-64 with PCLMULQDQ and the crc32 instruction working together.
 *
 * Three crc32 streams saturate the one port that executes crc32 (8 octets a
 * cycle), and carry-less folding alone is bound by the one port that executes
 * pclmulqdq (two per 16 octets). The two are different ports, so one loop
 * that feeds both runs near their sum. A block is cut into regions that are
 * processed side by side and joined at the end:
 *
 *     | S0: head + ls | S1: ls | S2: ls | V: 64m, folded | T: t < 16 |
 *
 * A step folds 64 octets of V into four 128-bit accumulators (8 pclmulqdq)
 * and runs three crc32 on each of S0..S2 (9 crc32), so both ports need about
 * 9 cycles for 136 octets. The head (under 24 octets) takes up what does not
 * divide evenly, and T, only split off for long buffers, aligns V. The
 * incoming register simply starts S0's chain. V ends as a 128-bit remainder
 * that two crc32 turn into a register; each region's register is moved past
 * the regions after it by multiplying with x^(8 * distance) mod P. V comes
 * last so that, with no T, its longer reduction needs no shift after it.
 *
 * Algebra, with reflected operands (bit 31 of a 32-bit value is x^0; a 64- or
 * 128-bit little-endian load has the first message bit as its highest power):
 *   - pclmulqdq of a 64-bit A and a 32-bit k, read back as a 128-bit value,
 *     is A * k * x^33: the integer product's bit j stands for x^(94 - j).
 *   - crc32_u64(0, v) is v * x^32 mod P.
 *   - So clmul_red(a, b) = crc32_u64(0, clmul(a, b)) is a * b * x^33 mod P,
 *     and with k = x^(8d - 33) it shifts a register past d octets. Products
 *     of such k through clmul_red stay of that form, which is how xpow8()
 *     builds any distance from a table of powers of two.
 *   - Folding a 128-bit H * x^64 + L forward by D bits: H * x^(D + 31) and
 *     L * x^(D - 33), each times the x^33 above, sum to (H x^64 + L) x^D.
 */
#include "util/crc32c_impl.h"

#include <string.h>

/* clang-format off */
const uint32_t uw__crc32c_fold_k[8] = {
    0xF20C0DFEu, 0x493C7D27u, /* 16 octets: x^159, x^95 */
    0x3DA6D0CBu, 0xBA4FC28Eu, /* 32 octets: x^287, x^223 */
    0x1C291D04u, 0xDDC0152Bu, /* 48 octets: x^415, x^351 */
    0x740EEF02u, 0x9E4ADDF8u, /* 64 octets: x^543, x^479 */
};

const uint32_t uw__crc32c_xpow_k[UW__CRC32C_XPOW_BITS] = {
    0xBF818109u, 0x780D5A4Du, 0x05EC76F1u, 0x00000001u, 0x493C7D27u, 0xBA4FC28Eu,
    0x9E4ADDF8u, 0x0D3B6092u, 0xB9E02B86u, 0xDD7E3B0Cu, 0x170076FAu, 0xA51B6135u,
    0x82F89C77u, 0x54A86326u, 0x1DC403CCu, 0x5AE703ABu, 0xC5013A36u, 0xAC2AC6DDu,
    0x9B4615A9u, 0x688D1C61u, 0xF6AF14E6u, 0xB6FFE386u, 0xB717425Bu, 0x478B0D30u,
    0x54CC62E5u, 0x7B2102EEu, 0x8A99ADEFu, 0xA7568C8Fu, 0xD610D67Eu, 0x6B086B3Fu,
};
/* clang-format on */

#ifdef UW_CRC_X86
#include <immintrin.h>

/* Nothing compiled for AVX-512 may touch a 512-bit register: keeping the
 * accumulators in an array once let gcc copy them with one zmm move, and the
 * whole process ran 13% slower (a lower AVX-512 clock licence, presumably).
 * Hence separate fields; objdump -d shows whether any zmm crept in. */
#define HYB_SSE __attribute__((target("sse4.2,pclmul")))
#define HYB_AVX512 __attribute__((target("sse4.2,pclmul,avx512f,avx512vl")))

static inline uint64_t ld64(const unsigned char *p)
{
    uint64_t v;
    memcpy(&v, p, sizeof(v));
    return v;
}

HYB_SSE static inline __m128i ld128(const unsigned char *p)
{
    return _mm_loadu_si128((const __m128i *)(const void *)p);
}

HYB_SSE static inline uint32_t clmul_red(uint32_t a, uint32_t b)
{
    __m128i prod = _mm_clmulepi64_si128(_mm_cvtsi32_si128((int)a), _mm_cvtsi32_si128((int)b), 0);
    return (uint32_t)_mm_crc32_u64(0, (uint64_t)_mm_cvtsi128_si64(prod));
}

/* x^(8d - 33) mod P for 1 <= d < 2^UW__CRC32C_XPOW_BITS. It depends on the
 * length only, so it overlaps the main loop instead of following it. */
HYB_SSE static uint32_t xpow8(size_t d)
{
    uint32_t k = uw__crc32c_xpow_k[__builtin_ctzll(d)];
    for (d &= d - 1; d; d &= d - 1)
        k = clmul_red(k, uw__crc32c_xpow_k[__builtin_ctzll(d)]);
    return k;
}

/* Constants for folding forward by 16 * (i + 1) octets. */
HYB_SSE static inline __m128i fold_k(int i)
{
    return _mm_set_epi64x((long long)uw__crc32c_fold_k[2 * i + 1],
                          (long long)uw__crc32c_fold_k[2 * i]);
}

/* The low qword holds the higher powers (H), and pairs with k's low qword. */
HYB_SSE static inline __m128i fold(__m128i a, __m128i k)
{
    return _mm_xor_si128(_mm_clmulepi64_si128(a, k, 0x00), _mm_clmulepi64_si128(a, k, 0x11));
}

/* The state the step loop carries. */
typedef struct lanes {
    __m128i x0, x1, x2, x3; /* V's accumulators, 16 octets apart */
    uint64_t c0, c1, c2;    /* S0..S2 */
} lanes;

/* A step's scalar half: three words from each stream, which start ls apart. */
HYB_SSE static inline void crc_3x3(lanes *l, const unsigned char *s, size_t ls)
{
    for (int w = 0; w < 24; w += 8) {
        l->c0 = _mm_crc32_u64(l->c0, ld64(s + w));
        l->c1 = _mm_crc32_u64(l->c1, ld64(s + ls + w));
        l->c2 = _mm_crc32_u64(l->c2, ld64(s + 2 * ls + w));
    }
}

HYB_SSE static void steps_sse(lanes *lp, const unsigned char *v, const unsigned char *s, size_t ls,
                              size_t steps)
{
    lanes l = *lp;
    const __m128i k = fold_k(3);
    for (; steps; steps--, v += 64, s += 24) {
        l.x0 = _mm_xor_si128(fold(l.x0, k), ld128(v));
        l.x1 = _mm_xor_si128(fold(l.x1, k), ld128(v + 16));
        l.x2 = _mm_xor_si128(fold(l.x2, k), ld128(v + 32));
        l.x3 = _mm_xor_si128(fold(l.x3, k), ld128(v + 48));
        crc_3x3(&l, s, ls);
    }
    *lp = l;
}

/* The same loop with the two XORs of a fold merged into one three-input
 * vpternlogq. With three-operand forms a step takes 24 uops instead of 36,
 * and fewer vector XORs can land on the port crc32 needs; it measured about
 * 10% faster from 4 KiB up. 128-bit EVEX instructions keep the normal clock. */
HYB_AVX512 static inline __m128i fold_xor3(__m128i a, __m128i k, __m128i d)
{
    return _mm_ternarylogic_epi64(_mm_clmulepi64_si128(a, k, 0x00),
                                  _mm_clmulepi64_si128(a, k, 0x11), d, 0x96);
}

HYB_AVX512 static void steps_avx512(lanes *lp, const unsigned char *v, const unsigned char *s,
                                    size_t ls, size_t steps)
{
    lanes l = *lp;
    const __m128i k = fold_k(3);
    for (; steps; steps--, v += 64, s += 24) {
        l.x0 = fold_xor3(l.x0, k, ld128(v));
        l.x1 = fold_xor3(l.x1, k, ld128(v + 16));
        l.x2 = fold_xor3(l.x2, k, ld128(v + 32));
        l.x3 = fold_xor3(l.x3, k, ld128(v + 48));
        crc_3x3(&l, s, ls);
    }
    *lp = l;
}

/* From this length on, V is made to end on a 16-octet boundary. Loads that
 * straddle cache lines cost little while the data is in L1, but 13% once it
 * streams from L2 (37 against 43 GB/s from 64 KiB to 512 KiB, misaligned by
 * 5 octets). Below 32 KiB the extra shift and chain cost more than they save
 * (aligning always: 18 against 23 GB/s at 1 KiB, 33 against 35 at 4 KiB). */
#define ALIGN_MIN (32 * 1024)

/* crc32 of fewer than 24 octets. */

HYB_SSE __attribute__((always_inline)) static inline uint32_t
hybrid_block(uint32_t crc, const unsigned char *p, size_t len, int avx512)
{
    /* With V ending on a 16-octet boundary the streams, ls apart in whole
     * words, are on 8, since the head takes up the rest. The tail T after V
     * (t < 16) is a separate chain, joined with one more shift. */
    size_t t = len >= ALIGN_MIN ? (size_t)((uintptr_t)(p + len) & 15) : 0;
    len -= t;
    size_t m = len / UW__CRC32C_HYBRID_STEP;
    size_t lv = 64 * m, rest = len - lv;
    size_t ls = rest / 24 * 8; /* >= 24m, as rest >= 72m */
    size_t head = rest - 3 * ls;
    const unsigned char *s = p + head, *v = s + 3 * ls;

    uint32_t kt = t ? xpow8(t) : 0;
    uint32_t k2 = xpow8(lv + t), ks = xpow8(ls);
    uint32_t k1 = clmul_red(ks, k2); /* past S2, V and T */
    uint32_t k0 = clmul_red(ks, k1); /* past S1, S2, V and T */

    /* The first 64 octets of V seed the accumulators, so the loop runs m - 1
     * steps; the streams' share beyond that (3 to 8 words each) follows it,
     * beside V's reduction. */
    lanes l;
    l.c0 = uw__crc32c_sse42(crc, p, head);
    l.c1 = 0;
    l.c2 = 0;
    l.x0 = ld128(v);
    l.x1 = ld128(v + 16);
    l.x2 = ld128(v + 32);
    l.x3 = ld128(v + 48);
    if (avx512)
        steps_avx512(&l, v + 64, s, ls, m - 1);
    else
        steps_sse(&l, v + 64, s, ls, m - 1);
    for (size_t w = 24 * (m - 1); w < ls; w += 8) {
        l.c0 = _mm_crc32_u64(l.c0, ld64(s + w));
        l.c1 = _mm_crc32_u64(l.c1, ld64(s + ls + w));
        l.c2 = _mm_crc32_u64(l.c2, ld64(s + 2 * ls + w));
    }

    __m128i x = _mm_xor_si128(_mm_xor_si128(fold(l.x0, fold_k(2)), fold(l.x1, fold_k(1))),
                              _mm_xor_si128(fold(l.x2, fold_k(0)), l.x3));
    uint64_t cv = _mm_crc32_u64(0, (uint64_t)_mm_cvtsi128_si64(x));
    cv = _mm_crc32_u64(cv, (uint64_t)_mm_extract_epi64(x, 1));
    uint32_t crc_vt = (uint32_t)cv;
    if (t)
        crc_vt = clmul_red(crc_vt, kt) ^ uw__crc32c_sse42(0, v + lv, t);
    return clmul_red((uint32_t)l.c0, k0) ^ clmul_red((uint32_t)l.c1, k1) ^
           clmul_red((uint32_t)l.c2, k2) ^ crc_vt;
}

HYB_SSE __attribute__((noinline)) static uint32_t hybrid_sse(uint32_t crc, const unsigned char *p,
                                                             size_t len)
{
    return hybrid_block(crc, p, len, 0);
}

HYB_AVX512 __attribute__((noinline)) static uint32_t
hybrid_avx512(uint32_t crc, const unsigned char *p, size_t len)
{
    return hybrid_block(crc, p, len, 1);
}

uint32_t uw__crc32c_hybrid(uint32_t crc, const unsigned char *p, size_t len, int avx512)
{
    /* Blocks of at most 1 GiB keep every distance inside the xpow table; the
     * last block stays over 512 MiB, far above the minimum. */
    for (; len > ((size_t)1 << 30); p += (size_t)1 << 29, len -= (size_t)1 << 29)
        crc = avx512 ? hybrid_avx512(crc, p, (size_t)1 << 29) : hybrid_sse(crc, p, (size_t)1 << 29);
    return avx512 ? hybrid_avx512(crc, p, len) : hybrid_sse(crc, p, len);
}
#endif
