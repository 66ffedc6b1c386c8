/* uwarp-pm: the SDP port mapper client from the command line. `query` runs
 * client transactions (draft-pinkerton-iwarp-sdp-01 7.4, 7.5.1) through the
 * sans-I/O uw_pm_client over one UDP socket and prints where a Connecting Peer
 * should connect: the SDP Address, or the Conventional Address after a PMDeny
 * or when no reply came. */
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "../cliutil.h"
#include "pm_net.h"

#define EXIT_DENY 2    /* CLI_EXIT_PROTO: the PMSP said no */
#define EXIT_TIMEOUT 4 /* no answer at all */

static const char HELP[] =
    "usage: uwarp-pm query [OPTIONS] HOST PORT\n"
    "\n"
    "Asks the SDP port mapper (draft-pinkerton-iwarp-sdp-01 section 7) which\n"
    "address to connect to for the TCP service at HOST PORT (the Conventional\n"
    "Address), and prints the answer: the SDP Address from a PMAccept (a PMAck\n"
    "is sent back), or the Conventional Address after a PMDeny or when no reply\n"
    "came after the last retransmission.\n"
    "\n"
    "  --server ADDR[:PORT]  the port mapper ([V6]:PORT with a port); default\n"
    "                        HOST, port 3935\n"
    "  --local ADDR          CpIPAddr, the local address (the PMReqs are sent from\n"
    "                        it too); default the one the system routes to the\n"
    "                        server from\n"
    "  --cp-port N           CpPort, the local TCP port the connection would use;\n"
    "                        default a free ephemeral port reserved per query\n"
    "  --timeout MS          first reply timeout, doubled per retransmission up\n"
    "                        to 8 times that (default 250)\n"
    "  --retries N           retransmissions after the first PMReq (default 4)\n"
    "  --count N             run N queries in a row with one client (the second\n"
    "                        and later may be answered from its cache); default 1\n"
    "  --interval MS         pause between queries (default 0)\n"
    "  --json                one JSON object per query instead of text\n"
    "\n"
    "Text output, one line per query:\n"
    "  sdp ADDR PORT REASON pmtime=N sent=N\n"
    "  conventional ADDR PORT REASON sent=N\n"
    "REASON is accept, cached, deny or timeout. JSON output:\n"
    "  {\"outcome\":\"sdp\"|\"conventional\",\"reason\":\"...\",\"address\":\"ADDR\",\n"
    "   \"port\":N,\"pmtime\":N|null,\"cache_ms\":N|null|\"forever\",\"sent\":N,\n"
    "   \"assoc\":\"HEX16\"|null,\"cp_address\":\"ADDR\",\"cp_port\":N,\"server\":\"ADDR:PORT\"}\n"
    "\n"
    "Exit codes: 0 every answer was an SDP Address; 1 usage; 2 a PMDeny came\n"
    "(use the Conventional Address); 3 system error; 4 no reply (timeout).\n";

typedef struct opts {
    const char *host, *service;
    uw_pm_udp_addr server;
    bool have_server, have_local, json;
    uint8_t local_ip[16];
    uint8_t local_ipv;
    uint32_t cp_port, timeout_ms, retries, count, interval_ms;
} opts;

static int resolve(const char *host, uint8_t *ipv, uint8_t ip[16])
{
    if (pmn_parse_ip(host, ipv, ip))
        return 0;
    struct addrinfo hints, *res;
    memset(&hints, 0, sizeof(hints));
    hints.ai_socktype = SOCK_DGRAM;
    int rc = getaddrinfo(host, NULL, &hints, &res);
    if (rc != 0) {
        cli_msg("%s: %s", host, gai_strerror(rc));
        return -1;
    }
    uw_pm_udp_addr a;
    pmn_from_sockaddr(res->ai_addr, &a);
    freeaddrinfo(res);
    *ipv = a.ipv;
    memcpy(ip, a.ip, 16);
    return 0;
}

