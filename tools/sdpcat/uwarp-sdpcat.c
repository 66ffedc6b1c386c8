/* uwarp-sdpcat: netcat over SDP sockets (uwarp/sdp.h,
 * draft-pinkerton-iwarp-sdp-01): stdin goes to the peer as a byte stream,
 * the peer's bytes come out on stdout.
 *
 * One thread and one poll() over stdin and the socket's descriptor
 * (uw_sdp_fd(), which shows readiness as a TCP socket's would); the stack's
 * progress thread moves credits, DisConns and handshakes while we sleep.
 * stdout is written with blocking writes: its reader is not the peer, so
 * waiting for it cannot deadlock the connection, and meanwhile the SDP
 * credits push back on the sender as TCP's window would.
 *
 * Zero copy (Read Zcopy, 9.2) is the exception to "nothing blocks": the
 * library lends only a blocking send()'s buffer to the peer and Reads only
 * into a blocking recv()'s, and refuses a SrcAvail at once on a
 * nonblocking socket. So while a threshold applies the socket is made
 * blocking, sends of at least the threshold are blocking calls, and
 * receives stay nonblocking in effect by being made only when the
 * descriptor says data is waiting. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "../cliutil.h"
#include "../rdmacli.h"
#include "uwarp/sdp.h"

/* Exit statuses (--help). */
#define SC_OK 0
#define SC_USAGE 1
#define SC_PROTO 2
#define SC_REFUSED 3
#define SC_TIMEOUT 4
#define SC_RESET 5

#define SC_CHUNK_DEFAULT 65536u
#define SC_CHUNK_MAX (16u << 20)
#define SC_RECV_BUF 65536u
#define SC_RECV_MAX (16u << 20)
#define SC_SINK_WAIT_MS 200

static const char HELP[] =
    "usage: uwarp-sdpcat [OPTIONS] -l [ADDR:]PORT   listen (Accepting Peer), serve one connection\n"
    "       uwarp-sdpcat [OPTIONS] HOST PORT        connect (Connecting Peer)\n"
    "\n"
    "netcat over SDP sockets (draft-pinkerton-iwarp-sdp-01 over iWARP over TCP):\n"
    "stdin is sent to the peer (uw_sdp_send() calls of up to --chunk octets), every\n"
    "octet received is written to stdout in order. At stdin EOF this side shuts\n"
    "down its sending direction (a DisConn) and keeps receiving; it exits once the\n"
    "peer has shut down its direction too.\n"
    "\n"
    "Without --pm, PORT is the SDP port itself: -l listens there for SDP, HOST PORT\n"
    "connects there. With --pm, PORT is the TCP service port: the connecting side\n"
    "asks the port mapper at HOST (UDP 3935) for the SDP port first and uses plain\n"
    "TCP to PORT if it says no or does not answer; -l --pm registers the service\n"
    "port with the local uwarp-pmd and also accepts plain TCP on it.\n"
    "\n"
    "Options:\n"
    "  -l [ADDR:]PORT     listen on ADDR (default 0.0.0.0; [v6addr] for IPv6) and PORT;\n"
    "                     port 0 picks a free port, reported on stderr as\n"
    "                     'listening on ADDR:PORT' (also printed with -v)\n"
    "  --pm               go through the SDP port mapper (see above)\n"
    "  --pm-server A:P    ask the port mapper at A:P ([v6addr]:P) instead of HOST:3935\n"
    "  --chunk N          largest uw_sdp_send() call (1..16777216, default 65536, or\n"
    "                     the zero-copy threshold if larger, up to 16777216)\n"
    "  --recv-size N      buffer of each uw_sdp_recv() call (1..16777216, default\n"
    "                     65536); a zero-copy receive Reads into it, so it bounds\n"
    "                     each Read\n"
    "  --zcopy-min N      UW_SDP_ZCOPY_THRESHOLD (Read Zcopy, section 9.2): a send of\n"
    "                     at least N octets lends its buffer to the peer to RDMA-Read,\n"
    "                     and a receive Reads advertised data into its buffer; 0\n"
    "                     never (0..2147483647; default: the library's,\n"
    "                     $UWARP_SDP_ZCOPY_MIN, else never). The library does this\n"
    "                     only in blocking calls, so while a threshold applies such a\n"
    "                     send blocks until the peer has the data, unbounded by\n"
    "                     --timeout, and this side receives nothing meanwhile: two\n"
    "                     sides sending at once, each in sends larger than the\n"
    "                     other's receive buffers, can stall each other for good.\n"
    "                     stdin from a pipe gives at most what the pipe holds\n"
    "                     (usually 65536 octets) per send; a file gives --chunk.\n"
    "                     With --oob-out receives stay nonblocking and never Read\n"
    "  --mode M           buffered, combined or pipelined: the flow-control mode\n"
    "                     this side, as Mode Master of its send half, asks for\n"
    "                     after setup (section 12). In Pipelined Mode a receive of\n"
    "                     at least --zcopy-min octets, and more than a receive\n"
    "                     Private Buffer, is advertised with SinkAvail and the\n"
    "                     peer RDMA-Writes into it (Write Zcopy, section 9.3)\n"
    "  --sink-avail       with --zcopy-min: receive in blocking calls of --recv-size\n"
    "                     octets (200 ms each, stdin looked at in between), so\n"
    "                     that a receive the library may advertise (see --mode)\n"
    "                     is advertised with SinkAvail; otherwise this side only\n"
    "                     receives once data is waiting, and never advertises\n"
    "  --rcvbuf-size N    size of our receive Private Buffers (octets)\n"
    "  --bufs N           number of our receive Private Buffers (at least 4)\n"
    "  --nodelay          TCP_NODELAY: send partial messages at once\n"
    "  --oob-at N         send the stdin octet at offset N (from 0) alone, as urgent\n"
    "                     data (MSG_OOB)\n"
    "  --oob-out FILE     write received urgent octets, in order, to FILE and keep\n"
    "                     them out of stdout; without it urgent data stays in the\n"
    "                     stream (SO_OOBINLINE)\n"
    "  --chrcvbuf N       right after setup, ask the peer to resize its receive\n"
    "                     Private Buffers to N octets (a ChRcvBuf, section 10.6)\n"
    "  --linger S         at stdin EOF close the whole socket with SO_LINGER S instead\n"
    "                     of shutting down one direction: S > 0 waits up to S seconds\n"
    "                     for our data to go out, then exits without waiting for the\n"
    "                     peer's data; S = 0 closes abortively (the peer sees a reset)\n"
    "  --timeout S        limit for connection setup and for any wait without\n"
    "                     progress afterwards (seconds, fractions allowed); with -l,\n"
    "                     a connection must also arrive within S. Default: the\n"
    "                     library's setup limit (10 s), no other limit\n"
    "  -v                 print one JSON line on stderr after setup:\n"
    "                       {\"role\",\"majv\",\"minv\",\"max_adverts\",\"local_rcv_size\",\n"
    "                        \"remote_rcv_size\",\"ird\",\"ord\",\"bufs\",\"transport\"}\n"
    "                     and one at exit:\n"
    "                       {\"sent\",\"received\",\"data_msgs_sent\",\"data_msgs_received\",\n"
    "                        \"credit_updates_sent\",\"sendsm_sent\",\"oob_sent\",\n"
    "                        \"oob_received\",\"chrcvbuf\",\"srcavail_sent\",\n"
    "                        \"srcavail_received\",\"sinkavail_sent\",\n"
    "                        \"sinkavail_received\",\"rdma_read_bytes\",\n"
    "                        \"rdma_write_bytes\",\"rdmardcompl\",\"rdmawrcompl\",\n"
    "                        \"sendsm_received\",\"cancels\",\"mode_changes\",\n"
    "                        \"bcopy_bytes\",\"zcopy_bytes\",\"zcopy_threshold\",\n"
    "                        \"close\"}\n"
    "                     (rdmardcompl and rdmawrcompl count both directions)\n"
    "                     -vv also prints the library's log\n"
    "  -h, --help         this text\n"
    "\n"
    "A listener serves one connection. Connection attempts the library refuses\n"
    "during setup (a Hello that breaks section 8.1.1, refused with an MPA Reject)\n"
    "never reach it: it keeps waiting for a valid one, within --timeout if given.\n"
    "\n"
    "Exit status: 0 both directions done (DisConns both ways) and all of stdin\n"
    "handed to the connection; 1 usage error; 2 protocol error (the message names\n"
    "the rule the peer broke) or a local failure; 3 refused (nothing listens there,\n"
    "or the Accepting Peer rejected our Hello); 4 timeout (--timeout or the setup\n"
    "limit); 5 the peer reset the connection (an AbortConn, a TCP reset, or the\n"
    "connection closed without a DisConn).\n";

