/* uwarp-perf: throughput and latency of uwarp, and of SDP sockets over
 * uwarp, against raw TCP on the same machine, in the same run. See
 * `uwarp-perf --help`. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "perf.h"

static void usage(FILE *f)
{
    fprintf(f, "usage: uwarp-perf -l [ADDR:]PORT [--cc NAME] [--no-crc] [--markers]\n"
               "       uwarp-perf [OPTIONS] HOST PORT\n"
               "\n"
               "The server listens for uwarp on PORT, for the TCP baseline on PORT+1 and\n"
               "for SDP sockets on PORT+2 (PORT 0: any free three), and prints\n"
               "'listening on ADDR:PORT' once all three are up. The client measures;\n"
               "every figure is payload octets.\n"
               "\n"
               "  --op write|read|send   uwarp verbs operation (default write)\n"
               "  --op stream|rr         SDP sockets (uwarp/sdp.h) against TCP sockets, same\n"
               "                         loop: stream: one send() of --size octets after the\n"
               "                         other, counted where received; rr: --size octets\n"
               "                         each way, ping-pong (latency as --lat; msg/s are\n"
               "                         round trips). One connection each\n"
               "  --nodelay, --no-nodelay stream/rr: TCP_NODELAY on or off for both transports\n"
               "                         and both sides (default: rr on, stream off, as a\n"
               "                         typical application; write/read/send: TCP always on)\n"
               "  --sdp-bufs N, --sdp-rcvbuf-size N\n"
               "                         SDP: receive Private Buffers per connection and their\n"
               "                         size (default: the library's); each side's apply to\n"
               "                         what it receives: give the server (-l) the same\n"
               "  --zcopy-min N          SDP: zero-copy threshold (UW_SDP_ZCOPY_THRESHOLD) of\n"
               "                         both sides' sockets, 0 never (default: the library's,\n"
               "                         $UWARP_SDP_ZCOPY_MIN); give the server the same\n"
               "  --sdp-mode M           SDP client: ask for flow-control mode buffered,\n"
               "                         combined (Read Zcopy only) or pipelined (Write Zcopy\n"
               "                         into the server's advertised receives) after setup\n"
               "  --idle-mem N           open N idle SDP connections, then N idle TCP ones,\n"
               "                         and print the memory each takes: RSS growth of the\n"
               "                         client and of the server process per connection,\n"
               "                         and the host's kernel memory (slab + TCP buffers;\n"
               "                         on loopback both ends) per connection\n"
               "  --size N               message size (K/M suffixes; default 65536)\n"
               "  --sizes LIST           a sweep, e.g. 64,4K,64K,1M\n"
               "  --duration S           seconds per measurement (default 2)\n"
               "  --iters N              messages per measurement instead of a duration\n"
               "  --qps N                connections (default 1)\n"
               "  --depth N              outstanding work requests per connection (default 16)\n"
               "  --post-list N          write/send: requests per call on both transports:\n"
               "                         uwarp hands up to N work requests to one\n"
               "                         uw_post_send(), TCP writes N messages with one\n"
               "                         sendmsg() (default 1; 0: depth)\n"
               "  --bw                   throughput and message rate (default)\n"
               "  --lat                  ping-pong latency of Sends (mean, p50, p99, p99.9;\n"
               "                         one way = RTT/2)\n"
               "  --markers              MPA markers on\n"
               "  --fpdu N               uwarp: largest FPDU payload (ULPDU) sent, >= 128\n"
               "                         (default: as large as the TCP MSS allows)\n"
               "  --no-crc               prefer no MPA CRC (uwarp and SDP)\n"
               "  --rev 1|2              MPA revision (default 2)\n"
               "  --busy-poll            spin instead of blocking waits (both transports;\n"
               "                         stream/rr: MSG_DONTWAIT calls in a loop)\n"
               "  --cpu                  report user+sys CPU ns per payload byte on both sides\n"
               "  --vs-tcp               also measure plain TCP and print uwarp/TCP (stream/rr:\n"
               "                         SDP/TCP) ratios\n"
               "  --tcp-only             measure only the TCP baseline\n"
               "  --tcp-crc              the TCP baseline also runs CRC32c over every payload\n"
               "                         octet on both sides: what the CRC alone costs here\n"
               "  --repeat N             measure each configuration N times, report the median "
               "(default 1);\n"
               "                         with --vs-tcp the two transports take turns\n"
               "  --max-steal PCT        measure a run again when the hypervisor took more than\n"
               "                         PCT%% of the CPUs meanwhile (steal; at most --repeat\n"
               "                         extra runs); every run reports its steal\n"
               "  --cc NAME              TCP congestion control for both transports (default: the "
               "system's)\n"
               "  --json                 one JSON object per line per measurement\n"
               "  --timeout S            connection setup timeout (default 10)\n"
               "Exit status: 0 ok, 1 usage, 2 measurement failed.\n");
}

static uint64_t parse_size(const char *s, bool *ok)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    uint64_t m = 1;
    if (*end == 'K' || *end == 'k')
        m = 1024, end++;
    else if (*end == 'M' || *end == 'm')
        m = 1024 * 1024, end++;
    else if (*end == 'G' || *end == 'g')
        m = 1024ull * 1024 * 1024, end++;
    *ok = end != s && *end == 0 && errno == 0;
    return v * m;
}

static const char *op_name(int op)
{
    switch (op) {
    case OP_WRITE:
        return "write";
    case OP_READ:
        return "read";
    case OP_SEND:
        return "send";
    case OP_STREAM:
        return "stream";
    case OP_RR:
        return "rr";
    default:
        return "idle";
    }
}

static bool is_sock_op(const perf_cfg *c)
{
    return c->op == OP_STREAM || c->op == OP_RR;
}

/* The transport measured against TCP: uwarp verbs, or SDP sockets. */
static const char *xport_name(const perf_cfg *c)
{
    return is_sock_op(c) ? "sdp" : "uwarp";
}

