/* Readiness mirror (see sdp_ready.h and docs/sdp.md "Readiness"). What poll()
 * shows on A for each trick was measured on Linux 6.18 (tests/unit/
 * test_sdp_ready.c checks every row with poll and epoll):
 *
 *   B and A after ...                          poll() on A
 *   fresh pair, SO_SNDBUF(A) at its minimum    OUT
 *   one octet B->A                             IN OUT
 *   A's send buffer filled                     (nothing)       while B has not read it
 *   MSG_OOB octet B->A                         IN OUT PRI      (the OOB skb counts as data)
 *   in-band then OOB octet, in-band read       IN OUT PRI      (OOB first: a plain read
 *                                                               discards it, so never that order)
 *   shutdown(B, SHUT_WR)                       IN OUT RDHUP
 *   shutdown(B, SHUT_RD)                       OUT             (A's sends fail with EPIPE)
 *   shutdown(B, SHUT_RDWR)                     IN OUT HUP RDHUP  (OUT once B drained)
 *   close(B), nothing unread at B              IN OUT HUP RDHUP
 *   close(B), an octet of A unread at B        IN OUT ERR HUP RDHUP
 *     then getsockopt(A, SO_ERROR) = ECONNRESET IN OUT HUP RDHUP
 *
 * A TCP socket shows the same sets: after a reset or a refused connect
 * IN|OUT|ERR|HUP|RDHUP, after the error is read IN|OUT|HUP|RDHUP, after FIN
 * both ways IN|OUT|HUP|RDHUP, after the peer's FIN IN|OUT|RDHUP. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "io/sdp_ready.h"

int uw__sdp_ready_init(uw__sdp_ready *r, bool cloexec)
{
    memset(r, 0, sizeof(*r));
    r->a = r->b = -1;
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
        return -errno;
    /* socketpair's flags apply to both ends; A keeps it only on request. */
    if (!cloexec && fcntl(sv[0], F_SETFD, 0) < 0) {
        int e = -errno;
        close(sv[0]);
        close(sv[1]);
        return e;
    }
    /* The minimum (the kernel rounds up to SOCK_MIN_SNDBUF, 4608 octets on
     * 64-bit Linux): filling it then takes one send() of a few KiB. */
    int one = 1;
    setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &one, sizeof(one));
    r->a = sv[0];
    r->b = sv[1];
    r->shown = POLLOUT;
    return 0;
}

void uw__sdp_ready_fini(uw__sdp_ready *r)
{
    if (r->b >= 0)
        close(r->b);
    if (r->a >= 0)
        close(r->a);
    r->a = r->b = -1;
}

static void drain_b(uw__sdp_ready *r)
{
    char buf[8192];
    for (;;) {
        ssize_t n = recv(r->b, buf, sizeof(buf), MSG_DONTWAIT);
        r->syscalls++;
        if (n < (ssize_t)sizeof(buf))
            break;
    }
    r->filled = false;
}

static void fill_a(uw__sdp_ready *r)
{
    /* Larger than the minimum send buffer: the first send() stops short
     * when the buffer is full, so one call usually does it. */
    static const char zeros[16384];
    for (int i = 0; i < 16; i++) {
        ssize_t n = send(r->a, zeros, sizeof(zeros), MSG_DONTWAIT | MSG_NOSIGNAL);
        r->syscalls++;
        if (n < (ssize_t)sizeof(zeros))
            break;
    }
    r->filled = true;
}

/* Reads everything queued at A: the OOB octet, then in-band octets (and the
 * empty skb a consumed OOB octet leaves behind, which still shows POLLIN). */
static void drain_a(uw__sdp_ready *r)
{
    char buf[64];
    if (r->oob_octet) {
        recv(r->a, buf, 1, MSG_OOB | MSG_DONTWAIT);
        r->syscalls++;
        r->oob_octet = false;
    }
    for (int i = 0; i < 8; i++) {
        ssize_t n = recv(r->a, buf, sizeof(buf), MSG_DONTWAIT);
        r->syscalls++;
        if (n <= 0)
            break;
    }
    r->in_octet = false;
}

static void put_in(uw__sdp_ready *r)
{
    char c = 'r';
    if (send(r->b, &c, 1, MSG_DONTWAIT | MSG_NOSIGNAL) == 1)
        r->in_octet = true;
    r->syscalls++;
}

static void put_oob(uw__sdp_ready *r)
{
    char c = 'u';
    if (send(r->b, &c, 1, MSG_OOB | MSG_DONTWAIT | MSG_NOSIGNAL) == 1)
        r->oob_octet = true;
    r->syscalls++;
}

