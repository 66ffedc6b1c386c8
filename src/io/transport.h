/* The byte transport under a connection. A kernel TCP socket is the
 * default and needs no table: the engine calls the socket directly when
 * qp->tp is NULL (the fast paths stay a system call, with one predictable
 * branch in front). Anything else (the in-memory pair of io/mem.c, which
 * lets the CM tests run without sockets or sleeps) supplies these
 * operations, and its readiness comes from wake() instead of epoll. */
#ifndef UW_IO_TRANSPORT_H
#define UW_IO_TRANSPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "verbs/internal.h"

/* Every call is nonblocking and answers as the socket call would:
 * -1 with errno (EAGAIN, ECONNRESET, EPIPE), 0 from recv at the peer's
 * FIN. */
struct uw__tp_ops {
    ssize_t (*send)(void *ep, const struct iovec *iov, int n);
    ssize_t (*recv)(void *ep, struct iovec *iov, int n);
    void (*shutdown_wr)(void *ep);
    /* Ends the endpoint; reset: abortively (SO_LINGER 0). */
    void (*close)(void *ep, bool reset);
    /* Octets sent that a reset could still destroy (SIOCOUTQ). */
    size_t (*outq)(void *ep);
    /* The EMSS, for the MULPDU (TCP_MAXSEG). */
    uint32_t (*mss)(void *ep);
    /* POLLIN | POLLOUT as poll() would say them now. The engine asks
     * after each service, as epoll's level-triggered readiness would
     * tell it, since wake() reports only changes. */
    unsigned (*ready)(void *ep);
    /* wake(ud) runs whenever ep may have become readable or writable
     * (or NULL: nobody to tell). It may run inside another endpoint's
     * call, so it only marks work for the next pass. */
    void (*watch)(void *ep, void (*wake)(void *ud), void *ud);
};

/* A QP or orphan on a non-socket transport has this in place of a
 * descriptor, so that every "fd < 0: no connection" test still holds. */
#define UW__FD_TP 0x7fffffff

/* Connection setup over a transport endpoint (io/cm.c). The listener has
 * no socket; each uw__tp_accept() is one connection arriving on it, which
 * then goes through the startup exchange as an accepted socket would. */
int uw__tp_connect(uw_qp *qp, const struct uw__tp_ops *tp, void *ep, const uw_conn_param *p);
int uw__tp_listen(uw_ctx *ctx, const uw_qp_attr *qa, const uw_conn_param *p, uw_listener **out);
int uw__tp_accept(uw_listener *l, const struct uw__tp_ops *tp, void *ep);

/* For a test driver: whether a pass has work without waiting (kicked QPs
 * or orphans), and the earliest deadline (0: none). */
bool uw__ctx_busy(const uw_ctx *c);
uint64_t uw__ctx_next_deadline(uw_ctx *c);

#endif
