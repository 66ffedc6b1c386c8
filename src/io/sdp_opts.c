/* SDP socket options, addresses and ioctl (uwarp/sdp.h): SOL_SOCKET and
 * IPPROTO_TCP options as TCP has them, mapped onto the core (src/sdp/) or the
 * LLP TCP socket (keepalive, 14.3), and the SOL_UWARP ones. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "io/sdp_internal.h"

/* ---- Options ------------------------------------------------------------------- */

static int get_int(const void *val, socklen_t len, int *out)
{
    if (!val || len < (socklen_t)sizeof(int))
        return -EINVAL;
    memcpy(out, val, sizeof(int));
    return 0;
}

static int put_int(void *val, socklen_t *len, int v)
{
    if (!val || !len || *len < (socklen_t)sizeof(int))
        return -EINVAL;
    memcpy(val, &v, sizeof(int));
    *len = sizeof(int);
    return 0;
}

static int tv_ms(const void *val, socklen_t len, int *ms)
{
    struct timeval tv;
    if (!val || len < (socklen_t)sizeof(tv))
        return -EINVAL;
    memcpy(&tv, val, sizeof(tv));
    if (tv.tv_usec < 0 || tv.tv_usec >= 1000000)
        return -EDOM;
    if (tv.tv_sec < 0) {
        *ms = 0; /* Linux: a negative timeout means none... as zero does */
        return 0;
    }
    long long m = (long long)tv.tv_sec * 1000 + (tv.tv_usec + 999) / 1000;
    *ms = m > INT_MAX ? INT_MAX : (int)m;
    return 0;
}

static int put_tv(void *val, socklen_t *len, int ms)
{
    struct timeval tv = {.tv_sec = ms / 1000, .tv_usec = (ms % 1000) * 1000};
    if (!val || !len || *len < (socklen_t)sizeof(tv))
        return -EINVAL;
    memcpy(val, &tv, sizeof(tv));
    *len = sizeof(tv);
    return 0;
}

static int core_opt(uw_sdp_sock *s, int opt, int v)
{
    if (s->conn)
        uw__sdp_conn_setopt(s->conn, opt, v);
    uw__sdp_pump(s); /* NODELAY/uncork can release a message; RCVLOWAT changes POLLIN */
    return 0;
}

/* TCP_CONGESTION names the LLP's algorithm, as it would the TCP connection's
 * (iperf3 -C, for one). Checked by the kernel when set: on the LLP socket
 * once there is one, before that on a scratch socket, so an unknown or
 * forbidden name fails here as on TCP and not at connect. */
static int set_cc(uw_sdp_sock *s, const void *val, socklen_t len)
{
    char name[sizeof(s->cc)];
    if (!val || len < 1)
        return -EINVAL;
    size_t n = (size_t)len < sizeof(name) - 1 ? (size_t)len : sizeof(name) - 1;
    memcpy(name, val, n);
    name[n] = '\0';
    int fd = uw__sdp_llp_fd(s), tmp = -1;
    if (fd < 0 && (fd = tmp = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0)
        return -errno;
    int r =
        setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, name, (socklen_t)strlen(name)) < 0 ? -errno : 0;
    if (tmp >= 0)
        close(tmp);
    if (r == 0)
        memcpy(s->cc, name, sizeof(name));
    return r;
}

