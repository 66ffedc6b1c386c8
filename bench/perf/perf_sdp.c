/* uwarp-perf over SDP sockets (uwarp/sdp.h), and the byte-stream tests over
 * plain TCP sockets, with one loop for both transports so that only the
 * socket calls differ:
 *   stream: the client sends size octets per send() call for the duration,
 *           then shuts down its direction; the server receives into one
 *           buffer and counts what it received;
 *   rr:     size-octet request, size-octet echo, ping-pong;
 *   idle:   the client opens N connections and leaves them idle; both sides
 *           measure how much their resident memory grew.
 * Blocking mode makes blocking calls; --busy-poll spins on MSG_DONTWAIT ones
 * (both transports). TCP_NODELAY is the same on both transports and sides.
 * The server answers the end of a test with its CPU time and byte count, as
 * the TCP server of perf_tcp.c does for the other ops.
 *
 * The SDP server is one process with one stack and serves one test at a
 * time (connections queue in the listener meanwhile): forking per
 * connection, as the TCP server does, would not carry the stack's thread. */
#define _GNU_SOURCE
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "perf.h"
#include "uwarp/crc32c.h"
#include "uwarp/sdp.h"

/* A connected byte stream: an SDP socket, or a TCP socket when s is NULL. */
typedef struct pio {
    uw_sdp_sock *s;
    int fd;
} pio;

/* Both return what send(2)/recv(2) would, errno included. */
static ssize_t pio_send(const pio *p, const void *buf, size_t n, int fl)
{
    if (!p->s)
        return send(p->fd, buf, n, fl | MSG_NOSIGNAL);
    ssize_t r = uw_sdp_send(p->s, buf, n, fl | MSG_NOSIGNAL);
    if (r < 0) {
        errno = (int)-r;
        return -1;
    }
    return r;
}

static ssize_t pio_recv(const pio *p, void *buf, size_t n, int fl)
{
    if (!p->s)
        return recv(p->fd, buf, n, fl);
    ssize_t r = uw_sdp_recv(p->s, buf, n, fl);
    if (r < 0) {
        errno = (int)-r;
        return -1;
    }
    return r;
}

static int pio_shutdown_wr(const pio *p)
{
    return p->s ? uw_sdp_shutdown(p->s, SHUT_WR) : shutdown(p->fd, SHUT_WR);
}

/* All n octets, as perf_tcp.c's full_io: blocking calls, or MSG_DONTWAIT
 * calls in a spin when busy. End of stream is a failure (errno 0). */
static int pio_full(const pio *p, void *buf, size_t n, bool wr, bool busy)
{
    uint8_t *b = buf;
    int fl = busy ? MSG_DONTWAIT : 0;
    while (n) {
        ssize_t r = wr ? pio_send(p, b, n, fl) : pio_recv(p, b, n, fl);
        if (r > 0) {
            b += r;
            n -= (size_t)r;
            continue;
        }
        if (r == 0) {
            errno = 0;
            return -1;
        }
        if (errno != EAGAIN && errno != EINTR)
            return -1;
    }
    return 0;
}

/* The poll readiness of a stream's descriptor (SDP: the mirror fd). */
static int pio_wait(const pio *p, short ev, int ms)
{
    struct pollfd pf = {.fd = p->s ? uw_sdp_fd(p->s) : p->fd, .events = ev};
    return poll(&pf, 1, ms);
}

/* Reads until the peer's end of stream, for at most about two seconds. */
static void pio_drain(const pio *p)
{
    uint8_t b[64];
    for (int i = 0; i < 100; i++) {
        ssize_t n = pio_recv(p, b, sizeof(b), MSG_DONTWAIT);
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
            return;
        if (n < 0)
            pio_wait(p, POLLIN, 20);
    }
}

/* --tcp-crc: the TCP baseline also makes the CRC32c pass an iWARP peer must
 * make (SDP does its own, inside MPA). */
static void crc_pass(const pio *p, const perf_cfg *c, const void *buf, size_t n, uint32_t *sink)
{
    if (c->tcp_crc && !p->s)
        *sink ^= uw_crc32c(buf, n);
}

