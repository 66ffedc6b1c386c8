/* SDP stack: one uwarp verbs context, PD and CQ shared by every socket, the
 * lock, the progress thread and the plumbing between the verbs API and the
 * SDP connection cores (src/sdp/conn.h): receive buffers posted with
 * uw_post_recv, messages sent with uw_post_send, completions and connection
 * events fed back. docs/sdp.md "Design overview" and "Progress model".
 *
 * One CQ for the whole stack: a pass takes every socket's completions with
 * one uw_cq_poll() call however many sockets exist, and a QP's context
 * pointer names its socket. A CQ per socket would need a poll per socket per
 * pass (or a ready list of CQs the verbs layer does not have). */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "io/sdp_internal.h"
#include "verbs/internal.h" /* qp->fd (the LLP socket), ctx->ev_head, mr->addr/len */

#define UW__SDP_CQ_DEPTH 16384u
#define UW__SDP_TCP_WATCH 32
#define UW__SDP_ASIDE_MS 5 /* the progress thread's tick while an application thread drives */

uint64_t uw__sdp_now_ns(void)
{
    return uw__now_ns();
}

uint64_t uw__sdp_deadline_ms(int ms)
{
    return ms > 0 ? uw__now_ns() + (uint64_t)ms * 1000000u : 0;
}

void uw__sdp_log(uw_sdp_stack *st, int level, const char *fmt, ...)
{
    if (!st->attr.log || level > st->attr.log_level)
        return;
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    st->attr.log(st->attr.log_ud, level, buf);
}

/* ---- The lock and the readiness mirrors ----------------------------------- */

void uw__sdp_mark(uw_sdp_sock *s)
{
    if (s->dirty || s->rd.a < 0 || s->state == UW__SS_TCP)
        return;
    s->dirty = true;
    s->dnext = s->st->dirty;
    s->st->dirty = s;
}

static bool publish(uw_sdp_sock *s);

void uw__sdp_lock(uw_sdp_stack *st)
{
    pthread_mutex_lock(&st->mu);
}

/* Mirrors are refreshed once per lock hold, not after every core call: what
 * changes and changes back while the lock is held (data that arrives and is
 * read by the same call) costs no system call, and nobody can look at a
 * socket's state in between except through its fd. */
void uw__sdp_unlock(uw_sdp_stack *st)
{
    bool rose = false;
    while (st->dirty) {
        uw_sdp_sock *s = st->dirty;
        st->dirty = s->dnext;
        s->dirty = false;
        if (s->rd.a >= 0 && s->state != UW__SS_TCP) {
            bool r = publish(s);
            if (s->lazy)
                rose |= r;
            else
                uw__sdp_ready_set(&s->rd, uw__sdp_bits(s));
        }
    }
    pthread_mutex_unlock(&st->mu);
    if (rose && st->attr.ready_rose)
        st->attr.ready_rose(st->attr.ready_ud);
}

/* A socket's bits, normalised by the mirror's rules (sdp_ready.h); true
 * when one rose, or when data arrived on a readable socket: TCP gives
 * edge-triggered epoll an edge per arrival, and so does a lazy socket's
 * counter (the mirror gives one per rise only, docs/sdp.md). The
 * sequentially consistent store pairs with a waiter that counts itself as
 * sleeping before it reads the bits. */
static bool publish(uw_sdp_sock *s)
{
    unsigned old = __atomic_load_n(&s->pub_bits, __ATOMIC_RELAXED);
    unsigned b = uw__sdp_ready_norm(old, uw__sdp_bits(s));
    uint64_t rcv = s->conn ? uw__sdp_conn_rcv_total(s->conn) : s->pub_rcv;
    bool arrived = rcv != s->pub_rcv && (b & POLLIN);
    s->pub_rcv = rcv;
    if (b == old && !arrived)
        return false;
    bool rose = (b & ~old) != 0 || arrived;
    if (rose)
        __atomic_add_fetch(&s->pub_gen, 1, __ATOMIC_SEQ_CST);
    __atomic_store_n(&s->pub_bits, b, __ATOMIC_SEQ_CST);
    return rose;
}

int uw_sdp_set_lazy(uw_sdp_sock *s, bool lazy)
{
    if (!s)
        return -EINVAL;
    uw__sdp_lock(s->st);
    int r = 0;
    if (lazy && s->lazy_never)
        r = -EBUSY;
    else if (lazy && (s->state != UW__SS_OPEN || s->rd.a < 0 ||
                      (uw__sdp_ready_shown(&s->rd) & (POLLHUP | POLLERR))))
        r = -EINVAL; /* (a mirror showing HUP or ERR would show them for good) */
    else if (lazy && !s->lazy) {
        __atomic_store_n(&s->pub_bits, uw__sdp_ready_shown(&s->rd), __ATOMIC_SEQ_CST);
        publish(s);
        __atomic_store_n(&s->lazy, true, __ATOMIC_SEQ_CST);
    } else if (!lazy && s->lazy) {
        __atomic_store_n(&s->lazy, false, __ATOMIC_SEQ_CST);
        if (s->rd.a >= 0)
            uw__sdp_ready_set(&s->rd, uw__sdp_bits(s));
    }
    uw__sdp_unlock(s->st);
    return r;
}

unsigned uw_sdp_ready(const uw_sdp_sock *s, unsigned *gen)
{
    if (gen)
        *gen = __atomic_load_n(&s->pub_gen, __ATOMIC_SEQ_CST);
    unsigned b = __atomic_load_n(&s->pub_bits, __ATOMIC_SEQ_CST);
    return __atomic_load_n(&s->lazy, __ATOMIC_SEQ_CST) ? b : b | UW_SDP_READY_EXACT;
}

unsigned uw__sdp_bits(const uw_sdp_sock *s)
{
    switch (s->state) {
    case UW__SS_FRESH:
        return POLLOUT; /* TCP adds POLLHUP; a mirror cannot take it back (docs/sdp.md) */
    case UW__SS_LISTEN:
        return s->aq_n || s->tcp_ready ? POLLIN : 0;
    case UW__SS_FAILED:
        return POLLIN | POLLOUT | POLLHUP | POLLRDHUP | (s->so_error ? POLLERR : 0);
    case UW__SS_OPEN: {
        unsigned b = s->conn ? uw__sdp_conn_poll(s->conn) : POLLIN | POLLOUT | POLLHUP | POLLRDHUP;
        if (s->err_stash || s->so_error)
            b |= POLLERR;
        return b;
    }
    default:
        return 0;
    }
}

/* ---- Deadlines ------------------------------------------------------------- */

static void arm(uw_sdp_stack *st, uint64_t ns)
{
    if (ns && (!st->next_deadline_ns || ns < st->next_deadline_ns)) {
        st->next_deadline_ns = ns;
        /* The progress thread may sleep past it: let it recompute (a
         * wakeup is a context switch: only when it would). */
        if (ns < st->thr_wake_ns)
            uw__sdp_wake_thread(st);
    }
}

void uw__sdp_arm(uw_sdp_stack *st, uint64_t ns)
{
    arm(st, ns);
}

void uw__sdp_set_deadline(uw_sdp_sock *s, uint64_t ns)
{
    s->deadline_ns = ns;
    arm(s->st, ns);
}

/* TCP sends a corked partial segment after 200 ms at most (tcp(7)). The
 * core can also poke a peer that leaves us at two credits
 * (uw__sdp_conn_stalled); the driver does not yet: on a timer it made
 * test_sdp_socket's ChRcvBuf stream stall for good (docs/sdp.md, reading
 * 16). */
#define UW__SDP_CORK_MS 200

