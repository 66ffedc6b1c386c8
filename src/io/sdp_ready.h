/* Readiness mirror: a kernel fd whose poll()/epoll readiness shows the state
 * of an SDP socket (docs/sdp.md "Readiness").
 *
 * The application's fd A is one end of an AF_UNIX stream socket pair; the
 * stack keeps the other end B (and A, to undo what it did to A):
 *   POLLIN    one octet queued B->A (drained again with recv on A);
 *   !POLLOUT  A's send buffer (SO_SNDBUF at its minimum) filled from A;
 *             drained again by reading B;
 *   POLLPRI   one MSG_OOB octet queued B->A, after the in-band octet;
 *   POLLRDHUP shutdown(B, SHUT_WR): A sees end of stream (POLLIN|POLLRDHUP);
 *   POLLHUP   shutdown(B, SHUT_RDWR): POLLIN|POLLOUT|POLLHUP|POLLRDHUP;
 *   POLLERR   close(B) with an octet from A unread at B: Linux marks A with
 *             ECONNRESET (POLLERR) and shuts it both ways (POLLIN|POLLOUT|
 *             POLLHUP|POLLRDHUP); getsockopt(A, SO_ERROR) clears POLLERR.
 * RDHUP, HUP and ERR are one-way, as they are on TCP. The state shown is
 * cached, so only transitions cost system calls.
 *
 * Not thread-safe: the stack calls it under its lock. */
#ifndef UW_IO_SDP_READY_H
#define UW_IO_SDP_READY_H

#include <stdbool.h>

/* The bits the mirror can show (poll.h values). */
#define UW__READY_BITS (POLLIN | POLLOUT | POLLPRI | POLLERR | POLLHUP | POLLRDHUP)

typedef struct uw__sdp_ready {
    int a, b;       /* application end, stack end (b < 0 once closed) */
    unsigned shown; /* poll bits A shows now */
    bool in_octet;  /* an in-band octet queued B->A */
    bool oob_octet; /* an OOB octet queued B->A */
    bool filled;    /* A's send buffer is full */
    bool b_wr_shut; /* shutdown(B, SHUT_WR) done */
    bool b_rdwr_shut;
    unsigned long syscalls; /* system calls made, for measurements */
} uw__sdp_ready;

/* Creates the pair; A is close-on-exec only if cloexec (B always is). Shows
 * POLLOUT (a fresh socket). Returns 0 or a negative errno. */
int uw__sdp_ready_init(uw__sdp_ready *r, bool cloexec);
/* Closes both ends. */
void uw__sdp_ready_fini(uw__sdp_ready *r);
/* Makes A show bits (the UW__READY_BITS subset of a poll mask), normalised
 * to what the mirror can show (see above): RDHUP implies IN; HUP implies
 * IN|OUT|RDHUP; ERR implies HUP. Bits that were made one-way stay. Returns
 * the bits now shown. */
unsigned uw__sdp_ready_set(uw__sdp_ready *r, unsigned bits);
/* The bits A would show after uw__sdp_ready_set(r, bits) when it now
 * shows shown (the normalisation, without the system calls). */
unsigned uw__sdp_ready_norm(unsigned shown, unsigned bits);
/* What A shows now (cached). */
static inline unsigned uw__sdp_ready_shown(const uw__sdp_ready *r)
{
    return r->shown;
}

#endif
