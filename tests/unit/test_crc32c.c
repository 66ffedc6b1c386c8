/* CRC32c: published vectors, every implementation against a bitwise reference,
 * chaining, scatter lists, and ISA-L's int length on buffers over 2 GiB. */
#define _DEFAULT_SOURCE /* MAP_ANONYMOUS, MAP_NORESERVE */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <cmocka.h>

#include "testutil.h"
#include "util/crc32c_impl.h"
#include "uwarp/crc32c.h"

#define POLY 0x82F63B78u /* reflected Castagnoli polynomial */

/* Deliberately the slowest, most literal form: one bit per step, no tables. */
static uint32_t ref_update(uint32_t crc, const uint8_t *p, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        crc ^= p[i];
        for (int b = 0; b < 8; b++)
            crc = (crc >> 1) ^ ((crc & 1) ? POLY : 0);
    }
    return crc;
}

/* a * b mod P with reflected operands (bit 31 is x^0). */
static uint32_t gf_mul(uint32_t a, uint32_t b)
{
    uint32_t p = 0;
    for (int i = 0; i < 32; i++) {
        if (a >> (31 - i) & 1)
            p ^= b;
        b = (b >> 1) ^ ((b & 1) ? POLY : 0);
    }
    return p;
}

/* x^e mod P. */
static uint32_t x_pow(uint64_t e)
{
    uint32_t r = 1u << 31, base = 1u << 30; /* x^0, x^1 */
    for (; e; e >>= 1) {
        if (e & 1)
            r = gf_mul(r, base);
        base = gf_mul(base, base);
    }
    return r;
}

/* x^(8n) mod P: what n zero octets do to the register (n < 2^61). */
static uint32_t x_pow_8n(uint64_t n)
{
    return x_pow(8 * n);
}

static void check(uint32_t got, uint32_t want, const char *what, int impl, size_t len, size_t off)
{
    if (got != want)
        fail_msg("%s: impl %s len %zu offset %zu: got 0x%08x, want 0x%08x", what,
                 uw_crc32c_impl_name((uw_crc32c_impl)impl), len, off, got, want);
}

static uint32_t one_shot(int impl, const void *buf, size_t len)
{
    return uw_crc32c_final(uw_crc32c_update_impl((uw_crc32c_impl)impl, uw_crc32c_init(), buf, len));
}

#define FOR_EACH_IMPL(i)                           \
    for (int i = 0; i < UW_CRC32C_IMPL_COUNT; i++) \
        if (uw_crc32c_impl_available((uw_crc32c_impl)i))

static void test_vectors(void **state)
{
    (void)state;
    uint8_t z[32], ff[32], inc[32], dec[32];
    memset(z, 0, sizeof(z));
    memset(ff, 0xFF, sizeof(ff));
    for (int i = 0; i < 32; i++) {
        inc[i] = (uint8_t)i;
        dec[i] = (uint8_t)(31 - i);
    }
    /* "123456789" is the catalogue check value; the 32-octet ones are RFC 3720 B.4. */
    struct {
        const void *buf;
        size_t len;
        uint32_t want;
    } v[] = {{"123456789", 9, 0xE3069283u}, {z, 32, 0x8A9136AAu},   {ff, 32, 0x62A8AB43u},
             {inc, 32, 0x46DD794Eu},        {dec, 32, 0x113FDB5Cu}, {"", 0, 0x00000000u},
             {"a", 1, 0xC1D04330u}};
    for (size_t k = 0; k < sizeof(v) / sizeof(v[0]); k++) {
        check(uw_crc32c_final(ref_update(uw_crc32c_init(), v[k].buf, v[k].len)), v[k].want,
              "reference", 0, v[k].len, 0);
        check(uw_crc32c(v[k].buf, v[k].len), v[k].want, "uw_crc32c", 0, v[k].len, 0);
        FOR_EACH_IMPL(i)
        {
            check(one_shot(i, v[k].buf, v[k].len), v[k].want, "vector", i, v[k].len, 0);
        }
    }
    assert_int_equal(uw_crc32c(NULL, 0), 0);
    assert_int_equal(uw_crc32c_update(0x12345678u, NULL, 0), 0x12345678u);
}

