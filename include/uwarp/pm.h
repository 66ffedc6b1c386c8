/* SDP port mapper (draft-pinkerton-iwarp-sdp-01 section 7): the message codec
 * and the PM client and PM server (PMSP) state machines.
 *
 * Sans-I/O: nothing here touches a socket, reads a clock, draws entropy or
 * keeps a global. Datagrams go in with the UDP address they came from and come
 * out with the UDP address they must go to; time is a uint64_t count of
 * nanoseconds ("now") from any monotonic clock the caller likes, and it must
 * never go backwards for one object (a smaller value is treated as the largest
 * seen so far); randomness is a callback or a seed. Every object answers "when
 * is my next deadline?" so the caller knows how long it may sleep.
 *
 * Addresses. A port mapper message carries one IP version (IPV) for both its
 * addresses. Addresses are 16 octets in network order; for IPv4 only the first
 * 4 are used and the other 12 are zero in every structure this library fills
 * in (section 7.3.1.3: sent as zeros, ignored on receipt).
 *
 * Errors are negative UW_E* codes (uwarp/error.h). No function here is fatal
 * to its object: after an error the object is unchanged and usable.
 *
 * Thread-safety: the codec functions are pure and reentrant. A uw_pm_client or
 * uw_pm_server may be used by one thread at a time (callers lock); distinct
 * objects are independent.
 */
#ifndef UWARP_PM_H
#define UWARP_PM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "uwarp/common.h"
#include "uwarp/error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Exported from libuwarp.so, which is built with -fvisibility=hidden. */
#pragma GCC visibility push(default)

#define UW_PM_PORT 3935u  /* section 16: the IANA port of the PMSP */
#define UW_PM_MSG_LEN 48u /* Figure 17: 4 + 4 + 8 + 16 + 16 octets */
#define UW_PM_NS_PER_MS 1000000ull
#define UW_PM_FOREVER UINT64_MAX /* "no deadline" and "permanent" */

/* Message types (section 7.3.1.2, MT). */
enum uw_pm_type {
    UW_PM_REQ = 0,    /* PMReq */
    UW_PM_ACCEPT = 1, /* PMAccept */
    UW_PM_ACK = 2,    /* PMAck */
    UW_PM_DENY = 3,   /* PMDeny */
};

/* ------------------------------------------------------------------------ */
/* Codec                                                                     */

/* One message, decoded. Field names follow Figure 17. */
typedef struct uw_pm_msg {
    uint8_t type;     /* enum uw_pm_type */
    uint8_t ipv;      /* 4 or 6 */
    uint8_t pmtime;   /* PmTime; meaningful in PMAccept only */
    uint16_t ap_port; /* ApPort */
    uint16_t cp_port; /* CpPort */
    uint64_t assoc;   /* AssocHandle */
    uint8_t cp_ip[16];
    uint8_t ap_ip[16];
} uw_pm_msg;

/* Writes m as the UW_PM_MSG_LEN octets of Figure 17 into out and returns
 * UW_PM_MSG_LEN. Ver and Reserved are written as zero (7.3.1.1, 7.3.1.5), the
 * unused 96 bits of IPv4 addresses as zero whatever m holds (7.3.1.3), and
 * PmTime as zero unless m is a PMAccept (7.4: "MUST be set to zero" in PMReq,
 * PMAck and PMDeny). Every PmTime value 0..255 is in the defined range.
 * Errors: UW_EINVAL (m or out NULL, type over 3, ipv neither 4 nor 6),
 * UW_ENOBUFS (cap < UW_PM_MSG_LEN). */
ssize_t uw_pm_encode(const uw_pm_msg *m, uint8_t *out, size_t cap);

/* Decodes one UDP payload. A datagram is exactly one message, so len must be
 * UW_PM_MSG_LEN. Reserved is never checked (7.3.1.5); the unused 96 bits of
 * IPv4 addresses are ignored and reported as zero; PmTime and ApPort are
 * reported as received, even where the receiver must ignore them.
 * Returns 0, or: UW_EINVAL (NULL argument), UW_EMSGSIZE (len is not 48),
 * UW_EPROTO (Ver is not 0, or IPV is neither 4 nor 6). On error *out is not
 * written, so a malformed datagram has no side effect. */
int uw_pm_decode(const void *buf, size_t len, uw_pm_msg *out);

/* How long a PMAccept with this PmTime may be cached (7.3.1.4), in ns:
 * 0 for PmTime 0 (single use, never cached), PmTime * 250 ms for 1..127,
 * PmTime * 1 s for 128..254, UW_PM_FOREVER for 255. */