static void flow_timer(uw_sdp_sock *s)
{
    if (!uw__sdp_conn_held(s->conn)) {
        s->flow_ns = 0;
        return;
    }
    if (s->flow_ns)
        return;
    s->flow_ns = uw__sdp_deadline_ms(UW__SDP_CORK_MS);
    arm(s->st, s->flow_ns);
}

static void flow_fire(uw_sdp_sock *s)
{
    s->flow_ns = 0;
    if (!s->conn || !s->qp)
        return;
    uw__sdp_conn_release_held(s->conn);
    uw__sdp_pump(s);
}

void uw__sdp_will_wait(uw_sdp_stack *st)
{
    /* An event loop whose waits drive the stack is about to wait in one:
     * waking the progress thread now would only make it race that wait for
     * the next message. */
    if (st->app_drives)
        return;
    st->last_drive_ns = 0;
    if (st->thr_aside && st->driving == 0) {
        st->thr_aside = false;
        uw__sdp_wake_thread(st);
    }
}

void uw__sdp_release_tcp_listener(uw_sdp_sock *s)
{
    uw_sdp_stack *st = s->st;
    close(s->tcp_lfd);
    s->tcp_lfd = -1;
    s->tcp_ready = false;
    /* The progress thread asleep in poll() on it holds a reference to the
     * socket: the port stays bound until that poll returns, and a bind()
     * right after close() failed with EADDRINUSE about one run in three.
     * Wake it and wait (50 ms at most; it does not need the lock we hold
     * to leave poll()). shutdown() would be quicker but would also end the
     * listening of a descriptor the application still holds. */
    if (!st->thr_running || !__atomic_load_n(&st->thr_in_poll, __ATOMIC_SEQ_CST))
        return;
    unsigned gen = __atomic_load_n(&st->thr_polls, __ATOMIC_SEQ_CST);
    uw__sdp_wake_thread(st);
    for (int i = 0; i < 500; i++) {
        if (__atomic_load_n(&st->thr_polls, __ATOMIC_SEQ_CST) != gen)
            return;
        struct timespec ts = {0, 100000};
        nanosleep(&ts, NULL);
    }
}

void uw__sdp_wake_thread(uw_sdp_stack *st)
{
    if (st->thr_running) {
        uint64_t one = 1;
        if (write(st->wake_fd, &one, sizeof(one)) < 0) {
        }
    }
}

static int ms_until(uint64_t deadline_ns, uint64_t now)
{
    if (!deadline_ns)
        return -1;
    if (deadline_ns <= now)
        return 0;
    uint64_t ms = (deadline_ns - now + 999999u) / 1000000u;
    return ms > 3600000u ? 3600000 : (int)ms;
}

/* ---- Buffers and work requests ------------------------------------------- */

/* The registration for buffer id, made once and made again when the core
 * moved the buffer (ids are stable, addresses change on resize: 10.6). */
static uw_mr *mr_for(uw_sdp_sock *s, uint32_t id, void *addr, uint32_t len)
{
    if (id >= s->nmr)
        return NULL;
    uw_mr *mr = s->mr[id];
    if (mr && mr->addr == (uint8_t *)addr && mr->len == len)
        return mr;
    if (mr)
        uw_mr_dereg(mr);
    s->mr[id] = NULL;
    if (uw_mr_reg(s->st->pd, addr, len, UW_ACCESS_LOCAL_WRITE, &mr) < 0)
        return NULL;
    s->mr[id] = mr;
    return mr;
}

static void report_llp_closed(uw_sdp_sock *s, int err);

/* The core counts on every buffer it hands out being posted and every
 * message being sent: a post that fails (no memory for a registration, the
 * QP gone to ERROR) ends the connection rather than leave the two apart. */
static void post_failed(uw_sdp_sock *s, const char *what, int r)
{
    uw__sdp_log(s->st, UW_LOG_WARN, "SDP: %s failed (%s): aborting the connection", what,
                uw_strerror(r));
    if (!s->llp_acted) {
        s->llp_acted = true;
        uw_abort(s->qp);
    }
    report_llp_closed(s, r == UW_ENOMEM ? UW_ENOMEM : UW_ECONNABORTED);
}

static void post_recv(uw_sdp_sock *s, const uw_sdp_post *p)
{
    uw_mr *mr = mr_for(s, p->id, p->addr, p->len);
    int r = UW_ENOMEM;
    if (mr) {
        uw_sge sge = {
            .addr = (uint64_t)(uintptr_t)p->addr, .length = p->len, .lkey = uw_mr_stag(mr)};
        uw_recv_wr wr = {.wr_id = p->id, .sg_list = &sge, .num_sge = 1};
        r = uw_post_recv(s->qp, &wr, 1, NULL);
    }
    if (r < 0)
        post_failed(s, "post_recv", r);
}

/* The Sends a pass produced go to the QP in one post, so that its doorbell
 * writes them with one system call: a 1 MiB send() is 16 messages of 64 KiB,
 * which one post at a time cost a sendmsg each. */
#define UW__SDP_TX_BATCH 32
struct tx_batch {
    int n;
    uw_send_wr wr[UW__SDP_TX_BATCH];
    uw_sge sge[UW__SDP_TX_BATCH];
};

static void flush_sends(uw_sdp_sock *s, struct tx_batch *b)
{
    if (!b->n)
        return;
    int r = uw_post_send(s->qp, b->wr, b->n, NULL);
    b->n = 0;
    if (r < 0)
        post_failed(s, "post_send", r);
}

static void post_send(uw_sdp_sock *s, struct tx_batch *b, const uw_sdp_tx *t)
{
    uw_mr *mr = mr_for(s, t->id, (void *)t->addr, t->len);
    if (!mr) {
        flush_sends(s, b);
        post_failed(s, "post_send", UW_ENOMEM);
        return;
    }
    uw_sge *sge = &b->sge[b->n];
    *sge = (uw_sge){.addr = (uint64_t)(uintptr_t)t->addr, .length = t->len, .lkey = uw_mr_stag(mr)};
    b->wr[b->n] = (uw_send_wr){.wr_id = t->id,
                               .opcode = t->invalidate ? UW_WR_SEND_WITH_INV : UW_WR_SEND,
                               .flags = UW_SEND_SIGNALED | (t->solicited ? UW_SEND_SOLICITED : 0u),
                               .sg_list = sge,
                               .num_sge = 1,
                               .invalidate_stag = t->inv_stag};
    if (++b->n == UW__SDP_TX_BATCH)
        flush_sends(s, b);
}

static void report_llp_closed(uw_sdp_sock *s, int err)
{
    if (s->llp_closed || !s->conn)
        return;
    s->llp_closed = true;
    uw__sdp_conn_llp_closed(s->conn, err);
}

static void take_queued(uw_sdp_stack *st);

void uw__sdp_pump(uw_sdp_sock *s)
{
    uw_sdp_conn *c = s->conn;
    if (c && s->qp) {
        uw_sdp_post p;
        uw_sdp_tx t;
        while (uw__sdp_conn_next_post(c, &p) == 1)
            post_recv(s, &p);
        struct tx_batch b;
        b.n = 0;
        while (uw__sdp_conn_next_tx(c, &t) == 1)
            post_send(s, &b, &t);
        flush_sends(s, &b);
        if (s->st->cq->ring.count && !s->st->in_cq && uw__sdp_conn_nagle_held(c)) {
            /* Nagle holds a partial message until the Sends before it
             * complete, and their completions may already be in the CQ,
             * which makes no fd readable: an application thread's send()
             * that returned now would leave the partial message to a
             * progress thread that nothing wakes. Take them here; the
             * nested pumps (on_wc) send it. Never while completions are
             * being handled (in_cq): the ones taken here would overtake
             * the rest of that batch, and a connection's receives must be
             * handled in order. That pass empties the ring anyway. */
            take_queued(s->st);
        }
        if (uw__sdp_conn_state(c) == UW_SDP_S_OPEN)
            flow_timer(s);
        int act = uw__sdp_conn_llp_action(c);
        if (act != UW_SDP_LLP_NONE && !s->llp_acted) {
            s->llp_acted = true;
            if (act == UW_SDP_LLP_DISCONNECT) {
                uw_disconnect(s->qp);
            } else {
                uw_abort(s->qp);
                report_llp_closed(s, UW_ECONNABORTED);
            }
        }
    }
    uw__sdp_mark(s);
}

