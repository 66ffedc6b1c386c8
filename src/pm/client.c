/* PM client (draft-pinkerton-iwarp-sdp-01 7.4, 7.5, 7.5.1): one PMReq per
 * transaction, retransmitted with exponential backoff until a PMAccept or
 * PMDeny arrives or the retries run out; the first reply wins; a PMAccept is
 * acknowledged and cached for PmTime.
 *
 * Transactions live in a fixed array of slots. A slot goes
 *   FREE -> WAIT (PMReq outstanding) -> DONE (result ready, maybe unread)
 * and stays DONE until its result has been read, its PMAck has been handed
 * out and the linger time has passed: while it lingers, a late reply to one
 * of its retransmissions is recognised as a duplicate (7.5.1) instead of as
 * a reply without state. Both are discarded; the difference is only in the
 * statistics and in what the tests can check. */
#include "pm_internal.h"

#include "util/alloc.h"

enum { T_FREE = 0, T_WAIT, T_DONE };

typedef struct txn {
    int state;
    uint64_t id;
    uw_pm_query q;
    uint64_t assoc;
    unsigned sent;     /* PMReqs handed out */
    uint64_t rto;      /* the timeout armed with the next PMReq */
    uint64_t deadline; /* WAIT: reply timeout (when !need_req); DONE: end of linger */
    bool need_req;     /* a PMReq (first or retransmission) is queued */
    bool need_ack;     /* a PMAck is queued */
    bool unread;       /* result not yet taken */
    uint64_t done_seq; /* order of completion, for next_result */
    uw_pm_msg ack;
    uw_pm_udp_addr ack_to;
    uw_pm_result res;
} txn;

struct uw_pm_client {
    uw_allocator alloc;
    uw_pm_random_cb random;
    void *random_ud;
    uint64_t rng; /* internal generator state when random is NULL */
    uint64_t rto, rto_max, linger;
    unsigned max_retries;
    txn *t;
    size_t max_txns;
    uint64_t next_id, next_assoc, done_seq, last_now;
    uw__pm_cache cache;
    uw_pm_client_stats st;
};