static const char *mode_name(const perf_cfg *c)
{
    if (c->markers)
        return "mk";
    if (is_sock_op(c))
        return c->nodelay > 0 ? (c->crc ? "crc+nd" : "nocrc+nd") : (c->crc ? "crc" : "nocrc");
    return c->crc ? "crc" : "nocrc";
}

/* Above this share of stolen CPU time a run's figures are not to be trusted
 * at the 5% level: at 26-39% steal, 3 s runs of the same TCP test ranged
 * from 0.3 to 3.7 GB/s. */
#define STEAL_WARN 0.05

static char default_cc[32];

static const char *system_cc(void)
{
    FILE *f = fopen("/proc/sys/net/ipv4/tcp_congestion_control", "r");
    if (!f)
        return NULL;
    if (!fgets(default_cc, sizeof(default_cc), f))
        default_cc[0] = 0;
    fclose(f);
    default_cc[strcspn(default_cc, "\n")] = 0;
    return default_cc[0] ? default_cc : NULL;
}

/* BBR without the fq qdisc paces inside TCP with a timer. Across a veth
 * pair that cost plain TCP's Write 1 MiB 3.5x the CPU per byte of cubic and
 * held it to 2.9 GB/s where cubic moved 10-11 (AMD EPYC, 2026-11-25), so a
 * ratio taken under it compares against the pacing's cost. Say so. */
static void bbr_note(const perf_cfg *c, bool baseline)
{
    const char *cc = c->cc ? c->cc : system_cc();
    if (!baseline || !cc || strcmp(cc, "bbr") != 0)
        return;
    char q[32] = "";
    FILE *f = fopen("/proc/sys/net/core/default_qdisc", "r");
    if (f) {
        if (!fgets(q, sizeof(q), f))
            q[0] = 0;
        fclose(f);
    }
    if (strncmp(q, "fq", 2) == 0 && (q[2] == '\n' || q[2] == 0))
        return;
    fprintf(stderr,
            "uwarp-perf: note: congestion control bbr with no fq qdisc paces inside TCP with a\n"
            "  timer, which on loopback and veth costs TCP several times the CPU per byte\n"
            "  of cubic; the ratio compares against that. --cc cubic compares the\n"
            "  transports' own costs.\n");
}

static int cmp_res(const void *a, const void *b)
{
    const perf_res *x = a, *y = b;
    double bx = x->bytes / x->secs, by = y->bytes / y->secs;
    if (x->lat_p50 || y->lat_p50)
        return x->lat_p50 < y->lat_p50 ? -1 : x->lat_p50 > y->lat_p50;
    return bx < by ? -1 : bx > by;
}