static int set_locked(uw_sdp_sock *s, int level, int name, const void *val, socklen_t len)
{
    int v = 0, r;
    if (level == SOL_SOCKET && (name == SO_RCVTIMEO || name == SO_SNDTIMEO)) {
        int ms;
        if ((r = tv_ms(val, len, &ms)) < 0)
            return r;
        if (name == SO_RCVTIMEO)
            s->rcvtimeo_ms = ms;
        else
            s->sndtimeo_ms = ms;
        return 0;
    }
    if (level == SOL_SOCKET && name == SO_LINGER) {
        struct linger lg;
        if (!val || len < (socklen_t)sizeof(lg))
            return -EINVAL;
        memcpy(&lg, val, sizeof(lg));
        s->linger_on = lg.l_onoff != 0;
        s->linger_s = lg.l_linger < 0 ? 0 : lg.l_linger;
        return 0;
    }
    if (level == IPPROTO_TCP && name == TCP_CONGESTION)
        return set_cc(s, val, len);
    if ((r = get_int(val, len, &v)) < 0)
        return r;
    if (level == SOL_SOCKET) {
        switch (name) {
        case SO_KEEPALIVE:
            s->keepalive = v != 0;
            uw__sdp_apply_keepalive(s);
            return 0;
        case SO_REUSEADDR:
            s->reuseaddr = v != 0;
            return 0;
        case SO_REUSEPORT:
            s->reuseport = v != 0;
            return 0;
        case SO_OOBINLINE:
            s->oobinline = v != 0;
            return core_opt(s, UW_SDP_OPT_OOBINLINE, v != 0);
        case SO_RCVLOWAT:
            s->rcvlowat = v < 1 ? 1 : v;
            return core_opt(s, UW_SDP_OPT_RCVLOWAT, s->rcvlowat);
        case SO_RCVBUF:
            s->rcvbuf = v < 0 ? 0 : v;
            return core_opt(s, UW_SDP_OPT_RCVBUF, s->rcvbuf);
        case SO_SNDBUF:
            s->sndbuf = v < 0 ? 0 : v;
            return core_opt(s, UW_SDP_OPT_SNDBUF, s->sndbuf);
        default:
            return -ENOPROTOOPT;
        }
    }
    if (level == IPPROTO_TCP) {
        switch (name) {
        case TCP_NODELAY:
            s->nodelay = v != 0;
            return core_opt(s, UW_SDP_OPT_NODELAY, v != 0);
        case TCP_CORK:
            s->cork = v != 0;
            return core_opt(s, UW_SDP_OPT_CORK, v != 0);
        case TCP_KEEPIDLE:
        case TCP_KEEPINTVL:
        case TCP_KEEPCNT:
            if (v < 1 || v > 32767)
                return -EINVAL;
            if (name == TCP_KEEPIDLE)
                s->keepidle = v;
            else if (name == TCP_KEEPINTVL)
                s->keepintvl = v;
            else
                s->keepcnt = v;
            uw__sdp_apply_keepalive(s);
            return 0;
        default:
            return -ENOPROTOOPT;
        }
    }
    if (level == SOL_UWARP) {
        bool before = s->state == UW__SS_FRESH;
        switch (name) {
        case UW_SDP_PM:
        case UW_SDP_PM_OPTIONAL:
            if (!before)
                return -EISCONN;
            return uw__sdp_pm_setopt(s, name, v);
        case UW_SDP_RCVBUF_SIZE:
            if (!before)
                return -EISCONN;
            if (v < (int)UW_SDP_MIN_BUF)
                return -EINVAL;
            s->rcv_size = (uint32_t)v;
            return 0;
        case UW_SDP_BUFS:
            if (!before)
                return -EISCONN;
            if (v < 3 || v > 512)
                return -EINVAL;
            s->bufs = v;
            return 0;
        case UW_SDP_CRC:
            if (!before)
                return -EISCONN;
            s->crc = v != 0;
            return 0;
        case UW_SDP_ZCOPY_THRESHOLD:
            if (v < 0)
                return -EINVAL;
            s->zc_min = (uint32_t)v;
            return 0;
        case UW_SDP_MODE: {
            if (v < 0 || v > 2)
                return -EINVAL;
            if (!s->conn)
                return -ENOTCONN;
            int mr = uw__sdp_conn_set_mode(s->conn, (uint8_t)v);
            s->mode_fixed = true;
            uw__sdp_pump(s);
            return mr == UW_EPERM ? -EPERM : mr == UW_EINVAL ? -EINVAL : mr < 0 ? -ENOTCONN : 0;
        }
        case UW_SDP_TCP_FD:
            if (!before)
                return -EISCONN;
            if (v < 0)
                return -EBADF;
            if (s->tcp_fd >= 0)
                close(s->tcp_fd);
            s->tcp_fd = v;
            return 0;
        case UW_SDP_PEER_RCVBUF:
            if (s->state != UW__SS_OPEN || !s->conn)
                return -ENOTCONN;
            if (v < 0)
                return -EINVAL;
            r = uw__sdp_conn_chrcvbuf(s->conn, (uint32_t)v);
            uw__sdp_pump(s);
            return r;
        default:
            return -ENOPROTOOPT;
        }
    }
    return -ENOPROTOOPT;
}

