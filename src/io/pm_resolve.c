/* Blocking port mapper resolver (pm_resolve.h): the I/O adapter around the
 * sans-I/O uw_pm_client for a Connecting Peer. One call, one transaction,
 * one connected UDP socket; what the calls learn is shared through two
 * caches under a mutex.
 *
 * Why a client object per call rather than one shared one: a shared
 * uw_pm_client hands out the datagrams of every transaction from one queue,
 * and each call needs its own connected socket (to hear ICMP errors for its
 * own destination). Routing one queue to many sockets across threads costs
 * more than it saves. What sharing one client would give is kept here
 * instead: the AssocHandle sequence (random start, counting up: 7.5.1) and
 * the PMAccept cache (7.3.1.4, the same uw__pm_cache the client uses). */
#define _GNU_SOURCE
#include "io/pm_resolve.h"

#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "pm/pm_internal.h"
#include "util/alloc.h"

#define MAX_RETRIES 10u /* 2^11 - 1 RTO units: beyond that the first RTO is noise */

/* An endpoint, IPv4-mapped IPv6 turned into IPv4. */
typedef struct ep {
    uint8_t ipv;
    uint8_t ip[16];
    uint16_t port;
    uint32_t scope;
    bool mapped; /* given as IPv4-mapped IPv6 */
} ep;

/* A remembered failure. TIMEOUT and UNREACHABLE are about the port mapper
 * (server) and hold for every service behind it; DENY is about one service
 * (ap_ip, ap_port) for one client address (cp_ip), as a PMDeny may depend on
 * who asks. */
typedef struct neg_entry {
    bool used;
    int reason;
    uw_pm_udp_addr server;
    uint8_t ipv;
    uint8_t cp_ip[16], ap_ip[16];
    uint16_t ap_port;
    uint64_t since, until;
} neg_entry;

struct uw__pm_resolver {
    pthread_mutex_t mu;
    uint64_t timeout_ns;
    unsigned retries;
    uint64_t neg_ns; /* 0: no negative cache */
    bool have_server;
    uw_pm_udp_addr server;
    uint16_t server_port;
    uint64_t next_assoc;
    size_t cap;         /* entries in each cache at most */
    uw__pm_cache cache; /* allocated on the first PMAccept */
    neg_entry *neg;     /* grows from NEG_FIRST entries up to cap */
    size_t neg_cap;
};

/* The first negative cache: a program that never meets SDP remembers one
 * or two port mappers, and a resolver that touches 40 KiB of tables costs
 * a dozen page faults before its first datagram. */
#define NEG_FIRST 8

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t random64(const void *salt)
{
    uint64_t v;
    if (getrandom(&v, sizeof(v), GRND_NONBLOCK) == (ssize_t)sizeof(v))
        return v;
    /* No entropy yet (early boot): different per process and call, though
     * guessable; 7.5.1 only says SHOULD. */
    return now_ns() * 0x9E3779B97F4A7C15ull ^ (uint64_t)getpid() << 32 ^ (uint64_t)(uintptr_t)salt;
}

const char *uw__pm_res_reason_name(int reason)
{
    static const char *const names[] = {"?",       "accept",      "cached", "deny",
                                        "timeout", "unreachable", "error"};
    return reason >= 1 && reason <= UW__PM_RES_ERROR ? names[reason] : "?";
}

/* ------------------------------------------------------------------------ */
/* Addresses                                                                 */

static const uint8_t k_mapped_prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF};

static int ep_from(const struct sockaddr *sa, socklen_t len, ep *out)
{
    memset(out, 0, sizeof(*out));
    if (len >= (socklen_t)sizeof(struct sockaddr_in) && sa->sa_family == AF_INET) {
        struct sockaddr_in s4;
        memcpy(&s4, sa, sizeof(s4));
        out->ipv = 4;
        memcpy(out->ip, &s4.sin_addr, 4);
        out->port = ntohs(s4.sin_port);
        return 0;
    }
    if (len >= (socklen_t)sizeof(struct sockaddr_in6) && sa->sa_family == AF_INET6) {
        struct sockaddr_in6 s6;
        memcpy(&s6, sa, sizeof(s6));
        out->port = ntohs(s6.sin6_port);
        if (memcmp(&s6.sin6_addr, k_mapped_prefix, 12) == 0) {
            out->ipv = 4;
            out->mapped = true;
            memcpy(out->ip, (const uint8_t *)&s6.sin6_addr + 12, 4);
        } else {
            out->ipv = 6;
            memcpy(out->ip, &s6.sin6_addr, 16);
            out->scope = s6.sin6_scope_id;
        }
        return 0;
    }
    return UW_EINVAL;
}

