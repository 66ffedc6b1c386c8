/* pl_calls: a table of socket call sequences on loopback, run against plain
 * kernel TCP and (by compare.sh) under libuwarp-preload.so, to compare the
 * two call by call (issue 17: "a table of call sequences run on both,
 * results and errno compared").
 *
 * Only libc is used (no uwarp header): the program is the application.
 *
 * Every sequence has two halves that run the same function: the server
 * half (S: listeners, accepted sockets) and the client half (C: connecting
 * sockets). They meet at sync points over a control channel (an AF_UNIX
 * stream, which the preload library passes through untouched):
 *   --role both     (default) S in a thread, C in the main thread, one process
 *   --role server --ctl PATH   S only, listening on the AF_UNIX path PATH
 *   --role client --ctl PATH   C only, connecting to PATH
 * so that compare.sh can preload one end only (fallback to TCP).
 *
 * Output (stdout, the client prints both halves): one line per step,
 *     SEQUENCE SIDE NN DESCRIPTION = RESULT
 * RESULT is normalized so that two correct runs print the same text: a
 * return value as "-1 ERRNO" or the count; descriptors print "fd", counts
 * that legitimately vary ">0"; revents as "IN OUT RDHUP"; ports as
 * "port=L" (the sequence's listener), "port=eph" (any other) or "port=0".
 * Every step also carries the result plain TCP gives (on Linux 6.x); a step
 * that differs is reported on stderr as MISMATCH and the exit status is 1,
 * so the plain run checks the table itself.
 *
 * Every wait is bounded: poll timeouts, SO_RCVTIMEO where the call itself
 * is not what is tested, and a watchdog that ends the process (exit 3,
 * "TIMEOUT in SEQUENCE") when one sequence runs for more than 60 s. */
#include "pl_calls.h"

/* ---- per-half state --------------------------------------------------------- */

_Thread_local int g_role;
static _Thread_local int g_ctl = -1;
static _Thread_local jmp_buf g_abort;
static _Thread_local bool g_got_end; /* the other half's END of this sequence was read */
static _Thread_local char *g_out;
static _Thread_local size_t g_outlen, g_outcap;
static _Thread_local int g_step, g_fails, g_steps;
static _Thread_local const char *g_seq;
static _Thread_local int g_sync;
static _Thread_local int g_fds[64];
static _Thread_local int g_nfds;
_Thread_local int g_lport;
_Thread_local long g_r;
_Thread_local int g_e;

volatile sig_atomic_t g_sigpipe, g_sigalrm;
_Thread_local char g_buf[1 << 16];
static _Atomic long g_deadline; /* monotonic ms; 0: none */
static const char *_Atomic g_wd_seq;

long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

void outf(const char *fmt, ...)
{
    va_list ap;
    for (;;) {
        va_start(ap, fmt);
        int n =
            vsnprintf(g_out ? g_out + g_outlen : NULL, g_out ? g_outcap - g_outlen : 0, fmt, ap);
        va_end(ap);
        if (n < 0)
            return;
        if (g_out && g_outlen + (size_t)n < g_outcap) {
            g_outlen += (size_t)n;
            return;
        }
        size_t cap = g_outcap ? g_outcap * 2 : 4096;
        while (cap < g_outlen + (size_t)n + 1)
            cap *= 2;
        char *p = realloc(g_out, cap);
        if (!p) {
            perror("realloc");
            _exit(2);
        }
        g_out = p;
        g_outcap = cap;
    }
}

const char *ename(int e)
{
    if (e == 0)
        return "OK";
    const char *n = strerrorname_np(e);
    return n ? n : "E?";
}

/* Rotating small buffers for formatted values. */
char *sbuf(void)
{
    static _Thread_local char b[16][160];
    static _Thread_local unsigned i;
    return b[i++ % 16];
}

/* ---- steps ------------------------------------------------------------------ */

void record(const char *desc, const char *got, const char *exp)
{
    g_step++;
    g_steps++;
    outf("%s %c %02d %s = %s\n", g_seq, g_role, g_step, desc, got);
    if (exp && strcmp(got, exp) != 0) {
        g_fails++;
        fprintf(stderr, "MISMATCH %s %c %02d %s: expected \"%s\", got \"%s\"\n", g_seq, g_role,
                g_step, desc, exp, got);
    }
}

