/* Fuzz target: PM client state machine (draft-pinkerton-iwarp-sdp-01 7.4,
 * 7.5.1) driven by an op script, on a virtual clock.
 *
 * Ops (one byte each, then operands; reads past the end give zeros):
 *   0 start       b: bit0 IPv6, bits1-2 CpPort (4 values, so they collide),
 *                 bits3-4 service (4 values, so the cache is hit)
 *   1 reply       b: which PMReq seen so far, bit7 PMDeny; then PmTime,
 *                 port, and a mutation byte (bit0 flips AssocHandle, bit1
 *                 CpPort, bit2 CpIPAddr, bit3 makes it a PMReq/PMAck)
 *   2 raw         b: length (mod 64), then that many octets as a datagram
 *   3 time        u16 milliseconds forward (u8 backwards when bit15 set)
 *   4 drain       every queued datagram is taken and checked
 *   5 misc        b: read results / cancel a transaction / report a reset /
 *                 flush the cache
 * Checks: PMReqs carry the query's fields and are byte-identical on every
 * retransmission of a transaction; PMAcks come only after an ACCEPTED verdict
 * and repeat that PMAccept; a discarded reply queues nothing; every started
 * transaction gets exactly one result; after an hour of virtual time every
 * slot is free and only permanent cache entries remain. */
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "uwarp/pm.h"

#define MAXT 256
#define MS UW_PM_NS_PER_MS

typedef struct st {
    uw_pm_client *c;
    uint64_t now;
    uint64_t id[MAXT];
    uw_pm_query q[MAXT];
    int results[MAXT];
    size_t nt;
    /* First PMReq of each AssocHandle. */
    uint8_t req[MAXT][UW_PM_MSG_LEN];
    uint64_t req_assoc[MAXT];
    size_t nreq;
    uint64_t accepted, acks;
    uint8_t last_accept[UW_PM_MSG_LEN];
    bool ack_due;
} st;

static int txn_index(st *s, uint64_t id)
{
    for (size_t i = 0; i < s->nt; i++)
        if (s->id[i] == id)
            return (int)i;
    return -1;
}

static void drain(st *s)
{
    uw_pm_datagram d;
    int rc;
    while ((rc = uw_pm_client_send(s->c, s->now, &d)) == 1) {
        uw_pm_msg m;
        FZ_CHECK(d.len == UW_PM_MSG_LEN && uw_pm_decode(d.data, d.len, &m) == 0);
        if (m.type == UW_PM_ACK) {
            FZ_CHECK(s->ack_due);
            uw_pm_msg a;
            FZ_CHECK(uw_pm_decode(s->last_accept, UW_PM_MSG_LEN, &a) == 0);
            FZ_CHECK(m.assoc == a.assoc && m.cp_port == a.cp_port && m.ap_port == a.ap_port &&
                     m.ipv == a.ipv && memcmp(m.cp_ip, a.cp_ip, 16) == 0 &&
                     memcmp(m.ap_ip, a.ap_ip, 16) == 0 && m.pmtime == 0);
            s->ack_due = false;
            s->acks++;
            continue;
        }
        FZ_CHECK(m.type == UW_PM_REQ && d.data[1] == 0 && d.to.port == UW_PM_PORT);
        size_t k;
        for (k = 0; k < s->nreq; k++)
            if (s->req_assoc[k] == m.assoc && memcmp(s->req[k] + 4, d.data + 4, 4) == 0)
                break;
        if (k < s->nreq) {
            FZ_CHECK(memcmp(s->req[k], d.data, UW_PM_MSG_LEN) == 0); /* 7.5.1 */
        } else if (s->nreq < MAXT) {
            memcpy(s->req[s->nreq], d.data, UW_PM_MSG_LEN);
            s->req_assoc[s->nreq++] = m.assoc;
        }
    }
    FZ_CHECK(rc == 0);
}

static void results(st *s)
{
    uw_pm_result r;
    while (uw_pm_client_next_result(s->c, &r) == 1) {
        int i = txn_index(s, r.txn);
        FZ_CHECK(i >= 0);
        FZ_CHECK(s->results[i]++ == 0);
        FZ_CHECK(r.ipv == s->q[i].ipv);
        if (r.outcome == UW_PM_USE_CONVENTIONAL)
            FZ_CHECK(r.port == s->q[i].ap_port &&
                     memcmp(r.ip, s->q[i].ap_ip, r.ipv == 4 ? 4 : 16) == 0);
        else
            FZ_CHECK(r.outcome == UW_PM_USE_SDP &&
                     (r.reason == UW_PM_R_ACCEPT || r.reason == UW_PM_R_CACHED));
    }
}

