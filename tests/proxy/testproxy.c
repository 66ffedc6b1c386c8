/* uwarp-testproxy: a middlebox for the iWARP robustness tests. It relays TCP
 * connections on loopback and, per direction, re-segments, delays or
 * corrupts the byte stream on purpose, recording every corruption so a test
 * can check that the receiver noticed exactly those bytes.
 *
 * One thread, nonblocking sockets and poll(). The faults themselves live in
 * tp_core.c (no sockets there) and the command line in tp_cli.c (--help
 * there is the reference); this file owns the sockets, the clock and the
 * output. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "tp_cli.h"
#include "tp_core.h"

/* At most this many connections are relayed at once; more wait in the
 * listen backlog. Each holds two rings of --buffer bytes. */
#define MAX_ACTIVE 64

typedef struct session {
    unsigned id;
    int fd[2]; /* [0] client side, [1] target side */
    bool connecting;
    const struct addrinfo *ai; /* target address being tried */
    tp_dir dir[2];             /* [k] relays fd[k] -> fd[1 - k]: [0] c2s, [1] s2c */
    bool shut[2];              /* destination of dir[k] shut down for writing */
    bool reset;
} session;

typedef struct proxy {
    config cfg;
    FILE *log;
    struct addrinfo *targets;
    int lfd;
    session *act[MAX_ACTIVE];
    unsigned nact;
    unsigned accepted;
    unsigned finished;
} proxy;

static const char *const DIR_NAME[2] = {"c2s", "s2c"};

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void log_corrupt(void *ctx, uint64_t off, unsigned bit, uint8_t old_byte, uint8_t new_byte);

/* Context of log_corrupt() for one write. */
typedef struct log_ctx {
    proxy *p;
    const session *s;
    int k;
} log_ctx;

static void conn_suffix(const proxy *p, const session *s, char *buf, size_t cap)
{
    if (p->cfg.count > 1)
        snprintf(buf, cap, " conn=%u", s->id);
    else
        buf[0] = '\0';
}

static void log_corrupt(void *ctx, uint64_t off, unsigned bit, uint8_t old_byte, uint8_t new_byte)
{
    const log_ctx *lc = ctx;
    char sfx[32];
    if (lc->p->log == NULL)
        return;
    conn_suffix(lc->p, lc->s, sfx, sizeof(sfx));
    fprintf(lc->p->log, "dir=%s offset=%" PRIu64 " bit=%u old=%02x new=%02x%s\n", DIR_NAME[lc->k],
            off, bit, old_byte, new_byte, sfx);
}

/* The per-direction summary in the log and, with --stats, on stderr. */
static void report_session(proxy *p, const session *s)
{
    char sfx[32];
    conn_suffix(p, s, sfx, sizeof(sfx));
    for (int k = 0; k < 2; k++) {
        const tp_stats *st = &s->dir[k].st;
        if (p->log != NULL)
            fprintf(p->log, "dir=%s bytes=%" PRIu64 " corruptions=%" PRIu64 "%s\n", DIR_NAME[k],
                    st->bytes, st->corruptions, sfx);
        if (p->cfg.stats)
            fprintf(stderr,
                    "{\"dir\":\"%s\",\"bytes\":%" PRIu64 ",\"writes\":%" PRIu64
                    ",\"corruptions\":%" PRIu64 ",\"reads\":%" PRIu64 ",\"merged\":%" PRIu64
                    ",\"min_write\":%" PRIu64 ",\"max_write\":%" PRIu64
                    ",\"conn\":%u,\"end\":\"%s\"}\n",
                    DIR_NAME[k], st->bytes, st->writes, st->corruptions, st->reads, st->merged,
                    st->min_write, st->max_write, s->id, s->reset ? "reset" : "fin");
    }
    if (p->log != NULL)
        fflush(p->log);
}

