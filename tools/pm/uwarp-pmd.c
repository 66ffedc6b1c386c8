/* uwarp-pmd: the SDP port mapper service (PMSP, draft-pinkerton-iwarp-sdp-01
 * section 7) as a foreground daemon. This file is the I/O adapter: UDP
 * sockets, poll(), signals and the clock around the sans-I/O uw_pm_server;
 * the control socket for dynamic registrations is pmd_ctl.c. */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../cliutil.h"
#include "pmd.h"
#include "pmd_ctl.h"

const char PMD_HELP[] =
    "usage: uwarp-pmd [OPTIONS]\n"
    "\n"
    "SDP port mapper service (draft-pinkerton-iwarp-sdp-01 section 7): answers\n"
    "PMReq datagrams with PMAccept (the SDP port of a mapped service) or PMDeny,\n"
    "and keeps each accepted mapping until its PMAck arrives or it times out.\n"
    "Runs in the foreground (for systemd); logs to stderr unless --syslog.\n"
    "\n"
    "Options (each may also be a line \"NAME VALUE\" in the --config file; the\n"
    "command line is applied after the file):\n"
    "  --port N             UDP port, default 3935 (the IANA port); 0 picks a free\n"
    "                       one (the log says which)\n"
    "  --listen ADDR[:PORT] address to listen on, repeatable ([V6]:PORT for a port\n"
    "                       with IPv6); default 0.0.0.0 and ::\n"
    "  --map SVC=SDP        map conventional service port SVC to SDP listen port\n"
    "                       SDP (1..65535, or 'same'); repeatable. Requests for\n"
    "                       unmapped ports are denied\n"
    "  --allow NET, --deny NET\n"
    "                       client networks (ADDR or ADDR/LEN, matched against the\n"
    "                       UDP source), repeatable; the first match decides; if\n"
    "                       none matches, clients are denied when any --allow\n"
    "                       exists and allowed otherwise. Denied clients get PMDeny\n"
    "  --pmtime N           PmTime of PMAccepts, 0..255 (default 20 = 5 s;\n"
    "                       0 single use, 1-127 N*250 ms, 128-254 N s, 255 forever)\n"
    "  --accept-timeout MS  how long an accepted mapping waits for its PMAck\n"
    "                       (default 2000)\n"
    "  --max-pending N      mappings held at once (default 4096); when full, new\n"
    "                       requests are denied\n"
    "  --rate N|off, --burst N\n"
    "                       PMReqs per second per source address (default 100,\n"
    "                       burst 200); excess is dropped silently\n"
    "  --control PATH|none  Unix socket where local services register mappings\n"
    "                       that last as long as their connection (default\n"
    "                       $UWARP_PMD_CONTROL, else /run/uwarp/pmd.sock; the\n"
    "                       directory is created). Mode 0666: a request \"MAP SVC\n"
    "                       SDP\" is granted to root, or to the uid that owns every\n"
    "                       listening TCP socket on both ports (docs/portmapper.md)\n"
    "  --control-max-conns N, --control-max-maps N, --control-max-per-uid N\n"
    "                       control connections (default 256), registered\n"
    "                       mappings (1024), and both per non-root uid (64)\n"
    "  --owner-check auto|netlink|proc\n"
    "                       how listening sockets' owners are found: inet_diag\n"
    "                       netlink, /proc/net/tcp{,6}, or netlink falling back to\n"
    "                       /proc (default auto)\n"
    "  --config FILE        read options from FILE ('#' comments; also\n"
    "                       'log stderr|syslog', 'verbose yes|no')\n"
    "  --syslog             log to syslog (daemon facility) instead of stderr\n"
    "  --verbose, -v        log every transaction\n"
    "  --help               this text\n"
    "\n"
    "Signals: SIGHUP re-reads the configuration (maps, rules and PmTime apply at\n"
    "once; timeouts, limits and rates recreate the state table; addresses, port\n"
    "and control settings need a restart); SIGUSR1 logs statistics; SIGTERM and\n"
    "SIGINT log them and exit 0. Statistics are one line: stats: requests=N ...\n"
    "\n"
    "Exit codes: 0 stopped by a signal; 1 usage or configuration error;\n"
    "3 system error (no socket could be opened, or the --control socket).\n";

