/* The Terminate table (src/util/term_table.c): MPA error codes and the
 * Terminates of the same errors agree, every error's Terminate is a code
 * the RFCs define, and the codes and texts are RFC 5040/5041/5044's. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "util/term_table.h"
#include "uwarp/error.h"

static const int every_err[] = {
#define UW__ERR_VALUE(name, value, msg) value,
    UW_ERRNO_MAP(UW__ERR_VALUE)
#undef UW__ERR_VALUE
};

static void test_mpa_and_terminate_agree(void **st)
{
    (void)st;
    int with_mpa = 0;
    for (size_t i = 0; i < sizeof(every_err) / sizeof(every_err[0]); i++) {
        int e = every_err[i];
        for (int tagged = 0; tagged < 2; tagged++) {
            uw_term t = uw__term_for_error(e, tagged);
            assert_true(uw__term_valid(t));
            assert_string_not_equal(uw_term_describe(t), "undefined Terminate code");
            /* An error with an MPA code is reported as that code, in the
             * LLP layer; one without is not an LLP error. */
            int code = uw_mpa_error_code(e);
            if (code) {
                assert_int_equal(t.layer, UW_TERM_LLP);
                assert_int_equal(t.etype, 0);
                assert_int_equal(t.ecode, code);
            } else {
                assert_int_not_equal(t.layer, UW_TERM_LLP);
            }
        }
        with_mpa += uw_mpa_error_code(e) != 0;
    }
    assert_true(with_mpa >= 15);
    /* The disagreement this table settled: an FPDU too long to validate is
     * an invalid FPDU, MPA error 2, in both places. */
    assert_int_equal(uw_mpa_error_code(UW_EMPA_ULPDU_TOO_LONG), UW_MPA_ERR_CRC);
    assert_int_equal(uw__term_for_error(UW_EMPA_ULPDU_TOO_LONG, false).ecode, UW_MPA_ERR_CRC);
    assert_string_equal(uw_mpa_error_name(UW_EMPA_ULPDU_TOO_LONG), "ulpdu_too_long");
    assert_int_equal(uw_mpa_error_code(UW_EAGAIN), 0);
    assert_string_equal(uw_mpa_error_name(UW_EAGAIN), "error");
}

static void test_rfc_codes(void **st)
{
    (void)st;
    /* RFC 5041 7.2: a version error per buffer model. */
    uw_term t = uw__term_for_error(UW_EDDP_VERSION, true);
    assert_int_equal(t.layer, UW_TERM_DDP);
    assert_int_equal(t.etype, 1);
    assert_int_equal(t.ecode, 4);
    t = uw__term_for_error(UW_EDDP_VERSION, false);
    assert_int_equal(t.etype, 2);
    assert_int_equal(t.ecode, 6);
    /* RFC 5040 7.4 codes, by value. */
    t = uw__term_for_error(UW_ERDMAP_INVALIDATE, true);
    assert_int_equal(t.layer, UW_TERM_RDMAP);
    assert_int_equal(t.etype, 1);
    assert_int_equal(t.ecode, 9);
    assert_string_equal(uw_term_describe(t), "RDMAP: STag cannot be invalidated");
    t = uw__term_for_error(UW_ERDMAP_IRD, false);
    assert_int_equal(t.etype, 2);
    assert_int_equal(t.ecode, 7);
    /* Unknown errors: remote operation, unspecified. */
    t = uw__term_for_error(UW_EAGAIN, false);
    assert_int_equal(t.layer, UW_TERM_RDMAP);
    assert_int_equal(t.etype, 2);
    assert_int_equal(t.ecode, 0xFF);
    /* Codes the RFCs leave undefined. */
    uw_term bad[] = {
        {UW_TERM_RDMAP, 1, 5}, {UW_TERM_RDMAP, 2, 4}, {UW_TERM_DDP, 2, 0}, {UW_TERM_DDP, 1, 5},
        {UW_TERM_LLP, 0, 0},   {UW_TERM_LLP, 0, 8},   {UW_TERM_LLP, 1, 1}, {3, 0, 0}};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_false(uw__term_valid(bad[i]));
        assert_string_equal(uw_term_describe(bad[i]), "undefined Terminate code");
    }
    uw_term llp4 = {UW_TERM_LLP, 0, 4};
    assert_string_equal(uw_term_describe(llp4), "MPA: invalid Request or Reply frame");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mpa_and_terminate_agree),
        cmocka_unit_test(test_rfc_codes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