/* A call's result against the expectation: exp "fd" prints any r >= 0 as
 * "fd", ">0" any r > 0 as ">0", else the exact number; r < 0 prints
 * "-1 ENAME". Returns r. */
long tr_(const char *desc, long r, int e, const char *exp)
{
    char *s = sbuf();
    if (r < 0)
        snprintf(s, 160, "%ld %s", r, ename(e));
    else if (strcmp(exp, "fd") == 0)
        snprintf(s, 160, "fd");
    else if (strcmp(exp, ">0") == 0 && r > 0)
        snprintf(s, 160, ">0");
    else
        snprintf(s, 160, "%ld", r);
    record(desc, s, exp);
    errno = e;
    return r;
}

void track(int fd)
{
    if (fd >= 0 && g_nfds < 64)
        g_fds[g_nfds++] = fd;
}

void untrack(int fd)
{
    for (int i = 0; i < g_nfds; i++)
        if (g_fds[i] == fd) {
            g_fds[i] = g_fds[--g_nfds];
            return;
        }
}

void xclose(int fd)
{
    if (fd >= 0) {
        untrack(fd);
        close(fd);
    }
}

/* ---- control channel -------------------------------------------------------- */

enum { CTL_SYNC = 1, CTL_INT = 2, CTL_ABORT = 3, CTL_END = 4, CTL_TEXT = 5 };

static void fatal(const char *what)
{
    fprintf(stderr, "FATAL (%c, sequence %s): %s\n", g_role, g_seq ? g_seq : "-", what);
    printf("FATAL %s\n", what);
    fflush(stdout);
    _exit(2);
}