int uw_sdp_setsockopt(uw_sdp_sock *s, int level, int name, const void *val, socklen_t len)
{
    if (!s)
        return -EINVAL;
    if (uw__sdp_is_tcp(s) && level != SOL_UWARP)
        return setsockopt(s->rd.a, level, name, val, len) < 0 ? -errno : 0;
    uw__sdp_lock(s->st);
    int r = set_locked(s, level, name, val, len);
    uw__sdp_unlock(s->st);
    return r;
}

static int info(uw_sdp_sock *s, void *val, socklen_t *len)
{
    uw_sdp_info in;
    memset(&in, 0, sizeof(in));
    if (!val || !len || *len < (socklen_t)sizeof(in))
        return -EINVAL;
    in.transport = s->state == UW__SS_TCP ? 2 : 1;
    in.transport_why = s->transport_why;
    in.accepting = s->accepted;
    if (s->conn) {
        uw_sdp_params p;
        if (uw__sdp_conn_params(s->conn, &p) == 0) {
            in.majv = p.majv;
            in.minv = p.minv;
            in.local_max_adverts = p.local_max_adverts;
            in.remote_max_adverts = p.remote_max_adverts;
            in.local_rcv_size = p.local_rcv_size;
            in.remote_rcv_size = p.remote_rcv_size;
            in.ird = p.ird;
            in.ord = p.ord;
            in.bufs = p.local_bufs;
        }
        uw_sdp_stats stt;
        uw__sdp_conn_stats(s->conn, &stt);
        in.sent = stt.sent;
        in.received = stt.received;
        in.data_msgs_sent = stt.data_msgs_sent;
        in.data_msgs_received = stt.data_msgs_received;
        in.credit_updates_sent = stt.credit_updates_sent;
        in.sendsm_sent = stt.sendsm_sent;
        in.oob_sent = stt.oob_sent;
        in.oob_received = stt.oob_received;
        in.chrcvbuf_sent = stt.chrcvbuf_sent;
        in.chrcvbufack_received = stt.chrcvbufack_received;
        in.send_credit = stt.send_credit;
        in.peer_credit = stt.peer_credit;
        in.graceful = stt.graceful;
        in.why = uw__sdp_conn_why(s->conn);
        in.srcavail_sent = stt.srcavail_sent;
        in.srcavail_received = stt.srcavail_received;
        in.sinkavail_sent = stt.sinkavail_sent;
        in.sinkavail_received = stt.sinkavail_received;
        in.rdmardcompl_sent = stt.rdmardcompl_sent;
        in.rdmardcompl_received = stt.rdmardcompl_received;
        in.rdmawrcompl_sent = stt.rdmawrcompl_sent;
        in.rdmawrcompl_received = stt.rdmawrcompl_received;
        in.sendsm_received = stt.sendsm_received;
        in.cancels = stt.cancels_sent + stt.cancels_received;
        in.mode_changes = stt.mode_changes;
        in.rdma_read_bytes = stt.rdma_read_bytes;
        in.rdma_write_bytes = stt.rdma_write_bytes;
        in.bcopy_bytes = stt.bcopy_sent;
        in.zcopy_bytes = stt.zcopy_sent;
        in.tx_mode = stt.tx_mode;
        in.rx_mode = stt.rx_mode;
    }
    in.zcopy_threshold = s->zc_min;
    int fd = uw__sdp_llp_fd(s);
    in.llp_peer_len = sizeof(in.llp_peer);
    if (fd < 0 || getpeername(fd, (struct sockaddr *)&in.llp_peer, &in.llp_peer_len) < 0)
        in.llp_peer_len = 0;
    memcpy(val, &in, sizeof(in));
    *len = sizeof(in);
    return 0;
}

