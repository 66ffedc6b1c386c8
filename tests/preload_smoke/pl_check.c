/* Smoke checks of libuwarp-preload.so from inside one preloaded process: a
 * listener and its clients in the same program, so both ends go through the
 * preload (and, with uwarp-pmd running, over SDP). Each check prints
 * "ok NAME" or "FAIL NAME: why"; the exit status is the number of failures.
 *
 *   pl_check sdp|tcp [CHECK...]
 *
 * "sdp": every connection must report transport sdp (SOL_UWARP UW_SDP_INFO);
 * "tcp": the same calls on plain kernel sockets (the library absent or
 * UWARP_PRELOAD_TCP_ONLY=1), where SOL_UWARP is unknown. Every wait is
 * bounded (alarm()). */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "uwarp/sdp.h"

static bool want_sdp;
static int fails;
static char why[512];

#define CHECK(cond, ...)                             \
    do {                                             \
        if (!(cond)) {                               \
            snprintf(why, sizeof(why), __VA_ARGS__); \
            return false;                            \
        }                                            \
    } while (0)

/* A listener on 127.0.0.1 (a free port). */
static int make_listener(int *port)
{
    int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (bind(l, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(l, 16) < 0)
        return -1;
    socklen_t al = sizeof(a);
    getsockname(l, (struct sockaddr *)&a, &al);
    *port = ntohs(a.sin_port);
    return l;
}

static int connect_to(int port, bool nonblock, int *rc)
{
    int s = socket(AF_INET, SOCK_STREAM | (nonblock ? SOCK_NONBLOCK : 0), 0);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    *rc = connect(s, (struct sockaddr *)&a, sizeof(a));
    if (*rc < 0)
        *rc = -errno;
    return s;
}

/* Transport of fd: 1 sdp, 2 tcp, 0 a kernel socket (SOL_UWARP unknown). */
static int transport(int fd)
{
    uw_sdp_info in;
    socklen_t l = sizeof(in);
    if (getsockopt(fd, SOL_UWARP, UW_SDP_INFO, &in, &l) < 0)
        return 0;
    return in.transport;
}

static bool transport_ok(int fd, const char *who)
{
    int t = transport(fd);
    if (want_sdp && t != 1) {
        snprintf(why, sizeof(why), "%s: transport %d, want sdp", who, t);
        return false;
    }
    if (!want_sdp && t != 0) {
        snprintf(why, sizeof(why), "%s: transport %d, want a kernel socket", who, t);
        return false;
    }
    return true;
}

/* A connected pair (client c, server side s), blocking. */
static bool pair(int *c, int *s)
{
    int port, rc;
    int l = make_listener(&port);
    CHECK(l >= 0, "listener: %s", strerror(errno));
    *c = connect_to(port, false, &rc);
    CHECK(rc == 0, "connect: %s", strerror(-rc));
    *s = accept4(l, NULL, NULL, SOCK_CLOEXEC);
    CHECK(*s >= 0, "accept: %s", strerror(errno));
    close(l);
    if (!transport_ok(*c, "client") || !transport_ok(*s, "server"))
        return false;
    return true;
}

static bool write_all(int fd, const void *b, size_t n)
{
    const char *p = b;
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return false;
        p += w;
        n -= (size_t)w;
    }
    return true;
}

