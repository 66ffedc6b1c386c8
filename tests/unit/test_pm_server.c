/* PM server (PMSP) state machine (draft-pinkerton-iwarp-sdp-01 7.4, 7.5,
 * 7.5.2, 15.2) on a virtual clock: one test per server-side MUST, the
 * SHOULDs the issue asks for (timer reset, current service state), bounded
 * state and rate limiting; then clients and a server over a simulated network
 * that loses, delays, reorders and duplicates datagrams, where both sides must
 * always converge. */
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
#define T0 (1000 * MS)

/* ------------------------------------------------------------------------ */
/* A service table for the lookup callback, and an event log.               */

typedef struct svc {
    uint16_t port, sdp_port;
    uint8_t pmtime;
    bool up;
} svc;

typedef struct world {
    svc s[8];
    size_t ns;
    int lookups;
    int ev[4];  /* count per event type */
    int why[4]; /* RELEASED count per reason */
    uint64_t last_assoc;
    bool move_ip; /* answer with another ApIPAddr */
} world;

static int lookup(void *ud, const uw_pm_msg *req, const uw_pm_udp_addr *from, uw_pm_mapping *out)
{
    world *w = ud;
    (void)from;
    w->lookups++;
    /* The default answer is the requested address and port. */
    assert_memory_equal(out->ip, req->ap_ip, 16);
    assert_int_equal(out->port, req->ap_port);
    for (size_t i = 0; i < w->ns; i++) {
        if (w->s[i].port == req->ap_port && w->s[i].up) {
            out->port = w->s[i].sdp_port;
            out->pmtime = w->s[i].pmtime;
            if (w->move_ip)
                out->ip[3] ^= 0x55;
            return 1;
        }
    }
    return 0;
}

static void on_event(void *ud, const uw_pm_server_event *ev)
{
    world *w = ud;
    assert_true(ev->type >= 1 && ev->type <= 3);
    w->ev[ev->type]++;
    if (ev->type == UW_PM_EV_RELEASED) {
        assert_true(ev->why >= 1 && ev->why <= 3);
        w->why[ev->why]++;
    }
    w->last_assoc = ev->req->assoc;
}

static uw_pm_server *mk(world *w, size_t max_pending, bool rate)
{
    uw_pm_server_opts o;
    memset(&o, 0, sizeof(o));
    o.lookup = lookup;
    o.lookup_ud = w;
    o.on_event = on_event;
    o.event_ud = w;
    o.accept_timeout_ns = 1000 * MS;
    o.ack_linger_ns = 3000 * MS;
    o.max_pending = max_pending;
    o.rate_unlimited = !rate;
    o.rate_per_s = 10;
    o.rate_burst = 20;
    o.hash_seed = 0x1234;
    uw_pm_server *s = NULL;
    assert_int_equal(uw_pm_server_create(&s, &o), 0);
    return s;
}

static world world1(void)
{
    world w;
    memset(&w, 0, sizeof(w));
    w.s[0] = (svc){80, 8080, 20, true};
    w.s[1] = (svc){81, 0, 0, false};
    w.ns = 2;
    return w;
}

static uw_pm_msg req4(uint64_t assoc, uint16_t cp_port, uint16_t ap_port)
{
    uw_pm_msg m;
    memset(&m, 0, sizeof(m));
    m.type = UW_PM_REQ;
    m.ipv = 4;
    m.assoc = assoc;
    m.cp_port = cp_port;
    m.ap_port = ap_port;
    const uint8_t cp[4] = {172, 16, 0, 1}, ap[4] = {172, 16, 0, 2};
    memcpy(m.cp_ip, cp, 4);
    memcpy(m.ap_ip, ap, 4);
    return m;
}

static uw_pm_udp_addr src4(uint8_t last, uint16_t port)
{
    uw_pm_udp_addr a;
    memset(&a, 0, sizeof(a));
    a.ipv = 4;
    a.ip[0] = 172;
    a.ip[1] = 16;
    a.ip[3] = last;
    a.port = port;
    return a;
}

/* Sends m from from; returns the verdict and decodes the reply into *r
 * (type 0xFF when there is none). */
static int feed(uw_pm_server *s, uint64_t now, const uw_pm_msg *m, const uw_pm_udp_addr *from,
                uw_pm_msg *r, uw_pm_datagram *d)
{
    uint8_t b[UW_PM_MSG_LEN];
    uw_pm_datagram tmp;
    if (!d)
        d = &tmp;
    assert_int_equal(uw_pm_encode(m, b, sizeof(b)), UW_PM_MSG_LEN);
    int v = uw_pm_server_recv(s, now, b, sizeof(b), from, d);
    if (d->len) {
        assert_int_equal(d->len, UW_PM_MSG_LEN);
        assert_memory_equal(&d->to, from, sizeof(*from)); /* 7.4: back to the source */
        assert_int_equal(uw_pm_decode(d->data, d->len, r), 0);
    } else {
        r->type = 0xFF;
    }
    return v;
}

static uw_pm_msg ack_of(const uw_pm_msg *accept)
{
    uw_pm_msg a = *accept;
    a.type = UW_PM_ACK;
    a.pmtime = 0;
    return a;
}

static uint64_t pending(const uw_pm_server *s)
{
    uw_pm_server_stats st;
    uw_pm_server_stats_get(s, &st);
    return st.pending;
}