uint64_t uw_pm_pmtime_ns(uint8_t pmtime);

/* Short lowercase name of a message type ("req", "accept", "ack", "deny"),
 * "?" for other values. */
const char *uw_pm_type_name(int type);

/* ------------------------------------------------------------------------ */
/* UDP addresses and datagrams                                               */

/* A UDP endpoint. ipv is 4 or 6; ip is in network order (IPv4 in ip[0..3]);
 * scope_id is the IPv6 zone (0 if none) and is only carried, never compared. */
typedef struct uw_pm_udp_addr {
    uint8_t ipv;
    uint16_t port;
    uint32_t scope_id;
    uint8_t ip[16];
} uw_pm_udp_addr;

/* A datagram to send: len octets of data to the address to. */
typedef struct uw_pm_datagram {
    uw_pm_udp_addr to;
    size_t len; /* 0 when there is nothing to send */
    uint8_t data[UW_PM_MSG_LEN];
} uw_pm_datagram;

/* Randomness source: returns 64 uniformly random bits. */
typedef uint64_t (*uw_pm_random_cb)(void *ud);

/* ------------------------------------------------------------------------ */
/* PM client (sections 7.4, 7.5, 7.5.1)                                      */

typedef struct uw_pm_client uw_pm_client;

typedef struct uw_pm_client_opts {
    /* AssocHandle source (7.5.1: the initial handle SHOULD be random). With
     * random NULL, an internal generator seeded with seed is used: then seed
     * must itself be unpredictable (say from getrandom()) outside tests. */
    uw_pm_random_cb random;
    void *random_ud;
    uint64_t seed;
    uint64_t rto_ns;           /* first reply timeout; 0 means 250 ms */
    uint64_t rto_max_ns;       /* backoff cap (each timeout doubles); 0 means 2 s */
    unsigned max_retries;      /* retransmissions after the first PMReq; 0 means 4.
                                  UW_PM_NO_RETRY (no retransmission at all) is allowed. */
    size_t max_txns;           /* transactions held at once, in flight or lingering; 0 means 64 */
    size_t cache_max;          /* cached PMAccepts; 0 means 128 */
    uint64_t linger_ns;        /* how long a finished transaction is remembered so late
                                  replies count as duplicates; 0 means the whole
                                  retransmission span (and at least 1 s) */
    const uw_allocator *alloc; /* NULL for malloc/free */
} uw_pm_client_opts;

#define UW_PM_NO_RETRY UINT32_MAX /* max_retries: send the PMReq once */

/* What the Connecting Peer asks for: the Conventional Address of the service
 * (ap_ip, ap_port), its own address (cp_ip) and the local TCP port it will
 * connect from (cp_port), and where the PMSP is (server; port 0 means
 * UW_PM_PORT, section 7.4's default). All addresses have version ipv. */
typedef struct uw_pm_query {
    uint8_t ipv;
    uint8_t cp_ip[16];
    uint16_t cp_port;
    uint8_t ap_ip[16];
    uint16_t ap_port;
    uw_pm_udp_addr server;
} uw_pm_query;

enum uw_pm_outcome {
    UW_PM_USE_SDP = 1,          /* connect to the SDP Address in the result */
    UW_PM_USE_CONVENTIONAL = 2, /* connect to the Conventional Address (no SDP) */
};

enum uw_pm_reason {
    UW_PM_R_ACCEPT = 1,  /* a PMAccept arrived (and a PMAck was queued) */
    UW_PM_R_CACHED = 2,  /* answered from the cache; nothing was sent */
    UW_PM_R_DENY = 3,    /* a PMDeny arrived */
    UW_PM_R_TIMEOUT = 4, /* no reply after the last retransmission (7.5.1) */
    UW_PM_R_RESET = 5,   /* the SDP Address answered with a reset (7.5.1) */
    UW_PM_R_CANCELED = 6 /* uw_pm_client_cancel() */
};

/* The end of one transaction. ip/port is the address to connect to: the SDP
 * Address (ApIPAddr and ApPort of the PMAccept) for UW_PM_USE_SDP, the
 * Conventional Address of the query otherwise. */