static int set_nonblock(int fd)
{
    int fl = fcntl(fd, F_GETFL);
    return fl < 0 ? -1 : fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

/* Without Nagle every write leaves as its own segment when the window
 * allows, which is the point of --split; harmless for a clean relay. */
static void set_nodelay(int fd)
{
    int one = 1;
    (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

/* Close with SO_LINGER 0, which sends RST instead of FIN. */
static void close_reset(int fd)
{
    struct linger lg = {.l_onoff = 1, .l_linger = 0};
    (void)setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
    close(fd);
}

static void session_free(session *s)
{
    tp_dir_free(&s->dir[0]);
    tp_dir_free(&s->dir[1]);
    free(s);
}

/* Ends a session by resetting whatever is still open. */
static void session_abort(session *s, int k_side, const char *what, int err)
{
    tp_msg("conn %u: %s side: %s: %s; resetting the %s side", s->id,
           k_side == 0 ? "client" : "target", what, strerror(err),
           k_side == 0 ? "target" : "client");
    s->reset = true;
    for (int i = 0; i < 2; i++) {
        if (s->fd[i] >= 0)
            close_reset(s->fd[i]);
        s->fd[i] = -1;
    }
}

/* Starts a nonblocking connect to s->ai and onwards. Returns 0 (in progress or
 * done), or -1 when no address is left, with errno from the last attempt. */
static int start_connect(session *s)
{
    int err = ECONNREFUSED;
    for (; s->ai != NULL; s->ai = s->ai->ai_next) {
        int fd = socket(s->ai->ai_family, s->ai->ai_socktype, s->ai->ai_protocol);
        if (fd < 0) {
            err = errno;
            continue;
        }
        if (set_nonblock(fd) != 0) {
            err = errno;
            close(fd);
            continue;
        }
        set_nodelay(fd);
        if (connect(fd, s->ai->ai_addr, s->ai->ai_addrlen) == 0 || errno == EINPROGRESS) {
            s->fd[1] = fd;
            s->connecting = true;
            return 0;
        }
        err = errno;
        close(fd);
    }
    errno = err;
    return -1;
}

static int accept_new(proxy *p)
{
    while (p->accepted < p->cfg.count && p->nact < MAX_ACTIVE) {
        int fd = accept(p->lfd, NULL, NULL);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                return 0;
            tp_msg("accept: %s", strerror(errno));
            return EXIT_RUNTIME;
        }
        session *s = calloc(1, sizeof(*s));
        if (s == NULL || set_nonblock(fd) != 0) {
            tp_msg("conn %u: %s", p->accepted, s == NULL ? "out of memory" : strerror(errno));
            free(s);
            close(fd);
            return EXIT_RUNTIME;
        }
        set_nodelay(fd);
        s->id = p->accepted++;
        s->fd[0] = fd;
        s->fd[1] = -1;
        p->act[p->nact++] = s;
        for (int k = 0; k < 2; k++) {
            uint64_t seed = tp_mix(p->cfg.seed ^ tp_mix(((uint64_t)s->id << 1) | (unsigned)k));
            if (tp_dir_init(&s->dir[k], p->cfg.fault_dir[k] ? &p->cfg.faults : NULL, p->cfg.buffer,
                            seed) != 0) {
                tp_msg("conn %u: out of memory", s->id);
                return EXIT_RUNTIME;
            }
        }
        s->ai = p->targets;
        if (start_connect(s) != 0) {
            tp_msg("conn %u: cannot connect to %s port %s: %s", s->id, p->cfg.target_host,
                   p->cfg.target_port, strerror(errno));
            return EXIT_RUNTIME;
        }
    }
    if (p->accepted == p->cfg.count && p->lfd >= 0) {
        /* Served all: further clients are refused rather than left hanging. */
        close(p->lfd);
        p->lfd = -1;
    }
    return 0;
}

/* Completes a connect once the socket is writable; tries the next address
 * if it failed. Returns 0, or EXIT_RUNTIME when no address accepts. */
static int finish_connect(proxy *p, session *s)
{
    int err = 0;
    socklen_t len = sizeof(err);
    if (getsockopt(s->fd[1], SOL_SOCKET, SO_ERROR, &err, &len) != 0)
        err = errno;
    if (err == 0) {
        s->connecting = false;
        return 0;
    }
    if (err == ECONNRESET) {
        /* The target accepted and reset before we saw the connection
         * complete: that is a reset from the target, not a refusal. */
        s->connecting = false;
        session_abort(s, 1, "connect", err);
        return 0;
    }
    close(s->fd[1]);
    s->fd[1] = -1;
    s->ai = s->ai->ai_next;
    if (start_connect(s) == 0)
        return 0;
    tp_msg("conn %u: cannot connect to %s port %s: %s", s->id, p->cfg.target_host,
           p->cfg.target_port, strerror(err));
    return EXIT_RUNTIME;
}

/* Reads once from the source of dir[k] if poll said so. Returns false when
 * the session was aborted. */
static bool pump_read(session *s, int k, short revents, int64_t now)
{
    tp_dir *d = &s->dir[k];
    struct iovec iov[2];
    int niov;
    if (!(revents & (POLLIN | POLLHUP | POLLERR)) || tp_dir_read_space(d, iov, &niov) == 0)
        return true;
    ssize_t n;
    do
        n = readv(s->fd[k], iov, niov);
    while (n < 0 && errno == EINTR);
    if (n > 0) {
        tp_dir_received(d, (size_t)n, now);
    } else if (n == 0) {
        tp_dir_set_eof(d, now);
    } else if (errno != EAGAIN && errno != EWOULDBLOCK) {
        session_abort(s, k, "read", errno);
        return false;
    }
    return true;
}

/* dir[j]'s destination is fine but its source just reset us: what that
 * source sent before its reset is still readable here (Linux keeps a reset
 * socket's received data) or already in dir[j]. On a plain path it would
 * have reached the other end before the reset did (a Terminate followed by
 * a close that resets is exactly that), so pass it on before resetting;
 * best effort, bounded, never waiting. */
static void salvage(proxy *p, session *s, int j, int64_t now)
{
    tp_dir *d = &s->dir[j];
    int src = s->fd[j], dst = s->fd[1 - j];
    if (src < 0 || dst < 0)
        return;
    for (int i = 0; i < 64; i++) {
        struct iovec iov[2];
        int niov;
        if (tp_dir_read_space(d, iov, &niov) > 0) {
            ssize_t n = readv(src, iov, niov);
            if (n > 0)
                tp_dir_received(d, (size_t)n, now);
        }
        tp_dir_schedule(d, now);
        if (tp_dir_ready(d, now, iov, &niov) == 0)
            break;
        ssize_t n = writev(dst, iov, niov);
        if (n <= 0)
            break;
        log_ctx lc = {.p = p, .s = s, .k = j};
        tp_dir_sent(d, (size_t)n, log_corrupt, &lc);
    }
}

/* Writes every chunk of dir[k] that is due, until the socket is full.
 * Returns false when the session was aborted. */
static bool pump_write(proxy *p, session *s, int k, int64_t now)
{
    tp_dir *d = &s->dir[k];
    int dst = s->fd[1 - k];
    struct iovec iov[2];
    int niov;
    size_t len;
    /* Scheduling again after every write: a chunk queue that was full has
     * room now, and the bytes behind it would otherwise wait for a read. */
    for (;;) {
        tp_dir_schedule(d, now);
        if ((len = tp_dir_ready(d, now, iov, &niov)) == 0)
            break;
        ssize_t n = writev(dst, iov, niov);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                break;
            int err = errno;
            salvage(p, s, 1 - k, now);
            session_abort(s, 1 - k, "write", err);
            return false;
        }
        log_ctx lc = {.p = p, .s = s, .k = k};
        tp_dir_sent(d, (size_t)n, log_corrupt, &lc);
        if ((size_t)n < len)
            break; /* socket full; poll for POLLOUT */
    }
    if (tp_dir_finished(d) && !s->shut[k]) {
        if (shutdown(dst, SHUT_WR) != 0 && errno != ENOTCONN) {
            session_abort(s, 1 - k, "shutdown", errno);
            return false;
        }
        s->shut[k] = true;
    }
    return true;
}

/* Handles one session after poll. Returns 0, or an exit status. */
static int pump(proxy *p, session *s, const short revents[2], int64_t now)
{
    if (s->connecting) {
        if (!(revents[1] & (POLLOUT | POLLERR | POLLHUP)))
            return 0;
        int rc = finish_connect(p, s);
        if (rc != 0 || s->connecting || s->reset)
            return rc;
    }
    for (int k = 0; k < 2; k++)
        if (!pump_read(s, k, revents[k], now))
            return 0;
    for (int k = 0; k < 2; k++)
        if (!pump_write(p, s, k, now))
            return 0;
    if (s->shut[0] && s->shut[1]) {
        close(s->fd[0]);
        close(s->fd[1]);
        s->fd[0] = s->fd[1] = -1;
    }
    return 0;
}

/* Poll events wanted on fd[i] of a session; 0 means "leave it out", so a
 * backpressured socket that hung up does not make poll() spin. */
static short wanted(const session *s, int i, int64_t now)
{
    short ev = 0;
    struct iovec iov[2];
    int niov;
    if (s->fd[i] < 0)
        return 0;
    if (s->connecting)
        return i == 1 ? POLLOUT : 0;
    if (tp_dir_read_space(&s->dir[i], iov, &niov) > 0)
        ev |= POLLIN;
    if (tp_dir_ready(&s->dir[1 - i], now, iov, &niov) > 0)
        ev |= POLLOUT;
    return ev;
}

static int setup_listener(proxy *p)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC,
                             .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE | AI_NUMERICHOST | AI_NUMERICSERV};
    struct addrinfo *res;
    int rc = getaddrinfo(p->cfg.listen_addr, p->cfg.listen_port, &hints, &res);
    if (rc != 0) {
        tp_msg("bad --listen '%s': %s", p->cfg.listen_addr, gai_strerror(rc));
        return EXIT_USAGE;
    }
    int fd = socket(res->ai_family, res->ai_socktype, res->ai_protocol);
    int one = 1;
    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0 ||
        bind(fd, res->ai_addr, res->ai_addrlen) != 0 || listen(fd, 64) != 0 ||
        set_nonblock(fd) != 0) {
        tp_msg("cannot listen on %s port %s: %s", p->cfg.listen_addr, p->cfg.listen_port,
               strerror(errno));
        freeaddrinfo(res);
        if (fd >= 0)
            close(fd);
        return EXIT_RUNTIME;
    }
    freeaddrinfo(res);
    struct sockaddr_storage ss;
    socklen_t sl = sizeof(ss);
    if (getsockname(fd, (struct sockaddr *)&ss, &sl) != 0) {
        tp_msg("getsockname: %s", strerror(errno));
        close(fd);
        return EXIT_RUNTIME;
    }
    unsigned port = ss.ss_family == AF_INET6 ? ntohs(((struct sockaddr_in6 *)&ss)->sin6_port)
                                             : ntohs(((struct sockaddr_in *)&ss)->sin_port);
    /* Tests read this line to learn the ephemeral port: flush it now. */
    printf("PORT %u\n", port);
    if (fflush(stdout) != 0) {
        tp_msg("stdout: %s", strerror(errno));
        close(fd);
        return EXIT_RUNTIME;
    }
    p->lfd = fd;
    return 0;
}