static int take_error(uw_sdp_sock *s)
{
    int e = s->so_error;
    s->so_error = 0;
    if (!e && s->err_stash) {
        e = s->err_stash;
        s->err_stash = 0;
    }
    if (!e && s->conn)
        e = uw__sdp_conn_take_error(s->conn);
    if (e && s->state == UW__SS_OPEN) {
        /* Reported once, like every connection error (uw__sdp_app_err). */
        if (s->err_told && e != -EPIPE)
            e = 0;
        else if (e == -ECONNRESET && s->peer_eof)
            e = -EPIPE;
        s->err_told = s->err_told || e != 0;
    }
    uw__sdp_mark(s);
    return e == UW_EPROTO || e == UW_EMSGSIZE ? EPROTO : -e;
}

static int get_locked(uw_sdp_sock *s, int level, int name, void *val, socklen_t *len)
{
    if (level == SOL_SOCKET) {
        switch (name) {
        case SO_ERROR:
            return put_int(val, len, take_error(s));
        case SO_TYPE:
            return put_int(val, len, SOCK_STREAM);
        case SO_DOMAIN:
            return put_int(val, len, s->domain);
        case SO_PROTOCOL:
            return put_int(val, len, IPPROTO_TCP);
        case SO_ACCEPTCONN:
            return put_int(val, len, s->state == UW__SS_LISTEN);
        case SO_RCVBUF:
            return put_int(val, len,
                           s->conn ? uw__sdp_conn_getopt(s->conn, UW_SDP_OPT_RCVBUF)
                                   : (s->rcvbuf ? s->rcvbuf : 16 * (65536 + 64)));
        case SO_SNDBUF:
            return put_int(val, len,
                           s->conn ? uw__sdp_conn_getopt(s->conn, UW_SDP_OPT_SNDBUF)
                                   : (s->sndbuf ? s->sndbuf : 16 * (65536 + 64)));
        case SO_LINGER: {
            struct linger lg = {.l_onoff = s->linger_on, .l_linger = s->linger_s};
            if (!val || !len || *len < (socklen_t)sizeof(lg))
                return -EINVAL;
            memcpy(val, &lg, sizeof(lg));
            *len = sizeof(lg);
            return 0;
        }
        case SO_KEEPALIVE:
            return put_int(val, len, s->keepalive);
        case SO_OOBINLINE:
            return put_int(val, len, s->oobinline);
        case SO_RCVLOWAT:
            return put_int(val, len, s->rcvlowat ? s->rcvlowat : 1);
        case SO_RCVTIMEO:
            return put_tv(val, len, s->rcvtimeo_ms);
        case SO_SNDTIMEO:
            return put_tv(val, len, s->sndtimeo_ms);
        case SO_REUSEADDR:
            return put_int(val, len, s->reuseaddr);
        case SO_REUSEPORT:
            return put_int(val, len, s->reuseport);
        default:
            return -ENOPROTOOPT;
        }
    }
    if (level == IPPROTO_TCP) {
        int fd = uw__sdp_llp_fd(s);
        switch (name) {
        case TCP_NODELAY:
            return put_int(val, len, s->nodelay);
        case TCP_CORK:
            return put_int(val, len, s->cork);
        case TCP_KEEPIDLE:
        case TCP_KEEPINTVL:
        case TCP_KEEPCNT: {
            int v = name == TCP_KEEPIDLE    ? s->keepidle
                    : name == TCP_KEEPINTVL ? s->keepintvl
                                            : s->keepcnt;
            if (!v && fd >= 0) {
                socklen_t l = sizeof(v);
                getsockopt(fd, IPPROTO_TCP, name, &v, &l);
            }
            if (!v) /* the kernel defaults */
                v = name == TCP_KEEPIDLE ? 7200 : name == TCP_KEEPINTVL ? 75 : 9;
            return put_int(val, len, v);
        }
        default:
            /* Read-only views of the connection (TCP_INFO, TCP_MAXSEG,
             * TCP_CONGESTION...): the LLP's, which is the TCP connection
             * the data really travels on. */
            if (fd >= 0 && name == TCP_INFO && val && len) {
                if (getsockopt(fd, IPPROTO_TCP, name, val, len) < 0)
                    return -errno;
                /* The SDP connection's state where it differs from its
                 * LLP's: half-closes are DisConn messages, not FINs. */
                int cs = s->conn ? uw__sdp_conn_state(s->conn) : UW_SDP_S_ERROR;
                int st = -1;
                if (cs == UW_SDP_S_ERROR || cs == UW_SDP_S_CLOSED)
                    st = TCP_CLOSE;
                else if (cs == UW_SDP_S_OPEN && s->peer_eof && s->shut_wr)
                    st = TCP_LAST_ACK;
                else if (cs == UW_SDP_S_OPEN && s->peer_eof)
                    st = TCP_CLOSE_WAIT;
                else if (cs == UW_SDP_S_OPEN && s->shut_wr)
                    st = TCP_FIN_WAIT2;
                if (st >= 0 && *len >= 1)
                    ((uint8_t *)val)[0] = (uint8_t)st; /* tcpi_state is the first octet */
                return 0;
            }
            if (fd >= 0)
                return getsockopt(fd, IPPROTO_TCP, name, val, len) < 0 ? -errno : 0;
            if (name == TCP_CONGESTION && val && len) {
                /* Before the LLP exists: what it will get. */
                int t = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), r = 0;
                if (t < 0)
                    return -errno;
                if ((s->cc[0] && setsockopt(t, IPPROTO_TCP, TCP_CONGESTION, s->cc,
                                            (socklen_t)strlen(s->cc)) < 0) ||
                    getsockopt(t, IPPROTO_TCP, TCP_CONGESTION, val, len) < 0)
                    r = -errno;
                close(t);
                return r;
            }
            if (name == TCP_INFO) {
                struct tcp_info ti;
                if (!val || !len)
                    return -EFAULT;
                memset(&ti, 0, sizeof(ti));
                ti.tcpi_state = s->state == UW__SS_LISTEN       ? TCP_LISTEN
                                : s->state == UW__SS_CONNECTING ? TCP_SYN_SENT
                                                                : TCP_CLOSE;
                socklen_t n = *len < (socklen_t)sizeof(ti) ? *len : (socklen_t)sizeof(ti);
                memcpy(val, &ti, n);
                *len = n;
                return 0;
            }
            return -ENOPROTOOPT;
        }
    }
    if (level == SOL_UWARP) {
        switch (name) {
        case UW_SDP_PM:
            return put_int(val, len, s->pm);
        case UW_SDP_PM_OPTIONAL:
            return put_int(val, len, s->pm_optional);
        case UW_SDP_RCVBUF_SIZE:
            return put_int(val, len, s->rcv_size ? (int)s->rcv_size : 65536 + 64);
        case UW_SDP_BUFS:
            return put_int(val, len, s->bufs ? s->bufs : 16);
        case UW_SDP_CRC:
            return put_int(val, len, s->crc);
        case UW_SDP_ZCOPY_THRESHOLD:
            return put_int(val, len, s->zc_min > INT32_MAX ? INT32_MAX : (int)s->zc_min);
        case UW_SDP_MODE: {
            if (!s->conn)
                return -ENOTCONN;
            uw_sdp_stats stt;
            uw__sdp_conn_stats(s->conn, &stt);
            return put_int(val, len, stt.tx_mode);
        }
        case UW_SDP_INFO:
            return info(s, val, len);
        default:
            return -ENOPROTOOPT;
        }
    }
    return -ENOPROTOOPT;
}

