/* Who owns the listening TCP sockets on a port: the evidence behind every
 * non-root registration on the control socket. The kernel's socket
 * diagnostics (NETLINK_SOCK_DIAG, inet_diag) list every listening socket
 * with the uid that created it, IPv4 and IPv6, in one dump per family; where
 * netlink is unavailable (seccomp filters, old containers), /proc/net/tcp
 * and /proc/net/tcp6 carry the same facts as text. Only sockets in this
 * network namespace are visible, which is the namespace whose port numbers
 * the port mapper hands out. */
#include "pmd_ctl.h"

#include <arpa/inet.h>
#include <errno.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#define TCP_STATE_LISTEN 10 /* include/net/tcp_states.h: TCP_LISTEN */

typedef struct tally {
    uint32_t uid;
    pmd_port_check *c;
    size_t n;
} tally;

static void count(tally *t, uint16_t port, uint32_t uid)
{
    for (size_t i = 0; i < t->n; i++) {
        if (t->c[i].port != port)
            continue;
        if (uid == t->uid) {
            t->c[i].mine++;
        } else {
            t->c[i].foreign++;
            t->c[i].foreign_uid = uid;
        }
    }
}

static void reset(tally *t)
{
    for (size_t i = 0; i < t->n; i++) {
        t->c[i].mine = t->c[i].foreign = 0;
        t->c[i].foreign_uid = 0;
    }
}

/* One inet_diag dump of the TCP listeners of one family. */
static int diag_dump(int family, tally *t)
{
    int fd = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
    if (fd < 0)
        return -errno;
    /* The kernel answers a dump at once; the bound only guards against a
     * netlink implementation that never does (some sandboxes). */
    struct timeval tv = {1, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    struct {
        struct nlmsghdr nlh;
        struct inet_diag_req_v2 r;
    } req;
    memset(&req, 0, sizeof(req));
    req.nlh.nlmsg_len = sizeof(req);
    req.nlh.nlmsg_type = SOCK_DIAG_BY_FAMILY;
    req.nlh.nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
    req.nlh.nlmsg_seq = 1;
    req.r.sdiag_family = (uint8_t)family;
    req.r.sdiag_protocol = IPPROTO_TCP;
    req.r.idiag_states = 1u << TCP_STATE_LISTEN;
    struct sockaddr_nl sa;
    memset(&sa, 0, sizeof(sa));
    sa.nl_family = AF_NETLINK;
    if (sendto(fd, &req, sizeof(req), 0, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
        int e = -errno;
        close(fd);
        return e;
    }
    static union {
        struct nlmsghdr h;
        uint8_t b[32768];
    } buf;
    for (;;) {
        ssize_t got = recv(fd, buf.b, sizeof(buf.b), 0);
        if (got < 0) {
            if (errno == EINTR)
                continue;
            int e = -errno;
            close(fd);
            return e;
        }
        if (got == 0)
            break;
        size_t left = (size_t)got;
        for (const uint8_t *p = buf.b; left >= sizeof(struct nlmsghdr);) {
            struct nlmsghdr h;
            memcpy(&h, p, sizeof(h));
            if (h.nlmsg_len < sizeof(h) || h.nlmsg_len > left)
                break;
            if (h.nlmsg_type == NLMSG_DONE) {
                close(fd);
                return 0;
            }
            if (h.nlmsg_type == NLMSG_ERROR) {
                struct nlmsgerr err;
                int e = -EPROTO;
                if (h.nlmsg_len >= NLMSG_LENGTH(sizeof(err))) {
                    memcpy(&err, p + NLMSG_HDRLEN, sizeof(err));
                    e = err.error ? err.error : -EPROTO;
                }
                close(fd);
                return e;
            }
            if (h.nlmsg_type == SOCK_DIAG_BY_FAMILY &&
                h.nlmsg_len >= NLMSG_LENGTH(sizeof(struct inet_diag_msg))) {
                struct inet_diag_msg m;
                memcpy(&m, p + NLMSG_HDRLEN, sizeof(m));
                if (m.idiag_state == TCP_STATE_LISTEN)
                    count(t, ntohs(m.id.idiag_sport), m.idiag_uid);
            }
            size_t step = NLMSG_ALIGN(h.nlmsg_len);
            if (step > left)
                break;
            p += step;
            left -= step;
        }
    }
    close(fd);
    return -EPROTO; /* the dump ended without NLMSG_DONE */
}

/* /proc/net/tcp{,6}: "sl local_address rem_address st ... uid ...", with
 * local_address as HEXADDR:HEXPORT and st in hex (0A is LISTEN). */
static int proc_scan(const char *path, tally *t)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return -errno;
    char line[512];
    if (!fgets(line, sizeof(line), f)) { /* the header */
        fclose(f);
        return -EPROTO;
    }
    while (fgets(line, sizeof(line), f)) {
        char *field[8];
        int n = 0;
        char *save = NULL;
        for (char *tok = strtok_r(line, " \t\n", &save); tok && n < 8;
             tok = strtok_r(NULL, " \t\n", &save))
            field[n++] = tok;
        if (n < 8)
            continue;
        char *colon = strrchr(field[1], ':');
        if (!colon)
            continue;
        char *end;
        unsigned long port = strtoul(colon + 1, &end, 16);
        if (*end || port > 65535)
            continue;
        unsigned long st = strtoul(field[3], &end, 16);
        if (*end || st != TCP_STATE_LISTEN)
            continue;
        unsigned long uid = strtoul(field[7], &end, 10);
        if (*end || uid > UINT32_MAX)
            continue;
        count(t, (uint16_t)port, (uint32_t)uid);
    }
    int e = ferror(f) ? -EIO : 0;
    fclose(f);
    return e;
}

int pmd_owner_check(int source, uint32_t uid, pmd_port_check *checks, size_t n)
{
    tally t = {uid, checks, n};
    int rc = -ENOSYS;
    if (source != PMD_OWNER_PROC) {
        reset(&t);
        rc = diag_dump(AF_INET, &t);
        if (rc == 0) {
            rc = diag_dump(AF_INET6, &t);
            if (rc == -ENOENT || rc == -EAFNOSUPPORT)
                rc = 0; /* a kernel without IPv6 has no IPv6 listeners */
        }
        if (rc == 0 || source == PMD_OWNER_NETLINK)
            return rc == 0 ? PMD_OWNER_NETLINK : rc;
    }
    reset(&t);
    rc = proc_scan("/proc/net/tcp", &t);
    if (rc == 0) {
        int r6 = proc_scan("/proc/net/tcp6", &t);
        if (r6 != 0 && r6 != -ENOENT) /* no IPv6 in this kernel: nothing to count */
            rc = r6;
    }
    if (rc != 0) {
        reset(&t);
        return rc;
    }
    return PMD_OWNER_PROC;
}