static bool read_all(int fd, void *b, size_t n)
{
    char *p = b;
    while (n) {
        ssize_t r = read(fd, p, n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return false;
        p += r;
        n -= (size_t)r;
    }
    return true;
}

/* ---- Checks -------------------------------------------------------------------- */

struct echo_arg {
    int fd;
    size_t n;
};

static void *echo_thread(void *arg)
{
    struct echo_arg *e = arg;
    char buf[65536];
    for (;;) {
        ssize_t r = read(e->fd, buf, sizeof(buf));
        if (r <= 0)
            break;
        if (!write_all(e->fd, buf, (size_t)r))
            break;
        e->n += (size_t)r;
    }
    shutdown(e->fd, SHUT_WR);
    return NULL;
}

struct writer_arg {
    int fd;
    const char *buf;
    size_t n;
    bool ok;
};

static void *writer_thread(void *arg)
{
    struct writer_arg *w = arg;
    w->ok = write_all(w->fd, w->buf, w->n);
    shutdown(w->fd, SHUT_WR);
    return NULL;
}

/* 4 MiB through an echo thread, writer and reader in parallel; then the
 * echo's EOF. */
static bool check_echo(void)
{
    int c, s;
    if (!pair(&c, &s))
        return false;
    struct echo_arg e = {.fd = s};
    pthread_t et, wt;
    pthread_create(&et, NULL, echo_thread, &e);
    size_t n = 4u << 20;
    char *out = malloc(n), *in = malloc(n);
    for (size_t i = 0; i < n; i++)
        out[i] = (char)(i * 131 + (i >> 11));
    struct writer_arg w = {.fd = c, .buf = out, .n = n};
    pthread_create(&wt, NULL, writer_thread, &w);
    bool got = read_all(c, in, n);
    char x;
    ssize_t eof = read(c, &x, 1);
    pthread_join(wt, NULL);
    pthread_join(et, NULL);
    bool same = got && memcmp(in, out, n) == 0;
    free(out);
    free(in);
    close(c);
    close(s);
    CHECK(w.ok, "writer failed");
    CHECK(got, "short read (echo saw %zu)", e.n);
    CHECK(same, "data differs");
    CHECK(eof == 0, "no EOF after the echo's shutdown: %zd", eof);
    return true;
}

/* Nonblocking connect: EINPROGRESS (or 0), POLLOUT, SO_ERROR 0; then epoll
 * level-triggered, edge-triggered, one-shot and an epoll fd inside another. */
static bool check_epoll(void)
{
    int port, rc;
    int l = make_listener(&port);
    CHECK(l >= 0, "listener");
    int c = connect_to(port, true, &rc);
    CHECK(rc == 0 || rc == -EINPROGRESS, "nonblocking connect: %s", strerror(-rc));
    struct pollfd p = {.fd = c, .events = POLLOUT};
    CHECK(poll(&p, 1, 10000) == 1 && (p.revents & POLLOUT), "no POLLOUT after connect");
    int err = -1;
    socklen_t el = sizeof(err);
    CHECK(getsockopt(c, SOL_SOCKET, SO_ERROR, &err, &el) == 0 && err == 0, "SO_ERROR %d", err);
    int s = accept(l, NULL, NULL);
    CHECK(s >= 0, "accept: %s", strerror(errno));
    if (!transport_ok(c, "client") || !transport_ok(s, "server"))
        return false;
    int fl = fcntl(s, F_GETFL);
    CHECK(fcntl(s, F_SETFL, fl | O_NONBLOCK) == 0, "F_SETFL");
    CHECK(fcntl(s, F_GETFL) & O_NONBLOCK, "O_NONBLOCK not shown by F_GETFL");
    char buf[4096];
    CHECK(read(s, buf, sizeof(buf)) < 0 && errno == EAGAIN, "read on empty: want EAGAIN");

    int ep = epoll_create1(EPOLL_CLOEXEC), outer = epoll_create1(EPOLL_CLOEXEC);
    struct epoll_event ev = {.events = EPOLLIN | EPOLLET, .data.fd = s}, got[4];
    CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, s, &ev) == 0, "epoll_ctl");
    struct epoll_event oev = {.events = EPOLLIN, .data.fd = ep};
    CHECK(epoll_ctl(outer, EPOLL_CTL_ADD, ep, &oev) == 0, "epoll_ctl outer");
    CHECK(epoll_wait(outer, got, 4, 0) == 0, "outer epoll ready with nothing sent");
    CHECK(write(c, "hello", 5) == 5, "write");
    CHECK(epoll_wait(outer, got, 4, 10000) == 1 && got[0].data.fd == ep, "nested epoll: no event");
    CHECK(epoll_wait(ep, got, 4, 10000) == 1 && got[0].data.fd == s, "ET: no event");
    CHECK(epoll_wait(ep, got, 4, 0) == 0, "ET: a second event without new data");
    size_t n = 0;
    for (;;) {
        ssize_t r = read(s, buf, sizeof(buf));
        if (r < 0) {
            CHECK(errno == EAGAIN, "ET drain: %s", strerror(errno));
            break;
        }
        n += (size_t)r;
    }
    CHECK(n == 5, "ET read %zu octets", n);
    CHECK(write(c, "again", 5) == 5, "write");
    CHECK(epoll_wait(ep, got, 4, 10000) == 1, "ET: no edge for new data");
    CHECK(read(s, buf, sizeof(buf)) == 5, "read");
    /* One-shot: one event, then none until re-armed. */
    ev.events = EPOLLIN | EPOLLONESHOT;
    CHECK(epoll_ctl(ep, EPOLL_CTL_MOD, s, &ev) == 0, "EPOLL_CTL_MOD");
    CHECK(write(c, "x", 1) == 1, "write");
    CHECK(epoll_wait(ep, got, 4, 10000) == 1, "ONESHOT: no event");
    CHECK(write(c, "y", 1) == 1, "write");
    usleep(20000);
    CHECK(epoll_wait(ep, got, 4, 50) == 0, "ONESHOT: a second event before re-arming");
    CHECK(epoll_ctl(ep, EPOLL_CTL_MOD, s, &ev) == 0, "re-arm");
    CHECK(epoll_wait(ep, got, 4, 10000) == 1, "ONESHOT: no event after re-arming");
    CHECK(read(s, buf, sizeof(buf)) == 2, "read 2");
    /* Level-triggered writability on the client. */
    struct epoll_event wev = {.events = EPOLLOUT, .data.fd = c};
    CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, c, &wev) == 0, "epoll_ctl c");
    CHECK(epoll_wait(ep, got, 4, 10000) == 1 && (got[0].events & EPOLLOUT), "LT: not writable");
    close(outer);
    close(ep);
    close(c);
    close(s);
    close(l);
    return true;
}

