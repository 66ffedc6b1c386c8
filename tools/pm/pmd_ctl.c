/* uwarp-pmd's control socket (docs/portmapper.md, "Dynamic registration").
 *
 * A Unix-domain stream socket, mode 0666: anyone may connect, and every
 * request is authorised on its own from the caller's kernel-supplied
 * credentials (SO_PEERCRED). A mapping SVC -> SDP is granted to root, or to
 * a uid that owns every listening TCP socket on SVC and on SDP (at least
 * one on each). It lives exactly as long as the connection that registered
 * it: when the client closes it or its process dies, the kernel closes the
 * socket, poll() reports the hang-up, and the mappings go.
 *
 * Everything is bounded and nonblocking: connections, mappings, mappings and
 * connections per uid, input and output per connection (a client that does
 * not read its replies stops being read). Parsing is the sans-I/O
 * src/pm/ctl.c. */
#include "pmd_ctl.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "pm/ctl.h"
#include "pmd.h"

#define IN_CAP 256   /* unparsed request octets held per connection */
#define OUT_CAP 1024 /* unsent reply octets per connection */
#define ACCEPT_BATCH 64

typedef struct conn {
    int fd; /* -1: free slot */
    uint64_t id;
    uint32_t uid;
    int pid;
    bool closing; /* close once the replies are out */
    size_t in_len, out_len;
    uw__pm_ctl_rx rx;
    char in[IN_CAP];
    char out[OUT_CAP];
} conn;

typedef struct map {
    bool used;
    uint16_t svc, sdp;
    size_t conn; /* index of the registering connection */
    uint32_t uid;
    bool ok;          /* the last ownership check passed */
    uint64_t checked; /* when it ran */
} map;

struct pmd_ctl {
    pmd_ctl_opts o;
    char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
    int lfd;
    int spare_fd; /* given up to accept-and-close when out of descriptors */
    dev_t dev;
    ino_t ino;
    conn *conns;
    size_t nconns;
    map *maps;
    size_t nmaps;
    uint64_t next_id;
    size_t *slot; /* per pollfd of the last fill: connection index, SIZE_MAX: listener */
};

static void mkdir_parents(const char *path)
{
    char buf[sizeof(((struct sockaddr_un *)0)->sun_path)];
    snprintf(buf, sizeof(buf), "%s", path);
    char *last = strrchr(buf, '/');
    if (!last || last == buf)
        return;
    *last = '\0';
    for (char *p = buf + 1;; p++) {
        if (*p == '/' || *p == '\0') {
            char c = *p;
            *p = '\0';
            if (mkdir(buf, 0755) != 0 && errno != EEXIST)
                return; /* bind() will report what is wrong */
            *p = c;
            if (!c)
                return;
        }
    }
}