int uw_sdp_getsockopt(uw_sdp_sock *s, int level, int name, void *val, socklen_t *len)
{
    if (!s)
        return -EINVAL;
    if (uw__sdp_is_tcp(s) && !(level == SOL_UWARP && name == UW_SDP_INFO))
        return getsockopt(s->rd.a, level, name, val, len) < 0 ? -errno : 0;
    uw__sdp_lock(s->st);
    int r = get_locked(s, level, name, val, len);
    uw__sdp_unlock(s->st);
    return r;
}

/* ---- Addresses and ioctl --------------------------------------------------------- */

int uw_sdp_getsockname(uw_sdp_sock *s, struct sockaddr *addr, socklen_t *len)
{
    if (!s || !addr || !len)
        return -EINVAL;
    if (uw__sdp_is_tcp(s))
        return getsockname(s->rd.a, addr, len) < 0 ? -errno : 0;
    uw__sdp_lock(s->st);
    int r = 0;
    struct sockaddr_storage ss;
    socklen_t sl = sizeof(ss);
    if (s->state == UW__SS_LISTEN && s->tcp_lfd >= 0) {
        if (getsockname(s->tcp_lfd, (struct sockaddr *)&ss, &sl) < 0)
            r = -errno; /* with the port mapper, the TCP service port */
    } else if (s->state == UW__SS_LISTEN && s->lst) {
        r = uw_listener_addr(s->lst, &ss, &sl);
    } else if (s->local_len) {
        memcpy(&ss, &s->local, s->local_len);
        sl = s->local_len;
    } else if (uw__sdp_llp_fd(s) >= 0) {
        if (getsockname(uw__sdp_llp_fd(s), (struct sockaddr *)&ss, &sl) < 0)
            r = -errno;
    } else if (s->bind_fd >= 0) {
        memcpy(&ss, &s->bound, s->bound_len);
        sl = s->bound_len;
    } else {
        uw__sdp_wildcard(s->domain, &ss, &sl);
    }
    if (r == 0)
        uw__sdp_copy_addr(&ss, sl, addr, len);
    uw__sdp_unlock(s->st);
    return r;
}

