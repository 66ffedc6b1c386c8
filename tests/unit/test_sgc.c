/* The scatter/gather cursor (src/rdmap/sgc.h) at its edges: empty entries
 * anywhere, offsets exactly on entry boundaries, slices across several
 * entries, lengths and offsets past the list, and a property check that any
 * split of any list yields exactly the octets a flat copy would. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "rdmap/sgc.h"
#include "testutil.h"

static uint8_t mem[256];

static uw_sge at(uint32_t off, uint32_t len)
{
    return (uw_sge){.addr = (uint64_t)(uintptr_t)(mem + off), .length = len, .lkey = 1};
}

static uint8_t *ptr(const struct iovec *v)
{
    return v->iov_base;
}

static void test_empty_list(void **st)
{
    (void)st;
    uw__sgc c;
    struct iovec v[4];
    uw__sgc_init(&c, NULL, 0, 0);
    assert_int_equal(uw__sgc_slice(&c, 10, v, 4), 0);
    assert_int_equal(c.pos, 0);
    /* Only empty entries: the same as no list. */
    uw_sge z[3] = {at(0, 0), at(5, 0), at(9, 0)};
    uw__sgc_init(&c, z, 3, 0);
    assert_int_equal(c.i, 3);
    assert_int_equal(uw__sgc_slice(&c, 10, v, 4), 0);
    assert_int_equal(uw__sgc_advance(&c, 7), 0);
    assert_int_equal(c.pos, 0);
}

static void test_zero_length_entries(void **st)
{
    (void)st;
    /* Empty entries first, between and last. */
    uw_sge s[6] = {at(0, 0), at(10, 4), at(50, 0), at(60, 0), at(100, 3), at(200, 0)};
    uw__sgc c;
    struct iovec v[6];
    uw__sgc_init(&c, s, 6, 0);
    assert_int_equal(c.i, 1);
    assert_int_equal(uw__sgc_slice(&c, 7, v, 6), 2);
    assert_ptr_equal(ptr(&v[0]), mem + 10);
    assert_int_equal(v[0].iov_len, 4);
    assert_ptr_equal(ptr(&v[1]), mem + 100);
    assert_int_equal(v[1].iov_len, 3);
    assert_int_equal(c.pos, 7);
    assert_int_equal(c.i, 6); /* the trailing empty entry is passed too */
}

static void test_boundaries(void **st)
{
    (void)st;
    uw_sge s[3] = {at(0, 4), at(20, 4), at(40, 4)};
    uw__sgc c;
    struct iovec v[3];
    /* Starting exactly on a boundary: the piece starts at the next entry. */
    uw__sgc_init(&c, s, 3, 4);
    assert_int_equal(c.i, 1);
    assert_int_equal(c.off, 0);
    assert_int_equal(uw__sgc_slice(&c, 4, v, 3), 1);
    assert_ptr_equal(ptr(&v[0]), mem + 20);
    assert_int_equal(v[0].iov_len, 4);
    /* Ending exactly on one leaves the cursor at the next entry's start. */
    assert_int_equal(c.i, 2);
    assert_int_equal(c.off, 0);
    assert_int_equal(c.pos, 8);
    /* At the very end: nothing more, and the position stays. */
    uw__sgc_init(&c, s, 3, 12);
    assert_int_equal(c.i, 3);
    assert_int_equal(c.pos, 12);
    assert_int_equal(uw__sgc_slice(&c, 1, v, 3), 0);
}

static void test_spanning_slices(void **st)
{
    (void)st;
    uw_sge s[4] = {at(0, 5), at(10, 5), at(20, 5), at(30, 5)};
    uw__sgc c;
    struct iovec v[4];
    uw__sgc_init(&c, s, 4, 3);
    assert_int_equal(uw__sgc_slice(&c, 13, v, 4), 4);
    assert_ptr_equal(ptr(&v[0]), mem + 3);
    assert_int_equal(v[0].iov_len, 2);
    assert_int_equal(v[1].iov_len, 5);
    assert_int_equal(v[2].iov_len, 5);
    assert_ptr_equal(ptr(&v[3]), mem + 30);
    assert_int_equal(v[3].iov_len, 1);
    assert_int_equal(c.pos, 16);
    /* Out of iovecs: the cursor covers only what was handed out. */
    uw__sgc_init(&c, s, 4, 3);
    assert_int_equal(uw__sgc_slice(&c, 13, v, 2), 2);
    assert_int_equal(c.pos, 10);
    assert_int_equal(uw__sgc_slice(&c, 6, v, 2), 2);
    assert_ptr_equal(ptr(&v[0]), mem + 20);
    assert_int_equal(v[1].iov_len, 1);
    assert_int_equal(c.pos, 16);
}