/* ------------------------------------------------------------------------ */

/* 7.4: "If the port mapping operation is successful, the PM Server MUST
 * return a PMAccept Message", to the PMReq's UDP source, with Ver 0, the
 * PMReq's IPV, MT 1, PmTime in range, ApPort the SDP listen port, the PMReq's
 * CpPort, AssocHandle and CpIPAddr, and the Accepting Peer's ApIPAddr (which
 * MAY differ from the requested one). */
static void test_accept_fields(void **state)
{
    (void)state;
    for (int v = 0; v < 2; v++) {
        world w = world1();
        w.move_ip = v == 1;
        uw_pm_server *s = mk(&w, 0, false);
        uw_pm_msg q = req4(0xABCDEF0123456789ull, 50000, 80), r;
        uw_pm_udp_addr from = src4(1, 41000);
        if (v) {
            q.ipv = 6;
            memset(q.cp_ip + 4, 0x11, 12);
            memset(q.ap_ip + 4, 0x22, 12);
            from.ipv = 6;
        }
        uw_pm_datagram d;
        assert_int_equal(feed(s, T0, &q, &from, &r, &d), UW_PM_S_ACCEPT);
        assert_int_equal(d.data[0] >> 6, 0);
        assert_int_equal((d.data[0] >> 4) & 3, UW_PM_ACCEPT);
        assert_int_equal(d.data[0] & 15, q.ipv);
        assert_int_equal(r.pmtime, 20);
        assert_int_equal(r.ap_port, 8080);
        assert_int_equal(r.cp_port, q.cp_port);
        assert_true(r.assoc == q.assoc);
        assert_memory_equal(r.cp_ip, q.cp_ip, 16);
        uint8_t want_ap[16];
        memcpy(want_ap, q.ap_ip, 16);
        if (w.move_ip)
            want_ap[3] ^= 0x55;
        assert_memory_equal(r.ap_ip, want_ap, 16);
        assert_int_equal(w.ev[UW_PM_EV_ACCEPTED], 1);
        assert_int_equal(pending(s), 1);
        uw_pm_server_destroy(s);
    }
}

/* 7.4: "If the port mapping operation is not successful, the Accepting Peer
 * MUST return a PMDeny Message" to the PMReq's source, with Ver 0, IPV, MT 3,
 * PmTime 0 and every other field of the PMReq. No state is kept for it. */
static void test_deny_fields(void **state)
{
    (void)state;
    world w = world1();
    uw_pm_server *s = mk(&w, 0, false);
    const uint16_t ports[2] = {81, 9999}; /* down, unknown */
    for (int i = 0; i < 2; i++) {
        uw_pm_msg q = req4(77, 50001, ports[i]), r;
        uw_pm_udp_addr from = src4(1, 41001);
        uw_pm_datagram d;
        assert_int_equal(feed(s, T0, &q, &from, &r, &d), UW_PM_S_DENY);
        assert_int_equal(d.data[0] >> 6, 0);
        assert_int_equal((d.data[0] >> 4) & 3, UW_PM_DENY);
        assert_int_equal(d.data[0] & 15, 4);
        assert_int_equal(d.data[1], 0);
        assert_int_equal(r.ap_port, q.ap_port);
        assert_int_equal(r.cp_port, q.cp_port);
        assert_true(r.assoc == q.assoc);
        assert_memory_equal(r.cp_ip, q.cp_ip, 16);
        assert_memory_equal(r.ap_ip, q.ap_ip, 16);
    }
    assert_int_equal(pending(s), 0);
    assert_int_equal(w.ev[UW_PM_EV_ACCEPTED], 0);
    uw_pm_server_destroy(s);
}

/* 7.5: a PMReq matching the 5-tuple "MUST" be treated as a duplicate; 7.5.2:
 * the PMSP "MUST reply with either a PMAccept or a PMDeny", and should reset
 * the PMAccept's timer. A differing field of the 5-tuple is another request. */
static void test_duplicate_req(void **state)
{
    (void)state;
    world w = world1();
    uw_pm_server *s = mk(&w, 0, false);
    uw_pm_msg q = req4(5, 50002, 80), r;
    uw_pm_udp_addr from = src4(1, 41002);
    assert_int_equal(feed(s, T0, &q, &from, &r, NULL), UW_PM_S_ACCEPT);
    assert_true(uw_pm_server_next_deadline(s) == T0 + 1000 * MS);
    for (int i = 1; i <= 3; i++) {
        uint64_t now = T0 + (uint64_t)i * 600 * MS; /* past the first timeout by now */
        assert_int_equal(feed(s, now, &q, &from, &r, NULL), UW_PM_S_DUP_ACCEPT);
        assert_int_equal(r.type, UW_PM_ACCEPT);
        assert_int_equal(r.ap_port, 8080);
        assert_true(uw_pm_server_next_deadline(s) == now + 1000 * MS);
    }
    assert_int_equal(pending(s), 1);
    assert_int_equal(w.ev[UW_PM_EV_ACCEPTED], 1);
    assert_int_equal(w.ev[UW_PM_EV_RELEASED], 0);
    /* Each of ApPort, CpPort, ApIPAddr, CpIPAddr makes another transaction. */
    for (int f = 0; f < 4; f++) {
        uw_pm_msg o = q;
        if (f == 0)
            o.ap_port = 80; /* same port ... */
        if (f == 0)
            o.ap_ip[2] = 9; /* ... other ApIPAddr */
        if (f == 1)
            o.cp_port++;
        if (f == 2)
            o.cp_ip[2] = 9;
        if (f == 3) {
            o.ap_port = 81;
            w.s[1].up = true;
            w.s[1].sdp_port = 8181;
        }
        assert_int_equal(feed(s, T0 + 1800 * MS, &o, &from, &r, NULL), UW_PM_S_ACCEPT);
    }
    assert_int_equal(pending(s), 5);
    uw_pm_server_stats st;
    uw_pm_server_stats_get(s, &st);
    assert_int_equal(st.duplicates, 3);
    uw_pm_server_destroy(s);
}

