/* PM server, the PMSP (draft-pinkerton-iwarp-sdp-01 7.4, 7.5, 7.5.2, 15.2).
 *
 * State is kept for accepted transactions only. A PMDeny needs none: the
 * reply to a repeated PMReq is computed from the service's current state
 * anyway (7.5.2), so a denied request and its duplicate get the same answer
 * without any memory, and a flood of unmappable requests costs nothing.
 *
 * An accepted transaction is PENDING until its PMAck (or the LLP connection)
 * arrives, then ACKED for a linger time so that late duplicate PMReqs are
 * recognised, then forgotten. A PENDING one that sees no PMAck before the
 * accept timeout is released (7.5.2: "all resources ... MUST be deleted").
 *
 * Everything is allocated at creation: a pool of max_pending entries, two
 * hash indexes over it (by 4-tuple for PMReqs, by AssocHandle for PMAcks) and
 * the per-source rate buckets. Both timeouts are constants, so each of the two
 * timer lists stays sorted by appending at the tail: every operation is O(1)
 * on average, whatever the load (15.2.1). */
#include "pm_internal.h"

#include "util/alloc.h"

#define NONE 0u /* list and chain links are index + 1 */
#define NS_PER_S 1000000000ull
#define MAX_ENTRIES (1u << 24)
#define MAX_BURST 1000000u

enum { E_FREE = 0, E_PENDING, E_ACKED };

typedef struct ent {
    uint32_t next_tuple, next_assoc; /* hash chains; next_tuple links the free list */
    uint32_t prev, next;             /* timer list */
    uint8_t state;
    uint64_t deadline;
    uw_pm_msg req;
    uw_pm_mapping map;
    uw_pm_udp_addr from;
} ent;

typedef struct list {
    uint32_t head, tail;
} list;

typedef struct bucket {
    uint8_t ipv;
    uint8_t ip[16];
    int64_t tokens; /* in 1e-9 tokens, so refills need no division */
    uint64_t last;
} bucket;

struct uw_pm_server {
    uw_allocator alloc;
    uw_pm_lookup_cb lookup;
    void *lookup_ud;
    uw_pm_event_cb on_event;
    void *event_ud;
    uint64_t accept_timeout, linger, seed, last_now;
    ent *e;
    uint32_t n, free_head;
    uint32_t *by_tuple, *by_assoc;
    uint32_t hmask;
    list pending, acked;
    bool rate_on;
    int64_t rate, burst, penalty; /* rate: tokens per s; burst, penalty: in 1e-9 tokens */
    bucket *b;
    uint32_t bmask;
    uw_pm_server_stats st;
};

/* ------------------------------------------------------------------------ */
/* Hashing: keyed by the caller's random seed, so the chain a request lands
 * in cannot be chosen from outside.                                         */

static uint64_t mix(uint64_t h, uint64_t v)
{
    h ^= v + 0x9E3779B97F4A7C15ull + (h << 6) + (h >> 2);
    h *= 0xBF58476D1CE4E5B9ull;
    return h ^ (h >> 31);
}

static uint64_t mix_ip(uint64_t h, uint8_t ipv, const uint8_t *ip)
{
    uint64_t w[2] = {0, 0};
    memcpy(w, ip, uw__pm_ip_len(ipv));
    return mix(mix(h, w[0]), w[1]);
}

static uint32_t hash_tuple(const uw_pm_server *s, const uw_pm_msg *m)
{
    uint64_t h = mix(s->seed, (uint64_t)m->ipv << 32 | (uint32_t)m->ap_port << 16 | m->cp_port);
    h = mix_ip(mix_ip(h, m->ipv, m->ap_ip), m->ipv, m->cp_ip);
    return (uint32_t)(h ^ h >> 32) & s->hmask;
}