static void print_one(const perf_cfg *c, const char *transport, const perf_res *r, bool json,
                      bool cpu)
{
    double gbps = (double)r->bytes / r->secs / 1e9, rate = (double)r->msgs / r->secs;
    double cc = r->bytes ? r->cpu_client_ns / (double)r->bytes : 0;
    double cs = r->bytes ? r->cpu_server_ns / (double)r->bytes : 0;
    if (json) {
        printf("{\"op\":\"%s\",\"size\":%u,\"transport\":\"%s\",\"crc\":%s,\"markers\":%s,"
               "\"qps\":%u,\"depth\":%u,\"post_list\":%u,\"fpdu\":%u,\"busy_poll\":%s,"
               "\"cc\":\"%s\",\"secs\":%.3f,"
               "\"bytes\":%llu,\"bw_gbps\":%.4f,\"msg_rate\":%.1f",
               op_name(c->op), c->size, transport, c->crc ? "true" : "false",
               c->markers ? "true" : "false", c->qps, c->depth, c->post_list, c->fpdu,
               c->busy ? "true" : "false", c->cc ? c->cc : "", r->secs,
               (unsigned long long)r->bytes, gbps, rate);
        if (is_sock_op(c))
            printf(",\"nodelay\":%s", c->nodelay > 0 ? "true" : "false");
        if (is_sock_op(c) && (c->sdp_bufs || c->sdp_rcvbuf))
            printf(",\"sdp_bufs\":%d,\"sdp_rcvbuf_size\":%d", c->sdp_bufs, c->sdp_rcvbuf);
        if (r->sdp_msgs)
            printf(",\"sdp_data_msgs\":%llu", (unsigned long long)r->sdp_msgs);
        if (is_sock_op(c) && !strcmp(transport, "sdp"))
            printf(",\"zcopy_min\":%d,\"sdp_mode\":%d,\"bcopy_bytes\":%llu,"
                   "\"rdma_read_bytes\":%llu,\"rdma_write_bytes\":%llu",
                   c->zcopy_min, c->sdp_mode, (unsigned long long)r->sdp_bcopy,
                   (unsigned long long)r->sdp_zread, (unsigned long long)r->sdp_zwrite);
        if (c->lat)
            printf(",\"lat_us\":{\"mean\":%.2f,\"p50\":%.2f,\"p99\":%.2f,\"p999\":%.2f}",
                   r->lat_mean, r->lat_p50, r->lat_p99, r->lat_p999);
        printf(",\"cpu_ns_per_byte\":{\"client\":%.4f,\"server\":%.4f}", cc, cs);
        if (r->steal >= 0)
            printf(",\"host_steal\":%.4f}\n", r->steal);
        else
            printf(",\"host_steal\":null}\n");
    } else {
        printf("%-6s %-6s %9u %-8s %9.3f %12.0f", transport, op_name(c->op), c->size, mode_name(c),
               gbps, rate);
        if (c->lat)
            printf("  lat us mean %.2f p50 %.2f p99 %.2f p99.9 %.2f", r->lat_mean, r->lat_p50,
                   r->lat_p99, r->lat_p999);
        if (cpu)
            printf("  cpu ns/B client %.3f server %.3f", cc, cs);
        if (r->steal >= 0)
            printf("  steal %.0f%%", r->steal * 100);
        uint64_t moved = r->sdp_bcopy + r->sdp_zread + r->sdp_zwrite;
        if (moved && (r->sdp_zread || r->sdp_zwrite))
            printf("  bcopy %.0f%% read %.0f%% write %.0f%%",
                   100.0 * (double)r->sdp_bcopy / (double)moved,
                   100.0 * (double)r->sdp_zread / (double)moved,
                   100.0 * (double)r->sdp_zwrite / (double)moved);
        printf("\n");
    }
    fflush(stdout);
}

static int one_run(const char *host, int port, perf_cfg *c, bool tcp, perf_res *r)
{
    perf_cpustat s0, s1;
    perf_cpustat_read(&s0);
    int e = tcp             ? perf_tcp_client(host, port + 1, c, r)
            : is_sock_op(c) ? perf_sdp_client(host, port + 2, c, r)
                            : perf_uw_client(host, port, c, r);
    perf_cpustat_read(&s1);
    r->steal = perf_steal_share(&s0, &s1);
    if (e < 0)
        fprintf(stderr, "uwarp-perf: %s %s %u: %s\n", tcp ? "tcp" : xport_name(c), op_name(c->op),
                c->size, r->err);
    return e;
}

static double bw_of(const perf_res *r)
{
    return r->secs > 0 ? (double)r->bytes / r->secs : 0;
}

