/* Port mapper codec (draft-pinkerton-iwarp-sdp-01 7.3, Figure 17): byte-exact
 * layouts, every field rule of 7.3.1.x, rejection of malformed datagrams
 * without side effects, random round trips. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "testutil.h"
#include "uwarp/pm.h"

static uw_pm_msg msg4(int type, uint64_t assoc)
{
    uw_pm_msg m;
    memset(&m, 0, sizeof(m));
    m.type = (uint8_t)type;
    m.ipv = 4;
    m.ap_port = 80;
    m.cp_port = 40000;
    m.assoc = assoc;
    const uint8_t cp[4] = {192, 0, 2, 1}, ap[4] = {198, 51, 100, 7};
    memcpy(m.cp_ip, cp, 4);
    memcpy(m.ap_ip, ap, 4);
    return m;
}

static void assert_msg_equal(const uw_pm_msg *a, const uw_pm_msg *b)
{
    assert_int_equal(a->type, b->type);
    assert_int_equal(a->ipv, b->ipv);
    assert_int_equal(a->pmtime, b->pmtime);
    assert_int_equal(a->ap_port, b->ap_port);
    assert_int_equal(a->cp_port, b->cp_port);
    assert_true(a->assoc == b->assoc);
    assert_memory_equal(a->cp_ip, b->cp_ip, 16);
    assert_memory_equal(a->ap_ip, b->ap_ip, 16);
}

/* 7.3: "All Port Mapper messages MUST have the format defined in Figure 17":
 * built by hand from the figure, octet by octet. */
static void test_figure17_layout(void **state)
{
    (void)state;
    uint8_t want[UW_PM_MSG_LEN], got[UW_PM_MSG_LEN + 4];
    /* Ver 0 | MT 1 | IPV 4 = 0x14; PmTime 0x2a; Reserved; ApPort 0x1f90;
     * CpPort 0x9c40; AssocHandle; CpIPAddr 192.0.2.1 + 96 zero bits;
     * ApIPAddr 198.51.100.7 + 96 zero bits. */
    assert_int_equal(tu_unhex("14 2a 0000 1f90 9c40 0102030405060708"
                              "c0000201 000000000000000000000000"
                              "c6336407 000000000000000000000000",
                              want, sizeof(want)),
                     UW_PM_MSG_LEN);
    uw_pm_msg m = msg4(UW_PM_ACCEPT, 0x0102030405060708ull);
    m.pmtime = 0x2a;
    m.ap_port = 8080;
    assert_int_equal(uw_pm_encode(&m, got, sizeof(got)), UW_PM_MSG_LEN);
    assert_memory_equal(got, want, UW_PM_MSG_LEN);
    uw_pm_msg d;
    assert_int_equal(uw_pm_decode(want, sizeof(want), &d), 0);
    assert_msg_equal(&d, &m);

    /* IPv6 PMReq: Ver 0 | MT 0 | IPV 6 = 0x06. */
    assert_int_equal(tu_unhex("06 00 0000 0050 ffff ffffffffffffffff"
                              "20010db8000000000000000000000001"
                              "20010db8000000000000000000000002",
                              want, sizeof(want)),
                     UW_PM_MSG_LEN);
    uw_pm_msg r;
    memset(&r, 0, sizeof(r));
    r.type = UW_PM_REQ;
    r.ipv = 6;
    r.ap_port = 80;
    r.cp_port = 65535;
    r.assoc = UINT64_MAX;
    assert_int_equal(tu_unhex("20010db8000000000000000000000001", r.cp_ip, 16), 16);
    assert_int_equal(tu_unhex("20010db8000000000000000000000002", r.ap_ip, 16), 16);
    assert_int_equal(uw_pm_encode(&r, got, sizeof(got)), UW_PM_MSG_LEN);
    assert_memory_equal(got, want, UW_PM_MSG_LEN);
    assert_int_equal(uw_pm_decode(want, sizeof(want), &d), 0);
    assert_msg_equal(&d, &r);
}

