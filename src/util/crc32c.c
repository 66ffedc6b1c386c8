/* CRC32c (Castagnoli): portable slicing-by-8, SSE4.2 crc32 loops, Intel ISA-L,
 * and the choice among them and the PCLMULQDQ hybrid of crc32c_x86.c.
 *
 * The tables are const data built by the compiler, and the implementation
 * choice is re-made on every call (a load of the CPU feature bits and a test).
 * The bits are computed on the first call, not by a constructor (cpu_has()),
 * and computing them twice in a race is harmless, so there is no
 * initialisation order or thread-safety to get wrong.
 */
#include "uwarp/crc32c.h"

#include <string.h>

#include "util/crc32c_impl.h"

#ifdef UW_CRC_X86
#include <cpuid.h>
#include <nmmintrin.h>
#include <stdatomic.h>
#endif
#ifdef UW_HAVE_ISAL
#include <isa-l/crc.h>
#endif

/* What auto picks, as measured on the Cascade Lake class Xeon this was tuned
 * on (2 vCPUs, 2.5 GHz nominal and about 3.1 GHz by crc32 latency; AVX-512
 * and PCLMULQDQ but no VPCLMULQDQ; ISA-L 2.30; gcc 12 -O3; cache-hot
 * buffers; best of many short batches, as another job shared the machine):
 *   - Below 128 octets one crc32 chain. ISA-L costs a flat ~8.5 ns up to ~150
 *     octets, which one chain (3 cycles per 8 octets) beats below ~80.
 *   - From 1 KiB the hybrid (crc32c_x86.c), with vpternlogq where AVX-512 is
 *     there: 29 against ISA-L's 23 GB/s at 1.5 and 2 KiB, 35 against 24 at
 *     4 KiB, 42-43 against 23-24 from 16 KiB to 512 KiB, 40 at 1 MiB (the
 *     three-way loop 23.5). Without AVX-512 it does 32 at 4 KiB and 37-40
 *     above. From 640 octets to 1 KiB the two are level within the noise
 *     (22 GB/s at 1 KiB through auto; the hybrid called directly does 23).
 *   - In between ISA-L. Without ISA-L, the three-way loop from 192 and the
 *     hybrid from HYBRID_MIN (320) octets.
 * From DRAM (512 MiB taken in 4 KiB, 64 KiB and 1 MiB pieces) all are bound
 * by memory: the hybrid 7-8, 10.5-11 and 11 GB/s, the three-way loop 7.5-8.5,
 * 10.5 and 10, ISA-L 5-6, 7-8 and 7.
 * Three crc32 streams and ISA-L share a ~23 GB/s ceiling here (one crc32 a
 * cycle; ISA-L's 128-bit folding does no better), and ISA-L halves once a hot
 * buffer outgrows L2 (11 against 23 GB/s at 1 MiB), so from AUTO_ISAL_MAX the
 * three-way loop takes over from ISA-L. Those two rules remain where auto
 * leaves the hybrid out: without PCLMULQDQ, and on CPUs with VPCLMULQDQ when
 * ISA-L is built in, as ISA-L then folds 512 bits at a time and may well be
 * faster. That case is not measured: no such CPU was at hand. */
#define AUTO_ISAL_MIN 128
#define AUTO_ISAL_MAX (64 * 1024)
#define AUTO_HYBRID_MIN_ISAL 1024

/* The slicing tables are linear in the octet: T_t[n] is the XOR of the images
 * of n's set bits, and the image of bit i is x^(39 - i + 8t) mod P (reflected).
 * C has no constexpr, and expanding a bit-at-a-time macro 64 deep grows the
 * preprocessor output as 2^64, so the 64 single-bit images are written out
 * (tests/unit/test_crc32c.c checks every table against a bitwise CRC) and the
 * 2048 entries are XOR combinations of them, folded by the compiler. */
/* clang-format off */
#define CK0 0xF26B8303u, 0xE13B70F7u, 0xC79A971Fu, 0x8AD958CFu, \
            0x105EC76Fu, 0x20BD8EDEu, 0x417B1DBCu, 0x82F63B78u
#define CK1 0x13A29877u, 0x274530EEu, 0x4E8A61DCu, 0x9D14C3B8u, \
            0x3FC5F181u, 0x7F8BE302u, 0xFF17C604u, 0xFBC3FAF9u
#define CK2 0xA541927Eu, 0x4F6F520Du, 0x9EDEA41Au, 0x38513EC5u, \
            0x70A27D8Au, 0xE144FB14u, 0xC76580D9u, 0x8B277743u