static int cmp_dbl(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median_of(double *v, int n)
{
    qsort(v, (size_t)n, sizeof(v[0]), cmp_dbl);
    return n ? v[n / 2] : 0;
}

/* --idle-mem: SDP, then TCP, then the ratio. */
static int idle_mem(const char *host, int port, perf_cfg *c, bool json)
{
    perf_mem m[2];
    const char *name[2] = {"sdp", "tcp"};
    for (int i = 0; i < 2; i++) {
        int p = i == 0 ? port + 2 : port + 1;
        if (perf_idle_mem(host, p, i == 0, c, &m[i]) < 0) {
            fprintf(stderr, "uwarp-perf: %s idle connections: %s\n", name[i], m[i].err);
            return -1;
        }
    }
    if (!json) {
        printf("# uwarp-perf idle connections: %u per transport; bytes per connection\n"
               "# (RSS growth of each process; kernel: slab + TCP buffers of this host)\n",
               c->idle_conns);
        printf("%-6s %7s %14s %14s %14s %9s\n", "xport", "conns", "client RSS", "server RSS",
               "kernel", "setup s");
    }
    for (int i = 0; i < 2; i++) {
        if (json)
            printf("{\"op\":\"idle_mem\",\"transport\":\"%s\",\"conns\":%u,\"crc\":%s,"
                   "\"bytes_per_conn\":{\"client_rss\":%.1f,\"server_rss\":%.1f,"
                   "\"kernel\":%.1f},\"setup_secs\":%.3f}\n",
                   name[i], m[i].conns, c->crc ? "true" : "false", m[i].client_rss, m[i].server_rss,
                   m[i].kernel, m[i].setup_secs);
        else
            printf("%-6s %7u %14.1f %14.1f %14.1f %9.3f\n", name[i], m[i].conns, m[i].client_rss,
                   m[i].server_rss, m[i].kernel, m[i].setup_secs);
    }
    double su = m[0].client_rss + m[0].server_rss, tu = m[1].client_rss + m[1].server_rss;
    double sa = su + m[0].kernel, ta = tu + m[1].kernel;
    if (json)
        printf("{\"op\":\"idle_mem\",\"transport\":\"diff\",\"baseline\":\"tcp\","
               "\"user_bytes_per_conn_more\":%.1f,\"all_bytes_per_conn_more\":%.1f,"
               "\"ratio_all\":%.4f}\n",
               su - tu, sa - ta, ta > 0 ? sa / ta : 0);
    else
        printf("sdp - tcp: %+.1f user-space bytes per connection (both processes), %+.1f "
               "with the kernel's (%.2f x TCP)\n",
               su - tu, sa - ta, ta > 0 ? sa / ta : 0);
    fflush(stdout);
    return 0;
}

/* Runs the configuration repeat times per transport, uwarp and TCP taking
 * turns, so that both see the same background noise (on a shared VM it comes
 * in bursts of seconds), and keeps each transport's median. Also the median
 * of the ratios of adjacent uwarp/TCP pairs (*paired_bw, *paired_lat): a
 * burst that slows one pair then moves one ratio, not a whole median.
 * With max_steal >= 0 a pair during which the hypervisor took more than that
 * share of the CPUs is measured again, at most repeat times in all, so that
 * a noisy hour still ends. *worst_steal: the most any kept run saw. */
static int measure(const char *host, int port, perf_cfg *c, bool do_u, bool do_t, int repeat,
                   double max_steal, perf_res *ru, perf_res *rt, double *paired_bw,
                   double *paired_lat, double *worst_steal)
{
    perf_res us[16], ts[16];
    double pb[16], pl[16];
    if (repeat > 16)
        repeat = 16;
    int again = repeat;
    *worst_steal = -1;
    for (int i = 0; i < repeat; i++) {
        if (do_u && one_run(host, port, c, false, &us[i]) < 0)
            return -1;
        if (do_t && one_run(host, port, c, true, &ts[i]) < 0)
            return -1;
        double st = do_u ? us[i].steal : -1;
        if (do_t && ts[i].steal > st)
            st = ts[i].steal;
        if (max_steal >= 0 && st > max_steal && again > 0) {
            again--;
            fprintf(stderr,
                    "uwarp-perf: run %d of %d saw %.0f%% steal (over --max-steal %.0f): "
                    "measuring it again\n",
                    i + 1, repeat, st * 100, max_steal * 100);
            i--;
            continue;
        }
        if (st > *worst_steal)
            *worst_steal = st;
        if (do_u && do_t) {
            pb[i] = bw_of(&ts[i]) > 0 ? bw_of(&us[i]) / bw_of(&ts[i]) : 0;
            pl[i] = ts[i].lat_p50 > 0 ? us[i].lat_p50 / ts[i].lat_p50 : 0;
        }
    }
    if (do_u && do_t) {
        *paired_bw = median_of(pb, repeat);
        *paired_lat = median_of(pl, repeat);
    }
    if (do_u) {
        qsort(us, (size_t)repeat, sizeof(us[0]), cmp_res);
        *ru = us[repeat / 2];
    }
    if (do_t) {
        qsort(ts, (size_t)repeat, sizeof(ts[0]), cmp_res);
        *rt = ts[repeat / 2];
    }
    return 0;
}

/* The server is three processes, one per transport, so a stalled or dead
 * half never stalls another's measurement. Each reports over a pipe whether
 * its listener is up, and the "listening on" line comes only once all three
 * are: a script that waits for it never connects too early or to a half
 * that failed to bind. Port 0 takes a free port from the kernel and tries
 * again when another socket already holds PORT+1 or PORT+2. */
typedef int (*server_fn)(const char *addr, int port, const perf_cfg *base, int ready_fd);

static int start_half(server_fn fn, const char *host, int port, const perf_cfg *c, pid_t *pid)
{
    int pfd[2];
    if (pipe2(pfd, O_CLOEXEC) < 0)
        return -1;
    pid_t parent = getpid();
    *pid = fork();
    if (*pid == 0) {
        close(pfd[0]);
        /* A half goes when the supervisor does, however it ends. */
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        if (getppid() != parent)
            _exit(2);
        _exit(fn(host, port, c, pfd[1]) < 0 ? 2 : 0);
    }
    close(pfd[1]);
    if (*pid < 0) {
        close(pfd[0]);
        return -1;
    }
    return pfd[0];
}

/* True once every half said its listener is up; false when one failed, died
 * or said nothing for 30 s. */
static bool halves_ready(const int *fds, int n)
{
    for (int i = 0; i < n; i++) {
        struct pollfd p = {.fd = fds[i], .events = POLLIN};
        uint8_t b = 1;
        if (fds[i] < 0 || poll(&p, 1, 30000) != 1 || read(fds[i], &b, 1) != 1 || b != 0)
            return false;
    }
    return true;
}

static int free_port(const char *host)
{
    struct sockaddr_storage ss;
    unsigned sl;
    if (perf_resolve(host, 0, &ss, &sl) < 0)
        return -1;
    int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    socklen_t len = sizeof(ss);
    int port = -1;
    if (fd >= 0 && bind(fd, (struct sockaddr *)&ss, sl) == 0 &&
        getsockname(fd, (struct sockaddr *)&ss, &len) == 0)
        port = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                              : ((struct sockaddr_in *)&ss)->sin_port);
    if (fd >= 0)
        close(fd);
    return port;
}