typedef struct uw_pm_result {
    uint64_t txn; /* the id uw_pm_client_start() gave */
    int outcome;  /* enum uw_pm_outcome */
    int reason;   /* enum uw_pm_reason */
    uint8_t ipv;
    uint8_t ip[16];
    uint16_t port;
    uint8_t pmtime;       /* PmTime of the PMAccept (ACCEPT and CACHED) */
    uint64_t assoc;       /* AssocHandle used (0 for CACHED) */
    unsigned sent;        /* PMReqs sent: 1 + retransmissions (0 for CACHED) */
    uint64_t cache_until; /* for ACCEPT/CACHED: when the cache entry expires
                             (UW_PM_FOREVER: permanent; 0: not cached) */
} uw_pm_result;

/* Client counters (monotonic since create). */
typedef struct uw_pm_client_stats {
    uint64_t started, cache_hits, reqs_sent, retransmits, accepts, denies, timeouts, acks_sent,
        duplicates, no_state, malformed, ignored;
} uw_pm_client_stats;

/* Errors: UW_EINVAL (opts NULL, rto_max_ns < rto_ns), UW_ENOMEM. All memory
 * (transaction slots and cache) is allocated here; nothing later. */
int uw_pm_client_create(uw_pm_client **out, const uw_pm_client_opts *opts);
/* Frees everything. c may be NULL. */
void uw_pm_client_destroy(uw_pm_client *c);

/* Starts a transaction for q at time now and stores its id in *txn (ids are
 * never 0 and never reused by one client). A fresh cache entry for the same
 * (ipv, cp_ip, ap_ip, ap_port) answers at once with reason UW_PM_R_CACHED;
 * otherwise a PMReq is queued (uw_pm_client_send) with a new AssocHandle, so
 * (AssocHandle, CpIPAddr, CpPort) is unique among this client's transactions
 * (7.5.1). Either way the result arrives through uw_pm_client_next_result().
 * Errors: UW_EINVAL (NULL, ipv not 4/6, server ipv not 4/6), UW_EBUSY (all
 * max_txns slots hold unfinished or unread transactions). q is copied. */
int uw_pm_client_start(uw_pm_client *c, const uw_pm_query *q, uint64_t now, uint64_t *txn);

/* Gives the next datagram to send (a PMReq, a retransmitted PMReq or a
 * PMAck), first running any timers due at now. Returns 1 with *out filled, or
 * 0 when nothing is queued. Errors: UW_EINVAL. */
int uw_pm_client_send(uw_pm_client *c, uint64_t now, uw_pm_datagram *out);

/* What uw_pm_client_recv() did with a datagram. */
enum uw_pm_client_verdict {
    UW_PM_C_ACCEPTED = 0,  /* PMAccept for a waiting transaction: done, PMAck queued */
    UW_PM_C_DENIED = 1,    /* PMDeny for a waiting transaction: done, nothing sent */
    UW_PM_C_DUPLICATE = 2, /* a later reply to a finished transaction: discarded */
    UW_PM_C_NO_STATE = 3,  /* a reply matching no transaction: discarded */
    UW_PM_C_IGNORED = 4,   /* a PMReq or PMAck: not for a client; discarded */
};

/* Takes one received datagram; from is its UDP source, where the PMAck goes
 * (7.4). Replies are matched by (AssocHandle, CpPort, CpIPAddr) (7.5).
 * Returns an enum uw_pm_client_verdict, or the errors of uw_pm_decode() for a
 * malformed datagram (which changes nothing), or UW_EINVAL for NULL
 * arguments. data is only read during the call. */
int uw_pm_client_recv(uw_pm_client *c, uint64_t now, const void *data, size_t len,
                      const uw_pm_udp_addr *from);

/* Runs the timers due at now: retransmissions, transaction timeouts, expiry
 * of lingering transactions and of cache entries. */
void uw_pm_client_tick(uw_pm_client *c, uint64_t now);

/* The earliest time uw_pm_client_tick() has work to do (UW_PM_FOREVER if
 * none). Queued datagrams and results are not deadlines: poll them first. */
uint64_t uw_pm_client_next_deadline(const uw_pm_client *c);

/* Takes the next finished transaction's result, oldest first. Returns 1 with
 * *out filled, 0 if none is ready. Errors: UW_EINVAL. */
int uw_pm_client_next_result(uw_pm_client *c, uw_pm_result *out);

/* Stops a transaction that has not finished: its result becomes
 * UW_PM_USE_CONVENTIONAL with reason UW_PM_R_CANCELED. Errors: UW_ENOENT
 * (unknown id or already finished), UW_EINVAL (c NULL). */
int uw_pm_client_cancel(uw_pm_client *c, uint64_t txn, uint64_t now);