/* dup, dup2, dup3, F_DUPFD_CLOEXEC: several descriptors, one socket. */
static bool check_dup(void)
{
    int c, s;
    if (!pair(&c, &s))
        return false;
    int d = dup(c);
    CHECK(d >= 0, "dup");
    int d2 = fcntl(c, F_DUPFD_CLOEXEC, 100);
    CHECK(d2 >= 100 && (fcntl(d2, F_GETFD) & FD_CLOEXEC), "F_DUPFD_CLOEXEC");
    CHECK(close(c) == 0, "close");
    CHECK(write(d, "ab", 2) == 2, "write through the dup after closing the original: %s",
          strerror(errno));
    CHECK(close(d) == 0, "close dup");
    CHECK(write(d2, "cd", 2) == 2, "write through F_DUPFD: %s", strerror(errno));
    char buf[8];
    CHECK(read_all(s, buf, 4) && !memcmp(buf, "abcd", 4), "read back");
    /* dup2 onto a descriptor that is itself an SDP socket: its reference goes. */
    int c2, s2;
    if (!pair(&c2, &s2))
        return false;
    CHECK(dup2(d2, c2) == c2, "dup2");
    CHECK(write(c2, "ef", 2) == 2, "write via dup2 target");
    CHECK(read_all(s, buf, 2) && !memcmp(buf, "ef", 2), "data via dup2 target");
    CHECK(read(s2, buf, 1) == 0, "the socket dup2 replaced is not closed (no EOF)");
    CHECK(dup3(s2, d2, O_CLOEXEC) == d2, "dup3");
    close(d2); /* closes s2's second descriptor only */
    CHECK(write(c2, "gh", 2) == 2, "write after dup3's old socket went");
    CHECK(read_all(s, buf, 2) && !memcmp(buf, "gh", 2), "data after dup3");
    close(c2);
    CHECK(read(s, buf, 1) == 0, "no EOF once every descriptor is closed");
    close(s);
    close(s2);
    return true;
}