static void test_beyond_the_list(void **st)
{
    (void)st;
    uw_sge s[2] = {at(0, 5), at(10, 5)};
    uw__sgc c;
    struct iovec v[4];
    uw__sgc_init(&c, s, 2, 7);
    assert_int_equal(uw__sgc_slice(&c, 100, v, 4), 1);
    assert_int_equal(v[0].iov_len, 3);
    assert_int_equal(c.pos, 10);
    assert_int_equal(uw__sgc_advance(&c, 5), 0);
    /* An offset past the end clamps to the end. */
    uw__sgc_init(&c, s, 2, 1000);
    assert_int_equal(c.pos, 10);
    assert_int_equal(c.i, 2);
    /* take() with max 0 hands out nothing, even mid-entry. */
    uint8_t *p = NULL;
    uw__sgc_init(&c, s, 2, 1);
    assert_int_equal(uw__sgc_take(&c, 0, &p), 0);
    assert_int_equal(c.pos, 1);
}

/* Any list (empty entries included), any start, any split into advance,
 * take and slice steps: the octets reached are those of the flat list. */
static void test_property(void **st)
{
    (void)st;
    tu_rng r;
    tu_rng_init(&r, 0x5c5c);
    for (int iter = 0; iter < 20000; iter++) {
        uw_sge s[UW_MAX_SGE];
        uint32_t flat[sizeof(mem)], total = 0, addr = 0;
        int n = (int)tu_rng_below(&r, UW_MAX_SGE + 1);
        for (int i = 0; i < n; i++) {
            uint32_t len = tu_rng_below(&r, 4) == 0 ? 0 : tu_rng_below(&r, 24);
            addr += tu_rng_below(&r, 4);
            s[i] = at(addr, len);
            for (uint32_t k = 0; k < len; k++)
                flat[total++] = addr + k;
            addr += len;
        }
        uint32_t pos = tu_rng_below(&r, total + 3);
        uw__sgc c;
        uw__sgc_init(&c, s, n, pos);
        uint32_t want = pos < total ? pos : total;
        assert_int_equal(c.pos, want);
        while (c.pos < total) {
            uint32_t step = tu_rng_below(&r, 40);
            uint32_t before = c.pos;
            switch (tu_rng_below(&r, 3)) {
            case 0:
                uw__sgc_advance(&c, step);
                break;
            case 1: {
                uint8_t *p;
                uint32_t t = uw__sgc_take(&c, step, &p);
                for (uint32_t k = 0; k < t; k++)
                    assert_ptr_equal(p + k, mem + flat[before + k]);
                break;
            }
            default: {
                struct iovec v[UW_MAX_SGE];
                int cap = 1 + (int)tu_rng_below(&r, UW_MAX_SGE);
                int k = uw__sgc_slice(&c, step, v, cap);
                uint32_t o = before;
                for (int i = 0; i < k; i++) {
                    assert_true(v[i].iov_len > 0);
                    for (size_t b = 0; b < v[i].iov_len; b++)
                        assert_ptr_equal(ptr(&v[i]) + b, mem + flat[o++]);
                }
                assert_int_equal(o, c.pos);
                if (k < cap) /* not cut short by cap: all of step, or the end */
                    assert_int_equal(c.pos, before + step < total ? before + step : total);
                break;
            }
            }
            assert_true(c.pos >= before && c.pos <= total);
            /* The invariant: never at the end of an entry, never on an empty one. */
            assert_true(c.i == c.n || c.off < c.sge[c.i].length);
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_empty_list),      cmocka_unit_test(test_zero_length_entries),
        cmocka_unit_test(test_boundaries),      cmocka_unit_test(test_spanning_slices),
        cmocka_unit_test(test_beyond_the_list), cmocka_unit_test(test_property),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