#define BATCH 256 /* datagrams per socket per wake-up: other sockets get a turn */

typedef struct pmd {
    pmd_config cfg;
    uw_pm_server *srv;
    struct pollfd pfd[PMD_MAX_LISTEN + 1];
    int family[PMD_MAX_LISTEN + 1];
    size_t nsock;
    pmd_ctl *ctl;       /* NULL: no control socket */
    struct pollfd *all; /* pfd, then the control socket's */
    uint64_t received, send_errors;
    int argc;
    char **argv;
} pmd;

static volatile sig_atomic_t g_hup, g_usr1, g_term;
static int g_pipe[2] = {-1, -1};

static void on_signal(int sig)
{
    int saved = errno;
    if (sig == SIGHUP)
        g_hup = 1;
    else if (sig == SIGUSR1)
        g_usr1 = 1;
    else
        g_term = 1;
    /* Wakes poll(); a full pipe already means "wake up". */
    ssize_t n = write(g_pipe[1], "s", 1);
    (void)n;
    errno = saved;
}

static int setup_signals(void)
{
    if (pipe(g_pipe) != 0)
        return -1;
    for (int i = 0; i < 2; i++) {
        fcntl(g_pipe[i], F_SETFL, fcntl(g_pipe[i], F_GETFL) | O_NONBLOCK);
        fcntl(g_pipe[i], F_SETFD, FD_CLOEXEC);
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    const int sigs[] = {SIGHUP, SIGUSR1, SIGTERM, SIGINT};
    for (size_t i = 0; i < 4; i++)
        if (sigaction(sigs[i], &sa, NULL) != 0)
            return -1;
    signal(SIGPIPE, SIG_IGN);
    return 0;
}

static void log_event(void *ud, const uw_pm_server_event *ev)
{
    const pmd *d = ud;
    if (!d->cfg.verbose)
        return;
    static const char *const what[] = {"?", "accepted", "acknowledged", "released"};
    static const char *const why[] = {"", " (no PMAck in time)", " (replaced)", " (service gone)"};
    char from[PMN_ADDRSTRLEN];
    pmd_log(PMD_LOG_DEBUG, "%s: port %u -> %u for %s, handle %016llx%s", what[ev->type],
            (unsigned)ev->req->ap_port, (unsigned)ev->mapping->port, pmn_addr_str(ev->from, from),
            (unsigned long long)ev->req->assoc, ev->type == UW_PM_EV_RELEASED ? why[ev->why] : "");
}

/* Rules first, for every kind of mapping; then the configuration's maps,
 * then the registrations on the control socket. */
static int lookup(void *ud, const uw_pm_msg *req, const uw_pm_udp_addr *from, uw_pm_mapping *out)
{
    pmd *d = ud;
    if (!pmd_client_allowed(&d->cfg, from))
        return 0;
    uint16_t sdp = pmd_static_sdp(&d->cfg, req->ap_port);
    if (!sdp && d->ctl && !pmd_ctl_lookup(d->ctl, req->ap_port, pmn_now(), &sdp))
        return 0; /* unmapped service: PMDeny (7.4) */
    if (!sdp)
        return 0;
    /* The SDP Address is the requested address (this host) with the mapped
     * port; out already holds the requested address. */
    out->port = sdp;
    out->pmtime = d->cfg.pmtime;
    return 1;
}

static bool static_mapped(void *ud, uint16_t port)
{
    const pmd *d = ud;
    return pmd_static_sdp(&d->cfg, port) != 0;
}

static int make_server(pmd *d, const pmd_config *c, uw_pm_server **out)
{
    uw_pm_server_opts o;
    memset(&o, 0, sizeof(o));
    o.lookup = lookup;
    o.lookup_ud = d;
    o.on_event = log_event;
    o.event_ud = d;
    o.accept_timeout_ns = c->accept_timeout_ms * UW_PM_NS_PER_MS;
    o.max_pending = c->max_pending;
    o.rate_per_s = c->rate;
    o.rate_burst = c->burst;
    o.rate_unlimited = c->rate_off;
    o.hash_seed = pmn_random(NULL);
    return uw_pm_server_create(out, &o);
}

static void log_stats(const pmd *d)
{
    uw_pm_server_stats st;
    uw_pm_server_stats_get(d->srv, &st);
    unsigned long rss, peak;
    pmn_rss_kb(&rss, &peak);
    size_t conns, regs;
    pmd_ctl_counts(d->ctl, &conns, &regs);
    pmd_log(PMD_LOG_INFO,
            "stats: received=%llu requests=%llu accepts=%llu denies=%llu duplicates=%llu "
            "replaced=%llu acks=%llu acks_unknown=%llu timeouts=%llu rate_limited=%llu "
            "full=%llu malformed=%llu ignored=%llu pending=%llu pending_peak=%llu "
            "send_errors=%llu registrations=%zu control_conns=%zu rss_kb=%lu rss_peak_kb=%lu",
            (unsigned long long)d->received, (unsigned long long)st.requests,
            (unsigned long long)st.accepts, (unsigned long long)st.denies,
            (unsigned long long)st.duplicates, (unsigned long long)st.replaced,
            (unsigned long long)st.acks, (unsigned long long)st.acks_unknown,
            (unsigned long long)st.timeouts, (unsigned long long)st.rate_limited,
            (unsigned long long)st.full, (unsigned long long)st.malformed,
            (unsigned long long)st.ignored, (unsigned long long)st.pending,
            (unsigned long long)st.pending_peak, (unsigned long long)d->send_errors, regs, conns,
            rss, peak);
}

static int open_socket(pmd *d, const uw_pm_udp_addr *a)
{
    char buf[PMN_ADDRSTRLEN];
    int fam = a->ipv == 4 ? AF_INET : AF_INET6;
    int fd = socket(fam, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        pmd_log(PMD_LOG_WARN, "socket for %s: %s", pmn_addr_str(a, buf), strerror(errno));
        return -1;
    }
    int one = 1;
    if (fam == AF_INET6) {
        /* One socket per family, so "::" does not also claim IPv4. */
        setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
        setsockopt(fd, IPPROTO_IPV6, IPV6_RECVPKTINFO, &one, sizeof(one));
    } else {
        setsockopt(fd, IPPROTO_IP, IP_PKTINFO, &one, sizeof(one));
    }
    /* Bursts are normal for a UDP service; a deeper queue rides them out. */
    int rcvbuf = 4 << 20;
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf));
    struct sockaddr_storage ss;
    socklen_t len = pmn_to_sockaddr(a, &ss);
    if (bind(fd, (struct sockaddr *)&ss, len) != 0) {
        pmd_log(PMD_LOG_WARN, "bind %s: %s", pmn_addr_str(a, buf), strerror(errno));
        close(fd);
        return -1;
    }
    len = sizeof(ss);
    getsockname(fd, (struct sockaddr *)&ss, &len);
    uw_pm_udp_addr bound;
    pmn_from_sockaddr((struct sockaddr *)&ss, &bound);
    if (fam == AF_INET6)
        bound.ipv = 6; /* "::" would otherwise print as IPv4-mapped */
    pmd_log(PMD_LOG_INFO, "listening on %s", pmn_addr_str(&bound, buf));
    d->pfd[d->nsock].fd = fd;
    d->pfd[d->nsock].events = POLLIN;
    d->family[d->nsock] = fam;
    d->nsock++;
    return 0;
}