/* readv/writev with many iovecs, sendmsg/recvmsg, sendmmsg/recvmmsg, sendto
 * and recvfrom, MSG_PEEK, FIONREAD, options and addresses. */
static bool check_calls(void)
{
    int c, s;
    if (!pair(&c, &s))
        return false;
    char a[3] = "abc", b[5] = "defgh", d[1] = "i";
    struct iovec v[4] = {{a, 3}, {b, 0}, {b, 5}, {d, 1}};
    CHECK(writev(c, v, 4) == 9, "writev");
    char r1[2], r2[4], r3[16];
    struct iovec rv[3] = {{r1, 2}, {r2, 4}, {r3, 16}};
    size_t got = 0;
    while (got < 9) {
        int avail = 0;
        CHECK(ioctl(s, FIONREAD, &avail) == 0, "FIONREAD");
        if (avail >= 9 - (int)got)
            break;
        usleep(1000);
    }
    char pk[4];
    CHECK(recv(s, pk, 4, MSG_PEEK) == 4 && !memcmp(pk, "abcd", 4), "MSG_PEEK");
    CHECK(readv(s, rv, 3) == 9, "readv");
    CHECK(!memcmp(r1, "ab", 2) && !memcmp(r2, "cdef", 4) && !memcmp(r3, "ghi", 3), "readv data");
    struct msghdr mh = {.msg_iov = v, .msg_iovlen = 4};
    CHECK(sendmsg(c, &mh, MSG_NOSIGNAL) == 9, "sendmsg");
    struct sockaddr_in any = {.sin_family = AF_INET};
    CHECK(sendto(c, "0123456789012", 13, 0, (struct sockaddr *)&any, sizeof(any)) == 13,
          "sendto (address ignored on a connected socket): %s", strerror(errno));
    struct sockaddr_storage from;
    memset(r3, 0, sizeof(r3));
    struct msghdr rm = {
        .msg_name = &from, .msg_namelen = sizeof(from), .msg_iov = rv, .msg_iovlen = 3};
    CHECK(recvmsg(s, &rm, MSG_WAITALL) == 22, "recvmsg MSG_WAITALL");
    CHECK(!memcmp(r1, "ab", 2) && !memcmp(r2, "cdef", 4) && !memcmp(r3, "ghi0123456789012", 16),
          "recvmsg data");
    CHECK(rm.msg_namelen == 0, "recvmsg msg_namelen %u (TCP: 0)", (unsigned)rm.msg_namelen);
    struct mmsghdr mm[2];
    char m1[3] = "JKL", m2[2] = "MN";
    struct iovec mv1 = {m1, 3}, mv2 = {m2, 2};
    memset(mm, 0, sizeof(mm));
    mm[0].msg_hdr.msg_iov = &mv1;
    mm[0].msg_hdr.msg_iovlen = 1;
    mm[1].msg_hdr.msg_iov = &mv2;
    mm[1].msg_hdr.msg_iovlen = 1;
    CHECK(sendmmsg(c, mm, 2, 0) == 2 && mm[0].msg_len == 3 && mm[1].msg_len == 2, "sendmmsg");
    char rb[5];
    socklen_t fl = sizeof(from);
    CHECK(recvfrom(s, rb, 5, MSG_WAITALL, (struct sockaddr *)&from, &fl) == 5 &&
              !memcmp(rb, "JKLMN", 5),
          "recvfrom");
    /* Options and addresses as TCP shows them. */
    int v1 = 0;
    socklen_t l1 = sizeof(v1);
    CHECK(getsockopt(c, SOL_SOCKET, SO_TYPE, &v1, &l1) == 0 && v1 == SOCK_STREAM, "SO_TYPE");
    CHECK(getsockopt(c, SOL_SOCKET, SO_DOMAIN, &v1, &l1) == 0 && v1 == AF_INET, "SO_DOMAIN");
    CHECK(getsockopt(c, SOL_SOCKET, SO_PROTOCOL, &v1, &l1) == 0 && v1 == IPPROTO_TCP,
          "SO_PROTOCOL");
    CHECK(getsockopt(c, SOL_SOCKET, SO_ACCEPTCONN, &v1, &l1) == 0 && v1 == 0, "SO_ACCEPTCONN");
    int one = 1;
    CHECK(setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) == 0, "TCP_NODELAY");
    CHECK(getsockopt(c, IPPROTO_TCP, TCP_NODELAY, &v1, &l1) == 0 && v1, "TCP_NODELAY get");
    struct tcp_info ti;
    socklen_t tl = sizeof(ti);
    CHECK(getsockopt(c, IPPROTO_TCP, TCP_INFO, &ti, &tl) == 0 && ti.tcpi_state == TCP_ESTABLISHED,
          "TCP_INFO state %d", ti.tcpi_state);
    struct sockaddr_in pa, sa;
    socklen_t pal = sizeof(pa), sal = sizeof(sa);
    CHECK(getpeername(c, (struct sockaddr *)&pa, &pal) == 0, "getpeername");
    CHECK(getsockname(s, (struct sockaddr *)&sa, &sal) == 0, "getsockname");
    CHECK(pa.sin_port == sa.sin_port, "the client's peer port %u is not the server's port %u",
          ntohs(pa.sin_port), ntohs(sa.sin_port));
    struct stat st;
    CHECK(fstat(c, &st) == 0 && S_ISSOCK(st.st_mode), "fstat: not a socket");
    close(c);
    close(s);
    return true;
}