/* splitmix64: enough to spread a caller's seed; the entropy is the seed's. */
static uint64_t internal_random(void *ud)
{
    uint64_t *s = ud;
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

int uw_pm_client_create(uw_pm_client **out, const uw_pm_client_opts *opts)
{
    if (!out || !opts)
        return UW_EINVAL;
    uint64_t rto = opts->rto_ns ? opts->rto_ns : 250 * UW_PM_NS_PER_MS;
    uint64_t rto_max = opts->rto_max_ns ? opts->rto_max_ns : 2000 * UW_PM_NS_PER_MS;
    if (rto_max < rto)
        return UW_EINVAL;
    uw_allocator a = uw__allocator(opts->alloc);
    uw_pm_client *c = a.alloc(a.ud, sizeof(*c));
    if (!c)
        return UW_ENOMEM;
    memset(c, 0, sizeof(*c));
    c->alloc = a;
    c->rto = rto;
    c->rto_max = rto_max;
    c->max_retries = opts->max_retries == UW_PM_NO_RETRY ? 0
                     : opts->max_retries                 ? opts->max_retries
                                                         : 4;
    c->max_txns = opts->max_txns ? opts->max_txns : 64;
    size_t cache_max = opts->cache_max ? opts->cache_max : 128;
    if (opts->linger_ns) {
        c->linger = opts->linger_ns;
    } else {
        /* A reply to the last retransmission can arrive up to about one
         * whole retransmission span after the first PMReq. */
        uint64_t span = 0, r = rto;
        for (unsigned i = 0; i <= c->max_retries; i++) {
            span = uw__pm_add_sat(span, r);
            r = r > rto_max / 2 ? rto_max : r * 2;
        }
        c->linger = span > 1000 * UW_PM_NS_PER_MS ? span : 1000 * UW_PM_NS_PER_MS;
    }
    if (opts->random) {
        c->random = opts->random;
        c->random_ud = opts->random_ud;
    } else {
        c->rng = opts->seed;
        c->random = internal_random;
        c->random_ud = &c->rng;
    }
    c->t = a.alloc(a.ud, c->max_txns * sizeof(*c->t));
    if (!c->t || uw__pm_cache_init(&c->cache, cache_max, &a) != 0) {
        uw_pm_client_destroy(c);
        return UW_ENOMEM;
    }
    memset(c->t, 0, c->max_txns * sizeof(*c->t));
    /* 7.5.1: the initial AssocHandle SHOULD be random, so a third party
     * cannot guess it; later ones count up from it, which keeps every
     * (AssocHandle, CpIPAddr, CpPort) of this client unique for 2^64
     * transactions whatever ports the caller reuses. */
    c->next_assoc = c->random(c->random_ud);
    c->next_id = 1;
    *out = c;
    return 0;
}

void uw_pm_client_destroy(uw_pm_client *c)
{
    if (!c)
        return;
    uw__pm_cache_free(&c->cache);
    if (c->t)
        c->alloc.free(c->alloc.ud, c->t);
    c->alloc.free(c->alloc.ud, c);
}

static uint64_t clamp_now(uw_pm_client *c, uint64_t now)
{
    if (now < c->last_now)
        return c->last_now;
    c->last_now = now;
    return now;
}

static uw__pm_cache_key key_of(const uw_pm_query *q)
{
    uw__pm_cache_key k;
    memset(&k, 0, sizeof(k));
    k.ipv = q->ipv;
    uw__pm_ip_copy(q->ipv, k.cp_ip, q->cp_ip);
    uw__pm_ip_copy(q->ipv, k.ap_ip, q->ap_ip);
    k.ap_port = q->ap_port;
    return k;
}

static void conventional(const uw_pm_query *q, uw_pm_result *r)
{
    r->outcome = UW_PM_USE_CONVENTIONAL;
    r->ipv = q->ipv;
    uw__pm_ip_copy(q->ipv, r->ip, q->ap_ip);
    r->port = q->ap_port;
}

static void finish(uw_pm_client *c, txn *t, int reason, uint64_t now)
{
    t->state = T_DONE;
    t->need_req = false;
    t->unread = true;
    t->done_seq = ++c->done_seq;
    t->res.reason = reason;
    t->res.sent = t->sent;
    t->deadline = uw__pm_add_sat(now, c->linger);
}

static bool slot_reclaimable(const txn *t)
{
    return t->state == T_DONE && !t->unread && !t->need_ack;
}

static void run_timers(uw_pm_client *c, uint64_t now)
{
    for (size_t i = 0; i < c->max_txns; i++) {
        txn *t = &c->t[i];
        if (t->state == T_WAIT && !t->need_req && now >= t->deadline) {
            /* 7.5.1: no reply before the timeout: retransmit and re-arm, up
             * to the maximum; after that, fall back to the Conventional
             * Address. */
            if (t->sent <= c->max_retries) {
                t->need_req = true;
                t->rto = t->rto > c->rto_max / 2 ? c->rto_max : t->rto * 2;
            } else {
                conventional(&t->q, &t->res);
                c->st.timeouts++;
                finish(c, t, UW_PM_R_TIMEOUT, now);
            }
        } else if (slot_reclaimable(t) && now >= t->deadline) {
            t->state = T_FREE;
        }
    }
    uw__pm_cache_expire(&c->cache, now);
}

void uw_pm_client_tick(uw_pm_client *c, uint64_t now)
{
    if (c)
        run_timers(c, clamp_now(c, now));
}

uint64_t uw_pm_client_next_deadline(const uw_pm_client *c)
{
    if (!c)
        return UW_PM_FOREVER;
    uint64_t d = uw__pm_cache_next_deadline(&c->cache);
    for (size_t i = 0; i < c->max_txns; i++) {
        const txn *t = &c->t[i];
        if ((t->state == T_WAIT && !t->need_req) || slot_reclaimable(t))
            d = t->deadline < d ? t->deadline : d;
    }
    return d;
}

static txn *alloc_slot(uw_pm_client *c)
{
    txn *victim = NULL;
    for (size_t i = 0; i < c->max_txns; i++) {
        txn *t = &c->t[i];
        if (t->state == T_FREE)
            return t;
        /* Forgetting a lingering transaction early only turns a later
         * duplicate into a reply without state; both are discarded. */
        if (slot_reclaimable(t) && (!victim || t->deadline < victim->deadline))
            victim = t;
    }
    return victim;
}

static bool assoc_in_use(const uw_pm_client *c, uint64_t assoc, const uw_pm_query *q)
{
    for (size_t i = 0; i < c->max_txns; i++) {
        const txn *t = &c->t[i];
        if (t->state != T_FREE && t->assoc == assoc && t->q.cp_port == q->cp_port &&
            t->q.ipv == q->ipv && uw__pm_ip_eq(q->ipv, t->q.cp_ip, q->cp_ip))
            return true;
    }
    return false;
}

int uw_pm_client_start(uw_pm_client *c, const uw_pm_query *q, uint64_t now, uint64_t *id)
{
    if (!c || !q || !id || (q->ipv != 4 && q->ipv != 6) ||
        (q->server.ipv != 4 && q->server.ipv != 6))
        return UW_EINVAL;
    now = clamp_now(c, now);
    run_timers(c, now);
    txn *t = alloc_slot(c);
    if (!t)
        return UW_EBUSY;
    memset(t, 0, sizeof(*t));
    t->id = c->next_id++;
    t->q = *q;
    uw__pm_ip_copy(q->ipv, t->q.cp_ip, q->cp_ip);
    uw__pm_ip_copy(q->ipv, t->q.ap_ip, q->ap_ip);
    if (t->q.server.port == 0)
        t->q.server.port = UW_PM_PORT; /* 7.4 and 16: the PMReq goes to 3935 by default */
    t->res.txn = t->id;
    t->res.ipv = q->ipv;
    c->st.started++;

    uw__pm_cache_key k = key_of(q);
    const uw__pm_cache_entry *e = uw__pm_cache_lookup(&c->cache, &k, now);
    if (e) {
        t->res.outcome = UW_PM_USE_SDP;
        uw__pm_ip_copy(q->ipv, t->res.ip, e->sdp_ip);
        t->res.port = e->sdp_port;
        t->res.pmtime = e->pmtime;
        t->res.cache_until = e->until;
        c->st.cache_hits++;
        finish(c, t, UW_PM_R_CACHED, now);
        t->deadline = now; /* no PMReq went out, so no reply can come back */
        *id = t->id;
        return 0;
    }
    /* 7.3.1.4: no fresh cached answer, so a new PMReq is issued. */
    do {
        t->assoc = c->next_assoc++;
    } while (assoc_in_use(c, t->assoc, q));
    t->res.assoc = t->assoc;
    t->state = T_WAIT;
    t->rto = c->rto;
    t->need_req = true;
    *id = t->id;
    return 0;
}

static void build_req(const txn *t, uw_pm_datagram *out)
{
    /* 7.4: the PMReq's fields. The same values go out on every
     * retransmission (7.5.1), because they all come from the slot. */
    uw_pm_msg m;
    memset(&m, 0, sizeof(m));
    m.type = UW_PM_REQ;
    m.ipv = t->q.ipv;
    m.ap_port = t->q.ap_port;
    m.cp_port = t->q.cp_port;
    m.assoc = t->assoc;
    memcpy(m.cp_ip, t->q.cp_ip, 16);
    memcpy(m.ap_ip, t->q.ap_ip, 16);
    out->to = t->q.server;
    out->len = (size_t)uw_pm_encode(&m, out->data, sizeof(out->data));
}

int uw_pm_client_send(uw_pm_client *c, uint64_t now, uw_pm_datagram *out)
{
    if (!c || !out)
        return UW_EINVAL;
    now = clamp_now(c, now);
    run_timers(c, now);
    out->len = 0;
    /* PMAcks first: each one lets the PMSP stop a timer and keep the mapping. */
    for (size_t i = 0; i < c->max_txns; i++) {
        txn *t = &c->t[i];
        if (t->state == T_DONE && t->need_ack) {
            t->need_ack = false;
            out->to = t->ack_to;
            out->len = (size_t)uw_pm_encode(&t->ack, out->data, sizeof(out->data));
            c->st.acks_sent++;
            return 1;
        }
    }
    for (size_t i = 0; i < c->max_txns; i++) {
        txn *t = &c->t[i];
        if (t->state == T_WAIT && t->need_req) {
            build_req(t, out);
            t->need_req = false;
            /* 7.5.1: a timeout is armed with every PMReq sent. */
            t->deadline = uw__pm_add_sat(now, t->rto);
            if (t->sent++)
                c->st.retransmits++;
            c->st.reqs_sent++;
            return 1;
        }
    }
    return 0;
}

static txn *match(uw_pm_client *c, const uw_pm_msg *m)
{
    /* 7.5: replies are matched on (AssocHandle, CpPort, CpIPAddr). */
    for (size_t i = 0; i < c->max_txns; i++) {
        txn *t = &c->t[i];
        if (t->state != T_FREE && t->assoc == m->assoc && t->q.cp_port == m->cp_port &&
            t->q.ipv == m->ipv && uw__pm_ip_eq(m->ipv, t->q.cp_ip, m->cp_ip) &&
            t->res.reason != UW_PM_R_CACHED)
            return t;
    }
    return NULL;
}

int uw_pm_client_recv(uw_pm_client *c, uint64_t now, const void *data, size_t len,
                      const uw_pm_udp_addr *from)
{
    if (!c || !data || !from)
        return UW_EINVAL;
    uw_pm_msg m;
    int rc = uw_pm_decode(data, len, &m);
    if (rc < 0) {
        c->st.malformed++;
        return rc;
    }
    now = clamp_now(c, now);
    run_timers(c, now);
    if (m.type != UW_PM_ACCEPT && m.type != UW_PM_DENY) {
        c->st.ignored++;
        return UW_PM_C_IGNORED;
    }
    txn *t = match(c, &m);
    if (!t) {
        /* 7.5.1: a reply without associated state MUST be discarded. */
        c->st.no_state++;
        return UW_PM_C_NO_STATE;
    }
    if (t->state != T_WAIT) {
        /* 7.5.1: only the first reply counts; later ones (to retransmitted
         * PMReqs, or a changed mind of the PMSP) are discarded, and no second
         * PMAck goes out. */
        c->st.duplicates++;
        return UW_PM_C_DUPLICATE;
    }
    uw__pm_cache_key k = key_of(&t->q);
    if (m.type == UW_PM_DENY) {
        /* 7.4: a PMDeny completes the transaction and is never acknowledged.
         * Its ApPort is ignored (7.3.1.6). A cached answer for the service is
         * stale now. */
        uw__pm_cache_remove(&c->cache, &k);
        conventional(&t->q, &t->res);
        c->st.denies++;
        finish(c, t, UW_PM_R_DENY, now);
        return UW_PM_C_DENIED;
    }
    t->res.outcome = UW_PM_USE_SDP;
    uw__pm_ip_copy(m.ipv, t->res.ip, m.ap_ip);
    t->res.port = m.ap_port;
    t->res.pmtime = m.pmtime;
    t->res.cache_until = uw__pm_cache_put(&c->cache, &k, m.ap_ip, m.ap_port, m.pmtime, now);
    /* 7.4: a PMAccept MUST be answered with a PMAck that repeats its fields
     * (PmTime zero), sent to the UDP address the PMAccept came from. */
    t->ack = m;
    t->ack.type = UW_PM_ACK;
    t->ack.pmtime = 0;
    t->ack_to = *from;
    t->need_ack = true;
    c->st.accepts++;
    finish(c, t, UW_PM_R_ACCEPT, now);
    return UW_PM_C_ACCEPTED;
}

int uw_pm_client_next_result(uw_pm_client *c, uw_pm_result *out)
{
    if (!c || !out)
        return UW_EINVAL;
    txn *best = NULL;
    for (size_t i = 0; i < c->max_txns; i++) {
        txn *t = &c->t[i];
        if (t->state == T_DONE && t->unread && (!best || t->done_seq < best->done_seq))
            best = t;
    }
    if (!best)
        return 0;
    best->unread = false;
    *out = best->res;
    return 1;
}

int uw_pm_client_cancel(uw_pm_client *c, uint64_t id, uint64_t now)
{
    if (!c)
        return UW_EINVAL;
    now = clamp_now(c, now);
    for (size_t i = 0; i < c->max_txns; i++) {
        txn *t = &c->t[i];
        if (t->state == T_WAIT && t->id == id) {
            conventional(&t->q, &t->res);
            finish(c, t, UW_PM_R_CANCELED, now);
            return 0;
        }
    }
    return UW_ENOENT;
}

int uw_pm_client_sdp_reset(uw_pm_client *c, const uw_pm_query *q, uw_pm_result *out)
{
    if (!c || !q || (q->ipv != 4 && q->ipv != 6))
        return UW_EINVAL;
    /* 7.5.1: a reset from the SDP Address counts as a PMDeny: the answer is
     * no good, so it must not be served from the cache again. */
    uw__pm_cache_key k = key_of(q);
    uw__pm_cache_remove(&c->cache, &k);
    if (out) {
        memset(out, 0, sizeof(*out));
        out->reason = UW_PM_R_RESET;
        conventional(q, out);
    }
    return 0;
}

void uw_pm_client_flush_cache(uw_pm_client *c)
{
    if (c)
        uw__pm_cache_clear(&c->cache);
}

size_t uw_pm_client_cached(const uw_pm_client *c)
{
    return c ? c->cache.n : 0;
}

size_t uw_pm_client_txns(const uw_pm_client *c)
{
    size_t n = 0;
    for (size_t i = 0; c && i < c->max_txns; i++)
        n += c->t[i].state != T_FREE;
    return n;
}

void uw_pm_client_stats_get(const uw_pm_client *c, uw_pm_client_stats *out)
{
    if (c && out)
        *out = c->st;
}