/* ---- Connection objects ------------------------------------------------------ */

int uw__sdp_llp_fd(const uw_sdp_sock *s)
{
    return s->qp ? s->qp->fd : -1;
}

void uw__sdp_apply_keepalive(uw_sdp_sock *s)
{
    int fd = uw__sdp_llp_fd(s);
    if (fd < 0)
        return;
    int on = s->keepalive;
    setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof(on));
    if (s->keepidle)
        setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &s->keepidle, sizeof(int));
    if (s->keepintvl)
        setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &s->keepintvl, sizeof(int));
    if (s->keepcnt)
        setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &s->keepcnt, sizeof(int));
}

void uw__sdp_apply_opts(uw_sdp_sock *s)
{
    uw_sdp_conn *c = s->conn;
    uw__sdp_conn_setopt(c, UW_SDP_OPT_NODELAY, s->nodelay);
    uw__sdp_conn_setopt(c, UW_SDP_OPT_CORK, s->cork);
    uw__sdp_conn_setopt(c, UW_SDP_OPT_OOBINLINE, s->oobinline);
    if (s->rcvlowat)
        uw__sdp_conn_setopt(c, UW_SDP_OPT_RCVLOWAT, s->rcvlowat);
    if (s->rcvbuf)
        uw__sdp_conn_setopt(c, UW_SDP_OPT_RCVBUF, s->rcvbuf);
    if (s->sndbuf)
        uw__sdp_conn_setopt(c, UW_SDP_OPT_SNDBUF, s->sndbuf);
}

int uw__sdp_conn_setup(uw_sdp_sock *s, bool accepting, uint16_t ird, uint16_t ord)
{
    uw_sdp_stack *st = s->st;
    uw_sdp_conn_cfg cfg;
    uw__sdp_conn_cfg_default(&cfg, accepting);
    if (s->rcv_size) {
        cfg.rcv_size = s->rcv_size;
        if (cfg.rcv_size_max < cfg.rcv_size)
            cfg.rcv_size_max = 0; /* the core's default: 4 x rcv_size */
    }
    if (s->bufs)
        cfg.rcv_bufs = (uint16_t)s->bufs;
    if (ird)
        cfg.ird = ird;
    if (ord)
        cfg.ord = ord;
    cfg.zcopy_sink = true; /* sdp_zcopy.c decides per SrcAvail */
    int r = uw__sdp_conn_create(&s->conn, &cfg);
    if (r < 0)
        return r;
    uw__sdp_apply_opts(s);
    s->nmr = uw__sdp_conn_max_ids(s->conn);
    s->mr = calloc(s->nmr, sizeof(*s->mr));
    if (!s->mr)
        return UW_ENOMEM;
    if (!s->qp) {
        uw_qp_attr qa = {.pd = st->pd,
                         .send_cq = st->cq,
                         .recv_cq = st->cq,
                         .max_send_wr = s->nmr,
                         .max_recv_wr = s->nmr};
        r = uw_qp_create(st->ctx, &qa, &s->qp);
        if (r < 0)
            return r;
    }
    uw_qp_set_context(s->qp, s);
    /* 8.1.1 step 1c: every buffer the Hello's Bufs will advertise is posted
     * before it is built. The Accepting Peer posts after checking the
     * Hello (the next pump, before the HelloAck: step 4b), so that its
     * buffers can take the size the Hello's DesRemRcvSz hints (6.2.1.4). */
    if (accepting)
        return 0;
    uw_sdp_post p;
    int n;
    while ((n = uw__sdp_conn_next_post(s->conn, &p)) == 1)
        post_recv(s, &p);
    return n < 0 ? n : 0;
}

/* Frees the QP (RST if the LLP is still up), the registrations and the
 * core. Called only from reap(), after the CQ has been drained: the CQ is
 * shared and a completion left in it would name a freed QP. */
void uw__sdp_conn_teardown(uw_sdp_sock *s)
{
    if (s->qp) {
        uw_qp_set_context(s->qp, NULL);
        uw_qp_destroy(s->qp);
        s->qp = NULL;
    }
    for (uint32_t i = 0; i < s->nmr; i++)
        if (s->mr[i])
            uw_mr_dereg(s->mr[i]);
    free(s->mr);
    s->mr = NULL;
    s->nmr = 0;
    uw__sdp_zc_free(s);
    if (s->conn)
        uw__sdp_conn_destroy(s->conn);
    s->conn = NULL;
}

void uw__sdp_kill(uw_sdp_sock *s)
{
    s->dead = true;
}

/* ---- Setup completion ------------------------------------------------------- */

static int map_setup_err(int err)
{
    if (err == UW_ECONNREFUSED || err == UW_ETIMEDOUT || err == UW_ECONNRESET ||
        err == UW_EHOSTUNREACH || err == -ENETUNREACH || err == UW_ECONNABORTED)
        return err;
    if (err > -4000 && err < 0)
        return err; /* errno values from connect() and the socket */
    return -EPROTO; /* an MPA or DDP protocol failure */
}

void uw__sdp_connect_done(uw_sdp_sock *s, int err)
{
    if (s->state != UW__SS_CONNECTING)
        return;
    uw__sdp_set_deadline(s, 0);
    if (!err) {
        s->state = UW__SS_OPEN;
        if (!s->transport_why)
            s->transport_why = "direct";
        int fd = uw__sdp_llp_fd(s);
        s->local_len = sizeof(s->local);
        if (fd < 0 || getsockname(fd, (struct sockaddr *)&s->local, &s->local_len) < 0)
            s->local_len = 0;
        uw__sdp_apply_keepalive(s);
        uw__sdp_log(s->st, UW_LOG_INFO, "SDP: connected");
    } else {
        s->state = UW__SS_FAILED;
        s->so_error = err;
        if (s->pm && err == -ECONNREFUSED)
            uw__sdp_pm_sdp_reset(s); /* 7.5.1: as a PMDeny from now on */
        uw__sdp_log(s->st, UW_LOG_INFO, "SDP: connect failed: %s", uw_strerror(err));
        /* The QP and core go at the end of the pass (the CQ is shared). */
        s->llp_acted = true;
    }
    uw__sdp_mark(s);
}