static volatile sig_atomic_t sigs;
static void on_sig(int sig)
{
    (void)sig;
    sigs++;
}

/* SIGPIPE on write after the peer is gone; none with MSG_NOSIGNAL. */
static bool check_sigpipe(void)
{
    int c, s;
    if (!pair(&c, &s))
        return false;
    struct sigaction sa = {.sa_handler = on_sig}, old;
    sigaction(SIGPIPE, &sa, &old);
    close(s);
    char buf[4096] = {0};
    ssize_t r = 0;
    int e = 0;
    for (int i = 0; i < 2000; i++) {
        r = send(c, buf, sizeof(buf), MSG_NOSIGNAL);
        if (r < 0) {
            e = errno;
            break;
        }
        usleep(1000);
    }
    CHECK(r < 0 && (e == EPIPE || e == ECONNRESET), "send after the peer closed: %zd %s", r,
          strerror(e));
    CHECK(sigs == 0, "SIGPIPE with MSG_NOSIGNAL");
    r = write(c, buf, 1);
    e = errno;
    sigaction(SIGPIPE, &old, NULL);
    CHECK(r < 0 && e == EPIPE, "write: %zd %s", r, strerror(e));
    CHECK(sigs == 1, "SIGPIPE count %d after write", (int)sigs);
    close(c);
    return true;
}

struct rd_arg {
    int fd;
    ssize_t r;
    int e;
};

static void *reader_thread(void *arg)
{
    struct rd_arg *a = arg;
    char b[16];
    a->r = read(a->fd, b, sizeof(b));
    a->e = errno;
    return NULL;
}

/* A blocking read interrupted by a handler: EINTR without SA_RESTART; with
 * SA_RESTART the read goes on and returns the data sent later. */