static const char *errstr(void)
{
    return errno ? strerror(errno) : "end of stream";
}

/* ---- memory figures -------------------------------------------------------- */

/* Resident set of this process (all its threads), octets. */
static int64_t rss_bytes(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    unsigned long long size = 0, res = 0;
    if (!f)
        return 0;
    if (fscanf(f, "%llu %llu", &size, &res) != 2)
        res = 0;
    fclose(f);
    return (int64_t)res * (int64_t)sysconf(_SC_PAGESIZE);
}

/* The kernel memory connections take that no RSS shows: slab objects
 * (sockets, files, epoll items) and TCP buffer pages. Host-wide, so other
 * activity moves it too: a rough figure. */
static int64_t kernel_bytes(void)
{
    int64_t total = 0;
    char line[256];
    FILE *f = fopen("/proc/meminfo", "r");
    if (f) {
        unsigned long long kb;
        while (fgets(line, sizeof(line), f))
            if (sscanf(line, "Slab: %llu kB", &kb) == 1)
                total += (int64_t)kb * 1024;
        fclose(f);
    }
    f = fopen("/proc/net/sockstat", "r");
    if (f) {
        unsigned long long inuse, orphan, tw, alloc, mem;
        while (fgets(line, sizeof(line), f))
            if (sscanf(line, "TCP: inuse %llu orphan %llu tw %llu alloc %llu mem %llu", &inuse,
                       &orphan, &tw, &alloc, &mem) == 5)
                total += (int64_t)mem * (int64_t)sysconf(_SC_PAGESIZE);
        fclose(f);
    }
    return total;
}

/* ---- one test, both transports ------------------------------------------- */

static void set_nodelay_tcp(int fd, int on)
{
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof(on));
}

/* Server half of stream and rr, after the header: the client's
 * configuration decides everything. */
static void serve_test(const pio *p, const perf_cfg *c)
{
    size_t bsz = c->size > 65536 ? c->size : 65536;
    uint8_t *buf = malloc(bsz);
    if (!buf)
        return;
    memset(buf, 0xA5, bsz);
    uint64_t cpu0 = perf_cpu_ns(), bytes = 0;
    uint8_t ok[4] = {0, 0, 0, 1};
    if (pio_full(p, ok, 4, true, false) < 0) {
        free(buf);
        return;
    }
    uint32_t sink = 0;
    int fl = c->busy ? MSG_DONTWAIT : 0;
    if (c->op == OP_RR) {
        while (pio_full(p, buf, c->size, false, c->busy) == 0) {
            bytes += c->size;
            crc_pass(p, c, buf, c->size, &sink);
            crc_pass(p, c, buf, c->size, &sink);
            if (pio_full(p, buf, c->size, true, c->busy) < 0)
                break;
        }
    } else {
        /* Whatever a call returns, into one buffer (as the send op reads). */
        for (;;) {
            ssize_t r = pio_recv(p, buf, bsz, fl);
            if (r > 0) {
                bytes += (uint64_t)r;
                crc_pass(p, c, buf, (size_t)r, &sink);
                continue;
            }
            if (r < 0 && (errno == EAGAIN || errno == EINTR))
                continue;
            break;
        }
    }
    uint8_t st[16];
    buf[0] = (uint8_t)sink;
    perf_put64(st, perf_cpu_ns() - cpu0);
    perf_put64(st + 8, bytes);
    pio_full(p, st, 16, true, false);
    free(buf);
}

