/* PM client state machine (draft-pinkerton-iwarp-sdp-01 7.3.1.4, 7.4, 7.5,
 * 7.5.1) on a virtual clock: one test per client-side MUST, plus the SHOULDs
 * the issue asks for (random initial handle, fallback on timeout and reset),
 * the cache, slot management and failing allocations. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "testutil.h"
#include "uwarp/pm.h"

#define MS UW_PM_NS_PER_MS
#define T0 (1000 * MS) /* virtual clocks start here, not at 0 */

static const uint8_t CP4[4] = {10, 0, 0, 1}, AP4[4] = {10, 0, 0, 2}, SDP4[4] = {10, 0, 0, 3};

static uw_pm_query query4(uint16_t cp_port, uint16_t ap_port)
{
    uw_pm_query q;
    memset(&q, 0, sizeof(q));
    q.ipv = 4;
    memcpy(q.cp_ip, CP4, 4);
    memcpy(q.ap_ip, AP4, 4);
    q.cp_port = cp_port;
    q.ap_port = ap_port;
    q.server.ipv = 4;
    memcpy(q.server.ip, AP4, 4);
    return q;
}

static uw_pm_query query6(uint16_t cp_port, uint16_t ap_port)
{
    uw_pm_query q;
    memset(&q, 0, sizeof(q));
    q.ipv = 6;
    assert_int_equal(tu_unhex("20010db8000000000000000000000011", q.cp_ip, 16), 16);
    assert_int_equal(tu_unhex("20010db8000000000000000000000022", q.ap_ip, 16), 16);
    q.cp_port = cp_port;
    q.ap_port = ap_port;
    q.server.ipv = 6;
    memcpy(q.server.ip, q.ap_ip, 16);
    q.server.port = 7000;
    return q;
}

static uw_pm_client *mk(uint64_t seed, unsigned retries, size_t max_txns)
{
    uw_pm_client_opts o;
    memset(&o, 0, sizeof(o));
    o.seed = seed;
    o.rto_ns = 100 * MS;
    o.rto_max_ns = 400 * MS;
    o.max_retries = retries;
    o.max_txns = max_txns;
    uw_pm_client *c = NULL;
    assert_int_equal(uw_pm_client_create(&c, &o), 0);
    return c;
}

/* Takes the next datagram the client wants to send and decodes it; returns
 * false if there is none. */
static bool take(uw_pm_client *c, uint64_t now, uw_pm_msg *m, uw_pm_datagram *d)
{
    uw_pm_datagram tmp;
    if (!d)
        d = &tmp;
    int rc = uw_pm_client_send(c, now, d);
    assert_true(rc == 0 || rc == 1);
    if (rc == 0)
        return false;
    assert_int_equal(d->len, UW_PM_MSG_LEN);
    assert_int_equal(uw_pm_decode(d->data, d->len, m), 0);
    return true;
}

static uw_pm_udp_addr addr4(const uint8_t ip[4], uint16_t port)
{
    uw_pm_udp_addr a;
    memset(&a, 0, sizeof(a));
    a.ipv = 4;
    memcpy(a.ip, ip, 4);
    a.port = port;
    return a;
}

/* Answers req as a PMSP would, from the UDP address from. */
static int answer(uw_pm_client *c, uint64_t now, const uw_pm_msg *req, int type, uint16_t port,
                  uint8_t pmtime, const uw_pm_udp_addr *from)
{
    uw_pm_msg m = *req;
    m.type = (uint8_t)type;
    m.pmtime = pmtime;
    if (type == UW_PM_ACCEPT) {
        m.ap_port = port;
        uw_pm_udp_addr sdp = addr4(SDP4, 0);
        if (req->ipv == 4)
            memcpy(m.ap_ip, sdp.ip, 16);
    }
    uint8_t b[UW_PM_MSG_LEN];
    assert_int_equal(uw_pm_encode(&m, b, sizeof(b)), UW_PM_MSG_LEN);
    return uw_pm_client_recv(c, now, b, sizeof(b), from);
}

static uw_pm_result result(uw_pm_client *c)
{
    uw_pm_result r;
    assert_int_equal(uw_pm_client_next_result(c, &r), 1);
    return r;
}

static void no_result(uw_pm_client *c)
{
    uw_pm_result r;
    assert_int_equal(uw_pm_client_next_result(c, &r), 0);
}

/* ------------------------------------------------------------------------ */

/* 7.4: the PMReq's fields: Ver 0, IPV after the addresses, MT 0, PmTime 0,
 * ApPort the service's listen port, CpPort the local TCP port, AssocHandle,
 * CpIPAddr, ApIPAddr; 7.3.1.8: the client sets AssocHandle. */