static bool check_eintr(void)
{
    int c, s;
    if (!pair(&c, &s))
        return false;
    for (int restart = 0; restart < 2; restart++) {
        struct sigaction sa = {.sa_handler = on_sig, .sa_flags = restart ? SA_RESTART : 0}, old;
        sigaction(SIGUSR1, &sa, &old);
        struct rd_arg a = {.fd = s};
        pthread_t t;
        pthread_create(&t, NULL, reader_thread, &a);
        usleep(100000);
        pthread_kill(t, SIGUSR1);
        usleep(100000);
        if (restart)
            CHECK(write(c, "z", 1) == 1, "write");
        pthread_join(t, NULL);
        sigaction(SIGUSR1, &old, NULL);
        if (restart)
            CHECK(a.r == 1, "SA_RESTART: read returned %zd (%s)", a.r, strerror(a.e));
        else
            CHECK(a.r < 0 && a.e == EINTR, "no SA_RESTART: read returned %zd (%s)", a.r,
                  strerror(a.e));
    }
    close(c);
    close(s);
    return true;
}

/* sendfile from a file, with and without an offset. */
static bool check_sendfile(void)
{
    int c, s;
    if (!pair(&c, &s))
        return false;
    char path[] = "/tmp/pl_check.XXXXXX";
    int f = mkstemp(path);
    CHECK(f >= 0, "mkstemp");
    unlink(path);
    size_t n = 300000;
    char *data = malloc(n), *in = malloc(n);
    for (size_t i = 0; i < n; i++)
        data[i] = (char)(i * 7);
    CHECK(write_all(f, data, n), "file write");
    off_t off = 1000;
    ssize_t r = sendfile(c, f, &off, n - 1000);
    CHECK(r == (ssize_t)(n - 1000) && off == (off_t)n, "sendfile with offset: %zd", r);
    CHECK(read_all(s, in, n - 1000) && !memcmp(in, data + 1000, n - 1000), "data (offset)");
    lseek(f, 5, SEEK_SET);
    r = sendfile(c, f, NULL, 100);
    CHECK(r == 100 && lseek(f, 0, SEEK_CUR) == 105, "sendfile at the file position: %zd", r);
    CHECK(read_all(s, in, 100) && !memcmp(in, data + 5, 100), "data (position)");
    free(data);
    free(in);
    close(f);
    close(c);
    close(s);
    return true;
}

/* fork(): the child neither crashes nor hangs; the parent's sockets keep
 * working. (A child cannot use an inherited SDP socket yet.) */
static bool check_fork(void)
{
    int c, s;
    if (!pair(&c, &s))
        return false;
    pid_t pid = fork();
    if (pid == 0) {
        alarm(10);
        char b;
        ssize_t r = recv(c, &b, 1, MSG_DONTWAIT);
        if (!(r < 0 && errno == (want_sdp ? EOPNOTSUPP : EAGAIN)))
            _exit(2);
        int c2, s2;
        if (!pair(&c2, &s2)) /* the child's own sockets work */
            _exit(3);
        if (write(c2, "k", 1) != 1 || read(s2, &b, 1) != 1)
            _exit(4);
        _exit(0);
    }
    int st = -1;
    waitpid(pid, &st, 0);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child status %#x", st);
    CHECK(write(c, "p", 1) == 1, "parent write after fork");
    char b;
    CHECK(read(s, &b, 1) == 1 && b == 'p', "parent read after fork");
    close(c);
    close(s);
    return true;
}

/* exec() with an SDP descriptor inherited (not close-on-exec): the new
 * program runs and exits (nothing hangs; it sees the descriptor as a
 * socket), and the parent's connection still works. */
static bool check_exec(void)
{
    int c, s;
    if (!pair(&c, &s))
        return false;
    pid_t pid = fork();
    if (pid == 0) {
        char cmd[192];
        snprintf(cmd, sizeof(cmd), "test -S /proc/self/fd/%d", c);
#if defined(__SANITIZE_ADDRESS__)
        unsetenv("LD_PRELOAD"); /* an ASan-built library cannot load into /bin/sh */
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
        unsetenv("LD_PRELOAD");
#endif
#endif
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    int st = -1;
    waitpid(pid, &st, 0);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "exec'd child status %#x", st);
    char b;
    CHECK(write(s, "d", 1) == 1 && read(c, &b, 1) == 1 && b == 'd', "parent after exec");
    CHECK(write(c, "e", 1) == 1 && read(s, &b, 1) == 1 && b == 'e', "parent after exec");
    close(c);
    close(s);
    return true;
}