static void ctl_write(const void *p, size_t n)
{
    const char *c = p;
    while (n) {
        ssize_t w = write(g_ctl, c, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            fatal("control channel write");
        c += w;
        n -= (size_t)w;
    }
}

static void ctl_read(void *p, size_t n)
{
    char *c = p;
    long end = now_ms() + CTL_WAIT_MS;
    while (n) {
        struct pollfd pf = {g_ctl, POLLIN, 0};
        long left = end - now_ms();
        if (left <= 0)
            fatal("control channel: the other half did not answer in time");
        int pr = poll(&pf, 1, (int)left);
        if (pr < 0 && errno == EINTR)
            continue;
        if (pr <= 0)
            continue;
        ssize_t r = read(g_ctl, c, n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            fatal("control channel closed");
        c += r;
        n -= (size_t)r;
    }
}

static void ctl_put(int tag, int val)
{
    int32_t m[2] = {tag, val};
    ctl_write(m, sizeof m);
}

/* The next record, which must have this tag; an ABORT from the other half
 * ends this half's sequence too. */
static int ctl_get(int tag)
{
    int32_t m[2];
    ctl_read(m, sizeof m);
    if (m[0] == CTL_ABORT || m[0] == CTL_END) {
        if (m[0] == CTL_END)
            g_got_end = true;
        outf("%s %c -- the other half gave up\n", g_seq, g_role);
        longjmp(g_abort, 1);
    }
    if (m[0] != tag)
        fatal("control channel out of step");
    return m[1];
}

void sync_(void)
{
    ctl_put(CTL_SYNC, ++g_sync);
    if (ctl_get(CTL_SYNC) != g_sync)
        fatal("sync points out of step");
}

void put_int(int v)
{
    ctl_put(CTL_INT, v);
}

int get_int(void)
{
    return ctl_get(CTL_INT);
}

/* A setup step failed: the sequence cannot go on. */
void seq_abort(const char *what)
{
    int e = errno;
    char *s = sbuf();
    snprintf(s, 160, "ABORT: %s: %s", what, ename(e));
    record("setup", s, NULL);
    g_fails++;
    fprintf(stderr, "ABORT %s %c: %s: %s\n", g_seq, g_role, what, ename(e));
    ctl_put(CTL_ABORT, 0);
    longjmp(g_abort, 1);
}

/* ---- formatting ------------------------------------------------------------- */

static const struct {
    int f;
    const char *n;
} ev_names[] = {{POLLIN, "IN"},   {POLLPRI, "PRI"},   {POLLOUT, "OUT"},    {POLLERR, "ERR"},
                {POLLHUP, "HUP"}, {POLLNVAL, "NVAL"}, {POLLRDHUP, "RDHUP"}};

const char *evs(int re)
{
    char *s = sbuf();
    s[0] = 0;
    if (re < 0) {
        snprintf(s, 160, "-1 %s", ename(errno));
        return s;
    }
    for (size_t i = 0; i < sizeof ev_names / sizeof ev_names[0]; i++)
        if (re & ev_names[i].f) {
            if (s[0])
                strcat(s, " ");
            strcat(s, ev_names[i].n);
        }
    if (!s[0])
        strcpy(s, "none");
    return s;
}

int parse_evs(const char *txt)
{
    int m = 0;
    char tmp[160];
    snprintf(tmp, sizeof tmp, "%s", txt);
    for (char *sv = NULL, *w = strtok_r(tmp, " ", &sv); w; w = strtok_r(NULL, " ", &sv))
        for (size_t i = 0; i < sizeof ev_names / sizeof ev_names[0]; i++)
            if (strcmp(w, ev_names[i].n) == 0)
                m |= ev_names[i].f;
    return m;
}

int port_of(const struct sockaddr_storage *ss)
{
    if (ss->ss_family == AF_INET)
        return ntohs(((const struct sockaddr_in *)ss)->sin_port);
    if (ss->ss_family == AF_INET6)
        return ntohs(((const struct sockaddr_in6 *)ss)->sin6_port);
    return -1;
}

const char *port_class(int p)
{
    return p == 0 ? "port=0" : p == g_lport ? "port=L" : "port=eph";
}

const char *sa_str(const struct sockaddr_storage *ss, socklen_t len)
{
    char *s = sbuf();
    char a[INET6_ADDRSTRLEN] = "?";
    if (len == 0) {
        snprintf(s, 160, "len=0");
    } else if (ss->ss_family == AF_INET) {
        inet_ntop(AF_INET, &((const struct sockaddr_in *)ss)->sin_addr, a, sizeof a);
        snprintf(s, 160, "inet %s %s len=%u", a, port_class(port_of(ss)), (unsigned)len);
    } else if (ss->ss_family == AF_INET6) {
        inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)ss)->sin6_addr, a, sizeof a);
        snprintf(s, 160, "inet6 %s %s len=%u", a, port_class(port_of(ss)), (unsigned)len);
    } else {
        snprintf(s, 160, "family=%d len=%u", ss->ss_family, (unsigned)len);
    }
    return s;
}

const char *sockname(int fd)
{
    struct sockaddr_storage ss;
    socklen_t len = sizeof ss;
    memset(&ss, 0, sizeof ss);
    if (getsockname(fd, (struct sockaddr *)&ss, &len) < 0) {
        char *s = sbuf();
        snprintf(s, 160, "-1 %s", ename(errno));
        return s;
    }
    return sa_str(&ss, len);
}

const char *peername(int fd)
{
    struct sockaddr_storage ss;
    socklen_t len = sizeof ss;
    memset(&ss, 0, sizeof ss);
    if (getpeername(fd, (struct sockaddr *)&ss, &len) < 0) {
        char *s = sbuf();
        snprintf(s, 160, "-1 %s", ename(errno));
        return s;
    }
    return sa_str(&ss, len);
}

int local_port(int fd)
{
    struct sockaddr_storage ss;
    socklen_t len = sizeof ss;
    memset(&ss, 0, sizeof ss);
    if (getsockname(fd, (struct sockaddr *)&ss, &len) < 0)
        return -1;
    return port_of(&ss);
}

int peer_port(int fd)
{
    struct sockaddr_storage ss;
    socklen_t len = sizeof ss;
    memset(&ss, 0, sizeof ss);
    if (getpeername(fd, (struct sockaddr *)&ss, &len) < 0)
        return -1;
    return port_of(&ss);
}