typedef struct sc_opts {
    const char *listen_spec;
    const char *host, *port;
    bool pm;
    const char *pm_server;
    uint32_t chunk;
    bool chunk_set;
    uint32_t recv_size;
    bool zcopy_min_set; /* else the library's default threshold */
    int mode;           /* --mode: 0..2, or -1 for none */
    uint32_t zcopy_min;
    uint32_t rcvbuf_size, bufs; /* 0: library default */
    bool nodelay;
    bool sink_avail; /* --sink-avail */
    bool oob_at_set;
    uint64_t oob_at;
    const char *oob_out;
    uint32_t chrcvbuf;
    bool linger_set;
    int linger_s;
    int timeout_ms; /* -1: none */
    int verbose;
} sc_opts;

struct sc {
    const sc_opts *o;
    uw_sdp_stack *st;
    uw_sdp_sock *lis, *s;
    int oob_fd;
    uint8_t *ibuf; /* stdin chunk being sent */
    size_t chunk;  /* ibuf's size */
    size_t ilen, ioff;
    bool ioob;       /* ibuf holds the one urgent octet */
    uint64_t in_off; /* stdin octets read so far */
    bool in_eof, shut_sent, peer_eof, closed;
    uint32_t zc; /* zero-copy threshold in effect on an SDP connection (0: none) */
    bool sink;   /* --sink-avail in effect: receives block (SC_SINK_WAIT_MS each) */
    char what[160];
    uint8_t *rbuf; /* --recv-size octets */
};

/* ------------------------------------------------------------------------ */
/* Options                                                                   */

static int parse_u32_opt(const char *name, const char *v, uint32_t lo, uint32_t hi, uint32_t *out)
{
    if (!cli_parse_u32(v, out) || *out < lo || *out > hi)
        return cli_usage("%s takes a number in %u..%u, not '%s'", name, lo, hi, v);
    return -1;
}

