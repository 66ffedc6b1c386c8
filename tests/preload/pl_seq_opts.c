/* pl_calls sequences: getsockopt/setsockopt, TCP_INFO, SO_RCVTIMEO and
 * SO_SNDTIMEO, fcntl, ioctl, fstat. Expected values are Linux TCP's. */
#include "pl_calls.h"

static const char *linger_str(int fd)
{
    struct linger l;
    socklen_t len = sizeof l;
    memset(&l, 0, sizeof l);
    char *s = sbuf();
    if (getsockopt(fd, SOL_SOCKET, SO_LINGER, &l, &len) < 0)
        snprintf(s, 160, "-1 %s", ename(errno));
    else
        snprintf(s, 160, "onoff=%d linger=%d len=%u", l.l_onoff, l.l_linger, (unsigned)len);
    return s;
}

/* A buffer size option: set to 65536, read back; TCP doubles it. */
static void bufsize(int fd, int name, const char *what)
{
    char d[64];
    int before = gi(fd, SOL_SOCKET, name);
    snprintf(d, sizeof d, "%s default", what);
    T(d, before, ">0");
    snprintf(d, sizeof d, "set %s 65536", what);
    T(d, si(fd, SOL_SOCKET, name, 65536), "0");
    int after = gi(fd, SOL_SOCKET, name);
    snprintf(d, sizeof d, "%s after set", what);
    T(d, after, ">0");
    snprintf(d, sizeof d, "%s is twice the value set", what);
    V(d, after == 131072 ? "yes" : "no", "yes");
}