static uint32_t hash_assoc(const uw_pm_server *s, uint8_t ipv, uint64_t assoc, uint16_t cp_port,
                           const uint8_t *cp_ip)
{
    uint64_t h = mix(mix(~s->seed, assoc), (uint64_t)ipv << 16 | cp_port);
    h = mix_ip(h, ipv, cp_ip);
    return (uint32_t)(h ^ h >> 32) & s->hmask;
}

/* 7.5: the 4-tuple (ApPort, CpPort, ApIPAddr, CpIPAddr) of a PMReq. */
static bool same_tuple(const uw_pm_msg *a, const uw_pm_msg *b)
{
    return a->ipv == b->ipv && a->ap_port == b->ap_port && a->cp_port == b->cp_port &&
           uw__pm_ip_eq(a->ipv, a->ap_ip, b->ap_ip) && uw__pm_ip_eq(a->ipv, a->cp_ip, b->cp_ip);
}

/* ------------------------------------------------------------------------ */
/* Pool, indexes, timer lists                                                */

static ent *at(uw_pm_server *s, uint32_t link)
{
    return &s->e[link - 1];
}

static uint32_t link_of(const uw_pm_server *s, const ent *e)
{
    return (uint32_t)(e - s->e) + 1;
}

static void list_append(uw_pm_server *s, list *l, ent *e)
{
    uint32_t k = link_of(s, e);
    e->next = NONE;
    e->prev = l->tail;
    if (l->tail)
        at(s, l->tail)->next = k;
    else
        l->head = k;
    l->tail = k;
}

static void list_unlink(uw_pm_server *s, list *l, ent *e)
{
    if (e->prev)
        at(s, e->prev)->next = e->next;
    else
        l->head = e->next;
    if (e->next)
        at(s, e->next)->prev = e->prev;
    else
        l->tail = e->prev;
    e->prev = e->next = NONE;
}

static void chain_remove(uw_pm_server *s, uint32_t *head, ent *e, bool tuple)
{
    uint32_t k = link_of(s, e);
    for (uint32_t *p = head; *p; p = tuple ? &at(s, *p)->next_tuple : &at(s, *p)->next_assoc) {
        if (*p == k) {
            *p = tuple ? e->next_tuple : e->next_assoc;
            return;
        }
    }
}

static void emit(uw_pm_server *s, int type, int why, const ent *e)
{
    if (!s->on_event)
        return;
    uw_pm_server_event ev = {type, why, &e->req, &e->map, &e->from};
    s->on_event(s->event_ud, &ev);
}

/* Forgets e. A PENDING entry holds resources the owner may want back, so it
 * is reported as released (why); an ACKED one is in use by a connection that
 * must stay unaffected (7.5.2), so it just disappears. */
static void release(uw_pm_server *s, ent *e, int why)
{
    if (e->state == E_PENDING)
        emit(s, UW_PM_EV_RELEASED, why, e);
    list_unlink(s, e->state == E_PENDING ? &s->pending : &s->acked, e);
    chain_remove(s, &s->by_tuple[hash_tuple(s, &e->req)], e, true);
    chain_remove(
        s, &s->by_assoc[hash_assoc(s, e->req.ipv, e->req.assoc, e->req.cp_port, e->req.cp_ip)], e,
        false);
    e->state = E_FREE;
    e->next_tuple = s->free_head;
    s->free_head = link_of(s, e);
    s->st.pending--;
}

static ent *find_tuple(uw_pm_server *s, const uw_pm_msg *m)
{
    for (uint32_t k = s->by_tuple[hash_tuple(s, m)]; k; k = at(s, k)->next_tuple)
        if (same_tuple(&at(s, k)->req, m))
            return at(s, k);
    return NULL;
}

/* ------------------------------------------------------------------------ */
/* Rate limiting per source IP (15.2.1)                                      */