static unsigned compute_shown(const uw__sdp_ready *r)
{
    unsigned s = 0;
    if (r->b < 0)
        s = POLLIN | POLLOUT | POLLHUP | POLLRDHUP | (r->shown & POLLERR);
    if (r->in_octet || r->oob_octet || r->b_wr_shut)
        s |= POLLIN;
    if (r->oob_octet)
        s |= POLLPRI;
    if (r->b_wr_shut)
        s |= POLLRDHUP;
    if (r->b_rdwr_shut)
        s |= POLLHUP | POLLRDHUP | POLLIN;
    if (!r->filled)
        s |= POLLOUT;
    return s;
}

unsigned uw__sdp_ready_norm(unsigned shown, unsigned bits)
{
    bits &= UW__READY_BITS;
    if (bits & POLLERR)
        bits |= POLLHUP;
    if (bits & POLLHUP)
        bits |= POLLIN | POLLOUT | POLLRDHUP;
    if (bits & POLLRDHUP)
        bits |= POLLIN;
    if (bits & POLLPRI)
        bits |= POLLIN; /* an OOB octet is data to poll() */
    return bits | (shown & (POLLRDHUP | POLLHUP));
}

unsigned uw__sdp_ready_set(uw__sdp_ready *r, unsigned bits)
{
    bits = uw__sdp_ready_norm(r->shown, bits);
    if (bits == r->shown)
        return bits;
    bool want_pri = (bits & POLLPRI) != 0;
    if (r->b >= 0 && !r->b_wr_shut) {
        bool want_in = (bits & POLLIN) && !(bits & POLLRDHUP);
        if (want_pri != r->oob_octet || (r->oob_octet && want_in != r->in_octet)) {
            /* The OOB octet must come after the in-band one (a plain read
             * of an OOB octet at the head discards it): rebuild both.
             * Urgent data is rare, so this path's cost does not matter. */
            drain_a(r);
            if (want_in)
                put_in(r);
            if (want_pri)
                put_oob(r);
        } else if (want_in != r->in_octet) {
            if (want_in) {
                put_in(r);
            } else {
                char c[8];
                recv(r->a, c, sizeof(c), MSG_DONTWAIT);
                r->syscalls++;
                r->in_octet = false;
            }
        }
    } else if (r->oob_octet && !want_pri) {
        /* After B stopped writing, an OOB octet can still be taken back. */
        char c;
        recv(r->a, &c, 1, MSG_OOB | MSG_DONTWAIT);
        r->syscalls++;
        r->oob_octet = false;
    }
    if (r->b < 0) {
        /* Closed: only POLLERR (and PRI) can still go. */
        if ((r->shown & POLLERR) && !(bits & POLLERR)) {
            int e;
            socklen_t l = sizeof(e);
            getsockopt(r->a, SOL_SOCKET, SO_ERROR, &e, &l);
            r->syscalls++;
            r->shown &= ~(unsigned)POLLERR;
        }
        r->shown = compute_shown(r);
        return r->shown;
    }
    if ((bits & POLLERR) && !r->b_rdwr_shut) {
        /* An octet of A's left unread at B makes Linux set ECONNRESET on A
         * when B is closed; a filled buffer already is such an octet. */
        if (!r->filled) {
            char c = 'e';
            send(r->a, &c, 1, MSG_DONTWAIT | MSG_NOSIGNAL);
            r->syscalls++;
        }
        close(r->b);
        r->syscalls++;
        r->b = -1;
        r->filled = false;
        r->shown = POLLERR;
        r->shown = compute_shown(r);
        return r->shown;
    }
    if ((bits & POLLRDHUP) && !r->b_wr_shut) {
        shutdown(r->b, (bits & POLLHUP) ? SHUT_RDWR : SHUT_WR);
        r->syscalls++;
        r->b_wr_shut = true;
        r->b_rdwr_shut = (bits & POLLHUP) != 0;
    } else if ((bits & POLLHUP) && !r->b_rdwr_shut) {
        shutdown(r->b, SHUT_RDWR);
        r->syscalls++;
        r->b_rdwr_shut = true;
    }
    bool want_fill = !(bits & POLLOUT);
    if (want_fill && !r->filled && !r->b_rdwr_shut)
        fill_a(r);
    else if (!want_fill && r->filled)
        drain_b(r);
    r->shown = compute_shown(r);
    return r->shown;
}
