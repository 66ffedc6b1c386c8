/* An in-memory byte-stream pair: the transport of the deterministic CM
 * tests (io/mem.h). Each direction is a ring with a capacity, so a full
 * peer pushes back as a socket buffer does. Octets written land in the
 * peer's ring at once: nothing is ever "in flight", so outq() is 0 and a
 * reset never destroys what was written, as the peer's kernel keeps
 * received octets readable after one. What Linux does that the engine
 * depends on is kept: closing with unread octets resets instead of
 * sending FIN, and writing to a closed peer fails with EPIPE. */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>

#include "io/mem.h"

struct uw__mem_pair;

struct uw__mem_end {
    struct uw__mem_end *peer;
    struct uw__mem_pair *pair;
    /* What the peer wrote and we have not read. */
    uint8_t *buf;
    size_t cap, head, len;
    bool fin_in; /* the peer's FIN is behind those octets */
    bool rst_in; /* the peer's reset is behind them */
    bool shut, closed;
    uint64_t sent;  /* octets we wrote */
    int64_t fin_at; /* sent when our FIN went (-1: not yet) */
    uint64_t flip;  /* 1 + index of the sent octet to damage (0: none) */
    uint32_t mss;
    void (*wake)(void *ud);
    void *ud;
};

static void wake(struct uw__mem_end *e)
{
    if (!e->closed && e->wake)
        e->wake(e->ud);
}

/* Held by each end until it is closed and by the test until
 * uw__mem_release(), which may look at the ends after the engine has
 * closed them. */
struct uw__mem_pair {
    struct uw__mem_end e[2];
    int refs;
};

static void unref(struct uw__mem_pair *pr)
{
    if (--pr->refs)
        return;
    free(pr->e[0].buf);
    free(pr->e[1].buf);
    free(pr);
}

int uw__mem_pair(struct uw__mem_end **a, struct uw__mem_end **b, size_t cap, uint32_t mss)
{
    struct uw__mem_pair *pr = calloc(1, sizeof(*pr));
    if (!pr)
        return UW_ENOMEM;
    struct uw__mem_end *e = pr->e;
    pr->refs = 3;
    for (int i = 0; i < 2; i++) {
        e[i].peer = &e[1 - i];
        e[i].pair = pr;
        e[i].cap = cap;
        e[i].buf = malloc(cap);
        e[i].fin_at = -1;
        e[i].mss = mss ? mss : 1460;
    }
    if (!e[0].buf || !e[1].buf) {
        free(e[0].buf);
        free(e[1].buf);
        free(pr);
        return UW_ENOMEM;
    }
    *a = &e[0];
    *b = &e[1];
    return 0;
}

static ssize_t fail(int err)
{
    errno = err;
    return -1;
}

static ssize_t mem_send(void *ep, const struct iovec *iov, int n)
{
    struct uw__mem_end *e = ep, *p = e->peer;
    if (e->rst_in)
        return fail(ECONNRESET);
    if (e->shut)
        return fail(EPIPE);
    if (p->closed) {
        /* A closed peer answers with a reset. */
        e->rst_in = true;
        return fail(EPIPE);
    }
    size_t put = 0;
    for (int i = 0; i < n && p->len < p->cap; i++) {
        const uint8_t *src = iov[i].iov_base;
        for (size_t k = 0; k < iov[i].iov_len && p->len < p->cap; k++) {
            uint8_t o = src[k];
            if (e->flip && e->flip - 1 == e->sent)
                o ^= 0x10;
            p->buf[(p->head + p->len) % p->cap] = o;
            p->len++;
            e->sent++;
            put++;
        }
    }
    if (!put)
        return fail(EAGAIN);
    wake(p);
    return (ssize_t)put;
}

static ssize_t mem_recv(void *ep, struct iovec *iov, int n)
{
    struct uw__mem_end *e = ep;
    size_t got = 0;
    for (int i = 0; i < n && e->len; i++) {
        uint8_t *dst = iov[i].iov_base;
        for (size_t k = 0; k < iov[i].iov_len && e->len; k++) {
            dst[k] = e->buf[e->head];
            e->head = (e->head + 1) % e->cap;
            e->len--;
            got++;
        }
    }
    if (got) {
        wake(e->peer); /* room again */
        return (ssize_t)got;
    }
    if (e->rst_in)
        return fail(ECONNRESET);
    return e->fin_in ? 0 : fail(EAGAIN);
}

static void mem_shutdown_wr(void *ep)
{
    struct uw__mem_end *e = ep;
    if (e->shut)
        return;
    e->shut = true;
    e->fin_at = (int64_t)e->sent;
    e->peer->fin_in = true;
    wake(e->peer);
}

static void mem_close(void *ep, bool reset)
{
    struct uw__mem_end *e = ep, *p = e->peer;
    if (e->closed)
        return;
    /* Linux resets a connection closed with octets unread. */
    if (reset || e->len) {
        p->rst_in = true;
    } else if (!e->shut) {
        e->fin_at = (int64_t)e->sent;
        p->fin_in = true;
    }
    e->shut = e->closed = true;
    e->wake = NULL;
    wake(p);
    unref(e->pair);
}

static size_t mem_outq(void *ep)
{
    (void)ep;
    return 0; /* in the peer's ring already */
}

static uint32_t mem_mss(void *ep)
{
    return ((struct uw__mem_end *)ep)->mss;
}

static unsigned mem_ready(void *ep)
{
    const struct uw__mem_end *e = ep;
    /* An error or the end is news too: the call says which. */
    bool broken = e->rst_in || e->peer->closed;
    unsigned r = e->len || e->fin_in || broken ? POLLIN : 0;
    if (e->peer->len < e->peer->cap || broken || e->shut)
        r |= POLLOUT;
    return r;
}

static void mem_watch(void *ep, void (*w)(void *ud), void *ud)
{
    struct uw__mem_end *e = ep;
    e->wake = w;
    e->ud = ud;
}

const struct uw__tp_ops uw__mem_ops = {
    .send = mem_send,
    .recv = mem_recv,
    .shutdown_wr = mem_shutdown_wr,
    .close = mem_close,
    .outq = mem_outq,
    .mss = mem_mss,
    .ready = mem_ready,
    .watch = mem_watch,
};

void uw__mem_reset(struct uw__mem_end *e)
{
    e->rst_in = e->peer->rst_in = true;
    wake(e->peer);
    wake(e);
}

void uw__mem_close_unused(struct uw__mem_end *e)
{
    mem_close(e, false);
}

void uw__mem_release(struct uw__mem_end *e)
{
    unref(e->pair);
}

void uw__mem_flip(struct uw__mem_end *e, uint64_t nth)
{
    e->flip = e->sent + nth + 1;
}

uint64_t uw__mem_sent(const struct uw__mem_end *e)
{
    return e->sent;
}

int64_t uw__mem_fin_at(const struct uw__mem_end *e)
{
    return e->fin_at;
}

bool uw__mem_reset_seen(const struct uw__mem_end *e)
{
    return e->rst_in;
}