/* "nb=N ce=N": O_NONBLOCK and FD_CLOEXEC. */
const char *fdflags(int fd)
{
    char *s = sbuf();
    int fl = fcntl(fd, F_GETFL), fdf = fcntl(fd, F_GETFD);
    if (fl < 0 || fdf < 0)
        snprintf(s, 160, "-1 %s", ename(errno));
    else
        snprintf(s, 160, "nb=%d ce=%d", !!(fl & O_NONBLOCK), !!(fdf & FD_CLOEXEC));
    return s;
}

const char *ftype(int fd)
{
    struct stat st;
    if (fstat(fd, &st) < 0)
        return "-1";
    return S_ISSOCK(st.st_mode) ? "sock" : "other";
}

/* getsockopt of an int; -1 with errno on failure. */
int gi(int fd, int level, int name)
{
    int v = 0;
    socklen_t len = sizeof v;
    if (getsockopt(fd, level, name, &v, &len) < 0)
        return -1;
    return v;
}

int si(int fd, int level, int name, int v)
{
    return setsockopt(fd, level, name, &v, sizeof v);
}

/* SO_ERROR as a name. */
const char *so_error(int fd)
{
    int v = gi(fd, SOL_SOCKET, SO_ERROR);
    if (v < 0) {
        char *s = sbuf();
        snprintf(s, 160, "-1 %s", ename(errno));
        return s;
    }
    return ename(v);
}

int tcp_state(int fd)
{
    struct tcp_info ti;
    socklen_t len = sizeof ti;
    memset(&ti, 0, sizeof ti);
    if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) < 0)
        return -1;
    return ti.tcpi_state;
}

/* ---- waits ------------------------------------------------------------------ */

int poll1(int fd, int events, int ms)
{
    struct pollfd pf = {fd, (short)events, 0};
    int r = poll(&pf, 1, ms);
    if (r < 0)
        return -1;
    return r == 0 ? 0 : pf.revents;
}

/* Polls until revents is exactly the expected set (or SETTLE_MS passed) and
 * records what it saw: a state that arrives later than on TCP is waited
 * for, a different one is reported. */
void settle(const char *desc, int fd, const char *exp)
{
    int want = parse_evs(exp), re = 0;
    long end = now_ms() + SETTLE_MS;
    for (;;) {
        re = poll1(fd, ALLEV, 0);
        if (re == want || now_ms() >= end)
            break;
        poll1(fd, ALLEV & ~re, 5); /* sleep until something more shows, briefly */
        sleep_ms(1);
    }
    V(desc, evs(re), exp);
}

/* Waits (quietly) until FIONREAD shows at least n octets. */
void wait_bytes(int fd, int n)
{
    long end = now_ms() + SETTLE_MS;
    int avail = 0;
    while (now_ms() < end) {
        if (ioctl(fd, FIONREAD, &avail) == 0 && avail >= n)
            return;
        poll1(fd, POLLIN, 5);
        sleep_ms(1);
    }
}

/* epoll_wait for one event: "N EVENTS" (N the count). */
const char *ep_wait(int ep, int ms)
{
    struct epoll_event ev[4];
    memset(ev, 0, sizeof ev);
    int n = epoll_wait(ep, ev, 4, ms);
    char *s = sbuf();
    if (n < 0)
        snprintf(s, 160, "-1 %s", ename(errno));
    else if (n == 0)
        snprintf(s, 160, "0");
    else
        snprintf(s, 160, "%d %s", n, evs((int)ev[0].events));
    return s;
}

int ep_add(int ep, int fd, unsigned events)
{
    struct epoll_event ev;
    memset(&ev, 0, sizeof ev);
    ev.events = events;
    ev.data.fd = fd;
    return epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
}

int ep_mod(int ep, int fd, unsigned events)
{
    struct epoll_event ev;
    memset(&ev, 0, sizeof ev);
    ev.events = events;
    ev.data.fd = fd;
    return epoll_ctl(ep, EPOLL_CTL_MOD, fd, &ev);
}

/* ---- setup helpers (quiet unless they fail) ---------------------------------- */