/* 7.3.1.1: "Ver MUST be set to zero": every encoded type has Ver 0, and a
 * datagram with another version is rejected without touching the output. */
static void test_ver_zero(void **state)
{
    (void)state;
    uint8_t b[UW_PM_MSG_LEN];
    for (int t = UW_PM_REQ; t <= UW_PM_DENY; t++) {
        uw_pm_msg m = msg4(t, 7);
        assert_int_equal(uw_pm_encode(&m, b, sizeof(b)), UW_PM_MSG_LEN);
        assert_int_equal(b[0] >> 6, 0);
    }
    for (unsigned v = 1; v < 4; v++) {
        b[0] = (uint8_t)(v << 6 | 0x04);
        uw_pm_msg d, before;
        memset(&d, 0xA5, sizeof(d));
        before = d;
        assert_int_equal(uw_pm_decode(b, sizeof(b), &d), UW_EPROTO);
        assert_memory_equal(&d, &before, sizeof(d));
    }
}

/* 7.3.1.2: "A Port Mapper message MUST use one of the following values":
 * the encoder refuses anything else; the decoder maps each 2-bit value. */
static void test_mt_values(void **state)
{
    (void)state;
    uint8_t b[UW_PM_MSG_LEN];
    for (int t = 4; t < 256; t++) {
        uw_pm_msg m = msg4(t, 1);
        assert_int_equal(uw_pm_encode(&m, b, sizeof(b)), UW_EINVAL);
    }
    for (int t = UW_PM_REQ; t <= UW_PM_DENY; t++) {
        uw_pm_msg m = msg4(t, 1), d;
        assert_int_equal(uw_pm_encode(&m, b, sizeof(b)), UW_PM_MSG_LEN);
        assert_int_equal((b[0] >> 4) & 3, t);
        assert_int_equal(uw_pm_decode(b, sizeof(b), &d), 0);
        assert_int_equal(d.type, t);
    }
    assert_string_equal(uw_pm_type_name(UW_PM_REQ), "req");
    assert_string_equal(uw_pm_type_name(UW_PM_ACCEPT), "accept");
    assert_string_equal(uw_pm_type_name(UW_PM_ACK), "ack");
    assert_string_equal(uw_pm_type_name(UW_PM_DENY), "deny");
    assert_string_equal(uw_pm_type_name(9), "?");
}

/* 7.3.1.3: only IPV 4 and 6 are valid; the others are reserved. */
static void test_ipv_values(void **state)
{
    (void)state;
    uint8_t b[UW_PM_MSG_LEN];
    uw_pm_msg m = msg4(UW_PM_REQ, 1), d;
    for (int v = 0; v < 256; v++) {
        m.ipv = (uint8_t)v;
        ssize_t rc = uw_pm_encode(&m, b, sizeof(b));
        assert_int_equal(rc, v == 4 || v == 6 ? (ssize_t)UW_PM_MSG_LEN : (ssize_t)UW_EINVAL);
    }
    m.ipv = 4;
    assert_int_equal(uw_pm_encode(&m, b, sizeof(b)), UW_PM_MSG_LEN);
    for (unsigned v = 0; v < 16; v++) {
        b[0] = (uint8_t)((b[0] & 0xF0) | v);
        int rc = uw_pm_decode(b, sizeof(b), &d);
        assert_int_equal(rc, v == 4 || v == 6 ? 0 : UW_EPROTO);
    }
}

/* 7.3.1.3: with IPV 4 "the remaining 96 bits are transmitted as zeroes and
 * are ignored on receipt". */