/* Client half: header, the test, the server's statistics. */
static int client_test(const pio *p, const perf_cfg *c, perf_res *r, const char *xport)
{
    uint8_t hdr[PERF_HDR_LEN], ok[4];
    perf_hdr_encode(c, hdr);
    if (pio_full(p, hdr, sizeof(hdr), true, false) < 0 || pio_full(p, ok, 4, false, false) < 0) {
        snprintf(r->err, sizeof(r->err), "%s: test setup: %s", xport, errstr());
        return -1;
    }
    size_t blen = c->size > 64 ? c->size : 64;
    uint8_t *buf = malloc(blen);
    size_t nsamp = 0, capsamp = c->op == OP_RR ? 1u << 20 : 0;
    double *samp = capsamp ? malloc(capsamp * sizeof(double)) : NULL;
    int ret = -1;
    if (!buf || (capsamp && !samp)) {
        snprintf(r->err, sizeof(r->err), "out of memory");
        goto out;
    }
    memset(buf, 0x5A, blen);
    uint32_t sink = 0;
    uint64_t cpu0 = perf_cpu_ns(), t0 = perf_now_ns();
    uint64_t tend = t0 + (uint64_t)(c->duration * 1e9), done = 0;
    if (c->op == OP_RR) {
        for (;;) {
            uint64_t s0 = perf_now_ns();
            crc_pass(p, c, buf, c->size, &sink);
            if (pio_full(p, buf, c->size, true, c->busy) < 0 ||
                pio_full(p, buf, c->size, false, c->busy) < 0) {
                snprintf(r->err, sizeof(r->err), "%s rr: %s", xport, errstr());
                goto out;
            }
            crc_pass(p, c, buf, c->size, &sink);
            uint64_t s1 = perf_now_ns();
            if (nsamp < capsamp)
                samp[nsamp++] = (double)(s1 - s0) / 2000.0;
            done++;
            if (c->iters ? done >= c->iters : s1 >= tend)
                break;
        }
    } else {
        for (;;) {
            crc_pass(p, c, buf, c->size, &sink);
            if (pio_full(p, buf, c->size, true, c->busy) < 0) {
                snprintf(r->err, sizeof(r->err), "%s stream: %s", xport, errstr());
                goto out;
            }
            done++;
            if (c->iters ? done >= c->iters : perf_now_ns() >= tend)
                break;
        }
    }
    /* The end of our direction ends the server's loop; its statistics
     * follow everything it received, so the clock stops there. */
    uint8_t st[16];
    if (pio_shutdown_wr(p) < 0 || pio_full(p, st, 16, false, false) < 0) {
        snprintf(r->err, sizeof(r->err), "%s: no statistics from the server: %s", xport, errstr());
        goto out;
    }
    uint64_t t1 = perf_now_ns();
    r->cpu_client_ns = (double)(perf_cpu_ns() - cpu0);
    r->cpu_server_ns = (double)perf_get64(st);
    r->secs = (double)(t1 - t0) / 1e9;
    r->msgs = done;
    uint64_t srv_bytes = perf_get64(st + 8);
    if (srv_bytes != done * c->size) {
        snprintf(r->err, sizeof(r->err), "%s: the server received %llu octets, not %llu", xport,
                 (unsigned long long)srv_bytes, (unsigned long long)(done * c->size));
        goto out;
    }
    /* Payload octets as the receiver counted them (rr: both directions). */
    r->bytes = srv_bytes * (c->op == OP_RR ? 2u : 1u);
    if (c->op == OP_RR)
        perf_lat_stats(samp, nsamp, r);
    /* The server closes after its statistics: read to the end so that our
     * close is not one with unread data. */
    pio_drain(p);
    buf[0] = (uint8_t)sink;
    ret = 0;
out:
    free(samp);
    free(buf);
    return ret;
}

/* ---- idle connections ---------------------------------------------------- */

/* Server side of --idle-mem after the header on the control stream p:
 * accept(n) takes one more connection (0), or fails (-1, nothing more will
 * come); the resident-set growth over all of them goes back to the client,
 * and they stay open until the control stream ends. */
typedef int (*accept_fn)(void *ctx, int timeout_ms);