/* The Connecting Peer got a connection reset from the SDP Address it was given
 * for the Conventional Address (q's ipv, cp_ip, ap_ip, ap_port). Section 7.5.1
 * treats that like a PMDeny: the cache entry is flushed and *out says to use
 * the Conventional Address (reason UW_PM_R_RESET, txn 0). out may be NULL.
 * Errors: UW_EINVAL. */
int uw_pm_client_sdp_reset(uw_pm_client *c, const uw_pm_query *q, uw_pm_result *out);

/* Flushes the whole cache. */
void uw_pm_client_flush_cache(uw_pm_client *c);
/* Entries in the cache right now (expired ones are counted until a tick). */
size_t uw_pm_client_cached(const uw_pm_client *c);
/* Transactions held (in flight, unread or lingering). */
size_t uw_pm_client_txns(const uw_pm_client *c);
void uw_pm_client_stats_get(const uw_pm_client *c, uw_pm_client_stats *out);

/* ------------------------------------------------------------------------ */
/* PM server (PMSP; sections 7.4, 7.5, 7.5.2, 15.2)                          */

typedef struct uw_pm_server uw_pm_server;

/* The answer to a PMReq: the SDP Address and PmTime to put in the PMAccept.
 * ip has the request's IP version. */
typedef struct uw_pm_mapping {
    uint8_t ip[16];
    uint16_t port;
    uint8_t pmtime;
} uw_pm_mapping;

/* The current state of the requested service (7.5.2: every reply, to a
 * duplicate too, reflects the current state). req is the PMReq, from its UDP
 * source. Return 1 to accept (fill *out; it starts as the requested address
 * and port with PmTime 0) or 0 to deny. Called during uw_pm_server_recv(); it
 * must not call back into the server. */
typedef int (*uw_pm_lookup_cb)(void *ud, const uw_pm_msg *req, const uw_pm_udp_addr *from,
                               uw_pm_mapping *out);

enum uw_pm_server_event_type {
    UW_PM_EV_ACCEPTED = 1, /* a new transaction was accepted */
    UW_PM_EV_ACKED = 2,    /* its PMAck (or LLP connection) arrived: the mapping is in use */
    UW_PM_EV_RELEASED = 3, /* no PMAck in time, replaced, or service gone: resources freed */
};

enum uw_pm_release_why {
    UW_PM_REL_TIMEOUT = 1,  /* 7.5.2: no PMAck before the timeout */
    UW_PM_REL_REPLACED = 2, /* 7.5.2: a new AssocHandle for the same 4-tuple */
    UW_PM_REL_DENIED = 3,   /* a duplicate PMReq found the service unavailable */
};

typedef struct uw_pm_server_event {
    int type;                     /* enum uw_pm_server_event_type */
    int why;                      /* RELEASED only: enum uw_pm_release_why */
    const uw_pm_msg *req;         /* the PMReq the transaction was created for */
    const uw_pm_mapping *mapping; /* what the last PMAccept said */
    const uw_pm_udp_addr *from;   /* the client's UDP address */
} uw_pm_server_event;

/* Informs the owner of state changes (dynamic SDP listen ports are created on
 * ACCEPTED and may be closed on RELEASED). Pointers are valid during the call
 * only; it must not call back into the server. */
typedef void (*uw_pm_event_cb)(void *ud, const uw_pm_server_event *ev);

typedef struct uw_pm_server_opts {
    uw_pm_lookup_cb lookup; /* required */
    void *lookup_ud;
    uw_pm_event_cb on_event; /* optional */
    void *event_ud;
    uint64_t accept_timeout_ns; /* 7.5.2 timer per PMAccept; 0 means 2 s (aggressive, 15.2.1) */
    uint64_t ack_linger_ns;     /* acknowledged transactions are kept this long so late
                                   duplicate PMReqs are recognised; 0 means accept_timeout_ns */
    size_t max_pending;         /* transactions held at once; 0 means 4096. When full, new
                                   PMReqs are denied (resource exhaustion, 7.4) */
    uint32_t rate_per_s;        /* PMReqs per second per source IP; 0 means 100 */
    uint32_t rate_burst;        /* bucket depth; 0 means 2 * rate_per_s; at most 1000000 */
    bool rate_unlimited;        /* turn per-source limiting off */
    uint32_t timeout_penalty;   /* tokens a source loses when one of its PMAccepts times
                                   out (15.2.1: quench sources of partial mappings); 0 means
                                   rate_burst / 4, UINT32_MAX means none */
    size_t rate_slots;          /* sources tracked at once; 0 means 1024 */
    uint64_t hash_seed;         /* keys the internal hash tables; make it random (so a
                                   flood cannot aim at one hash chain) */
    const uw_allocator *alloc;  /* NULL for malloc/free */
} uw_pm_server_opts;

