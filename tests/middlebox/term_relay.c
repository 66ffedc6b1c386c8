/* The relay of term_relay.h: one poll() loop per connection. */
#define _DEFAULT_SOURCE
#include "term_relay.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define RBUF 65536u
#define CONN_LIMIT_MS 10000 /* a connection open longer than this is a bug elsewhere */

typedef struct dir {
    int src, dst;
    uint8_t buf[RBUF];
    uint32_t head, tail;
    bool eof, shut;
    uint64_t off; /* octets read so far */
} dir;

static uint64_t mix(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void reset_close(int fd)
{
    struct linger lg = {.l_onoff = 1, .l_linger = 0};
    setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
    close(fd);
}

/* Reads what fits. Returns -1 when the source was reset. */
static int pull(dir *d, const relay_case *c, bool c2s)
{
    if (d->eof || d->tail == RBUF)
        return 0;
    ssize_t n = recv(d->src, d->buf + d->tail, RBUF - d->tail, MSG_DONTWAIT);
    if (n < 0)
        return errno == EAGAIN || errno == EINTR ? 0 : -1;
    if (n == 0) {
        d->eof = true;
        return 0;
    }
    if (c2s && c->flip_off >= d->off && c->flip_off < d->off + (uint64_t)n)
        d->buf[d->tail + (c->flip_off - d->off)] ^= (uint8_t)(1u << c->flip_bit);
    d->off += (uint64_t)n;
    d->tail += (uint32_t)n;
    return 0;
}

/* Writes what is held; FIN once the source's FIN and every octet went on.
 * Returns -1 when the destination was reset. */
static int push(dir *d, bool split, uint64_t *rng)
{
    while (d->head < d->tail) {
        size_t len = d->tail - d->head;
        if (split) {
            size_t cut = 1 + (size_t)(mix(rng) % 1460);
            len = len < cut ? len : cut;
        }
        ssize_t w = send(d->dst, d->buf + d->head, len, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (w < 0)
            return errno == EAGAIN || errno == EINTR ? 0 : -1;
        d->head += (uint32_t)w;
    }
    d->head = d->tail = 0;
    if (d->eof && !d->shut) {
        shutdown(d->dst, SHUT_WR);
        d->shut = true;
    }
    return 0;
}

static void serve(relay *r, int cfd, const relay_case *c)
{
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons((uint16_t)c->dst_port)};
    sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int sfd = socket(AF_INET, SOCK_STREAM, 0);
    if (sfd < 0 || connect(sfd, (struct sockaddr *)&sin, sizeof(sin)) < 0) {
        if (sfd >= 0)
            close(sfd);
        reset_close(cfd);
        return;
    }
    int one = 1;
    setsockopt(sfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)); /* small writes, small segments */
    static dir d[2]; /* one relay thread: 128 KiB off its stack */
    memset(d, 0, sizeof(d));
    d[0].src = cfd;
    d[0].dst = sfd;
    d[1].src = sfd;
    d[1].dst = cfd;
    uint64_t rng = c->seed;
    int64_t limit = now_ms() + CONN_LIMIT_MS;
    bool reset = false;
    while (!(d[0].shut && d[1].shut)) {
        if (now_ms() > limit) {
            pthread_mutex_lock(&r->mu);
            r->stuck++;
            pthread_mutex_unlock(&r->mu);
            reset = true;
            break;
        }
        if (pull(&d[0], c, true) < 0 || pull(&d[1], c, false) < 0 ||
            push(&d[0], c->split, &rng) < 0 || push(&d[1], false, &rng) < 0) {
            reset = true;
            break;
        }
        struct pollfd p[2] = {{.fd = cfd}, {.fd = sfd}};
        for (int i = 0; i < 2; i++) {
            if (!d[i].eof && d[i].tail < RBUF)
                p[i].events |= POLLIN; /* d[i] reads from p[i] */
            if (d[i].head < d[i].tail)
                p[1 - i].events |= POLLOUT;
        }
        poll(p, 2, 50);
    }
    if (reset) {
        pthread_mutex_lock(&r->mu);
        r->resets++;
        pthread_mutex_unlock(&r->mu);
        reset_close(cfd);
        reset_close(sfd);
        return;
    }
    close(cfd);
    close(sfd);
}

static void *run(void *arg)
{
    relay *r = arg;
    for (;;) {
        pthread_mutex_lock(&r->mu);
        bool stop = r->stop;
        relay_case c = r->next;
        pthread_mutex_unlock(&r->mu);
        if (stop)
            return NULL;
        struct pollfd p = {.fd = r->lfd, .events = POLLIN};
        if (poll(&p, 1, 50) <= 0)
            continue;
        int cfd = accept(r->lfd, NULL, NULL);
        if (cfd < 0)
            continue;
        /* The case is read after accept: the client sets it before connecting. */
        pthread_mutex_lock(&r->mu);
        c = r->next;
        pthread_mutex_unlock(&r->mu);
        serve(r, cfd, &c);
    }
}

int relay_start(relay *r)
{
    memset(r, 0, sizeof(*r));
    pthread_mutex_init(&r->mu, NULL);
    r->lfd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sin = {.sin_family = AF_INET};
    sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t sl = sizeof(sin);
    if (r->lfd < 0 || bind(r->lfd, (struct sockaddr *)&sin, sizeof(sin)) < 0 ||
        listen(r->lfd, 16) < 0 || getsockname(r->lfd, (struct sockaddr *)&sin, &sl) < 0)
        return -1;
    r->port = ntohs(sin.sin_port);
    if (pthread_create(&r->thread, NULL, run, r) != 0)
        return -1;
    return 0;
}

void relay_set_case(relay *r, const relay_case *c)
{
    pthread_mutex_lock(&r->mu);
    r->next = *c;
    pthread_mutex_unlock(&r->mu);
}

void relay_stop(relay *r)
{
    pthread_mutex_lock(&r->mu);
    r->stop = true;
    pthread_mutex_unlock(&r->mu);
    pthread_join(r->thread, NULL);
    close(r->lfd);
    pthread_mutex_destroy(&r->mu);
}