#define CK3 0xDD45AAB8u, 0xBF672381u, 0x7B2231F3u, 0xF64463E6u, \
            0xE964B13Du, 0xD725148Bu, 0xABA65FE7u, 0x52A0C93Fu
#define CK4 0x38116FACu, 0x7022DF58u, 0xE045BEB0u, 0xC5670B91u, \
            0x8F2261D3u, 0x1BA8B557u, 0x37516AAEu, 0x6EA2D55Cu
#define CK5 0xEF306B19u, 0xDB8CA0C3u, 0xB2F53777u, 0x6006181Fu, \
            0xC00C303Eu, 0x85F4168Du, 0x0E045BEBu, 0x1C08B7D6u
#define CK6 0x68032CC8u, 0xD0065990u, 0xA5E0C5D1u, 0x4E2DFD53u, \
            0x9C5BFAA6u, 0x3D5B83BDu, 0x7AB7077Au, 0xF56E0EF4u
#define CK7 0x493C7D27u, 0x9278FA4Eu, 0x211D826Du, 0x423B04DAu, \
            0x847609B4u, 0x0D006599u, 0x1A00CB32u, 0x34019664u
/* clang-format on */

#define ARG0(a, ...) a
#define ARG1(a, b, ...) b
#define ARG2(a, b, c, ...) c
#define ARG3(a, b, c, d, ...) d
#define ARG4(a, b, c, d, e, ...) e
#define ARG5(a, b, c, d, e, f, ...) f
#define ARG6(a, b, c, d, e, f, g, ...) g
#define ARG7(a, b, c, d, e, f, g, h) h
#define APPLY(f, ...) f(__VA_ARGS__)
/* The indirection lets CKt expand into its eight values before ARGi sees them. */
#define PICK(i, list) APPLY(ARG##i, list)

#define SB(t, n, i) ((((n) >> (i)) & 1) ? PICK(i, CK##t) : 0u)
#define SLICE(t, n)                                                                      \
    (SB(t, n, 0) ^ SB(t, n, 1) ^ SB(t, n, 2) ^ SB(t, n, 3) ^ SB(t, n, 4) ^ SB(t, n, 5) ^ \
     SB(t, n, 6) ^ SB(t, n, 7))

#define R1(F, a, n) F(a, n)
#define R2(F, a, n) R1(F, a, n), R1(F, a, (n) + 1)
#define R4(F, a, n) R2(F, a, n), R2(F, a, (n) + 2)
#define R8(F, a, n) R4(F, a, n), R4(F, a, (n) + 4)
#define R16(F, a, n) R8(F, a, n), R8(F, a, (n) + 8)
#define R32(F, a, n) R16(F, a, n), R16(F, a, (n) + 16)
#define R64(F, a, n) R32(F, a, n), R32(F, a, (n) + 32)
#define R128(F, a, n) R64(F, a, n), R64(F, a, (n) + 64)
#define R256(F, a, n) R128(F, a, n), R128(F, a, (n) + 128)

/* slice8[t][n]: the register after octet n followed by t zero octets. */
static const uint32_t slice8[8][256] = {
    {R256(SLICE, 0, 0)}, {R256(SLICE, 1, 0)}, {R256(SLICE, 2, 0)}, {R256(SLICE, 3, 0)},
    {R256(SLICE, 4, 0)}, {R256(SLICE, 5, 0)}, {R256(SLICE, 6, 0)}, {R256(SLICE, 7, 0)},
};

static uint64_t le64(const unsigned char *p)
{
    /* Byte assembly rather than memcpy keeps the table path endian-neutral;
     * compilers turn it into one load on little-endian targets. */
    return (uint64_t)p[0] | (uint64_t)p[1] << 8 | (uint64_t)p[2] << 16 | (uint64_t)p[3] << 24 |
           (uint64_t)p[4] << 32 | (uint64_t)p[5] << 40 | (uint64_t)p[6] << 48 |
           (uint64_t)p[7] << 56;
}

static uint32_t crc_table(uint32_t crc, const unsigned char *p, size_t len)
{
    for (; len >= 8; p += 8, len -= 8) {
        uint64_t w = le64(p) ^ crc;
        crc = slice8[7][w & 0xff] ^ slice8[6][(w >> 8) & 0xff] ^ slice8[5][(w >> 16) & 0xff] ^
              slice8[4][(w >> 24) & 0xff] ^ slice8[3][(w >> 32) & 0xff] ^
              slice8[2][(w >> 40) & 0xff] ^ slice8[1][(w >> 48) & 0xff] ^ slice8[0][w >> 56];
    }
    while (len--)
        crc = (crc >> 8) ^ slice8[0][(crc ^ *p++) & 0xff];
    return crc;
}

