/* Blocking port mapper resolver for Connecting Peers (draft-pinkerton-iwarp-
 * sdp-01 section 7; docs/portmapper.md, "Resolver"): before an SDP socket
 * connects to a TCP address, it asks the destination host's port mapper
 * which SDP Address serves that port, and learns either "connect to the SDP
 * Address" or "use conventional TCP to the address as given".
 *
 * Each call runs its own sans-I/O uw_pm_client transaction over its own
 * connected UDP socket, so an ICMP port unreachable ends the wait at once
 * (ECONNREFUSED). Answers are shared between calls: PMAccepts for PmTime
 * (7.3.1.4), denials, timeouts and unreachable port mappers for a configured
 * time (negative cache), so a second connect to a dead port mapper does not
 * wait again. Internal to the library (the SDP socket layer), not installed.
 *
 * CpIPAddr and CpPort (7.4: "the local TCP port number that the Connecting
 * Peer will use"): bind the TCP socket first (port 0 lets the kernel choose)
 * and pass its getsockname() as src; a wildcard src address, or no src,
 * makes the resolver use the source address the routing table picks for the
 * destination, and no src sends CpPort 0.
 *
 * Thread-safety: one resolver may be used by any number of threads at once
 * (an internal mutex guards the caches and the AssocHandle sequence; the
 * exchanges themselves run in parallel). create and destroy are not
 * concurrent with anything else on the same resolver.
 */
#ifndef UW_IO_PM_RESOLVE_H
#define UW_IO_PM_RESOLVE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#define UW__PM_SERVER_ENV "UWARP_PM_SERVER" /* "ADDR[:PORT]" or "[V6][:PORT]" */

typedef struct uw__pm_resolver uw__pm_resolver;

typedef struct uw__pm_resolver_opts {
    int timeout_ms;       /* whole exchange, retransmissions included; 0 means 1000 */
    unsigned retries;     /* PMReq retransmissions; 0 means 2; UW_PM_NO_RETRY: none. The
                             first timeout is timeout / (2^(retries+1) - 1), doubling */
    int neg_cache_ms;     /* how long deny, timeout and unreachable are remembered;
                             0 means 30000; negative: not at all */
    size_t cache_max;     /* entries in each cache (answers, negative); 0 means 256 */
    const char *server;   /* every query goes to this port mapper ("ADDR", "ADDR:PORT",
                             "[V6]:PORT"; port default 3935); NULL: the environment's
                             UWARP_PM_SERVER, else the destination host itself */
    uint16_t server_port; /* with no server: the destination host's port mapper port;
                             0 means 3935 (UW_PM_PORT, section 16) */
    bool ignore_env;      /* do not read UWARP_PM_SERVER */
} uw__pm_resolver_opts;

/* opts may be NULL (all defaults). Errors: UW_EINVAL (server, or the
 * environment's UWARP_PM_SERVER, is not a numeric address with an optional
 * port; timeout_ms negative), UW_ENOMEM. */
int uw__pm_resolver_create(uw__pm_resolver **out, const uw__pm_resolver_opts *opts);
/* No call may be running. r may be NULL. */
void uw__pm_resolver_destroy(uw__pm_resolver *r);

enum uw__pm_res_reason {
    UW__PM_RES_ACCEPT = 1,      /* a PMAccept: use the SDP Address (a PMAck was sent) */
    UW__PM_RES_CACHED = 2,      /* from a cache, nothing sent; cached_reason says what */
    UW__PM_RES_DENY = 3,        /* a PMDeny: use TCP */
    UW__PM_RES_TIMEOUT = 4,     /* no answer in time (7.5.1): use TCP */
    UW__PM_RES_UNREACHABLE = 5, /* ICMP unreachable (no port mapper there, no route): use TCP */
    UW__PM_RES_ERROR = 6,       /* a local failure (sockets, memory): use TCP; err says which */
};

typedef struct uw__pm_resolution {
    bool use_sdp;                 /* connect to addr with SDP; false: plain TCP to addr */
    int reason;                   /* enum uw__pm_res_reason */
    int cached_reason;            /* CACHED only: ACCEPT, DENY, TIMEOUT or UNREACHABLE */
    struct sockaddr_storage addr; /* where to connect: the SDP Address or dst; in dst's
                                     family (IPv4-mapped IPv6 if dst was) */
    socklen_t addrlen;
    uint8_t pmtime;      /* PmTime of the PMAccept (use_sdp only) */
    unsigned sent;       /* PMReqs sent by this call */
    int err;             /* UNREACHABLE, ERROR: the UW_E* code behind it; else 0 */
    uint64_t elapsed_ns; /* time this call took */
    char why[256];       /* one line for people, e.g. "port mapper 10.0.0.2:3935
                            timed out after 1000 ms (3 PMReqs)" */
} uw__pm_resolution;

