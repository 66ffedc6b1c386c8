/* uwarp-tp-peer: the two ends that uwarp-testproxy's self-tests put around
 * the proxy. Either end sends a deterministic pseudo-random byte stream and
 * checks every byte it receives against the same stream, so a test learns
 * exactly which offsets arrived changed (and how), how many bytes arrived and
 * whether the connection ended with FIN or a reset. The listening end can
 * also echo what arrives, at once (--echo) or only after the peer's FIN
 * (--collect, which proves half-close works through the proxy). */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "tp_core.h"

static const char HELP[] =
    "usage: uwarp-tp-peer listen [OPTIONS]\n"
    "       uwarp-tp-peer connect PORT [OPTIONS]\n"
    "Serves TCP connections on 127.0.0.1 (listen: an ephemeral port, printed first\n"
    "on stdout as \"PORT <n>\"). Every byte received is compared with the pattern\n"
    "stream; sent data is the pattern too. Then prints one line per differing byte\n"
    "(at most --max-diffs) and a final summary:\n"
    "  diff offset=N expected=HH got=HH\n"
    "  done sent=N received=N diffs=N hash=FNV1A64 elapsed_ms=N end=fin|reset\n"
    "Options:\n"
    "  --send N       send N bytes of the pattern (default 0), then shut down writing\n"
    "  --after-eof    send only after the peer's FIN\n"
    "  --echo         (listen) send back what arrives as it arrives, instead of --send\n"
    "  --collect      (listen) send back everything after the peer's FIN\n"
    "  --reset        end with a reset (SO_LINGER 0) instead of FIN once sent\n"
    "  --seed N       pattern seed (default 1)\n"
    "  --max-diffs N  diff lines to print (default 100; all are counted)\n"
    "  --timeout S    abort (SIGALRM) after S seconds (default 60)\n"
    "  --conns N      (listen) serve N connections one after another (default 1)\n"
    "Exit status 0 (whatever arrived), 1 usage, 2 socket error.\n";

enum tx_kind { TX_PATTERN, TX_ECHO, TX_COLLECT };

#define ECHO_CAP (1u << 20)
#define COLLECT_MAX (UINT64_C(256) << 20)
#define STAGE 65536

typedef struct peer {
    int fd;
    enum tx_kind tx;
    uint64_t send_n, seed, max_diffs;
    bool after_eof, reset;
    /* Echo ring or collect buffer. */
    uint8_t *buf;
    size_t cap, head, len;
    uint64_t sent, received, diffs, hash;
    bool rx_done, tx_done, peer_reset;
} peer;

/* Pattern byte at offset off: 8 bytes per mixed 64-bit word. */
static void pattern(uint64_t seed, uint64_t off, uint8_t *out, size_t n)
{
    uint64_t word = 0, block = UINT64_MAX;
    for (size_t i = 0; i < n; i++) {
        uint64_t o = off + i;
        if (o / 8 != block) {
            block = o / 8;
            word = tp_mix(seed * UINT64_C(0x9e3779b97f4a7c15) + block);
        }
        out[i] = (uint8_t)(word >> (8 * (o % 8)));
    }
}

static void check_rx(peer *p, const uint8_t *data, size_t n)
{
    uint8_t want[STAGE];
    for (size_t done = 0; done < n;) {
        size_t k = n - done < STAGE ? n - done : STAGE;
        pattern(p->seed, p->received + done, want, k);
        for (size_t i = 0; i < k; i++) {
            uint8_t b = data[done + i];
            p->hash = (p->hash ^ b) * UINT64_C(0x100000001b3);
            if (b != want[i]) {
                if (p->diffs < p->max_diffs)
                    printf("diff offset=%" PRIu64 " expected=%02x got=%02x\n",
                           p->received + done + i, want[i], b);
                p->diffs++;
            }
        }
        done += k;
    }
    p->received += n;
}

static bool is_reset(int err)
{
    return err == ECONNRESET || err == EPIPE;
}

static int do_rx(peer *p)
{
    uint8_t scratch[STAGE];
    uint8_t *dst = scratch;
    size_t room = STAGE;
    if (p->tx == TX_ECHO) {
        size_t tail = (p->head + p->len) % p->cap;
        room = p->cap - p->len;
        if (room > p->cap - tail)
            room = p->cap - tail;
        dst = p->buf + tail;
    } else if (p->tx == TX_COLLECT) {
        if (p->len == p->cap) {
            if (p->cap >= COLLECT_MAX) {
                fprintf(stderr, "uwarp-tp-peer: --collect holds at most %" PRIu64 " bytes\n",
                        COLLECT_MAX);
                return -1;
            }
            size_t ncap = p->cap == 0 ? STAGE : p->cap * 2;
            uint8_t *nb = realloc(p->buf, ncap);
            if (nb == NULL) {
                fprintf(stderr, "uwarp-tp-peer: out of memory\n");
                return -1;
            }
            p->buf = nb;
            p->cap = ncap;
        }
        dst = p->buf + p->len;
        room = p->cap - p->len;
    }
    ssize_t n = read(p->fd, dst, room);
    if (n < 0) {
        if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)
            return 0;
        if (is_reset(errno)) {
            p->peer_reset = p->rx_done = p->tx_done = true;
            return 0;
        }
        fprintf(stderr, "uwarp-tp-peer: read: %s\n", strerror(errno));
        return -1;
    }
    if (n == 0) {
        p->rx_done = true;
        return 0;
    }
    check_rx(p, dst, (size_t)n);
    if (p->tx != TX_PATTERN)
        p->len += (size_t)n;
    return 0;
}