static int parse_args(int argc, char **argv, sc_opts *o)
{
    memset(o, 0, sizeof(*o));
    o->chunk = SC_CHUNK_DEFAULT;
    o->recv_size = SC_RECV_BUF;
    o->mode = -1;
    o->timeout_ms = -1;
    const char *pos[2];
    int npos = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = NULL;
        int r;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            fputs(HELP, stdout);
            return SC_OK;
        } else if (!strcmp(a, "-v")) {
            o->verbose++;
        } else if (!strcmp(a, "-vv")) {
            o->verbose += 2;
        } else if (!strcmp(a, "-l")) {
            if (i + 1 >= argc)
                return cli_usage("-l needs [ADDR:]PORT");
            o->listen_spec = argv[++i];
        } else if (!strcmp(a, "--pm")) {
            o->pm = true;
        } else if (!strcmp(a, "--nodelay")) {
            o->nodelay = true;
        } else if (!strcmp(a, "--sink-avail")) {
            o->sink_avail = true;
        } else if ((r = cli_opt(argc, argv, &i, "--pm-server", &v)) != 0) {
            if (r < 0)
                return SC_USAGE;
            o->pm_server = v;
        } else if ((r = cli_opt(argc, argv, &i, "--chunk", &v)) != 0) {
            if (r < 0 || parse_u32_opt("--chunk", v, 1, SC_CHUNK_MAX, &o->chunk) >= 0)
                return SC_USAGE;
            o->chunk_set = true;
        } else if ((r = cli_opt(argc, argv, &i, "--recv-size", &v)) != 0) {
            if (r < 0 || parse_u32_opt("--recv-size", v, 1, SC_RECV_MAX, &o->recv_size) >= 0)
                return SC_USAGE;
        } else if ((r = cli_opt(argc, argv, &i, "--zcopy-min", &v)) != 0) {
            if (r < 0 || parse_u32_opt("--zcopy-min", v, 0, INT32_MAX, &o->zcopy_min) >= 0)
                return SC_USAGE;
            o->zcopy_min_set = true;
        } else if ((r = cli_opt(argc, argv, &i, "--mode", &v)) != 0) {
            if (r < 0)
                return SC_USAGE;
            if (!strcmp(v, "buffered"))
                o->mode = 0;
            else if (!strcmp(v, "combined"))
                o->mode = 1;
            else if (!strcmp(v, "pipelined"))
                o->mode = 2;
            else {
                cli_msg("--mode: '%s' is not buffered, combined or pipelined", v);
                return SC_USAGE;
            }
        } else if ((r = cli_opt(argc, argv, &i, "--rcvbuf-size", &v)) != 0) {
            if (r < 0 || parse_u32_opt("--rcvbuf-size", v, 1, INT32_MAX, &o->rcvbuf_size) >= 0)
                return SC_USAGE;
        } else if ((r = cli_opt(argc, argv, &i, "--bufs", &v)) != 0) {
            if (r < 0 || parse_u32_opt("--bufs", v, 1, 65535, &o->bufs) >= 0)
                return SC_USAGE;
        } else if ((r = cli_opt(argc, argv, &i, "--oob-at", &v)) != 0) {
            uint32_t n;
            if (r < 0 || parse_u32_opt("--oob-at", v, 0, UINT32_MAX, &n) >= 0)
                return SC_USAGE;
            o->oob_at = n;
            o->oob_at_set = true;
        } else if ((r = cli_opt(argc, argv, &i, "--oob-out", &v)) != 0) {
            if (r < 0)
                return SC_USAGE;
            if (!*v)
                return cli_usage("--oob-out needs a file name");
            o->oob_out = v;
        } else if ((r = cli_opt(argc, argv, &i, "--chrcvbuf", &v)) != 0) {
            if (r < 0 || parse_u32_opt("--chrcvbuf", v, 1, INT32_MAX, &o->chrcvbuf) >= 0)
                return SC_USAGE;
        } else if ((r = cli_opt(argc, argv, &i, "--linger", &v)) != 0) {
            uint32_t n;
            if (r < 0 || parse_u32_opt("--linger", v, 0, 86400, &n) >= 0)
                return SC_USAGE;
            o->linger_s = (int)n;
            o->linger_set = true;
        } else if ((r = cli_opt(argc, argv, &i, "--timeout", &v)) != 0) {
            if (r < 0)
                return SC_USAGE;
            if (!rc_parse_seconds(v, &o->timeout_ms) || o->timeout_ms == 0)
                return cli_usage("--timeout takes seconds (> 0, e.g. 5 or 0.5), not '%s'", v);
        } else if (a[0] == '-' && a[1] != '\0') {
            return cli_usage("unknown option '%s'", a);
        } else {
            if (npos == 2)
                return cli_usage("too many arguments ('%s')", a);
            pos[npos++] = a;
        }
    }
    if (o->listen_spec) {
        if (npos)
            return cli_usage("-l takes no HOST PORT arguments ('%s')", pos[0]);
        if (o->pm_server)
            return cli_usage("--pm-server is for the connecting side: a listener registers "
                             "with the local uwarp-pmd");
    } else {
        if (npos != 2)
            return cli_usage("give HOST PORT to connect, or -l [ADDR:]PORT to listen");
        o->host = pos[0];
        o->port = pos[1];
        if (o->pm_server && !o->pm)
            return cli_usage("--pm-server needs --pm");
    }
    return -1;
}

/* ------------------------------------------------------------------------ */
/* Errors                                                                    */

static int exit_for(int err)
{
    switch (err) {
    case -ECONNREFUSED:
        return SC_REFUSED;
    case -ETIMEDOUT:
        return SC_TIMEOUT;
    case -ECONNRESET:
    case -EPIPE:
    case -ECONNABORTED:
        return SC_RESET;
    default:
        return SC_PROTO;
    }
}

static const char *why_of(struct sc *c, uw_sdp_sock *s, uw_sdp_info *info)
{
    (void)c;
    socklen_t len = sizeof(*info);
    memset(info, 0, sizeof(*info));
    if (s && uw_sdp_getsockopt(s, SOL_UWARP, UW_SDP_INFO, info, &len) == 0 && info->why)
        return info->why;
    return NULL;
}

/* Explains err on the connection (or in `call`) and returns the exit code. */
static int report(struct sc *c, uw_sdp_sock *s, const char *during, int err)
{
    uw_sdp_info info;
    const char *why = why_of(c, s, &info);
    int code = exit_for(err);
    switch (code) {
    case SC_REFUSED:
        cli_msg("%s: refused while %s: nothing listens for SDP there, or the Accepting Peer "
                "rejected our Hello (MPA Reject)%s%s. Check HOST and PORT (a TCP service port "
                "needs --pm) and that the peer runs",
                c->what, during, why ? ": " : "", why ? why : "");
        break;
    case SC_TIMEOUT:
        cli_msg("%s: timed out while %s%s%s. Check that the peer is an SDP peer and "
                "reachable, or give a longer --timeout",
                c->what, during, why ? ": " : "", why ? why : "");
        break;
    case SC_RESET:
        cli_msg("%s: the peer reset the connection while %s (%s%s%s); its side ended "
                "abnormally: see its own messages",
                c->what, during, err == -EPIPE ? "connection closed" : uw_strerror(err),
                why ? "; " : "", why ? why : "");
        break;
    default:
        if (why)
            cli_msg("%s: protocol error while %s: %s. The peer does not follow "
                    "draft-pinkerton-iwarp-sdp-01, or the path damaged the stream",
                    c->what, during, why);
        else
            cli_msg("%s: failed while %s: %s (%s)", c->what, during, uw_strerror(err),
                    uw_err_name(err));
        break;
    }
    return code;
}

/* ------------------------------------------------------------------------ */
/* Setup                                                                     */

static int set_int(struct sc *c, uw_sdp_sock *s, int level, int name, int v, const char *what)
{
    int rc = uw_sdp_setsockopt(s, level, name, &v, sizeof(v));
    if (rc < 0) {
        cli_msg("cannot set %s to %d: %s (%s)", what, v, uw_strerror(rc), uw_err_name(rc));
        (void)c;
        return SC_USAGE;
    }
    return -1;
}

