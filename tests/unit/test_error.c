/* Error codes: every code of the table has its own sentence and name, and a
 * raw negative errno value outside the table (what a failed socket() or
 * bind() passes on) gets the C library's message instead of "unknown
 * error", from any thread at once. */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "uwarp/error.h"

static void test_table_codes(void **st)
{
    (void)st;
    assert_string_equal(uw_strerror(0), "success");
    assert_string_equal(uw_strerror(UW_EMPA_CRC), "MPA CRC32c mismatch (RFC 5044 error 2)");
    /* The table's wording wins over the C library's for the codes it has. */
    assert_string_equal(uw_strerror(UW_EAGAIN), "more input is needed");
    assert_string_equal(uw_err_name(UW_EMPA_CRC), "EMPA_CRC");
    assert_string_equal(uw_err_name(-EMFILE), "UNKNOWN");
}

static void test_raw_errno(void **st)
{
    (void)st;
    /* The test is single-threaded here, so strerror() is a fair reference. */
    const int codes[] = {EMFILE, EACCES, EADDRNOTAVAIL, ENFILE, ENETUNREACH};
    for (size_t i = 0; i < sizeof(codes) / sizeof(codes[0]); i++) {
        char want[256];
        strncpy(want, strerror(codes[i]), sizeof(want) - 1);
        want[sizeof(want) - 1] = '\0';
        const char *got = uw_strerror(-codes[i]);
        assert_string_not_equal(got, "unknown error");
        assert_string_equal(got, want);
    }
}

static void test_unknown(void **st)
{
    (void)st;
    assert_string_equal(uw_strerror(-3999), "unknown error");  /* no such errno */
    assert_string_equal(uw_strerror(-4999), "unknown error");  /* uwarp range, unused */
    assert_string_equal(uw_strerror(EMFILE), "unknown error"); /* positive: not ours */
    assert_string_equal(uw_strerror(-2147483647 - 1), "unknown error");
}

#define ROUNDS 20000
static void *hammer(void *arg)
{
    int err = *(const int *)arg;
    const char *first = uw_strerror(err);
    for (int i = 0; i < ROUNDS; i++)
        if (strcmp(uw_strerror(err), first) != 0)
            return (void *)1;
    return NULL;
}

/* Messages taken in one thread stay intact while others ask for theirs. */
static void test_threads(void **st)
{
    (void)st;
    static const int errs[] = {-EMFILE, -EACCES, -EADDRNOTAVAIL, -ENOTSOCK};
    char want[256];
    strncpy(want, uw_strerror(-EMFILE), sizeof(want) - 1);
    want[sizeof(want) - 1] = '\0';
    const char *mine = uw_strerror(-EMFILE);
    pthread_t t[4];
    for (int i = 0; i < 4; i++)
        assert_int_equal(pthread_create(&t[i], NULL, hammer, (void *)&errs[i]), 0);
    for (int i = 0; i < 4; i++) {
        void *r = NULL;
        assert_int_equal(pthread_join(t[i], &r), 0);
        assert_null(r);
    }
    assert_string_equal(mine, want);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table_codes),
        cmocka_unit_test(test_raw_errno),
        cmocka_unit_test(test_unknown),
        cmocka_unit_test(test_threads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