static int resolve_target(proxy *p)
{
    struct addrinfo hints = {
        .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV};
    int rc = getaddrinfo(p->cfg.target_host, p->cfg.target_port, &hints, &p->targets);
    if (rc != 0) {
        tp_msg("cannot resolve %s: %s", p->cfg.target_host, gai_strerror(rc));
        return EXIT_RUNTIME;
    }
    return 0;
}

/* Drops sessions whose sockets are all closed, reporting them. */
static void reap(proxy *p)
{
    unsigned j = 0;
    for (unsigned i = 0; i < p->nact; i++) {
        session *s = p->act[i];
        if (s->fd[0] < 0 && s->fd[1] < 0) {
            report_session(p, s);
            session_free(s);
            p->finished++;
        } else {
            p->act[j++] = s;
        }
    }
    p->nact = j;
}

static int run(proxy *p)
{
    int64_t deadline = now_ns() + (int64_t)p->cfg.timeout_s * 1000000000;
    struct pollfd pfd[1 + 2 * MAX_ACTIVE];
    for (;;) {
        reap(p);
        if (p->finished == p->cfg.count)
            return 0;
        int64_t now = now_ns();
        if (now >= deadline) {
            tp_msg("timeout after %u s: %u of %u connections finished, %u accepted",
                   p->cfg.timeout_s, p->finished, p->cfg.count, p->accepted);
            return EXIT_TIMEOUT;
        }
        int64_t wake = deadline;
        nfds_t n = 0;
        pfd[n++] = (struct pollfd){.fd = p->nact < MAX_ACTIVE ? p->lfd : -1, .events = POLLIN};
        for (unsigned i = 0; i < p->nact; i++) {
            session *s = p->act[i];
            for (int k = 0; k < 2; k++) {
                short ev = wanted(s, k, now);
                pfd[n++] = (struct pollfd){.fd = ev != 0 ? s->fd[k] : -1, .events = ev};
                int64_t t = tp_dir_deadline(&s->dir[k], now);
                if (t < wake)
                    wake = t;
            }
        }
        unsigned polled = p->nact;
        /* Round up, so a timer is never polled for 0 ms before it is due. */
        int64_t ms = wake <= now ? 0 : (wake - now + 999999) / 1000000;
        int rc = poll(pfd, n, ms > INT_MAX ? INT_MAX : (int)ms);
        if (rc < 0) {
            if (errno == EINTR)
                continue;
            tp_msg("poll: %s", strerror(errno));
            return EXIT_RUNTIME;
        }
        now = now_ns();
        if (pfd[0].revents != 0) {
            int erc = accept_new(p);
            if (erc != 0)
                return erc;
        }
        /* Sessions accepted just now have no pollfd yet: pumped with no
         * events they wait for the next round. */
        for (unsigned i = 0; i < p->nact; i++) {
            short rev[2] = {0, 0};
            if (i < polled) {
                rev[0] = pfd[1 + 2 * i].revents;
                rev[1] = pfd[2 + 2 * i].revents;
            }
            int erc = pump(p, p->act[i], rev, now);
            if (erc != 0)
                return erc;
        }
    }
}