/* As a sockaddr; IPv4 as IPv4-mapped IPv6 when mapped. */
static socklen_t ep_to(const ep *e, bool mapped, struct sockaddr_storage *ss)
{
    memset(ss, 0, sizeof(*ss));
    if (e->ipv == 4 && !mapped) {
        struct sockaddr_in s4;
        memset(&s4, 0, sizeof(s4));
        s4.sin_family = AF_INET;
        s4.sin_port = htons(e->port);
        memcpy(&s4.sin_addr, e->ip, 4);
        memcpy(ss, &s4, sizeof(s4));
        return sizeof(s4);
    }
    struct sockaddr_in6 s6;
    memset(&s6, 0, sizeof(s6));
    s6.sin6_family = AF_INET6;
    s6.sin6_port = htons(e->port);
    if (e->ipv == 4) {
        memcpy(&s6.sin6_addr, k_mapped_prefix, 12);
        memcpy((uint8_t *)&s6.sin6_addr + 12, e->ip, 4);
    } else {
        memcpy(&s6.sin6_addr, e->ip, 16);
        s6.sin6_scope_id = e->scope;
    }
    memcpy(ss, &s6, sizeof(s6));
    return sizeof(s6);
}

static bool ip_is_any(uint8_t ipv, const uint8_t *ip)
{
    for (size_t i = 0; i < uw__pm_ip_len(ipv); i++)
        if (ip[i])
            return false;
    return true;
}

static const char *ep_str(uint8_t ipv, const uint8_t *ip, uint16_t port, char *buf, size_t cap)
{
    char a[INET6_ADDRSTRLEN];
    if (!inet_ntop(ipv == 4 ? AF_INET : AF_INET6, ip, a, sizeof(a)))
        snprintf(a, sizeof(a), "?");
    snprintf(buf, cap, ipv == 4 ? "%s:%u" : "[%s]:%u", a, (unsigned)port);
    return buf;
}

/* "ADDR", "ADDR:PORT", "[V6]", "[V6]:PORT", numeric only. */
static int parse_server(const char *s, uw_pm_udp_addr *out)
{
    char buf[INET6_ADDRSTRLEN + 16];
    size_t n = strlen(s);
    if (n == 0 || n >= sizeof(buf))
        return UW_EINVAL;
    memcpy(buf, s, n + 1);
    char *host = buf, *port = NULL;
    if (buf[0] == '[') {
        char *close = strchr(buf, ']');
        if (!close || (close[1] && close[1] != ':'))
            return UW_EINVAL;
        *close = '\0';
        host = buf + 1;
        if (close[1] == ':')
            port = close + 2;
    } else {
        char *colon = strchr(buf, ':');
        if (colon && !strchr(colon + 1, ':')) { /* one colon: IPv4:port */
            *colon = '\0';
            port = colon + 1;
        }
    }
    memset(out, 0, sizeof(*out));
    out->port = UW_PM_PORT;
    if (port) {
        unsigned long v = 0;
        if (!*port || strlen(port) > 5)
            return UW_EINVAL;
        for (const char *p = port; *p; p++) {
            if (*p < '0' || *p > '9')
                return UW_EINVAL;
            v = v * 10 + (unsigned long)(*p - '0');
        }
        if (v == 0 || v > 65535)
            return UW_EINVAL;
        out->port = (uint16_t)v;
    }
    if (inet_pton(AF_INET, host, out->ip) == 1)
        out->ipv = 4;
    else if (inet_pton(AF_INET6, host, out->ip) == 1)
        out->ipv = 6;
    else
        return UW_EINVAL;
    if (out->ipv == 6 && memcmp(out->ip, k_mapped_prefix, 12) == 0) {
        memmove(out->ip, out->ip + 12, 4);
        memset(out->ip + 4, 0, 12);
        out->ipv = 4;
    }
    return 0;
}

static socklen_t udp_sockaddr(const uw_pm_udp_addr *a, struct sockaddr_storage *ss)
{
    ep e;
    memset(&e, 0, sizeof(e));
    e.ipv = a->ipv;
    memcpy(e.ip, a->ip, 16);
    e.port = a->port;
    e.scope = a->scope_id;
    return ep_to(&e, false, ss);
}

static bool server_eq(const uw_pm_udp_addr *a, const uw_pm_udp_addr *b)
{
    return a->ipv == b->ipv && a->port == b->port && uw__pm_ip_eq(a->ipv, a->ip, b->ip);
}

static int errno_to_uw(int e)
{
    switch (e) {
    case ECONNREFUSED:
        return UW_ECONNREFUSED;
    case EHOSTUNREACH:
    case ENETUNREACH:
    case EADDRNOTAVAIL:
    case ENETDOWN:
    case EHOSTDOWN:
        return UW_EHOSTUNREACH;
    case ENOMEM:
        return UW_ENOMEM;
    case ENOBUFS:
    case EMFILE:
    case ENFILE:
        return UW_ENOBUFS;
    case EACCES:
    case EPERM:
        return UW_EPERM;
    default:
        return UW_EPROTO;
    }
}