static void embryo_ready(uw_sdp_sock *s)
{
    uw_sdp_sock *l = s->parent;
    uw__sdp_set_deadline(s, 0);
    s->state = UW__SS_QUEUED;
    s->transport_why = l && l->pm ? "port mapper listener" : "direct";
    int fd = uw__sdp_llp_fd(s);
    s->local_len = sizeof(s->local);
    if (fd < 0 || getsockname(fd, (struct sockaddr *)&s->local, &s->local_len) < 0)
        s->local_len = 0;
    if (l && l->pm && l->tcp_lfd >= 0 && s->local_len) {
        /* getsockname() names the service port the client asked for (as
         * getpeername() does at the other end), not the mapped SDP port. */
        struct sockaddr_storage svc;
        socklen_t sl = sizeof(svc);
        if (getsockname(l->tcp_lfd, (struct sockaddr *)&svc, &sl) == 0 &&
            svc.ss_family == s->local.ss_family) {
            if (svc.ss_family == AF_INET6)
                ((struct sockaddr_in6 *)&s->local)->sin6_port =
                    ((struct sockaddr_in6 *)&svc)->sin6_port;
            else
                ((struct sockaddr_in *)&s->local)->sin_port =
                    ((struct sockaddr_in *)&svc)->sin_port;
        }
    }
    uw__sdp_apply_keepalive(s);
    if (l) {
        l->nembryo--;
        s->aq_next = NULL;
        if (l->aq_tail)
            l->aq_tail->aq_next = s;
        else
            l->aq_head = s;
        l->aq_tail = s;
        l->aq_n++;
        uw__sdp_mark(l);
    }
}

static void embryo_drop(uw_sdp_sock *s)
{
    if (s->parent) {
        s->parent->nembryo--;
        s->parent = NULL;
    }
    s->state = UW__SS_FAILED;
    uw__sdp_kill(s);
}

/* After anything happened to s's core: posts and sends, then the setup
 * state machine. */
static void after(uw_sdp_sock *s)
{
    uw__sdp_pump(s);
    if (!s->conn)
        return;
    int cs = uw__sdp_conn_state(s->conn);
    if (cs == UW_SDP_S_OPEN && !s->peer_eof && (uw__sdp_conn_poll(s->conn) & POLLRDHUP))
        s->peer_eof = true;
    if (s->state == UW__SS_CONNECTING) {
        if (cs == UW_SDP_S_OPEN || cs == UW_SDP_S_CLOSED) {
            uw__sdp_connect_done(s, 0);
        } else if (cs == UW_SDP_S_ERROR) {
            int e = uw__sdp_conn_take_error(s->conn);
            uw__sdp_connect_done(s, e ? map_setup_err(e) : -ECONNRESET);
        }
    } else if (s->state == UW__SS_EMBRYO) {
        if (cs == UW_SDP_S_ERROR)
            embryo_drop(s);
        else if (s->established && cs != UW_SDP_S_HELLO && cs != UW_SDP_S_IDLE)
            embryo_ready(s);
    }
}

/* ---- Completions and events ------------------------------------------------ */

static void on_wc(const uw_wc *wc)
{
    uw_sdp_sock *s = wc->qp ? uw_qp_get_context(wc->qp) : NULL;
    if (!s || s->dead || !s->conn)
        return;
    if (wc->wr_id == UW__SDP_WRID_ZREAD && wc->opcode == UW_WC_RDMA_READ) {
        /* Our Read Zcopy (sdp_zcopy.c): also when it failed, since a
         * reader waits on it. */
        uw__sdp_conn_zread_done(s->conn, wc->status == UW_WC_SUCCESS ? (int64_t)wc->byte_len
                                         : wc->err                   ? wc->err
                                                                     : UW_ECONNRESET);
        after(s);
        return;
    }
    if (wc->wr_id == UW__SDP_WRID_ZWRITE && wc->opcode == UW_WC_RDMA_WRITE) {
        /* Our Write Zcopy (sdp_zcopy.c): a sender waits on it. */
        uw__sdp_conn_zwrite_done(s->conn, wc->status == UW_WC_SUCCESS);
        after(s);
        return;
    }
    if (wc->status != UW_WC_SUCCESS)
        return; /* flushed or failed: the connection event says why */
    if (wc->opcode == UW_WC_RECV) {
        if (wc->flags & UW_WC_WITH_INV)
            uw__sdp_conn_on_recv_inv(s->conn, (uint32_t)wc->wr_id, wc->byte_len,
                                     wc->invalidated_stag);
        else
            uw__sdp_conn_on_recv(s->conn, (uint32_t)wc->wr_id, wc->byte_len);
        uw__sdp_zc_arrived(s);
        /* Data for a socket the application closed: nobody will read it.
         * TCP answers such data with a reset; so does this (the sender's
         * next calls fail instead of blocking on credits forever). */
        if (s->closing && uw__sdp_conn_inq(s->conn) > 0)
            uw__sdp_conn_abort(s->conn);
    } else if (wc->opcode == UW_WC_SEND)
        uw__sdp_conn_tx_done(s->conn, (uint32_t)wc->wr_id);
    after(s);
}

static uw_sdp_sock *listener_of(uw_sdp_stack *st, const uw_listener *l)
{
    for (uw_sdp_sock *s = st->socks; s; s = s->next)
        if (s->lst == l && s->state == UW__SS_LISTEN && !s->closing)
            return s;
    return NULL;
}

static void reject(uw_qp *qp, const char *why)
{
    uw_reject(qp, why, why ? strlen(why) : 0);
    uw_qp_destroy(qp); /* the Reply still goes out (verbs.h) */
}

/* Accepting Peer, 8.1.1 steps 3-5, on an MPA Request. */
static void on_request(uw_sdp_stack *st, const uw_cm_event *ev)
{
    uw_sdp_sock *l = listener_of(st, ev->listener);
    if (!l) {
        reject(ev->qp, "no listener");
        return;
    }
    if (l->domain == AF_INET6 && l->tcp_lfd >= 0 && ev->peer.ss_family == AF_INET6 &&
        IN6_IS_ADDR_V4MAPPED(&((const struct sockaddr_in6 *)&ev->peer)->sin6_addr)) {
        /* The service socket is IPv6-only: so is the service (the SDP
         * listener on the wildcard address would take IPv4 too). */
        int v6only = 0;
        socklen_t vl = sizeof(v6only);
        if (getsockopt(l->tcp_lfd, IPPROTO_IPV6, IPV6_V6ONLY, &v6only, &vl) == 0 && v6only) {
            reject(ev->qp, "SDP: IPv6-only listener");
            return;
        }
    }
    if (l->aq_n + l->nembryo >= (unsigned)l->backlog) {
        uw__sdp_log(st, UW_LOG_INFO, "SDP: backlog of %d full: connection refused", l->backlog);
        reject(ev->qp, "SDP: listen backlog full");
        return;
    }
    uw_sdp_sock *s;
    if (uw__sdp_sock_new(st, l->domain, &s) < 0) {
        reject(ev->qp, "SDP: out of memory");
        return;
    }
    /* Accepted sockets inherit the listener's options, as on TCP. */
    s->rcvtimeo_ms = l->rcvtimeo_ms;
    s->sndtimeo_ms = l->sndtimeo_ms;
    s->linger_on = l->linger_on;
    s->linger_s = l->linger_s;
    s->keepalive = l->keepalive;
    s->keepidle = l->keepidle;
    s->keepintvl = l->keepintvl;
    s->keepcnt = l->keepcnt;
    memcpy(s->cc, l->cc, sizeof(s->cc));
    s->nodelay = l->nodelay;
    s->cork = l->cork;
    s->oobinline = l->oobinline;
    s->rcvlowat = l->rcvlowat;
    s->rcvbuf = l->rcvbuf;
    s->sndbuf = l->sndbuf;
    s->rcv_size = l->rcv_size;
    s->bufs = l->bufs;
    s->crc = l->crc;
    s->zc_min = l->zc_min;
    s->state = UW__SS_EMBRYO;
    s->accepted = true;
    s->qp = ev->qp;
    /* The listener's TCP_CONGESTION, whenever it was set (only the MPA
     * exchange went before it). */
    if (s->cc[0] && s->qp->fd >= 0)
        setsockopt(s->qp->fd, IPPROTO_TCP, TCP_CONGESTION, s->cc, (socklen_t)strlen(s->cc));
    memcpy(&s->peer, &ev->peer, sizeof(s->peer));
    s->peer_len =
        ev->peer.ss_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
    uint16_t ird = ev->mpa.ird ? ev->mpa.ird : 1, ord = ev->mpa.ord ? ev->mpa.ord : 1;
    int r = uw__sdp_conn_setup(s, true, ird, ord);
    const char *why = NULL;
    if (r == 0) {
        uw__sdp_conn_mpa_limits(s->conn, ev->mpa.ird, ev->mpa.ord);
        r = uw__sdp_conn_accept_hello(s->conn, ev->private_data, ev->private_data_len, &why);
    }
    if (r < 0) {
        uw__sdp_log(st, UW_LOG_INFO, "SDP: connection refused: %s", why ? why : uw_strerror(r));
        uw_qp_set_context(s->qp, NULL);
        /* Nothing of this QP is in the CQ yet (only receives were posted,
         * and uw_qp_destroy drops them without completions). */
        reject(s->qp, why ? why : "SDP: setup failed");
        s->qp = NULL;
        uw__sdp_conn_teardown(s);
        uw__sdp_sock_free(s);
        return;
    }
    uw_conn_param p;
    memset(&p, 0, sizeof(p));
    p.crc = s->crc ? UW_CRC_PREFER : UW_CRC_AVOID;
    r = uw_accept(s->qp, &p);
    if (r < 0) {
        uw__sdp_log(st, UW_LOG_WARN, "SDP: uw_accept: %s", uw_strerror(r));
        s->state = UW__SS_FAILED;
        uw__sdp_kill(s);
        return;
    }
    /* Counted against the backlog from here on (sock_free undoes it). */
    s->parent = l;
    l->nembryo++;
    uw__sdp_set_deadline(s, uw__sdp_deadline_ms(st->attr.setup_timeout_ms));
    after(s); /* the HelloAck is queued; it goes once the RTR is in */
}