int main(int argc, char **argv)
{
    proxy p = {.lfd = -1};
    int rc = tp_parse_args(argc, argv, &p.cfg);
    if (rc != 0)
        return rc;
    /* A peer that vanished must show up as EPIPE from write, not kill us. */
    signal(SIGPIPE, SIG_IGN);
    if (!p.cfg.seed_given)
        p.cfg.seed = tp_mix((uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32));
    tp_msg("seed %" PRIu64, p.cfg.seed);
    if (p.cfg.log_path != NULL) {
        p.log = fopen(p.cfg.log_path, "w");
        if (p.log == NULL) {
            tp_msg("cannot open --log %s: %s", p.cfg.log_path, strerror(errno));
            return EXIT_RUNTIME;
        }
        /* Line by line, so a test that kills the proxy still has every line. */
        setvbuf(p.log, NULL, _IOLBF, 0);
    }
    rc = resolve_target(&p);
    if (rc == 0)
        rc = setup_listener(&p);
    if (rc == 0)
        rc = run(&p);
    /* On a timeout or error the open connections still get their summary. */
    for (unsigned i = 0; i < p.nact; i++) {
        session *s = p.act[i];
        for (int k = 0; k < 2; k++)
            if (s->fd[k] >= 0)
                close(s->fd[k]);
        report_session(&p, s);
        session_free(s);
    }
    if (p.lfd >= 0)
        close(p.lfd);
    if (p.targets != NULL)
        freeaddrinfo(p.targets);
    if (p.log != NULL && fclose(p.log) != 0 && rc == 0) {
        tp_msg("--log %s: %s", p.cfg.log_path, strerror(errno));
        rc = EXIT_RUNTIME;
    }
    return rc;
}