static bool is_unreachable(int uw)
{
    return uw == UW_ECONNREFUSED || uw == UW_EHOSTUNREACH;
}

/* ------------------------------------------------------------------------ */
/* Create / destroy                                                          */

/* What a resolver's options come to (create, and the published resolver's
 * match). */
typedef struct settings {
    uint64_t timeout_ns;
    unsigned retries;
    uint64_t neg_ns;
    size_t cap;
    bool have_server;
    uw_pm_udp_addr server;
    uint16_t server_port;
} settings;

static int settings_from(const uw__pm_resolver_opts *opts, settings *out)
{
    uw__pm_resolver_opts o;
    memset(&o, 0, sizeof(o));
    if (opts)
        o = *opts;
    memset(out, 0, sizeof(*out));
    if (o.timeout_ms < 0)
        return UW_EINVAL;
    out->timeout_ns = (uint64_t)(o.timeout_ms ? o.timeout_ms : 1000) * UW_PM_NS_PER_MS;
    out->retries = o.retries == UW_PM_NO_RETRY ? 0 : o.retries ? o.retries : 2;
    if (out->retries > MAX_RETRIES)
        out->retries = MAX_RETRIES;
    out->neg_ns = o.neg_cache_ms < 0
                      ? 0
                      : (uint64_t)(o.neg_cache_ms ? o.neg_cache_ms : 30000) * UW_PM_NS_PER_MS;
    out->server_port = o.server_port ? o.server_port : UW_PM_PORT;
    out->cap = o.cache_max ? o.cache_max : 256;
    const char *server = o.server;
    if (!server && !o.ignore_env) {
        const char *env = getenv(UW__PM_SERVER_ENV);
        if (env && *env)
            server = env;
    }
    if (server) {
        out->have_server = true;
        return parse_server(server, &out->server);
    }
    return 0;
}

int uw__pm_resolver_create(uw__pm_resolver **out, const uw__pm_resolver_opts *opts)
{
    if (!out)
        return UW_EINVAL;
    *out = NULL;
    settings cfg;
    int rc = settings_from(opts, &cfg);
    if (rc)
        return rc;
    uw__pm_resolver *r = calloc(1, sizeof(*r));
    if (!r)
        return UW_ENOMEM;
    r->timeout_ns = cfg.timeout_ns;
    r->retries = cfg.retries;
    r->neg_ns = cfg.neg_ns;
    r->server_port = cfg.server_port;
    r->have_server = cfg.have_server;
    r->server = cfg.server;
    r->cap = cfg.cap;
    if (pthread_mutex_init(&r->mu, NULL) != 0) {
        free(r);
        return UW_ENOMEM;
    }
    r->next_assoc = random64(r);
    *out = r;
    return 0;
}

void uw__pm_resolver_destroy(uw__pm_resolver *r)
{
    if (!r)
        return;
    pthread_mutex_destroy(&r->mu);
    uw__pm_cache_free(&r->cache);
    free(r->neg);
    free(r);
}

/* ------------------------------------------------------------------------ */
/* Negative cache (callers hold the mutex)                                   */

static bool neg_matches(const neg_entry *e, int reason_class, const uw_pm_udp_addr *server,
                        const uw__pm_cache_key *k)
{
    if (!e->used || !server_eq(&e->server, server))
        return false;
    if (reason_class != UW__PM_RES_DENY)
        return e->reason != UW__PM_RES_DENY;
    return e->reason == UW__PM_RES_DENY && e->ipv == k->ipv && e->ap_port == k->ap_port &&
           uw__pm_ip_eq(k->ipv, e->cp_ip, k->cp_ip) && uw__pm_ip_eq(k->ipv, e->ap_ip, k->ap_ip);
}

/* The fresh entry of the class (DENY: for k; else the server's), or NULL. */
static const neg_entry *neg_find(uw__pm_resolver *r, int reason_class, const uw_pm_udp_addr *server,
                                 const uw__pm_cache_key *k, uint64_t now)
{
    for (size_t i = 0; i < r->neg_cap; i++) {
        neg_entry *e = &r->neg[i];
        if (!neg_matches(e, reason_class, server, k))
            continue;
        if (now >= e->until) {
            e->used = false;
            continue;
        }
        return e;
    }
    return NULL;
}