/* Options that must be set before connect/listen. */
static int pre_options(struct sc *c, uw_sdp_sock *s)
{
    const sc_opts *o = c->o;
    int rc;
    if (o->rcvbuf_size && (rc = set_int(c, s, SOL_UWARP, UW_SDP_RCVBUF_SIZE, (int)o->rcvbuf_size,
                                        "--rcvbuf-size")) >= 0)
        return rc;
    if (o->bufs && (rc = set_int(c, s, SOL_UWARP, UW_SDP_BUFS, (int)o->bufs, "--bufs")) >= 0)
        return rc;
    if (o->pm && (rc = set_int(c, s, SOL_UWARP, UW_SDP_PM, 1, "UW_SDP_PM (--pm)")) >= 0)
        return rc;
    /* Set before connect/accept rather than after: an accepted socket
     * inherits it, and a SrcAvail the peer sends right after setup then
     * finds it in effect. */
    if (o->zcopy_min_set && (rc = set_int(c, s, SOL_UWARP, UW_SDP_ZCOPY_THRESHOLD,
                                          (int)o->zcopy_min, "--zcopy-min")) >= 0)
        return rc;
    return -1;
}

/* Options of the connected socket. */
static int post_options(struct sc *c, uw_sdp_sock *s)
{
    const sc_opts *o = c->o;
    int rc;
    if (o->nodelay && (rc = set_int(c, s, IPPROTO_TCP, TCP_NODELAY, 1, "TCP_NODELAY")) >= 0)
        return rc;
    if ((rc = set_int(c, s, SOL_SOCKET, SO_OOBINLINE, o->oob_out ? 0 : 1, "SO_OOBINLINE")) >= 0)
        return rc;
    if (o->mode >= 0 && (rc = set_int(c, s, SOL_UWARP, UW_SDP_MODE, o->mode, "--mode")) >= 0)
        return rc;
    return -1;
}

static int64_t deadline_in(int ms)
{
    return ms < 0 ? -1 : rc_now_ms() + ms;
}

/* poll() on one descriptor until events or the deadline; 0 on timeout. */
static int wait_fd(int fd, short events, int64_t deadline, short *revents)
{
    for (;;) {
        struct pollfd p = {.fd = fd, .events = events};
        int n = poll(&p, 1, rc_remaining_ms(deadline));
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -errno;
        *revents = p.revents;
        return n;
    }
}

static int setup_stack(struct sc *c, struct sockaddr_storage *pm_ss, socklen_t *pm_len)
{
    const sc_opts *o = c->o;
    uw_sdp_stack_attr attr;
    memset(&attr, 0, sizeof(attr));
    if (o->verbose >= 2) {
        attr.log = rc_log;
        attr.log_level = UW_LOG_DEBUG;
    }
    if (o->timeout_ms > 0)
        attr.setup_timeout_ms = o->timeout_ms;
    if (o->pm_server) {
        char hostbuf[256];
        const char *host, *port;
        if (rc_split_listen(o->pm_server, hostbuf, sizeof(hostbuf), &host, &port) < 0)
            return SC_USAGE;
        if (!host)
            return cli_usage("--pm-server needs ADDR:PORT, not '%s'", o->pm_server);
        if (rc_resolve(host, port, false, pm_ss, pm_len) < 0)
            return SC_USAGE;
        attr.pm_server = (struct sockaddr *)pm_ss;
        attr.pm_server_len = *pm_len;
    }
    int rc = uw_sdp_stack_create(&c->st, &attr);
    if (rc < 0) {
        cli_msg("cannot create the SDP stack: %s (%s)", uw_strerror(rc), uw_err_name(rc));
        return SC_PROTO;
    }
    return -1;
}

static int run_connect(struct sc *c)
{
    const sc_opts *o = c->o;
    struct sockaddr_storage ss;
    socklen_t len;
    if (rc_resolve(o->host, o->port, false, &ss, &len) < 0)
        return SC_USAGE;
    char as[96];
    rc_addr_str((struct sockaddr *)&ss, as, sizeof(as));
    snprintf(c->what, sizeof(c->what), "connection to %s%s", as,
             o->pm ? " (TCP service port)" : "");
    int rc = uw_sdp_socket(c->st, ss.ss_family, UW_SDP_NONBLOCK | UW_SDP_CLOEXEC, &c->s);
    if (rc < 0) {
        cli_msg("uw_sdp_socket failed: %s (%s)", uw_strerror(rc), uw_err_name(rc));
        return SC_PROTO;
    }
    if ((rc = pre_options(c, c->s)) >= 0)
        return rc;
    rc = uw_sdp_connect(c->s, (struct sockaddr *)&ss, len);
    if (rc < 0 && rc != -EINPROGRESS)
        return report(c, c->s, "connecting", rc);
    if (rc == -EINPROGRESS) {
        /* The library bounds setup itself (setup_timeout_ms); ours is a guard
         * in case it does not, with room for the port mapper's query. */
        int limit = (o->timeout_ms > 0 ? o->timeout_ms : 10000) + (o->pm ? 1000 : 0) + 2000;
        int64_t deadline = rc_now_ms() + limit;
        short rev = 0;
        int n = wait_fd(uw_sdp_fd(c->s), POLLOUT, deadline, &rev);
        if (n == 0) {
            cli_msg("%s: no outcome of the connection setup after %d ms (the SDP Hello was "
                    "not answered). Check that the peer is an SDP peer, or give a longer "
                    "--timeout",
                    c->what, limit);
            return SC_TIMEOUT;
        }
        if (n < 0) {
            cli_msg("poll failed: %s", strerror(-n));
            return SC_PROTO;
        }
        int err = 0;
        socklen_t el = sizeof(err);
        rc = uw_sdp_getsockopt(c->s, SOL_SOCKET, SO_ERROR, &err, &el);
        if (rc < 0)
            return report(c, c->s, "connecting (SO_ERROR)", rc);
        if (err)
            return report(c, c->s, "connecting", err > 0 ? -err : err);
        struct sockaddr_storage peer;
        socklen_t pl = sizeof(peer);
        if ((rc = uw_sdp_getpeername(c->s, (struct sockaddr *)&peer, &pl)) < 0) {
            /* sdp.h: writability means the setup is over, so this is the
             * library's fault; say so rather than send into a void. */
            cli_msg("%s: the socket became writable but is not connected (%s): a uwarp bug",
                    c->what, uw_err_name(rc));
            return SC_PROTO;
        }
    }
    return post_options(c, c->s);
}

/* Accept errors that concern one incoming connection, not the listener. */
static bool transient_accept_error(int rc)
{
    return rc == -ECONNABORTED || rc == -EPROTO || rc == -ECONNRESET || rc == -ETIMEDOUT ||
           rc == -ECONNREFUSED || rc <= -4000;
}

