/* A misbehaving MPA peer for the uwarp-cat tests: plain TCP, no uwarp.
 *
 *   silent_peer listen MODE        binds 127.0.0.1 on a free port, prints the
 *                                  port on stdout, serves one connection
 *   silent_peer connect PORT MODE  connects to 127.0.0.1:PORT
 *
 * Listen modes (we play a bad MPA responder):
 *   silent         never sends a byte (the initiator must time out)
 *   garbage-reply  answers the Request with octets that are not a Reply
 *   half-reply     sends the first 10 octets of a Reply, then stalls
 * Connect modes (we play a bad MPA initiator):
 *   silent         sends nothing
 *   garbage        sends 40 octets that are not a Request
 *   pd600          sends a Request header announcing PD_Length 600
 *   stall          sends the first 10 octets of a Request, then stalls
 *
 * After acting, it reads until the other side closes and prints
 * "closed after N ms" (or "still open" when its 20 s limit is reached), so a
 * test can check that the peer under test closed the connection. Exit status
 * 0 when the other side closed, 1 otherwise, 2 on setup errors. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define LIMIT_MS 20000

static long long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int write_all(int fd, const void *p, size_t n)
{
    const char *c = p;
    while (n) {
        ssize_t w = send(fd, c, n, MSG_NOSIGNAL);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        c += w;
        n -= (size_t)w;
    }
    return 0;
}

/* Reads (and drops) until EOF or the limit; returns 0 when the peer closed
 * or reset the connection. */
static int wait_closed(int fd, long long t0)
{
    char buf[4096];
    for (;;) {
        long long left = LIMIT_MS - (now_ms() - t0);
        if (left <= 0) {
            printf("still open\n");
            return 1;
        }
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int r = poll(&p, 1, (int)left);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            continue;
        ssize_t n = recv(fd, buf, sizeof(buf), 0);
        if (n > 0)
            continue;
        if (n < 0 && errno == EINTR)
            continue;
        printf("closed after %lld ms\n", now_ms() - t0);
        return 0;
    }
}

/* Reads until at least want octets arrived (the peer's startup frame). */
static void read_some(int fd, size_t want)
{
    char buf[1024];
    size_t got = 0;
    long long t0 = now_ms();
    while (got < want && now_ms() - t0 < LIMIT_MS) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, 100) <= 0)
            continue;
        ssize_t n = recv(fd, buf, sizeof(buf), 0);
        if (n <= 0)
            return;
        got += (size_t)n;
    }
}

/* Acts out mode; returns 0 if it knows the mode. */
static int act(int fd, const char *mode)
{
    static const char junk[] = "GET / HTTP/1.0\r\nHost: not-an-mpa-peer\r\n\r\n";
    /* RFC 5044 7.1.1: 16-octet key, flags (C), Rev, PD_Length. */
    static const unsigned char req600[20] = {'M', 'P', 'A', ' ', 'I', 'D', ' ',  'R', 'e',  'q',
                                             ' ', 'F', 'r', 'a', 'm', 'e', 0x40, 1,   0x02, 0x58};
    if (!strcmp(mode, "silent"))
        return 0;
    if (!strcmp(mode, "garbage"))
        return write_all(fd, junk, 40) < 0 ? -1 : 0;
    if (!strcmp(mode, "pd600"))
        return write_all(fd, req600, sizeof(req600)) < 0 ? -1 : 0;
    if (!strcmp(mode, "stall"))
        return write_all(fd, "MPA ID Req", 10) < 0 ? -1 : 0;
    if (!strcmp(mode, "garbage-reply")) {
        read_some(fd, 20);
        return write_all(fd, junk, 40) < 0 ? -1 : 0;
    }
    if (!strcmp(mode, "half-reply")) {
        read_some(fd, 20);
        return write_all(fd, "MPA ID Rep", 10) < 0 ? -1 : 0;
    }
    return -1;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IONBF, 0);
    struct sockaddr_in a;
    memset(&a, 0, sizeof(a));
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int fd;
    const char *mode;
    if (argc == 3 && !strcmp(argv[1], "listen")) {
        mode = argv[2];
        int l = socket(AF_INET, SOCK_STREAM, 0);
        socklen_t al = sizeof(a);
        if (l < 0 || bind(l, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(l, 1) < 0 ||
            getsockname(l, (struct sockaddr *)&a, &al) < 0) {
            perror("silent_peer: listen");
            return 2;
        }
        printf("%u\n", (unsigned)ntohs(a.sin_port));
        fd = accept(l, NULL, NULL);
        close(l);
        if (fd < 0) {
            perror("silent_peer: accept");
            return 2;
        }
    } else if (argc == 4 && !strcmp(argv[1], "connect")) {
        mode = argv[3];
        a.sin_port = htons((unsigned short)atoi(argv[2]));
        fd = socket(AF_INET, SOCK_STREAM, 0);
        if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
            perror("silent_peer: connect");
            return 2;
        }
    } else {
        fprintf(stderr, "usage: silent_peer listen MODE | connect PORT MODE\n");
        return 2;
    }
    long long t0 = now_ms();
    if (act(fd, mode) < 0) {
        fprintf(stderr, "silent_peer: unknown mode or write failed: %s\n", mode);
        return 2;
    }
    int rc = wait_closed(fd, t0);
    close(fd);
    return rc;
}