void seq_sockopts(void)
{
    int fd = pair_open(AF_INET);
    if (!CLI) {
        sync_();
        return;
    }
    T("SO_TYPE", gi(fd, SOL_SOCKET, SO_TYPE), "1");
    T("SO_DOMAIN", gi(fd, SOL_SOCKET, SO_DOMAIN), "2");
    T("SO_PROTOCOL", gi(fd, SOL_SOCKET, SO_PROTOCOL), "6");
    T("SO_ACCEPTCONN", gi(fd, SOL_SOCKET, SO_ACCEPTCONN), "0");
    V("SO_ERROR", so_error(fd), "OK");
    T("SO_REUSEADDR default", gi(fd, SOL_SOCKET, SO_REUSEADDR), "0");
    T("set SO_REUSEADDR 1", si(fd, SOL_SOCKET, SO_REUSEADDR, 1), "0");
    T("SO_REUSEADDR", gi(fd, SOL_SOCKET, SO_REUSEADDR), "1");
    T("set SO_REUSEPORT 1", si(fd, SOL_SOCKET, SO_REUSEPORT, 1), "0");
    T("SO_REUSEPORT", gi(fd, SOL_SOCKET, SO_REUSEPORT), "1");
    bufsize(fd, SO_RCVBUF, "SO_RCVBUF");
    bufsize(fd, SO_SNDBUF, "SO_SNDBUF");
    V("SO_LINGER default", linger_str(fd), "onoff=0 linger=0 len=8");
    struct linger l = {1, 5};
    T("set SO_LINGER 1 5", setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof l), "0");
    V("SO_LINGER", linger_str(fd), "onoff=1 linger=5 len=8");
    T("set SO_LINGER short optlen", setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, 4), "-1 EINVAL");
    T("SO_KEEPALIVE default", gi(fd, SOL_SOCKET, SO_KEEPALIVE), "0");
    T("set SO_KEEPALIVE 1", si(fd, SOL_SOCKET, SO_KEEPALIVE, 1), "0");
    T("SO_KEEPALIVE", gi(fd, SOL_SOCKET, SO_KEEPALIVE), "1");
    T("SO_KEEPALIVE 7 reads back as 1",
      (si(fd, SOL_SOCKET, SO_KEEPALIVE, 7), gi(fd, SOL_SOCKET, SO_KEEPALIVE)), "1");
    T("set TCP_KEEPIDLE 30", si(fd, IPPROTO_TCP, TCP_KEEPIDLE, 30), "0");
    T("TCP_KEEPIDLE", gi(fd, IPPROTO_TCP, TCP_KEEPIDLE), "30");
    T("set TCP_KEEPINTVL 5", si(fd, IPPROTO_TCP, TCP_KEEPINTVL, 5), "0");
    T("TCP_KEEPINTVL", gi(fd, IPPROTO_TCP, TCP_KEEPINTVL), "5");
    T("set TCP_KEEPCNT 4", si(fd, IPPROTO_TCP, TCP_KEEPCNT, 4), "0");
    T("TCP_KEEPCNT", gi(fd, IPPROTO_TCP, TCP_KEEPCNT), "4");
    T("set TCP_KEEPIDLE 0", si(fd, IPPROTO_TCP, TCP_KEEPIDLE, 0), "-1 EINVAL");
    T("TCP_NODELAY default", gi(fd, IPPROTO_TCP, TCP_NODELAY), "0");
    T("set TCP_NODELAY 1", si(fd, IPPROTO_TCP, TCP_NODELAY, 1), "0");
    T("TCP_NODELAY", gi(fd, IPPROTO_TCP, TCP_NODELAY), "1");
    T("TCP_CORK default", gi(fd, IPPROTO_TCP, TCP_CORK), "0");
    T("set TCP_CORK 1", si(fd, IPPROTO_TCP, TCP_CORK, 1), "0");
    T("TCP_CORK", gi(fd, IPPROTO_TCP, TCP_CORK), "1");
    T("set TCP_CORK 0", si(fd, IPPROTO_TCP, TCP_CORK, 0), "0");
    T("TCP_CORK", gi(fd, IPPROTO_TCP, TCP_CORK), "0");
    T("SO_OOBINLINE default", gi(fd, SOL_SOCKET, SO_OOBINLINE), "0");
    T("SO_RCVLOWAT default", gi(fd, SOL_SOCKET, SO_RCVLOWAT), "1");
    T("set SO_RCVLOWAT 4", si(fd, SOL_SOCKET, SO_RCVLOWAT, 4), "0");
    T("SO_RCVLOWAT", gi(fd, SOL_SOCKET, SO_RCVLOWAT), "4");
    struct timeval tv = {1, 500000};
    T("set SO_RCVTIMEO 1.5 s", setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv), "0");
    memset(&tv, 0, sizeof tv);
    socklen_t len = sizeof tv;
    T("SO_RCVTIMEO", getsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, &len), "0");
    char *s = sbuf();
    snprintf(s, 160, "%ld.%06ld len=%u", (long)tv.tv_sec, (long)tv.tv_usec, (unsigned)len);
    V("SO_RCVTIMEO value", s, "1.500000 len=16");
    T("set SO_SNDTIMEO 2 s",
      setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &(struct timeval){2, 0}, sizeof tv), "0");
    T("getsockopt unknown SOL_SOCKET option", gi(fd, SOL_SOCKET, 9999), "-1 ENOPROTOOPT");
    T("getsockopt unknown TCP option", gi(fd, IPPROTO_TCP, 9999), "-1 ENOPROTOOPT");
    T("setsockopt short int", setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, "", 1), "-1 EINVAL");
    T("TCP_INFO state", tcp_state(fd), "1");
    sync_();
}