static int run_listen(struct sc *c)
{
    const sc_opts *o = c->o;
    char hostbuf[256];
    const char *host, *port;
    if (rc_split_listen(o->listen_spec, hostbuf, sizeof(hostbuf), &host, &port) < 0)
        return SC_USAGE;
    struct sockaddr_storage ss;
    socklen_t len;
    if (rc_resolve(host, port, true, &ss, &len) < 0)
        return SC_USAGE;
    int rc = uw_sdp_socket(c->st, ss.ss_family, UW_SDP_NONBLOCK | UW_SDP_CLOEXEC, &c->lis);
    if (rc < 0) {
        cli_msg("uw_sdp_socket failed: %s (%s)", uw_strerror(rc), uw_err_name(rc));
        return SC_PROTO;
    }
    if ((rc = set_int(c, c->lis, SOL_SOCKET, SO_REUSEADDR, 1, "SO_REUSEADDR")) >= 0)
        return rc;
    if ((rc = pre_options(c, c->lis)) >= 0)
        return rc;
    char as[96];
    rc_addr_str((struct sockaddr *)&ss, as, sizeof(as));
    if ((rc = uw_sdp_bind(c->lis, (struct sockaddr *)&ss, len)) < 0) {
        cli_msg("cannot bind %s: %s (%s)%s", as, uw_strerror(rc), uw_err_name(rc),
                rc == -EADDRINUSE ? "; pick another port or stop what uses it" : "");
        return SC_PROTO;
    }
    if ((rc = uw_sdp_listen(c->lis, 1)) < 0) {
        if (o->pm && rc == -ENOENT)
            cli_msg("cannot register %s with the port mapper: no uwarp-pmd answers on its "
                    "control socket; start uwarp-pmd or listen without --pm",
                    as);
        else
            cli_msg("cannot listen on %s%s: %s (%s)", as, o->pm ? " through the port mapper" : "",
                    uw_strerror(rc), uw_err_name(rc));
        return SC_PROTO;
    }
    struct sockaddr_storage bound;
    socklen_t blen = sizeof(bound);
    if (uw_sdp_getsockname(c->lis, (struct sockaddr *)&bound, &blen) == 0) {
        rc_addr_str((struct sockaddr *)&bound, as, sizeof(as));
        if (o->verbose || !strcmp(port, "0"))
            cli_msg("listening on %s", as);
    }
    int64_t deadline = deadline_in(o->timeout_ms);
    for (;;) {
        struct sockaddr_storage peer;
        socklen_t plen = sizeof(peer);
        rc = uw_sdp_accept(c->lis, &c->s, (struct sockaddr *)&peer, &plen,
                           UW_SDP_NONBLOCK | UW_SDP_CLOEXEC);
        if (rc >= 0) {
            rc_addr_str((struct sockaddr *)&peer, as, sizeof(as));
            snprintf(c->what, sizeof(c->what), "connection from %s", as);
            break;
        }
        if (rc != -EAGAIN) {
            if (!transient_accept_error(rc)) {
                cli_msg("accept failed: %s (%s)", uw_strerror(rc), uw_err_name(rc));
                return SC_PROTO;
            }
            cli_msg("an incoming connection failed during setup (%s); still listening",
                    uw_err_name(rc));
            continue;
        }
        short rev = 0;
        int n = wait_fd(uw_sdp_fd(c->lis), POLLIN, deadline, &rev);
        if (n == 0) {
            cli_msg("no connection arrived within the --timeout; check that the peer connects "
                    "to this port, or give a longer --timeout");
            return SC_TIMEOUT;
        }
        if (n < 0) {
            cli_msg("poll failed: %s", strerror(-n));
            return SC_PROTO;
        }
    }
    /* One connection only: later ones are refused by the closed listener. */
    uw_sdp_close(c->lis);
    c->lis = NULL;
    return post_options(c, c->s);
}

/* ------------------------------------------------------------------------ */
/* Data phase                                                                */

static void print_setup_json(struct sc *c)
{
    uw_sdp_info i;
    socklen_t len = sizeof(i);
    memset(&i, 0, sizeof(i));
    if (uw_sdp_getsockopt(c->s, SOL_UWARP, UW_SDP_INFO, &i, &len) < 0)
        cli_msg("cannot read UW_SDP_INFO");
    char line[512];
    snprintf(line, sizeof(line),
             "{\"role\":\"%s\",\"majv\":%u,\"minv\":%u,\"max_adverts\":%u,"
             "\"local_rcv_size\":%u,\"remote_rcv_size\":%u,\"ird\":%u,\"ord\":%u,\"bufs\":%u,"
             "\"transport\":\"%s\"}\n",
             c->o->listen_spec ? "accepting" : "connecting", (unsigned)i.majv, (unsigned)i.minv,
             (unsigned)i.remote_max_adverts, (unsigned)i.local_rcv_size,
             (unsigned)i.remote_rcv_size, (unsigned)i.ird, (unsigned)i.ord, (unsigned)i.bufs,
             i.transport == 2 ? "tcp" : "sdp");
    (void)cli_write_all(STDERR_FILENO, line, strlen(line));
}

static void print_exit_json(const uw_sdp_info *i, bool graceful)
{
    char line[1280];
    snprintf(line, sizeof(line),
             "{\"sent\":%llu,\"received\":%llu,\"data_msgs_sent\":%llu,"
             "\"data_msgs_received\":%llu,\"credit_updates_sent\":%llu,\"sendsm_sent\":%llu,"
             "\"oob_sent\":%llu,\"oob_received\":%llu,\"chrcvbuf\":%llu,"
             "\"srcavail_sent\":%llu,\"srcavail_received\":%llu,\"sinkavail_sent\":%llu,"
             "\"sinkavail_received\":%llu,\"rdma_read_bytes\":%llu,\"rdma_write_bytes\":%llu,"
             "\"rdmardcompl\":%llu,\"rdmawrcompl\":%llu,\"sendsm_received\":%llu,"
             "\"cancels\":%llu,\"mode_changes\":%llu,\"bcopy_bytes\":%llu,"
             "\"zcopy_bytes\":%llu,\"zcopy_threshold\":%u,\"close\":\"%s\"}\n",
             (unsigned long long)i->sent, (unsigned long long)i->received,
             (unsigned long long)i->data_msgs_sent, (unsigned long long)i->data_msgs_received,
             (unsigned long long)i->credit_updates_sent, (unsigned long long)i->sendsm_sent,
             (unsigned long long)i->oob_sent, (unsigned long long)i->oob_received,
             (unsigned long long)i->chrcvbuf_sent, (unsigned long long)i->srcavail_sent,
             (unsigned long long)i->srcavail_received, (unsigned long long)i->sinkavail_sent,
             (unsigned long long)i->sinkavail_received, (unsigned long long)i->rdma_read_bytes,
             (unsigned long long)i->rdma_write_bytes,
             (unsigned long long)(i->rdmardcompl_sent + i->rdmardcompl_received),
             (unsigned long long)(i->rdmawrcompl_sent + i->rdmawrcompl_received),
             (unsigned long long)i->sendsm_received, (unsigned long long)i->cancels,
             (unsigned long long)i->mode_changes, (unsigned long long)i->bcopy_bytes,
             (unsigned long long)i->zcopy_bytes, (unsigned)i->zcopy_threshold,
             graceful ? "graceful" : "abortive");
    (void)cli_write_all(STDERR_FILENO, line, strlen(line));
}