static uw_pm_query make_query(uint8_t b)
{
    uw_pm_query q;
    memset(&q, 0, sizeof(q));
    q.ipv = (b & 1) ? 6 : 4;
    q.cp_ip[0] = 10;
    q.cp_ip[3] = 1;
    q.ap_ip[0] = 10;
    q.ap_ip[3] = 2;
    q.cp_port = (uint16_t)(1000 + ((b >> 1) & 3));
    q.ap_port = (uint16_t)(80 + ((b >> 3) & 3));
    q.server.ipv = q.ipv;
    memcpy(q.server.ip, q.ap_ip, 16);
    return q;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fz_in in;
    fz_in_init(&in, data, size);
    st *s = calloc(1, sizeof(*s));
    FZ_CHECK(s != NULL);
    uw_pm_client_opts o;
    memset(&o, 0, sizeof(o));
    o.seed = fz_u32(&in);
    o.rto_ns = 100 * MS;
    o.rto_max_ns = 400 * MS;
    o.max_retries = 1 + fz_u8(&in) % 4;
    o.max_txns = 1 + fz_u8(&in) % 8;
    o.cache_max = 1 + fz_u8(&in) % 4;
    FZ_CHECK(uw_pm_client_create(&s->c, &o) == 0);
    s->now = 1000 * MS;
    uw_pm_udp_addr srv;
    memset(&srv, 0, sizeof(srv));
    srv.ipv = 4;
    srv.port = UW_PM_PORT;

    while (fz_left(&in) > 0) {
        uint8_t op = fz_u8(&in) % 6, b = fz_u8(&in);
        FZ_DEBUG("op %u b %u now %llu\n", op, b, (unsigned long long)s->now);
        if (op == 0) {
            if (s->nt == MAXT)
                continue;
            uw_pm_query q = make_query(b);
            uint64_t id;
            int rc = uw_pm_client_start(s->c, &q, s->now, &id);
            FZ_CHECK(rc == 0 || rc == UW_EBUSY);
            if (rc == 0) {
                FZ_CHECK(txn_index(s, id) < 0);
                s->id[s->nt] = id;
                s->q[s->nt++] = q;
            }
        } else if (op == 1 || op == 2) {
            uint8_t buf[64];
            size_t len = UW_PM_MSG_LEN;
            if (op == 1) {
                uint8_t pmtime = fz_u8(&in), mut = fz_u8(&in);
                uint16_t port = fz_u16(&in);
                if (s->nreq == 0)
                    continue;
                uw_pm_msg m;
                FZ_CHECK(uw_pm_decode(s->req[b % s->nreq], UW_PM_MSG_LEN, &m) == 0);
                m.type = (b & 0x80) ? UW_PM_DENY : UW_PM_ACCEPT;
                if (mut & 8)
                    m.type = (mut & 16) ? UW_PM_ACK : UW_PM_REQ;
                m.pmtime = pmtime;
                if (m.type == UW_PM_ACCEPT)
                    m.ap_port = port;
                m.assoc ^= mut & 1;
                m.cp_port ^= (mut >> 1) & 1;
                m.cp_ip[3] ^= (mut >> 2) & 1;
                FZ_CHECK(uw_pm_encode(&m, buf, sizeof(buf)) == UW_PM_MSG_LEN);
            } else {
                len = b % 64;
                size_t n = len;
                const uint8_t *p = fz_take(&in, &n);
                memset(buf, 0, sizeof(buf));
                memcpy(buf, p, n);
            }
            drain(s); /* whatever was queued before goes first */
            int v = uw_pm_client_recv(s->c, s->now, buf, len, &srv);
            FZ_CHECK(v == UW_EMSGSIZE || v == UW_EPROTO || (v >= 0 && v <= UW_PM_C_IGNORED));
            if (v == UW_PM_C_ACCEPTED) {
                s->accepted++;
                s->ack_due = true;
                memcpy(s->last_accept, buf, UW_PM_MSG_LEN);
            }
            /* Only an accepted reply may queue a PMAck; a discarded one
             * queues nothing (timers at this same time already ran). */
            uw_pm_datagram d;
            int rc = uw_pm_client_send(s->c, s->now, &d);
            FZ_CHECK(rc == (v == UW_PM_C_ACCEPTED));
            if (rc == 1) {
                uw_pm_msg m;
                FZ_CHECK(uw_pm_decode(d.data, d.len, &m) == 0 && m.type == UW_PM_ACK);
                FZ_CHECK(memcmp(&d.to, &srv, sizeof(srv)) == 0);
                s->ack_due = false;
                s->acks++;
            }
        } else if (op == 3) {
            uint16_t t = (uint16_t)(b << 8 | fz_u8(&in));
            if (t & 0x8000)
                s->now -= (t & 0xFF) * MS; /* the client must treat this as no time */
            else
                s->now += t * MS;
            uw_pm_client_tick(s->c, s->now);
            if (t & 0x8000)
                s->now += (t & 0xFF) * MS;
        } else if (op == 4) {
            drain(s);
        } else {
            results(s);
            if ((b & 3) == 1 && s->nt)
                (void)uw_pm_client_cancel(s->c, s->id[(b >> 2) % s->nt], s->now);
            if ((b & 3) == 2 && s->nt) {
                uw_pm_result r;
                FZ_CHECK(uw_pm_client_sdp_reset(s->c, &s->q[(b >> 2) % s->nt], &r) == 0);
                FZ_CHECK(r.outcome == UW_PM_USE_CONVENTIONAL && r.reason == UW_PM_R_RESET);
            }
            if ((b & 3) == 3)
                uw_pm_client_flush_cache(s->c);
        }
        uint64_t d = uw_pm_client_next_deadline(s->c);
        FZ_CHECK(d == UW_PM_FOREVER || d + 3600000 * MS > s->now);
    }
    /* An hour later: everything finished, read and forgotten. */
    for (int i = 0; i < 100; i++) {
        drain(s);
        results(s);
        s->now += 60000 * MS;
        uw_pm_client_tick(s->c, s->now);
    }
    drain(s);
    results(s);
    uw_pm_client_tick(s->c, s->now);
    FZ_CHECK(uw_pm_client_txns(s->c) == 0);
    for (size_t i = 0; i < s->nt; i++)
        FZ_CHECK(s->results[i] == 1);
    FZ_CHECK(s->acks == s->accepted);
    uw_pm_client_stats cs;
    uw_pm_client_stats_get(s->c, &cs);
    FZ_CHECK(cs.accepts == s->accepted && cs.acks_sent == s->acks);
    FZ_CHECK(uw_pm_client_next_deadline(s->c) == UW_PM_FOREVER);
    uw_pm_client_destroy(s->c);
    free(s);
    return 0;
}
