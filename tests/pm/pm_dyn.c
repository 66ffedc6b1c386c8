/* Test driver for the library's port mapper helpers: registration with
 * uwarp-pmd's control socket (src/io/pm_reg.c) and the Connecting Peer's
 * resolver (src/io/pm_resolve.c). tests/pm/dynamic.sh runs it.
 *
 *   pm_dyn register [--timeout MS] [--once] PATH|- SVC:SDP...
 *       Registers each mapping on one connection (PATH "-": the default path)
 *       and prints "MAP SVC SDP OK" or "MAP SVC SDP ERR <name>" for each. A
 *       port written "L0" (or "LN") is first listened on, on 127.0.0.1, port
 *       0 (or N), and printed as the port the kernel gave. With --once it
 *       exits then. Else it prints "held" and reads stdin: "unlisten" closes
 *       the listeners (the registration stays) and prints "unlistened";
 *       "unmap SVC" drops one mapping and prints "UNMAP SVC OK|ERR <name>";
 *       end of file closes the registration and prints "closed", then it
 *       waits (at most 60 s) to be killed. Exit status: 0 all registered, 3
 *       not.
 *   pm_dyn listen PORT...
 *       Listens on 127.0.0.1:PORT (0: any), prints "PORT N" for each, then
 *       "ready", and exits at end of stdin (at most 60 s).
 *   pm_dyn garbage PATH CONNS ROUNDS SEED
 *       Opens CONNS connections to the control socket and, ROUNDS times,
 *       writes random octets (lines of random length, some far too long,
 *       some valid requests) on a random one, reads whatever came back and
 *       now and then closes one abruptly and opens another. Prints "sent N
 *       replies M". The daemon must survive it.
 *   pm_dyn resolve [--server ADDR:PORT|silent|closed|fake] [--server-port N]
 *                  [--timeout MS] [--neg MS] [--count N] [--threads N]
 *                  [--bind ADDR] DST PORT
 *       Resolves DST PORT --count times in a row (or once in each of
 *       --threads threads) with one resolver and prints, per call:
 *       "sdp|tcp ADDR PORT REASON[/CACHED_REASON] sent=N ms=M". silent: a
 *       UDP port that never answers; closed: a UDP port nobody has open
 *       (ICMP port unreachable); fake: a port mapper in a thread that prints
 *       the CpIPAddr and CpPort of each PMReq ("cp ADDR PORT") and accepts it
 *       with port + 10000. --bind binds a TCP socket to ADDR port 0 first
 *       and passes it as the source ("bound PORT" is printed).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "io/pm_reg.h"
#include "io/pm_resolve.h"
#include "uwarp/pm.h"

#define MAX_PORTS 32

static int usage(void)
{
    fprintf(stderr, "usage: pm_dyn register|listen|resolve ... (see the source)\n");
    return 2;
}

static int listen_on(const char *ip, uint16_t port, uint16_t *got)
{
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof(ss));
    socklen_t len;
    int fam;
    struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;
    struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;
    if (inet_pton(AF_INET, ip, &s4->sin_addr) == 1) {
        fam = AF_INET;
        s4->sin_family = AF_INET;
        s4->sin_port = htons(port);
        len = sizeof(*s4);
    } else if (inet_pton(AF_INET6, ip, &s6->sin6_addr) == 1) {
        fam = AF_INET6;
        s6->sin6_family = AF_INET6;
        s6->sin6_port = htons(port);
        len = sizeof(*s6);
    } else {
        return -1;
    }
    int fd = socket(fam, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || bind(fd, (struct sockaddr *)&ss, len) != 0 || listen(fd, 8) != 0) {
        fprintf(stderr, "pm_dyn: listen %s:%u: %s\n", ip, (unsigned)port, strerror(errno));
        if (fd >= 0)
            close(fd);
        return -1;
    }
    len = sizeof(ss);
    getsockname(fd, (struct sockaddr *)&ss, &len);
    *got = ntohs(fam == AF_INET ? s4->sin_port : s6->sin6_port);
    return fd;
}

/* Reads stdin until end of file or 60 s; returns the first line's start in
 * buf ("" at end of file). */