static void test_req_fields(void **state)
{
    (void)state;
    uw_pm_client *c = mk(1, 0, 0);
    for (int v = 0; v < 2; v++) {
        uw_pm_query q = v ? query6(5555, 443) : query4(4444, 80);
        uint64_t id;
        assert_int_equal(uw_pm_client_start(c, &q, T0, &id), 0);
        assert_true(id != 0);
        uw_pm_datagram d;
        uw_pm_msg m;
        assert_true(take(c, T0, &m, &d));
        assert_int_equal(d.data[0] >> 6, 0);       /* Ver */
        assert_int_equal((d.data[0] >> 4) & 3, 0); /* MT = PMReq */
        assert_int_equal(d.data[0] & 15, q.ipv);   /* IPV */
        assert_int_equal(d.data[1], 0);            /* PmTime */
        assert_int_equal(m.ap_port, q.ap_port);
        assert_int_equal(m.cp_port, q.cp_port);
        assert_memory_equal(m.cp_ip, q.cp_ip, v ? 16 : 4);
        assert_memory_equal(m.ap_ip, q.ap_ip, v ? 16 : 4);
        assert_memory_equal(d.to.ip, q.server.ip, 16);
        assert_false(take(c, T0, &m, NULL)); /* exactly one */
    }
    uw_pm_client_destroy(c);
}

/* 7.4: "The PMReq Message's destination UDP port number MUST by default be"
 * 3935 (section 16); another port is used when the caller names one. */
static void test_default_port(void **state)
{
    (void)state;
    uw_pm_client *c = mk(1, 0, 0);
    uw_pm_query q = query4(1, 2);
    uint64_t id;
    uw_pm_datagram d;
    uw_pm_msg m;
    assert_int_equal(uw_pm_client_start(c, &q, T0, &id), 0);
    assert_true(take(c, T0, &m, &d));
    assert_int_equal(d.to.port, 3935);
    q.server.port = 39350;
    assert_int_equal(uw_pm_client_start(c, &q, T0, &id), 0);
    assert_true(take(c, T0, &m, &d));
    assert_int_equal(d.to.port, 39350);
    uw_pm_client_destroy(c);
}

static uint64_t fixed_random(void *ud)
{
    return *(uint64_t *)ud;
}

/* 7.5.1: "The initial AssocHandle chosen by a host SHOULD be chosen at
 * random": it comes from the injected source, whatever that returns. */