/* 7.5.2: a duplicate SHOULD be answered with the service's most recent state:
 * a service that went away turns the reply into a PMDeny (and releases the
 * transaction); one that moved gets the new port. */
static void test_duplicate_current_state(void **state)
{
    (void)state;
    world w = world1();
    uw_pm_server *s = mk(&w, 0, false);
    uw_pm_msg q = req4(6, 50003, 80), r;
    uw_pm_udp_addr from = src4(1, 41003);
    assert_int_equal(feed(s, T0, &q, &from, &r, NULL), UW_PM_S_ACCEPT);
    w.s[0].sdp_port = 8090;
    assert_int_equal(feed(s, T0 + MS, &q, &from, &r, NULL), UW_PM_S_DUP_ACCEPT);
    assert_int_equal(r.ap_port, 8090);
    w.s[0].up = false;
    assert_int_equal(feed(s, T0 + 2 * MS, &q, &from, &r, NULL), UW_PM_S_DUP_DENY);
    assert_int_equal(r.type, UW_PM_DENY);
    assert_int_equal(pending(s), 0);
    assert_int_equal(w.why[UW_PM_REL_DENIED], 1);
    /* Without state the next copy is new: still denied, nothing kept. */
    assert_int_equal(feed(s, T0 + 3 * MS, &q, &from, &r, NULL), UW_PM_S_DENY);
    w.s[0].up = true;
    assert_int_equal(feed(s, T0 + 4 * MS, &q, &from, &r, NULL), UW_PM_S_ACCEPT);
    assert_int_equal(w.lookups, 5);
    uw_pm_server_destroy(s);
}

/* 7.5.2: "If a PMAck Message or LLP Connection setup request is not received
 * before the end of the timeout interval, all resources associated with the
 * PMReq MUST be deleted." */
static void test_timeout_releases(void **state)
{
    (void)state;
    world w = world1();
    uw_pm_server *s = mk(&w, 0, false);
    uw_pm_msg r, acc[3];
    uw_pm_udp_addr from = src4(1, 41004);
    for (int i = 0; i < 3; i++) {
        uw_pm_msg q = req4(100 + (uint64_t)i, (uint16_t)(50010 + i), 80);
        assert_int_equal(feed(s, T0 + (uint64_t)i * 100 * MS, &q, &from, &acc[i], NULL),
                         UW_PM_S_ACCEPT);
    }
    assert_int_equal(pending(s), 3);
    uw_pm_server_tick(s, T0 + 1000 * MS - 1);
    assert_int_equal(pending(s), 3);
    uw_pm_server_tick(s, T0 + 1000 * MS);
    assert_int_equal(pending(s), 2);
    assert_true(uw_pm_server_next_deadline(s) == T0 + 1100 * MS);
    uw_pm_server_tick(s, T0 + 5000 * MS);
    assert_int_equal(pending(s), 0);
    assert_true(uw_pm_server_next_deadline(s) == UW_PM_FOREVER);
    assert_int_equal(w.why[UW_PM_REL_TIMEOUT], 3);
    uw_pm_server_stats st;
    uw_pm_server_stats_get(s, &st);
    assert_int_equal(st.timeouts, 3);
    /* The state is gone: a late PMAck relates to nothing. */
    uw_pm_msg a = ack_of(&acc[0]);
    assert_int_equal(feed(s, T0 + 5001 * MS, &a, &from, &r, NULL), UW_PM_S_ACK_UNKNOWN);
    uw_pm_server_destroy(s);
}

/* 7.5.2: the timer is "disabled when either a PMAck or LLP connection setup
 * request ... has occurred": no release, and after the linger time the state
 * is forgotten silently (the connection must be unaffected). */
