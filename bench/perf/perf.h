/* uwarp-perf: RDMA Write/Read/Send throughput and Send latency over uwarp,
 * byte-stream throughput and request/response latency over SDP sockets,
 * and the same patterns over plain TCP for the ratio that matters. */
#ifndef UW_PERF_H
#define UW_PERF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* OP_STREAM, OP_RR: byte-stream ops over SDP sockets (uwarp/sdp.h) and
 * plain TCP sockets; OP_IDLE: the idle-connection memory test (--idle-mem). */
enum { OP_WRITE = 1, OP_READ = 2, OP_SEND = 3, OP_STREAM = 4, OP_RR = 5, OP_IDLE = 6 };

typedef struct perf_cfg {
    int op;
    bool lat;
    uint32_t size;
    uint32_t depth;
    uint32_t post_list; /* requests per uw_post_send(), messages per TCP sendmsg() (0: depth) */
    unsigned qps;
    double duration; /* seconds; used when iters == 0 */
    uint64_t iters;
    bool busy;
    bool crc, markers;
    int rev;
    uint32_t fpdu;  /* uwarp: largest ULPDU sent (0: from the TCP MSS) */
    bool tcp_crc;   /* TCP baseline: CRC32c over every payload octet on both sides */
    const char *cc; /* congestion control, both transports */
    int timeout_ms;
    int nodelay;         /* stream/rr: TCP_NODELAY on both transports and sides
                            (-1: the op's default: rr on, stream off) */
    uint32_t idle_conns; /* OP_IDLE: connections to open and hold */
    int sdp_bufs;        /* SDP: receive Private Buffers per connection (0: the library's) */
    int sdp_rcvbuf;      /* SDP: their size in octets (0: the library's) */
    int zcopy_min;       /* SDP: UW_SDP_ZCOPY_THRESHOLD (-1: the library's default) */
    int sdp_mode;        /* SDP client: UW_SDP_MODE asked for after setup (-1: none) */
} perf_cfg;

typedef struct perf_res {
    double secs;
    uint64_t bytes, msgs;
    double cpu_client_ns, cpu_server_ns;         /* user+sys */
    double lat_mean, lat_p50, lat_p99, lat_p999; /* microseconds, one way (RTT/2) */
    double steal;      /* share of all CPU time the hypervisor took meanwhile; < 0: unknown */
    uint64_t sdp_msgs; /* SDP stream/rr: Data messages the client sent (0: not SDP) */
    /* SDP client, how its payload went: copied into messages, RDMA-Read by
     * the peer (Read Zcopy), RDMA-Written by us (Write Zcopy). */
    uint64_t sdp_bcopy, sdp_zread, sdp_zwrite;
    char err[256];
} perf_res;

/* Wire header both transports send first (config), 32 octets big-endian. */
#define PERF_MAGIC 0x55575046u /* "UWPF" */
#define PERF_HDR_LEN 32u
#define PERF_IDLE_MAX 100000u /* --idle-mem connections, at most */
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

/* Servers: run forever (or until a fatal error), one listener each. Each
 * writes one octet to ready_fd (0: listening, 1: failed) and closes it. */
int perf_uw_server(const char *addr, int port, const perf_cfg *base, int ready_fd);
int perf_tcp_server(const char *addr, int port, const perf_cfg *base, int ready_fd);
void perf_ready(int ready_fd, bool ok);
/* Clients: one measurement. Return 0 and fill r, or -1 with r->err set. */
int perf_uw_client(const char *host, int port, const perf_cfg *c, perf_res *r);
int perf_tcp_client(const char *host, int port, const perf_cfg *c, perf_res *r);

int perf_resolve(const char *host, int port, void *ss, unsigned *len);

/* perf_sdp.c: stream, rr and the idle-memory test over SDP sockets and over
 * plain TCP, one loop for both transports. The SDP server listens on the
 * uwarp port + 2; the TCP server hands stream, rr and idle tests to
 * perf_tcp_serve_stream() on its accepted, configured socket. */
int perf_sdp_server(const char *addr, int port, const perf_cfg *base, int ready_fd);
int perf_sdp_client(const char *host, int port, const perf_cfg *c, perf_res *r);
void perf_tcp_serve_stream(int fd, const perf_cfg *c);
int perf_tcp_stream_client(const char *host, int port, const perf_cfg *c, perf_res *r);

/* --idle-mem: memory per idle connection. RSS deltas of the client and the
 * server process divided by the connections, and the host's kernel memory
 * delta (slab + TCP buffers; on loopback both ends) per connection. */
typedef struct perf_mem {
    uint32_t conns;
    double client_rss, server_rss, kernel; /* bytes per connection */
    double setup_secs;                     /* opening all of them */
    char err[256];
} perf_mem;
int perf_idle_mem(const char *host, int port, bool sdp, const perf_cfg *c, perf_mem *m);

#endif