/* 7.4: a reply goes back to the request's source, and from the address the
 * request was sent to, which on a wildcard socket the kernel only tells
 * through the packet-info control message; it is echoed back here. */
static void send_reply(pmd *d, size_t k, const uw_pm_datagram *rep, const struct msghdr *in)
{
    struct sockaddr_storage ss;
    socklen_t slen = pmn_to_sockaddr(&rep->to, &ss);
    struct iovec iov = {(void *)rep->data, rep->len};
    union {
        char buf[CMSG_SPACE(sizeof(struct in6_pktinfo))];
        struct cmsghdr align;
    } ctl;
    memset(&ctl, 0, sizeof(ctl));
    struct msghdr mh;
    memset(&mh, 0, sizeof(mh));
    mh.msg_name = &ss;
    mh.msg_namelen = slen;
    mh.msg_iov = &iov;
    mh.msg_iovlen = 1;
    for (struct cmsghdr *c = CMSG_FIRSTHDR((struct msghdr *)in); c;
         c = CMSG_NXTHDR((struct msghdr *)in, c)) {
        struct cmsghdr *o = (struct cmsghdr *)ctl.buf;
        if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_PKTINFO && d->family[k] == AF_INET) {
            struct in_pktinfo pi;
            memcpy(&pi, CMSG_DATA(c), sizeof(pi));
            pi.ipi_ifindex = 0; /* route normally, from that address */
            o->cmsg_level = IPPROTO_IP;
            o->cmsg_type = IP_PKTINFO;
            o->cmsg_len = CMSG_LEN(sizeof(pi));
            memcpy(CMSG_DATA(o), &pi, sizeof(pi));
            mh.msg_control = ctl.buf;
            mh.msg_controllen = CMSG_SPACE(sizeof(pi));
        } else if (c->cmsg_level == IPPROTO_IPV6 && c->cmsg_type == IPV6_PKTINFO &&
                   d->family[k] == AF_INET6) {
            struct in6_pktinfo pi;
            memcpy(&pi, CMSG_DATA(c), sizeof(pi));
            o->cmsg_level = IPPROTO_IPV6;
            o->cmsg_type = IPV6_PKTINFO;
            o->cmsg_len = CMSG_LEN(sizeof(pi));
            memcpy(CMSG_DATA(o), &pi, sizeof(pi));
            mh.msg_control = ctl.buf;
            mh.msg_controllen = CMSG_SPACE(sizeof(pi));
        }
    }
    if (sendmsg(d->pfd[k].fd, &mh, 0) < 0)
        d->send_errors++; /* UDP: the client retransmits */
}

