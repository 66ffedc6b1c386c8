/* uwarp-perf over plain TCP: the same patterns with the same sizes, wait
 * mode and process layout, so that uwarp's figures can be divided by these.
 *   write/send: the client streams size-octet messages, then shuts down;
 *   read: the client asks for size octets at a time, depth requests ahead;
 *   lat: size-octet ping-pong;
 *   stream, rr, idle: perf_sdp.c's loops, shared with the SDP transport.
 * The server answers the end of a test with its CPU time and byte count. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "perf.h"
#include "uwarp/crc32c.h"

static void sock_opts(int fd, const char *cc)
{
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    if (cc)
        setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, cc, (socklen_t)strlen(cc));
}

/* --tcp-crc: the CRC32c pass an iWARP peer must make over the same octets,
 * so that TCP plus that pass shows what the CRC alone costs on this CPU.
 * The result is kept so the pass cannot be optimised away. */
static void crc_pass(const perf_cfg *c, const void *p, size_t n, uint32_t *sink)
{
    if (c->tcp_crc)
        *sink ^= uw_crc32c(p, n);
}

/* Blocking mode uses blocking calls (one system call per message, the best
 * a TCP application does); busy mode spins on nonblocking ones. */
static int full_io(int fd, void *buf, size_t n, bool wr, bool busy)
{
    uint8_t *p = buf;
    int fl = busy ? MSG_DONTWAIT : 0;
    while (n) {
        ssize_t r = wr ? send(fd, p, n, MSG_NOSIGNAL | fl) : recv(fd, p, n, fl);
        if (r > 0) {
            p += r;
            n -= (size_t)r;
            continue;
        }
        if (r == 0)
            return -1;
        if (errno != EAGAIN && errno != EINTR)
            return -1;
    }
    return 0;
}

/* count messages of n octets, all from buf, written with sendmsg() calls
 * of count iovecs (fewer after a partial write). */
static int full_iov(int fd, const uint8_t *buf, size_t n, uint32_t count, bool busy)
{
    if (count <= 1)
        return count ? full_io(fd, (void *)buf, n, true, busy) : 0;
    struct iovec iov[1024];
    uint32_t first = 0;
    size_t off = 0; /* octets of message first already written */
    int fl = MSG_NOSIGNAL | (busy ? MSG_DONTWAIT : 0);
    while (first < count) {
        size_t k = 0;
        for (uint32_t j = first; j < count && k < 1024; j++, k++) {
            iov[k].iov_base = (void *)(buf + (j == first ? off : 0));
            iov[k].iov_len = n - (j == first ? off : 0);
        }
        struct msghdr mh = {.msg_iov = iov, .msg_iovlen = k};
        ssize_t r = sendmsg(fd, &mh, fl);
        if (r < 0) {
            if (errno != EAGAIN && errno != EINTR)
                return -1;
            continue;
        }
        off += (size_t)r;
        first += (uint32_t)(off / n);
        off %= n;
    }
    return 0;
}

static int base_timeout_ms = 10000;