static int serve_all(const char *host, int port, const perf_cfg *c)
{
    static const server_fn fns[3] = {perf_uw_server, perf_tcp_server, perf_sdp_server};
    pid_t pids[3];
    int p = port;
    bool up = false;
    for (int attempt = 0; attempt < (port ? 1 : 20) && !up; attempt++) {
        if (!port && ((p = free_port(host)) <= 0 || p > 65533))
            continue;
        int fds[3];
        for (int i = 0; i < 3; i++)
            fds[i] = start_half(fns[i], host, p + i, c, &pids[i]);
        up = halves_ready(fds, 3);
        for (int i = 0; i < 3; i++) {
            if (fds[i] >= 0)
                close(fds[i]);
            if (!up && fds[i] >= 0) {
                kill(pids[i], SIGTERM);
                waitpid(pids[i], NULL, 0);
            }
        }
    }
    if (!up) {
        if (port)
            fprintf(stderr,
                    "uwarp-perf: cannot listen on ports %d-%d (see above); "
                    "choose another PORT, or 0 for any free one\n",
                    port, port + 2);
        else
            fprintf(stderr, "uwarp-perf: found no three free consecutive ports on %s\n", host);
        return 2;
    }
    bool v6 = strchr(host, ':') != NULL;
    fprintf(stderr, "uwarp-perf: listening on %s%s%s:%d (uwarp), %d (tcp) and %d (sdp), cc %s\n",
            v6 ? "[" : "", host, v6 ? "]" : "", p, p + 1, p + 2, c->cc ? c->cc : "default");
    fflush(stderr);
    /* Serve until a half ends; the others end with it. */
    int status = 0;
    pid_t done = wait(&status);
    for (int i = 0; i < 3; i++)
        if (pids[i] != done) {
            kill(pids[i], SIGTERM);
            waitpid(pids[i], NULL, 0);
        }
    return WIFEXITED(status) ? WEXITSTATUS(status) : 2;
}