static int llp_err(const uw_cm_event *ev)
{
    if (ev->type == UW_CM_DISCONNECTED)
        return 0;
    if (ev->type == UW_CM_CONN_ERROR && ev->err == UW_ETIMEDOUT)
        return UW_ETIMEDOUT;
    /* A Terminate we sent: the peer broke an RDMAP, DDP or MPA rule (a CRC
     * error, a Read outside our grant...). The application hears of a
     * protocol error, not of a reset the peer never made. */
    if (ev->type == UW_CM_TERMINATED && !ev->term_received)
        return UW_EPROTO;
    return UW_ECONNRESET;
}

static void on_event(uw_sdp_stack *st, const uw_cm_event *ev)
{
    if (ev->type == UW_CM_CONNECT_REQUEST) {
        on_request(st, ev);
        return;
    }
    uw_sdp_sock *s = ev->qp ? uw_qp_get_context(ev->qp) : NULL;
    if (!s || s->dead)
        return;
    switch (ev->type) {
    case UW_CM_ESTABLISHED:
        s->established = true;
        if (s->conn && s->state == UW__SS_CONNECTING)
            uw__sdp_conn_mpa_limits(s->conn, ev->mpa.ird, ev->mpa.ord);
        after(s);
        break;
    case UW_CM_REJECTED:
        s->llp_closed = true;
        uw__sdp_connect_done(s, -ECONNREFUSED);
        break;
    case UW_CM_CONNECT_ERROR:
        s->llp_closed = true;
        if (s->state == UW__SS_CONNECTING)
            uw__sdp_connect_done(s, map_setup_err(ev->err ? ev->err : UW_ECONNRESET));
        else if (s->state == UW__SS_EMBRYO)
            embryo_drop(s);
        break;
    case UW_CM_DISCONNECTED:
    case UW_CM_TERMINATED:
    case UW_CM_CONN_ERROR:
        /* 8.1.2: an LLP that goes away during setup ends the setup. */
        if (s->state == UW__SS_CONNECTING) {
            s->llp_closed = true;
            uw__sdp_connect_done(s, ev->type == UW_CM_DISCONNECTED ? -ECONNRESET
                                                                   : map_setup_err(llp_err(ev)));
            break;
        }
        if (s->state == UW__SS_EMBRYO) {
            embryo_drop(s);
            break;
        }
        if (ev->type == UW_CM_TERMINATED)
            uw__sdp_log(s->st, UW_LOG_WARN, "SDP: Terminate %s: %s",
                        ev->term_received ? "from the peer" : "sent to the peer (it broke a rule)",
                        uw_term_describe(ev->term));
        report_llp_closed(s, llp_err(ev));
        if (ev->type == UW_CM_DISCONNECTED && !s->llp_acted && s->qp) {
            /* The peer closed the LLP: close ours too, or it stays half open. */
            s->llp_acted = true;
            uw_disconnect(s->qp);
        }
        after(s);
        break;
    default:
        break;
    }
}

/* ---- Timers and reaping ------------------------------------------------------ */

static void timers(uw_sdp_stack *st)
{
    uint64_t now = uw__now_ns();
    if (!st->next_deadline_ns || now < st->next_deadline_ns)
        return;
    uint64_t next = 0;
    for (uw_sdp_sock *s = st->socks; s; s = s->next) {
        if (s->flow_ns && !s->dead) {
            if (s->flow_ns <= now)
                flow_fire(s); /* may arm it again */
            if (s->flow_ns && (!next || s->flow_ns < next))
                next = s->flow_ns;
        }
        if (s->zc_ns && !s->dead) {
            uw__sdp_zc_fire(s, now);
            if (s->zc_ns && (!next || s->zc_ns < next))
                next = s->zc_ns;
        }
        if (!s->deadline_ns || s->dead)
            continue;
        if (s->deadline_ns > now) {
            if (!next || s->deadline_ns < next)
                next = s->deadline_ns;
            continue;
        }
        s->deadline_ns = 0;
        if (s->state == UW__SS_CONNECTING) {
            /* MPA done or not, no HelloAck in time: 8.1.2. */
            uw__sdp_log(st, UW_LOG_INFO, "SDP: connection setup timed out");
            uw__sdp_connect_done(s, UW_ETIMEDOUT);
        } else if (s->state == UW__SS_EMBRYO) {
            embryo_drop(s);
        } else if (s->closing) {
            uw__sdp_log(st, UW_LOG_INFO, "SDP: background close timed out: aborting");
            uw__sdp_kill(s);
        }
    }
    st->next_deadline_ns = next;
}

static bool close_finished(const uw_sdp_sock *s)
{
    if (!s->conn || !s->qp)
        return true;
    int cs = uw__sdp_conn_state(s->conn);
    if (cs != UW_SDP_S_CLOSED && cs != UW_SDP_S_ERROR)
        return false;
    int qs = uw_qp_state(s->qp);
    return s->llp_closed && (qs == UW_QPS_CLOSED || qs == UW_QPS_ERROR);
}

/* Completions in the order the CQ gave them; in_cq keeps uw__sdp_pump from
 * taking later ones in the middle of the batch. */
static void run_wcs(uw_sdp_stack *st, const uw_wc *wc, int k)
{
    bool was = st->in_cq;
    st->in_cq = true;
    for (int i = 0; i < k; i++)
        on_wc(&wc[i]);
    st->in_cq = was;
}

static void drain_cq(uw_sdp_stack *st)
{
    uw_wc wc[64];
    for (int round = 0; round < 1024; round++) {
        int k = uw_cq_poll(st->cq, wc, 64);
        run_wcs(st, wc, k);
        if (k < 64 && !st->cq->ring.count)
            break;
    }
}