/* shutdown(SHUT_WR): the peer reads EOF and can still send. */
static bool check_shutdown(void)
{
    int c, s;
    if (!pair(&c, &s))
        return false;
    CHECK(write(c, "q", 1) == 1 && shutdown(c, SHUT_WR) == 0, "shutdown");
    char b[4];
    CHECK(read(s, b, 4) == 1 && read(s, b, 4) == 0, "EOF after the data");
    CHECK(write(s, "r", 1) == 1 && read(c, b, 4) == 1, "the other direction still works");
    CHECK(send(c, "x", 1, MSG_NOSIGNAL) < 0 && errno == EPIPE, "send after SHUT_WR: %s",
          strerror(errno));
    close(c);
    close(s);
    return true;
}

static int first_port;

/* A service restarted on its port within PmTime: the client's cached
 * PMAccept names the old SDP port, which refuses; the connect must reach
 * the new listener over SDP (not fall back to TCP, as 7.5.1 would for a
 * fresh answer). */
static bool check_restart(void)
{
    int port, rc;
    for (int round = 0; round < 2; round++) {
        int l = make_listener(&port);
        if (round == 1) {
            close(l); /* rebind the same port: the first round's service port */
            l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
            int one = 1;
            setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
            struct sockaddr_in a = {.sin_family = AF_INET,
                                    .sin_port = htons((uint16_t)first_port),
                                    .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
            CHECK(bind(l, (struct sockaddr *)&a, sizeof(a)) == 0 && listen(l, 4) == 0,
                  "rebind port %d: %s", first_port, strerror(errno));
            port = first_port;
        }
        first_port = port;
        int c = connect_to(port, false, &rc);
        CHECK(rc == 0, "round %d: connect: %s", round, strerror(-rc));
        int s = accept4(l, NULL, NULL, SOCK_CLOEXEC);
        CHECK(s >= 0, "round %d: accept: %s", round, strerror(errno));
        if (!transport_ok(c, round ? "client after the restart" : "client") ||
            !transport_ok(s, round ? "server after the restart" : "server"))
            return false;
        char b;
        CHECK(write(c, "r", 1) == 1 && read(s, &b, 1) == 1 && b == 'r', "round %d: data", round);
        close(c);
        close(s);
        close(l);
    }
    return true;
}

static const struct {
    const char *name;
    bool (*fn)(void);
} checks[] = {
    {"echo", check_echo},         {"epoll", check_epoll},     {"dup", check_dup},
    {"calls", check_calls},       {"sigpipe", check_sigpipe}, {"eintr", check_eintr},
    {"sendfile", check_sendfile}, {"fork", check_fork},       {"exec", check_exec},
    {"shutdown", check_shutdown}, {"restart", check_restart},
};

int main(int argc, char **argv)
{
    if (argc < 2 || (strcmp(argv[1], "sdp") && strcmp(argv[1], "tcp"))) {
        fprintf(stderr, "usage: pl_check sdp|tcp [CHECK...]\n");
        return 100;
    }
    want_sdp = !strcmp(argv[1], "sdp");
    setvbuf(stdout, NULL, _IOLBF, 0);
    for (size_t i = 0; i < sizeof(checks) / sizeof(checks[0]); i++) {
        bool run = argc == 2;
        for (int a = 2; a < argc; a++)
            run = run || !strcmp(argv[a], checks[i].name);
        if (!run)
            continue;
        alarm(60);
        why[0] = 0;
        sigs = 0;
        if (checks[i].fn()) {
            printf("ok %s\n", checks[i].name);
        } else {
            printf("FAIL %s: %s\n", checks[i].name, why);
            fails++;
        }
    }
    alarm(0);
    return fails;
}