static bucket *bucket_of(uw_pm_server *s, const uw_pm_udp_addr *from, uint64_t now)
{
    uint64_t h = mix_ip(mix(s->seed ^ 0x5bd1e995u, from->ipv), from->ipv, from->ip);
    bucket *b = &s->b[(uint32_t)(h ^ h >> 32) & s->bmask];
    if (b->ipv != from->ipv || !uw__pm_ip_eq(from->ipv, b->ip, from->ip)) {
        /* A collision hands the slot to the newcomer with a full bucket: at
         * worst a source is treated more leniently, never locked out by
         * someone else's traffic. */
        b->ipv = from->ipv;
        uw__pm_ip_copy(from->ipv == 6 ? 6 : 4, b->ip, from->ip);
        b->tokens = s->burst;
        b->last = now;
        return b;
    }
    uint64_t dt = now - b->last;
    b->last = now;
    /* Saturate: an idle source simply has a full bucket. */
    if (dt >= 2 * ((uint64_t)s->burst / (uint64_t)s->rate))
        b->tokens = s->burst;
    else if ((b->tokens += (int64_t)dt * s->rate) > s->burst)
        b->tokens = s->burst;
    return b;
}

static bool rate_ok(uw_pm_server *s, const uw_pm_udp_addr *from, uint64_t now)
{
    if (!s->rate_on)
        return true;
    bucket *b = bucket_of(s, from, now);
    if (b->tokens < (int64_t)NS_PER_S)
        return false;
    b->tokens -= (int64_t)NS_PER_S;
    return true;
}

static void penalise(uw_pm_server *s, const uw_pm_udp_addr *from, uint64_t now)
{
    if (!s->rate_on || s->penalty == 0)
        return;
    bucket *b = bucket_of(s, from, now);
    /* 15.2.1: a source whose mappings time out is quenched for a while, but
     * never for longer than two bursts' worth of refill. */
    b->tokens = b->tokens - s->penalty < -s->burst ? -s->burst : b->tokens - s->penalty;
}

/* ------------------------------------------------------------------------ */

static uint32_t pow2_at_least(uint64_t n)
{
    uint32_t p = 1;
    while (p < n)
        p <<= 1;
    return p;
}

int uw_pm_server_create(uw_pm_server **out, const uw_pm_server_opts *o)
{
    if (!out || !o || !o->lookup)
        return UW_EINVAL;
    size_t n = o->max_pending ? o->max_pending : 4096;
    size_t slots = o->rate_slots ? o->rate_slots : 1024;
    if (n > MAX_ENTRIES || slots > MAX_ENTRIES)
        return UW_EINVAL;
    uw_allocator a = uw__allocator(o->alloc);
    uw_pm_server *s = a.alloc(a.ud, sizeof(*s));
    if (!s)
        return UW_ENOMEM;
    memset(s, 0, sizeof(*s));
    s->alloc = a;
    s->lookup = o->lookup;
    s->lookup_ud = o->lookup_ud;
    s->on_event = o->on_event;
    s->event_ud = o->event_ud;
    s->accept_timeout = o->accept_timeout_ns ? o->accept_timeout_ns : 2 * NS_PER_S;
    s->linger = o->ack_linger_ns ? o->ack_linger_ns : s->accept_timeout;
    s->seed = o->hash_seed;
    s->n = (uint32_t)n;
    uint32_t buckets = pow2_at_least(2 * n);
    s->hmask = buckets - 1;
    s->rate_on = !o->rate_unlimited;
    uint32_t rate = o->rate_per_s ? o->rate_per_s : 100;
    uint64_t burst = o->rate_burst ? o->rate_burst : 2ull * rate;
    if (burst > MAX_BURST)
        burst = MAX_BURST; /* keeps the nano-token arithmetic inside int64 */
    uint64_t pen = o->timeout_penalty == UINT32_MAX ? 0
                   : o->timeout_penalty             ? o->timeout_penalty
                                                    : (burst / 4 ? burst / 4 : 1);
    s->rate = rate;
    s->burst = (int64_t)(burst * NS_PER_S);
    s->penalty = (int64_t)(pen > burst ? burst : pen) * (int64_t)NS_PER_S;
    uint32_t bslots = pow2_at_least(slots);
    s->bmask = bslots - 1;

    s->e = a.alloc(a.ud, n * sizeof(*s->e));
    s->by_tuple = a.alloc(a.ud, buckets * sizeof(uint32_t));
    s->by_assoc = a.alloc(a.ud, buckets * sizeof(uint32_t));
    s->b = s->rate_on ? a.alloc(a.ud, bslots * sizeof(*s->b)) : NULL;
    if (!s->e || !s->by_tuple || !s->by_assoc || (s->rate_on && !s->b)) {
        uw_pm_server_destroy(s);
        return UW_ENOMEM;
    }
    memset(s->e, 0, n * sizeof(*s->e));
    memset(s->by_tuple, 0, buckets * sizeof(uint32_t));
    memset(s->by_assoc, 0, buckets * sizeof(uint32_t));
    if (s->b)
        memset(s->b, 0, bslots * sizeof(*s->b)); /* ipv 0 matches no source */
    for (uint32_t i = s->n; i > 0; i--) {
        s->e[i - 1].next_tuple = s->free_head;
        s->free_head = i;
    }
    *out = s;
    return 0;
}