static void neg_put(uw__pm_resolver *r, int reason, const uw_pm_udp_addr *server,
                    const uw__pm_cache_key *k, uint64_t now)
{
    if (r->neg_ns == 0 || r->cap == 0)
        return;
    neg_entry *slot = NULL;
    for (size_t i = 0; i < r->neg_cap && !slot; i++)
        if (neg_matches(&r->neg[i], reason, server, k))
            slot = &r->neg[i];
    for (size_t i = 0; i < r->neg_cap && !slot; i++)
        if (!r->neg[i].used || now >= r->neg[i].until)
            slot = &r->neg[i];
    if (!slot && r->neg_cap < r->cap) { /* room to grow */
        size_t n = r->neg_cap ? r->neg_cap * 2 : NEG_FIRST;
        if (n > r->cap)
            n = r->cap;
        neg_entry *g = realloc(r->neg, n * sizeof(*g));
        if (g) {
            memset(g + r->neg_cap, 0, (n - r->neg_cap) * sizeof(*g));
            slot = &g[r->neg_cap];
            r->neg = g;
            r->neg_cap = n;
        } else if (r->neg_cap == 0) {
            return; /* no memory: not remembered */
        }
    }
    if (!slot) { /* full: the entry that would expire first goes */
        slot = &r->neg[0];
        for (size_t i = 1; i < r->neg_cap; i++)
            if (r->neg[i].until < slot->until)
                slot = &r->neg[i];
    }
    memset(slot, 0, sizeof(*slot));
    slot->used = true;
    slot->reason = reason;
    slot->server = *server;
    slot->server.scope_id = 0;
    slot->ipv = k->ipv;
    uw__pm_ip_copy(k->ipv, slot->cp_ip, k->cp_ip);
    uw__pm_ip_copy(k->ipv, slot->ap_ip, k->ap_ip);
    slot->ap_port = k->ap_port;
    slot->since = now;
    slot->until = uw__pm_add_sat(now, r->neg_ns);
}

/* ------------------------------------------------------------------------ */
/* Resolve                                                                   */

typedef struct call {
    uw__pm_resolver *r;
    ep dst, src;
    bool have_src;
    uw_pm_udp_addr server;
    uw__pm_cache_key key;
    int fd;
    uint64_t t0;
    uw__pm_resolution *out;
} call;

static void set_conventional(call *c, int reason, int err)
{
    c->out->use_sdp = false;
    c->out->reason = reason;
    c->out->err = err;
    c->out->addrlen = ep_to(&c->dst, c->dst.mapped, &c->out->addr);
}

static void set_sdp(call *c, int reason, const uint8_t *ip, uint16_t port, uint8_t pmtime)
{
    ep e = c->dst;
    memcpy(e.ip, ip, 16);
    e.port = port;
    c->out->use_sdp = true;
    c->out->reason = reason;
    c->out->pmtime = pmtime;
    c->out->addrlen = ep_to(&e, c->dst.mapped, &c->out->addr);
}

/* The port mapper's UDP socket, connected (so ICMP errors come back as
 * ECONNREFUSED and only the server's datagrams arrive) and bound to the
 * Connecting Peer's address when it has one, so the PMSP sees the same
 * client address in the UDP source as in CpIPAddr. */