socklen_t loop_addr(int family, int port, struct sockaddr_storage *ss)
{
    memset(ss, 0, sizeof *ss);
    if (family == AF_INET6) {
        struct sockaddr_in6 *a = (struct sockaddr_in6 *)ss;
        a->sin6_family = AF_INET6;
        a->sin6_addr = in6addr_loopback;
        a->sin6_port = htons((uint16_t)port);
        return sizeof *a;
    }
    struct sockaddr_in *a = (struct sockaddr_in *)ss;
    a->sin_family = AF_INET;
    a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a->sin_port = htons((uint16_t)port);
    return sizeof *a;
}

/* A listener on the loopback address of family, port chosen by the kernel;
 * sets g_lport. */
int mk_listener(int family, int backlog)
{
    struct sockaddr_storage ss;
    int l = socket(family, SOCK_STREAM, 0);
    if (l < 0)
        seq_abort("socket (listener)");
    track(l);
    socklen_t len = loop_addr(family, 0, &ss);
    if (bind(l, (struct sockaddr *)&ss, len) < 0)
        seq_abort("bind (listener)");
    if (listen(l, backlog) < 0)
        seq_abort("listen");
    g_lport = local_port(l);
    return l;
}

int accept_to(int l, int flags)
{
    if (!(poll1(l, POLLIN, SETTLE_MS) & POLLIN)) {
        errno = ETIMEDOUT;
        seq_abort("accept: no connection within 5 s");
    }
    int a = accept4(l, NULL, NULL, flags);
    if (a < 0)
        seq_abort("accept");
    track(a);
    return a;
}

int connect_to(int family, int port)
{
    struct sockaddr_storage ss;
    int c = socket(family, SOCK_STREAM, 0);
    if (c < 0)
        seq_abort("socket (client)");
    track(c);
    socklen_t len = loop_addr(family, port, &ss);
    if (connect(c, (struct sockaddr *)&ss, len) < 0)
        seq_abort("connect");
    return c;
}

/* Both halves: S listens (sends the port), accepts and closes the listener;
 * C connects. Returns the connected descriptor of this half. */
int pair_open(int family)
{
    if (SRV) {
        int l = mk_listener(family, 8);
        put_int(g_lport);
        int a = accept_to(l, 0);
        xclose(l);
        return a;
    }
    g_lport = get_int();
    return connect_to(family, g_lport);
}

/* Quiet full send/recv for setup. */
void send_all(int fd, const void *p, size_t n)
{
    const char *c = p;
    while (n) {
        ssize_t w = send(fd, c, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            seq_abort("send (setup)");
        c += w;
        n -= (size_t)w;
    }
}

long fill(int fd)
{
    static const size_t chunk[] = {sizeof g_buf, 1024, 1};
    long total = 0;
    for (size_t i = 0; i < 3; i++) {
        ssize_t n;
        while ((n = send(fd, g_buf, chunk[i], MSG_DONTWAIT | MSG_NOSIGNAL)) > 0)
            total += n;
        if (n < 0 && errno != EAGAIN)
            return -1;
    }
    return total;
}

void set_rcvtimeo(int fd, int ms)
{
    struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
}

const char *str_n(const char *p, long n)
{
    char *s = sbuf();
    if (n < 0)
        n = 0;
    if (n > 150)
        n = 150;
    snprintf(s, 160, "\"%.*s\"", (int)n, p);
    return s;
}

void pattern(unsigned char *p, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++)
        p[i] = (unsigned char)((i * 131u + seed * 7u + (i >> 9)) & 0xff);
}

const char *pattern_ok(const unsigned char *p, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != (unsigned char)((i * 131u + seed * 7u + (i >> 9)) & 0xff))
            return "corrupt";
    return "intact";
}

/* Elapsed time in a range, as a word. */
const char *elapsed(long ms, long lo, long hi)
{
    char *s = sbuf();
    if (ms < lo)
        snprintf(s, 160, "early");
    else if (ms > hi)
        snprintf(s, 160, "late");
    else
        snprintf(s, 160, "in %ld-%ld ms", lo, hi);
    return s;
}

static void on_sigpipe(int sig)
{
    (void)sig;
    g_sigpipe++;
}

static void on_sigalrm(int sig)
{
    (void)sig;
    g_sigalrm++;
}

void set_alrm(bool restart)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigalrm;
    sa.sa_flags = restart ? SA_RESTART : 0;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGALRM, &sa, NULL);
}