static void serve_idle(const pio *p, const perf_cfg *c, uint32_t port, accept_fn acc, void *ctx)
{
    uint8_t ok[8] = {0, 0, 0, 1};
    perf_put32(ok + 4, port);
    if (pio_full(p, ok, 8, true, false) < 0)
        return;
    int64_t rss0 = rss_bytes();
    uint32_t got = 0;
    int tmo = c->timeout_ms > 0 ? c->timeout_ms : 10000;
    while (got < c->idle_conns && acc(ctx, tmo) == 0)
        got++;
    int64_t rss1 = rss_bytes();
    uint8_t st[16];
    perf_put64(st, (uint64_t)(rss1 - rss0));
    perf_put32(st + 8, got);
    perf_put32(st + 12, 0);
    if (pio_full(p, st, 16, true, false) < 0)
        return;
    /* Hold them until the client is done measuring. */
    uint8_t b[16];
    while (pio_recv(p, b, sizeof(b), 0) > 0)
        ;
}

/* Client side: the control stream p is connected; open(ctx, i, port) opens
 * idle connection i to the port the server named (0: the control stream's
 * own), or fails (-1, m->err set). */
typedef int (*open_fn)(void *ctx, uint32_t i, uint32_t port, perf_mem *m);

static int client_idle(const pio *p, const perf_cfg *c, perf_mem *m, open_fn open_one, void *ctx,
                       const char *xport)
{
    uint8_t hdr[PERF_HDR_LEN], ok[8];
    perf_hdr_encode(c, hdr);
    if (pio_full(p, hdr, sizeof(hdr), true, false) < 0 || pio_full(p, ok, 8, false, false) < 0) {
        snprintf(m->err, sizeof(m->err), "%s: idle test setup: %s", xport, errstr());
        return -1;
    }
    uint32_t port = perf_get32(ok + 4);
    /* Sockets of earlier tests free their kernel memory after an RCU grace
     * period or so: let that settle before and after. */
    usleep(200000);
    int64_t rss0 = rss_bytes(), k0 = kernel_bytes();
    uint64_t t0 = perf_now_ns();
    for (uint32_t i = 0; i < c->idle_conns; i++)
        if (open_one(ctx, i, port, m) < 0)
            return -1;
    m->setup_secs = (double)(perf_now_ns() - t0) / 1e9;
    uint8_t st[16];
    if (pio_full(p, st, 16, false, false) < 0) {
        snprintf(m->err, sizeof(m->err), "%s: no figures from the server: %s", xport, errstr());
        return -1;
    }
    usleep(200000);
    int64_t rss1 = rss_bytes(), k1 = kernel_bytes();
    uint32_t got = perf_get32(st + 8);
    if (got != c->idle_conns) {
        snprintf(m->err, sizeof(m->err), "%s: the server accepted %u of %u connections", xport, got,
                 c->idle_conns);
        return -1;
    }
    double n = (double)c->idle_conns;
    m->conns = c->idle_conns;
    m->client_rss = (double)(rss1 - rss0) / n;
    m->server_rss = (double)(int64_t)perf_get64(st) / n;
    m->kernel = (double)(k1 - k0) / n;
    return 0;
}

/* ---- TCP ------------------------------------------------------------------- */

typedef struct tcp_idle_srv {
    int lfd;
    int *fds;
    uint32_t n;
} tcp_idle_srv;

static int tcp_idle_accept(void *ctx, int timeout_ms)
{
    tcp_idle_srv *t = ctx;
    struct pollfd pf = {.fd = t->lfd, .events = POLLIN};
    if (poll(&pf, 1, timeout_ms) <= 0)
        return -1;
    int fd = accept4(t->lfd, NULL, NULL, SOCK_CLOEXEC);
    if (fd < 0)
        return -1;
    t->fds[t->n++] = fd;
    return 0;
}

/* An idle test on the TCP server: a listener of its own on an ephemeral
 * port of the same address, so that the main accept loop (one process per
 * connection) takes none of them and this process holds them all. */