static bool read_line(char *buf, size_t cap)
{
    struct pollfd p = {.fd = STDIN_FILENO, .events = POLLIN};
    size_t n = 0;
    for (;;) {
        if (poll(&p, 1, 60000) <= 0)
            return false;
        char c;
        ssize_t got = read(STDIN_FILENO, &c, 1);
        if (got <= 0) {
            buf[n] = '\0';
            return n > 0;
        }
        if (c == '\n') {
            buf[n] = '\0';
            return true;
        }
        if (n + 1 < cap)
            buf[n++] = c;
    }
}

/* "L0", "L123" or "123". */
static int port_arg(const char *s, bool *listen_it, uint16_t *port)
{
    *listen_it = s[0] == 'L';
    if (*listen_it)
        s++;
    char *end;
    unsigned long v = strtoul(s, &end, 10);
    if (!*s || *end || v > 65535)
        return -1;
    *port = (uint16_t)v;
    return 0;
}

static int cmd_register(int argc, char **argv)
{
    int timeout = 2000, i = 0;
    bool once = false;
    for (;;) {
        if (i + 1 < argc && strcmp(argv[i], "--timeout") == 0) {
            timeout = atoi(argv[i + 1]);
            i += 2;
        } else if (i < argc && strcmp(argv[i], "--once") == 0) {
            once = true;
            i++;
        } else {
            break;
        }
    }
    if (argc - i < 2)
        return usage();
    const char *path = strcmp(argv[i], "-") == 0 ? NULL : argv[i];
    i++;
    int lfd[2 * MAX_PORTS];
    size_t nl = 0;
    int fd = -1, status = 0;
    for (; i < argc && nl + 2 <= 2 * MAX_PORTS; i++) {
        char buf[64];
        snprintf(buf, sizeof(buf), "%s", argv[i]);
        char *colon = strchr(buf, ':');
        if (!colon)
            return usage();
        *colon = '\0';
        uint16_t port[2];
        bool lis[2];
        if (port_arg(buf, &lis[0], &port[0]) || port_arg(colon + 1, &lis[1], &port[1]))
            return usage();
        for (int k = 0; k < 2; k++) {
            if (!lis[k])
                continue;
            int l = listen_on("127.0.0.1", port[k], &port[k]);
            if (l < 0)
                return 1;
            lfd[nl++] = l;
        }
        int rc = fd < 0 ? uw__pm_register(path, port[0], port[1], timeout, &fd)
                        : uw__pm_reg_map(fd, port[0], port[1], timeout);
        if (rc == 0)
            printf("MAP %u %u OK\n", (unsigned)port[0], (unsigned)port[1]);
        else
            printf("MAP %u %u ERR %s\n", (unsigned)port[0], (unsigned)port[1], uw_err_name(rc));
        fflush(stdout);
        if (rc)
            status = 3;
    }
    if (once) {
        if (fd >= 0)
            close(fd);
        for (size_t k = 0; k < nl; k++)
            close(lfd[k]);
        return status;
    }
    printf("held\n");
    fflush(stdout);
    char line[64];
    while (read_line(line, sizeof(line))) {
        if (strncmp(line, "unmap ", 6) == 0) {
            int svc = atoi(line + 6);
            int rc = uw__pm_reg_unmap(fd, (uint16_t)svc, timeout);
            printf("UNMAP %d %s%s\n", svc, rc ? "ERR " : "OK", rc ? uw_err_name(rc) : "");
            fflush(stdout);
        } else if (strcmp(line, "unlisten") == 0) {
            for (size_t k = 0; k < nl; k++)
                close(lfd[k]);
            nl = 0;
            printf("unlistened\n");
            fflush(stdout);
        }
    }
    if (fd >= 0)
        close(fd);
    printf("closed\n");
    fflush(stdout);
    /* Kept alive (listeners open) until killed, so that "closed the
     * descriptor" and "the process died" are separate cases. */
    for (int k = 0; k < 600; k++)
        poll(NULL, 0, 100);
    return status;
}

static int cmd_listen(int argc, char **argv)
{
    int fds[MAX_PORTS];
    int n = 0;
    for (int i = 0; i < argc && n < MAX_PORTS; i++) {
        bool lis;
        uint16_t port;
        if (port_arg(argv[i], &lis, &port))
            return usage();
        fds[n] = listen_on("127.0.0.1", port, &port);
        if (fds[n] < 0)
            return 1;
        n++;
        printf("PORT %u\n", (unsigned)port);
    }
    printf("ready\n");
    fflush(stdout);
    char line[64];
    while (read_line(line, sizeof(line)))
        ;
    for (int i = 0; i < n; i++)
        close(fds[i]);
    return 0;
}