static void test_names(void **state)
{
    (void)state;
    const char *want[] = {"auto", "table",  "sse42",        "sse42-3way",
                          "isal", "hybrid", "hybrid-avx512"};
    assert_int_equal(sizeof(want) / sizeof(want[0]), UW_CRC32C_IMPL_COUNT);
    for (int i = 0; i < UW_CRC32C_IMPL_COUNT; i++)
        assert_string_equal(uw_crc32c_impl_name((uw_crc32c_impl)i), want[i]);
    assert_true(uw_crc32c_impl_available(UW_CRC32C_AUTO));
    assert_true(uw_crc32c_impl_available(UW_CRC32C_TABLE));
    assert_false(uw_crc32c_impl_available(UW_CRC32C_IMPL_COUNT));
    assert_false(uw_crc32c_impl_available((uw_crc32c_impl)-1));
    assert_string_equal(uw_crc32c_impl_name(UW_CRC32C_IMPL_COUNT), "unknown");
#if defined(__x86_64__)
    if (__builtin_cpu_supports("sse4.2")) {
        assert_true(uw_crc32c_impl_available(UW_CRC32C_SSE42));
        assert_true(uw_crc32c_impl_available(UW_CRC32C_SSE42_3WAY));
        if (__builtin_cpu_supports("pclmul")) {
            assert_true(uw_crc32c_impl_available(UW_CRC32C_HYBRID));
            assert_int_equal(uw_crc32c_impl_available(UW_CRC32C_HYBRID_AVX512),
                             __builtin_cpu_supports("avx512f") &&
                                 __builtin_cpu_supports("avx512vl"));
        }
    }
#endif
    for (int i = 0; i < UW_CRC32C_IMPL_COUNT; i++)
        print_message("# %s: %s\n", uw_crc32c_impl_name((uw_crc32c_impl)i),
                      uw_crc32c_impl_available((uw_crc32c_impl)i) ? "available" : "unavailable");
}

/* From a zero register, eight octets with one nonzero reach each slicing
 * table entry directly, so all 2048 are checked, not just likely ones. */
static void test_table_entries(void **state)
{
    (void)state;
    for (size_t pos = 0; pos < 8; pos++) {
        for (unsigned v = 0; v < 256; v++) {
            uint8_t b[8] = {0};
            b[pos] = (uint8_t)v;
            check(uw_crc32c_update_impl(UW_CRC32C_TABLE, 0, b, 8), ref_update(0, b, 8), "entry",
                  UW_CRC32C_TABLE, 8, pos);
            check(uw_crc32c_update_impl(UW_CRC32C_TABLE, 0, b, pos + 1), ref_update(0, b, pos + 1),
                  "tail entry", UW_CRC32C_TABLE, pos + 1, pos);
        }
    }
}

/* Every implementation, every length to past the 3-way short-round sizes, random
 * alignment and random starting register. */
static void test_all_impls_small(void **state)
{
    (void)state;
    tu_rng r;
    tu_rng_init(&r, tu_seed(0xC3C32C));
    enum { MAXLEN = 1100, SLACK = 64 };
    uint8_t *mem = malloc(MAXLEN + SLACK);
    assert_non_null(mem);
    for (size_t len = 0; len <= MAXLEN; len++) {
        for (int trial = 0; trial < 2; trial++) {
            size_t off = (size_t)tu_rng_below(&r, SLACK);
            uint8_t *p = mem + off;
            tu_rng_fill(&r, p, len);
            uint32_t st = trial ? (uint32_t)tu_rng_next(&r) : uw_crc32c_init();
            uint32_t want = ref_update(st, p, len);
            FOR_EACH_IMPL(i)
            {
                check(uw_crc32c_update_impl((uw_crc32c_impl)i, st, p, len), want, "small", i, len,
                      off);
            }
            check(uw_crc32c_update(st, p, len), want, "uw_crc32c_update", 0, len, off);
        }
    }
    free(mem);
}

