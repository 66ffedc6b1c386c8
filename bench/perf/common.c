/* Helpers shared by the uwarp and TCP halves of uwarp-perf. */
#define _GNU_SOURCE
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "perf.h"

uint64_t perf_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void perf_cpustat_read(perf_cpustat *s)
{
    memset(s, 0, sizeof(*s));
    FILE *f = fopen("/proc/stat", "r");
    if (!f)
        return;
    /* cpu user nice system idle iowait irq softirq steal ...; guest time is
     * already inside user, so the first eight fields are the whole. */
    unsigned long long v[8];
    if (fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3], &v[4],
               &v[5], &v[6], &v[7]) == 8) {
        for (int i = 0; i < 8; i++)
            s->total += v[i];
        s->steal = v[7];
        s->ok = true;
    }
    fclose(f);
}

double perf_steal_share(const perf_cpustat *a, const perf_cpustat *b)
{
    if (!a->ok || !b->ok || b->total <= a->total)
        return -1;
    return (double)(b->steal - a->steal) / (double)(b->total - a->total);
}

uint64_t perf_cpu_ns(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ((uint64_t)ru.ru_utime.tv_sec + (uint64_t)ru.ru_stime.tv_sec) * 1000000000u +
           ((uint64_t)ru.ru_utime.tv_usec + (uint64_t)ru.ru_stime.tv_usec) * 1000u;
}

void perf_put32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

uint32_t perf_get32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

void perf_put64(uint8_t *p, uint64_t v)
{
    perf_put32(p, (uint32_t)(v >> 32));
    perf_put32(p + 4, (uint32_t)v);
}

uint64_t perf_get64(const uint8_t *p)
{
    return (uint64_t)perf_get32(p) << 32 | perf_get32(p + 4);
}

void perf_hdr_encode(const perf_cfg *c, uint8_t out[PERF_HDR_LEN])
{
    memset(out, 0, PERF_HDR_LEN);
    perf_put32(out, PERF_MAGIC);
    out[4] = 1; /* version */
    out[5] = (uint8_t)c->op;
    out[6] = c->lat ? 1 : 0;
    out[7] = (uint8_t)((c->busy ? 1 : 0) | (c->crc ? 2 : 0) | (c->markers ? 4 : 0) |
                       (c->tcp_crc ? 8 : 0) | (c->nodelay > 0 ? 16 : 0));
    perf_put32(out + 8, c->size);
    perf_put32(out + 12, c->depth);
    perf_put32(out + 16, c->fpdu);
    /* Octets 20-23 were zero before stream/rr/idle: older servers reject
     * those ops by number, and 0 here means nothing to the other ops. */
    perf_put32(out + 20, c->idle_conns);
}

int perf_hdr_decode(const uint8_t in[PERF_HDR_LEN], perf_cfg *c)
{
    if (perf_get32(in) != PERF_MAGIC || in[4] != 1 || in[5] < OP_WRITE || in[5] > OP_IDLE)
        return -1;
    c->op = in[5];
    c->lat = in[6] != 0;
    c->busy = (in[7] & 1) != 0;
    c->crc = (in[7] & 2) != 0;
    c->markers = (in[7] & 4) != 0;
    c->tcp_crc = (in[7] & 8) != 0;
    c->nodelay = (in[7] & 16) != 0;
    c->size = perf_get32(in + 8);
    c->depth = perf_get32(in + 12);
    c->fpdu = perf_get32(in + 16);
    c->idle_conns = perf_get32(in + 20);
    if (c->size > (64u << 20) || c->depth == 0 || c->depth > 4096 || c->idle_conns > PERF_IDLE_MAX)
        return -1;
    return 0;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

void perf_lat_stats(double *s, size_t n, perf_res *r)
{
    if (!n)
        return;
    qsort(s, n, sizeof(*s), cmp_d);
    double sum = 0;
    for (size_t i = 0; i < n; i++)
        sum += s[i];
    r->lat_mean = sum / (double)n;
    r->lat_p50 = s[n / 2];
    r->lat_p99 = s[(size_t)((double)(n - 1) * 0.99)];
    r->lat_p999 = s[(size_t)((double)(n - 1) * 0.999)];
}

int perf_resolve(const char *host, int port, void *ss, unsigned *len)
{
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *ai;
    char ps[16];
    snprintf(ps, sizeof(ps), "%d", port);
    if (getaddrinfo(host, ps, &hints, &ai) != 0)
        return -1;
    memcpy(ss, ai->ai_addr, ai->ai_addrlen);
    *len = (unsigned)ai->ai_addrlen;
    freeaddrinfo(ai);
    return 0;
}

void perf_ready(int ready_fd, bool ok)
{
    uint8_t b = ok ? 0 : 1;
    if (ready_fd < 0)
        return;
    if (write(ready_fd, &b, 1) != 1)
        perror("uwarp-perf: reporting the listener");
    close(ready_fd);
}