/* Reads the next piece of stdin into ibuf: up to --chunk octets, cut short
 * before the --oob-at octet, which is read alone. */
static int read_stdin(struct sc *c)
{
    const sc_opts *o = c->o;
    size_t want = c->chunk;
    c->ioob = false;
    if (o->oob_at_set && c->in_off <= o->oob_at) {
        uint64_t before = o->oob_at - c->in_off;
        if (before == 0) {
            want = 1;
            c->ioob = true;
        } else if (before < want) {
            want = (size_t)before;
        }
    }
    ssize_t n = cli_read_some(STDIN_FILENO, c->ibuf, want);
    if (n < 0) {
        cli_msg("cannot read stdin: %s", strerror(errno));
        return SC_PROTO;
    }
    if (n == 0) {
        c->in_eof = true;
        c->ioob = false;
        return -1;
    }
    c->ilen = (size_t)n;
    c->ioff = 0;
    c->in_off += (uint64_t)n;
    return -1;
}

/* Sends what ibuf holds; stops at -EAGAIN. Returns -1 to go on, else an
 * exit code. *progress is set when something was sent. */
static int send_some(struct sc *c, bool *progress)
{
    while (c->ioff < c->ilen) {
        int flags = MSG_NOSIGNAL | (c->ioob ? MSG_OOB : 0);
        /* Only a blocking send lends its buffer (the top of this file). */
        if (!c->zc || c->ioob || c->ilen - c->ioff < c->zc)
            flags |= MSG_DONTWAIT;
        ssize_t n = uw_sdp_send(c->s, c->ibuf + c->ioff, c->ilen - c->ioff, flags);
        if (n == -EAGAIN)
            return -1;
        if (n == -EINTR)
            continue;
        if (n < 0)
            return report(c, c->s, "sending", (int)n);
        c->ioff += (size_t)n;
        *progress = true;
    }
    c->ilen = c->ioff = 0;
    return -1;
}

static int write_stdout(const void *p, size_t n)
{
    if (cli_write_all(STDOUT_FILENO, p, n) < 0) {
        cli_msg("cannot write stdout: %s", strerror(errno));
        return SC_PROTO;
    }
    return -1;
}

/* Reads the urgent octet when one is pending (--oob-out). Returns -1 to go
 * on, else an exit code; *got is set when one was read. */
static int recv_oob(struct sc *c, bool *got)
{
    uint8_t b;
    ssize_t n = uw_sdp_recv(c->s, &b, 1, MSG_OOB | MSG_DONTWAIT);
    if (n == 1) {
        if (cli_write_all(c->oob_fd, &b, 1) < 0) {
            cli_msg("cannot write %s: %s", c->o->oob_out, strerror(errno));
            return SC_PROTO;
        }
        *got = true;
        return -1;
    }
    /* -EINVAL: none pending (or already read); -EAGAIN: announced, not yet
     * here. Connection errors show up on the normal read. */
    return -1;
}

/* Drains readable data to stdout. Returns -1 to go on, else an exit code. */
static int recv_some(struct sc *c, bool *progress)
{
    for (int rounds = 0; rounds < 64; rounds++) {
        size_t want = c->o->recv_size;
        int flags = MSG_DONTWAIT;
        if (c->sink && rounds == 0) {
            flags = 0; /* blocking, bounded by SO_RCVTIMEO (zcopy_setup) */
        } else if (c->zc && c->oob_fd < 0) {
            /* A nonblocking recv() would turn an advertised buffer down
             * (Bcopy instead of a Read), so this one blocks, but only once
             * the descriptor says it will not wait. Not with --oob-out: its
             * MSG_PEEK cannot see advertised data, so a blocking one could
             * wait on a SrcAvail that only a Read would take. */
            short rev = 0;
            int n = wait_fd(uw_sdp_fd(c->s), POLLIN, 0, &rev); /* deadline 0: no wait */
            if (n < 0) {
                cli_msg("poll failed: %s", strerror(-n));
                return SC_PROTO;
            }
            if (n == 0)
                return -1;
            flags = 0;
        } else if (c->oob_fd >= 0) {
            /* As on Linux TCP, a read stops at the urgent mark, and a read
             * that starts there skips the out-of-line urgent octet, which is
             * then gone. Every call may bring in more messages, the urgent
             * one included, so: take the urgent octet when at the mark, and
             * otherwise read no more than FIONREAD counted (which stops at
             * a known mark); with nothing counted, only peek. */
            int avail = 0, at_mark = 0;
            if (uw_sdp_ioctl(c->s, FIONREAD, &avail) < 0)
                avail = 0;
            if (uw_sdp_ioctl(c->s, SIOCATMARK, &at_mark) == 0 && at_mark) {
                bool got = false;
                int rc = recv_oob(c, &got);
                if (rc >= 0)
                    return rc;
                *progress |= got;
            } else if (avail > 0) {
                if ((size_t)avail < want)
                    want = (size_t)avail;
            } else {
                want = 1;
                flags |= MSG_PEEK;
            }
        }
        ssize_t n = uw_sdp_recv(c->s, c->rbuf, want, flags);
        if (n > 0 && (flags & MSG_PEEK))
            continue; /* something arrived: count it first */
        if (n == -EAGAIN)
            return -1;
        if (n == -EINTR)
            continue;
        if (n < 0)
            return report(c, c->s, "receiving", (int)n);
        *progress = true;
        if (n == 0) {
            c->peer_eof = true;
            return -1;
        }
        int rc = write_stdout(c->rbuf, (size_t)n);
        if (rc >= 0)
            return rc;
    }
    return -1;
}