/* A one-shot SIGALRM after ms (process-directed: in --role both the server
 * thread blocks it, so it interrupts the client half). */
void alarm_ms(int ms)
{
    struct itimerval it;
    memset(&it, 0, sizeof it);
    it.it_value.tv_sec = ms / 1000;
    it.it_value.tv_usec = (ms % 1000) * 1000;
    setitimer(ITIMER_REAL, &it, NULL);
}

/* ---- runner ----------------------------------------------------------------- */

struct seq {
    const char *name;
    void (*fn)(void);
};
#define SEQ(n) {#n, seq_##n},
static const struct seq seqs[] = {SEQ_LIST(SEQ)};
#define NSEQ (sizeof seqs / sizeof seqs[0])

static bool g_only[NSEQ];
static bool g_only_any;

static void *watchdog(void *arg)
{
    (void)arg;
    for (;;) {
        sleep_ms(100);
        long d = atomic_load(&g_deadline);
        if (d && now_ms() > d) {
            const char *n = atomic_load(&g_wd_seq);
            fflush(stdout);
            printf("TIMEOUT in %s\n", n ? n : "?");
            fflush(stdout);
            fprintf(stderr, "TIMEOUT: sequence %s ran for more than %d ms\n", n ? n : "?",
                    SEQ_LIMIT_MS);
            _exit(3);
        }
    }
    return NULL;
}

/* setjmp in a frame of its own: nothing here to be clobbered by longjmp. */
static void run_one(void (*fn)(void))
{
    if (setjmp(g_abort) == 0)
        fn();
}

/* Runs every selected sequence as this half; the client prints. */
static int run_half(int role, int ctl)
{
    g_role = role;
    g_ctl = ctl;
    int fails = 0, steps = 0, nseq = 0;
    for (size_t i = 0; i < NSEQ; i++) {
        if (g_only_any && !g_only[i])
            continue;
        nseq++;
        g_seq = seqs[i].name;
        g_step = 0;
        g_sync = 0;
        g_fails = 0;
        g_steps = 0;
        g_outlen = 0;
        g_lport = -1;
        g_nfds = 0;
        g_got_end = false;
        if (CLI) {
            atomic_store(&g_wd_seq, g_seq);
            atomic_store(&g_deadline, now_ms() + SEQ_LIMIT_MS);
        }
        run_one(seqs[i].fn);
        alarm_ms(0);
        while (g_nfds > 0)
            xclose(g_fds[g_nfds - 1]);
        /* End of sequence: skip what an abort left on the channel. */
        ctl_put(CTL_END, (int)i);
        while (!g_got_end) {
            int32_t m[2];
            ctl_read(m, sizeof m);
            if (m[0] == CTL_END && m[1] == (int)i)
                break;
            if (m[0] == CTL_TEXT) /* cannot happen before END */
                fatal("control channel: text before end");
        }
        if (SRV) {
            ctl_put(CTL_TEXT, (int)g_outlen);
            ctl_put(g_fails, g_steps);
            ctl_write(g_out ? g_out : "", g_outlen);
        } else {
            int32_t m[2];
            ctl_read(m, sizeof m);
            if (m[0] != CTL_TEXT)
                fatal("control channel: no text");
            int32_t fs[2];
            ctl_read(fs, sizeof fs);
            char *t = malloc((size_t)m[1] + 1);
            if (!t)
                fatal("malloc");
            ctl_read(t, (size_t)m[1]);
            fwrite(t, 1, (size_t)m[1], stdout);
            free(t);
            fwrite(g_out ? g_out : "", 1, g_outlen, stdout);
            fflush(stdout);
            fails += fs[0] + g_fails;
            steps += fs[1] + g_steps;
            atomic_store(&g_deadline, 0);
        }
    }
    free(g_out);
    g_out = NULL;
    g_outlen = g_outcap = 0;
    if (CLI) {
        fprintf(stderr, "pl_calls: %d sequences, %d steps, %d mismatches\n", nseq, steps, fails);
        return fails ? 1 : 0;
    }
    return 0;
}

static void *server_thread(void *arg)
{
    sigset_t ss;
    sigemptyset(&ss);
    sigaddset(&ss, SIGALRM);
    pthread_sigmask(SIG_BLOCK, &ss, NULL);
    run_half('S', (int)(intptr_t)arg);
    return NULL;
}