static uint64_t g_rng;

static uint64_t rnd(void)
{
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return g_rng;
}

static int unix_connect(const char *path)
{
    struct sockaddr_un sa;
    memset(&sa, 0, sizeof(sa));
    sa.sun_family = AF_UNIX;
    snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

static int cmd_garbage(int argc, char **argv)
{
    if (argc != 4)
        return usage();
    const char *path = argv[0];
    int conns = atoi(argv[1]), rounds = atoi(argv[2]);
    g_rng = strtoull(argv[3], NULL, 0) | 1;
    if (conns < 1 || conns > 64 || rounds < 0)
        return usage();
    int fd[64];
    for (int i = 0; i < conns; i++)
        fd[i] = unix_connect(path);
    unsigned long long sent = 0, replies = 0;
    for (int r = 0; r < rounds; r++) {
        int i = (int)(rnd() % (uint64_t)conns);
        if (fd[i] < 0 || rnd() % 50 == 0) {
            if (fd[i] >= 0)
                close(fd[i]); /* abrupt: maybe with replies unread */
            fd[i] = unix_connect(path);
            if (fd[i] < 0)
                continue;
        }
        char buf[512];
        size_t n = 0;
        switch (rnd() % 4) {
        case 0: /* random octets */
            n = 1 + rnd() % sizeof(buf);
            for (size_t k = 0; k < n; k++)
                buf[k] = (char)rnd();
            break;
        case 1: /* random printable lines */
            n = 1 + rnd() % sizeof(buf);
            for (size_t k = 0; k < n; k++)
                buf[k] = rnd() % 8 == 0 ? '\n' : (char)(0x20 + rnd() % 95);
            break;
        case 2: /* near-valid requests */
            n = (size_t)snprintf(buf, sizeof(buf), "%s %u %u\n", rnd() % 2 ? "MAP" : "UNMAP",
                                 (unsigned)(rnd() % 70000), (unsigned)(rnd() % 70000));
            break;
        default: /* a line too long */
            n = 200 + rnd() % 300;
            memset(buf, 'M', n);
            break;
        }
        ssize_t w = send(fd[i], buf, n, MSG_NOSIGNAL);
        if (w > 0)
            sent += (unsigned long long)w;
        ssize_t got;
        while ((got = recv(fd[i], buf, sizeof(buf), 0)) > 0)
            for (ssize_t k = 0; k < got; k++)
                replies += buf[k] == '\n';
        if (got == 0 || (got < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) {
            close(fd[i]); /* the daemon closed it (a line too long) */
            fd[i] = -1;
        }
    }
    for (int i = 0; i < conns; i++)
        if (fd[i] >= 0)
            close(fd[i]);
    printf("sent %llu replies %llu\n", sent, replies);
    return 0;
}

/* ------------------------------------------------------------------------ */
/* resolve                                                                   */

typedef struct res_job {
    uw__pm_resolver *r;
    struct sockaddr_storage dst, src;
    socklen_t dstlen;
    bool have_src;
    char line[512];
} res_job;

static uint64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void do_resolve(res_job *j)
{
    uw__pm_resolution out;
    int rc = uw__pm_resolve(j->r, (struct sockaddr *)&j->dst, j->dstlen,
                            j->have_src ? (struct sockaddr *)&j->src : NULL, 0, &out);
    if (rc) {
        snprintf(j->line, sizeof(j->line), "error %s", uw_err_name(rc));
        return;
    }
    char ip[INET6_ADDRSTRLEN];
    uint16_t port;
    if (out.addr.ss_family == AF_INET) {
        struct sockaddr_in *s4 = (struct sockaddr_in *)&out.addr;
        inet_ntop(AF_INET, &s4->sin_addr, ip, sizeof(ip));
        port = ntohs(s4->sin_port);
    } else {
        struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&out.addr;
        inet_ntop(AF_INET6, &s6->sin6_addr, ip, sizeof(ip));
        port = ntohs(s6->sin6_port);
    }
    char reason[32];
    snprintf(reason, sizeof(reason), "%s%s%s", uw__pm_res_reason_name(out.reason),
             out.reason == UW__PM_RES_CACHED ? "/" : "",
             out.reason == UW__PM_RES_CACHED ? uw__pm_res_reason_name(out.cached_reason) : "");
    snprintf(j->line, sizeof(j->line), "%s %s %u %s sent=%u ms=%llu # %s",
             out.use_sdp ? "sdp" : "tcp", ip, (unsigned)port, reason, out.sent,
             (unsigned long long)(out.elapsed_ns / 1000000), out.why);
}

static void *resolve_thread(void *arg)
{
    do_resolve(arg);
    return NULL;
}

static int fake_fd = -1;

/* A port mapper that accepts everything with port + 10000 and PmTime 0,
 * printing what the PMReq said about the Connecting Peer. */
static void *fake_server(void *arg)
{
    (void)arg;
    for (;;) {
        uint8_t buf[64];
        struct sockaddr_storage from;
        socklen_t fl = sizeof(from);
        ssize_t n = recvfrom(fake_fd, buf, sizeof(buf), 0, (struct sockaddr *)&from, &fl);
        if (n <= 0) /* shut down */
            return NULL;
        uw_pm_msg m;
        if (uw_pm_decode(buf, (size_t)n, &m) != 0 || m.type != UW_PM_REQ)
            continue;
        char ip[INET6_ADDRSTRLEN];
        inet_ntop(m.ipv == 4 ? AF_INET : AF_INET6, m.cp_ip, ip, sizeof(ip));
        printf("cp %s %u\n", ip, (unsigned)m.cp_port);
        fflush(stdout);
        m.type = UW_PM_ACCEPT;
        m.ap_port = (uint16_t)(m.ap_port + 10000);
        m.pmtime = 0;
        uint8_t out[UW_PM_MSG_LEN];
        uw_pm_encode(&m, out, sizeof(out));
        sendto(fake_fd, out, sizeof(out), 0, (struct sockaddr *)&from, fl);
    }
}

static int parse_sockaddr(const char *ip, uint16_t port, struct sockaddr_storage *ss,
                          socklen_t *len)
{
    memset(ss, 0, sizeof(*ss));
    struct sockaddr_in *s4 = (struct sockaddr_in *)ss;
    struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)ss;
    if (inet_pton(AF_INET, ip, &s4->sin_addr) == 1) {
        s4->sin_family = AF_INET;
        s4->sin_port = htons(port);
        *len = sizeof(*s4);
        return 0;
    }
    if (inet_pton(AF_INET6, ip, &s6->sin6_addr) == 1) {
        s6->sin6_family = AF_INET6;
        s6->sin6_port = htons(port);
        *len = sizeof(*s6);
        return 0;
    }
    return -1;
}

/* A UDP socket on the loopback address of dst's family; returns its port. */
static int udp_port(const char *dst_ip, bool keep, int *fd_out, char *server, size_t cap)
{
    const char *lo = strchr(dst_ip, ':') ? "::1" : "127.0.0.1";
    struct sockaddr_storage ss;
    socklen_t len;
    parse_sockaddr(lo, 0, &ss, &len);
    int fd = socket(ss.ss_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || bind(fd, (struct sockaddr *)&ss, len) != 0)
        return -1;
    getsockname(fd, (struct sockaddr *)&ss, &len);
    uint16_t port = ntohs(ss.ss_family == AF_INET ? ((struct sockaddr_in *)&ss)->sin_port
                                                  : ((struct sockaddr_in6 *)&ss)->sin6_port);
    snprintf(server, cap, strchr(lo, ':') ? "[%s]:%u" : "%s:%u", lo, (unsigned)port);
    if (keep)
        *fd_out = fd;
    else
        close(fd); /* nobody there now: ICMP port unreachable */
    return 0;
}

static int cmd_resolve(int argc, char **argv)
{
    uw__pm_resolver_opts o;
    memset(&o, 0, sizeof(o));
    const char *server = NULL, *bind_ip = NULL;
    int count = 1, threads = 0;
    int i = 0;
    for (; i + 1 < argc && argv[i][0] == '-' && argv[i][1] == '-'; i += 2) {
        const char *k = argv[i], *v = argv[i + 1];
        if (strcmp(k, "--server") == 0)
            server = v;
        else if (strcmp(k, "--server-port") == 0)
            o.server_port = (uint16_t)atoi(v);
        else if (strcmp(k, "--timeout") == 0)
            o.timeout_ms = atoi(v);
        else if (strcmp(k, "--neg") == 0)
            o.neg_cache_ms = atoi(v);
        else if (strcmp(k, "--count") == 0)
            count = atoi(v);
        else if (strcmp(k, "--threads") == 0)
            threads = atoi(v);
        else if (strcmp(k, "--bind") == 0)
            bind_ip = v;
        else
            return usage();
    }
    if (argc - i != 2 || count < 1 || count > 100 || threads < 0 || threads > 64)
        return usage();
    const char *dst_ip = argv[i];
    uint16_t dst_port = (uint16_t)atoi(argv[i + 1]);
    char srvbuf[80];
    int silent_fd = -1;
    pthread_t fake;
    bool have_fake = false;
    if (server && (strcmp(server, "silent") == 0 || strcmp(server, "closed") == 0 ||
                   strcmp(server, "fake") == 0)) {
        bool keep = strcmp(server, "closed") != 0;
        if (udp_port(dst_ip, keep, &silent_fd, srvbuf, sizeof(srvbuf)) != 0) {
            perror("pm_dyn: udp");
            return 1;
        }
        if (strcmp(server, "fake") == 0) {
            fake_fd = silent_fd;
            if (pthread_create(&fake, NULL, fake_server, NULL) != 0)
                return 1;
            have_fake = true;
        }
        server = srvbuf;
    }
    o.server = server;
    uw__pm_resolver *r;
    int rc = uw__pm_resolver_create(&r, &o);
    if (rc) {
        printf("create %s\n", uw_err_name(rc));
        return 1;
    }
    res_job *jobs = calloc((size_t)(threads ? threads : count), sizeof(*jobs));
    if (!jobs)
        return 1;
    res_job base;
    memset(&base, 0, sizeof(base));
    base.r = r;
    if (parse_sockaddr(dst_ip, dst_port, &base.dst, &base.dstlen) != 0)
        return usage();
    int tcp = -1;
    if (bind_ip) {
        socklen_t len;
        if (parse_sockaddr(bind_ip, 0, &base.src, &len) != 0)
            return usage();
        tcp = socket(base.src.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (tcp < 0 || bind(tcp, (struct sockaddr *)&base.src, len) != 0) {
            perror("pm_dyn: bind");
            return 1;
        }
        len = sizeof(base.src);
        getsockname(tcp, (struct sockaddr *)&base.src, &len);
        base.have_src = true;
        uint16_t p =
            ntohs(base.src.ss_family == AF_INET ? ((struct sockaddr_in *)&base.src)->sin_port
                                                : ((struct sockaddr_in6 *)&base.src)->sin6_port);
        printf("bound %u\n", (unsigned)p);
        fflush(stdout);
    }
    uint64_t t0 = mono_ms();
    if (threads) {
        pthread_t *t = calloc((size_t)threads, sizeof(*t));
        if (!t)
            return 1;
        for (int k = 0; k < threads; k++) {
            jobs[k] = base;
            if (pthread_create(&t[k], NULL, resolve_thread, &jobs[k]) != 0)
                return 1;
        }
        for (int k = 0; k < threads; k++) {
            pthread_join(t[k], NULL);
            printf("%s\n", jobs[k].line);
        }
        free(t);
    } else {
        for (int k = 0; k < count; k++) {
            jobs[k] = base;
            do_resolve(&jobs[k]);
            printf("%s\n", jobs[k].line);
            fflush(stdout);
        }
    }
    printf("total ms=%llu\n", (unsigned long long)(mono_ms() - t0));
    free(jobs);
    uw__pm_resolver_destroy(r);
    if (tcp >= 0)
        close(tcp);
    if (have_fake) {
        shutdown(fake_fd, SHUT_RDWR); /* ends its recvfrom */
        pthread_join(fake, NULL);
    }
    if (silent_fd >= 0)
        close(silent_fd);
    return 0;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc < 2)
        return usage();
    if (strcmp(argv[1], "register") == 0)
        return cmd_register(argc - 2, argv + 2);
    if (strcmp(argv[1], "listen") == 0)
        return cmd_listen(argc - 2, argv + 2);
    if (strcmp(argv[1], "resolve") == 0)
        return cmd_resolve(argc - 2, argv + 2);
    if (strcmp(argv[1], "garbage") == 0)
        return cmd_garbage(argc - 2, argv + 2);
    return usage();
}