/* One test on an accepted connection. */
static void serve(int fd)
{
    uint8_t hdr[PERF_HDR_LEN];
    perf_cfg c;
    if (full_io(fd, hdr, sizeof(hdr), false, false) < 0 || perf_hdr_decode(hdr, &c) < 0)
        return;
    /* stream, rr and idle run the loop the SDP transport runs (perf_sdp.c). */
    if (c.op == OP_STREAM || c.op == OP_RR || c.op == OP_IDLE) {
        c.timeout_ms = base_timeout_ms;
        perf_tcp_serve_stream(fd, &c);
        return;
    }
    size_t bsz = c.size > 65536 ? c.size : 65536;
    uint8_t *buf = malloc(bsz);
    if (!buf)
        return;
    memset(buf, 0xA5, bsz);
    uint64_t cpu0 = perf_cpu_ns(), bytes = 0;
    uint8_t ok[4] = {0, 0, 0, 1};
    full_io(fd, ok, 4, true, false);
    uint32_t sink = 0;
    if (c.lat) {
        while (full_io(fd, buf, c.size, false, c.busy) == 0) {
            bytes += c.size;
            crc_pass(&c, buf, c.size, &sink);
            crc_pass(&c, buf, c.size, &sink);
            if (full_io(fd, buf, c.size, true, c.busy) < 0)
                break;
        }
    } else if (c.op == OP_READ) {
        uint8_t req[4];
        while (full_io(fd, req, 4, false, c.busy) == 0 && perf_get32(req) != 0) {
            crc_pass(&c, buf, c.size, &sink);
            if (full_io(fd, buf, c.size, true, c.busy) < 0)
                break;
            bytes += c.size;
        }
    } else {
        for (;;) {
            ssize_t r = recv(fd, buf, bsz, c.busy ? MSG_DONTWAIT : 0);
            /* (blocking unless busy-polling) */
            if (r > 0) {
                bytes += (uint64_t)r;
                crc_pass(&c, buf, (size_t)r, &sink);
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
    full_io(fd, st, 16, true, false);
    free(buf);
}

int perf_tcp_server(const char *addr, int port, const perf_cfg *base, int ready_fd)
{
    struct sockaddr_storage ss;
    unsigned sl;
    if (perf_resolve(addr, port, &ss, &sl) < 0) {
        fprintf(stderr, "uwarp-perf: cannot resolve %s\n", addr);
        perf_ready(ready_fd, false);
        return -1;
    }
    base_timeout_ms = base->timeout_ms;
    int lfd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(lfd, (struct sockaddr *)&ss, sl) < 0 || listen(lfd, 1024) < 0) {
        fprintf(stderr, "uwarp-perf: tcp listen on port %d: %s\n", port, strerror(errno));
        perf_ready(ready_fd, false);
        return -1;
    }
    perf_ready(ready_fd, true);
    for (;;) {
        int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0)
            continue;
        sock_opts(fd, base->cc);
        /* One child per connection keeps the baseline's server a single
         * thread per stream, as uwarp's is. */
        pid_t pid = fork();
        if (pid == 0) {
            prctl(PR_SET_PDEATHSIG, SIGTERM);
            close(lfd);
            serve(fd);
            _exit(0);
        }
        close(fd);
        while (waitpid(-1, NULL, WNOHANG) > 0)
            ;
    }
}

int perf_tcp_client(const char *host, int port, const perf_cfg *c, perf_res *r)
{
    if (c->op == OP_STREAM || c->op == OP_RR)
        return perf_tcp_stream_client(host, port, c, r);
    memset(r, 0, sizeof(*r));
    struct sockaddr_storage ss;
    unsigned sl;
    if (perf_resolve(host, port, &ss, &sl) < 0) {
        snprintf(r->err, sizeof(r->err), "cannot resolve %s", host);
        return -1;
    }
    unsigned nq = c->qps ? c->qps : 1;
    int *fds = calloc(nq, sizeof(int));
    uint8_t *buf = malloc(c->size > 64 ? c->size : 64);
    memset(buf, 0x5A, c->size > 64 ? c->size : 64);
    uint8_t hdr[PERF_HDR_LEN];
    perf_hdr_encode(c, hdr);
    int ret = -1;
    for (unsigned i = 0; i < nq; i++) {
        fds[i] = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
        sock_opts(fds[i], c->cc);
        uint8_t ok[4];
        if (connect(fds[i], (struct sockaddr *)&ss, sl) < 0 ||
            full_io(fds[i], hdr, sizeof(hdr), true, false) < 0 ||
            full_io(fds[i], ok, 4, false, false) < 0) {
            snprintf(r->err, sizeof(r->err), "tcp connect to %s:%d: %s", host, port,
                     strerror(errno));
            goto out;
        }
    }
    uint32_t sink = 0;
    size_t nsamp = 0, capsamp = c->lat ? 1u << 20 : 0;
    double *samp = capsamp ? malloc(capsamp * sizeof(double)) : NULL;
    uint64_t cpu0 = perf_cpu_ns(), t0 = perf_now_ns();
    uint64_t tend = t0 + (uint64_t)(c->duration * 1e9), done = 0;
    if (c->lat) {
        for (;;) {
            uint64_t s0 = perf_now_ns();
            crc_pass(c, buf, c->size, &sink);
            if (full_io(fds[0], buf, c->size, true, c->busy) < 0 ||
                full_io(fds[0], buf, c->size, false, c->busy) < 0) {
                snprintf(r->err, sizeof(r->err), "tcp ping-pong failed");
                goto out_s;
            }
            crc_pass(c, buf, c->size, &sink);
            uint64_t s1 = perf_now_ns();
            if (nsamp < capsamp)
                samp[nsamp++] = (double)(s1 - s0) / 2000.0;
            done++;
            if (c->iters ? done >= c->iters : s1 >= tend)
                break;
        }
        shutdown(fds[0], SHUT_WR);
    } else if (c->op == OP_READ) {
        uint8_t req[4];
        perf_put32(req, 1);
        uint64_t asked = 0;
        for (unsigned i = 0; i < nq; i++)
            for (uint32_t d = 0; d < c->depth; d++, asked++)
                full_io(fds[i], req, 4, true, c->busy);
        bool stop = false;
        while (done < asked) {
            for (unsigned i = 0; i < nq && done < asked; i++) {
                if (full_io(fds[i], buf, c->size, false, c->busy) < 0) {
                    snprintf(r->err, sizeof(r->err), "tcp read failed");
                    goto out_s;
                }
                crc_pass(c, buf, c->size, &sink);
                done++;
                if (!stop && (c->iters ? asked >= c->iters : perf_now_ns() >= tend))
                    stop = true;
                if (!stop) {
                    full_io(fds[i], req, 4, true, c->busy);
                    asked++;
                }
            }
        }
        perf_put32(req, 0);
        for (unsigned i = 0; i < nq; i++)
            full_io(fds[i], req, 4, true, c->busy);
    } else {
        /* --post-list: as many messages per system call as uwarp may hand
         * over in one uw_post_send() call (depth when it is 0). */
        uint32_t batch = c->post_list ? c->post_list : c->depth;
        if (batch > c->depth)
            batch = c->depth;
        for (bool stop = false; !stop;) {
            for (unsigned i = 0; i < nq; i++) {
                uint32_t b = batch;
                if (c->iters && b > c->iters - done)
                    b = (uint32_t)(c->iters - done);
                for (uint32_t j = 0; j < b; j++)
                    crc_pass(c, buf, c->size, &sink);
                if (full_iov(fds[i], buf, c->size, b, c->busy) < 0) {
                    snprintf(r->err, sizeof(r->err), "tcp write failed");
                    goto out_s;
                }
                done += b;
            }
            stop = c->iters ? done >= c->iters : perf_now_ns() >= tend;
        }
        for (unsigned i = 0; i < nq; i++)
            shutdown(fds[i], SHUT_WR);
    }
    buf[0] = (uint8_t)sink;
    uint64_t srv_max = 0;
    for (unsigned i = 0; i < nq; i++) {
        uint8_t st[16];
        if (full_io(fds[i], st, 16, false, false) < 0) {
            snprintf(r->err, sizeof(r->err), "no statistics from the tcp server");
            goto out_s;
        }
        if (perf_get64(st) > srv_max)
            srv_max = perf_get64(st);
    }
    /* Streams end when the server has read everything: the stats mark it. */
    uint64_t t1 = perf_now_ns();
    r->cpu_client_ns = (double)(perf_cpu_ns() - cpu0);
    r->cpu_server_ns = (double)srv_max;
    r->secs = (double)(t1 - t0) / 1e9;
    r->msgs = done;
    r->bytes = done * c->size * (c->lat ? 2u : 1u);
    if (c->lat)
        perf_lat_stats(samp, nsamp, r);
    ret = 0;
out_s:
    free(samp);
out:
    for (unsigned i = 0; i < nq; i++)
        if (fds[i] > 0)
            close(fds[i]);
    free(fds);
    free(buf);
    return ret;
}