static int ctl_socket(const char *path, bool server)
{
    struct sockaddr_un un;
    memset(&un, 0, sizeof un);
    un.sun_family = AF_UNIX;
    if (strlen(path) >= sizeof un.sun_path) {
        fprintf(stderr, "pl_calls: --ctl path too long\n");
        exit(1);
    }
    strcpy(un.sun_path, path);
    int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (s < 0) {
        perror("socket(AF_UNIX)");
        exit(2);
    }
    if (server) {
        unlink(path);
        if (bind(s, (struct sockaddr *)&un, sizeof un) < 0 || listen(s, 1) < 0) {
            perror("bind/listen --ctl");
            exit(2);
        }
        if (!(poll1(s, POLLIN, 30000) & POLLIN)) {
            fprintf(stderr, "pl_calls: no client on --ctl within 30 s\n");
            exit(2);
        }
        int a = accept4(s, NULL, NULL, SOCK_CLOEXEC);
        if (a < 0) {
            perror("accept --ctl");
            exit(2);
        }
        close(s);
        unlink(path);
        return a;
    }
    for (int i = 0; i < 300; i++) {
        if (connect(s, (struct sockaddr *)&un, sizeof un) == 0)
            return s;
        sleep_ms(100);
    }
    perror("connect --ctl");
    exit(2);
}

static void usage(void)
{
    fprintf(stderr, "usage: pl_calls [--role both|server|client] [--ctl PATH] [--only A,B,...] "
                    "[--list]\n");
    exit(1);
}

int main(int argc, char **argv)
{
    const char *role = "both", *ctl = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--role") == 0 && i + 1 < argc) {
            role = argv[++i];
        } else if (strcmp(argv[i], "--ctl") == 0 && i + 1 < argc) {
            ctl = argv[++i];
        } else if (strcmp(argv[i], "--only") == 0 && i + 1 < argc) {
            char *list = argv[++i], *sv = NULL;
            for (char *w = strtok_r(list, ",", &sv); w; w = strtok_r(NULL, ",", &sv)) {
                size_t k;
                for (k = 0; k < NSEQ; k++)
                    if (strcmp(seqs[k].name, w) == 0)
                        break;
                if (k == NSEQ) {
                    fprintf(stderr, "pl_calls: no sequence %s\n", w);
                    exit(1);
                }
                g_only[k] = g_only_any = true;
            }
        } else if (strcmp(argv[i], "--list") == 0) {
            for (size_t k = 0; k < NSEQ; k++)
                printf("%s\n", seqs[k].name);
            return 0;
        } else {
            usage();
        }
    }
    setvbuf(stdout, NULL, _IOFBF, 1 << 16);

    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigpipe;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGPIPE, &sa, NULL);
    set_alrm(true);

    /* Threads of this program block SIGALRM; only the client half takes it. */
    sigset_t blk, old;
    sigemptyset(&blk);
    sigaddset(&blk, SIGALRM);
    pthread_sigmask(SIG_BLOCK, &blk, &old);
    pthread_t wd;
    if (pthread_create(&wd, NULL, watchdog, NULL) != 0) {
        fprintf(stderr, "pl_calls: pthread_create\n");
        return 2;
    }
    pthread_detach(wd);
    pthread_sigmask(SIG_SETMASK, &old, NULL);

    if (strcmp(role, "both") == 0) {
        int sv[2];
        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) {
            perror("socketpair");
            return 2;
        }
        pthread_t th;
        if (pthread_create(&th, NULL, server_thread, (void *)(intptr_t)sv[1]) != 0) {
            fprintf(stderr, "pl_calls: pthread_create\n");
            return 2;
        }
        int rc = run_half('C', sv[0]);
        pthread_join(th, NULL);
        return rc;
    }
    if (!ctl)
        usage();
    if (strcmp(role, "server") == 0) {
        sigprocmask(SIG_BLOCK, &blk, NULL);
        return run_half('S', ctl_socket(ctl, true));
    }
    if (strcmp(role, "client") == 0)
        return run_half('C', ctl_socket(ctl, false));
    usage();
    return 1;
}