static void test_ipv4_unused_bits(void **state)
{
    (void)state;
    uint8_t b[UW_PM_MSG_LEN];
    uw_pm_msg m = msg4(UW_PM_REQ, 99), d;
    memset(m.cp_ip + 4, 0xEE, 12);
    memset(m.ap_ip + 4, 0x77, 12);
    assert_int_equal(uw_pm_encode(&m, b, sizeof(b)), UW_PM_MSG_LEN);
    static const uint8_t zero[12];
    assert_memory_equal(b + 16 + 4, zero, 12);
    assert_memory_equal(b + 32 + 4, zero, 12);
    /* Received with garbage there: the same message as with zeros. */
    memset(b + 16 + 4, 0x5A, 12);
    memset(b + 32 + 4, 0xC3, 12);
    assert_int_equal(uw_pm_decode(b, sizeof(b), &d), 0);
    uw_pm_msg clean = msg4(UW_PM_REQ, 99);
    assert_msg_equal(&d, &clean);
    /* IPv6 keeps all 128 bits. */
    m.ipv = 6;
    assert_int_equal(uw_pm_encode(&m, b, sizeof(b)), UW_PM_MSG_LEN);
    assert_int_equal(uw_pm_decode(b, sizeof(b), &d), 0);
    assert_memory_equal(d.cp_ip, m.cp_ip, 16);
    assert_memory_equal(d.ap_ip, m.ap_ip, 16);
}

/* 7.3.1.5: "Reserved MUST be transmitted as zero by the sender and MUST NOT
 * be checked by the receiver." */
static void test_reserved(void **state)
{
    (void)state;
    uint8_t b[UW_PM_MSG_LEN];
    for (int t = UW_PM_REQ; t <= UW_PM_DENY; t++) {
        uw_pm_msg m = msg4(t, 5), d;
        assert_int_equal(uw_pm_encode(&m, b, sizeof(b)), UW_PM_MSG_LEN);
        assert_int_equal(b[2], 0);
        assert_int_equal(b[3], 0);
        b[2] = 0xFF;
        b[3] = 0x81;
        assert_int_equal(uw_pm_decode(b, sizeof(b), &d), 0);
        if (t != UW_PM_ACCEPT)
            m.pmtime = 0;
        assert_msg_equal(&d, &m);
    }
}

/* 7.4: PmTime "MUST be set to zero" in PMReq, PMAck and PMDeny ("and ignored
 * on receive": the decoder reports it, the state machines never read it);
 * 7.3.1.4/7.4: any PmTime of a PMAccept is in the defined range. */
static void test_pmtime_send(void **state)
{
    (void)state;
    uint8_t b[UW_PM_MSG_LEN];
    for (int v = 0; v < 256; v++) {
        for (int t = UW_PM_REQ; t <= UW_PM_DENY; t++) {
            uw_pm_msg m = msg4(t, 5), d;
            m.pmtime = (uint8_t)v;
            assert_int_equal(uw_pm_encode(&m, b, sizeof(b)), UW_PM_MSG_LEN);
            assert_int_equal(b[1], t == UW_PM_ACCEPT ? v : 0);
            b[1] = (uint8_t)v; /* as another sender might */
            assert_int_equal(uw_pm_decode(b, sizeof(b), &d), 0);
            assert_int_equal(d.pmtime, v);
        }
    }
}

/* 7.3.1.4: the cache lifetimes. */
static void test_pmtime_durations(void **state)
{
    (void)state;
    const uint64_t ms = UW_PM_NS_PER_MS;
    assert_true(uw_pm_pmtime_ns(0) == 0);
    assert_true(uw_pm_pmtime_ns(1) == 250 * ms);
    assert_true(uw_pm_pmtime_ns(4) == 1000 * ms);
    assert_true(uw_pm_pmtime_ns(127) == 127 * 250 * ms);
    assert_true(uw_pm_pmtime_ns(128) == 128 * 1000 * ms);
    assert_true(uw_pm_pmtime_ns(254) == 254 * 1000 * ms);
    assert_true(uw_pm_pmtime_ns(255) == UW_PM_FOREVER);
    for (int v = 1; v < 255; v++)
        assert_true(uw_pm_pmtime_ns((uint8_t)v) > uw_pm_pmtime_ns((uint8_t)(v - 1)));
}