static void test_ack_and_llp_stop_timer(void **state)
{
    (void)state;
    world w = world1();
    uw_pm_server *s = mk(&w, 0, false);
    uw_pm_msg qa = req4(200, 50020, 80), qb = req4(201, 50021, 80), ra, rb, r;
    uw_pm_udp_addr from = src4(1, 41005);
    assert_int_equal(feed(s, T0, &qa, &from, &ra, NULL), UW_PM_S_ACCEPT);
    assert_int_equal(feed(s, T0, &qb, &from, &rb, NULL), UW_PM_S_ACCEPT);
    uw_pm_msg a = ack_of(&ra);
    assert_int_equal(feed(s, T0 + 10 * MS, &a, &from, &r, NULL), UW_PM_S_ACK);
    assert_int_equal(r.type, 0xFF); /* a PMAck gets no reply */
    assert_int_equal(feed(s, T0 + 11 * MS, &a, &from, &r, NULL), UW_PM_S_ACK_DUPLICATE);
    assert_int_equal(
        uw_pm_server_llp_connected(s, T0 + 20 * MS, 4, qb.cp_ip, qb.cp_port, rb.ap_ip, rb.ap_port),
        0);
    assert_int_equal(
        uw_pm_server_llp_connected(s, T0 + 20 * MS, 4, qb.cp_ip, qb.cp_port, rb.ap_ip, rb.ap_port),
        UW_ENOENT);
    assert_int_equal(uw_pm_server_llp_connected(s, T0, 5, qb.cp_ip, 1, rb.ap_ip, 1), UW_EINVAL);
    assert_int_equal(w.ev[UW_PM_EV_ACKED], 2);
    uw_pm_server_tick(s, T0 + 2000 * MS);
    assert_int_equal(w.ev[UW_PM_EV_RELEASED], 0);
    assert_int_equal(pending(s), 2);
    /* A late duplicate PMReq while lingering: answered, no new timer. */
    assert_int_equal(feed(s, T0 + 2500 * MS, &qa, &from, &r, NULL), UW_PM_S_DUP_ACCEPT);
    assert_true(uw_pm_server_next_deadline(s) == T0 + 3010 * MS);
    uw_pm_server_tick(s, T0 + 3020 * MS);
    assert_int_equal(pending(s), 0);
    assert_int_equal(w.ev[UW_PM_EV_RELEASED], 0);
    uw_pm_server_stats st;
    uw_pm_server_stats_get(s, &st);
    assert_int_equal(st.acks, 2);
    assert_int_equal(st.timeouts, 0);
    uw_pm_server_destroy(s);
}

/* 7.5.2: "if a PMSP receives a PMAck Message which does not relate to any
 * known state, it MUST discard the PMAck message": no reply, no change. */
static void test_unknown_ack(void **state)
{
    (void)state;
    world w = world1();
    uw_pm_server *s = mk(&w, 0, false);
    uw_pm_msg q = req4(300, 50030, 80), acc, r;
    uw_pm_udp_addr from = src4(1, 41006);
    assert_int_equal(feed(s, T0, &q, &from, &acc, NULL), UW_PM_S_ACCEPT);
    tu_rng g;
    tu_rng_init(&g, tu_seed(0x41434B));
    for (int i = 0; i < 500; i++) {
        uw_pm_msg a = ack_of(&acc);
        switch (i % 4) {
        case 0:
            a.assoc = tu_rng_next(&g);
            break;
        case 1:
            a.cp_port = (uint16_t)(a.cp_port + 1 + tu_rng_below(&g, 1000));
            break;
        case 2:
            a.cp_ip[3] = (uint8_t)(a.cp_ip[3] + 1 + tu_rng_below(&g, 200));
            break;
        default:
            tu_rng_fill(&g, &a, sizeof(a));
            a.type = UW_PM_ACK;
            a.ipv = 6;
            break;
        }
        assert_int_equal(feed(s, T0 + 1, &a, &from, &r, NULL), UW_PM_S_ACK_UNKNOWN);
        assert_int_equal(r.type, 0xFF);
    }
    assert_int_equal(pending(s), 1);
    assert_int_equal(w.ev[UW_PM_EV_ACKED], 0);
    /* The right one still works, even with another ApPort (the mapping
     * changed since) because it is found by the PMReq's handle. */
    uw_pm_msg a = ack_of(&acc);
    a.ap_port = 1;
    assert_int_equal(feed(s, T0 + 2, &a, &from, &r, NULL), UW_PM_S_ACK);
    uw_pm_server_destroy(s);
}

/* 7.5.2: a PMReq for an accepted transaction "but the AssocHandle does not
 * match the prior request, the PMSP MUST discard and cleanup the state
 * associated with the prior request and process the new PMReq normally". */
static void test_new_handle_replaces(void **state)
{
    (void)state;
    world w = world1();
    uw_pm_server *s = mk(&w, 0, false);
    uw_pm_msg q1 = req4(400, 50040, 80), q2 = req4(401, 50040, 80), r1, r2, r;
    uw_pm_udp_addr from = src4(1, 41007);
    assert_int_equal(feed(s, T0, &q1, &from, &r1, NULL), UW_PM_S_ACCEPT);
    assert_int_equal(feed(s, T0 + MS, &q2, &from, &r2, NULL), UW_PM_S_ACCEPT);
    assert_int_equal(w.why[UW_PM_REL_REPLACED], 1);
    assert_int_equal(pending(s), 1);
    uw_pm_msg a1 = ack_of(&r1), a2 = ack_of(&r2);
    assert_int_equal(feed(s, T0 + 2 * MS, &a1, &from, &r, NULL), UW_PM_S_ACK_UNKNOWN);
    assert_int_equal(feed(s, T0 + 2 * MS, &a2, &from, &r, NULL), UW_PM_S_ACK);
    /* Also when the old one was already acknowledged; then no release event
     * (an established connection stays unaffected). */
    uw_pm_msg q3 = req4(402, 50040, 80);
    assert_int_equal(feed(s, T0 + 3 * MS, &q3, &from, &r, NULL), UW_PM_S_ACCEPT);
    assert_int_equal(w.why[UW_PM_REL_REPLACED], 1);
    assert_int_equal(pending(s), 1);
    /* And when the new request is denied, the old state goes all the same. */
    w.s[0].up = false;
    uw_pm_msg q4 = req4(403, 50040, 80);
    assert_int_equal(feed(s, T0 + 4 * MS, &q4, &from, &r, NULL), UW_PM_S_DENY);
    assert_int_equal(pending(s), 0);
    assert_int_equal(w.why[UW_PM_REL_REPLACED], 2);
    uw_pm_server_stats st;
    uw_pm_server_stats_get(s, &st);
    assert_int_equal(st.replaced, 3);
    uw_pm_server_destroy(s);
}