/* Bytes that may be sent now, copied or generated into stage. */
static size_t tx_pending(const peer *p, uint8_t *stage)
{
    size_t n = 0;
    switch (p->tx) {
    case TX_PATTERN:
        if ((!p->after_eof || p->rx_done) && p->sent < p->send_n) {
            n = p->send_n - p->sent < STAGE ? (size_t)(p->send_n - p->sent) : STAGE;
            if (stage != NULL)
                pattern(p->seed, p->sent, stage, n);
        }
        break;
    case TX_ECHO:
        n = p->len < p->cap - p->head ? p->len : p->cap - p->head;
        n = n < STAGE ? n : STAGE;
        if (stage != NULL)
            memcpy(stage, p->buf + p->head, n);
        break;
    case TX_COLLECT:
        if (p->rx_done && p->sent < p->len) {
            n = p->len - p->sent < STAGE ? (size_t)(p->len - p->sent) : STAGE;
            if (stage != NULL)
                memcpy(stage, p->buf + p->sent, n);
        }
        break;
    }
    return n;
}

static bool tx_complete(const peer *p)
{
    switch (p->tx) {
    case TX_PATTERN:
        return p->sent == p->send_n && (!p->after_eof || p->rx_done);
    case TX_ECHO:
        return p->rx_done && p->len == 0;
    case TX_COLLECT:
        return p->rx_done && p->sent == p->len;
    }
    return false;
}

static int do_tx(peer *p)
{
    uint8_t stage[STAGE];
    size_t n = tx_pending(p, stage);
    if (n > 0) {
        ssize_t w = write(p->fd, stage, n);
        if (w < 0) {
            if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)
                return 0;
            if (is_reset(errno)) {
                p->peer_reset = p->rx_done = p->tx_done = true;
                return 0;
            }
            fprintf(stderr, "uwarp-tp-peer: write: %s\n", strerror(errno));
            return -1;
        }
        p->sent += (uint64_t)w;
        if (p->tx == TX_ECHO) {
            p->head = (p->head + (size_t)w) % p->cap;
            p->len -= (size_t)w;
        }
    }
    if (tx_complete(p)) {
        p->tx_done = true;
        if (p->reset) {
            struct linger lg = {.l_onoff = 1, .l_linger = 0};
            (void)setsockopt(p->fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
            close(p->fd);
            p->fd = -1;
            p->rx_done = true;
        } else if (shutdown(p->fd, SHUT_WR) != 0 && !is_reset(errno) && errno != ENOTCONN) {
            fprintf(stderr, "uwarp-tp-peer: shutdown: %s\n", strerror(errno));
            return -1;
        }
    }
    return 0;
}

static int relay(peer *p)
{
    while (!(p->rx_done && p->tx_done)) {
        struct pollfd pfd = {.fd = p->fd};
        if (!p->rx_done && !(p->tx == TX_ECHO && p->len == p->cap))
            pfd.events |= POLLIN;
        if (!p->tx_done && tx_pending(p, NULL) > 0)
            pfd.events |= POLLOUT;
        if (!p->tx_done && tx_complete(p)) {
            if (do_tx(p) != 0)
                return -1;
            continue;
        }
        if (poll(&pfd, 1, -1) < 0) {
            if (errno == EINTR)
                continue;
            fprintf(stderr, "uwarp-tp-peer: poll: %s\n", strerror(errno));
            return -1;
        }
        if ((pfd.revents & (POLLIN | POLLHUP | POLLERR)) && !p->rx_done && do_rx(p) != 0)
            return -1;
        if ((pfd.revents & (POLLOUT | POLLERR)) && !p->tx_done && do_tx(p) != 0)
            return -1;
    }
    return 0;
}

static bool num_arg(const char *s, uint64_t *out)
{
    char *end;
    if (s == NULL || s[0] < '0' || s[0] > '9')
        return false;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno != 0 || *end != '\0')
        return false;
    *out = v;
    return true;
}

static int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* A connected socket to 127.0.0.1:port, or with port 0 a listening one whose
 * port is printed. Returns the descriptor or -1 with errno set. */