void uw_pm_server_destroy(uw_pm_server *s)
{
    if (!s)
        return;
    uw_allocator a = s->alloc;
    if (s->e)
        a.free(a.ud, s->e);
    if (s->by_tuple)
        a.free(a.ud, s->by_tuple);
    if (s->by_assoc)
        a.free(a.ud, s->by_assoc);
    if (s->b)
        a.free(a.ud, s->b);
    a.free(a.ud, s);
}

static uint64_t clamp_now(uw_pm_server *s, uint64_t now)
{
    if (now < s->last_now)
        return s->last_now;
    s->last_now = now;
    return now;
}

static void run_timers(uw_pm_server *s, uint64_t now)
{
    while (s->pending.head && at(s, s->pending.head)->deadline <= now) {
        ent *e = at(s, s->pending.head);
        /* 7.5.2: no PMAck and no LLP connection within the timeout. */
        s->st.timeouts++;
        uw_pm_udp_addr from = e->from;
        release(s, e, UW_PM_REL_TIMEOUT);
        penalise(s, &from, now);
    }
    while (s->acked.head && at(s, s->acked.head)->deadline <= now)
        release(s, at(s, s->acked.head), 0);
}

void uw_pm_server_tick(uw_pm_server *s, uint64_t now)
{
    if (s)
        run_timers(s, clamp_now(s, now));
}

uint64_t uw_pm_server_next_deadline(const uw_pm_server *s)
{
    uint64_t d = UW_PM_FOREVER;
    if (!s)
        return d;
    if (s->pending.head)
        d = s->e[s->pending.head - 1].deadline;
    if (s->acked.head && s->e[s->acked.head - 1].deadline < d)
        d = s->e[s->acked.head - 1].deadline;
    return d;
}

void uw_pm_server_stats_get(const uw_pm_server *s, uw_pm_server_stats *out)
{
    if (s && out)
        *out = s->st;
}

/* 7.4: a PMAccept repeats the PMReq's IPV, CpPort, AssocHandle and CpIPAddr
 * and carries the SDP listen port, the Accepting Peer's address and PmTime. */
static void reply_accept(uw_pm_server *s, const ent *e, uw_pm_datagram *reply)
{
    uw_pm_msg m = e->req;
    m.type = UW_PM_ACCEPT;
    m.pmtime = e->map.pmtime;
    m.ap_port = e->map.port;
    uw__pm_ip_copy(m.ipv, m.ap_ip, e->map.ip);
    reply->len = (size_t)uw_pm_encode(&m, reply->data, sizeof(reply->data));
    s->st.accepts++;
}