static void drain_socket(pmd *d, size_t k)
{
    for (int n = 0; n < BATCH; n++) {
        uint8_t buf[64]; /* longer than any valid message: longer ones are cut to 64 */
        struct sockaddr_storage from;
        union {
            char
                buf[CMSG_SPACE(sizeof(struct in6_pktinfo)) + CMSG_SPACE(sizeof(struct in_pktinfo))];
            struct cmsghdr align;
        } ctl;
        struct iovec iov = {buf, sizeof(buf)};
        struct msghdr mh;
        memset(&mh, 0, sizeof(mh));
        mh.msg_name = &from;
        mh.msg_namelen = sizeof(from);
        mh.msg_iov = &iov;
        mh.msg_iovlen = 1;
        mh.msg_control = ctl.buf;
        mh.msg_controllen = sizeof(ctl.buf);
        ssize_t got = recvmsg(d->pfd[k].fd, &mh, 0);
        if (got < 0) {
            if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
                pmd_log(PMD_LOG_WARN, "recvmsg: %s", strerror(errno));
            return;
        }
        d->received++;
        uw_pm_udp_addr src;
        pmn_from_sockaddr((struct sockaddr *)&from, &src);
        if (src.ipv != 4 && src.ipv != 6)
            continue;
        uw_pm_datagram rep;
        int v = uw_pm_server_recv(d->srv, pmn_now(), buf, (size_t)got, &src, &rep);
        if (d->cfg.verbose) {
            static const char *const verdict[] = {
                "accept",      "deny",          "duplicate, accept",       "duplicate, deny",
                "ack",         "duplicate ack", "unknown ack (discarded)", "rate limited (dropped)",
                "full (deny)", "ignored"};
            char a[PMN_ADDRSTRLEN];
            pmd_log(PMD_LOG_DEBUG, "%s: %s", pmn_addr_str(&src, a),
                    v >= 0 && v <= UW_PM_S_IGNORED ? verdict[v] : uw_strerror(v));
        }
        if (rep.len)
            send_reply(d, k, &rep, &mh);
    }
}