int pmd_ctl_open(pmd_ctl **out, const pmd_ctl_opts *o)
{
    *out = NULL;
    struct sockaddr_un sa;
    memset(&sa, 0, sizeof(sa));
    sa.sun_family = AF_UNIX;
    size_t plen = strlen(o->path);
    if (plen == 0 || plen >= sizeof(sa.sun_path)) {
        pmd_log(PMD_LOG_ERR, "control: socket path '%s' is empty or longer than %zu octets",
                o->path, sizeof(sa.sun_path) - 1);
        return -1;
    }
    memcpy(sa.sun_path, o->path, plen);
    mkdir_parents(o->path);
    struct stat st;
    if (lstat(o->path, &st) == 0) {
        if (!S_ISSOCK(st.st_mode)) {
            pmd_log(PMD_LOG_ERR, "control: %s exists and is not a socket", o->path);
            return -1;
        }
        /* A socket file nobody listens on is left over from a daemon that
         * died; one that answers belongs to a running daemon. */
        int p = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        int rc = p < 0 ? -1 : connect(p, (struct sockaddr *)&sa, sizeof(sa));
        int e = errno;
        if (p >= 0)
            close(p);
        if (rc == 0) {
            pmd_log(PMD_LOG_ERR, "control: another daemon is listening on %s", o->path);
            return -1;
        }
        if (e != ECONNREFUSED && e != ENOENT) {
            pmd_log(PMD_LOG_ERR, "control: %s: %s", o->path, strerror(e));
            return -1;
        }
        unlink(o->path);
    }
    pmd_ctl *c = calloc(1, sizeof(*c));
    if (!c) {
        pmd_log(PMD_LOG_ERR, "control: out of memory");
        return -1;
    }
    c->o = *o;
    memcpy(c->path, o->path, plen + 1);
    c->o.path = c->path;
    c->lfd = c->spare_fd = -1;
    c->next_id = 1;
    c->conns = calloc(o->max_conns, sizeof(*c->conns));
    c->maps = calloc(o->max_maps, sizeof(*c->maps));
    c->slot = calloc(o->max_conns + 1, sizeof(*c->slot));
    if (!c->conns || !c->maps || !c->slot) {
        pmd_log(PMD_LOG_ERR, "control: out of memory");
        pmd_ctl_close(c);
        return -1;
    }
    for (size_t i = 0; i < o->max_conns; i++)
        c->conns[i].fd = -1;
    c->lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (c->lfd < 0 || bind(c->lfd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
        pmd_log(PMD_LOG_ERR, "control: bind %s: %s", o->path, strerror(errno));
        if (c->lfd >= 0)
            close(c->lfd);
        c->lfd = -1;
        pmd_ctl_close(c);
        return -1;
    }
    /* Everyone may connect: authorisation is per request (SO_PEERCRED). */
    if (chmod(o->path, 0666) != 0 || listen(c->lfd, 64) != 0 || stat(o->path, &st) != 0) {
        pmd_log(PMD_LOG_ERR, "control: %s: %s", o->path, strerror(errno));
        pmd_ctl_close(c);
        return -1;
    }
    c->dev = st.st_dev;
    c->ino = st.st_ino;
    c->spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    pmd_log(PMD_LOG_INFO,
            "control: listening on %s (at most %zu connections, %zu mappings, %zu per uid)",
            o->path, o->max_conns, o->max_maps, o->max_per_uid);
    *out = c;
    return 0;
}

static void drop_conn(pmd_ctl *c, size_t i, const char *why)
{
    conn *k = &c->conns[i];
    char list[256] = "";
    size_t len = 0, dropped = 0;
    for (size_t m = 0; m < c->o.max_maps; m++) {
        if (!c->maps[m].used || c->maps[m].conn != i)
            continue;
        c->maps[m].used = false;
        c->nmaps--;
        dropped++;
        if (len + 16 < sizeof(list))
            len += (size_t)snprintf(list + len, sizeof(list) - len, " %u->%u",
                                    (unsigned)c->maps[m].svc, (unsigned)c->maps[m].sdp);
    }
    if (dropped)
        pmd_log(PMD_LOG_INFO, "control: uid %u pid %d %s: %zu mapping%s dropped:%s",
                (unsigned)k->uid, k->pid, why, dropped, dropped == 1 ? "" : "s", list);
    close(k->fd);
    k->fd = -1;
    c->nconns--;
}

void pmd_ctl_close(pmd_ctl *c)
{
    if (!c)
        return;
    if (c->conns)
        for (size_t i = 0; i < c->o.max_conns; i++)
            if (c->conns[i].fd >= 0)
                drop_conn(c, i, "disconnected (daemon exiting)");
    if (c->lfd >= 0) {
        close(c->lfd);
        /* Only the file this daemon made: a successor may have replaced it. */
        struct stat st;
        if (stat(c->path, &st) == 0 && st.st_dev == c->dev && st.st_ino == c->ino)
            unlink(c->path);
    }
    if (c->spare_fd >= 0)
        close(c->spare_fd);
    free(c->conns);
    free(c->maps);
    free(c->slot);
    free(c);
}

size_t pmd_ctl_max_fds(const pmd_ctl *c)
{
    return c->o.max_conns + 1;
}

size_t pmd_ctl_fill(pmd_ctl *c, struct pollfd *pfd)
{
    size_t n = 0;
    pfd[n] = (struct pollfd){.fd = c->lfd, .events = POLLIN};
    c->slot[n++] = SIZE_MAX;
    for (size_t i = 0; i < c->o.max_conns; i++) {
        conn *k = &c->conns[i];
        if (k->fd < 0)
            continue;
        short ev = 0;
        if (!k->closing && k->in_len < IN_CAP)
            ev |= POLLIN;
        if (k->out_len)
            ev |= POLLOUT;
        pfd[n] = (struct pollfd){.fd = k->fd, .events = ev};
        c->slot[n++] = i;
    }
    return n;
}

static void reply(conn *k, int err, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static void reply(conn *k, int err, const char *fmt, ...)
{
    char msg[UW__PM_CTL_LINE_MAX];
    msg[0] = '\0';
    if (fmt) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
    }
    /* process() leaves room for a whole line before it parses one. */
    ssize_t n = uw__pm_ctl_fmt_reply(err, msg, k->out + k->out_len, OUT_CAP - k->out_len);
    if (n > 0)
        k->out_len += (size_t)n;
}

/* Ownership rule: at least one listening socket on each port, and all of
 * them the caller's. Returns 0, or -1 with the reason in why. */
static int verify(const pmd_ctl *c, uint32_t uid, uint16_t svc, uint16_t sdp, char *why, size_t cap)
{
    pmd_port_check ch[2];
    memset(ch, 0, sizeof(ch));
    ch[0].port = svc;
    ch[1].port = sdp;
    size_t n = svc == sdp ? 1 : 2;
    int src = pmd_owner_check(c->o.owner_source, uid, ch, n);
    if (src < 0) {
        snprintf(why, cap, "cannot read the owners of listening sockets: %s", strerror(-src));
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        if (ch[i].foreign) {
            snprintf(why, cap, "port %u has a listening socket of uid %u", (unsigned)ch[i].port,
                     (unsigned)ch[i].foreign_uid);
            return -1;
        }
        if (!ch[i].mine) {
            snprintf(why, cap, "no listening TCP socket on port %u belongs to uid %u",
                     (unsigned)ch[i].port, (unsigned)uid);
            return -1;
        }
    }
    return 0;
}

static size_t maps_of_uid(const pmd_ctl *c, uint32_t uid)
{
    size_t n = 0;
    for (size_t m = 0; m < c->o.max_maps; m++)
        n += c->maps[m].used && c->maps[m].uid == uid;
    return n;
}

static void do_map(pmd_ctl *c, size_t i, uint16_t svc, uint16_t sdp, uint64_t now)
{
    conn *k = &c->conns[i];
    char why[UW__PM_CTL_LINE_MAX];
    int err = 0;
    size_t free_slot = SIZE_MAX;
    for (size_t m = 0; m < c->o.max_maps && !err; m++) {
        if (!c->maps[m].used) {
            if (free_slot == SIZE_MAX)
                free_slot = m;
        } else if (c->maps[m].svc == svc) {
            err = UW_EADDRINUSE;
            snprintf(why, sizeof(why), "port %u is mapped by %s", (unsigned)svc,
                     c->maps[m].conn == i ? "this connection already" : "another registration");
        }
    }
    if (!err && c->o.static_mapped && c->o.static_mapped(c->o.ud, svc)) {
        err = UW_EADDRINUSE;
        snprintf(why, sizeof(why), "port %u is mapped by the configuration", (unsigned)svc);
    } else if (!err && free_slot == SIZE_MAX) {
        err = UW_ENOBUFS;
        snprintf(why, sizeof(why), "registration table full (%zu mappings)", c->o.max_maps);
    } else if (!err && k->uid != 0 && maps_of_uid(c, k->uid) >= c->o.max_per_uid) {
        err = UW_ENOBUFS;
        snprintf(why, sizeof(why), "uid %u holds %zu mappings, the most allowed", (unsigned)k->uid,
                 c->o.max_per_uid);
    } else if (!err && k->uid != 0 && verify(c, k->uid, svc, sdp, why, sizeof(why)) != 0) {
        err = UW_EPERM;
    }
    if (err) {
        reply(k, err, "%s", why);
        pmd_log(PMD_LOG_INFO, "control: uid %u pid %d: MAP %u %u refused: %s", (unsigned)k->uid,
                k->pid, (unsigned)svc, (unsigned)sdp, why);
        return;
    }
    map *m = &c->maps[free_slot];
    *m = (map){true, svc, sdp, i, k->uid, true, now};
    c->nmaps++;
    reply(k, 0, NULL);
    pmd_log(PMD_LOG_INFO, "control: uid %u pid %d: registered %u -> %u", (unsigned)k->uid, k->pid,
            (unsigned)svc, (unsigned)sdp);
}

static void do_unmap(pmd_ctl *c, size_t i, uint16_t svc)
{
    conn *k = &c->conns[i];
    for (size_t m = 0; m < c->o.max_maps; m++) {
        if (c->maps[m].used && c->maps[m].conn == i && c->maps[m].svc == svc) {
            c->maps[m].used = false;
            c->nmaps--;
            reply(k, 0, NULL);
            pmd_log(PMD_LOG_INFO, "control: uid %u pid %d: unregistered %u -> %u", (unsigned)k->uid,
                    k->pid, (unsigned)svc, (unsigned)c->maps[m].sdp);
            return;
        }
    }
    reply(k, UW_ENOENT, "port %u is not mapped by this connection", (unsigned)svc);
}

/* Parses and answers what has arrived, while there is room for replies. */
static void process(pmd_ctl *c, size_t i, uint64_t now)
{
    conn *k = &c->conns[i];
    while (k->in_len && !k->closing && k->out_len + UW__PM_CTL_LINE_MAX + 1 <= OUT_CAP) {
        const char *line;
        size_t len;
        ssize_t used = uw__pm_ctl_rx_feed(&k->rx, k->in, k->in_len, &line, &len);
        if (used < 0) {
            reply(k, UW_EMSGSIZE, "request longer than %d octets", UW__PM_CTL_LINE_MAX);
            k->closing = true;
            k->in_len = 0;
            break;
        }
        memmove(k->in, k->in + used, k->in_len - (size_t)used);
        k->in_len -= (size_t)used;
        if (!line)
            continue;
        uw__pm_ctl_req req;
        int rc = uw__pm_ctl_parse_req(line, len, &req);
        if (rc == UW_EPROTO)
            reply(k, UW_EPROTO, "not a request: MAP SVC SDP or UNMAP SVC");
        else if (rc)
            reply(k, UW_EINVAL, "ports are 1..65535 in decimal");
        else if (req.op == UW__PM_CTL_MAP)
            do_map(c, i, req.svc, req.sdp, now);
        else
            do_unmap(c, i, req.svc);
    }
}

/* Sends pending replies. Returns false when the connection was dropped. */
static bool flush(pmd_ctl *c, size_t i)
{
    conn *k = &c->conns[i];
    while (k->out_len) {
        ssize_t n = send(k->fd, k->out, k->out_len, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n > 0) {
            memmove(k->out, k->out + n, k->out_len - (size_t)n);
            k->out_len -= (size_t)n;
        } else if (n < 0 && errno == EINTR) {
            continue;
        } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            return true;
        } else {
            drop_conn(c, i, "disconnected");
            return false;
        }
    }
    if (k->closing) {
        drop_conn(c, i, "closed after a protocol error");
        return false;
    }
    return true;
}