static void tcp_serve_idle(int fd, const perf_cfg *c)
{
    struct sockaddr_storage ss;
    socklen_t sl = sizeof(ss);
    tcp_idle_srv t = {.lfd = -1};
    pio p = {.fd = fd};
    if (getsockname(fd, (struct sockaddr *)&ss, &sl) < 0)
        return;
    if (ss.ss_family == AF_INET)
        ((struct sockaddr_in *)&ss)->sin_port = 0;
    else
        ((struct sockaddr_in6 *)&ss)->sin6_port = 0;
    t.lfd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    t.fds = calloc(c->idle_conns + 1u, sizeof(int));
    if (t.lfd < 0 || !t.fds || bind(t.lfd, (struct sockaddr *)&ss, sl) < 0 ||
        listen(t.lfd, 4096) < 0 || getsockname(t.lfd, (struct sockaddr *)&ss, &sl) < 0)
        goto out;
    uint16_t port = ntohs(ss.ss_family == AF_INET ? ((struct sockaddr_in *)&ss)->sin_port
                                                  : ((struct sockaddr_in6 *)&ss)->sin6_port);
    serve_idle(&p, c, port, tcp_idle_accept, &t);
out:
    for (uint32_t i = 0; i < t.n; i++)
        close(t.fds[i]);
    free(t.fds);
    if (t.lfd >= 0)
        close(t.lfd);
}

void perf_tcp_serve_stream(int fd, const perf_cfg *c)
{
    pio p = {.fd = fd};
    if (c->op == OP_IDLE) {
        tcp_serve_idle(fd, c);
        return;
    }
    set_nodelay_tcp(fd, c->nodelay > 0);
    serve_test(&p, c);
}

static int tcp_connect(const struct sockaddr_storage *ss, unsigned sl, const perf_cfg *c,
                       int nodelay)
{
    int fd = socket(ss->ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    set_nodelay_tcp(fd, nodelay);
    if (c->cc)
        setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, c->cc, (socklen_t)strlen(c->cc));
    if (connect(fd, (const struct sockaddr *)ss, sl) < 0) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    return fd;
}

int perf_tcp_stream_client(const char *host, int port, const perf_cfg *c, perf_res *r)
{
    memset(r, 0, sizeof(*r));
    struct sockaddr_storage ss;
    unsigned sl;
    if (perf_resolve(host, port, &ss, &sl) < 0) {
        snprintf(r->err, sizeof(r->err), "cannot resolve %s", host);
        return -1;
    }
    int fd = tcp_connect(&ss, sl, c, c->nodelay > 0);
    if (fd < 0) {
        snprintf(r->err, sizeof(r->err), "tcp connect to %s:%d: %s", host, port, strerror(errno));
        return -1;
    }
    pio p = {.fd = fd};
    int ret = client_test(&p, c, r, "tcp");
    close(fd);
    return ret;
}

typedef struct tcp_idle_cli {
    struct sockaddr_storage ss;
    unsigned sl;
    const perf_cfg *c;
    int *fds;
    uint32_t n;
} tcp_idle_cli;

static void set_port(struct sockaddr_storage *ss, uint32_t port)
{
    if (ss->ss_family == AF_INET)
        ((struct sockaddr_in *)ss)->sin_port = htons((uint16_t)port);
    else
        ((struct sockaddr_in6 *)ss)->sin6_port = htons((uint16_t)port);
}

static int tcp_idle_open(void *ctx, uint32_t i, uint32_t port, perf_mem *m)
{
    tcp_idle_cli *t = ctx;
    set_port(&t->ss, port);
    int fd = tcp_connect(&t->ss, t->sl, t->c, 1);
    if (fd < 0) {
        snprintf(m->err, sizeof(m->err), "tcp: idle connection %u: %s", i, strerror(errno));
        return -1;
    }
    t->fds[t->n++] = fd;
    return 0;
}