/* Options set on a listener are inherited by accepted sockets. */
void seq_sockopt_inherit(void)
{
    if (SRV) {
        struct sockaddr_storage ss;
        int l = TF("socket", socket(AF_INET, SOCK_STREAM, 0));
        T("set TCP_NODELAY on listener", si(l, IPPROTO_TCP, TCP_NODELAY, 1), "0");
        T("set SO_KEEPALIVE on listener", si(l, SOL_SOCKET, SO_KEEPALIVE, 1), "0");
        T("set TCP_KEEPIDLE 77 on listener", si(l, IPPROTO_TCP, TCP_KEEPIDLE, 77), "0");
        struct linger lg = {1, 3};
        T("set SO_LINGER on listener", setsockopt(l, SOL_SOCKET, SO_LINGER, &lg, sizeof lg), "0");
        socklen_t len = loop_addr(AF_INET, 0, &ss);
        T("bind", bind(l, (struct sockaddr *)&ss, len), "0");
        T("listen", listen(l, 4), "0");
        g_lport = local_port(l);
        put_int(g_lport);
        int a = accept_to(l, 0);
        T("accepted TCP_NODELAY", gi(a, IPPROTO_TCP, TCP_NODELAY), "1");
        T("accepted SO_KEEPALIVE", gi(a, SOL_SOCKET, SO_KEEPALIVE), "1");
        T("accepted TCP_KEEPIDLE", gi(a, IPPROTO_TCP, TCP_KEEPIDLE), "77");
        V("accepted SO_LINGER", linger_str(a), "onoff=1 linger=3 len=8");
        T("accepted SO_REUSEADDR", gi(a, SOL_SOCKET, SO_REUSEADDR), "0");
        sync_();
        return;
    }
    g_lport = get_int();
    int c = connect_to(AF_INET, g_lport);
    T("client TCP_NODELAY (not inherited)", gi(c, IPPROTO_TCP, TCP_NODELAY), "0");
    sync_();
}

/* TCP_INFO tcpi_state through a connection's life. */
void seq_tcp_info(void)
{
    int fd = pair_open(AF_INET);
    if (CLI) {
        T("established", tcp_state(fd), "1");
        struct tcp_info ti;
        socklen_t len = sizeof ti;
        T("TCP_INFO full size", getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len), "0");
        V("length returned is the struct", len == sizeof ti ? "yes" : "no", "yes");
        len = 8;
        T("TCP_INFO 8 octets", getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len), "0");
        T("length returned", (long)len, "8");
        T("tcpi_state in 8 octets", ti.tcpi_state, "1");
        sync_();
        settle("poll after peer closed", fd, "IN OUT RDHUP");
        T("CLOSE_WAIT", tcp_state(fd), "8");
        T("shutdown WR", shutdown(fd, SHUT_WR), "0");
        settle("poll after both", fd, "IN OUT HUP RDHUP");
        int st = tcp_state(fd);
        V("LAST_ACK or CLOSE", st == 9 || st == 7 ? "yes" : "no", "yes");
        sync_();
        return;
    }
    sync_();
    TCLOSE("close", fd, "0");
    sync_();
}

/* SO_RCVTIMEO: recv and accept time out with EAGAIN. */
void seq_rcvtimeo(void)
{
    int fd = pair_open(AF_INET);
    if (CLI) {
        char b[8];
        struct timeval tv = {0, 200000};
        T("set SO_RCVTIMEO 200 ms", setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv), "0");
        long t0 = now_ms();
        T("recv times out", recv(fd, b, sizeof b, 0), "-1 EAGAIN");
        V("after", elapsed(now_ms() - t0, 150, 2000), "in 150-2000 ms");
        t0 = now_ms();
        T("read times out", read(fd, b, sizeof b), "-1 EAGAIN");
        V("after", elapsed(now_ms() - t0, 150, 2000), "in 150-2000 ms");
        int l = mk_listener(AF_INET, 4);
        T("set SO_RCVTIMEO 200 ms on listener",
          setsockopt(l, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv), "0");
        t0 = now_ms();
        T("accept times out", accept(l, NULL, NULL), "-1 EAGAIN");
        V("after", elapsed(now_ms() - t0, 150, 2000), "in 150-2000 ms");
        sync_();
        return;
    }
    sync_();
}