/* Answers a connection that cannot be taken, then closes it. */
static void refuse(int fd, const char *why)
{
    char line[UW__PM_CTL_LINE_MAX + 1];
    char junk[IN_CAP];
    ssize_t n = uw__pm_ctl_fmt_reply(UW_ENOBUFS, why, line, sizeof(line));
    if (n > 0 && send(fd, line, (size_t)n, MSG_NOSIGNAL | MSG_DONTWAIT) < 0) {
        /* nothing more to do: the client sees the connection close */
    }
    /* Whatever the client sent already is read, so the close is an orderly
     * end of stream for it rather than a reset. */
    while (recv(fd, junk, sizeof(junk), MSG_DONTWAIT) > 0)
        ;
    close(fd);
}

static size_t conns_of_uid(const pmd_ctl *c, uint32_t uid)
{
    size_t n = 0;
    for (size_t i = 0; i < c->o.max_conns; i++)
        n += c->conns[i].fd >= 0 && c->conns[i].uid == uid;
    return n;
}

static void accept_all(pmd_ctl *c)
{
    for (int b = 0; b < ACCEPT_BATCH; b++) {
        int fd = accept4(c->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if ((errno == EMFILE || errno == ENFILE) && c->spare_fd >= 0) {
                /* Out of descriptors: the pending connection would keep the
                 * listener readable for ever. Take it with the spare and
                 * close it, so the client sees the refusal. */
                close(c->spare_fd);
                fd = accept4(c->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
                if (fd >= 0)
                    refuse(fd, "daemon out of file descriptors");
                c->spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
                pmd_log(PMD_LOG_WARN, "control: out of file descriptors");
            }
            return; /* EAGAIN, or an error the next wake-up retries */
        }
        struct ucred cr;
        socklen_t len = sizeof(cr);
        if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) != 0 || len != sizeof(cr)) {
            refuse(fd, "no peer credentials");
            continue;
        }
        if (c->nconns >= c->o.max_conns) {
            refuse(fd, "too many control connections");
            pmd_log(PMD_LOG_WARN, "control: uid %u pid %d refused: %zu connections already",
                    (unsigned)cr.uid, (int)cr.pid, c->nconns);
            continue;
        }
        if (cr.uid != 0 && conns_of_uid(c, cr.uid) >= c->o.max_per_uid) {
            refuse(fd, "too many control connections for this uid");
            pmd_log(PMD_LOG_WARN, "control: uid %u pid %d refused: %zu connections of the uid",
                    (unsigned)cr.uid, (int)cr.pid, c->o.max_per_uid);
            continue;
        }
        size_t i = 0;
        while (c->conns[i].fd >= 0)
            i++;
        conn *k = &c->conns[i];
        memset(k, 0, sizeof(*k));
        k->fd = fd;
        k->id = c->next_id++;
        k->uid = cr.uid;
        k->pid = (int)cr.pid;
        uw__pm_ctl_rx_init(&k->rx);
        c->nconns++;
    }
}