static int tcp_idle_mem(const char *host, int port, const perf_cfg *c, perf_mem *m)
{
    tcp_idle_cli t = {.c = c};
    if (perf_resolve(host, port, &t.ss, &t.sl) < 0) {
        snprintf(m->err, sizeof(m->err), "cannot resolve %s", host);
        return -1;
    }
    int fd = tcp_connect(&t.ss, t.sl, c, 1);
    if (fd < 0) {
        snprintf(m->err, sizeof(m->err), "tcp connect to %s:%d: %s", host, port, strerror(errno));
        return -1;
    }
    pio p = {.fd = fd};
    int ret = -1;
    t.fds = calloc(c->idle_conns + 1u, sizeof(int));
    if (t.fds)
        ret = client_idle(&p, c, m, tcp_idle_open, &t, "tcp");
    else
        snprintf(m->err, sizeof(m->err), "out of memory");
    for (uint32_t i = 0; i < t.n; i++)
        close(t.fds[i]);
    free(t.fds);
    shutdown(fd, SHUT_WR);
    close(fd);
    return ret;
}

/* ---- SDP ------------------------------------------------------------------- */

static int sdp_set_int(uw_sdp_sock *s, int level, int name, int v)
{
    return uw_sdp_setsockopt(s, level, name, &v, sizeof(v));
}

/* Options every SDP socket of a test gets before connect or listen. */
static int sdp_pre_opts(uw_sdp_sock *s, const perf_cfg *c, bool crc)
{
    int e = sdp_set_int(s, SOL_UWARP, UW_SDP_CRC, crc ? 1 : 0);
    if (e == 0 && c->nodelay >= 0)
        e = sdp_set_int(s, IPPROTO_TCP, TCP_NODELAY, c->nodelay > 0);
    if (e == 0 && c->sdp_bufs)
        e = sdp_set_int(s, SOL_UWARP, UW_SDP_BUFS, c->sdp_bufs);
    if (e == 0 && c->sdp_rcvbuf)
        e = sdp_set_int(s, SOL_UWARP, UW_SDP_RCVBUF_SIZE, c->sdp_rcvbuf);
    if (e == 0 && c->cc)
        e = uw_sdp_setsockopt(s, IPPROTO_TCP, TCP_CONGESTION, c->cc, (socklen_t)strlen(c->cc));
    if (e == 0 && c->zcopy_min >= 0)
        e = sdp_set_int(s, SOL_UWARP, UW_SDP_ZCOPY_THRESHOLD, c->zcopy_min);
    return e;
}

static uw_sdp_stack *sdp_stack(const perf_cfg *c, int *err)
{
    uw_sdp_stack_attr attr;
    memset(&attr, 0, sizeof(attr));
    attr.setup_timeout_ms = c->timeout_ms;
    uw_sdp_stack *st = NULL;
    *err = uw_sdp_stack_create(&st, &attr);
    return *err < 0 ? NULL : st;
}

/* A blocking SDP connection to ss; 0 or a negative errno. */
static int sdp_connect(uw_sdp_stack *st, const struct sockaddr_storage *ss, unsigned sl,
                       const perf_cfg *c, uw_sdp_sock **out)
{
    uw_sdp_sock *s;
    int e = uw_sdp_socket(st, ss->ss_family, UW_SDP_CLOEXEC, &s);
    if (e < 0)
        return e;
    if ((e = sdp_pre_opts(s, c, c->crc)) < 0 ||
        (e = uw_sdp_connect(s, (const struct sockaddr *)ss, (socklen_t)sl)) < 0 ||
        (c->sdp_mode >= 0 && (e = sdp_set_int(s, SOL_UWARP, UW_SDP_MODE, c->sdp_mode)) < 0)) {
        uw_sdp_close(s);
        return e;
    }
    *out = s;
    return 0;
}