/* Asks which SDP Address serves dst (an AF_INET or AF_INET6 TCP address with
 * a port) and fills *out. src is the Connecting Peer's bound TCP address
 * (see above) or NULL; it must have dst's family. timeout_ms <= 0 means the
 * resolver's; the retransmission schedule is scaled to it. Returns 0
 * whenever *out says what to do, which includes every failure to get an
 * answer (reasons TIMEOUT, UNREACHABLE, ERROR: fall back to TCP).
 * Errors (nothing written): UW_EINVAL (NULL r, dst or out; a family other
 * than AF_INET/AF_INET6; a length too short; dst port 0; src of another
 * family). dst and src are only read during the call. */
int uw__pm_resolve(uw__pm_resolver *r, const struct sockaddr *dst, socklen_t dstlen,
                   const struct sockaddr *src, int timeout_ms, uw__pm_resolution *out);

/* The SDP Address the resolver gave for dst answered the connection attempt
 * with a reset: 7.5.1 treats that as a PMDeny. The cached answer is dropped
 * and a denial remembered (negative cache), so the next resolve says TCP.
 * Errors: UW_EINVAL. */
int uw__pm_resolver_sdp_reset(uw__pm_resolver *r, const struct sockaddr *dst, socklen_t dstlen,
                              const struct sockaddr *src);

/* The cached PMAccept for dst turned out stale (its SDP Address reset a
 * connection: the service restarted within PmTime). Forgets it and any
 * denial remembered for dst, so that the next resolve asks the port mapper
 * afresh instead of taking the reset for a PMDeny. Errors: UW_EINVAL. */
int uw__pm_resolver_forget(uw__pm_resolver *r, const struct sockaddr *dst, socklen_t dstlen,
                           const struct sockaddr *src);

/* Forgets every cached answer, positive and negative. */
void uw__pm_resolver_flush(uw__pm_resolver *r);

/* "accept", "cached", "deny", "timeout", "unreachable", "error"; "?" else. */
const char *uw__pm_res_reason_name(int reason);

/* ---- One resolver for the whole process ----------------------------------------
 * The preload library asks the destination's port mapper itself, before it
 * creates an SDP stack, so that a destination without SDP costs no stack
 * (docs/preload.md). On a PMAccept it creates the stack, whose connect
 * must find that answer in the cache rather than send a second PMReq. So a
 * process can publish one resolver: an SDP stack whose resolver options
 * would give the same settings uses the published one instead of creating
 * its own, and never destroys it (src/io/sdp_pm.c). Nothing is published
 * unless a program does it, so other programs keep a resolver per stack. */

/* Publishes r (NULL: none). The caller keeps ownership and must keep r
 * alive while any stack may use it (the preload: for the process's life).
 * Not concurrent with the stacks' first connect. */
void uw__pm_resolver_publish(uw__pm_resolver *r);
/* The published resolver if opts (NULL: defaults) give exactly its
 * settings (timeout, retries, negative cache, cache sizes, server, server
 * port; the environment's UWARP_PM_SERVER as create reads it), else NULL. */
uw__pm_resolver *uw__pm_resolver_published(const uw__pm_resolver_opts *opts);
/* Whether r is the published resolver. */
bool uw__pm_resolver_is_published(const uw__pm_resolver *r);

/* fork() (pthread_atfork handlers) of a process with a published resolver:
 * phase 0 (prepare) takes its lock, 1 (parent) and 2 (child) release it,
 * so that the child goes on with a consistent copy of the caches and a
 * free lock. Nothing when none is published. */
void uw__pm_resolver_published_atfork(int phase);

/* A few words for a log line on why resolution gave its answer: "pm deny",
 * "pm timeout", "pm unreachable", "pm error", "port mapper accept" (a
 * cached answer says what it remembers: "port mapper accept (cached)"). */
const char *uw__pm_res_short_why(const uw__pm_resolution *res);

#endif