static bool same_listen(const pmd_config *a, const pmd_config *b)
{
    if (a->port != b->port || a->nlisten != b->nlisten)
        return false;
    return memcmp(a->listen, b->listen, a->nlisten * sizeof(a->listen[0])) == 0;
}

static void reload(pmd *d)
{
    pmd_config n;
    pmd_config_init(&n);
    if (pmd_config_load(&n, d->argc, d->argv) != 0) {
        pmd_log(PMD_LOG_ERR, "reload failed; keeping the running configuration");
        pmd_config_free(&n);
        return;
    }
    if (!same_listen(&n, &d->cfg))
        pmd_log(PMD_LOG_WARN, "listen addresses and port change only on restart");
    if (!pmd_control_equal(&n, &d->cfg))
        pmd_log(PMD_LOG_WARN, "control socket settings change only on restart");
    if (!pmd_tunables_equal(&n, &d->cfg)) {
        uw_pm_server *s;
        if (make_server(d, &n, &s) != 0) {
            pmd_log(PMD_LOG_ERR, "reload: out of memory; keeping the running configuration");
            pmd_config_free(&n);
            return;
        }
        log_stats(d); /* the old table's counters end here */
        uw_pm_server_destroy(d->srv);
        d->srv = s;
        pmd_log(PMD_LOG_INFO, "limits changed: mapping state restarted");
    }
    /* Keep what only a restart changes; take the rest. */
    n.port = d->cfg.port;
    n.nlisten = d->cfg.nlisten;
    memcpy(n.listen, d->cfg.listen, sizeof(n.listen));
    n.use_syslog = d->cfg.use_syslog;
    free(n.control);
    n.control = d->cfg.control;
    d->cfg.control = NULL;
    n.ctl_max_conns = d->cfg.ctl_max_conns;
    n.ctl_max_maps = d->cfg.ctl_max_maps;
    n.ctl_max_per_uid = d->cfg.ctl_max_per_uid;
    n.owner_check = d->cfg.owner_check;
    pmd_config_free(&d->cfg);
    d->cfg = n;
    pmd_log(PMD_LOG_INFO, "configuration reloaded: %zu maps, %zu rules, pmtime %u", d->cfg.nmaps,
            d->cfg.nrules, (unsigned)d->cfg.pmtime);
}