static int open_socket(uint64_t port)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0)
        return -1;
    if (port != 0) {
        if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
            close(fd);
            return -1;
        }
        return fd;
    }
    socklen_t sl = sizeof(sa);
    if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 || listen(fd, 16) != 0 ||
        getsockname(fd, (struct sockaddr *)&sa, &sl) != 0) {
        close(fd);
        return -1;
    }
    /* Tests wait for this line to learn the ephemeral port. */
    printf("PORT %u\n", (unsigned)ntohs(sa.sin_port));
    fflush(stdout);
    return fd;
}

/* Runs one connection to its end and prints its summary. */
static int serve_one(peer *p)
{
    int one = 1;
    (void)setsockopt(p->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    int fl = fcntl(p->fd, F_GETFL);
    if (fl < 0 || fcntl(p->fd, F_SETFL, fl | O_NONBLOCK) != 0) {
        fprintf(stderr, "uwarp-tp-peer: fcntl: %s\n", strerror(errno));
        return -1;
    }
    int64_t t0 = mono_ms();
    int rc = relay(p);
    printf("done sent=%" PRIu64 " received=%" PRIu64 " diffs=%" PRIu64 " hash=%016" PRIx64
           " elapsed_ms=%" PRId64 " end=%s\n",
           p->sent, p->received, p->diffs, p->hash, mono_ms() - t0,
           p->peer_reset ? "reset" : "fin");
    fflush(stdout);
    if (p->fd >= 0)
        close(p->fd);
    p->fd = -1;
    return rc;
}

int main(int argc, char **argv)
{
    peer p = {.fd = -1,
              .tx = TX_PATTERN,
              .seed = 1,
              .max_diffs = 100,
              .hash = UINT64_C(0xcbf29ce484222325)};
    uint64_t timeout = 60, port = 0, conns = 1;
    int i = 2;
    if (argc < 2 || strcmp(argv[1], "--help") == 0) {
        fputs(HELP, argc < 2 ? stderr : stdout);
        return argc < 2 ? 1 : 0;
    }
    bool listening = strcmp(argv[1], "listen") == 0;
    if (!listening) {
        if (strcmp(argv[1], "connect") != 0 || argc < 3 || !num_arg(argv[2], &port) || port == 0 ||
            port > 65535) {
            fputs("uwarp-tp-peer: expected 'listen' or 'connect PORT' (see --help)\n", stderr);
            return 1;
        }
        i = 3;
    }
    for (; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        uint64_t *num = NULL;
        if (strcmp(a, "--echo") == 0 && listening)
            p.tx = TX_ECHO;
        else if (strcmp(a, "--collect") == 0 && listening)
            p.tx = TX_COLLECT;
        else if (strcmp(a, "--after-eof") == 0)
            p.after_eof = true;
        else if (strcmp(a, "--reset") == 0)
            p.reset = true;
        else if (strcmp(a, "--send") == 0)
            num = &p.send_n;
        else if (strcmp(a, "--seed") == 0)
            num = &p.seed;
        else if (strcmp(a, "--max-diffs") == 0)
            num = &p.max_diffs;
        else if (strcmp(a, "--timeout") == 0)
            num = &timeout;
        else if (strcmp(a, "--conns") == 0 && listening)
            num = &conns;
        else {
            fprintf(stderr, "uwarp-tp-peer: unknown argument '%s' (see --help)\n", a);
            return 1;
        }
        if (num != NULL) {
            if (!num_arg(v, num)) {
                fprintf(stderr, "uwarp-tp-peer: %s needs a number\n", a);
                return 1;
            }
            i++;
        }
    }
    /* A hung test must end on its own, even if the proxy never answers. */
    alarm(timeout > 86400 ? 86400 : (unsigned)timeout);
    signal(SIGPIPE, SIG_IGN);
    if (p.tx == TX_ECHO)
        p.cap = ECHO_CAP;
    int fd = open_socket(port);
    if (fd < 0) {
        fprintf(stderr, "uwarp-tp-peer: %s: %s\n", listening ? "listen" : "connect",
                strerror(errno));
        return 2;
    }
    if (!listening) {
        p.fd = fd;
        int rc = serve_one(&p);
        free(p.buf);
        return rc == 0 && !ferror(stdout) ? 0 : 2;
    }
    /* Connections one after another, each from a fresh state. */
    int rc = 0;
    const peer fresh = p;
    for (uint64_t c = 0; c < conns && rc == 0; c++) {
        p = fresh;
        if (p.tx == TX_ECHO) {
            p.buf = malloc(p.cap);
            if (p.buf == NULL)
                return 2;
        }
        do
            p.fd = accept(fd, NULL, NULL);
        while (p.fd < 0 && errno == EINTR);
        if (p.fd < 0) {
            fprintf(stderr, "uwarp-tp-peer: accept: %s\n", strerror(errno));
            rc = -1;
            break;
        }
        rc = serve_one(&p);
        free(p.buf);
    }
    close(fd);
    return rc == 0 && !ferror(stdout) ? 0 : 2;
}