static void test_all_impls_large(void **state)
{
    (void)state;
    tu_rng r;
    tu_rng_init(&r, tu_seed(0x1A46E));
    enum { MAXLEN = 1 << 20, SLACK = 64 };
    /* Edges of the 3-way rounds (3 x 64, 3 x 256, 3 x 4096 octets) and of
     * auto's hand-over from ISA-L at 64 KiB, plus random sizes. */
    size_t lens[] = {191,    192,    193,         767,         768,           769,   12287,
                     12288,  12289,  12288 + 768, 12288 + 767, 2 * 12288 + 7, 65535, 65536,
                     262143, 262144, 262145,      MAXLEN - 1,  MAXLEN,        0,     0,
                     0,      0};
    size_t nl = sizeof(lens) / sizeof(lens[0]);
    for (size_t k = nl - 4; k < nl; k++)
        lens[k] = 1 + (size_t)tu_rng_below(&r, MAXLEN);
    uint8_t *mem = malloc(MAXLEN + SLACK);
    assert_non_null(mem);
    for (size_t k = 0; k < nl; k++) {
        size_t off = (size_t)tu_rng_below(&r, SLACK + 1);
        size_t len = lens[k] + off > MAXLEN + SLACK ? MAXLEN + SLACK - off : lens[k];
        uint8_t *p = mem + off;
        tu_rng_fill(&r, p, len);
        uint32_t st = (uint32_t)tu_rng_next(&r);
        uint32_t want = ref_update(st, p, len);
        FOR_EACH_IMPL(i)
        {
            check(uw_crc32c_update_impl((uw_crc32c_impl)i, st, p, len), want, "large", i, len, off);
        }
    }
    free(mem);
}

/* Folding any split, through any mix of implementations, equals one pass. */
static void test_incremental(void **state)
{
    (void)state;
    tu_rng r;
    tu_rng_init(&r, tu_seed(0x5917));
    enum { N = 3000 };
    uint8_t *buf = malloc(N);
    assert_non_null(buf);
    tu_rng_fill(&r, buf, N);
    uint32_t want = uw_crc32c_final(ref_update(uw_crc32c_init(), buf, N));
    check(uw_crc32c(buf, N), want, "one-shot", 0, N, 0);
    FOR_EACH_IMPL(i)
    {
        for (size_t k = 0; k <= N; k++) {
            uint32_t s = uw_crc32c_update_impl((uw_crc32c_impl)i, uw_crc32c_init(), buf, k);
            s = uw_crc32c_update_impl((uw_crc32c_impl)i, s, buf + k, N - k);
            check(uw_crc32c_final(s), want, "two pieces", i, N, k);
        }
    }
    for (int trial = 0; trial < 500; trial++) {
        uint32_t s = uw_crc32c_init();
        size_t pos = 0;
        while (pos < N) {
            size_t n = (size_t)tu_rng_below(&r, trial % 2 ? 40 : 1200);
            n = n > N - pos ? N - pos : n;
            int impl;
            do
                impl = (int)tu_rng_below(&r, UW_CRC32C_IMPL_COUNT);
            while (!uw_crc32c_impl_available((uw_crc32c_impl)impl));
            s = uw_crc32c_update_impl((uw_crc32c_impl)impl, s, buf + pos, n);
            pos += n;
        }
        check(uw_crc32c_final(s), want, "random pieces, mixed impls", 0, N, (size_t)trial);
    }
    free(buf);
}

/* Every constant src/util/crc32c_x86.c hard-codes, recomputed bit by bit. */
static void test_hybrid_constants(void **state)
{
    (void)state;
    /* x_pow itself, against the shift register: x^8 per zero octet. */
    uint8_t z[7] = {0};
    assert_int_equal(ref_update(0x80000000u, z, sizeof(z)), gf_mul(0x80000000u, x_pow(56)));
    for (int i = 0; i < 4; i++) {
        uint64_t d = 128 * (uint64_t)(i + 1); /* fold distance in bits */
        assert_int_equal(uw__crc32c_fold_k[2 * i], x_pow(d + 31));
        assert_int_equal(uw__crc32c_fold_k[2 * i + 1], x_pow(d - 33));
    }
    /* Entry i is x^(2^(i+3) - 33); negative for i < 3, so check entry * x^33
     * against x^(2^(i+3)), built by squaring (i + 3) times. */
    uint32_t x2k = 1u << 30; /* x^1 */
    for (int i = 0; i < 3; i++)
        x2k = gf_mul(x2k, x2k);
    for (int i = 0; i < UW__CRC32C_XPOW_BITS; i++) {
        if (gf_mul(uw__crc32c_xpow_k[i], x_pow(33)) != x2k)
            fail_msg("xpow entry %d: 0x%08x * x^33 is not x^(2^%d)", i, uw__crc32c_xpow_k[i],
                     i + 3);
        if (i >= 3)
            assert_int_equal(uw__crc32c_xpow_k[i], x_pow(((uint64_t)8 << i) - 33));
        x2k = gf_mul(x2k, x2k);
    }
}