int perf_sdp_client(const char *host, int port, const perf_cfg *c, perf_res *r)
{
    memset(r, 0, sizeof(*r));
    struct sockaddr_storage ss;
    unsigned sl;
    if (perf_resolve(host, port, &ss, &sl) < 0) {
        snprintf(r->err, sizeof(r->err), "cannot resolve %s", host);
        return -1;
    }
    int e;
    uw_sdp_stack *st = sdp_stack(c, &e);
    if (!st) {
        snprintf(r->err, sizeof(r->err), "sdp stack: %s", uw_strerror(e));
        return -1;
    }
    uw_sdp_sock *s = NULL;
    int ret = -1;
    if ((e = sdp_connect(st, &ss, sl, c, &s)) < 0) {
        snprintf(r->err, sizeof(r->err), "sdp connect to %s:%d: %s", host, port, uw_strerror(e));
    } else {
        pio p = {.s = s, .fd = -1};
        ret = client_test(&p, c, r, "sdp");
        uw_sdp_info info;
        socklen_t il = sizeof(info);
        if (ret == 0 && uw_sdp_getsockopt(s, SOL_UWARP, UW_SDP_INFO, &info, &il) == 0) {
            r->sdp_msgs = info.data_msgs_sent;
            r->sdp_bcopy = info.bcopy_bytes;
            r->sdp_zwrite = info.rdma_write_bytes;
            r->sdp_zread = info.zcopy_bytes - info.rdma_write_bytes;
        }
        uw_sdp_close(s);
    }
    uw_sdp_stack_destroy(st);
    return ret;
}

typedef struct sdp_idle_cli {
    uw_sdp_stack *st;
    struct sockaddr_storage ss;
    unsigned sl;
    const perf_cfg *c;
    uw_sdp_sock **socks;
    uint32_t n;
} sdp_idle_cli;

static int sdp_idle_open(void *ctx, uint32_t i, uint32_t port, perf_mem *m)
{
    sdp_idle_cli *t = ctx;
    if (port)
        set_port(&t->ss, port);
    int e = sdp_connect(t->st, &t->ss, t->sl, t->c, &t->socks[t->n]);
    if (e < 0) {
        snprintf(m->err, sizeof(m->err), "sdp: idle connection %u: %s", i, uw_strerror(e));
        return -1;
    }
    t->n++;
    return 0;
}

static int sdp_idle_mem(const char *host, int port, const perf_cfg *c, perf_mem *m)
{
    sdp_idle_cli t = {.c = c};
    if (perf_resolve(host, port, &t.ss, &t.sl) < 0) {
        snprintf(m->err, sizeof(m->err), "cannot resolve %s", host);
        return -1;
    }
    int e;
    if (!(t.st = sdp_stack(c, &e))) {
        snprintf(m->err, sizeof(m->err), "sdp stack: %s", uw_strerror(e));
        return -1;
    }
    uw_sdp_sock *s = NULL;
    int ret = -1;
    t.socks = calloc(c->idle_conns + 1u, sizeof(*t.socks));
    if (!t.socks) {
        snprintf(m->err, sizeof(m->err), "out of memory");
    } else if ((e = sdp_connect(t.st, &t.ss, t.sl, c, &s)) < 0) {
        snprintf(m->err, sizeof(m->err), "sdp connect to %s:%d: %s", host, port, uw_strerror(e));
    } else {
        pio p = {.s = s, .fd = -1};
        ret = client_idle(&p, c, m, sdp_idle_open, &t, "sdp");
        for (uint32_t i = 0; i < t.n; i++)
            uw_sdp_close(t.socks[i]);
        uw_sdp_shutdown(s, SHUT_WR);
        pio_drain(&p);
        uw_sdp_close(s);
    }
    free(t.socks);
    uw_sdp_stack_destroy(t.st);
    return ret;
}

int perf_idle_mem(const char *host, int port, bool sdp, const perf_cfg *c, perf_mem *m)
{
    memset(m, 0, sizeof(*m));
    return sdp ? sdp_idle_mem(host, port, c, m) : tcp_idle_mem(host, port, c, m);
}

/* The SDP server: a listener on port, one test after another. */
typedef struct sdp_idle_srv {
    uw_sdp_sock *lis;
    uw_sdp_sock **socks;
    uint32_t n;
} sdp_idle_srv;

/* Next connection from the (nonblocking) listener, as a blocking socket. */
static int sdp_accept_wait(uw_sdp_sock *lis, uw_sdp_sock **out, int timeout_ms)
{
    for (;;) {
        int e = uw_sdp_accept(lis, out, NULL, NULL, UW_SDP_CLOEXEC);
        if (e >= 0)
            return 0;
        if (e != -EAGAIN && e != -EINTR && e != -ECONNABORTED)
            return e;
        struct pollfd pf = {.fd = uw_sdp_fd(lis), .events = POLLIN};
        int n = poll(&pf, 1, timeout_ms);
        if (n == 0)
            return -ETIMEDOUT;
        if (n < 0 && errno != EINTR)
            return -errno;
    }
}