/* Short and long datagrams are rejected and leave the output alone. */
static void test_lengths(void **state)
{
    (void)state;
    uint8_t b[128];
    uw_pm_msg m = msg4(UW_PM_REQ, 3), d, before;
    assert_int_equal(uw_pm_encode(&m, b, sizeof(b)), UW_PM_MSG_LEN);
    memset(&d, 0x3C, sizeof(d));
    before = d;
    for (size_t n = 0; n < sizeof(b); n++) {
        if (n == UW_PM_MSG_LEN)
            continue;
        assert_int_equal(uw_pm_decode(b, n, &d), UW_EMSGSIZE);
        assert_memory_equal(&d, &before, sizeof(d));
    }
    assert_int_equal(uw_pm_decode(b, UW_PM_MSG_LEN, &d), 0);
}

static void test_bad_args(void **state)
{
    (void)state;
    uint8_t b[UW_PM_MSG_LEN];
    uw_pm_msg m = msg4(UW_PM_REQ, 3);
    assert_int_equal(uw_pm_encode(NULL, b, sizeof(b)), UW_EINVAL);
    assert_int_equal(uw_pm_encode(&m, NULL, sizeof(b)), UW_EINVAL);
    for (size_t cap = 0; cap < UW_PM_MSG_LEN; cap++)
        assert_int_equal(uw_pm_encode(&m, b, cap), UW_ENOBUFS);
    assert_int_equal(uw_pm_decode(NULL, UW_PM_MSG_LEN, &m), UW_EINVAL);
    assert_int_equal(uw_pm_decode(b, UW_PM_MSG_LEN, NULL), UW_EINVAL);
}

/* Any valid message survives encode/decode; any 48 octets that decode come
 * back, after normalisation, to the same octets. */
static void test_roundtrip_random(void **state)
{
    (void)state;
    tu_rng r;
    tu_rng_init(&r, tu_seed(0x504D));
    for (int i = 0; i < 20000; i++) {
        uw_pm_msg m, d;
        tu_rng_fill(&r, &m, sizeof(m));
        m.type = (uint8_t)tu_rng_below(&r, 4);
        m.ipv = tu_rng_below(&r, 2) ? 6 : 4;
        uint8_t b[UW_PM_MSG_LEN], b2[UW_PM_MSG_LEN];
        assert_int_equal(uw_pm_encode(&m, b, sizeof(b)), UW_PM_MSG_LEN);
        assert_int_equal(uw_pm_decode(b, sizeof(b), &d), 0);
        if (m.ipv == 4) {
            memset(m.cp_ip + 4, 0, 12);
            memset(m.ap_ip + 4, 0, 12);
        }
        if (m.type != UW_PM_ACCEPT)
            m.pmtime = 0;
        assert_msg_equal(&d, &m);

        uint8_t raw[UW_PM_MSG_LEN];
        tu_rng_fill(&r, raw, sizeof(raw));
        if (uw_pm_decode(raw, sizeof(raw), &d) == 0) {
            assert_int_equal(uw_pm_encode(&d, b2, sizeof(b2)), UW_PM_MSG_LEN);
            /* Same octets except Reserved, the ignored IPv4 bits and PmTime
             * outside PMAccept, which the encoder writes as zero. */
            raw[2] = raw[3] = 0;
            if (d.type != UW_PM_ACCEPT)
                raw[1] = 0;
            if (d.ipv == 4) {
                memset(raw + 20, 0, 12);
                memset(raw + 36, 0, 12);
            }
            assert_memory_equal(raw, b2, sizeof(raw));
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_figure17_layout),  cmocka_unit_test(test_ver_zero),
        cmocka_unit_test(test_mt_values),        cmocka_unit_test(test_ipv_values),
        cmocka_unit_test(test_ipv4_unused_bits), cmocka_unit_test(test_reserved),
        cmocka_unit_test(test_pmtime_send),      cmocka_unit_test(test_pmtime_durations),
        cmocka_unit_test(test_lengths),          cmocka_unit_test(test_bad_args),
        cmocka_unit_test(test_roundtrip_random),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