/* The local address the system would use to reach dst. */
static int route_source(const uw_pm_udp_addr *dst, uint8_t ip[16])
{
    int fd = socket(dst->ipv == 4 ? AF_INET : AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    struct sockaddr_storage ss;
    socklen_t len = pmn_to_sockaddr(dst, &ss);
    int rc = connect(fd, (struct sockaddr *)&ss, len);
    len = sizeof(ss);
    if (rc == 0)
        rc = getsockname(fd, (struct sockaddr *)&ss, &len);
    close(fd);
    if (rc != 0)
        return -1;
    uw_pm_udp_addr a;
    pmn_from_sockaddr((struct sockaddr *)&ss, &a);
    memcpy(ip, a.ip, 16);
    return 0;
}

/* Reserves a free local TCP port on ip, as the Connecting Peer's socket
 * would: the fd stays open (holding the port) until the caller closes it. */
static int reserve_tcp_port(uint8_t ipv, const uint8_t ip[16], uint16_t *port)
{
    int fd = socket(ipv == 4 ? AF_INET : AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    uw_pm_udp_addr a;
    memset(&a, 0, sizeof(a));
    a.ipv = ipv;
    memcpy(a.ip, ip, 16);
    struct sockaddr_storage ss;
    socklen_t len = pmn_to_sockaddr(&a, &ss);
    if (bind(fd, (struct sockaddr *)&ss, len) != 0 ||
        getsockname(fd, (struct sockaddr *)&ss, &(socklen_t){sizeof(ss)}) != 0) {
        close(fd);
        return -1;
    }
    pmn_from_sockaddr((struct sockaddr *)&ss, &a);
    *port = a.port;
    return fd;
}

static int parse(int argc, char **argv, opts *o)
{
    memset(o, 0, sizeof(*o));
    o->timeout_ms = 250;
    o->retries = 4;
    o->count = 1;
    int pos = 0;
    for (int i = 1; i < argc; i++) {
        const char *v;
        int r;
        if (strcmp(argv[i], "--json") == 0) {
            o->json = true;
        } else if ((r = cli_opt(argc, argv, &i, "--server", &v)) != 0) {
            if (r < 0)
                return CLI_EXIT_USAGE;
            o->server.port = UW_PM_PORT;
            if (!pmn_parse_addr_port(v, &o->server))
                return cli_usage("bad --server '%s' (ADDR, ADDR:PORT or [V6]:PORT)", v);
            o->have_server = true;
        } else if ((r = cli_opt(argc, argv, &i, "--local", &v)) != 0) {
            if (r < 0)
                return CLI_EXIT_USAGE;
            if (!pmn_parse_ip(v, &o->local_ipv, o->local_ip))
                return cli_usage("bad --local '%s'", v);
            o->have_local = true;
        } else {
            static const struct {
                const char *name;
                size_t off;
                uint32_t lo, hi;
            } nums[] = {
                {"--cp-port", offsetof(opts, cp_port), 1, 65535},
                {"--timeout", offsetof(opts, timeout_ms), 1, 600000},
                {"--retries", offsetof(opts, retries), 0, 100},
                {"--count", offsetof(opts, count), 1, 1000000},
                {"--interval", offsetof(opts, interval_ms), 0, 3600000},
            };
            bool done = false;
            for (size_t k = 0; k < sizeof(nums) / sizeof(nums[0]) && !done; k++) {
                r = cli_opt(argc, argv, &i, nums[k].name, &v);
                if (r < 0)
                    return CLI_EXIT_USAGE;
                if (r == 0)
                    continue;
                uint32_t n;
                if (!cli_parse_u32(v, &n) || n < nums[k].lo || n > nums[k].hi)
                    return cli_usage("bad %s '%s' (%u..%u)", nums[k].name, v, nums[k].lo,
                                     nums[k].hi);
                memcpy((char *)o + nums[k].off, &n, sizeof(n));
                done = true;
            }
            if (done)
                continue;
            if (argv[i][0] == '-' && argv[i][1])
                return cli_usage("unknown option '%s'", argv[i]);
            if (pos == 0)
                o->host = argv[i];
            else if (pos == 1)
                o->service = argv[i];
            else
                return cli_usage("unexpected argument '%s'", argv[i]);
            pos++;
        }
    }
    if (pos != 2)
        return cli_usage("need HOST and PORT");
    return 0;
}

static void print_result(cli_out *out, const opts *o, const uw_pm_query *q, const uw_pm_result *r,
                         uint64_t now)
{
    static const char *const reasons[] = {"?",       "accept", "cached",  "deny",
                                          "timeout", "reset",  "canceled"};
    const char *reason = reasons[r->reason >= 1 && r->reason <= 6 ? r->reason : 0];
    bool sdp = r->outcome == UW_PM_USE_SDP;
    char ip[PMN_ADDRSTRLEN], cp[PMN_ADDRSTRLEN], srv[PMN_ADDRSTRLEN], line[512];
    pmn_ip_str(r->ipv, r->ip, ip);
    if (!o->json) {
        if (sdp)
            snprintf(line, sizeof(line), "sdp %s %u %s pmtime=%u sent=%u\n", ip, (unsigned)r->port,
                     reason, (unsigned)r->pmtime, r->sent);
        else
            snprintf(line, sizeof(line), "conventional %s %u %s sent=%u\n", ip, (unsigned)r->port,
                     reason, r->sent);
        out_str(out, line);
        return;
    }
    char pmtime[16] = "null", cache[32] = "null", assoc[24] = "null";
    if (sdp) {
        snprintf(pmtime, sizeof(pmtime), "%u", (unsigned)r->pmtime);
        if (r->cache_until == UW_PM_FOREVER)
            snprintf(cache, sizeof(cache), "\"forever\"");
        else
            snprintf(cache, sizeof(cache), "%llu",
                     (unsigned long long)(r->cache_until > now
                                              ? (r->cache_until - now) / UW_PM_NS_PER_MS
                                              : 0));
    }
    if (r->reason != UW_PM_R_CACHED)
        snprintf(assoc, sizeof(assoc), "\"%016llx\"", (unsigned long long)r->assoc);
    snprintf(line, sizeof(line),
             "{\"outcome\":\"%s\",\"reason\":\"%s\",\"address\":\"%s\",\"port\":%u,"
             "\"pmtime\":%s,\"cache_ms\":%s,\"sent\":%u,\"assoc\":%s,\"cp_address\":\"%s\","
             "\"cp_port\":%u,\"server\":\"%s\"}\n",
             sdp ? "sdp" : "conventional", reason, ip, (unsigned)r->port, pmtime, cache, r->sent,
             assoc, pmn_ip_str(q->ipv, q->cp_ip, cp), (unsigned)q->cp_port,
             pmn_addr_str(&q->server, srv));
    out_str(out, line);
}

/* Sends whatever the client has queued. */
static void flush_sends(uw_pm_client *c, int fd)
{
    uw_pm_datagram d;
    while (uw_pm_client_send(c, pmn_now(), &d) == 1) {
        struct sockaddr_storage ss;
        socklen_t len = pmn_to_sockaddr(&d.to, &ss);
        if (sendto(fd, d.data, d.len, 0, (struct sockaddr *)&ss, len) < 0)
            cli_msg("sendto: %s (the retransmission timer covers it)", strerror(errno));
    }
}

/* One transaction, to its result. Returns 0 or CLI_EXIT_IO. */
static int run_one(uw_pm_client *c, int fd, const uw_pm_query *q, uw_pm_result *r)
{
    uint64_t id;
    int rc = uw_pm_client_start(c, q, pmn_now(), &id);
    if (rc < 0) {
        cli_msg("start: %s", uw_strerror(rc));
        return CLI_EXIT_IO;
    }
    for (;;) {
        flush_sends(c, fd);
        if (uw_pm_client_next_result(c, r) == 1) {
            flush_sends(c, fd); /* the PMAck */
            return 0;
        }
        uint64_t now = pmn_now(), next = uw_pm_client_next_deadline(c);
        int timeout = -1;
        if (next != UW_PM_FOREVER)
            timeout = next > now ? (int)((next - now + UW_PM_NS_PER_MS - 1) / UW_PM_NS_PER_MS) : 0;
        struct pollfd p = {fd, POLLIN, 0};
        int n = poll(&p, 1, timeout);
        if (n < 0 && errno != EINTR) {
            cli_msg("poll: %s", strerror(errno));
            return CLI_EXIT_IO;
        }
        if (n > 0) {
            uint8_t buf[64];
            struct sockaddr_storage from;
            socklen_t flen = sizeof(from);
            ssize_t got = recvfrom(fd, buf, sizeof(buf), 0, (struct sockaddr *)&from, &flen);
            if (got >= 0) {
                uw_pm_udp_addr src;
                pmn_from_sockaddr((struct sockaddr *)&from, &src);
                (void)uw_pm_client_recv(c, pmn_now(), buf, (size_t)got, &src);
            }
        }
        uw_pm_client_tick(c, pmn_now());
    }
}

static int cmd_query(int argc, char **argv)
{
    opts o;
    int rc = parse(argc, argv, &o);
    if (rc)
        return rc;
    uw_pm_query q;
    memset(&q, 0, sizeof(q));
    uint32_t svc;
    if (!cli_parse_u32(o.service, &svc) || svc < 1 || svc > 65535)
        return cli_usage("bad PORT '%s' (1..65535)", o.service);
    q.ap_port = (uint16_t)svc;
    if (resolve(o.host, &q.ipv, q.ap_ip) != 0)
        return CLI_EXIT_USAGE;
    if (o.have_server) {
        q.server = o.server;
    } else {
        q.server.ipv = q.ipv;
        memcpy(q.server.ip, q.ap_ip, 16);
        q.server.port = UW_PM_PORT;
    }
    if (o.have_local) {
        if (o.local_ipv != q.ipv)
            return cli_usage("--local and HOST must be the same IP version");
        memcpy(q.cp_ip, o.local_ip, 16);
    } else if (route_source(&q.server, q.cp_ip) != 0) {
        cli_msg("no route to %s: %s", o.host, strerror(errno));
        return CLI_EXIT_IO;
    }
    int fd = socket(q.server.ipv == 4 ? AF_INET : AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        cli_msg("socket: %s", strerror(errno));
        return CLI_EXIT_IO;
    }
    /* Unconnected on purpose: an ICMP port unreachable while the daemon is
     * down must not end the query; the retransmissions cover that time.
     * With --local the datagrams also come from that address. */
    if (o.have_local) {
        uw_pm_udp_addr la;
        memset(&la, 0, sizeof(la));
        la.ipv = q.ipv;
        memcpy(la.ip, q.cp_ip, 16);
        struct sockaddr_storage ss;
        socklen_t len = pmn_to_sockaddr(&la, &ss);
        if (bind(fd, (struct sockaddr *)&ss, len) != 0) {
            cli_msg("bind --local: %s", strerror(errno));
            close(fd);
            return CLI_EXIT_IO;
        }
    }
    uw_pm_client_opts co;
    memset(&co, 0, sizeof(co));
    co.random = pmn_random;
    co.rto_ns = o.timeout_ms * UW_PM_NS_PER_MS;
    co.rto_max_ns = 8 * co.rto_ns;
    co.max_retries = o.retries ? o.retries : UW_PM_NO_RETRY;
    uw_pm_client *c;
    if (uw_pm_client_create(&c, &co) != 0) {
        close(fd);
        cli_msg("out of memory");
        return CLI_EXIT_IO;
    }
    static cli_out out;
    out_init(&out, STDOUT_FILENO);
    int worst = CLI_EXIT_OK;
    for (uint32_t i = 0; i < o.count && worst != CLI_EXIT_IO; i++) {
        if (i && o.interval_ms) {
            struct timespec ts = {o.interval_ms / 1000, (long)(o.interval_ms % 1000) * 1000000L};
            nanosleep(&ts, NULL);
        }
        int hold = -1;
        uint16_t port = (uint16_t)o.cp_port;
        if (!o.cp_port && (hold = reserve_tcp_port(q.ipv, q.cp_ip, &port)) < 0) {
            cli_msg("cannot reserve a local TCP port: %s", strerror(errno));
            worst = CLI_EXIT_IO;
            break;
        }
        q.cp_port = port;
        uw_pm_result r;
        rc = run_one(c, fd, &q, &r);
        if (hold >= 0)
            close(hold);
        if (rc) {
            worst = rc;
            break;
        }
        print_result(&out, &o, &q, &r, pmn_now());
        int code = r.reason == UW_PM_R_TIMEOUT ? EXIT_TIMEOUT
                   : r.reason == UW_PM_R_DENY  ? EXIT_DENY
                                               : CLI_EXIT_OK;
        if (code == EXIT_TIMEOUT || (code == EXIT_DENY && worst == CLI_EXIT_OK))
            worst = code;
    }
    uw_pm_client_destroy(c);
    close(fd);
    rc = out_flush(&out);
    return rc ? rc : worst;
}

int main(int argc, char **argv)
{
    cli_set_prog("uwarp-pm");
    if (argc < 2)
        return cli_usage("missing command: query");
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0 ||
            strcmp(argv[1], "help") == 0) {
            static cli_out o;
            out_init(&o, STDOUT_FILENO);
            out_str(&o, HELP);
            return out_flush(&o);
        }
    }
    if (strcmp(argv[1], "query") != 0)
        return cli_usage("unknown command '%s': use query", argv[1]);
    cli_set_prog("uwarp-pm query");
    return cmd_query(argc - 1, argv + 1);
}