/* SO_SNDTIMEO: a blocking send into a full socket times out. */
void seq_sndtimeo(void)
{
    int fd = pair_open(AF_INET);
    if (CLI) {
        T("O_NONBLOCK", fcntl(fd, F_SETFL, O_NONBLOCK), "0");
        T("fill until EAGAIN", fill(fd), ">0");
        T("send 1 octet", send(fd, g_buf, 1, 0), "-1 EAGAIN");
        T("O_NONBLOCK off", fcntl(fd, F_SETFL, 0), "0");
        struct timeval tv = {0, 200000};
        T("set SO_SNDTIMEO 200 ms", setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv), "0");
        long t0 = now_ms();
        T("send times out", send(fd, g_buf, sizeof g_buf, 0), "-1 EAGAIN");
        V("after", elapsed(now_ms() - t0, 150, 2000), "in 150-2000 ms");
        sync_();
        return;
    }
    sync_();
}

/* fcntl and ioctl on a connected socket; fstat. */
void seq_fcntl_ioctl(void)
{
    int fd = pair_open(AF_INET);
    if (CLI) {
        char b[8];
        int v = -1;
        T("F_GETFL access mode", fcntl(fd, F_GETFL) & O_ACCMODE, "2");
        T("F_GETFL O_NONBLOCK", !!(fcntl(fd, F_GETFL) & O_NONBLOCK), "0");
        T("F_SETFL O_NONBLOCK", fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK), "0");
        T("F_GETFL O_NONBLOCK", !!(fcntl(fd, F_GETFL) & O_NONBLOCK), "1");
        T("recv nonblocking", recv(fd, b, sizeof b, 0), "-1 EAGAIN");
        T("fcntl64 F_GETFL O_NONBLOCK", !!(fcntl64(fd, F_GETFL) & O_NONBLOCK), "1");
        v = 0;
        T("FIONBIO 0", ioctl(fd, FIONBIO, &v), "0");
        T("F_GETFL O_NONBLOCK after FIONBIO 0", !!(fcntl(fd, F_GETFL) & O_NONBLOCK), "0");
        set_rcvtimeo(fd, 100);
        T("recv blocking (100 ms timeout)", recv(fd, b, sizeof b, 0), "-1 EAGAIN");
        v = 1;
        T("FIONBIO 1", ioctl(fd, FIONBIO, &v), "0");
        T("F_GETFL O_NONBLOCK after FIONBIO 1", !!(fcntl(fd, F_GETFL) & O_NONBLOCK), "1");
        T("F_SETFL 0", fcntl(fd, F_SETFL, 0), "0");
        T("F_GETFD", fcntl(fd, F_GETFD), "0");
        T("F_SETFD FD_CLOEXEC", fcntl(fd, F_SETFD, FD_CLOEXEC), "0");
        T("F_GETFD", fcntl(fd, F_GETFD), "1");
        T("F_SETFD 0", fcntl(fd, F_SETFD, 0), "0");
        T("F_GETFD", fcntl(fd, F_GETFD), "0");
        T("fcntl64 F_SETFD FD_CLOEXEC", fcntl64(fd, F_SETFD, FD_CLOEXEC), "0");
        T("F_GETFD", fcntl(fd, F_GETFD), "1");
        v = -1;
        T("FIONREAD empty", (ioctl(fd, FIONREAD, &v) == 0 ? v : -1), "0");
        T("SIOCINQ empty", (ioctl(fd, SIOCINQ, &v) == 0 ? v : -1), "0");
        T("SIOCATMARK", (ioctl(fd, SIOCATMARK, &v) == 0 ? v : -1), "0");
        T("SIOCOUTQ", (ioctl(fd, SIOCOUTQ, &v) == 0 ? v : -1), "0");
        T("ioctl TCGETS", ioctl(fd, 0x5401, g_buf), "-1 ENOTTY");
        V("fstat", ftype(fd), "sock");
        sync_();
        wait_bytes(fd, 7);
        T("FIONREAD", (ioctl(fd, FIONREAD, &v) == 0 ? v : -1), "7");
        sync_();
        return;
    }
    sync_();
    T("send 7", send(fd, "1234567", 7, 0), "7");
    sync_();
}
