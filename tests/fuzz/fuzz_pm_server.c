/* Fuzz target: PM server (PMSP) state machine (draft-pinkerton-iwarp-sdp-01
 * 7.4, 7.5, 7.5.2, 15.2) driven by an op script, checked against a model of
 * the transactions it reports through its events.
 *
 * Ops (one byte each, then operands; reads past the end give zeros):
 *   0 PMReq   b: AssocHandle (4 values), CpPort (4), service (80 mapped,
 *             81 flapping, 82 unmapped, 83 mapped), then a source byte
 *   1 PMAck   b: which reply so far; mutation byte (bit0 AssocHandle, bit1
 *             CpPort, bit2 ApPort)
 *   2 raw     b: length (mod 64), then that many octets
 *   3 time    u16 milliseconds forward
 *   4 flip    service 81 up/down and its SDP port
 *   5 llp     the LLP connection for reply b arrives (7.5.2)
 * Checks: replies go to the source and echo the PMReq as 7.4 says; the
 * verdict agrees with the model (a duplicate needs a held 5-tuple, an ACK a
 * pending one); pending never exceeds the cap; an hour later nothing is
 * pending and every accepted transaction was acknowledged or released. */
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "uwarp/pm.h"

#define MS UW_PM_NS_PER_MS
#define MAXR 512

enum { M_NONE, M_PENDING, M_ACKED };

typedef struct model {
    /* The 4-tuples op 0 builds differ only in CpPort (4) and service (4):
     * the state of each and the AssocHandle that holds it. */
    int state[4][4];
    uint64_t assoc[4][4];
    bool up81;
    uint16_t port81;
    int events_this_call[4];
    uw_pm_msg replies[MAXR];
    size_t nr;
    uint64_t accepted, acked, released;
} model;

static int svc_index(uint16_t port)
{
    return port >= 80 && port <= 83 ? port - 80 : -1;
}

static int lookup(void *ud, const uw_pm_msg *req, const uw_pm_udp_addr *from, uw_pm_mapping *out)
{
    model *m = ud;
    (void)from;
    if (req->ap_port == 80 || req->ap_port == 83) {
        out->port = (uint16_t)(req->ap_port + 8000);
        out->pmtime = (uint8_t)req->ap_port;
        return 1;
    }
    if (req->ap_port == 81 && m->up81) {
        out->port = m->port81;
        return 1;
    }
    return 0;
}

static bool modeled(const uw_pm_msg *r)
{
    static const uint8_t cp[16] = {192}, ap[16] = {198};
    return r->ipv == 4 && r->cp_port >= 2000 && r->cp_port < 2004 && svc_index(r->ap_port) >= 0 &&
           memcmp(r->cp_ip, cp, 16) == 0 && memcmp(r->ap_ip, ap, 16) == 0;
}