/* 15.2.2.1: state is bounded. When full, lingering acknowledged state makes
 * room first; otherwise the PMReq is denied (resource exhaustion) and no
 * state is created. Timeouts free the room again. */
static void test_bounded_state(void **state)
{
    (void)state;
    world w = world1();
    uw_pm_server *s = mk(&w, 8, false);
    uw_pm_msg r, acc0;
    uw_pm_udp_addr from = src4(1, 41008);
    for (uint16_t i = 0; i < 8; i++) {
        uw_pm_msg q = req4(500 + i, (uint16_t)(1000 + i), 80);
        assert_int_equal(feed(s, T0, &q, &from, i ? &r : &acc0, NULL), UW_PM_S_ACCEPT);
    }
    uw_pm_msg a = ack_of(&acc0);
    assert_int_equal(feed(s, T0, &a, &from, &r, NULL), UW_PM_S_ACK);
    uw_pm_msg q = req4(600, 2000, 80);
    assert_int_equal(feed(s, T0 + 1, &q, &from, &r, NULL), UW_PM_S_ACCEPT); /* evicted the acked */
    q = req4(601, 2001, 80);
    assert_int_equal(feed(s, T0 + 1, &q, &from, &r, NULL), UW_PM_S_FULL);
    assert_int_equal(r.type, UW_PM_DENY);
    assert_int_equal(pending(s), 8);
    uw_pm_server_stats st;
    uw_pm_server_stats_get(s, &st);
    assert_int_equal(st.full, 1);
    assert_int_equal(st.pending_peak, 8);
    /* Thousands more: still 8, all denied, nothing else grows. */
    for (uint16_t i = 0; i < 5000; i++) {
        q = req4(10000 + i, (uint16_t)(30000 + i), 80);
        assert_int_equal(feed(s, T0 + 2, &q, &from, &r, NULL), UW_PM_S_FULL);
    }
    assert_int_equal(pending(s), 8);
    uw_pm_server_tick(s, T0 + 1000 * MS + 1);
    assert_int_equal(pending(s), 0);
    assert_int_equal(feed(s, T0 + 1001 * MS, &q, &from, &r, NULL), UW_PM_S_ACCEPT);
    uw_pm_server_destroy(s);
}

/* 15.2.1: per-source rate limiting: a source gets its burst, then its rate;
 * other sources are unaffected; sources of timed-out mappings are quenched. */
static void test_rate_limit(void **state)
{
    (void)state;
    world w = world1();
    uw_pm_server *s = mk(&w, 0, true); /* 10/s, burst 20, penalty 5 */
    uw_pm_msg r;
    uw_pm_udp_addr a = src4(1, 1), b = src4(2, 1);
    int ok = 0;
    for (uint16_t i = 0; i < 100; i++) {
        uw_pm_msg q = req4(i, i, 81); /* denied: no state, only the rate counts */
        a.port = i;                   /* many source ports, one address */
        int v = feed(s, T0, &q, &a, &r, NULL);
        assert_true(v == UW_PM_S_DENY || v == UW_PM_S_RATE_LIMITED);
        assert_int_equal(r.type, v == UW_PM_S_DENY ? UW_PM_DENY : 0xFF);
        ok += v == UW_PM_S_DENY;
    }
    assert_int_equal(ok, 20);
    uw_pm_msg q = req4(1, 1, 81);
    assert_int_equal(feed(s, T0, &q, &b, &r, NULL), UW_PM_S_DENY); /* another source */
    /* 10 per second come back. */
    assert_int_equal(feed(s, T0 + 99 * MS, &q, &a, &r, NULL), UW_PM_S_RATE_LIMITED);
    assert_int_equal(feed(s, T0 + 100 * MS, &q, &a, &r, NULL), UW_PM_S_DENY);
    assert_int_equal(feed(s, T0 + 100 * MS, &q, &a, &r, NULL), UW_PM_S_RATE_LIMITED);
    /* An idle source is back at its full burst. */
    ok = 0;
    for (int i = 0; i < 30; i++)
        ok += feed(s, T0 + 60000 * MS, &q, &a, &r, NULL) == UW_PM_S_DENY;
    assert_int_equal(ok, 20);
    /* Penalty: b's accepted mappings time out; b is quenched. */
    for (uint16_t i = 0; i < 4; i++) {
        uw_pm_msg qa = req4(700 + i, (uint16_t)(3000 + i), 80);
        assert_int_equal(feed(s, T0 + 70000 * MS, &qa, &b, &r, NULL), UW_PM_S_ACCEPT);
    }
    uw_pm_server_tick(s, T0 + 71000 * MS); /* 4 timeouts: -20 tokens */
    assert_int_equal(feed(s, T0 + 71000 * MS, &q, &b, &r, NULL), UW_PM_S_RATE_LIMITED);
    uw_pm_server_stats st;
    uw_pm_server_stats_get(s, &st);
    assert_true(st.rate_limited >= 80);
    assert_int_equal(st.timeouts, 4);
    uw_pm_server_destroy(s);
}