static void reap(uw_sdp_stack *st)
{
    bool any = false;
    for (uw_sdp_sock *s = st->socks; s; s = s->next) {
        if (s->closing && !s->dead && close_finished(s))
            uw__sdp_kill(s);
        if (s->dead || (s->state == UW__SS_FAILED && (s->qp || s->conn)))
            any = true;
    }
    if (!any)
        return;
    /* Completions of the QPs about to go must not stay in the shared CQ. */
    drain_cq(st);
    for (uw_sdp_sock *s = st->socks, *next; s; s = next) {
        next = s->next;
        if (s->dead) {
            uw__sdp_conn_teardown(s);
            uw__sdp_sock_free(s);
        } else if (s->state == UW__SS_FAILED && (s->qp || s->conn)) {
            uw__sdp_conn_teardown(s);
        }
    }
}

/* What the CQ already holds, without an engine pass. */
static void take_queued(uw_sdp_stack *st)
{
    uw_wc wc[64];
    for (int round = 0; round < 1024 && st->cq->ring.count; round++) {
        int k = uw__cq_take(st->cq, wc, 64);
        run_wcs(st, wc, k);
    }
}

void uw__sdp_progress(uw_sdp_stack *st)
{
    st->passes++;
    uw_wc wc[64];
    for (int round = 0; round < 16; round++) {
        int k = uw_cq_poll(st->cq, wc, 64);
        run_wcs(st, wc, k);
        int ne = 0;
        uw_cm_event ev;
        /* uw_cm_get_event() makes an engine pass when its queue is empty:
         * look first, so a pass costs one engine pass, not two. */
        while (st->ctx->ev_head) {
            /* The engine queues a connection's completions before its
             * event, and they are taken first: a FIN judged while the
             * DisConn and the data before it still sat in the CQ read as a
             * reset (one pass over many connections queues more than one
             * poll takes). */
            take_queued(st);
            if (uw_cm_get_event(st->ctx, &ev) != 1)
                break;
            on_event(st, &ev);
            ne++;
        }
        if (k < 64 && !ne && !st->cq->ring.count)
            break;
    }
    timers(st);
    reap(st);
}

/* ---- Waiting ----------------------------------------------------------------- */

int uw__sdp_wait(uw_sdp_sock *s, short events, uint64_t deadline_ns)
{
    uw_sdp_stack *st = s->st;
    /* Completions already in the CQ make no fd readable (verbs.h): a Send
     * that completed after the last pass would free the very slot this
     * thread waits for, and nothing would wake it. This thread drives then
     * as much as one in poll(): a bulk transfer that always finds work
     * here never reaches poll(), and the progress thread, not standing
     * aside, woke for each message it handled and fought it for the lock
     * (four futex calls per 1 MiB RDMA Write Zcopy). */
    if (st->cq->ring.count) {
        st->last_drive_ns = uw__now_ns();
        uw__sdp_progress(st);
        return 0;
    }
    uint64_t now = uw__now_ns();
    int tmo = ms_until(deadline_ns, now);
    int t2 = ms_until(st->next_deadline_ns, now);
    if (t2 >= 0 && (tmo < 0 || t2 < tmo))
        tmo = t2;
    if (s->lazy) {
        /* Another thread may sleep on the mirror for this very socket. */
        __atomic_store_n(&s->lazy, false, __ATOMIC_SEQ_CST);
        uw__sdp_ready_set(&s->rd, uw__sdp_bits(s));
    }
    s->lazy_never = true;
    int a = s->rd.a;
    /* One application thread at a time sleeps on the context fd and drives
     * the protocol for everyone; the others sleep on their own socket's fd
     * and are woken by the mirror. Without a progress thread every waiter
     * drives (somebody must). */
    bool drive = st->driving == 0 || !st->thr_running || a < 0;
    if (a < 0 && (tmo < 0 || tmo > 10))
        tmo = 10; /* nothing mirrors what we wait for (linger): look again soon */
    if (drive)
        st->driving++;
    st->app_waits++;
    uw__sdp_unlock(st);
    struct pollfd p[3];
    int n = 0;
    if (a >= 0)
        p[n++] = (struct pollfd){.fd = a, .events = events};
    if (drive)
        p[n++] = (struct pollfd){.fd = st->ctx_fd, .events = POLLIN};
    if (s->tcp_lfd >= 0) /* a port-mapper listener's TCP side, for accept() */
        p[n++] = (struct pollfd){.fd = s->tcp_lfd, .events = POLLIN};
    int r = poll(p, (nfds_t)n, tmo);
    int e = errno;
    uw__sdp_lock(st);
    if (drive) {
        st->driving--;
        st->last_drive_ns = uw__now_ns();
    }
    if (r < 0 && e == EINTR)
        return -EINTR;
    /* A follower woken by its mirror finds the state already there. */
    if (drive || r == 0)
        uw__sdp_progress(st);
    return 0;
}

int uw_sdp_stack_wait_begin(uw_sdp_stack *st, int *fd, int *timeout_ms)
{
    if (!st || !fd || !timeout_ms)
        return -EINVAL;
    uw__sdp_lock(st);
    int rc = 0;
    if (!st->socks) {
        rc = -ENOENT;
    } else if (st->driving > 0 && st->thr_running) {
        rc = -EBUSY;
    } else {
        /* As in uw__sdp_wait: completions in the CQ make no fd readable. */
        if (st->cq->ring.count)
            uw__sdp_progress(st);
        st->driving++;
        st->app_drives = true;
        st->loop_waits++;
        *fd = st->ctx_fd;
        *timeout_ms = ms_until(st->next_deadline_ns, uw__now_ns());
    }
    uw__sdp_unlock(st);
    return rc;
}

void uw_sdp_stack_wait_end(uw_sdp_stack *st, bool fired)
{
    if (!st)
        return;
    uw__sdp_lock(st);
    uint64_t now = uw__now_ns();
    if (st->driving)
        st->driving--;
    st->last_drive_ns = now;
    if (fired || (st->next_deadline_ns && st->next_deadline_ns <= now) || st->cq->ring.count)
        uw__sdp_progress(st);
    uw__sdp_unlock(st);
}

/* ---- The progress thread ------------------------------------------------------ */