void pmd_ctl_service(pmd_ctl *c, const struct pollfd *pfd, size_t n, uint64_t now)
{
    for (size_t p = 0; p < n; p++) {
        short rev = pfd[p].revents;
        if (!rev)
            continue;
        if (c->slot[p] == SIZE_MAX) {
            accept_all(c);
            continue;
        }
        size_t i = c->slot[p];
        conn *k = &c->conns[i];
        if (k->fd != pfd[p].fd)
            continue; /* not the connection this pollfd was filled for */
        if (rev & POLLIN) {
            ssize_t got = recv(k->fd, k->in + k->in_len, IN_CAP - k->in_len, MSG_DONTWAIT);
            if (got == 0 ||
                (got < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
                drop_conn(c, i, "disconnected");
                continue;
            }
            if (got > 0)
                k->in_len += (size_t)got;
        }
        if (rev & (POLLHUP | POLLERR | POLLNVAL)) {
            /* The peer is gone (closed, or its process died): whatever it
             * asked last cannot be answered, and its mappings end now. */
            drop_conn(c, i, "disconnected");
            continue;
        }
        process(c, i, now);
        if (flush(c, i))
            process(c, i, now); /* replies sent: room for more */
    }
}

int pmd_ctl_lookup(pmd_ctl *c, uint16_t svc, uint64_t now, uint16_t *sdp)
{
    map *m = NULL;
    for (size_t i = 0; i < c->o.max_maps && !m; i++)
        if (c->maps[i].used && c->maps[i].svc == svc)
            m = &c->maps[i];
    if (!m)
        return 0;
    /* The listeners may have changed hands since the registration (the
     * owner closed them, someone else bound the port): check again, at
     * most once per recheck interval, so a flood of PMReqs cannot turn
     * into a flood of socket dumps. */
    if (m->uid != 0 && now - m->checked >= c->o.recheck_ns) {
        char why[UW__PM_CTL_LINE_MAX];
        bool ok = verify(c, m->uid, m->svc, m->sdp, why, sizeof(why)) == 0;
        if (ok != m->ok)
            pmd_log(PMD_LOG_INFO, "control: mapping %u -> %u of uid %u %s%s", (unsigned)m->svc,
                    (unsigned)m->sdp, (unsigned)m->uid,
                    ok ? "valid again" : "suspended: ", ok ? "" : why);
        m->ok = ok;
        m->checked = now;
    }
    if (!m->ok)
        return 0;
    *sdp = m->sdp;
    return 1;
}

void pmd_ctl_counts(const pmd_ctl *c, size_t *conns, size_t *maps)
{
    *conns = c ? c->nconns : 0;
    *maps = c ? c->nmaps : 0;
}