static int sdp_idle_accept(void *ctx, int timeout_ms)
{
    sdp_idle_srv *t = ctx;
    return sdp_accept_wait(t->lis, &t->socks[t->n], timeout_ms) < 0 ? -1 : (t->n++, 0);
}

static void sdp_serve(uw_sdp_sock *lis, uw_sdp_sock *s, const perf_cfg *base)
{
    pio p = {.s = s, .fd = -1};
    uint8_t hdr[PERF_HDR_LEN];
    perf_cfg c;
    /* A client that connects and says nothing must not stop the server. */
    struct timeval tv = {.tv_sec = base->timeout_ms / 1000,
                         .tv_usec = (base->timeout_ms % 1000) * 1000};
    uw_sdp_setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    if (pio_full(&p, hdr, sizeof(hdr), false, false) < 0 || perf_hdr_decode(hdr, &c) < 0 ||
        (c.op != OP_STREAM && c.op != OP_RR && c.op != OP_IDLE))
        return;
    tv = (struct timeval){0, 0};
    uw_sdp_setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    c.timeout_ms = base->timeout_ms;
    if (c.op == OP_IDLE) {
        sdp_idle_srv t = {.lis = lis};
        t.socks = calloc(c.idle_conns + 1u, sizeof(*t.socks));
        if (t.socks)
            serve_idle(&p, &c, 0, sdp_idle_accept, &t);
        for (uint32_t i = 0; i < t.n; i++)
            uw_sdp_close(t.socks[i]);
        free(t.socks);
        return;
    }
    sdp_set_int(s, IPPROTO_TCP, TCP_NODELAY, c.nodelay > 0);
    serve_test(&p, &c);
}

int perf_sdp_server(const char *addr, int port, const perf_cfg *base, int ready_fd)
{
    struct sockaddr_storage ss;
    unsigned sl;
    if (perf_resolve(addr, port, &ss, &sl) < 0) {
        fprintf(stderr, "uwarp-perf: cannot resolve %s\n", addr);
        perf_ready(ready_fd, false);
        return -1;
    }
    int e;
    uw_sdp_stack *st = sdp_stack(base, &e);
    if (!st) {
        fprintf(stderr, "uwarp-perf: sdp stack: %s\n", uw_strerror(e));
        perf_ready(ready_fd, false);
        return -1;
    }
    uw_sdp_sock *lis;
    perf_cfg lc = *base;
    lc.nodelay = -1;
    /* CRC: the listener avoids it, so the client's wish decides (MPA uses
     * CRC when either side asks for it). */
    if ((e = uw_sdp_socket(st, ss.ss_family, UW_SDP_NONBLOCK | UW_SDP_CLOEXEC, &lis)) < 0 ||
        (e = sdp_set_int(lis, SOL_SOCKET, SO_REUSEADDR, 1)) < 0 ||
        (e = sdp_pre_opts(lis, &lc, false)) < 0 ||
        (e = uw_sdp_bind(lis, (struct sockaddr *)&ss, (socklen_t)sl)) < 0 ||
        (e = uw_sdp_listen(lis, 1024)) < 0) {
        fprintf(stderr, "uwarp-perf: sdp listen on port %d: %s\n", port, uw_strerror(e));
        uw_sdp_stack_destroy(st);
        perf_ready(ready_fd, false);
        return -1;
    }
    perf_ready(ready_fd, true);
    for (;;) {
        uw_sdp_sock *s;
        e = sdp_accept_wait(lis, &s, -1);
        if (e < 0) {
            if (e == -EMFILE || e == -ENFILE || e == -ENOMEM)
                usleep(100000);
            continue;
        }
        sdp_serve(lis, s, base);
        uw_sdp_close(s);
    }
}