/* 7.4: a PMDeny repeats every field of the PMReq, PmTime zero. 7.3.1.6 says
 * instead that a PMDeny's ApPort is sent as zero; the two rules conflict and
 * the receiver ignores the field either way, so we follow 7.4 and echo it,
 * which lets a capture show which request was denied. */
static void reply_deny(uw_pm_server *s, const uw_pm_msg *req, uw_pm_datagram *reply)
{
    uw_pm_msg m = *req;
    m.type = UW_PM_DENY;
    m.pmtime = 0;
    reply->len = (size_t)uw_pm_encode(&m, reply->data, sizeof(reply->data));
    s->st.denies++;
}

static int ask(uw_pm_server *s, const uw_pm_msg *req, const uw_pm_udp_addr *from,
               uw_pm_mapping *map)
{
    memset(map, 0, sizeof(*map));
    uw__pm_ip_copy(req->ipv, map->ip, req->ap_ip);
    map->port = req->ap_port;
    int ok = s->lookup(s->lookup_ud, req, from, map);
    size_t n = uw__pm_ip_len(req->ipv);
    memset(map->ip + n, 0, 16 - n); /* the unused 96 bits stay zero whatever lookup wrote */
    return ok;
}

static int on_req(uw_pm_server *s, uint64_t now, const uw_pm_msg *m, const uw_pm_udp_addr *from,
                  uw_pm_datagram *reply)
{
    s->st.requests++;
    if (!rate_ok(s, from, now)) {
        s->st.rate_limited++;
        return UW_PM_S_RATE_LIMITED;
    }
    uw_pm_mapping map;
    ent *e = find_tuple(s, m);
    if (e && e->req.assoc == m->assoc) {
        /* 7.5: the same 5-tuple is a duplicate. 7.5.2: it MUST be answered,
         * with the service's current state, and a pending timer restarts. */
        s->st.duplicates++;
        if (!ask(s, m, from, &map)) {
            reply_deny(s, m, reply);
            release(s, e, UW_PM_REL_DENIED);
            return UW_PM_S_DUP_DENY;
        }
        e->map = map;
        e->from = *from;
        if (e->state == E_PENDING) {
            list_unlink(s, &s->pending, e);
            e->deadline = uw__pm_add_sat(now, s->accept_timeout);
            list_append(s, &s->pending, e);
        }
        reply_accept(s, e, reply);
        return UW_PM_S_DUP_ACCEPT;
    }
    if (e) {
        /* 7.5.2: a new AssocHandle for the same 4-tuple: the old state goes
         * and the new PMReq is processed normally. */
        s->st.replaced++;
        release(s, e, UW_PM_REL_REPLACED);
    }
    if (!ask(s, m, from, &map)) {
        reply_deny(s, m, reply); /* 7.4: not successful: PMDeny */
        return UW_PM_S_DENY;
    }
    if (!s->free_head && s->acked.head)
        release(s, at(s, s->acked.head), 0); /* lingering state is only a convenience */
    if (!s->free_head) {
        /* 7.4 names resource exhaustion as a reason to deny; the client falls
         * back to the Conventional Address at once instead of retrying. */
        s->st.full++;
        reply_deny(s, m, reply);
        return UW_PM_S_FULL;
    }
    e = at(s, s->free_head);
    s->free_head = e->next_tuple;
    e->req = *m;
    e->map = map;
    e->from = *from;
    e->state = E_PENDING;
    uint32_t k = link_of(s, e);
    uint32_t *ht = &s->by_tuple[hash_tuple(s, m)];
    e->next_tuple = *ht;
    *ht = k;
    uint32_t *ha = &s->by_assoc[hash_assoc(s, m->ipv, m->assoc, m->cp_port, m->cp_ip)];
    e->next_assoc = *ha;
    *ha = k;
    /* 7.5.2: a timer per PMAccept; 15.2.1: a short one. */
    e->deadline = uw__pm_add_sat(now, s->accept_timeout);
    list_append(s, &s->pending, e);
    if (++s->st.pending > s->st.pending_peak)
        s->st.pending_peak = s->st.pending;
    emit(s, UW_PM_EV_ACCEPTED, 0, e);
    reply_accept(s, e, reply);
    return UW_PM_S_ACCEPT;
}

