/* uwarp-perf: RDMA Write/Read/Send throughput and Send latency over uwarp,
 * and the same patterns over plain TCP for the ratio that matters. */
#ifndef UW_PERF_H
#define UW_PERF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum { OP_WRITE = 1, OP_READ = 2, OP_SEND = 3 };

typedef struct perf_cfg {
    int op;
    bool lat;
    uint32_t size;
    uint32_t depth;
    uint32_t post_list; /* requests per uw_post_send(), messages per TCP sendmsg() (0: depth) */
    unsigned qps;
    double duration;   /* seconds; used when iters == 0 */
    uint64_t iters;
    bool busy;
    bool crc, markers;
    int rev;
    uint32_t fpdu;     /* uwarp: largest ULPDU sent (0: from the TCP MSS) */
    bool tcp_crc;      /* TCP baseline: CRC32c over every payload octet on both sides */
    const char *cc;    /* congestion control, both transports */
    int timeout_ms;
} perf_cfg;

typedef struct perf_res {
    double secs;
    uint64_t bytes, msgs;
    double cpu_client_ns, cpu_server_ns; /* user+sys */
    double lat_mean, lat_p50, lat_p99, lat_p999; /* microseconds, one way (RTT/2) */
    double steal; /* share of all CPU time the hypervisor took meanwhile; < 0: unknown */
    char err[256];
} perf_res;

/* Wire header both transports send first (config), 32 octets big-endian. */
#define PERF_MAGIC 0x55575046u /* "UWPF" */
#define PERF_HDR_LEN 32u
void perf_hdr_encode(const perf_cfg *c, uint8_t out[PERF_HDR_LEN]);
int perf_hdr_decode(const uint8_t in[PERF_HDR_LEN], perf_cfg *c);

uint64_t perf_now_ns(void);

/* Steal time: on a shared VM the hypervisor runs other guests on our CPUs,
 * and both transports slow down by whatever it takes. Read before and after
 * a run; perf_steal_share() is the share of the machine's CPU time stolen in
 * between, or -1 when /proc/stat does not say. */
typedef struct perf_cpustat {
    uint64_t steal, total;
    bool ok;
} perf_cpustat;
void perf_cpustat_read(perf_cpustat *s);
double perf_steal_share(const perf_cpustat *before, const perf_cpustat *after);
uint64_t perf_cpu_ns(void);
void perf_lat_stats(double *samples, size_t n, perf_res *r);
void perf_put64(uint8_t *p, uint64_t v);
uint64_t perf_get64(const uint8_t *p);
void perf_put32(uint8_t *p, uint32_t v);
uint32_t perf_get32(const uint8_t *p);

/* Servers: run forever (or until a fatal error), one listener each. */
int perf_uw_server(const char *addr, int port, const perf_cfg *base);
int perf_tcp_server(const char *addr, int port, const perf_cfg *base);
/* Clients: one measurement. Return 0 and fill r, or -1 with r->err set. */
int perf_uw_client(const char *host, int port, const perf_cfg *c, perf_res *r);
int perf_tcp_client(const char *host, int port, const perf_cfg *c, perf_res *r);

int perf_resolve(const char *host, int port, void *ss, unsigned *len);

#endif
