/* Request/response latency of one connection, for comparing a preloaded run
 * with a plain one (not a timed test: bench figures only).
 *
 *   pl_pingpong server PORT            serves one connection (echo)
 *   pl_pingpong client PORT N SIZE     N round trips of SIZE octets,
 *                                      TCP_NODELAY; prints p50/p99 in us
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static int io_all(int fd, char *b, size_t n, int rd)
{
    while (n) {
        ssize_t r = rd ? read(fd, b, n) : write(fd, b, n);
        if (r <= 0)
            return -1;
        b += r;
        n -= (size_t)r;
    }
    return 0;
}

static int cmp_u64(const void *a, const void *b)
{
    unsigned long long x = *(const unsigned long long *)a, y = *(const unsigned long long *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    if (argc < 3)
        return 2;
    int port = atoi(argv[2]), one = 1;
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    char buf[65536];
    if (!strcmp(argv[1], "server")) {
        int l = socket(AF_INET, SOCK_STREAM, 0);
        setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        if (bind(l, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(l, 4) < 0)
            return 1;
        printf("listening\n");
        fflush(stdout);
        int c = accept(l, NULL, NULL);
        setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        for (;;) {
            ssize_t r = read(c, buf, sizeof(buf));
            if (r <= 0)
                break;
            if (io_all(c, buf, (size_t)r, 0) < 0)
                break;
        }
        close(c);
        close(l);
        return 0;
    }
    if (argc < 5)
        return 2;
    long n = atol(argv[3]);
    size_t size = (size_t)atol(argv[4]);
    if (size > sizeof(buf) || n < 1)
        return 2;
    int s = socket(AF_INET, SOCK_STREAM, 0);
    if (connect(s, (struct sockaddr *)&a, sizeof(a)) < 0)
        return 1;
    setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    memset(buf, 'p', size);
    unsigned long long *t = malloc((size_t)n * sizeof(*t));
    for (long i = 0; i < n; i++) {
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        if (io_all(s, buf, size, 0) < 0 || io_all(s, buf, size, 1) < 0)
            return 1;
        clock_gettime(CLOCK_MONOTONIC, &t1);
        t[i] = (unsigned long long)(t1.tv_sec - t0.tv_sec) * 1000000000ull +
               (unsigned long long)(t1.tv_nsec - t0.tv_nsec);
    }
    qsort(t, (size_t)n, sizeof(*t), cmp_u64);
    printf("%ld round trips of %zu octets: p50 %.1f us, p99 %.1f us\n", n, size,
           (double)t[n / 2] / 1000.0, (double)t[n * 99 / 100] / 1000.0);
    close(s);
    free(t);
    return 0;
}