#ifdef UW_CRC_X86
/* Joining streams needs c * x^(8d) mod P for a shift of d octets. The integer
 * carry-less product of two reflected 32-bit values is their polynomial
 * product times 1/x when read as 64 bits of crc32 input, and crc32 of 64 bits
 * from zero multiplies by x^32 and reduces. So with K = x^(8d - 33) mod P,
 * crc32_u64(0, clmul(c, K)) is c shifted by d octets. The carry-less product
 * goes a byte of c at a time through a table of clmul(octet, K), which the
 * compiler folds like slice8. (Nibble tables, 16 entries, measured 20-25%
 * slower below 16 KiB.) */
#define CLB(k, b, i) ((((b) >> (i)) & 1) ? (uint64_t)(k) << (i) : 0u)
#define CLMUL8(k, b)                                                                           \
    (CLB(k, b, 0) ^ CLB(k, b, 1) ^ CLB(k, b, 2) ^ CLB(k, b, 3) ^ CLB(k, b, 4) ^ CLB(k, b, 5) ^ \
     CLB(k, b, 6) ^ CLB(k, b, 7))
#define SHIFT_TABLE(d, k) static const uint64_t shift_##d[256] = {R256(CLMUL8, k, 0)}
SHIFT_TABLE(64, 0x9E4ADDF8u);
SHIFT_TABLE(192, 0xAB7AFF2Au);
SHIFT_TABLE(256, 0xB9E02B86u);
SHIFT_TABLE(768, 0xD7A4825Cu);
SHIFT_TABLE(4096, 0x82F89C77u);
SHIFT_TABLE(12288, 0xC1F19EE1u);

static inline uint64_t ld64(const unsigned char *p)
{
    uint64_t v;
    memcpy(&v, p, sizeof(v));
    return v;
}

__attribute__((target("sse4.2"))) uint32_t uw__crc32c_sse42(uint32_t crc, const unsigned char *p,
                                                            size_t len)
{
    uint64_t c = crc;
    for (; len >= 8; p += 8, len -= 8)
        c = _mm_crc32_u64(c, ld64(p));
    crc = (uint32_t)c;
    if (len & 4) {
        uint32_t v;
        memcpy(&v, p, 4);
        crc = _mm_crc32_u32(crc, v);
        p += 4;
    }
    if (len & 2) {
        uint16_t v;
        memcpy(&v, p, 2);
        crc = _mm_crc32_u16(crc, v);
        p += 2;
    }
    if (len & 1)
        crc = _mm_crc32_u8(crc, *p);
    return crc;
}

__attribute__((target("sse4.2"))) static inline uint32_t shift_by(uint32_t c, const uint64_t *tab)
{
    uint64_t prod = (tab[c & 0xff] ^ tab[(c >> 8) & 0xff] << 8) ^
                    (tab[(c >> 16) & 0xff] << 16 ^ tab[c >> 24] << 24);
    return (uint32_t)_mm_crc32_u64(0, prod);
}

/* One crc32 stream is bound by the instruction's 3-cycle latency while the
 * unit accepts one per cycle; three independent streams over consecutive
 * blocks fill the pipeline. All three start from zero and the incoming
 * register is shifted past the whole round separately: by linearity the sum
 * is the same, and the only dependency carried from round to round is then
 * one shift, not a block of crc32s plus two shifts (joining that way, 1 KiB
 * ran at 13.5 GB/s instead of 19). */
__attribute__((target("sse4.2"), always_inline)) static inline uint32_t
rounds_3way(uint32_t crc, const unsigned char **pp, size_t *lenp, size_t blk,
            const uint64_t *shift_blk, const uint64_t *shift_round)
{
    const unsigned char *p = *pp;
    size_t len = *lenp;
    for (; len >= 3 * blk; p += 3 * blk, len -= 3 * blk) {
        uint64_t c0 = 0, c1 = 0, c2 = 0;
        for (size_t i = 0; i < blk; i += 8) {
            c0 = _mm_crc32_u64(c0, ld64(p + i));
            c1 = _mm_crc32_u64(c1, ld64(p + blk + i));
            c2 = _mm_crc32_u64(c2, ld64(p + 2 * blk + i));
        }
        uint32_t data = shift_by((uint32_t)c0, shift_blk) ^ (uint32_t)c1;
        data = shift_by(data, shift_blk) ^ (uint32_t)c2;
        crc = shift_by(crc, shift_round) ^ data;
    }
    *pp = p;
    *lenp = len;
    return crc;
}