static void on_event(void *ud, const uw_pm_server_event *ev)
{
    model *m = ud;
    FZ_CHECK(ev->type >= UW_PM_EV_ACCEPTED && ev->type <= UW_PM_EV_RELEASED);
    m->events_this_call[ev->type]++;
    m->accepted += ev->type == UW_PM_EV_ACCEPTED;
    m->acked += ev->type == UW_PM_EV_ACKED;
    m->released += ev->type == UW_PM_EV_RELEASED;
    if (!modeled(ev->req))
        return; /* a raw datagram's tuple: only counted */
    int *st = &m->state[ev->req->cp_port - 2000][svc_index(ev->req->ap_port)];
    uint64_t *as = &m->assoc[ev->req->cp_port - 2000][svc_index(ev->req->ap_port)];
    if (ev->type == UW_PM_EV_ACCEPTED) {
        /* Any earlier state of this tuple is gone by now: released (an
         * event came) or acknowledged and then forgotten. */
        FZ_CHECK(*st != M_PENDING);
        *st = M_PENDING;
        *as = ev->req->assoc;
    } else if (ev->type == UW_PM_EV_ACKED) {
        FZ_CHECK(*st == M_PENDING && *as == ev->req->assoc);
        *st = M_ACKED;
    } else {
        FZ_CHECK(*st == M_PENDING && *as == ev->req->assoc);
        *st = M_NONE;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fz_in in;
    fz_in_init(&in, data, size);
    model *m = calloc(1, sizeof(*m));
    FZ_CHECK(m != NULL);
    uw_pm_server_opts o;
    memset(&o, 0, sizeof(o));
    o.lookup = lookup;
    o.lookup_ud = m;
    o.on_event = on_event;
    o.event_ud = m;
    uint8_t cfg = fz_u8(&in);
    o.max_pending = 1 + cfg % 8;
    o.accept_timeout_ns = (100 + (cfg >> 3) * 100) * MS;
    o.rate_unlimited = (cfg & 0x80) == 0;
    o.rate_per_s = 5;
    o.rate_burst = 5;
    o.hash_seed = fz_u32(&in);
    uw_pm_server *s;
    FZ_CHECK(uw_pm_server_create(&s, &o) == 0);
    uint64_t now = 1000 * MS;

    while (fz_left(&in) > 0) {
        uint8_t op = fz_u8(&in) % 6, b = fz_u8(&in);
        memset(m->events_this_call, 0, sizeof(m->events_this_call));
        uw_pm_msg q;
        memset(&q, 0, sizeof(q));
        q.ipv = 4;
        q.cp_ip[0] = 192;
        q.ap_ip[0] = 198;
        uw_pm_udp_addr from;
        memset(&from, 0, sizeof(from));
        from.ipv = 4;
        from.ip[0] = 127;
        uint8_t buf[64];
        size_t len = UW_PM_MSG_LEN;
        if (op == 0) {
            q.type = UW_PM_REQ;
            q.assoc = 0xA550C000u + (b & 3);
            q.cp_port = (uint16_t)(2000 + ((b >> 2) & 3));
            q.ap_port = (uint16_t)(80 + ((b >> 4) & 3));
            uint8_t src = fz_u8(&in);
            from.ip[3] = src & 3;
            from.port = (uint16_t)(40000 + (src >> 2));
            FZ_CHECK(uw_pm_encode(&q, buf, sizeof(buf)) == UW_PM_MSG_LEN);
        } else if (op == 1 || op == 5) {
            uint8_t mut = op == 1 ? fz_u8(&in) : 0;
            if (m->nr == 0)
                continue;
            q = m->replies[b % m->nr];
            if (op == 5) {
                int rc = uw_pm_server_llp_connected(s, now, q.ipv, q.cp_ip, q.cp_port, q.ap_ip,
                                                    q.ap_port);
                FZ_CHECK(rc == 0 || rc == UW_ENOENT);
                FZ_CHECK((rc == 0) == (m->events_this_call[UW_PM_EV_ACKED] == 1));
                continue;
            }
            q.type = UW_PM_ACK;
            q.assoc ^= mut & 1;
            q.cp_port ^= (mut >> 1) & 1;
            q.ap_port ^= (mut >> 2) & 1;
            FZ_CHECK(uw_pm_encode(&q, buf, sizeof(buf)) == UW_PM_MSG_LEN);
        } else if (op == 2) {
            len = b % 64;
            size_t n = len;
            const uint8_t *p = fz_take(&in, &n);
            memset(buf, 0, sizeof(buf));
            memcpy(buf, p, n);
        } else if (op == 3) {
            now += (uint64_t)(b << 8 | fz_u8(&in)) * MS;
            uw_pm_server_tick(s, now);
            continue;
        } else {
            m->up81 = !m->up81;
            m->port81 = (uint16_t)(9000 + b);
            continue;
        }
        /* The model state of this request's 4-tuple before the call. */
        int c = q.cp_port - 2000, sv = svc_index(q.ap_port);
        bool is_model = op == 0;
        int before = is_model ? m->state[c][sv] : 0;
        uint64_t before_assoc = is_model ? m->assoc[c][sv] : 0;
        uw_pm_datagram rep;
        int v = uw_pm_server_recv(s, now, buf, len, &from, &rep);
        FZ_DEBUG("op %u v %d\n", op, v);
        FZ_CHECK(v == UW_EMSGSIZE || v == UW_EPROTO || (v >= 0 && v <= UW_PM_S_IGNORED));
        bool has_reply = v == UW_PM_S_ACCEPT || v == UW_PM_S_DENY || v == UW_PM_S_DUP_ACCEPT ||
                         v == UW_PM_S_DUP_DENY || v == UW_PM_S_FULL;
        FZ_CHECK((rep.len != 0) == has_reply);
        if (has_reply) {
            uw_pm_msg r, in_msg;
            FZ_CHECK(memcmp(&rep.to, &from, sizeof(from)) == 0);
            FZ_CHECK(uw_pm_decode(rep.data, rep.len, &r) == 0);
            FZ_CHECK(uw_pm_decode(buf, len, &in_msg) == 0);
            bool acc = v == UW_PM_S_ACCEPT || v == UW_PM_S_DUP_ACCEPT;
            FZ_CHECK(r.type == (acc ? UW_PM_ACCEPT : UW_PM_DENY));
            FZ_CHECK(r.ipv == in_msg.ipv && r.assoc == in_msg.assoc &&
                     r.cp_port == in_msg.cp_port && memcmp(r.cp_ip, in_msg.cp_ip, 16) == 0);
            if (!acc)
                FZ_CHECK(r.ap_port == in_msg.ap_port && r.pmtime == 0 &&
                         memcmp(r.ap_ip, in_msg.ap_ip, 16) == 0);
            if (acc && m->nr < MAXR)
                m->replies[m->nr++] = r;
        }
        if (is_model && v >= 0) {
            uw_pm_server_stats st0;
            uw_pm_server_stats_get(s, &st0);
            if (v == UW_PM_S_DUP_ACCEPT || v == UW_PM_S_DUP_DENY)
                FZ_CHECK(before != M_NONE && before_assoc == q.assoc);
            if (v == UW_PM_S_ACCEPT)
                FZ_CHECK(m->events_this_call[UW_PM_EV_ACCEPTED] == 1);
            if (v == UW_PM_S_DUP_DENY && before == M_PENDING)
                FZ_CHECK(m->events_this_call[UW_PM_EV_RELEASED] >= 1);
            if (v == UW_PM_S_FULL)
                FZ_CHECK(st0.pending == o.max_pending);
        }
        if (v == UW_PM_S_ACK)
            FZ_CHECK(m->events_this_call[UW_PM_EV_ACKED] == 1);
        else
            FZ_CHECK(m->events_this_call[UW_PM_EV_ACKED] == 0);
        uw_pm_server_stats st;
        uw_pm_server_stats_get(s, &st);
        FZ_CHECK(st.pending <= o.max_pending && st.pending_peak <= o.max_pending);
    }
    now += 3600000 * MS;
    uw_pm_server_tick(s, now);
    uw_pm_server_stats st;
    uw_pm_server_stats_get(s, &st);
    FZ_CHECK(st.pending == 0);
    FZ_CHECK(uw_pm_server_next_deadline(s) == UW_PM_FOREVER);
    FZ_CHECK(m->accepted == m->acked + m->released);
    for (int c = 0; c < 4; c++)
        for (int sv = 0; sv < 4; sv++)
            FZ_CHECK(m->state[c][sv] != M_PENDING);
    uw_pm_server_destroy(s);
    free(m);
    return 0;
}