/* PMAccept and PMDeny are not for a server; malformed datagrams are counted
 * and change nothing. */
static void test_ignored_and_malformed(void **state)
{
    (void)state;
    world w = world1();
    uw_pm_server *s = mk(&w, 0, false);
    uw_pm_udp_addr from = src4(1, 1);
    uw_pm_msg q = req4(1, 1, 80), r;
    q.type = UW_PM_ACCEPT;
    assert_int_equal(feed(s, T0, &q, &from, &r, NULL), UW_PM_S_IGNORED);
    q.type = UW_PM_DENY;
    assert_int_equal(feed(s, T0, &q, &from, &r, NULL), UW_PM_S_IGNORED);
    assert_int_equal(r.type, 0xFF);
    uint8_t junk[64] = {0x44};
    uw_pm_datagram d;
    assert_int_equal(uw_pm_server_recv(s, T0, junk, 64, &from, &d), UW_EMSGSIZE);
    assert_int_equal(d.len, 0);
    assert_int_equal(uw_pm_server_recv(s, T0, junk, 48, &from, &d), UW_EPROTO);
    assert_int_equal(uw_pm_server_recv(s, T0, NULL, 48, &from, &d), UW_EINVAL);
    uw_pm_server_stats st;
    uw_pm_server_stats_get(s, &st);
    assert_int_equal(st.ignored, 2);
    assert_int_equal(st.malformed, 2);
    assert_int_equal(st.requests, 0);
    assert_int_equal(w.lookups, 0);
    uw_pm_server_destroy(s);
}

static void test_create_errors(void **state)
{
    (void)state;
    world w = world1();
    uw_pm_server_opts o;
    memset(&o, 0, sizeof(o));
    uw_pm_server *s;
    assert_int_equal(uw_pm_server_create(&s, &o), UW_EINVAL); /* no lookup */
    o.lookup = lookup;
    o.lookup_ud = &w;
    o.max_pending = (1u << 24) + 1;
    assert_int_equal(uw_pm_server_create(&s, &o), UW_EINVAL);
    o.max_pending = 16;
    for (unsigned long n = 1; n <= 5; n++) {
        tu_failalloc fa;
        tu_failalloc_init(&fa, n);
        o.alloc = &fa.a;
        assert_int_equal(uw_pm_server_create(&s, &o), UW_ENOMEM);
    }
    tu_failalloc fa;
    tu_failalloc_init(&fa, 6);
    o.alloc = &fa.a;
    assert_int_equal(uw_pm_server_create(&s, &o), 0);
    uw_pm_server_destroy(s);
    uw_pm_server_destroy(NULL);
    assert_true(uw_pm_server_next_deadline(NULL) == UW_PM_FOREVER);
}

/* ------------------------------------------------------------------------ */
/* Simulated network                                                         */

#define NCLI 4
#define NTXN 300
#define MAXPKT 4096

typedef struct pkt {
    uint64_t at;
    int dst; /* -1: server; else client index */
    uw_pm_udp_addr from;
    uint8_t data[UW_PM_MSG_LEN];
} pkt;

typedef struct sim {
    tu_rng rng;
    unsigned loss, dup; /* percent */
    uint64_t max_delay;
    pkt q[MAXPKT];
    size_t n;
    /* Per transaction, what the server said (bit 0 accept, bit 1 deny). */
    uint64_t assoc[NTXN];
    int said[NTXN];
    uint16_t port_said[NTXN][4];
    int nport[NTXN];
    int acked[NTXN];
    size_t nassoc;
} sim;

static int txn_of(sim *m, uint64_t assoc)
{
    for (size_t i = 0; i < m->nassoc; i++)
        if (m->assoc[i] == assoc)
            return (int)i;
    return -1;
}

static void net_send(sim *m, uint64_t now, int dst, const uw_pm_udp_addr *from, const void *data)
{
    int copies = 1 + (tu_rng_below(&m->rng, 100) < m->dup);
    for (int k = 0; k < copies; k++) {
        if (tu_rng_below(&m->rng, 100) < m->loss)
            continue;
        assert_true(m->n < MAXPKT);
        pkt *p = &m->q[m->n++];
        p->at = now + 1 + tu_rng_below(&m->rng, m->max_delay);
        p->dst = dst;
        p->from = *from;
        memcpy(p->data, data, UW_PM_MSG_LEN);
    }
}

static void sim_event(void *ud, const uw_pm_server_event *ev)
{
    sim *m = ud;
    int i = txn_of(m, ev->req->assoc);
    assert_true(i >= 0);
    if (ev->type == UW_PM_EV_ACKED)
        m->acked[i]++;
}

static world *sim_world;

static int sim_lookup(void *ud, const uw_pm_msg *req, const uw_pm_udp_addr *from,
                      uw_pm_mapping *out)
{
    (void)ud;
    return lookup(sim_world, req, from, out);
}