/* Every length to 2048 at every misalignment 0..15: the hybrid's regions
 * (head, three crc32 streams, the folded part) move with both, as do its
 * hand-over to the three-way loop below 320 octets and auto's from ISA-L at
 * 1 KiB. The reference grows a prefix at a time, so it costs one bitwise
 * pass per misalignment. */
static void test_every_length_and_alignment(void **state)
{
    (void)state;
    tu_rng r;
    tu_rng_init(&r, tu_seed(0xA119));
    enum { MAXLEN = 2048, ALIGN = 16 };
    uint8_t *mem = aligned_alloc(64, MAXLEN + 64); /* a multiple of 64, as C11 asks */
    uint32_t *want = malloc((MAXLEN + 1) * sizeof(*want));
    assert_non_null(mem);
    assert_non_null(want);
    for (size_t off = 0; off < ALIGN; off++) {
        uint8_t *p = mem + off;
        tu_rng_fill(&r, p, MAXLEN);
        uint32_t st = (uint32_t)tu_rng_next(&r);
        want[0] = st;
        for (size_t len = 0; len < MAXLEN; len++)
            want[len + 1] = ref_update(want[len], p + len, 1);
        for (size_t len = 0; len <= MAXLEN; len++) {
            FOR_EACH_IMPL(i)
            {
                check(uw_crc32c_update_impl((uw_crc32c_impl)i, st, p, len), want[len], "length", i,
                      len, off);
            }
        }
    }
    free(want);
    free(mem);
}

/* Large lengths at every misalignment (from 32 KiB the hybrid splits off a
 * tail to align its folded part to the buffer's end), every implementation
 * in one piece and uw_crc32c_update() over random split points. */
static void test_large_every_alignment(void **state)
{
    (void)state;
    tu_rng r;
    tu_rng_init(&r, tu_seed(0xB16A1));
    const size_t lens[] = {4095, 4096, 16383, 16384, 16385, 32767, 32768, 65536, (1u << 20) + 7};
    enum { MAXLEN = (1 << 20) + 7, ALIGN = 16 };
    uint8_t *mem = aligned_alloc(64, (MAXLEN + 63) / 64 * 64 + 64);
    assert_non_null(mem);
    for (size_t k = 0; k < sizeof(lens) / sizeof(lens[0]); k++) {
        size_t len = lens[k];
        for (size_t off = 0; off < ALIGN; off++) {
            uint8_t *p = mem + off;
            tu_rng_fill(&r, p, len);
            uint32_t st = (uint32_t)tu_rng_next(&r);
            uint32_t want = ref_update(st, p, len);
            FOR_EACH_IMPL(i)
            {
                check(uw_crc32c_update_impl((uw_crc32c_impl)i, st, p, len), want, "large", i, len,
                      off);
            }
            /* Pieces from a few octets to most of the buffer, so auto's
             * choice changes from piece to piece. */
            uint32_t s = st;
            for (size_t pos = 0, n; pos < len; pos += n) {
                uint64_t scale = (uint64_t)1 << tu_rng_below(&r, 18);
                n = 1 + (size_t)tu_rng_below(&r, scale);
                n = n > len - pos ? len - pos : n;
                s = uw_crc32c_update(s, p + pos, n);
            }
            check(s, want, "large split", 0, len, off);
        }
    }
    free(mem);
}