static void mark_acked(uw_pm_server *s, ent *e, uint64_t now)
{
    list_unlink(s, &s->pending, e);
    e->state = E_ACKED;
    e->deadline = uw__pm_add_sat(now, s->linger);
    list_append(s, &s->acked, e);
    s->st.acks++;
    emit(s, UW_PM_EV_ACKED, 0, e);
}

static int on_ack(uw_pm_server *s, uint64_t now, const uw_pm_msg *m)
{
    /* A PMAck repeats the PMAccept (7.4), so it is found by the PMReq's
     * AssocHandle, CpPort and CpIPAddr; among entries sharing those, one
     * whose PMAccept named the same SDP Address is preferred. */
    ent *hit = NULL;
    uint32_t h = hash_assoc(s, m->ipv, m->assoc, m->cp_port, m->cp_ip);
    for (uint32_t k = s->by_assoc[h]; k; k = at(s, k)->next_assoc) {
        ent *e = at(s, k);
        if (e->req.assoc != m->assoc || e->req.cp_port != m->cp_port || e->req.ipv != m->ipv ||
            !uw__pm_ip_eq(m->ipv, e->req.cp_ip, m->cp_ip))
            continue;
        if (!hit)
            hit = e;
        if (e->map.port == m->ap_port && uw__pm_ip_eq(m->ipv, e->map.ip, m->ap_ip)) {
            hit = e;
            break;
        }
    }
    if (!hit) {
        /* 7.5.2: a PMAck for no known state MUST be discarded. */
        s->st.acks_unknown++;
        return UW_PM_S_ACK_UNKNOWN;
    }
    if (hit->state == E_ACKED)
        return UW_PM_S_ACK_DUPLICATE;
    mark_acked(s, hit, now);
    return UW_PM_S_ACK;
}

int uw_pm_server_recv(uw_pm_server *s, uint64_t now, const void *data, size_t len,
                      const uw_pm_udp_addr *from, uw_pm_datagram *reply)
{
    if (!s || !data || !from || !reply)
        return UW_EINVAL;
    reply->len = 0;
    now = clamp_now(s, now);
    run_timers(s, now);
    uw_pm_msg m;
    int rc = uw_pm_decode(data, len, &m);
    if (rc < 0) {
        s->st.malformed++;
        return rc;
    }
    /* 7.4: replies go back to the UDP address the PMReq came from. */
    reply->to = *from;
    switch (m.type) {
    case UW_PM_REQ:
        return on_req(s, now, &m, from, reply);
    case UW_PM_ACK:
        return on_ack(s, now, &m);
    default:
        s->st.ignored++;
        return UW_PM_S_IGNORED;
    }
}

int uw_pm_server_llp_connected(uw_pm_server *s, uint64_t now, uint8_t ipv, const uint8_t *cp_ip,
                               uint16_t cp_port, const uint8_t *sdp_ip, uint16_t sdp_port)
{
    if (!s || !cp_ip || !sdp_ip || (ipv != 4 && ipv != 6))
        return UW_EINVAL;
    now = clamp_now(s, now);
    run_timers(s, now);
    /* 7.5.2: the LLP connection request to the SDP Address stops the timer
     * like a PMAck. Rare next to PMReqs, so a walk of the pending list. */
    for (uint32_t k = s->pending.head; k; k = at(s, k)->next) {
        ent *e = at(s, k);
        if (e->req.ipv == ipv && e->req.cp_port == cp_port && e->map.port == sdp_port &&
            uw__pm_ip_eq(ipv, e->req.cp_ip, cp_ip) && uw__pm_ip_eq(ipv, e->map.ip, sdp_ip)) {
            mark_acked(s, e, now);
            return 0;
        }
    }
    return UW_ENOENT;
}