static bool info_of(struct sc *c, uw_sdp_info *i)
{
    socklen_t len = sizeof(*i);
    memset(i, 0, sizeof(*i));
    return c->s && uw_sdp_getsockopt(c->s, SOL_UWARP, UW_SDP_INFO, i, &len) == 0;
}

/* --linger: close the socket at stdin EOF with SO_LINGER. */
static int linger_close(struct sc *c)
{
    struct linger l = {.l_onoff = 1, .l_linger = c->o->linger_s};
    int rc = uw_sdp_setsockopt(c->s, SOL_SOCKET, SO_LINGER, &l, sizeof(l));
    if (rc < 0) {
        cli_msg("cannot set SO_LINGER: %s (%s)", uw_strerror(rc), uw_err_name(rc));
        return SC_PROTO;
    }
    uw_sdp_info i;
    info_of(c, &i);
    rc = uw_sdp_close(c->s);
    c->s = NULL;
    c->closed = true;
    if (c->o->verbose)
        print_exit_json(&i, c->o->linger_s > 0 && rc == 0);
    if (rc < 0 && c->o->linger_s > 0)
        return report(c, NULL, "closing with SO_LINGER", rc);
    return SC_OK;
}

static int data_loop(struct sc *c)
{
    const sc_opts *o = c->o;
    int fd = uw_sdp_fd(c->s);
    int64_t idle_deadline = deadline_in(o->timeout_ms);
    bool oob_poll = o->oob_out != NULL;
    int rc;
    for (;;) {
        bool progress = false;
        /* Send what we have; at stdin EOF with nothing left, shut down our
         * direction (a DisConn after the data), or close with --linger. */
        if (c->ilen && (rc = send_some(c, &progress)) >= 0)
            return rc;
        if (c->in_eof && !c->ilen && !c->shut_sent) {
            if (o->linger_set)
                return linger_close(c);
            rc = uw_sdp_shutdown(c->s, SHUT_WR);
            if (rc < 0)
                return report(c, c->s, "shutting down the sending direction", rc);
            c->shut_sent = true;
            progress = true;
        }
        if (c->shut_sent && c->peer_eof)
            return SC_OK;
        /* --sink-avail: wait in a blocking receive rather than in poll(),
         * the only kind of receive the library advertises. */
        bool sink_waited = false;
        if (c->sink && !c->peer_eof && !c->ilen) {
            bool got = false;
            if ((rc = recv_some(c, &got)) >= 0)
                return rc;
            progress |= got;
            sink_waited = !got;
        }

        struct pollfd p[2];
        int np = 0, in_i = -1;
        p[np].fd = fd;
        p[np].events = 0;
        if (!c->peer_eof)
            p[np].events |= POLLIN | (oob_poll ? POLLPRI : 0);
        if (c->ilen)
            p[np].events |= POLLOUT;
        np++;
        if (!c->in_eof && !c->ilen) {
            in_i = np;
            p[np].fd = STDIN_FILENO;
            p[np].events = POLLIN;
            np++;
        }
        int timeout = progress || sink_waited ? 0 : rc_remaining_ms(idle_deadline);
        int n = poll(p, (nfds_t)np, timeout);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            cli_msg("poll failed: %s", strerror(errno));
            return SC_PROTO;
        }
        if (n == 0) {
            if (progress || (sink_waited && rc_remaining_ms(idle_deadline) != 0))
                continue;
            const char *waiting = c->ilen        ? "waiting for the peer to take our data"
                                  : !c->peer_eof ? "waiting for data from the peer"
                                                 : "waiting for stdin";
            cli_msg("%s: nothing moved for --timeout while %s; the peer stalled or the "
                    "network is down (give a longer --timeout if the peer is just slow)",
                    c->what, waiting);
            return SC_TIMEOUT;
        }
        short r = p[0].revents;
        if ((r & POLLHUP) && !c->shut_sent && c->peer_eof) {
            /* Both directions down though we never shut ours: the peer
             * closed or reset the connection; SO_ERROR says which. */
            int err = 0;
            socklen_t el = sizeof(err);
            (void)uw_sdp_getsockopt(c->s, SOL_SOCKET, SO_ERROR, &err, &el);
            return report(c, c->s, "sending", err ? (err > 0 ? -err : err) : -EPIPE);
        }
        if (oob_poll && (r & POLLPRI)) {
            bool got = false;
            if ((rc = recv_oob(c, &got)) >= 0)
                return rc;
            progress |= got;
            /* POLLPRI without an urgent octet to read (announced, not yet
             * arrived): stop asking for it until normal data moves, so the
             * loop does not spin. */
            if (!got)
                oob_poll = false;
        }
        if (!c->peer_eof && (r & (POLLIN | POLLERR | POLLHUP | POLLPRI))) {
            bool got = false;
            if ((rc = recv_some(c, &got)) >= 0)
                return rc;
            if (got) {
                progress = true;
                oob_poll = o->oob_out != NULL;
            }
        }
        if (c->ilen && (r & (POLLOUT | POLLERR | POLLHUP)) && (rc = send_some(c, &progress)) >= 0)
            return rc;
        if (in_i >= 0 && (p[in_i].revents & (POLLIN | POLLHUP | POLLERR))) {
            if ((rc = read_stdin(c)) >= 0)
                return rc;
            progress = true;
        }
        if (progress)
            idle_deadline = deadline_in(o->timeout_ms);
    }
}

/* Both directions are shut, but our data and DisConn may still be queued
 * in the stack (the peer's DisConn can come first), and destroying the
 * stack would abort them. Waits until the close is complete (both DisConns
 * through: info.graceful), as long as messages keep going out within
 * --timeout (default 10 s). The descriptor does not signal that moment, so
 * this looks every few milliseconds. */