static void *thread_main(void *arg)
{
    uw_sdp_stack *st = arg;
    if (st->attr.thread_start)
        st->attr.thread_start();
    uw__sdp_lock(st);
    while (!st->stopping) {
        /* While an application thread drives, and for UW__SDP_ASIDE_MS after
         * one last did, stand aside: wait only on the wake eventfd and look
         * again then. Polling the context fd too would wake this thread for
         * messages the application thread handles anyway: in a
         * request/response loop the application leaves its wait between a
         * response and the next request, and this thread, polling the
         * context fd in that gap, woke for about one message in ten and
         * fought the application thread for the lock. */
        uint64_t now = uw__now_ns();
        uint64_t quiet = st->last_drive_ns + UW__SDP_ASIDE_MS * 1000000ull;
        bool aside = st->driving > 0 || now < quiet;
        int tmo = ms_until(st->next_deadline_ns, now);
        int tick = st->driving > 0 ? UW__SDP_ASIDE_MS : ms_until(quiet, now);
        if (aside && (tmo < 0 || tmo > tick))
            tmo = tick;
        /* Completions already in the CQ make no fd readable: an application
         * thread's send() can leave its last Send's completion there, and
         * the data Nagle holds behind it waits for this thread to take it. */
        if (st->cq->ring.count && !aside)
            tmo = 0;
        st->thr_wake_ns = tmo < 0 ? UINT64_MAX : now + (uint64_t)tmo * 1000000u;
        /* Port-mapper listeners' TCP sockets: watched here until one has
         * a connection waiting (then its mirror is readable until accept
         * finds none). At most UW__SDP_TCP_WATCH of them. */
        struct pollfd p[2 + UW__SDP_TCP_WATCH];
        uint64_t tl[UW__SDP_TCP_WATCH];
        nfds_t nt = 0;
        st->thr_aside = aside;
        for (uw_sdp_sock *s = st->socks; s && nt < UW__SDP_TCP_WATCH; s = s->next)
            if (s->tcp_lfd >= 0 && !s->tcp_ready && s->state == UW__SS_LISTEN) {
                tl[nt] = s->serial;
                p[2 + nt++] = (struct pollfd){.fd = s->tcp_lfd, .events = POLLIN};
            }
        uw__sdp_unlock(st);
        p[0] = (struct pollfd){.fd = st->wake_fd, .events = POLLIN};
        p[1] = (struct pollfd){.fd = aside ? -1 : st->ctx_fd, .events = POLLIN};
        int n;
        for (int skips = 0;; skips++) {
            __atomic_store_n(&st->thr_in_poll, true, __ATOMIC_SEQ_CST);
            n = poll(p, 2 + nt, tmo);
            /* poll() held a reference to every file it watched until now
             * (uw__sdp_release_tcp_listener waits for this). */
            __atomic_store_n(&st->thr_in_poll, false, __ATOMIC_SEQ_CST);
            __atomic_add_fetch(&st->thr_polls, 1, __ATOMIC_SEQ_CST);
            if (n > 0 && p[0].revents) {
                uint64_t v;
                if (read(st->wake_fd, &v, sizeof(v)) < 0) {
                }
            }
            /* A tick with the lock taken means somebody is working: blocking
             * on the lock here made every unlock of a busy application
             * thread a futex wake (some 2,600 a second in a 64 KiB stream,
             * 6% of the reader's time). Anything that asked for this thread
             * (the wake fd, a descriptor) and the fourth tick in a row do
             * wait for the lock, so timers still run. */
            if (n != 0 || skips >= 3) {
                uw__sdp_lock(st);
                break;
            }
            if (pthread_mutex_trylock(&st->mu) == 0)
                break;
            tmo = UW__SDP_ASIDE_MS;
        }
        for (nfds_t i = 0; n > 0 && i < nt; i++) {
            /* Only POLLIN says a client waits: POLLNVAL comes when the
             * listener was closed between the unlock and poll(), and then
             * its number may already be a new listener's. */
            if (!(p[2 + i].revents & POLLIN))
                continue;
            /* Still there: the lock was released (sockets are freed only
             * under it, by their close or by reaping). */
            for (uw_sdp_sock *s = st->socks; s; s = s->next)
                if (s->serial == tl[i] && s->tcp_lfd == p[2 + i].fd) {
                    s->tcp_ready = true;
                    uw__sdp_mark(s);
                }
        }
        st->thread_wakeups++;
        /* An application thread may have started driving (or spinning on
         * nonblocking calls) while this one slept: then it has the work. */
        quiet = st->last_drive_ns + UW__SDP_ASIDE_MS * 1000000ull;
        if (st->driving > 0 || uw__now_ns() < quiet)
            aside = true;
        if (!st->stopping && !aside)
            uw__sdp_progress(st);
        else if (!st->stopping && st->driving == 0 && uw__now_ns() >= quiet)
            uw__sdp_progress(st);
    }
    uw__sdp_unlock(st);
    return NULL;
}

/* ---- Sockets ------------------------------------------------------------------ */

int uw__sdp_sock_new(uw_sdp_stack *st, int domain, uw_sdp_sock **out)
{
    uw_sdp_sock *s = calloc(1, sizeof(*s));
    if (!s)
        return -ENOMEM;
    s->st = st;
    s->serial = ++st->sock_serial;
    s->domain = domain;
    s->rd.a = s->rd.b = -1;
    s->bind_fd = s->pm_fd = s->tcp_lfd = s->tcp_fd = -1;
    s->crc = true;
    s->zc_min = st->zc_min;
    s->next = st->socks;
    if (st->socks)
        st->socks->prev = s;
    st->socks = s;
    *out = s;
    return 0;
}

void uw__sdp_sock_free(uw_sdp_sock *s)
{
    uw_sdp_stack *st = s->st;
    if (s->dirty) {
        for (uw_sdp_sock **pp = &st->dirty; *pp; pp = &(*pp)->dnext)
            if (*pp == s) {
                *pp = s->dnext;
                break;
            }
    }
    if (s->prev)
        s->prev->next = s->next;
    else
        st->socks = s->next;
    if (s->next)
        s->next->prev = s->prev;
    if (s->parent) {
        /* Still in its listener's accept queue or setup count. */
        uw_sdp_sock *l = s->parent;
        if (s->state == UW__SS_EMBRYO) {
            l->nembryo--;
        } else {
            for (uw_sdp_sock **pp = &l->aq_head, *prev = NULL; *pp;
                 prev = *pp, pp = &(*pp)->aq_next) {
                if (*pp == s) {
                    *pp = s->aq_next;
                    if (l->aq_tail == s)
                        l->aq_tail = prev;
                    l->aq_n--;
                    uw__sdp_mark(l);
                    break;
                }
            }
        }
    }
    uw__sdp_ready_fini(&s->rd);
    if (s->bind_fd >= 0)
        close(s->bind_fd);
    if (s->pm_fd >= 0)
        close(s->pm_fd);
    if (s->tcp_lfd >= 0)
        close(s->tcp_lfd);
    if (s->tcp_fd >= 0)
        close(s->tcp_fd);
    free(s);
}

/* ---- The stack ------------------------------------------------------------------ */

int uw_sdp_stack_create(uw_sdp_stack **out, const uw_sdp_stack_attr *attr)
{
    if (!out)
        return -EINVAL;
    uw_sdp_stack *st = calloc(1, sizeof(*st));
    if (!st)
        return -ENOMEM;
    if (attr)
        st->attr = *attr;
    if (st->attr.pmd_control) {
        snprintf(st->pmd_control, sizeof(st->pmd_control), "%s", st->attr.pmd_control);
        st->attr.pmd_control = st->pmd_control;
    }
    if (st->attr.pm_server && st->attr.pm_server_len >= sizeof(struct sockaddr_in)) {
        /* Kept as the resolver's "ADDR:PORT" / "[V6]:PORT" string. */
        char ip[INET6_ADDRSTRLEN];
        const struct sockaddr *sa = st->attr.pm_server;
        if (sa->sa_family == AF_INET) {
            const struct sockaddr_in *s4 = (const struct sockaddr_in *)sa;
            inet_ntop(AF_INET, &s4->sin_addr, ip, sizeof(ip));
            snprintf(st->pm_server, sizeof(st->pm_server), "%s:%u", ip, ntohs(s4->sin_port));
        } else if (sa->sa_family == AF_INET6 &&
                   st->attr.pm_server_len >= sizeof(struct sockaddr_in6)) {
            const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)sa;
            inet_ntop(AF_INET6, &s6->sin6_addr, ip, sizeof(ip));
            snprintf(st->pm_server, sizeof(st->pm_server), "[%s]:%u", ip, ntohs(s6->sin6_port));
        }
    }
    st->attr.pm_server = NULL; /* not kept: the caller's memory */
    if (st->attr.setup_timeout_ms <= 0)
        st->attr.setup_timeout_ms = 10000;
    if (st->attr.pm_timeout_ms <= 0)
        st->attr.pm_timeout_ms = 1000;
    st->wake_fd = -1;
    int r = -ENOMEM;
    if (pthread_mutex_init(&st->mu, NULL) != 0) {
        free(st);
        return -ENOMEM;
    }
    uw_ctx_attr ca = {
        .log = st->attr.log, .log_ud = st->attr.log_ud, .log_level = st->attr.log_level};
    if ((r = uw_ctx_create(&st->ctx, &ca)) < 0)
        goto fail;
    st->zc_min = uw__sdp_zc_default();
    if ((r = uw_pd_alloc(st->ctx, &st->pd)) < 0 ||
        (r = uw_cq_create(st->ctx, UW__SDP_CQ_DEPTH, &st->cq)) < 0)
        goto fail;
    /* Taken: every LLP socket stays in the context's epoll set, so one fd
     * shows all the stack's work (verbs.h uw_ctx_fd()). */
    st->ctx_fd = uw_ctx_fd(st->ctx);
    st->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (st->wake_fd < 0) {
        r = -errno;
        goto fail;
    }
    if (!st->attr.no_progress_thread) {
        /* The thread takes no signals: they belong to the application's
         * threads, whose blocking calls report EINTR. */
        sigset_t all, old;
        sigfillset(&all);
        pthread_sigmask(SIG_SETMASK, &all, &old);
        int e = pthread_create(&st->thr, NULL, thread_main, st);
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        if (e) {
            r = -e;
            goto fail;
        }
        st->thr_running = true;
    }
    *out = st;
    return 0;