int main(int argc, char **argv)
{
    perf_cfg c = {.op = OP_WRITE,
                  .size = 65536,
                  .depth = 16,
                  .post_list = 1,
                  .qps = 1,
                  .duration = 2,
                  .crc = true,
                  .rev = 2,
                  .timeout_ms = 10000,
                  .nodelay = -1,
                  .zcopy_min = -1,
                  .sdp_mode = -1};
    const char *listen_at = NULL, *sizes = NULL;
    bool json = false, vs_tcp = false, tcp_only = false, cpu = false;
    int repeat = 1;
    double max_steal = -1;
    static const struct option lo[] = {
        {"op", 1, 0, 'o'},        {"size", 1, 0, 's'},     {"sizes", 1, 0, 'S'},
        {"duration", 1, 0, 'd'},  {"iters", 1, 0, 'n'},    {"qps", 1, 0, 'q'},
        {"depth", 1, 0, 'D'},     {"lat", 0, 0, 'L'},      {"bw", 0, 0, 'B'},
        {"markers", 0, 0, 'm'},   {"no-crc", 0, 0, 'C'},   {"rev", 1, 0, 'r'},
        {"busy-poll", 0, 0, 'b'}, {"cpu", 0, 0, 'c'},      {"vs-tcp", 0, 0, 'v'},
        {"tcp-only", 0, 0, 'T'},  {"repeat", 1, 0, 'R'},   {"cc", 1, 0, 'g'},
        {"json", 0, 0, 'j'},      {"timeout", 1, 0, 't'},  {"fpdu", 1, 0, 'F'},
        {"tcp-crc", 0, 0, 'K'},   {"help", 0, 0, 'h'},     {"post-list", 1, 0, 'P'},
        {"max-steal", 1, 0, 'X'}, {"nodelay", 0, 0, 'N'},  {"no-nodelay", 0, 0, 'Y'},
        {"idle-mem", 1, 0, 'I'},  {"sdp-bufs", 1, 0, 'U'}, {"sdp-rcvbuf-size", 1, 0, 'Z'},
        {"zcopy-min", 1, 0, 'z'}, {"sdp-mode", 1, 0, 'M'}, {0, 0, 0, 0}};
    int o;
    bool ok = true;
    while ((o = getopt_long(argc, argv, "l:h", lo, NULL)) != -1) {
        switch (o) {
        case 'l':
            listen_at = optarg;
            break;
        case 'o':
            c.op = !strcmp(optarg, "write")    ? OP_WRITE
                   : !strcmp(optarg, "read")   ? OP_READ
                   : !strcmp(optarg, "send")   ? OP_SEND
                   : !strcmp(optarg, "stream") ? OP_STREAM
                   : !strcmp(optarg, "rr")     ? OP_RR
                                               : 0;
            ok &= c.op != 0;
            break;
        case 's':
            c.size = (uint32_t)parse_size(optarg, &ok);
            break;
        case 'S':
            sizes = optarg;
            break;
        case 'd':
            c.duration = atof(optarg);
            ok &= c.duration > 0;
            break;
        case 'n':
            c.iters = parse_size(optarg, &ok);
            break;
        case 'q':
            c.qps = (unsigned)atoi(optarg);
            ok &= c.qps >= 1 && c.qps <= 4096;
            break;
        case 'D':
            c.depth = (uint32_t)atoi(optarg);
            ok &= c.depth >= 1 && c.depth <= 1024;
            break;
        case 'P':
            c.post_list = (uint32_t)atoi(optarg);
            ok &= atoi(optarg) >= 0 && atoi(optarg) <= 1024;
            break;
        case 'L':
            c.lat = true;
            break;
        case 'N':
            c.nodelay = 1;
            break;
        case 'Y':
            c.nodelay = 0;
            break;
        case 'U':
            c.sdp_bufs = atoi(optarg);
            ok &= c.sdp_bufs >= 3 && c.sdp_bufs <= 512;
            break;
        case 'Z': {
            uint64_t v = parse_size(optarg, &ok);
            ok &= v >= 1024 && v <= (16u << 20);
            c.sdp_rcvbuf = (int)v;
            break;
        }
        case 'z': {
            uint64_t v = parse_size(optarg, &ok);
            ok &= v <= (1u << 30);
            c.zcopy_min = (int)v;
            break;
        }
        case 'M':
            c.sdp_mode = !strcmp(optarg, "buffered")    ? 0
                         : !strcmp(optarg, "combined")  ? 1
                         : !strcmp(optarg, "pipelined") ? 2
                                                        : -1;
            ok &= c.sdp_mode >= 0;
            break;
        case 'I': {
            uint64_t n = parse_size(optarg, &ok);
            ok &= n >= 1 && n <= PERF_IDLE_MAX;
            c.idle_conns = (uint32_t)n;
            break;
        }
        case 'B':
            c.lat = false;
            break;
        case 'm':
            c.markers = true;
            break;
        case 'K':
            c.tcp_crc = true;
            break;
        case 'F':
            c.fpdu = (uint32_t)parse_size(optarg, &ok);
            ok &= c.fpdu >= 128 && c.fpdu <= 65535;
            break;
        case 'C':
            c.crc = false;
            break;
        case 'r':
            c.rev = atoi(optarg);
            ok &= c.rev == 1 || c.rev == 2;
            break;
        case 'b':
            c.busy = true;
            break;
        case 'c':
            cpu = true;
            break;
        case 'v':
            vs_tcp = true;
            break;
        case 'T':
            tcp_only = true;
            break;
        case 'R':
            repeat = atoi(optarg);
            ok &= repeat >= 1 && repeat <= 16;
            break;
        case 'X':
            max_steal = atof(optarg) / 100;
            ok &= max_steal >= 0 && max_steal <= 1;
            break;
        case 'g':
            c.cc = optarg;
            break;
        case 'j':
            json = true;
            break;
        case 't':
            c.timeout_ms = atoi(optarg) * 1000;
            ok &= c.timeout_ms > 0;
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 1;
        }
    }
    if (!ok || c.size > (64u << 20)) {
        fprintf(stderr, "uwarp-perf: invalid option value (see --help)\n");
        return 1;
    }
    if (c.lat && c.op != OP_SEND && c.op != OP_RR) {
        fprintf(stderr, "uwarp-perf: --lat measures Send ping-pong: use --op send (or rr)\n");
        return 1;
    }
    if (is_sock_op(&c) || c.idle_conns) {
        if (c.qps != 1 || c.markers || c.fpdu || c.rev != 2) {
            fprintf(stderr, "uwarp-perf: stream, rr and --idle-mem take one connection per "
                            "test and no --markers, --fpdu or --rev\n");
            return 1;
        }
        if (c.op == OP_RR)
            c.lat = true; /* latency figures and ratios, as for --lat */
        if (c.nodelay < 0)
            c.nodelay = c.op == OP_RR ? 1 : 0;
    } else if (c.nodelay >= 0) {
        fprintf(stderr, "uwarp-perf: --nodelay/--no-nodelay are for --op stream and rr "
                        "(the other ops always set TCP_NODELAY)\n");
        return 1;
    }
    if (!c.cc)
        c.cc = system_cc();
    /* Many connections need many descriptors: take the hard limit. */
    struct rlimit nofile;
    if (getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur < nofile.rlim_max) {
        nofile.rlim_cur = nofile.rlim_max;
        setrlimit(RLIMIT_NOFILE, &nofile);
    }
    if (listen_at) {
        if (optind != argc) {
            usage(stderr);
            return 1;
        }
        char host[256] = "0.0.0.0";
        const char *colon = strrchr(listen_at, ':');
        const char *ps = listen_at;
        if (colon) {
            snprintf(host, sizeof(host), "%.*s", (int)(colon - listen_at), listen_at);
            ps = colon + 1;
        }
        int port = atoi(ps);
        if (port < 0 || port > 65533 || (port == 0 && strcmp(ps, "0") != 0)) {
            fprintf(stderr, "uwarp-perf: bad port '%s' (0..65533: PORT+2 is SDP's)\n", ps);
            return 1;
        }
        signal(SIGPIPE, SIG_IGN);
        return serve_all(host, port, &c);
    }
    if (argc - optind != 2) {
        usage(stderr);
        return 1;
    }
    const char *host = argv[optind];
    int port = atoi(argv[optind + 1]);
    signal(SIGPIPE, SIG_IGN);
    bbr_note(&c, vs_tcp || tcp_only);
    if (c.idle_conns) {
        c.op = OP_IDLE;
        return idle_mem(host, port, &c, json) < 0 ? 2 : 0;
    }
    uint32_t list[32];
    int nsz = 0;
    if (sizes) {
        char *dup = strdup(sizes), *save = NULL;
        for (char *t = strtok_r(dup, ",", &save); t && nsz < 32; t = strtok_r(NULL, ",", &save)) {
            list[nsz++] = (uint32_t)parse_size(t, &ok);
        }
        free(dup);
        if (!ok) {
            fprintf(stderr, "uwarp-perf: bad --sizes list\n");
            return 1;
        }
    } else {
        list[nsz++] = c.size;
    }
    if (!json && is_sock_op(&c))
        printf("# uwarp-perf SDP sockets %s%s, nodelay %s, crc %s, %s, cc %s, repeat %d\n",
               c.op == OP_RR ? "request/response latency" : "stream throughput",
               c.busy ? " busy-poll" : " blocking", c.nodelay > 0 ? "on" : "off",
               c.crc ? "on" : "off", c.iters ? "fixed iterations" : "timed",
               c.cc ? c.cc : "default", repeat);
    else if (!json)
        printf("# uwarp-perf %s%s, qps %u, depth %u, post-list %u, %s, cc %s, repeat %d\n",
               c.lat ? "latency" : "throughput", c.busy ? " busy-poll" : "", c.qps, c.depth,
               c.post_list, c.iters ? "fixed iterations" : "timed", c.cc ? c.cc : "default",
               repeat);
    if (!json)
        printf("%-6s %-6s %9s %-8s %9s %12s\n", "xport", "op", "size", "mode", "GB/s", "msg/s");
    double total = (double)nsz * repeat * (tcp_only ? 1 : (vs_tcp ? 2 : 1)) * c.duration;
    uint64_t started = perf_now_ns();
    int step = 0;
    for (int i = 0; i < nsz; i++) {
        c.size = list[i];
        perf_res ru, rt;
        bool have_u = false, have_t = false;
        have_u = !tcp_only;
        have_t = vs_tcp || tcp_only;
        double pbw = 0, plat = 0, worst = -1;
        if (measure(host, port, &c, have_u, have_t, repeat, max_steal, &ru, &rt, &pbw, &plat,
                    &worst) < 0)
            return 2;
        if (worst > STEAL_WARN && worst > max_steal)
            fprintf(stderr,
                    "uwarp-perf: warning: the hypervisor took up to %.0f%% of this machine's CPU "
                    "time during these runs (steal); figures move with it. Compare paired "
                    "ratios, measure more (--repeat), or keep only quiet runs (--max-steal)\n",
                    worst * 100);
        if (have_u)
            print_one(&c, xport_name(&c), &ru, json, cpu);
        if (have_t)
            print_one(&c, c.tcp_crc ? "tcp+crc" : "tcp", &rt, json, cpu);
        if (have_u && have_t) {
            double rb = ((double)ru.bytes / ru.secs) / ((double)rt.bytes / rt.secs);
            double rl = c.lat && rt.lat_p50 > 0 ? ru.lat_p50 / rt.lat_p50 : 0;
            double cpu_u = (ru.cpu_client_ns + ru.cpu_server_ns) / (double)ru.bytes;
            double cpu_t = (rt.cpu_client_ns + rt.cpu_server_ns) / (double)rt.bytes;
            const char *base = c.tcp_crc ? "TCP+CRC" : "TCP";
            if (json) {
                printf("{\"op\":\"%s\",\"size\":%u,\"transport\":\"ratio\",\"baseline\":\"%s\","
                       "\"crc\":%s,\"markers\":%s,",
                       op_name(c.op), c.size, c.tcp_crc ? "tcp+crc" : "tcp",
                       c.crc ? "true" : "false", c.markers ? "true" : "false");
                if (is_sock_op(&c))
                    printf("\"nodelay\":%s,\"busy_poll\":%s,", c.nodelay > 0 ? "true" : "false",
                           c.busy ? "true" : "false");
                printf("\"ratio_bw\":%.4f,\"ratio_lat_p50\":", rb);
                if (c.lat)
                    printf("%.4f", rl);
                else
                    printf("null");
                printf(",\"ratio_cpu_per_byte\":%.4f,\"ratio_bw_paired\":%.4f", cpu_u / cpu_t, pbw);
                if (c.lat)
                    printf(",\"ratio_lat_p50_paired\":%.4f", plat);
                printf("}\n");
            } else {
                printf("ratio  %-6s %9u %-8s %9.3f x %s throughput", op_name(c.op), c.size,
                       mode_name(&c), rb, base);
                if (c.lat)
                    printf(", p50 latency %.3f x %s", rl, base);
                printf(", CPU/byte %.3f x %s\n", cpu_u / cpu_t, base);
                if (repeat > 1) {
                    printf("paired %-6s %9u %-8s %9.3f x %s throughput", op_name(c.op), c.size,
                           mode_name(&c), pbw, base);
                    if (c.lat)
                        printf(", p50 latency %.3f x %s", plat, base);
                    printf(" (median of the %d adjacent-pair ratios)\n", repeat);
                }
            }
        }
        step++;
        if (total > 5 && !json)
            fprintf(stderr, "uwarp-perf: %d/%d sizes done, %.0f s elapsed\n", step, nsz,
                    (double)(perf_now_ns() - started) / 1e9);
    }
    return 0;
}
