/* uwarp-pmd's control socket: local processes register mappings SVC -> SDP
 * that live as long as their connection (docs/portmapper.md, "Dynamic
 * registration"), and the ownership check that authorises them. The
 * protocol itself (framing, parsing) is the sans-I/O src/pm/ctl.c. */
#ifndef UW_TOOLS_PMD_CTL_H
#define UW_TOOLS_PMD_CTL_H

#include <poll.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ------------------------------------------------------------------------ */
/* Who owns a listening TCP port (pmd_owner.c)                               */

enum pmd_owner_source {
    PMD_OWNER_AUTO = 0,    /* netlink, falling back to /proc */
    PMD_OWNER_NETLINK = 1, /* NETLINK_SOCK_DIAG (inet_diag) only */
    PMD_OWNER_PROC = 2,    /* /proc/net/tcp and /proc/net/tcp6 only */
};

typedef struct pmd_port_check {
    uint16_t port;
    unsigned mine;        /* listening sockets on port (any address, IPv4 or IPv6) of uid */
    unsigned foreign;     /* ... of any other uid */
    uint32_t foreign_uid; /* one of those */
} pmd_port_check;

/* Fills mine/foreign of each of the n checks for uid. Returns the source
 * that answered (PMD_OWNER_NETLINK or PMD_OWNER_PROC), or a negative errno
 * when none could be read. */
int pmd_owner_check(int source, uint32_t uid, pmd_port_check *checks, size_t n);

/* ------------------------------------------------------------------------ */
/* The control server (pmd_ctl.c)                                            */

typedef struct pmd_ctl pmd_ctl;

typedef struct pmd_ctl_opts {
    const char *path;    /* socket path */
    size_t max_conns;    /* connections at once */
    size_t max_maps;     /* registered mappings at once */
    size_t max_per_uid;  /* connections and mappings of one non-root uid */
    int owner_source;    /* enum pmd_owner_source */
    uint64_t recheck_ns; /* a non-root mapping's ownership is checked again
                            when a PMReq needs it and the last check is older */
    /* Is port mapped by the static configuration? (Such ports are refused.) */
    bool (*static_mapped)(void *ud, uint16_t port);
    void *ud;
} pmd_ctl_opts;

/* Creates the directory of path if missing, replaces a stale socket file
 * (one nobody listens on), binds, makes the socket mode 0666 and listens.
 * Returns 0, or -1 after logging why (another daemon listens there, the
 * path is not a socket, a system error). */
int pmd_ctl_open(pmd_ctl **out, const pmd_ctl_opts *o);
/* Closes every connection (their mappings go), the listening socket, and
 * removes the socket file if it is still the one this daemon made. */
void pmd_ctl_close(pmd_ctl *c);

/* pollfds the control server needs at most (listener and connections). */
size_t pmd_ctl_max_fds(const pmd_ctl *c);
/* Writes the pollfds to watch now into pfd; returns how many. */
size_t pmd_ctl_fill(pmd_ctl *c, struct pollfd *pfd);
/* Handles what poll() reported for the n pollfds pmd_ctl_fill() wrote. */
void pmd_ctl_service(pmd_ctl *c, const struct pollfd *pfd, size_t n, uint64_t now);

/* The SDP port registered for service port svc, if the registration is live
 * and (for non-root owners) its listening sockets still belong to the
 * registering uid: returns 1 and sets *sdp; else 0. */
int pmd_ctl_lookup(pmd_ctl *c, uint16_t svc, uint64_t now, uint16_t *sdp);

void pmd_ctl_counts(const pmd_ctl *c, size_t *conns, size_t *maps);

#endif