static void test_random_initial_handle(void **state)
{
    (void)state;
    const uint64_t vals[] = {0, 0x0123456789abcdefull, UINT64_MAX};
    for (size_t i = 0; i < 3; i++) {
        uint64_t v = vals[i];
        uw_pm_client_opts o;
        memset(&o, 0, sizeof(o));
        o.random = fixed_random;
        o.random_ud = &v;
        uw_pm_client *c;
        assert_int_equal(uw_pm_client_create(&c, &o), 0);
        uw_pm_query q = query4(1, 2);
        uint64_t id;
        uw_pm_msg m;
        assert_int_equal(uw_pm_client_start(c, &q, T0, &id), 0);
        assert_true(take(c, T0, &m, NULL));
        assert_true(m.assoc == v);
        uw_pm_client_destroy(c);
    }
    /* Seeded generator: different seeds, different first handles. */
    uw_pm_client *a = mk(1, 0, 0), *b = mk(2, 0, 0);
    uw_pm_query q = query4(1, 2);
    uint64_t id;
    uw_pm_msg ma, mb;
    assert_int_equal(uw_pm_client_start(a, &q, T0, &id), 0);
    assert_int_equal(uw_pm_client_start(b, &q, T0, &id), 0);
    assert_true(take(a, T0, &ma, NULL));
    assert_true(take(b, T0, &mb, NULL));
    assert_true(ma.assoc != mb.assoc);
    uw_pm_client_destroy(a);
    uw_pm_client_destroy(b);
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* 7.5.1: (AssocHandle, CpIPAddr, CpPort) MUST be unique, and the 5-tuple
 * MUST be unique within the host: the same local port and service, used over
 * and over, concurrently and in sequence, never repeats a handle. Starting
 * from UINT64_MAX checks the wrap-around too. */
static void test_unique_handles(void **state)
{
    (void)state;
    uint64_t v = UINT64_MAX - 10;
    uw_pm_client_opts o;
    memset(&o, 0, sizeof(o));
    o.random = fixed_random;
    o.random_ud = &v;
    o.max_txns = 64;
    uw_pm_client *c;
    assert_int_equal(uw_pm_client_create(&c, &o), 0);
    enum { N = 2000 };
    static uint64_t seen[N];
    size_t n = 0;
    uw_pm_query q = query4(4242, 80);
    uint64_t now = T0;
    while (n < N) {
        uint64_t id;
        for (int k = 0; k < 50; k++) /* 50 concurrent transactions */
            assert_int_equal(uw_pm_client_start(c, &q, now, &id), 0);
        uw_pm_msg m;
        while (take(c, now, &m, NULL)) {
            assert_true(n < N);
            seen[n++] = m.assoc;
            uw_pm_udp_addr from = addr4(AP4, 3935);
            assert_int_equal(answer(c, now, &m, UW_PM_DENY, 0, 0, &from), UW_PM_C_DENIED);
        }
        uw_pm_result r;
        while (uw_pm_client_next_result(c, &r) == 1)
            ;
        now += 10 * MS;
    }
    qsort(seen, N, sizeof(seen[0]), cmp_u64);
    for (size_t i = 1; i < N; i++)
        assert_true(seen[i] != seen[i - 1]);
    uw_pm_client_destroy(c);
}

/* 7.5.1: "MUST arm a timeout when transmitting a PMReq", "MUST retransmit the
 * PMReq Message and re-arm the timeout, up to a maximum number", "MUST use the
 * same AssocHandle, ApPort, ApIPAddr, CpPort, and CpIPAddr on any
 * retransmissions"; backoff doubles up to the cap; after the last timeout
 * the client SHOULD use the Conventional Address. */
static void test_retransmit(void **state)
{
    (void)state;
    uw_pm_client *c = mk(3, 3, 0); /* 100, 200, 400, 400 ms */
    uw_pm_query q = query4(777, 80);
    uint64_t id;
    assert_int_equal(uw_pm_client_start(c, &q, T0, &id), 0);
    uw_pm_datagram first, d;
    uw_pm_msg m;
    assert_true(uw_pm_client_next_deadline(c) == UW_PM_FOREVER); /* PMReq queued, not sent */
    assert_true(take(c, T0, &m, &first));
    const uint64_t gaps[] = {100, 200, 400, 400};
    uint64_t now = T0;
    for (int i = 0; i < 4; i++) {
        uint64_t due = now + gaps[i] * MS;
        assert_true(uw_pm_client_next_deadline(c) == due);
        assert_false(take(c, due - 1, &m, NULL)); /* nothing early */
        now = due;
        if (i == 3)
            break;
        assert_true(take(c, now, &m, &d));
        assert_int_equal(d.len, first.len);
        assert_memory_equal(d.data, first.data, first.len); /* identical PMReq */
        assert_memory_equal(&d.to, &first.to, sizeof(d.to));
        no_result(c);
    }
    /* The fourth timeout is past the third retransmission: give up. */
    assert_false(take(c, now, &m, NULL));
    uw_pm_result r = result(c);
    assert_int_equal(r.txn, id);
    assert_int_equal(r.outcome, UW_PM_USE_CONVENTIONAL);
    assert_int_equal(r.reason, UW_PM_R_TIMEOUT);
    assert_int_equal(r.sent, 4);
    assert_memory_equal(r.ip, AP4, 4);
    assert_int_equal(r.port, 80);
    uw_pm_client_stats st;
    uw_pm_client_stats_get(c, &st);
    assert_int_equal(st.reqs_sent, 4);
    assert_int_equal(st.retransmits, 3);
    assert_int_equal(st.timeouts, 1);
    uw_pm_client_destroy(c);

    /* No retransmission at all. */
    c = mk(3, UW_PM_NO_RETRY, 0);
    assert_int_equal(uw_pm_client_start(c, &q, T0, &id), 0);
    assert_true(take(c, T0, &m, NULL));
    assert_false(take(c, T0 + 100 * MS, &m, NULL));
    assert_int_equal(result(c).reason, UW_PM_R_TIMEOUT);
    uw_pm_client_destroy(c);
}

/* 7.4: "Upon receipt of a PMAccept Message, the PM Client MUST return a PMAck
 * Message", sent to the UDP address the PMAccept came from, with Ver 0, IPV,
 * MT 2, PmTime 0 and ApPort, CpPort, AssocHandle, CpIPAddr, ApIPAddr of the
 * PMAccept. The PMAccept's ApIPAddr may differ from the requested one. */
static void test_accept_ack(void **state)
{
    (void)state;
    for (int v = 0; v < 2; v++) {
        uw_pm_client *c = mk(4, 2, 0);
        uw_pm_query q = v ? query6(900, 443) : query4(900, 80);
        uint64_t id;
        assert_int_equal(uw_pm_client_start(c, &q, T0, &id), 0);
        uw_pm_msg req, ack;
        assert_true(take(c, T0, &req, NULL));
        /* The reply comes from another address than the PMReq went to. */
        uw_pm_udp_addr from = addr4(SDP4, 31000);
        from.ipv = q.ipv;
        uw_pm_msg acc = req;
        acc.type = UW_PM_ACCEPT;
        acc.pmtime = 8;
        acc.ap_port = 18080;
        acc.ap_ip[3] ^= 0x40; /* a different ApIPAddr (7.4: MAY) */
        uint8_t b[UW_PM_MSG_LEN];
        assert_int_equal(uw_pm_encode(&acc, b, sizeof(b)), UW_PM_MSG_LEN);
        assert_int_equal(uw_pm_client_recv(c, T0 + MS, b, sizeof(b), &from), UW_PM_C_ACCEPTED);
        uw_pm_datagram d;
        assert_true(take(c, T0 + MS, &ack, &d));
        assert_memory_equal(&d.to, &from, sizeof(from));
        assert_int_equal(d.data[0] >> 6, 0);
        assert_int_equal((d.data[0] >> 4) & 3, UW_PM_ACK);
        assert_int_equal(d.data[0] & 15, q.ipv);
        assert_int_equal(d.data[1], 0);
        assert_int_equal(ack.ap_port, 18080);
        assert_int_equal(ack.cp_port, acc.cp_port);
        assert_true(ack.assoc == acc.assoc);
        assert_memory_equal(ack.cp_ip, acc.cp_ip, 16);
        assert_memory_equal(ack.ap_ip, acc.ap_ip, 16);
        assert_false(take(c, T0 + MS, &ack, NULL)); /* one PMAck */
        uw_pm_result r = result(c);
        assert_int_equal(r.outcome, UW_PM_USE_SDP);
        assert_int_equal(r.reason, UW_PM_R_ACCEPT);
        assert_int_equal(r.port, 18080);
        assert_memory_equal(r.ip, acc.ap_ip, 16);
        assert_int_equal(r.pmtime, 8);
        assert_true(r.cache_until == T0 + MS + 2000 * MS);
        /* Done: no retransmission ever follows. */
        assert_false(take(c, T0 + 10000 * MS, &ack, NULL));
        uw_pm_client_destroy(c);
    }
}

/* 7.4: "Upon receipt of a PMDeny Message, the PM Client MUST treat the
 * associated Port Mapper transaction as complete and MUST not issue a PMAck";
 * 7.3.1.6: the PMDeny's ApPort is ignored. */
static void test_deny(void **state)
{
    (void)state;
    uw_pm_client *c = mk(5, 3, 0);
    uw_pm_query q = query4(901, 80);
    uint64_t id;
    assert_int_equal(uw_pm_client_start(c, &q, T0, &id), 0);
    uw_pm_msg req, m;
    assert_true(take(c, T0, &req, NULL));
    uw_pm_udp_addr from = addr4(AP4, 3935);
    req.ap_port = 0xBEEF; /* whatever a PMSP puts there */
    assert_int_equal(answer(c, T0 + MS, &req, UW_PM_DENY, 0, 0, &from), UW_PM_C_DENIED);
    assert_false(take(c, T0 + MS, &m, NULL));        /* no PMAck */
    assert_false(take(c, T0 + 5000 * MS, &m, NULL)); /* no retransmission */
    uw_pm_result r = result(c);
    assert_int_equal(r.outcome, UW_PM_USE_CONVENTIONAL);
    assert_int_equal(r.reason, UW_PM_R_DENY);
    assert_int_equal(r.port, 80); /* the Conventional Address, not the PMDeny's ApPort */
    assert_memory_equal(r.ip, AP4, 4);
    assert_int_equal(uw_pm_client_cached(c), 0);
    uw_pm_client_destroy(c);
}

/* 7.5: a reply whose (AssocHandle, CpPort, CpIPAddr) matches a transaction is
 * a duplicate once that transaction has its reply; 7.5.1: "MUST discard any
 * additional replies (PMAccept or PMDeny)": no second PMAck, result kept. */
static void test_duplicate_replies(void **state)
{
    (void)state;
    const int first[3] = {UW_PM_ACCEPT, UW_PM_ACCEPT, UW_PM_DENY};
    const int second[3] = {UW_PM_ACCEPT, UW_PM_DENY, UW_PM_ACCEPT};
    for (int k = 0; k < 3; k++) {
        uw_pm_client *c = mk(6, 3, 0);
        uw_pm_query q = query4(902, 80);
        uint64_t id;
        assert_int_equal(uw_pm_client_start(c, &q, T0, &id), 0);
        uw_pm_msg req, m;
        assert_true(take(c, T0, &req, NULL));
        assert_true(take(c, T0 + 100 * MS, &m, NULL)); /* a retransmission */
        uw_pm_udp_addr from = addr4(AP4, 3935);
        int v1 = answer(c, T0 + 150 * MS, &req, first[k], 8080, 4, &from);
        assert_int_equal(v1, first[k] == UW_PM_ACCEPT ? UW_PM_C_ACCEPTED : UW_PM_C_DENIED);
        int acks = 0;
        while (take(c, T0 + 150 * MS, &m, NULL))
            acks++;
        assert_int_equal(acks, first[k] == UW_PM_ACCEPT);
        /* The reply to the retransmission, and more. */
        for (int i = 0; i < 3; i++) {
            assert_int_equal(answer(c, T0 + 160 * MS, &req, second[k], 9090, 8, &from),
                             UW_PM_C_DUPLICATE);
            assert_false(take(c, T0 + 160 * MS, &m, NULL));
        }
        uw_pm_result r = result(c);
        assert_int_equal(r.reason, first[k] == UW_PM_ACCEPT ? UW_PM_R_ACCEPT : UW_PM_R_DENY);
        if (first[k] == UW_PM_ACCEPT)
            assert_int_equal(r.port, 8080);
        no_result(c);
        uw_pm_client_stats st;
        uw_pm_client_stats_get(c, &st);
        assert_int_equal(st.duplicates, 3);
        uw_pm_client_destroy(c);
    }
}

/* 7.5.1: "If the PM Client receives a PMAccept or PMDeny and has no associated
 * state for the Message, the Message MUST be discarded": any one of the three
 * matching fields wrong, or a reply after the transaction was forgotten. PMReq
 * and PMAck are not for a client; malformed datagrams change nothing. */
static void test_no_state(void **state)
{
    (void)state;
    uw_pm_client *c = mk(7, 3, 0);
    uw_pm_query q = query4(903, 80);
    uint64_t id;
    assert_int_equal(uw_pm_client_start(c, &q, T0, &id), 0);
    uw_pm_msg req, m;
    assert_true(take(c, T0, &req, NULL));
    uw_pm_udp_addr from = addr4(AP4, 3935);
    for (int f = 0; f < 4; f++) {
        for (int type = UW_PM_ACCEPT; type <= UW_PM_DENY; type += 2) {
            uw_pm_msg bad = req;
            if (f == 0)
                bad.assoc ^= 1;
            else if (f == 1)
                bad.cp_port ^= 1;
            else if (f == 2)
                bad.cp_ip[3] ^= 1;
            else
                bad.ipv = 6; /* same octets, other version: another address */
            assert_int_equal(answer(c, T0 + MS, &bad, type, 8080, 4, &from), UW_PM_C_NO_STATE);
        }
    }
    assert_int_equal(answer(c, T0 + MS, &req, UW_PM_REQ, 0, 0, &from), UW_PM_C_IGNORED);
    assert_int_equal(answer(c, T0 + MS, &req, UW_PM_ACK, 0, 0, &from), UW_PM_C_IGNORED);
    uint8_t junk[UW_PM_MSG_LEN] = {0xC0};
    assert_int_equal(uw_pm_client_recv(c, T0 + MS, junk, sizeof(junk), &from), UW_EPROTO);
    assert_int_equal(uw_pm_client_recv(c, T0 + MS, junk, 47, &from), UW_EMSGSIZE);
    assert_false(take(c, T0 + MS, &m, NULL));
    no_result(c);
    /* The real reply still works. */
    assert_int_equal(answer(c, T0 + 2 * MS, &req, UW_PM_DENY, 0, 0, &from), UW_PM_C_DENIED);
    /* Long after the linger time the transaction is gone: no state. */
    result(c);
    uw_pm_client_tick(c, T0 + 60000 * MS);
    assert_int_equal(uw_pm_client_txns(c), 0);
    assert_int_equal(answer(c, T0 + 60000 * MS, &req, UW_PM_ACCEPT, 1, 1, &from), UW_PM_C_NO_STATE);
    assert_false(take(c, T0 + 60000 * MS, &m, NULL));
    uw_pm_client_destroy(c);
}

/* Runs one transaction to a PMAccept with pmtime; returns the result. */
static uw_pm_result accept_one(uw_pm_client *c, uint64_t now, uint16_t cp_port, uint8_t pmtime,
                               uint16_t sdp_port)
{
    uw_pm_query q = query4(cp_port, 80);
    uint64_t id;
    assert_int_equal(uw_pm_client_start(c, &q, now, &id), 0);
    uw_pm_msg req, m;
    assert_true(take(c, now, &req, NULL));
    uw_pm_udp_addr from = addr4(AP4, 3935);
    assert_int_equal(answer(c, now, &req, UW_PM_ACCEPT, sdp_port, pmtime, &from), UW_PM_C_ACCEPTED);
    assert_true(take(c, now, &m, NULL)); /* the PMAck */
    return result(c);
}

/* Starts a query for the cached service; true if it was a cache hit. */
static bool cache_hit(uw_pm_client *c, uint64_t now, uint16_t cp_port, uint16_t want_port)
{
    uw_pm_query q = query4(cp_port, 80);
    uint64_t id;
    uw_pm_msg m;
    assert_int_equal(uw_pm_client_start(c, &q, now, &id), 0);
    if (take(c, now, &m, NULL)) {
        assert_int_equal(uw_pm_client_cancel(c, id, now), 0);
        assert_int_equal(result(c).reason, UW_PM_R_CANCELED);
        return false;
    }
    uw_pm_result r = result(c);
    assert_int_equal(r.txn, id);
    assert_int_equal(r.reason, UW_PM_R_CACHED);
    assert_int_equal(r.outcome, UW_PM_USE_SDP);
    assert_int_equal(r.port, want_port);
    assert_memory_equal(r.ip, SDP4, 4);
    return true;
}

/* 7.3.1.4: PmTime 1..127 caches for PmTime * 250 ms, 128..254 for PmTime s,
 * 255 for ever; "When the PmTime has elapsed, the PM Client MUST flush the
 * response data" and then "MUST issue a new PMReq Message". */
static void test_cache_lifetimes(void **state)
{
    (void)state;
    const uint8_t pm[] = {1, 4, 127, 128, 254};
    for (size_t i = 0; i < sizeof(pm); i++) {
        uw_pm_client *c = mk(8, 1, 0);
        uint64_t dur = uw_pm_pmtime_ns(pm[i]);
        uw_pm_result r = accept_one(c, T0, 1000, pm[i], 7000);
        assert_true(r.cache_until == T0 + dur);
        assert_int_equal(uw_pm_client_cached(c), 1);
        assert_true(cache_hit(c, T0 + dur / 2, 1001, 7000));
        assert_true(cache_hit(c, T0 + dur - 1, 1002, 7000));
        assert_true(uw_pm_client_next_deadline(c) <= T0 + dur);
        uw_pm_client_tick(c, T0 + dur);
        assert_int_equal(uw_pm_client_cached(c), 0);      /* flushed */
        assert_false(cache_hit(c, T0 + dur, 1003, 7000)); /* a new PMReq */
        uw_pm_client_destroy(c);
    }
    /* Expired entries are flushed at lookup too, without a tick. */
    uw_pm_client *c = mk(8, 1, 0);
    accept_one(c, T0, 1000, 4, 7000);
    assert_false(cache_hit(c, T0 + 1000 * MS, 1001, 7000));
    uw_pm_client_destroy(c);
    /* 255: permanent. */
    c = mk(8, 1, 0);
    uw_pm_result r = accept_one(c, T0, 1000, 255, 7001);
    assert_true(r.cache_until == UW_PM_FOREVER);
    assert_true(cache_hit(c, UINT64_MAX / 2, 1001, 7001));
    uw_pm_client_destroy(c);
}

/* 7.3.1.4: with PmTime 0 the client "MUST NOT cache the PMAccept Message
 * ApPort and ApIPAddr"; such a PMAccept also replaces an older cached one. */
static void test_cache_pmtime_zero(void **state)
{
    (void)state;
    uw_pm_client *c = mk(9, 1, 0);
    uw_pm_result r = accept_one(c, T0, 1000, 0, 7000);
    assert_true(r.cache_until == 0);
    assert_int_equal(uw_pm_client_cached(c), 0);
    assert_false(cache_hit(c, T0, 1001, 7000));
    /* Two transactions in flight for one service: the answer cached from
     * the first is superseded by the second's single-use one. */
    uw_pm_query q1 = query4(1002, 80), q2 = query4(1003, 80);
    uint64_t id1, id2;
    uw_pm_msg r1, r2, m;
    assert_int_equal(uw_pm_client_start(c, &q1, T0, &id1), 0);
    assert_int_equal(uw_pm_client_start(c, &q2, T0, &id2), 0);
    assert_true(take(c, T0, &r1, NULL));
    assert_true(take(c, T0, &r2, NULL));
    uw_pm_udp_addr from = addr4(AP4, 3935);
    assert_int_equal(answer(c, T0 + 1, &r1, UW_PM_ACCEPT, 7000, 200, &from), UW_PM_C_ACCEPTED);
    assert_int_equal(uw_pm_client_cached(c), 1);
    assert_int_equal(answer(c, T0 + 2, &r2, UW_PM_ACCEPT, 7002, 0, &from), UW_PM_C_ACCEPTED);
    assert_int_equal(uw_pm_client_cached(c), 0);
    while (take(c, T0 + 2, &m, NULL))
        ;
    result(c);
    result(c);
    assert_false(cache_hit(c, T0 + 3, 1005, 7002));
    uw_pm_client_destroy(c);
}

/* The cache key: another client address or service is another entry; a
 * newer PMAccept replaces the answer; the cache is bounded. */
static void test_cache_keys(void **state)
{
    (void)state;
    uw_pm_client_opts o;
    memset(&o, 0, sizeof(o));
    o.cache_max = 4;
    uw_pm_client *c;
    assert_int_equal(uw_pm_client_create(&c, &o), 0);
    uw_pm_udp_addr from = addr4(AP4, 3935);
    for (uint16_t svc = 1; svc <= 6; svc++) {
        uw_pm_query q = query4(100, svc);
        uint64_t id;
        uw_pm_msg req, m;
        assert_int_equal(uw_pm_client_start(c, &q, T0, &id), 0);
        assert_true(take(c, T0, &req, NULL));
        /* Shorter lifetimes for later services: the first ones stay. */
        assert_int_equal(
            answer(c, T0, &req, UW_PM_ACCEPT, (uint16_t)(svc + 100), (uint8_t)(200 - svc), &from),
            UW_PM_C_ACCEPTED);
        while (take(c, T0, &m, NULL))
            ;
        result(c);
    }
    assert_int_equal(uw_pm_client_cached(c), 4);
    uint64_t id;
    uw_pm_msg m;
    for (uint16_t svc = 1; svc <= 6; svc++) {
        uw_pm_query q = query4(200, svc);
        assert_int_equal(uw_pm_client_start(c, &q, T0 + 1, &id), 0);
        bool sent = take(c, T0 + 1, &m, NULL);
        /* Full at 4 entries: service 5 evicted the one expiring first (4),
         * then service 6 evicted 5. */
        assert_int_equal(sent, svc == 4 || svc == 5);
        if (sent)
            assert_int_equal(uw_pm_client_cancel(c, id, T0 + 1), 0);
        result(c);
    }
    /* Another CpIPAddr is another client as far as the PMSP may care. */
    uw_pm_query q = query4(300, 1);
    q.cp_ip[3] = 99;
    assert_int_equal(uw_pm_client_start(c, &q, T0 + 1, &id), 0);
    assert_true(take(c, T0 + 1, &m, NULL));
    uw_pm_client_flush_cache(c);
    assert_int_equal(uw_pm_client_cached(c), 0);
    uw_pm_client_destroy(c);
}

/* 7.5.1: "If the PM Client receives a LLP Connection Reset ... it SHOULD view
 * this as equivalent to receiving a PMDeny": the cached answer goes and the
 * Conventional Address is to be used. */
static void test_sdp_reset(void **state)
{
    (void)state;
    uw_pm_client *c = mk(10, 1, 0);
    accept_one(c, T0, 1000, 100, 7000);
    assert_true(cache_hit(c, T0 + 1, 1001, 7000));
    uw_pm_query q = query4(1001, 80);
    uw_pm_result r;
    assert_int_equal(uw_pm_client_sdp_reset(c, &q, &r), 0);
    assert_int_equal(r.outcome, UW_PM_USE_CONVENTIONAL);
    assert_int_equal(r.reason, UW_PM_R_RESET);
    assert_int_equal(r.port, 80);
    assert_memory_equal(r.ip, AP4, 4);
    assert_int_equal(uw_pm_client_cached(c), 0);
    assert_false(cache_hit(c, T0 + 2, 1002, 7000));
    assert_int_equal(uw_pm_client_sdp_reset(c, &q, NULL), 0);
    q.ipv = 5;
    assert_int_equal(uw_pm_client_sdp_reset(c, &q, NULL), UW_EINVAL);
    uw_pm_client_destroy(c);
}

/* Slots: in-flight and unread transactions are never dropped (UW_EBUSY);
 * lingering ones are reused early; results come out in completion order;
 * cancel works only on unfinished transactions. */
static void test_slots_and_order(void **state)
{
    (void)state;
    uw_pm_client *c = mk(11, 2, 4);
    uw_pm_query q = query4(1, 80);
    uint64_t ids[4], extra;
    for (int i = 0; i < 4; i++)
        assert_int_equal(uw_pm_client_start(c, &q, T0, &ids[i]), 0);
    assert_int_equal(uw_pm_client_start(c, &q, T0, &extra), UW_EBUSY);
    uw_pm_msg req[4], m;
    for (int i = 0; i < 4; i++)
        assert_true(take(c, T0, &req[i], NULL));
    uw_pm_udp_addr from = addr4(AP4, 3935);
    /* Finish 2, 0, 3 in that order; cancel 1. */
    assert_int_equal(answer(c, T0 + 1, &req[2], UW_PM_DENY, 0, 0, &from), UW_PM_C_DENIED);
    assert_int_equal(answer(c, T0 + 2, &req[0], UW_PM_DENY, 0, 0, &from), UW_PM_C_DENIED);
    assert_int_equal(answer(c, T0 + 3, &req[3], UW_PM_DENY, 0, 0, &from), UW_PM_C_DENIED);
    assert_int_equal(uw_pm_client_cancel(c, ids[1], T0 + 4), 0);
    assert_int_equal(uw_pm_client_cancel(c, ids[1], T0 + 4), UW_ENOENT);
    assert_int_equal(uw_pm_client_cancel(c, 12345, T0 + 4), UW_ENOENT);
    /* Unread results hold their slots. */
    assert_int_equal(uw_pm_client_start(c, &q, T0 + 5, &extra), UW_EBUSY);
    const int order[4] = {2, 0, 3, 1};
    for (int i = 0; i < 4; i++)
        assert_int_equal(result(c).txn, ids[order[i]]);
    no_result(c);
    /* Read and lingering: reusable at once. */
    assert_int_equal(uw_pm_client_txns(c), 4);
    assert_int_equal(uw_pm_client_start(c, &q, T0 + 6, &extra), 0);
    assert_true(extra > ids[3]);
    assert_true(take(c, T0 + 6, &m, NULL));
    assert_false(take(c, T0 + 6, &m, NULL)); /* cancelled ones send nothing */
    uw_pm_client_destroy(c);
}

/* Time that goes backwards is treated as standing still. */
static void test_clock_backwards(void **state)
{
    (void)state;
    uw_pm_client *c = mk(12, 1, 0);
    uw_pm_query q = query4(1, 80);
    uint64_t id;
    uw_pm_msg m;
    assert_int_equal(uw_pm_client_start(c, &q, T0, &id), 0);
    assert_true(take(c, T0, &m, NULL));
    assert_false(take(c, 5, &m, NULL));
    assert_true(uw_pm_client_next_deadline(c) == T0 + 100 * MS);
    assert_true(take(c, T0 + 100 * MS, &m, NULL));
    uw_pm_client_destroy(c);
}

static void test_bad_args_and_alloc(void **state)
{
    (void)state;
    uw_pm_client_opts o;
    memset(&o, 0, sizeof(o));
    uw_pm_client *c;
    assert_int_equal(uw_pm_client_create(NULL, &o), UW_EINVAL);
    assert_int_equal(uw_pm_client_create(&c, NULL), UW_EINVAL);
    o.rto_ns = 10;
    o.rto_max_ns = 5;
    assert_int_equal(uw_pm_client_create(&c, &o), UW_EINVAL);
    memset(&o, 0, sizeof(o));
    /* Every allocation of create can fail, cleanly. */
    for (unsigned long n = 1; n <= 3; n++) {
        tu_failalloc fa;
        tu_failalloc_init(&fa, n);
        o.alloc = &fa.a;
        assert_int_equal(uw_pm_client_create(&c, &o), UW_ENOMEM);
    }
    tu_failalloc fa;
    tu_failalloc_init(&fa, 4);
    o.alloc = &fa.a;
    assert_int_equal(uw_pm_client_create(&c, &o), 0);
    uw_pm_query q = query4(1, 80);
    uint64_t id;
    uw_pm_datagram d;
    uw_pm_result r;
    assert_int_equal(uw_pm_client_start(c, NULL, T0, &id), UW_EINVAL);
    q.ipv = 0;
    assert_int_equal(uw_pm_client_start(c, &q, T0, &id), UW_EINVAL);
    q = query4(1, 80);
    q.server.ipv = 0;
    assert_int_equal(uw_pm_client_start(c, &q, T0, &id), UW_EINVAL);
    assert_int_equal(uw_pm_client_send(c, T0, NULL), UW_EINVAL);
    assert_int_equal(uw_pm_client_send(NULL, T0, &d), UW_EINVAL);
    assert_int_equal(uw_pm_client_recv(c, T0, NULL, 0, &q.server), UW_EINVAL);
    assert_int_equal(uw_pm_client_next_result(c, NULL), UW_EINVAL);
    assert_int_equal(uw_pm_client_next_result(c, &r), 0);
    assert_true(uw_pm_client_next_deadline(NULL) == UW_PM_FOREVER);
    uw_pm_client_destroy(c);
    uw_pm_client_destroy(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_req_fields),
        cmocka_unit_test(test_default_port),
        cmocka_unit_test(test_random_initial_handle),
        cmocka_unit_test(test_unique_handles),
        cmocka_unit_test(test_retransmit),
        cmocka_unit_test(test_accept_ack),
        cmocka_unit_test(test_deny),
        cmocka_unit_test(test_duplicate_replies),
        cmocka_unit_test(test_no_state),
        cmocka_unit_test(test_cache_lifetimes),
        cmocka_unit_test(test_cache_pmtime_zero),
        cmocka_unit_test(test_cache_keys),
        cmocka_unit_test(test_sdp_reset),
        cmocka_unit_test(test_slots_and_order),
        cmocka_unit_test(test_clock_backwards),
        cmocka_unit_test(test_bad_args_and_alloc),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