/* Long rounds amortise the joins; the shorter ones keep what is left (up to
 * 12 KiB, then 768 octets) off the single-stream loop. */
__attribute__((target("sse4.2"))) static uint32_t crc_3way(uint32_t crc, const unsigned char *p,
                                                           size_t len)
{
    crc = rounds_3way(crc, &p, &len, 4096, shift_4096, shift_12288);
    crc = rounds_3way(crc, &p, &len, 256, shift_256, shift_768);
    crc = rounds_3way(crc, &p, &len, 64, shift_64, shift_192);
    return uw__crc32c_sse42(crc, p, len);
}

/* The CPU's features, asked with CPUID on the first CRC, not at load:
 * __builtin_cpu_supports would link libgcc's __cpu_indicator_init, a
 * constructor that runs a dozen CPUIDs in every process that loads the
 * library, and CPUID traps to the hypervisor in a VM (4-8 us each measured:
 * a preloaded program that never uses SDP paid ~70 us for it). Computing the
 * same bits twice in a race is harmless. */
enum {
    CPU_KNOWN = 1,
    CPU_SSE42 = 2,
    CPU_PCLMUL = 4,
    CPU_AVX512 = 8, /* F and VL, with the OS saving the ZMM and mask state */
    CPU_VPCLMUL = 16,
};
static _Atomic unsigned cpu_bits;

static unsigned cpu_probe(void)
{
    unsigned a, b, c, d, f = CPU_KNOWN;
    if (!__get_cpuid(1, &a, &b, &c, &d))
        return f;
    if (c & bit_SSE4_2)
        f |= CPU_SSE42;
    if (c & bit_PCLMUL)
        f |= CPU_PCLMUL;
    unsigned xcr0 = 0;
    if (c & bit_OSXSAVE) {
        unsigned hi;
        __asm__ volatile("xgetbv" : "=a"(xcr0), "=d"(hi) : "c"(0));
    }
    if (__get_cpuid_max(0, NULL) >= 7) {
        __cpuid_count(7, 0, a, b, c, d);
        if ((b & bit_AVX512F) && (b & bit_AVX512VL) && (xcr0 & 0xE6) == 0xE6)
            f |= CPU_AVX512;
        if ((c & bit_VPCLMULQDQ) && (xcr0 & 0x6) == 0x6)
            f |= CPU_VPCLMUL;
    }
    return f;
}

static inline unsigned cpu_has(unsigned bits)
{
    unsigned f = atomic_load_explicit(&cpu_bits, memory_order_relaxed);
    if (!f) {
        f = cpu_probe();
        atomic_store_explicit(&cpu_bits, f, memory_order_relaxed);
    }
    return (f & bits) == bits;
}

static int have_sse42(void)
{
    return cpu_has(CPU_SSE42);
}

/* What the hybrid can use here: -1 nothing, 0 SSE4.2 and PCLMULQDQ, 1 also
 * AVX-512F and VL, i.e. the avx512 argument of uw__crc32c_hybrid. Inline, as
 * a call to find out measured 3 ns at 1 KiB. */
static inline int hybrid_level(void)
{
    if (!cpu_has(CPU_SSE42 | CPU_PCLMUL))
        return -1;
    return (int)cpu_has(CPU_AVX512);
}

/* Below this the hybrid's length-dependent constants cost more than the
 * second port gains; from here it beats the three-way loop (15 against
 * 12 GB/s at 320 octets). */
#define HYBRID_MIN 320
_Static_assert(HYBRID_MIN >= UW__CRC32C_HYBRID_MIN, "uw__crc32c_hybrid needs longer buffers");

static uint32_t crc_hybrid(uint32_t crc, const unsigned char *p, size_t len, int avx512)
{
    if (len < HYBRID_MIN)
        return len < 3 * 64 ? uw__crc32c_sse42(crc, p, len) : crc_3way(crc, p, len);
    return uw__crc32c_hybrid(crc, p, len, avx512);
}
#else
static int have_sse42(void)
{
    return 0;
}
#endif