static int wait_done(struct sc *c)
{
    int idle_ms = c->o->timeout_ms > 0 ? c->o->timeout_ms : 10000;
    int64_t deadline = rc_now_ms() + idle_ms;
    uw_sdp_info i;
    info_of(c, &i);
    uint64_t last = i.data_msgs_sent + i.credit_updates_sent;
    if (i.transport == 2)
        return SC_OK; /* plain TCP: the kernel finishes the close */
    while (!i.graceful) {
        if (rc_remaining_ms(deadline) == 0) {
            cli_msg("%s: our last data and DisConn did not get through within %d ms; the "
                    "peer stopped taking data",
                    c->what, idle_ms);
            return SC_TIMEOUT;
        }
        struct pollfd p = {.fd = uw_sdp_fd(c->s), .events = 0};
        (void)poll(&p, 1, 5);
        if (p.revents & POLLERR) {
            int err = 0;
            socklen_t el = sizeof(err);
            (void)uw_sdp_getsockopt(c->s, SOL_SOCKET, SO_ERROR, &err, &el);
            if (err)
                return report(c, c->s, "finishing the close", err > 0 ? -err : err);
        }
        info_of(c, &i);
        uint64_t now = i.data_msgs_sent + i.credit_updates_sent;
        if (now != last) {
            last = now;
            deadline = rc_now_ms() + idle_ms;
        }
    }
    return SC_OK;
}

/* With a zero-copy threshold in effect on an SDP connection (--zcopy-min or
 * the library's default), makes the socket blocking (the top of this file)
 * and, unless --chunk says otherwise, the stdin buffer at least the
 * threshold, so a send can reach it. */
static int zcopy_setup(struct sc *c)
{
    uw_sdp_info i;
    if (!info_of(c, &i) || i.transport != 1 || !i.zcopy_threshold)
        return -1;
    int nb = 0;
    int rc = uw_sdp_ioctl(c->s, FIONBIO, &nb);
    if (rc < 0) {
        cli_msg("cannot make the socket blocking for zero copy: %s (%s)", uw_strerror(rc),
                uw_err_name(rc));
        return SC_PROTO;
    }
    c->zc = i.zcopy_threshold;
    if (c->o->sink_avail && c->oob_fd < 0) {
        struct timeval tv = {.tv_sec = 0, .tv_usec = SC_SINK_WAIT_MS * 1000};
        rc = uw_sdp_setsockopt(c->s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
        if (rc < 0) {
            cli_msg("cannot set SO_RCVTIMEO for --sink-avail: %s (%s)", uw_strerror(rc),
                    uw_err_name(rc));
            return SC_PROTO;
        }
        c->sink = true;
    }
    if (!c->o->chunk_set && c->zc > c->chunk) {
        size_t n = c->zc < SC_CHUNK_MAX ? c->zc : SC_CHUNK_MAX;
        uint8_t *b = realloc(c->ibuf, n);
        if (!b) {
            cli_msg("out of memory for a %zu-octet send buffer (--zcopy-min)", n);
            return SC_PROTO;
        }
        c->ibuf = b;
        c->chunk = n;
    }
    return -1;
}

static int run(const sc_opts *o)
{
    struct sc *c = calloc(1, sizeof(*c));
    if (!c) {
        cli_msg("out of memory");
        return SC_PROTO;
    }
    c->o = o;
    c->oob_fd = -1;
    snprintf(c->what, sizeof(c->what), "%s", o->listen_spec ? "listener" : "connection");
    struct sockaddr_storage pm_ss;
    socklen_t pm_len = 0;
    int rc = -1;
    c->chunk = o->chunk;
    c->ibuf = malloc(o->chunk);
    if (!c->ibuf) {
        cli_msg("out of memory for a %u-octet --chunk", o->chunk);
        rc = SC_PROTO;
        goto out;
    }
    c->rbuf = malloc(o->recv_size);
    if (!c->rbuf) {
        cli_msg("out of memory for a %u-octet --recv-size", o->recv_size);
        rc = SC_PROTO;
        goto out;
    }
    if (o->oob_out) {
        c->oob_fd = open(o->oob_out, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (c->oob_fd < 0) {
            cli_msg("cannot open --oob-out %s: %s", o->oob_out, strerror(errno));
            rc = SC_USAGE;
            goto out;
        }
    }
    if ((rc = setup_stack(c, &pm_ss, &pm_len)) >= 0)
        goto out;
    rc = o->listen_spec ? run_listen(c) : run_connect(c);
    if (rc >= 0)
        goto out;
    if ((rc = zcopy_setup(c)) >= 0)
        goto out;
    if (o->verbose)
        print_setup_json(c);
    if (o->chrcvbuf) {
        int v = (int)o->chrcvbuf;
        int e = uw_sdp_setsockopt(c->s, SOL_UWARP, UW_SDP_PEER_RCVBUF, &v, sizeof(v));
        if (e < 0) {
            cli_msg("%s: cannot send a ChRcvBuf for %u octets: %s (%s)%s", c->what, o->chrcvbuf,
                    uw_strerror(e), uw_err_name(e),
                    e == -EINVAL ? "; the size must hold a BSDH, a SinkAH and one octet (37)" : "");
            rc = e == -EINVAL ? SC_USAGE : report(c, c->s, "sending a ChRcvBuf", e);
            goto out;
        }
    }
    rc = data_loop(c);
    if (rc == SC_OK && !c->closed)
        rc = wait_done(c);
    if (o->verbose && !c->closed) {
        uw_sdp_info i;
        info_of(c, &i);
        print_exit_json(&i, rc == SC_OK && (i.graceful || (c->shut_sent && c->peer_eof)));
    }
out:
    if (c->s && rc == SC_OK) {
        /* The stack aborts what is still open when it is destroyed: let the
         * close wait (bounded) until our data and DisConn are out. */
        struct linger l = {.l_onoff = 1,
                           .l_linger = o->timeout_ms > 0 ? (o->timeout_ms + 999) / 1000 : 10};
        (void)uw_sdp_setsockopt(c->s, SOL_SOCKET, SO_LINGER, &l, sizeof(l));
    }
    if (c->s)
        uw_sdp_close(c->s);
    if (c->lis)
        uw_sdp_close(c->lis);
    if (c->st)
        uw_sdp_stack_destroy(c->st);
    if (c->oob_fd >= 0)
        close(c->oob_fd);
    free(c->ibuf);
    free(c->rbuf);
    free(c);
    return rc;
}

int main(int argc, char **argv)
{
    cli_set_prog("uwarp-sdpcat");
    /* Send never raises SIGPIPE (sdp.h), but a closed stdout would. */
    signal(SIGPIPE, SIG_IGN);
    sc_opts o;
    int rc = parse_args(argc, argv, &o);
    if (rc >= 0)
        return rc;
    return run(&o);
}