static void test_iov(void **state)
{
    (void)state;
    tu_rng r;
    tu_rng_init(&r, tu_seed(0x10F));
    enum { N = 5000, MAXIOV = 16 };
    uint8_t *buf = malloc(N);
    assert_non_null(buf);
    tu_rng_fill(&r, buf, N);
    assert_int_equal(uw_crc32c_update_iov(0xDEADBEEFu, NULL, 0), 0xDEADBEEFu);
    for (int trial = 0; trial < 300; trial++) {
        struct iovec iov[MAXIOV];
        size_t cnt = (size_t)tu_rng_below(&r, MAXIOV + 1), pos = 0;
        for (size_t i = 0; i < cnt; i++) {
            size_t n = (size_t)tu_rng_below(&r, 4) == 0 ? 0 : (size_t)tu_rng_below(&r, 700);
            n = n > N - pos ? N - pos : n;
            /* an empty entry may have no buffer at all */
            iov[i].iov_base = n ? buf + pos : (trial % 2 ? NULL : buf);
            iov[i].iov_len = n;
            pos += n;
        }
        uint32_t st = (uint32_t)tu_rng_next(&r);
        check(uw_crc32c_update_iov(st, iov, cnt), ref_update(st, buf, pos), "iov", 0, pos,
              (size_t)trial);
    }
    free(buf);
}

/* ISA-L returns the raw register and takes it back as its init, so pieces
 * chain; its length is an int, so a buffer past INT_MAX must be split. Zero
 * pages make a 2 GiB+ buffer cheap, and x^(8n) mod P gives the answer
 * independently of any CRC loop. */
static void test_isal_chaining_and_huge(void **state)
{
    (void)state;
    if (!uw_crc32c_impl_available(UW_CRC32C_ISAL)) {
        print_message("# ISA-L not built in: chaining checked through auto only\n");
    }
    tu_rng r;
    tu_rng_init(&r, tu_seed(0x15A1));
    enum { N = 70000 };
    uint8_t *buf = malloc(N);
    assert_non_null(buf);
    tu_rng_fill(&r, buf, N);
    uint32_t want = uw_crc32c_final(ref_update(uw_crc32c_init(), buf, N));
    int impl = uw_crc32c_impl_available(UW_CRC32C_ISAL) ? UW_CRC32C_ISAL : UW_CRC32C_AUTO;
    for (int trial = 0; trial < 200; trial++) {
        uint32_t s = uw_crc32c_init();
        for (size_t pos = 0, n; pos < N; pos += n) {
            n = 1 + (size_t)tu_rng_below(&r, trial < 100 ? 300 : 20000);
            n = n > N - pos ? N - pos : n;
            s = uw_crc32c_update_impl((uw_crc32c_impl)impl, s, buf + pos, n);
        }
        check(uw_crc32c_final(s), want, "chained", impl, N, (size_t)trial);
    }
    free(buf);

    /* Self-check of the zero-run formula against the bitwise reference. */
    uint8_t z[100] = {0};
    assert_int_equal(ref_update(0x89ABCDEFu, z, sizeof(z)), gf_mul(0x89ABCDEFu, x_pow_8n(100)));

    size_t huge = ((size_t)1 << 31) + 4099; /* past INT_MAX, odd tail */
    void *m = mmap(NULL, huge, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED) {
        print_message("# cannot map %zu octets: huge-buffer check skipped\n", huge);
        return;
    }
    uint32_t st = 0x2468ACE1u, zwant = gf_mul(st, x_pow_8n(huge));
    const int big[] = {UW_CRC32C_AUTO, UW_CRC32C_ISAL, UW_CRC32C_SSE42_3WAY, UW_CRC32C_HYBRID,
                       UW_CRC32C_HYBRID_AVX512};
    for (size_t k = 0; k < sizeof(big) / sizeof(big[0]); k++) {
        if (uw_crc32c_impl_available((uw_crc32c_impl)big[k]))
            check(uw_crc32c_update_impl((uw_crc32c_impl)big[k], st, m, huge), zwant, "huge zeros",
                  big[k], huge, 0);
    }
    munmap(m, huge);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_vectors),
        cmocka_unit_test(test_names),
        cmocka_unit_test(test_table_entries),
        cmocka_unit_test(test_all_impls_small),
        cmocka_unit_test(test_all_impls_large),
        cmocka_unit_test(test_incremental),
        cmocka_unit_test(test_hybrid_constants),
        cmocka_unit_test(test_every_length_and_alignment),
        cmocka_unit_test(test_large_every_alignment),
        cmocka_unit_test(test_iov),
        cmocka_unit_test(test_isal_chaining_and_huge),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