/* What uw_pm_server_recv() did with a datagram. */
enum uw_pm_server_verdict {
    UW_PM_S_ACCEPT = 0,        /* new PMReq accepted: PMAccept in *reply, timer armed */
    UW_PM_S_DENY = 1,          /* new PMReq denied: PMDeny in *reply, no state kept */
    UW_PM_S_DUP_ACCEPT = 2,    /* duplicate PMReq, service still there: PMAccept again */
    UW_PM_S_DUP_DENY = 3,      /* duplicate PMReq, service gone: PMDeny, state released */
    UW_PM_S_ACK = 4,           /* PMAck for a pending PMAccept: timer stopped */
    UW_PM_S_ACK_DUPLICATE = 5, /* PMAck for an already acknowledged one: discarded */
    UW_PM_S_ACK_UNKNOWN = 6,   /* PMAck matching nothing: discarded (7.5.2) */
    UW_PM_S_RATE_LIMITED = 7,  /* source over its rate: dropped, no reply */
    UW_PM_S_FULL = 8,          /* no room for state: PMDeny in *reply */
    UW_PM_S_IGNORED = 9,       /* a PMAccept or PMDeny: not for a server; dropped */
};

/* Server counters (monotonic since create, except pending). */
typedef struct uw_pm_server_stats {
    uint64_t requests;   /* well-formed PMReqs, rate-limited ones included */
    uint64_t accepts;    /* PMAccepts sent, duplicates' included */
    uint64_t denies;     /* PMDenys sent, full and duplicates' included */
    uint64_t duplicates; /* duplicate PMReqs */
    uint64_t replaced;   /* states replaced by a new AssocHandle */
    uint64_t acks;       /* PMAcks (and LLP connections) that stopped a timer */
    uint64_t acks_unknown;
    uint64_t timeouts; /* PMAccepts never acknowledged: released */
    uint64_t rate_limited;
    uint64_t full;
    uint64_t malformed;
    uint64_t ignored;
    uint64_t pending;      /* transactions held now */
    uint64_t pending_peak; /* most ever held */
} uw_pm_server_stats;

/* Errors: UW_EINVAL (no lookup, max_pending over 2^24, rate_slots over 2^24),
 * UW_ENOMEM. All memory (transaction pool, hash tables, rate buckets: about
 * 160 octets per pending transaction and 40 per rate slot) is allocated here
 * and never later, so a flood cannot grow it. */
int uw_pm_server_create(uw_pm_server **out, const uw_pm_server_opts *opts);
/* Frees everything without events. s may be NULL. */
void uw_pm_server_destroy(uw_pm_server *s);

/* Takes one datagram from the UDP address from, first running any timers due
 * at now. If a reply is due, it is written to *reply (reply->len > 0) with
 * reply->to = from (7.4: replies go back to where the PMReq came from); else
 * reply->len is 0. Returns an enum uw_pm_server_verdict, or the errors of
 * uw_pm_decode() for a malformed datagram (counted, no reply, no state
 * change), or UW_EINVAL for NULL arguments. data and from are only read
 * during the call; the lookup and event callbacks run inside it. */
int uw_pm_server_recv(uw_pm_server *s, uint64_t now, const void *data, size_t len,
                      const uw_pm_udp_addr *from, uw_pm_datagram *reply);

/* The LLP connection (TCP SYN) from (cp_ip, cp_port) reached the SDP Address
 * (sdp_ip, sdp_port): like a PMAck, it stops the timer of the matching
 * pending PMAccept (7.5.2). Returns 0, or UW_ENOENT when nothing matches,
 * UW_EINVAL for bad arguments. */
int uw_pm_server_llp_connected(uw_pm_server *s, uint64_t now, uint8_t ipv, const uint8_t *cp_ip,
                               uint16_t cp_port, const uint8_t *sdp_ip, uint16_t sdp_port);

/* Runs the timers due at now: unacknowledged PMAccepts are released (event
 * RELEASED, reason TIMEOUT), lingering acknowledged ones forgotten. */
void uw_pm_server_tick(uw_pm_server *s, uint64_t now);

/* The earliest time uw_pm_server_tick() has work to do (UW_PM_FOREVER if
 * none). */
uint64_t uw_pm_server_next_deadline(const uw_pm_server *s);

void uw_pm_server_stats_get(const uw_pm_server *s, uw_pm_server_stats *out);

#pragma GCC visibility pop

#ifdef __cplusplus
}
#endif
#endif