#ifdef UW_HAVE_ISAL
#define HAVE_ISAL 1
static uint32_t crc_isal(uint32_t crc, const unsigned char *p, size_t len)
{
    /* crc32_iscsi takes an int length, so longer buffers go in 1 GiB pieces.
     * It wants a non-const buffer but only reads it. */
    while (len > 0) {
        size_t n = len < ((size_t)1 << 30) ? len : (size_t)1 << 30;
        crc = crc32_iscsi((unsigned char *)p, (int)n, crc);
        p += n;
        len -= n;
    }
    return crc;
}
#else
#define HAVE_ISAL 0
#endif

uint32_t uw_crc32c_update(uint32_t state, const void *buf, size_t len)
{
    const unsigned char *p = buf;
#ifdef UW_CRC_X86
    if (len >= (HAVE_ISAL ? AUTO_HYBRID_MIN_ISAL : HYBRID_MIN)) {
        int level = hybrid_level();
        if (level >= 0 && !(HAVE_ISAL && cpu_has(CPU_VPCLMUL)))
            return uw__crc32c_hybrid(state, p, len, level);
    }
#endif
    int sse42 = have_sse42();
#ifdef UW_HAVE_ISAL
    if (len >= AUTO_ISAL_MIN && (len < AUTO_ISAL_MAX || !sse42))
        return crc_isal(state, p, len);
#endif
#ifdef UW_CRC_X86
    /* Below one short three-way round, skip crc_3way's setup (2 ns at 64 B). */
    if (sse42)
        return len < 3 * 64 ? uw__crc32c_sse42(state, p, len) : crc_3way(state, p, len);
#endif
    (void)sse42;
    return crc_table(state, p, len);
}

uint32_t uw_crc32c_update_iov(uint32_t state, const struct iovec *iov, size_t iovcnt)
{
    for (size_t i = 0; i < iovcnt; i++)
        state = uw_crc32c_update(state, iov[i].iov_base, iov[i].iov_len);
    return state;
}

uint32_t uw_crc32c(const void *buf, size_t len)
{
    return uw_crc32c_final(uw_crc32c_update(uw_crc32c_init(), buf, len));
}

int uw_crc32c_impl_available(uw_crc32c_impl impl)
{
    switch (impl) {
    case UW_CRC32C_AUTO:
    case UW_CRC32C_TABLE:
        return 1;
    case UW_CRC32C_SSE42:
    case UW_CRC32C_SSE42_3WAY:
        return have_sse42();
    case UW_CRC32C_ISAL:
        /* ISA-L dispatches internally and has a generic fallback. */
        return HAVE_ISAL;
#ifdef UW_CRC_X86
    case UW_CRC32C_HYBRID:
        return hybrid_level() >= 0;
    case UW_CRC32C_HYBRID_AVX512:
        return hybrid_level() > 0;
#endif
    default:
        return 0;
    }
}

const char *uw_crc32c_impl_name(uw_crc32c_impl impl)
{
    static const char *const names[UW_CRC32C_IMPL_COUNT] = {
        [UW_CRC32C_AUTO] = "auto",
        [UW_CRC32C_TABLE] = "table",
        [UW_CRC32C_SSE42] = "sse42",
        [UW_CRC32C_SSE42_3WAY] = "sse42-3way",
        [UW_CRC32C_ISAL] = "isal",
        [UW_CRC32C_HYBRID] = "hybrid",
        [UW_CRC32C_HYBRID_AVX512] = "hybrid-avx512",
    };
    if ((unsigned)impl >= UW_CRC32C_IMPL_COUNT)
        return "unknown";
    return names[impl];
}

uint32_t uw_crc32c_update_impl(uw_crc32c_impl impl, uint32_t state, const void *buf, size_t len)
{
    const unsigned char *p = buf;
    /* An unavailable impl is a caller bug; answering with a correct CRC from
     * another implementation is kinder than faulting on an illegal opcode. */
    if (!uw_crc32c_impl_available(impl))
        impl = UW_CRC32C_AUTO;
    switch (impl) {
    case UW_CRC32C_TABLE:
        return crc_table(state, p, len);
#ifdef UW_CRC_X86
    case UW_CRC32C_SSE42:
        return uw__crc32c_sse42(state, p, len);
    case UW_CRC32C_SSE42_3WAY:
        return crc_3way(state, p, len);
    case UW_CRC32C_HYBRID:
        return crc_hybrid(state, p, len, 0);
    case UW_CRC32C_HYBRID_AVX512:
        return crc_hybrid(state, p, len, 1);
#endif
#ifdef UW_HAVE_ISAL
    case UW_CRC32C_ISAL:
        return crc_isal(state, p, len);
#endif
    default:
        return uw_crc32c_update(state, p, len);
    }
}