static void run_sim(unsigned loss, unsigned dup, uint64_t seed)
{
    static sim m;
    memset(&m, 0, sizeof(m));
    tu_rng_init(&m.rng, seed);
    m.loss = loss;
    m.dup = dup;
    m.max_delay = 60 * MS;
    static world w;
    memset(&w, 0, sizeof(w));
    w.s[0] = (svc){80, 8080, 0, true};
    w.s[1] = (svc){81, 8181, 4, true};
    w.s[2] = (svc){82, 8282, 20, true}; /* flaps */
    w.s[3] = (svc){83, 0, 0, false};
    w.ns = 4;
    sim_world = &w;

    uw_pm_server_opts so;
    memset(&so, 0, sizeof(so));
    so.lookup = sim_lookup;
    so.on_event = sim_event;
    so.event_ud = &m;
    so.accept_timeout_ns = 800 * MS;
    so.rate_unlimited = true;
    so.hash_seed = seed;
    uw_pm_server *s;
    assert_int_equal(uw_pm_server_create(&s, &so), 0);
    uw_pm_udp_addr saddr = src4(200, 3935);

    uw_pm_client *c[NCLI];
    uw_pm_udp_addr caddr[NCLI];
    for (int i = 0; i < NCLI; i++) {
        uw_pm_client_opts co;
        memset(&co, 0, sizeof(co));
        co.seed = seed * 31 + (uint64_t)i;
        co.rto_ns = 100 * MS;
        co.rto_max_ns = 800 * MS;
        co.max_retries = 6;
        co.max_txns = 128;
        assert_int_equal(uw_pm_client_create(&c[i], &co), 0);
        caddr[i] = src4((uint8_t)(10 + i), (uint16_t)(5000 + i));
    }
    /* Start times, spread over 5 s. */
    uint64_t start_at[NTXN];
    int cli_of[NTXN], result_seen[NTXN];
    uint64_t ids[NTXN];
    for (int t = 0; t < NTXN; t++) {
        start_at[t] = T0 + tu_rng_below(&m.rng, 5000) * MS;
        cli_of[t] = (int)tu_rng_below(&m.rng, NCLI);
        result_seen[t] = 0;
        ids[t] = 0;
    }
    int started = 0, results = 0, timeouts = 0, same_time = 0;
    uint64_t now = T0;
    const uint64_t end = T0 + 30000 * MS;
    while (now < end) {
        /* The flapping service changes its mind every 370 ms. */
        w.s[2].up = ((now - T0) / (370 * MS)) % 2 == 0;
        for (int t = 0; t < NTXN; t++) {
            if (!ids[t] && start_at[t] <= now) {
                uw_pm_query q;
                memset(&q, 0, sizeof(q));
                q.ipv = 4;
                memcpy(q.cp_ip, caddr[cli_of[t]].ip, 4);
                q.cp_port = (uint16_t)(20000 + tu_rng_below(&m.rng, 8)); /* reused ports */
                memcpy(q.ap_ip, saddr.ip, 4);
                q.ap_port = (uint16_t)(80 + tu_rng_below(&m.rng, 4));
                q.server = saddr;
                assert_int_equal(uw_pm_client_start(c[cli_of[t]], &q, now, &ids[t]), 0);
                started++;
            }
        }
        /* Deliver everything due. */
        for (size_t i = 0; i < m.n;) {
            if (m.q[i].at > now) {
                i++;
                continue;
            }
            pkt p = m.q[i];
            m.q[i] = m.q[--m.n];
            if (p.dst < 0) {
                uw_pm_datagram rep;
                uw_pm_msg in;
                assert_int_equal(uw_pm_decode(p.data, UW_PM_MSG_LEN, &in), 0);
                if (in.type == UW_PM_REQ && txn_of(&m, in.assoc) < 0) {
                    assert_true(m.nassoc < NTXN);
                    m.assoc[m.nassoc++] = in.assoc;
                }
                int v = uw_pm_server_recv(s, now, p.data, UW_PM_MSG_LEN, &p.from, &rep);
                assert_true(v >= 0);
                if (rep.len) {
                    uw_pm_msg out;
                    assert_int_equal(uw_pm_decode(rep.data, rep.len, &out), 0);
                    int k = txn_of(&m, out.assoc);
                    assert_true(k >= 0);
                    m.said[k] |= out.type == UW_PM_ACCEPT ? 1 : 2;
                    if (out.type == UW_PM_ACCEPT && m.nport[k] < 4)
                        m.port_said[k][m.nport[k]++] = out.ap_port;
                    int to = -1;
                    for (int i2 = 0; i2 < NCLI; i2++)
                        if (memcmp(&rep.to, &caddr[i2], sizeof(rep.to)) == 0)
                            to = i2;
                    assert_true(to >= 0);
                    net_send(&m, now, to, &saddr, rep.data);
                }
            } else {
                int v = uw_pm_client_recv(c[p.dst], now, p.data, UW_PM_MSG_LEN, &p.from);
                assert_true(v >= 0 && v != UW_PM_C_IGNORED);
            }
        }
        uw_pm_server_tick(s, now);
        /* Client output and results. */
        for (int i = 0; i < NCLI; i++) {
            uw_pm_datagram d;
            while (uw_pm_client_send(c[i], now, &d) == 1) {
                assert_memory_equal(&d.to, &saddr, sizeof(saddr));
                net_send(&m, now, -1, &caddr[i], d.data);
            }
            uw_pm_result r;
            while (uw_pm_client_next_result(c[i], &r) == 1) {
                int t = -1;
                for (int k = 0; k < NTXN; k++)
                    if (cli_of[k] == i && ids[k] == r.txn)
                        t = k;
                assert_true(t >= 0);
                assert_int_equal(result_seen[t]++, 0); /* exactly one result */
                results++;
                /* The answer must be one the server gave for this handle. */
                int k = r.reason == UW_PM_R_CACHED ? -1 : txn_of(&m, r.assoc);
                if (r.reason == UW_PM_R_ACCEPT) {
                    assert_true(k >= 0 && (m.said[k] & 1));
                    bool found = false;
                    for (int j = 0; j < m.nport[k]; j++)
                        found |= m.port_said[k][j] == r.port;
                    assert_true(found);
                } else if (r.reason == UW_PM_R_DENY) {
                    assert_true(k >= 0 && (m.said[k] & 2));
                } else if (r.reason == UW_PM_R_TIMEOUT) {
                    timeouts++;
                    assert_int_equal(r.sent, 7);
                } else {
                    assert_int_equal(r.reason, UW_PM_R_CACHED);
                }
                /* Every transaction ends within its retransmission span. */
                assert_true(now - start_at[t] <= (100 + 200 + 400 + 800 * 4 + 60) * MS);
            }
        }
        /* Next event. */
        uint64_t next = end;
        for (size_t i = 0; i < m.n; i++)
            next = m.q[i].at < next ? m.q[i].at : next;
        for (int t = 0; t < NTXN; t++)
            if (!ids[t] && start_at[t] < next)
                next = start_at[t];
        for (int i = 0; i < NCLI; i++) {
            uint64_t d = uw_pm_client_next_deadline(c[i]);
            next = d < next ? d : next;
        }
        uint64_t d = uw_pm_server_next_deadline(s);
        next = d < next ? d : next;
        if (next <= now) {
            /* Something became due while this round ran (a result read
             * just now lets its slot go): one more round at the same time
             * handles it; more than that would be a livelock. */
            assert_true(++same_time < 3);
            continue;
        }
        same_time = 0;
        uint64_t flap = T0 + ((now - T0) / (370 * MS) + 1) * 370 * MS;
        now = next < flap ? next : flap;
    }
    /* Converged: every transaction answered once, all state recovered. */
    assert_int_equal(started, NTXN);
    assert_int_equal(results, NTXN);
    uw_pm_server_tick(s, end);
    assert_int_equal(pending(s), 0);
    assert_true(uw_pm_server_next_deadline(s) == UW_PM_FOREVER);
    for (int i = 0; i < NCLI; i++) {
        uw_pm_client_tick(c[i], end);
        assert_int_equal(uw_pm_client_txns(c[i]), 0);
    }
    /* A PMAck only ever follows a PMAccept, once per transaction. */
    for (size_t k = 0; k < m.nassoc; k++) {
        assert_true(m.acked[k] <= 1);
        if (m.acked[k])
            assert_true(m.said[k] & 1);
    }
    uw_pm_server_stats st;
    uw_pm_server_stats_get(s, &st);
    fprintf(stderr,
            "# sim loss %u%% dup %u%%: %d txns, %d timeouts; server: %llu reqs, %llu dups, "
            "%llu accepts, %llu denies, %llu acks, %llu timeouts, %llu replaced\n",
            loss, dup, NTXN, timeouts, (unsigned long long)st.requests,
            (unsigned long long)st.duplicates, (unsigned long long)st.accepts,
            (unsigned long long)st.denies, (unsigned long long)st.acks,
            (unsigned long long)st.timeouts, (unsigned long long)st.replaced);
    if (loss == 0) {
        /* Nothing lost: every PMReq is answered, so no client times out.
         * A PMAccept can still go unacknowledged on the server, but only when
         * a reused CpPort made a delayed PMReq replace newer state (7.5.2),
         * whose PMAccept the client then discards as a duplicate. */
        assert_int_equal(timeouts, 0);
        assert_true(st.timeouts <= st.replaced);
        assert_true(st.acks > 0);
    } else {
        assert_true(st.duplicates > 0); /* the test did exercise retransmission */
    }
    for (int i = 0; i < NCLI; i++)
        uw_pm_client_destroy(c[i]);
    uw_pm_server_destroy(s);
}

/* 7.2 goal 1 and 7.5: whatever is lost, both ends converge and recover all
 * state. Several seeds per network quality. */
static void test_sim_converge(void **state)
{
    (void)state;
    uint64_t seed = tu_seed(0x53494D);
    const unsigned loss[] = {0, 0, 10, 30, 50};
    const unsigned dup[] = {0, 30, 10, 20, 30};
    for (int k = 0; k < 5; k++)
        for (uint64_t j = 0; j < 3; j++)
            run_sim(loss[k], dup[k], seed + j * 7919 + (uint64_t)k);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_accept_fields),
        cmocka_unit_test(test_deny_fields),
        cmocka_unit_test(test_duplicate_req),
        cmocka_unit_test(test_duplicate_current_state),
        cmocka_unit_test(test_timeout_releases),
        cmocka_unit_test(test_ack_and_llp_stop_timer),
        cmocka_unit_test(test_unknown_ack),
        cmocka_unit_test(test_new_handle_replaces),
        cmocka_unit_test(test_bounded_state),
        cmocka_unit_test(test_rate_limit),
        cmocka_unit_test(test_ignored_and_malformed),
        cmocka_unit_test(test_create_errors),
        cmocka_unit_test(test_sim_converge),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