fail:
    if (st->cq)
        uw_cq_destroy(st->cq);
    if (st->pd)
        uw_pd_dealloc(st->pd);
    if (st->ctx)
        uw_ctx_destroy(st->ctx);
    if (st->wake_fd >= 0)
        close(st->wake_fd);
    pthread_mutex_destroy(&st->mu);
    free(st);
    return r;
}

/* Graceful closes still under way get a moment to finish (the peer's
 * DisConn and FIN), so that a program that closes its sockets and then
 * destroys the stack does not reset them. Those still open after it whose
 * data and DisConn are all with TCP are closed with a FIN, as close(2) of a
 * TCP socket would: the kernel delivers what it holds. */
#define UW__SDP_DESTROY_GRACE_MS 2000

/* Runs passes until no socket the application closed is still finishing
 * its graceful close, or until end (ns). Returns how many still are. */
static int wait_closes(uw_sdp_stack *st, uint64_t end)
{
    int pending;
    for (;;) {
        uw__sdp_progress(st);
        pending = 0;
        for (uw_sdp_sock *s = st->socks; s; s = s->next)
            if (s->closing && !s->dead && s->conn)
                pending++;
        uint64_t now = uw__now_ns();
        if (!pending || now >= end)
            break;
        uw__sdp_unlock(st);
        struct pollfd p = {.fd = st->ctx_fd, .events = POLLIN};
        int tmo = ms_until(end, now);
        poll(&p, 1, tmo < 0 || tmo > 50 ? 50 : tmo);
        uw__sdp_lock(st);
    }
    return pending;
}

void uw_sdp_stack_atfork(uw_sdp_stack *st, int phase)
{
    if (!st)
        return;
    if (phase == UW_SDP_FORK_PREPARE) {
        pthread_mutex_lock(&st->mu); /* lists consistent in the child's copy */
        return;
    }
    if (phase == UW_SDP_FORK_PARENT) {
        pthread_mutex_unlock(&st->mu);
        return;
    }
    /* The child: no progress thread, and the lock stays taken for good.
     * Every descriptor goes, so that the child holds none of the parent's
     * connections, listening ports or mirrors open. */
    for (uw_sdp_sock *s = st->socks; s; s = s->next) {
        int fds[] = {s->rd.a,
                     s->rd.b,
                     s->bind_fd,
                     s->pm_fd,
                     s->tcp_lfd,
                     s->tcp_fd,
                     s->lst ? s->lst->fd : -1};
        for (size_t i = 0; i < sizeof(fds) / sizeof(fds[0]); i++)
            if (fds[i] >= 0)
                close(fds[i]);
        s->rd.a = s->rd.b = s->bind_fd = s->pm_fd = s->tcp_lfd = s->tcp_fd = -1;
    }
    for (uw_qp *q = st->ctx->qps; q; q = q->next)
        if (q->fd >= 0) {
            close(q->fd);
            q->fd = -1;
        }
    int cfds[] = {st->ctx->epfd, st->ctx->evfd, st->ctx->tfd, st->wake_fd};
    for (size_t i = 0; i < sizeof(cfds) / sizeof(cfds[0]); i++)
        if (cfds[i] >= 0)
            close(cfds[i]);
    st->thr_running = false;
}

int uw_sdp_stack_flush(uw_sdp_stack *st, int timeout_ms)
{
    if (!st)
        return -EINVAL;
    uw__sdp_lock(st);
    int n = wait_closes(st, uw__sdp_deadline_ms(timeout_ms > 0 ? timeout_ms : 1));
    uw__sdp_unlock(st);
    return n;
}

static void finish_closes(uw_sdp_stack *st)
{
    uint64_t end = uw__sdp_deadline_ms(UW__SDP_DESTROY_GRACE_MS);
    for (;;) {
        uw__sdp_progress(st);
        bool pending = false;
        for (uw_sdp_sock *s = st->socks; s; s = s->next)
            if (s->closing && !s->dead && s->conn)
                pending = true;
        uint64_t now = uw__now_ns();
        if (!pending || now >= end)
            break;
        uw__sdp_unlock(st);
        struct pollfd p = {.fd = st->ctx_fd, .events = POLLIN};
        int tmo = ms_until(end, now);
        poll(&p, 1, tmo < 0 || tmo > 50 ? 50 : tmo);
        uw__sdp_lock(st);
    }
    for (uw_sdp_sock *s = st->socks; s; s = s->next)
        if (s->closing && !s->dead && s->conn && s->qp && uw__sdp_conn_tx_idle(s->conn) &&
            uw__sdp_conn_state(s->conn) != UW_SDP_S_ERROR)
            s->qp->release_fin = true;
}

int uw_sdp_stack_destroy(uw_sdp_stack *st)
{
    if (!st)
        return -EINVAL;
    if (st->thr_running) {
        uw__sdp_lock(st);
        st->stopping = true;
        uw__sdp_unlock(st);
        uint64_t one = 1;
        if (write(st->wake_fd, &one, sizeof(one)) < 0) {
        }
        pthread_join(st->thr, NULL);
        st->thr_running = false;
    }
    uw__sdp_lock(st);
    finish_closes(st);
    for (uw_sdp_sock *s = st->socks; s; s = s->next) {
        if (s->lst) {
            uw_listener_destroy(s->lst);
            s->lst = NULL;
        }
        s->parent = NULL; /* the listeners go too */
        s->aq_head = s->aq_tail = NULL;
        s->aq_n = s->nembryo = 0;
        uw__sdp_kill(s);
    }
    drain_cq(st);
    while (st->socks) {
        uw_sdp_sock *s = st->socks;
        uw__sdp_conn_teardown(s);
        uw__sdp_sock_free(s);
    }
    st->dirty = NULL;
    uw_cq_destroy(st->cq);
    uw_pd_dealloc(st->pd);
    uw_ctx_destroy(st->ctx);
    uw__sdp_pm_destroy(st);
    pthread_mutex_unlock(&st->mu);
    pthread_mutex_destroy(&st->mu);
    close(st->wake_fd);
    free(st);
    return 0;
}