static int open_pm_socket(call *c)
{
    int fam = c->server.ipv == 4 ? AF_INET : AF_INET6;
    int fd = socket(fam, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return errno_to_uw(errno);
    struct sockaddr_storage ss;
    socklen_t len;
    if (c->have_src && c->src.ipv == c->server.ipv && !ip_is_any(c->src.ipv, c->src.ip)) {
        ep b = c->src;
        b.port = 0;
        len = ep_to(&b, false, &ss);
        if (bind(fd, (struct sockaddr *)&ss, len) != 0) {
            int e = errno_to_uw(errno);
            close(fd);
            return e;
        }
    }
    len = udp_sockaddr(&c->server, &ss);
    if (connect(fd, (struct sockaddr *)&ss, len) != 0) {
        int e = errno_to_uw(errno);
        close(fd);
        return e;
    }
    c->fd = fd;
    return 0;
}

/* CpIPAddr: the caller's bound address, or the source the routing table
 * picks for the destination (what the TCP connect will use): the port
 * mapper socket's own when it is connected to the destination host, else
 * that of a probe socket connected to the destination (which sends
 * nothing). */
static int find_cp_ip(const call *c, bool probe, uint8_t cp_ip[16])
{
    memset(cp_ip, 0, 16);
    if (c->have_src && !ip_is_any(c->src.ipv, c->src.ip)) {
        memcpy(cp_ip, c->src.ip, 16);
        return 0;
    }
    int fd = c->fd;
    if (probe) {
        fd = socket(c->dst.ipv == 4 ? AF_INET : AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
            return errno_to_uw(errno);
        struct sockaddr_storage ss;
        socklen_t len = ep_to(&c->dst, false, &ss);
        if (connect(fd, (struct sockaddr *)&ss, len) != 0) {
            int e = errno_to_uw(errno);
            close(fd);
            return e;
        }
    }
    struct sockaddr_storage ss;
    socklen_t len = sizeof(ss);
    int rc = getsockname(fd, (struct sockaddr *)&ss, &len) == 0 ? 0 : errno_to_uw(errno);
    if (probe)
        close(fd);
    if (rc)
        return rc;
    ep me;
    if (ep_from((struct sockaddr *)&ss, len, &me) != 0 || me.ipv != c->dst.ipv)
        return UW_EPROTO;
    memcpy(cp_ip, me.ip, 16);
    return 0;
}

static uint64_t fixed_assoc(void *ud)
{
    return *(const uint64_t *)ud;
}

/* Hands the client's queued datagrams to the socket. Returns 0 or the
 * UW_E* code of a send that failed for good. */
static int flush_sends(call *c, uw_pm_client *pc, uint64_t now)
{
    uw_pm_datagram dg;
    while (uw_pm_client_send(pc, now, &dg) == 1) {
        /* A PMAck goes to where the PMAccept came from (7.4); on a connected
         * socket that can only be the server. */
        if (!server_eq(&dg.to, &c->server))
            continue;
        if (send(c->fd, dg.data, dg.len, MSG_NOSIGNAL) < 0) {
            int e = errno;
            if (e == EAGAIN || e == EWOULDBLOCK || e == EINTR || e == ENOBUFS)
                continue; /* a retransmission makes up for it */
            return errno_to_uw(e);
        }
    }
    return 0;
}

/* Runs one transaction. Returns 0 with *res filled, or the UW_E* code of a
 * socket failure (unreachable or local); *sent counts the PMReqs either way. */
static int exchange(call *c, uint64_t assoc, int timeout_ms, uw_pm_result *res, unsigned *sent)
{
    uw__pm_resolver *r = c->r;
    uint64_t timeout_ns = timeout_ms > 0 ? (uint64_t)timeout_ms * UW_PM_NS_PER_MS : r->timeout_ns;
    /* The whole retransmission span, rto * (2^(retries+1) - 1), fits the
     * timeout. */
    uint64_t units = (2ull << r->retries) - 1;
    uint64_t rto = timeout_ns / units;
    if (rto == 0)
        rto = 1;
    uw_pm_client_opts o;
    memset(&o, 0, sizeof(o));
    o.random = fixed_assoc;
    o.random_ud = &assoc;
    o.rto_ns = rto;
    o.rto_max_ns = rto << r->retries;
    o.max_retries = r->retries ? r->retries : UW_PM_NO_RETRY;
    o.max_txns = 1;
    o.cache_max = 1;
    uw_pm_client *pc;
    int rc = uw_pm_client_create(&pc, &o);
    if (rc)
        return rc;
    uw_pm_query q;
    memset(&q, 0, sizeof(q));
    q.ipv = c->key.ipv;
    memcpy(q.cp_ip, c->key.cp_ip, 16);
    q.cp_port = c->have_src ? c->src.port : 0;
    memcpy(q.ap_ip, c->key.ap_ip, 16);
    q.ap_port = c->key.ap_port;
    q.server = c->server;
    uint64_t start = now_ns(), txn;
    uint64_t hard = uw__pm_add_sat(start, timeout_ns);
    rc = uw_pm_client_start(pc, &q, start, &txn);
    while (rc == 0) {
        uint64_t now = now_ns();
        rc = flush_sends(c, pc, now);
        if (rc)
            break;
        if (uw_pm_client_next_result(pc, res) == 1) {
            /* The PMAck a PMAccept queued goes out now: 7.4. */
            rc = flush_sends(c, pc, now_ns());
            rc = is_unreachable(rc) ? 0 : rc; /* the answer is in; too late to matter */
            break;
        }
        if (now >= hard) {
            uw_pm_client_cancel(pc, txn, now); /* result next round: CANCELED */
            continue;
        }
        uint64_t dl = uw_pm_client_next_deadline(pc);
        if (dl > hard)
            dl = hard;
        uint64_t wait_ms = dl > now ? (dl - now + UW_PM_NS_PER_MS - 1) / UW_PM_NS_PER_MS : 0;
        struct pollfd p = {.fd = c->fd, .events = POLLIN};
        int n = poll(&p, 1, wait_ms > INT_MAX ? INT_MAX : (int)wait_ms);
        if (n < 0 && errno != EINTR) {
            rc = errno_to_uw(errno);
            break;
        }
        now = now_ns();
        for (int k = 0; n > 0 && k < 64; k++) {
            uint8_t buf[UW_PM_MSG_LEN + 16];
            ssize_t got = recv(c->fd, buf, sizeof(buf), 0);
            if (got < 0) {
                if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
                    rc = errno_to_uw(errno); /* ECONNREFUSED: ICMP port unreachable */
                break;
            }
            uw_pm_client_recv(pc, now, buf, (size_t)got, &c->server);
        }
        uw_pm_client_tick(pc, now);
    }
    uw_pm_client_stats st;
    uw_pm_client_stats_get(pc, &st);
    *sent = (unsigned)st.reqs_sent;
    uw_pm_client_destroy(pc);
    return rc;
}

static void describe_server(const call *c, char *buf, size_t cap)
{
    ep_str(c->server.ipv, c->server.ip, c->server.port, buf, cap);
}

/* Reads dst and src into c and picks the port mapper to ask. */
static int setup_call(uw__pm_resolver *r, const struct sockaddr *dst, socklen_t dstlen,
                      const struct sockaddr *src, call *c)
{
    memset(c, 0, sizeof(*c));
    c->r = r;
    c->fd = -1;
    c->t0 = now_ns();
    if (ep_from(dst, dstlen, &c->dst) != 0 || c->dst.port == 0)
        return UW_EINVAL;
    if (src) {
        /* The length follows from the family: sockaddr_in or sockaddr_in6. */
        socklen_t slen = src->sa_family == AF_INET ? (socklen_t)sizeof(struct sockaddr_in)
                                                   : (socklen_t)sizeof(struct sockaddr_in6);
        if (ep_from(src, slen, &c->src) != 0)
            return UW_EINVAL;
        if (c->src.ipv == 6 && c->dst.ipv == 4 && ip_is_any(6, c->src.ip)) {
            c->src.ipv = 4; /* a dual-stack socket on "::" reaching an IPv4-mapped address */
            c->src.scope = 0;
        }
        if (c->src.ipv != c->dst.ipv)
            return UW_EINVAL;
        c->have_src = true;
    }
    if (r->have_server) {
        c->server = r->server;
    } else {
        c->server.ipv = c->dst.ipv;
        memcpy(c->server.ip, c->dst.ip, 16);
        c->server.port = r->server_port;
        c->server.scope_id = c->dst.scope;
    }
    c->key.ipv = c->dst.ipv;
    memcpy(c->key.ap_ip, c->dst.ip, 16);
    c->key.ap_port = c->dst.port;
    return 0;
}

int uw__pm_resolve(uw__pm_resolver *r, const struct sockaddr *dst, socklen_t dstlen,
                   const struct sockaddr *src, int timeout_ms, uw__pm_resolution *out)
{
    if (!r || !dst || !out)
        return UW_EINVAL;
    call c;
    if (setup_call(r, dst, dstlen, src, &c) != 0)
        return UW_EINVAL;
    memset(out, 0, sizeof(*out));
    c.out = out;
    set_conventional(&c, UW__PM_RES_ERROR, 0);
    char sv[INET6_ADDRSTRLEN + 16];
    describe_server(&c, sv, sizeof(sv));

    /* A port mapper that timed out or was unreachable a moment ago: no
     * socket, no wait. */
    uint64_t now = now_ns();
    pthread_mutex_lock(&r->mu);
    const neg_entry *ne = neg_find(r, UW__PM_RES_TIMEOUT, &c.server, &c.key, now);
    int cached = ne ? ne->reason : 0;
    uint64_t age = ne ? now - ne->since : 0;
    pthread_mutex_unlock(&r->mu);
    if (cached) {
        set_conventional(&c, UW__PM_RES_CACHED, 0);
        out->cached_reason = cached;
        snprintf(out->why, sizeof(out->why), "port mapper %s %s %llu ms ago (remembered)", sv,
                 cached == UW__PM_RES_TIMEOUT ? "timed out" : "was unreachable",
                 (unsigned long long)(age / UW_PM_NS_PER_MS));
        goto done;
    }

    int rc = open_pm_socket(&c);
    if (rc == 0) {
        /* A configured port mapper on the destination host itself (the
         * usual UWARP_PM_SERVER on one machine) is routed as the
         * destination is: its socket's address is the source, no probe. */
        bool probe = r->have_server && !(c.server.ipv == c.dst.ipv &&
                                         uw__pm_ip_eq(c.dst.ipv, c.server.ip, c.dst.ip) &&
                                         c.server.scope_id == c.dst.scope);
        rc = find_cp_ip(&c, probe, c.key.cp_ip);
    }
    if (rc) {
        bool unreach = is_unreachable(rc);
        set_conventional(&c, unreach ? UW__PM_RES_UNREACHABLE : UW__PM_RES_ERROR, rc);
        snprintf(out->why, sizeof(out->why), "port mapper %s: %s", sv, uw_strerror(rc));
        if (unreach) {
            pthread_mutex_lock(&r->mu);
            neg_put(r, UW__PM_RES_UNREACHABLE, &c.server, &c.key, now_ns());
            pthread_mutex_unlock(&r->mu);
        }
        goto done;
    }

    /* Answers: a PMAccept within its PmTime, a PMDeny within the negative
     * cache time. Then the next AssocHandle. */
    now = now_ns();
    pthread_mutex_lock(&r->mu);
    const uw__pm_cache_entry *pe = uw__pm_cache_lookup(&r->cache, &c.key, now);
    uw__pm_cache_entry hit;
    memset(&hit, 0, sizeof(hit));
    if (pe)
        hit = *pe;
    ne = pe ? NULL : neg_find(r, UW__PM_RES_DENY, &c.server, &c.key, now);
    age = ne ? now - ne->since : 0;
    uint64_t assoc = r->next_assoc++;
    pthread_mutex_unlock(&r->mu);
    char sdp[INET6_ADDRSTRLEN + 16];
    if (pe) {
        set_sdp(&c, UW__PM_RES_CACHED, hit.sdp_ip, hit.sdp_port, hit.pmtime);
        out->cached_reason = UW__PM_RES_ACCEPT;
        snprintf(out->why, sizeof(out->why), "cached PMAccept from %s: SDP Address %s (PmTime %u)",
                 sv, ep_str(c.key.ipv, hit.sdp_ip, hit.sdp_port, sdp, sizeof(sdp)),
                 (unsigned)hit.pmtime);
        goto done;
    }
    if (ne) {
        set_conventional(&c, UW__PM_RES_CACHED, 0);
        out->cached_reason = UW__PM_RES_DENY;
        snprintf(out->why, sizeof(out->why), "port mapper %s denied port %u %llu ms ago", sv,
                 (unsigned)c.key.ap_port, (unsigned long long)(age / UW_PM_NS_PER_MS));
        goto done;
    }

    uw_pm_result res;
    memset(&res, 0, sizeof(res));
    rc = exchange(&c, assoc, timeout_ms, &res, &out->sent);
    now = now_ns();
    if (rc) {
        bool unreach = is_unreachable(rc);
        set_conventional(&c, unreach ? UW__PM_RES_UNREACHABLE : UW__PM_RES_ERROR, rc);
        snprintf(out->why, sizeof(out->why), "port mapper %s: %s", sv, uw_strerror(rc));
        if (unreach) {
            pthread_mutex_lock(&r->mu);
            neg_put(r, UW__PM_RES_UNREACHABLE, &c.server, &c.key, now);
            pthread_mutex_unlock(&r->mu);
        }
        goto done;
    }
    if (res.outcome == UW_PM_USE_SDP && res.port == 0) {
        /* Nothing can connect to port 0: a broken answer, taken as a PMDeny
         * (remembered as one) rather than passed on. */
        set_conventional(&c, UW__PM_RES_ERROR, UW_EPROTO);
        snprintf(out->why, sizeof(out->why), "PMAccept from %s names SDP port 0", sv);
        pthread_mutex_lock(&r->mu);
        neg_put(r, UW__PM_RES_DENY, &c.server, &c.key, now);
        pthread_mutex_unlock(&r->mu);
        goto done;
    }
    pthread_mutex_lock(&r->mu);
    if (res.outcome == UW_PM_USE_SDP) {
        /* 7.3.1.4: cached for PmTime from the receipt of the PMAccept
         * (not at all if the cache cannot be had: no memory). */
        if (!r->cache.e && uw__pm_cache_init(&r->cache, r->cap, NULL) != 0)
            uw__pm_cache_free(&r->cache); /* capacity 0 again: lookups find nothing */
        if (r->cache.e)
            uw__pm_cache_put(&r->cache, &c.key, res.ip, res.port, res.pmtime, now);
    } else if (res.reason == UW_PM_R_DENY) {
        neg_put(r, UW__PM_RES_DENY, &c.server, &c.key, now);
    } else {
        neg_put(r, UW__PM_RES_TIMEOUT, &c.server, &c.key, now);
    }
    pthread_mutex_unlock(&r->mu);
    if (res.outcome == UW_PM_USE_SDP) {
        set_sdp(&c, UW__PM_RES_ACCEPT, res.ip, res.port, res.pmtime);
        snprintf(out->why, sizeof(out->why), "PMAccept from %s: SDP Address %s (PmTime %u)", sv,
                 ep_str(c.key.ipv, res.ip, res.port, sdp, sizeof(sdp)), (unsigned)res.pmtime);
    } else if (res.reason == UW_PM_R_DENY) {
        set_conventional(&c, UW__PM_RES_DENY, 0);
        snprintf(out->why, sizeof(out->why), "PMDeny from %s for port %u", sv,
                 (unsigned)c.key.ap_port);
    } else {
        set_conventional(&c, UW__PM_RES_TIMEOUT, 0);
        snprintf(out->why, sizeof(out->why),
                 "port mapper %s did not answer in %llu ms (%u PMReq%s)", sv,
                 (unsigned long long)((now - c.t0) / UW_PM_NS_PER_MS), res.sent,
                 res.sent == 1 ? "" : "s");
    }
done:
    if (c.fd >= 0)
        close(c.fd);
    out->elapsed_ns = now_ns() - c.t0;
    return 0;
}

/* Drops the cached answer for dst; deny: remember a denial for it (7.5.1's
 * reset), else also forget any denial remembered (a stale answer). */
static int drop_answer(uw__pm_resolver *r, const struct sockaddr *dst, socklen_t dstlen,
                       const struct sockaddr *src, bool deny)
{
    if (!r || !dst)
        return UW_EINVAL;
    call c;
    if (setup_call(r, dst, dstlen, src, &c) != 0)
        return UW_EINVAL;
    /* No port mapper socket here: find_cp_ip probes the route. */
    int rc = find_cp_ip(&c, true, c.key.cp_ip);
    uint64_t now = now_ns();
    pthread_mutex_lock(&r->mu);
    uw__pm_cache_remove(&r->cache, &c.key);
    if (rc == 0 && deny)
        neg_put(r, UW__PM_RES_DENY, &c.server, &c.key, now);
    for (size_t i = 0; rc == 0 && !deny && i < r->neg_cap; i++)
        if (neg_matches(&r->neg[i], UW__PM_RES_DENY, &c.server, &c.key))
            r->neg[i].used = false;
    pthread_mutex_unlock(&r->mu);
    return 0;
}

int uw__pm_resolver_sdp_reset(uw__pm_resolver *r, const struct sockaddr *dst, socklen_t dstlen,
                              const struct sockaddr *src)
{
    return drop_answer(r, dst, dstlen, src, true);
}

int uw__pm_resolver_forget(uw__pm_resolver *r, const struct sockaddr *dst, socklen_t dstlen,
                           const struct sockaddr *src)
{
    return drop_answer(r, dst, dstlen, src, false);
}

void uw__pm_resolver_flush(uw__pm_resolver *r)
{
    if (!r)
        return;
    pthread_mutex_lock(&r->mu);
    uw__pm_cache_clear(&r->cache);
    for (size_t i = 0; i < r->neg_cap; i++)
        r->neg[i].used = false;
    pthread_mutex_unlock(&r->mu);
}

/* ------------------------------------------------------------------------ */
/* The published resolver                                                    */

static _Atomic(uw__pm_resolver *) published;

void uw__pm_resolver_publish(uw__pm_resolver *r)
{
    atomic_store(&published, r);
}

uw__pm_resolver *uw__pm_resolver_published(const uw__pm_resolver_opts *opts)
{
    uw__pm_resolver *r = atomic_load(&published);
    settings cfg;
    if (!r || settings_from(opts, &cfg) != 0)
        return NULL;
    bool same = cfg.timeout_ns == r->timeout_ns && cfg.retries == r->retries &&
                cfg.neg_ns == r->neg_ns && cfg.cap == r->cap && cfg.server_port == r->server_port &&
                cfg.have_server == r->have_server &&
                (!cfg.have_server ||
                 (server_eq(&cfg.server, &r->server) && cfg.server.scope_id == r->server.scope_id));
    return same ? r : NULL;
}

bool uw__pm_resolver_is_published(const uw__pm_resolver *r)
{
    return r && r == atomic_load(&published);
}

void uw__pm_resolver_published_atfork(int phase)
{
    /* The pointer cannot change between prepare and parent/child: it is
     * published once, before any fork that matters. */
    uw__pm_resolver *r = atomic_load(&published);
    if (!r)
        return;
    if (phase == 0)
        pthread_mutex_lock(&r->mu);
    else
        pthread_mutex_unlock(&r->mu);
}

const char *uw__pm_res_short_why(const uw__pm_resolution *res)
{
    bool cached = res->reason == UW__PM_RES_CACHED;
    switch (cached ? res->cached_reason : res->reason) {
    case UW__PM_RES_ACCEPT:
        return cached ? "port mapper accept (cached)" : "port mapper accept";
    case UW__PM_RES_DENY:
        return "pm deny";
    case UW__PM_RES_TIMEOUT:
        return "pm timeout";
    case UW__PM_RES_UNREACHABLE:
        return "pm unreachable";
    default:
        return "pm error";
    }
}