int main(int argc, char **argv)
{
    cli_set_prog("uwarp-pmd");
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            cli_out *o = malloc(sizeof(*o));
            if (!o)
                return CLI_EXIT_IO;
            out_init(o, STDOUT_FILENO);
            out_str(o, PMD_HELP);
            int rc = out_flush(o);
            free(o);
            return rc;
        }
    }
    static pmd d;
    d.argc = argc;
    d.argv = argv;
    pmd_config_init(&d.cfg);
    int rc = pmd_config_load(&d.cfg, argc, argv);
    if (rc)
        return rc;
    pmd_log_syslog(d.cfg.use_syslog);
    if (setup_signals() != 0) {
        pmd_log(PMD_LOG_ERR, "signals: %s", strerror(errno));
        return CLI_EXIT_IO;
    }
    d.pfd[0].fd = g_pipe[0];
    d.pfd[0].events = POLLIN;
    d.nsock = 1;
    if (d.cfg.nlisten == 0) {
        uw_pm_udp_addr any4, any6;
        memset(&any4, 0, sizeof(any4));
        memset(&any6, 0, sizeof(any6));
        any4.ipv = 4;
        any6.ipv = 6;
        any4.port = any6.port = d.cfg.port;
        open_socket(&d, &any4);
        open_socket(&d, &any6);
    } else {
        for (size_t i = 0; i < d.cfg.nlisten; i++) {
            uw_pm_udp_addr a = d.cfg.listen[i];
            if (a.port == 0)
                a.port = d.cfg.port;
            open_socket(&d, &a);
        }
    }
    if (d.nsock == 1) {
        pmd_log(PMD_LOG_ERR, "no socket could be opened");
        return CLI_EXIT_IO;
    }
    if (make_server(&d, &d.cfg, &d.srv) != 0) {
        pmd_log(PMD_LOG_ERR, "out of memory");
        return CLI_EXIT_IO;
    }
    bool ctl_explicit;
    const char *ctl_path = pmd_control_path(&d.cfg, &ctl_explicit);
    if (ctl_path) {
        pmd_ctl_opts co;
        memset(&co, 0, sizeof(co));
        co.path = ctl_path;
        co.max_conns = d.cfg.ctl_max_conns;
        co.max_maps = d.cfg.ctl_max_maps;
        co.max_per_uid = d.cfg.ctl_max_per_uid;
        co.owner_source = d.cfg.owner_check;
        co.recheck_ns = 1000 * UW_PM_NS_PER_MS;
        co.static_mapped = static_mapped;
        co.ud = &d;
        if (pmd_ctl_open(&d.ctl, &co) != 0) {
            if (ctl_explicit) {
                uw_pm_server_destroy(d.srv);
                return CLI_EXIT_IO;
            }
            pmd_log(PMD_LOG_WARN, "control: no dynamic registration (static maps only)");
        }
    } else {
        pmd_log(PMD_LOG_INFO, "control: disabled");
    }
    d.all = calloc(d.nsock + (d.ctl ? pmd_ctl_max_fds(d.ctl) : 0), sizeof(*d.all));
    if (!d.all) {
        pmd_log(PMD_LOG_ERR, "out of memory");
        return CLI_EXIT_IO;
    }
    pmd_log(PMD_LOG_INFO, "ready: %zu maps, %zu rules, pmtime %u, accept timeout %llu ms",
            d.cfg.nmaps, d.cfg.nrules, (unsigned)d.cfg.pmtime,
            (unsigned long long)d.cfg.accept_timeout_ms);

    while (!g_term) {
        uint64_t now = pmn_now();
        uw_pm_server_tick(d.srv, now);
        uint64_t next = uw_pm_server_next_deadline(d.srv);
        int timeout = -1;
        if (next != UW_PM_FOREVER) {
            uint64_t ms = next > now ? (next - now + UW_PM_NS_PER_MS - 1) / UW_PM_NS_PER_MS : 0;
            timeout = ms > 60000 ? 60000 : (int)ms;
        }
        memcpy(d.all, d.pfd, d.nsock * sizeof(*d.all));
        size_t nctl = d.ctl ? pmd_ctl_fill(d.ctl, d.all + d.nsock) : 0;
        int n = poll(d.all, d.nsock + nctl, timeout);
        for (size_t k = 0; k < d.nsock; k++)
            d.pfd[k].revents = n > 0 ? d.all[k].revents : 0;
        if (n < 0 && errno != EINTR) {
            pmd_log(PMD_LOG_ERR, "poll: %s", strerror(errno));
            break;
        }
        if (n > 0 && (d.pfd[0].revents & POLLIN)) {
            char junk[64];
            while (read(g_pipe[0], junk, sizeof(junk)) > 0)
                ;
        }
        if (g_hup) {
            g_hup = 0;
            reload(&d);
        }
        if (g_usr1) {
            g_usr1 = 0;
            log_stats(&d);
        }
        for (size_t k = 1; n > 0 && k < d.nsock; k++)
            if (d.pfd[k].revents & (POLLIN | POLLERR))
                drain_socket(&d, k);
        if (n > 0 && d.ctl)
            pmd_ctl_service(d.ctl, d.all + d.nsock, nctl, pmn_now());
    }
    log_stats(&d);
    pmd_ctl_close(d.ctl);
    free(d.all);
    pmd_log(PMD_LOG_INFO, "exiting");
    for (size_t k = 0; k < d.nsock; k++)
        close(d.pfd[k].fd);
    close(g_pipe[1]);
    uw_pm_server_destroy(d.srv);
    pmd_config_free(&d.cfg);
    return CLI_EXIT_OK;
}