int uw_sdp_getpeername(uw_sdp_sock *s, struct sockaddr *addr, socklen_t *len)
{
    if (!s || !addr || !len)
        return -EINVAL;
    if (uw__sdp_is_tcp(s))
        return getpeername(s->rd.a, addr, len) < 0 ? -errno : 0;
    uw__sdp_lock(s->st);
    int r = -ENOTCONN;
    bool up = s->state == UW__SS_OPEN && s->conn && uw__sdp_conn_state(s->conn) != UW_SDP_S_ERROR;
    if (up && s->peer_len) {
        uw__sdp_copy_addr(&s->peer, s->peer_len, addr, len);
        r = 0;
    }
    uw__sdp_unlock(s->st);
    return r;
}

int uw_sdp_ioctl(uw_sdp_sock *s, unsigned long req, int *arg)
{
    if (!s || !arg)
        return -EINVAL;
    if (req == FIONBIO) {
        uw__sdp_lock(s->st);
        s->nonblock = *arg != 0;
        uw__sdp_unlock(s->st);
        if (uw__sdp_is_tcp(s)) {
            int fl = fcntl(s->rd.a, F_GETFL);
            if (fl >= 0)
                fcntl(s->rd.a, F_SETFL, *arg ? fl | O_NONBLOCK : fl & ~O_NONBLOCK);
        }
        return 0;
    }
    if (uw__sdp_is_tcp(s))
        return ioctl(s->rd.a, req, arg) < 0 ? -errno : 0;
    if (req != FIONREAD && req != SIOCATMARK)
        return -ENOTTY;
    uw__sdp_lock(s->st);
    int r = 0;
    if (s->state == UW__SS_LISTEN) {
        r = -EINVAL;
    } else if (!s->conn) {
        *arg = 0;
    } else {
        /* A pass first, as TCP counts what has arrived. */
        uw__sdp_progress(s->st);
        if (!s->conn) {
            *arg = 0;
        } else if (req == FIONREAD) {
            size_t n = uw__sdp_conn_inq(s->conn);
            *arg = n > INT_MAX ? INT_MAX : (int)n;
        } else {
            *arg = uw__sdp_conn_atmark(s->conn);
        }
    }
    uw__sdp_unlock(s->st);
    return r;
}
