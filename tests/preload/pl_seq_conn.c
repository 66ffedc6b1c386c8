/* pl_calls sequences: socket, bind, listen, accept, accept4, connect
 * (blocking, nonblocking, refused), getsockname/getpeername (v4, v6,
 * v4-mapped). Expected values are Linux TCP's. */
#include "pl_calls.h"

/* A fresh socket and calls that need a connection. */
void seq_socket(void)
{
    if (!CLI)
        return;
    char b[4];
    int s = TF("socket(INET,STREAM,0)", socket(AF_INET, SOCK_STREAM, 0));
    V("fstat", ftype(s), "sock");
    V("flags", fdflags(s), "nb=0 ce=0");
    T("SO_TYPE", gi(s, SOL_SOCKET, SO_TYPE), "1");
    T("SO_DOMAIN", gi(s, SOL_SOCKET, SO_DOMAIN), "2");
    T("SO_PROTOCOL", gi(s, SOL_SOCKET, SO_PROTOCOL), "6");
    T("SO_ACCEPTCONN", gi(s, SOL_SOCKET, SO_ACCEPTCONN), "0");
    V("SO_ERROR", so_error(s), "OK");
    T("TCP_INFO state", tcp_state(s), "7");
    V("poll fresh", evs(poll1(s, ALLEV, 0)), "OUT HUP");
    V("getsockname fresh", sockname(s), "inet 0.0.0.0 port=0 len=16");
    V("getpeername fresh", peername(s), "-1 ENOTCONN");
    T("recv fresh", recv(s, b, 1, MSG_DONTWAIT), "-1 ENOTCONN");
    T("read fresh", read(s, b, 1), "-1 ENOTCONN");
    T("send fresh NOSIGNAL", send(s, "x", 1, MSG_NOSIGNAL), "-1 EPIPE");
    T("shutdown fresh", shutdown(s, SHUT_RDWR), "-1 ENOTCONN");
    T("accept fresh", accept(s, NULL, NULL), "-1 EINVAL");
    int n = -1;
    T("FIONREAD fresh", ioctl(s, FIONREAD, &n), "0");
    T("FIONREAD value", n, "0");
    TCLOSE("close", s, "0");
    T("close again", close(s), "-1 EBADF");

    s = TF("socket(INET,STREAM|NONBLOCK|CLOEXEC,TCP)",
           socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, IPPROTO_TCP));
    V("flags", fdflags(s), "nb=1 ce=1");
    TCLOSE("close", s, "0");
    s = TF("socket(INET6,STREAM,0)", socket(AF_INET6, SOCK_STREAM, 0));
    T("SO_DOMAIN", gi(s, SOL_SOCKET, SO_DOMAIN), "10");
    V("getsockname fresh", sockname(s), "inet6 :: port=0 len=28");
    TCLOSE("close", s, "0");
    T("socket(INET,STREAM,UDP)", socket(AF_INET, SOCK_STREAM, IPPROTO_UDP), "-1 EPROTONOSUPPORT");
    s = TF("socket(INET,DGRAM,0)", socket(AF_INET, SOCK_DGRAM, 0));
    T("SO_TYPE dgram", gi(s, SOL_SOCKET, SO_TYPE), "2");
    T("SO_PROTOCOL dgram", gi(s, SOL_SOCKET, SO_PROTOCOL), "17");
    TCLOSE("close", s, "0");
}

/* bind and listen, alone (no peer). */
void seq_bind_listen(void)
{
    if (!CLI)
        return;
    struct sockaddr_storage ss;
    struct sockaddr_in6 a6;
    char b[4];
    int a = TF("socket", socket(AF_INET, SOCK_STREAM, 0));
    socklen_t len = loop_addr(AF_INET, 0, &ss);
    T("bind 127.0.0.1:0", bind(a, (struct sockaddr *)&ss, len), "0");
    g_lport = local_port(a);
    V("getsockname", sockname(a), "inet 127.0.0.1 port=L len=16");
    T("bind again", bind(a, (struct sockaddr *)&ss, len), "-1 EINVAL");
    int b2 = TF("socket", socket(AF_INET, SOCK_STREAM, 0));
    len = loop_addr(AF_INET, g_lport, &ss);
    T("bind same port, not listening", bind(b2, (struct sockaddr *)&ss, len), "-1 EADDRINUSE");
    int c = TF("socket", socket(AF_INET, SOCK_STREAM, 0));
    T("bind short addrlen", bind(c, (struct sockaddr *)&ss, 8), "-1 EINVAL");
    memset(&a6, 0, sizeof a6);
    a6.sin6_family = AF_INET6;
    a6.sin6_addr = in6addr_loopback;
    T("bind inet6 address", bind(c, (struct sockaddr *)&a6, sizeof a6), "-1 EAFNOSUPPORT");
    struct sockaddr_in far;
    memset(&far, 0, sizeof far);
    far.sin_family = AF_INET;
    far.sin_addr.s_addr = inet_addr("192.0.2.1");
    T("bind non-local address", bind(c, (struct sockaddr *)&far, sizeof far), "-1 EADDRNOTAVAIL");
    T("listen", listen(a, 8), "0");
    T("SO_ACCEPTCONN", gi(a, SOL_SOCKET, SO_ACCEPTCONN), "1");
    T("TCP_INFO state", tcp_state(a), "10");
    T("listen again", listen(a, 16), "0");
    V("getsockname", sockname(a), "inet 127.0.0.1 port=L len=16");
    V("poll listener", evs(poll1(a, ALLEV, 0)), "none");
    T("fcntl O_NONBLOCK", fcntl(a, F_SETFL, O_NONBLOCK), "0");
    T("accept empty", accept(a, NULL, NULL), "-1 EAGAIN");
    T("accept4 empty", accept4(a, NULL, NULL, SOCK_CLOEXEC), "-1 EAGAIN");
    len = loop_addr(AF_INET, g_lport, &ss);
    T("connect on listener", connect(a, (struct sockaddr *)&ss, len), "-1 EISCONN");
    T("recv on listener", recv(a, b, 1, MSG_DONTWAIT), "-1 ENOTCONN");
    T("send on listener", send(a, "x", 1, MSG_NOSIGNAL | MSG_DONTWAIT), "-1 EPIPE");
    V("getpeername listener", peername(a), "-1 ENOTCONN");
    int d = TF("socket", socket(AF_INET, SOCK_STREAM, 0));
    T("bind port of listener", bind(d, (struct sockaddr *)&ss, len), "-1 EADDRINUSE");
    int e = TF("socket", socket(AF_INET, SOCK_STREAM, 0));
    T("SO_REUSEADDR", si(e, SOL_SOCKET, SO_REUSEADDR, 1), "0");
    T("bind port of listener, REUSEADDR", bind(e, (struct sockaddr *)&ss, len), "-1 EADDRINUSE");
    int f = TF("socket", socket(AF_INET, SOCK_STREAM, 0));
    T("listen unbound", listen(f, 1), "0");
    V("getsockname autobound", sockname(f), "inet 0.0.0.0 port=eph len=16");
    int g = TF("socket", socket(AF_INET, SOCK_STREAM, 0));
    T("listen backlog -1", listen(g, -1), "0");
    TCLOSE("close listener", a, "0");
    int h = TF("socket", socket(AF_INET, SOCK_STREAM, 0));
    T("SO_REUSEADDR", si(h, SOL_SOCKET, SO_REUSEADDR, 1), "0");
    T("bind port after listener closed", bind(h, (struct sockaddr *)&ss, len), "0");
}

/* accept and accept4: flags, addresses, one connection at a time. */
void seq_accept(void)
{
    if (SRV) {
        struct sockaddr_storage ss;
        socklen_t len;
        int l = mk_listener(AF_INET, 8);
        put_int(g_lport);
        T("fcntl listener O_NONBLOCK", fcntl(l, F_SETFL, O_NONBLOCK), "0");
        for (int i = 0; i < 4; i++) {
            int cport = get_int();
            V("poll listener", evs(poll1(l, POLLIN, SETTLE_MS)), "IN");
            int a = -1;
            memset(&ss, 0, sizeof ss);
            len = sizeof ss;
            switch (i) {
            case 0:
                a = TF("accept", accept(l, (struct sockaddr *)&ss, &len));
                V("accept address", sa_str(&ss, len), "inet 127.0.0.1 port=eph len=16");
                V("flags (listener nonblocking)", fdflags(a), "nb=0 ce=0");
                break;
            case 1:
                a = TF("accept4 NONBLOCK|CLOEXEC",
                       accept4(l, (struct sockaddr *)&ss, &len, SOCK_NONBLOCK | SOCK_CLOEXEC));
                V("flags", fdflags(a), "nb=1 ce=1");
                T("recv nonblocking", recv(a, g_buf, 1, 0), "-1 EAGAIN");
                break;
            case 2:
                T("accept4 bad flags", accept4(l, NULL, NULL, 0x40000000), "-1 EINVAL");
                a = TF("accept NULL address", accept(l, NULL, NULL));
                break;
            default:
                len = 4;
                a = TF("accept short addrlen", accept(l, (struct sockaddr *)&ss, &len));
                T("addrlen returned", (long)len, "16");
                break;
            }
            V("getpeername port = client's", peer_port(a) == cport ? "same" : "different", "same");
            V("getsockname", sockname(a), "inet 127.0.0.1 port=L len=16");
            V("fstat", ftype(a), "sock");
            T("SO_ACCEPTCONN", gi(a, SOL_SOCKET, SO_ACCEPTCONN), "0");
            T("TCP_INFO state", tcp_state(a), "1");
            sync_();
        }
        T("accept empty", accept(l, NULL, NULL), "-1 EAGAIN");
        V("poll listener", evs(poll1(l, ALLEV, 0)), "none");
        return;
    }
    g_lport = get_int();
    for (int i = 0; i < 4; i++) {
        int c = connect_to(AF_INET, g_lport);
        put_int(local_port(c));
        sync_();
    }
}

/* Blocking connect. */
void seq_connect_block(void)
{
    if (SRV) {
        int l = mk_listener(AF_INET, 8);
        put_int(g_lport);
        accept_to(l, 0);
        sync_();
        return;
    }
    struct sockaddr_storage ss;
    g_lport = get_int();
    int c = TF("socket", socket(AF_INET, SOCK_STREAM, 0));
    socklen_t len = loop_addr(AF_INET, g_lport, &ss);
    T("connect", connect(c, (struct sockaddr *)&ss, len), "0");
    T("connect again", connect(c, (struct sockaddr *)&ss, len), "-1 EISCONN");
    V("getpeername", peername(c), "inet 127.0.0.1 port=L len=16");
    V("getsockname", sockname(c), "inet 127.0.0.1 port=eph len=16");
    V("SO_ERROR", so_error(c), "OK");
    T("TCP_INFO state", tcp_state(c), "1");
    V("poll", evs(poll1(c, ALLEV, 0)), "OUT");
    V("fstat", ftype(c), "sock");
    T("listen on connected", listen(c, 1), "-1 EINVAL");
    T("accept on connected", accept(c, NULL, NULL), "-1 EINVAL");
    sync_();
}

/* Nonblocking connect: EINPROGRESS, POLLOUT, SO_ERROR, then 0 and EISCONN. */
void seq_connect_nb(void)
{
    if (SRV) {
        int l = mk_listener(AF_INET, 8);
        put_int(g_lport);
        accept_to(l, 0);
        accept_to(l, 0);
        sync_();
        return;
    }
    struct sockaddr_storage ss;
    g_lport = get_int();
    socklen_t len = loop_addr(AF_INET, g_lport, &ss);
    int c = TF("socket NONBLOCK", socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0));
    T("connect", connect(c, (struct sockaddr *)&ss, len), "-1 EINPROGRESS");
    settle("poll until writable", c, "OUT");
    V("SO_ERROR", so_error(c), "OK");
    T("connect after completion", connect(c, (struct sockaddr *)&ss, len), "0");
    T("connect again", connect(c, (struct sockaddr *)&ss, len), "-1 EISCONN");
    V("getpeername", peername(c), "inet 127.0.0.1 port=L len=16");
    /* FIONBIO instead of O_NONBLOCK. */
    int d = TF("socket", socket(AF_INET, SOCK_STREAM, 0));
    int one = 1;
    T("FIONBIO 1", ioctl(d, FIONBIO, &one), "0");
    V("flags", fdflags(d), "nb=1 ce=0");
    T("connect", connect(d, (struct sockaddr *)&ss, len), "-1 EINPROGRESS");
    settle("poll until writable", d, "OUT");
    V("SO_ERROR", so_error(d), "OK");
    V("getpeername", peername(d), "inet 127.0.0.1 port=L len=16");
    sync_();
}

/* EALREADY: a second connect() while the first is in progress. The
 * listener's accept queue is full (backlog 0 holds one connection), so the
 * SYN waits for a retransmission after the queue drains. */
void seq_connect_ealready(void)
{
    if (SRV) {
        int l = mk_listener(AF_INET, 0);
        put_int(g_lport);
        sync_(); /* the first connection is queued, the second in progress */
        sync_(); /* the client checked EALREADY */
        accept_to(l, 0);
        fcntl(l, F_SETFL, O_NONBLOCK);
        V("poll: the second connection", evs(poll1(l, POLLIN, SETTLE_MS)), "IN");
        TF("accept", accept(l, NULL, NULL));
        sync_();
        return;
    }
    struct sockaddr_storage ss;
    g_lport = get_int();
    socklen_t len = loop_addr(AF_INET, g_lport, &ss);
    int c1 = connect_to(AF_INET, g_lport);
    (void)c1;
    sleep_ms(100);
    int c = TF("socket NONBLOCK", socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0));
    T("connect", connect(c, (struct sockaddr *)&ss, len), "-1 EINPROGRESS");
    sync_();
    T("connect in progress", connect(c, (struct sockaddr *)&ss, len), "-1 EALREADY");
    V("poll in progress", evs(poll1(c, ALLEV, 100)), "none");
    V("SO_ERROR in progress", so_error(c), "OK");
    sync_();
    /* The SYN is retransmitted after 1 s: give it up to 5 s. */
    settle("poll until writable", c, "OUT");
    V("SO_ERROR", so_error(c), "OK");
    T("connect after completion", connect(c, (struct sockaddr *)&ss, len), "0");
    sync_();
}

/* Connecting to a port nobody listens on (bound, not listening). */
void seq_connect_refused(void)
{
    if (!CLI)
        return;
    struct sockaddr_storage ss;
    int z = TF("socket", socket(AF_INET, SOCK_STREAM, 0));
    socklen_t len = loop_addr(AF_INET, 0, &ss);
    T("bind", bind(z, (struct sockaddr *)&ss, len), "0");
    int port = local_port(z);
    len = loop_addr(AF_INET, port, &ss);
    int c = TF("socket", socket(AF_INET, SOCK_STREAM, 0));
    T("connect closed port", connect(c, (struct sockaddr *)&ss, len), "-1 ECONNREFUSED");
    V("SO_ERROR", so_error(c), "OK");
    V("poll", evs(poll1(c, ALLEV, 0)), "OUT HUP");
    T("connect again", connect(c, (struct sockaddr *)&ss, len), "-1 ECONNREFUSED");
    int d = TF("socket NONBLOCK", socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0));
    T("connect closed port", connect(d, (struct sockaddr *)&ss, len), "-1 EINPROGRESS");
    settle("poll until failed", d, "IN OUT ERR HUP RDHUP");
    V("SO_ERROR", so_error(d), "ECONNREFUSED");
    V("SO_ERROR again", so_error(d), "OK");
    settle("poll after SO_ERROR", d, "IN OUT HUP RDHUP");
    T("connect after failure", connect(d, (struct sockaddr *)&ss, len), "-1 ECONNABORTED");
    T("connect once more", connect(d, (struct sockaddr *)&ss, len), "-1 EINPROGRESS");
    int e = TF("socket NONBLOCK", socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0));
    T("connect closed port", connect(e, (struct sockaddr *)&ss, len), "-1 EINPROGRESS");
    settle("poll until failed", e, "IN OUT ERR HUP RDHUP");
    T("connect with the error pending", connect(e, (struct sockaddr *)&ss, len), "-1 ECONNREFUSED");
    V("SO_ERROR after", so_error(e), "OK");
    T("recv after refusal", recv(e, g_buf, 1, 0), "-1 ENOTCONN");
}

/* An event loop that registers the socket with epoll before connect(). */
void seq_epoll_before_connect(void)
{
    if (SRV) {
        int l = mk_listener(AF_INET, 8);
        put_int(g_lport);
        int a = accept_to(l, 0);
        sync_();
        send_all(a, "x", 1);
        sync_();
        return;
    }
    struct sockaddr_storage ss;
    g_lport = get_int();
    socklen_t len = loop_addr(AF_INET, g_lport, &ss);
    int ep = TF("epoll_create1", epoll_create1(EPOLL_CLOEXEC));
    int c = TF("socket NONBLOCK", socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0));
    T("epoll_ctl ADD IN|RDHUP", ep_add(ep, c, EPOLLIN | EPOLLRDHUP), "0");
    T("connect", connect(c, (struct sockaddr *)&ss, len), "-1 EINPROGRESS");
    settle("poll until writable", c, "OUT");
    V("SO_ERROR", so_error(c), "OK");
    V("epoll_wait connected, no data", ep_wait(ep, 0), "0");
    T("epoll_ctl MOD IN|OUT|RDHUP", ep_mod(ep, c, EPOLLIN | EPOLLOUT | EPOLLRDHUP), "0");
    V("epoll_wait", ep_wait(ep, 1000), "1 OUT");
    T("epoll_ctl MOD IN|RDHUP", ep_mod(ep, c, EPOLLIN | EPOLLRDHUP), "0");
    sync_();
    V("epoll_wait data", ep_wait(ep, SETTLE_MS), "1 IN");
    T("recv", recv(c, g_buf, 16, 0), "1");
    V("epoll_wait after read", ep_wait(ep, 0), "0");
    sync_();
}

/* getsockname/getpeername of both ends. family AF_INET or AF_INET6; mapped:
 * an AF_INET6 client to ::ffff:127.0.0.1 of an AF_INET listener. */
static void names(int family, bool mapped)
{
    const char *ea_v4 = "inet 127.0.0.1 port=L len=16", *ep_v4 = "inet 127.0.0.1 port=eph len=16";
    const char *ea_v6 = "inet6 ::1 port=L len=28", *ep_v6 = "inet6 ::1 port=eph len=28";
    const char *ea_m = "inet6 ::ffff:127.0.0.1 port=L len=28";
    const char *ep_m = "inet6 ::ffff:127.0.0.1 port=eph len=28";
    if (SRV) {
        int l = mk_listener(family, 8);
        put_int(g_lport);
        V("listener getsockname", sockname(l), family == AF_INET6 ? ea_v6 : ea_v4);
        int a = accept_to(l, 0);
        int cport = get_int();
        V("accepted getsockname", sockname(a), family == AF_INET6 ? ea_v6 : ea_v4);
        V("accepted getpeername", peername(a), family == AF_INET6 ? ep_v6 : ep_v4);
        V("peer port = client's local port", peer_port(a) == cport ? "same" : "different", "same");
        T("SO_DOMAIN", gi(a, SOL_SOCKET, SO_DOMAIN), family == AF_INET6 ? "10" : "2");
        struct sockaddr_storage ss;
        socklen_t len = 4;
        T("getsockname short buffer", getsockname(a, (struct sockaddr *)&ss, &len), "0");
        T("length returned", (long)len, family == AF_INET6 ? "28" : "16");
        sync_();
        return;
    }
    g_lport = get_int();
    int cf = mapped ? AF_INET6 : family;
    int c = TF("socket", socket(cf, SOCK_STREAM, 0));
    struct sockaddr_storage ss;
    socklen_t len = loop_addr(cf, g_lport, &ss);
    if (mapped)
        inet_pton(AF_INET6, "::ffff:127.0.0.1", &((struct sockaddr_in6 *)&ss)->sin6_addr);
    T("connect", connect(c, (struct sockaddr *)&ss, len), "0");
    put_int(local_port(c));
    V("getsockname", sockname(c), mapped ? ep_m : cf == AF_INET6 ? ep_v6 : ep_v4);
    V("getpeername", peername(c), mapped ? ea_m : cf == AF_INET6 ? ea_v6 : ea_v4);
    T("SO_DOMAIN", gi(c, SOL_SOCKET, SO_DOMAIN), cf == AF_INET6 ? "10" : "2");
    len = 4;
    T("getpeername short buffer", getpeername(c, (struct sockaddr *)&ss, &len), "0");
    T("length returned", (long)len, cf == AF_INET6 ? "28" : "16");
    sync_();
}

void seq_names_v4(void)
{
    names(AF_INET, false);
}

void seq_names_v6(void)
{
    names(AF_INET6, false);
}

void seq_names_mapped(void)
{
    names(AF_INET, true);
}

/* Options and flags set before connect() are kept by the connection. */
void seq_opts_before_connect(void)
{
    if (SRV) {
        int l = mk_listener(AF_INET, 8);
        put_int(g_lport);
        accept_to(l, 0);
        accept_to(l, 0);
        sync_();
        return;
    }
    struct sockaddr_storage ss;
    g_lport = get_int();
    int c = TF("socket CLOEXEC", socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    T("set TCP_NODELAY", si(c, IPPROTO_TCP, TCP_NODELAY, 1), "0");
    T("set SO_KEEPALIVE", si(c, SOL_SOCKET, SO_KEEPALIVE, 1), "0");
    T("set TCP_KEEPIDLE 33", si(c, IPPROTO_TCP, TCP_KEEPIDLE, 33), "0");
    struct linger lg = {1, 4};
    T("set SO_LINGER 1 4", setsockopt(c, SOL_SOCKET, SO_LINGER, &lg, sizeof lg), "0");
    set_rcvtimeo(c, 300);
    T("set SO_OOBINLINE", si(c, SOL_SOCKET, SO_OOBINLINE, 1), "0");
    socklen_t len = loop_addr(AF_INET, g_lport, &ss);
    T("connect", connect(c, (struct sockaddr *)&ss, len), "0");
    T("TCP_NODELAY", gi(c, IPPROTO_TCP, TCP_NODELAY), "1");
    T("SO_KEEPALIVE", gi(c, SOL_SOCKET, SO_KEEPALIVE), "1");
    T("TCP_KEEPIDLE", gi(c, IPPROTO_TCP, TCP_KEEPIDLE), "33");
    struct linger got;
    socklen_t gl = sizeof got;
    memset(&got, 0, sizeof got);
    getsockopt(c, SOL_SOCKET, SO_LINGER, &got, &gl);
    char *s = sbuf();
    snprintf(s, 160, "onoff=%d linger=%d", got.l_onoff, got.l_linger);
    V("SO_LINGER", s, "onoff=1 linger=4");
    T("SO_OOBINLINE", gi(c, SOL_SOCKET, SO_OOBINLINE), "1");
    V("flags", fdflags(c), "nb=0 ce=1");
    long t0 = now_ms();
    T("recv: SO_RCVTIMEO set before connect", recv(c, g_buf, 1, 0), "-1 EAGAIN");
    V("after", elapsed(now_ms() - t0, 250, 2000), "in 250-2000 ms");
    /* Bound to an explicit local address and port 0 before connect. */
    int d = TF("socket", socket(AF_INET, SOCK_STREAM, 0));
    struct sockaddr_storage la;
    socklen_t ll = loop_addr(AF_INET, 0, &la);
    T("bind 127.0.0.1:0", bind(d, (struct sockaddr *)&la, ll), "0");
    int bound = local_port(d);
    T("connect", connect(d, (struct sockaddr *)&ss, len), "0");
    V("local port is the one bound", local_port(d) == bound ? "yes" : "no", "yes");
    V("getsockname", sockname(d), "inet 127.0.0.1 port=eph len=16");
    /* FD_CLOEXEC and O_NONBLOCK set with fcntl before connect. */
    int e = TF("socket", socket(AF_INET, SOCK_STREAM, 0));
    T("F_SETFD FD_CLOEXEC", fcntl(e, F_SETFD, FD_CLOEXEC), "0");
    T("F_SETFL O_NONBLOCK", fcntl(e, F_SETFL, O_NONBLOCK), "0");
    T("connect", connect(e, (struct sockaddr *)&ss, len), "-1 EINPROGRESS");
    settle("poll until writable", e, "OUT");
    V("flags after connect", fdflags(e), "nb=1 ce=1");
    sync_();
}

/* A listener on the wildcard address: the accepted socket names the
 * address the client used. */
void seq_names_wildcard(void)
{
    if (SRV) {
        struct sockaddr_in any;
        memset(&any, 0, sizeof any);
        any.sin_family = AF_INET;
        int l = TF("socket", socket(AF_INET, SOCK_STREAM, 0));
        T("bind 0.0.0.0:0", bind(l, (struct sockaddr *)&any, sizeof any), "0");
        T("listen", listen(l, 8), "0");
        g_lport = local_port(l);
        V("getsockname", sockname(l), "inet 0.0.0.0 port=L len=16");
        put_int(g_lport);
        int a = accept_to(l, 0);
        V("accepted getsockname", sockname(a), "inet 127.0.0.1 port=L len=16");
        V("accepted getpeername", peername(a), "inet 127.0.0.1 port=eph len=16");
        sync_();
        return;
    }
    g_lport = get_int();
    int c = connect_to(AF_INET, g_lport);
    V("getpeername", peername(c), "inet 127.0.0.1 port=L len=16");
    sync_();
}

/* A dual-stack listener on :: takes IPv4 and IPv6 clients; with
 * IPV6_V6ONLY, IPv4 clients are refused. */
void seq_dual_stack(void)
{
    if (SRV) {
        struct sockaddr_in6 a6;
        memset(&a6, 0, sizeof a6);
        a6.sin6_family = AF_INET6;
        a6.sin6_addr = in6addr_any;
        int l = TF("socket INET6", socket(AF_INET6, SOCK_STREAM, 0));
        T("IPV6_V6ONLY default", gi(l, IPPROTO_IPV6, IPV6_V6ONLY), "0");
        T("bind [::]:0", bind(l, (struct sockaddr *)&a6, sizeof a6), "0");
        T("listen", listen(l, 8), "0");
        g_lport = local_port(l);
        V("getsockname", sockname(l), "inet6 :: port=L len=28");
        put_int(g_lport);
        int a = accept_to(l, 0);
        V("v4 client: accepted getpeername", peername(a), "inet6 ::ffff:127.0.0.1 port=eph len=28");
        V("v4 client: accepted getsockname", sockname(a), "inet6 ::ffff:127.0.0.1 port=L len=28");
        T("v4 client: recv", recv(a, g_buf, 2, MSG_WAITALL), "2");
        sync_();
        int b = accept_to(l, 0);
        V("v6 client: accepted getpeername", peername(b), "inet6 ::1 port=eph len=28");
        T("v6 client: recv", recv(b, g_buf, 2, MSG_WAITALL), "2");
        int o = TF("socket INET6", socket(AF_INET6, SOCK_STREAM, 0));
        T("set IPV6_V6ONLY", si(o, IPPROTO_IPV6, IPV6_V6ONLY, 1), "0");
        T("bind [::]:0", bind(o, (struct sockaddr *)&a6, sizeof a6), "0");
        T("listen", listen(o, 8), "0");
        put_int(local_port(o));
        sync_();
        return;
    }
    g_lport = get_int();
    int c = connect_to(AF_INET, g_lport);
    V("v4 client: getpeername", peername(c), "inet 127.0.0.1 port=L len=16");
    T("send", send(c, "v4", 2, 0), "2");
    sync_();
    int d = connect_to(AF_INET6, g_lport);
    V("v6 client: getpeername", peername(d), "inet6 ::1 port=L len=28");
    T("send", send(d, "v6", 2, 0), "2");
    int p6 = get_int();
    struct sockaddr_storage ss;
    socklen_t len = loop_addr(AF_INET, p6, &ss);
    int e = TF("socket", socket(AF_INET, SOCK_STREAM, 0));
    T("v4 connect to a V6ONLY listener", connect(e, (struct sockaddr *)&ss, len),
      "-1 ECONNREFUSED");
    sync_();
}

/* A descriptor duplicated before connect() or listen() is the same socket
 * afterwards. */
void seq_dup_before_connect(void)
{
    if (SRV) {
        int l = mk_listener(AF_INET, 8);
        put_int(g_lport);
        int a = accept_to(l, 0);
        wait_bytes(a, 2);
        T("recv from both descriptors", recv(a, g_buf, 16, 0), "2");
        send_all(a, "r", 1);
        sync_();
        /* A listener duplicated before listen(). */
        int m = TF("socket", socket(AF_INET, SOCK_STREAM, 0));
        struct sockaddr_storage ss;
        socklen_t len = loop_addr(AF_INET, 0, &ss);
        T("bind", bind(m, (struct sockaddr *)&ss, len), "0");
        int d = TF("dup before listen", dup(m));
        T("listen", listen(m, 8), "0");
        T("SO_ACCEPTCONN on the dup", gi(d, SOL_SOCKET, SO_ACCEPTCONN), "1");
        g_lport = local_port(m);
        put_int(g_lport);
        V("poll the dup", evs(poll1(d, POLLIN, SETTLE_MS)), "IN");
        int b = TF("accept on the dup", accept(d, NULL, NULL));
        V("accepted getsockname", sockname(b), "inet 127.0.0.1 port=L len=16");
        sync_();
        return;
    }
    struct sockaddr_storage ss;
    g_lport = get_int();
    socklen_t len = loop_addr(AF_INET, g_lport, &ss);
    int c = TF("socket", socket(AF_INET, SOCK_STREAM, 0));
    int d = TF("dup before connect", dup(c));
    T("connect", connect(c, (struct sockaddr *)&ss, len), "0");
    V("getpeername of the dup", peername(d), "inet 127.0.0.1 port=L len=16");
    T("send on the connected descriptor", send(c, "a", 1, 0), "1");
    T("send on the dup", send(d, "b", 1, MSG_NOSIGNAL), "1");
    V("poll the dup: data from the peer", evs(poll1(d, POLLIN, SETTLE_MS)), "IN");
    T("recv on the dup", recv(d, g_buf, 16, MSG_DONTWAIT), "1");
    sync_();
    g_lport = get_int();
    connect_to(AF_INET, g_lport);
    sync_();
}

/* accept() hands out connections in the order they were made (IPv4, IPv6
 * and IPv4 again, to a dual-stack listener). */
void seq_accept_fifo(void)
{
    if (SRV) {
        struct sockaddr_in6 a6;
        memset(&a6, 0, sizeof a6);
        a6.sin6_family = AF_INET6;
        a6.sin6_addr = in6addr_any;
        int l = TF("socket INET6", socket(AF_INET6, SOCK_STREAM, 0));
        T("bind [::]:0", bind(l, (struct sockaddr *)&a6, sizeof a6), "0");
        T("listen", listen(l, 8), "0");
        g_lport = local_port(l);
        put_int(g_lport);
        int ports[3];
        for (int i = 0; i < 3; i++)
            ports[i] = get_int();
        sync_();
        char *s = sbuf();
        s[0] = 0;
        for (int i = 0; i < 3; i++) {
            int a = accept_to(l, 0);
            int p = peer_port(a);
            /* By port and family: an IPv4 and an IPv6 connection may get
             * the same ephemeral port (different addresses, so no clash). */
            struct sockaddr_in6 pa;
            socklen_t pl = sizeof pa;
            memset(&pa, 0, sizeof pa);
            getpeername(a, (struct sockaddr *)&pa, &pl);
            bool v4 = IN6_IS_ADDR_V4MAPPED(&pa.sin6_addr);
            int k = 0;
            for (int j = 0; j < 3; j++)
                if (p == ports[j] && v4 == (j != 1))
                    k = j + 1;
            snprintf(s + strlen(s), 16, "%s%d", i ? " " : "", k);
        }
        V("order of accepted connections", s, "1 2 3");
        sync_();
        return;
    }
    g_lport = get_int();
    for (int i = 0; i < 3; i++)
        put_int(local_port(connect_to(i == 1 ? AF_INET6 : AF_INET, g_lport)));
    sync_();
    sync_();
}

/* Closing a listener resets the connections still waiting for accept(). */
void seq_listener_close_pending(void)
{
    if (SRV) {
        int l = mk_listener(AF_INET, 8);
        put_int(g_lport);
        V("poll: a connection waits", evs(poll1(l, POLLIN, SETTLE_MS)), "IN");
        sync_();
        TCLOSE("close the listener", l, "0");
        sync_();
        return;
    }
    g_lport = get_int();
    int c = connect_to(AF_INET, g_lport);
    sync_();
    sync_();
    settle("poll after the listener closed", c, "IN OUT ERR HUP RDHUP");
    T("recv", recv(c, g_buf, 16, 0), "-1 ECONNRESET");
}

/* Two listeners on one port with SO_REUSEPORT share its connections. */
void seq_reuseport(void)
{
    if (SRV) {
        struct sockaddr_storage ss;
        int l1 = TF("socket", socket(AF_INET, SOCK_STREAM, 0));
        int l2 = TF("socket", socket(AF_INET, SOCK_STREAM, 0));
        T("SO_REUSEPORT", si(l1, SOL_SOCKET, SO_REUSEPORT, 1), "0");
        T("SO_REUSEPORT", si(l2, SOL_SOCKET, SO_REUSEPORT, 1), "0");
        socklen_t len = loop_addr(AF_INET, 0, &ss);
        T("bind 127.0.0.1:0", bind(l1, (struct sockaddr *)&ss, len), "0");
        g_lport = local_port(l1);
        len = loop_addr(AF_INET, g_lport, &ss);
        T("bind the same port", bind(l2, (struct sockaddr *)&ss, len), "0");
        T("listen", listen(l1, 8), "0");
        T("listen the second", listen(l2, 8), "0");
        put_int(g_lport);
        sync_();
        fcntl(l1, F_SETFL, O_NONBLOCK);
        fcntl(l2, F_SETFL, O_NONBLOCK);
        int got = 0;
        long end = now_ms() + SETTLE_MS;
        while (got < 4 && now_ms() < end) {
            struct pollfd pf[2] = {{l1, POLLIN, 0}, {l2, POLLIN, 0}};
            poll(pf, 2, 100);
            for (int i = 0; i < 2; i++) {
                int a = accept(i ? l2 : l1, NULL, NULL);
                if (a >= 0) {
                    track(a);
                    got++;
                }
            }
        }
        T("connections accepted from both listeners", got, "4");
        sync_();
        return;
    }
    g_lport = get_int();
    for (int i = 0; i < 4; i++)
        connect_to(AF_INET, g_lport);
    sync_();
    sync_();
}

/* A server that closes its listener and listens again on the same port. */
void seq_relisten(void)
{
    if (SRV) {
        struct sockaddr_storage ss;
        int l = TF("socket", socket(AF_INET, SOCK_STREAM, 0));
        T("SO_REUSEADDR", si(l, SOL_SOCKET, SO_REUSEADDR, 1), "0");
        socklen_t len = loop_addr(AF_INET, 0, &ss);
        T("bind", bind(l, (struct sockaddr *)&ss, len), "0");
        T("listen", listen(l, 8), "0");
        g_lport = local_port(l);
        put_int(g_lport);
        int a = accept_to(l, 0);
        T("recv", recv(a, g_buf, 1, MSG_WAITALL), "1");
        TCLOSE("close the listener", l, "0");
        int m = TF("socket", socket(AF_INET, SOCK_STREAM, 0));
        T("SO_REUSEADDR", si(m, SOL_SOCKET, SO_REUSEADDR, 1), "0");
        len = loop_addr(AF_INET, g_lport, &ss);
        T("bind the same port", bind(m, (struct sockaddr *)&ss, len), "0");
        T("listen", listen(m, 8), "0");
        sync_();
        int b = accept_to(m, 0);
        T("recv on the new listener's connection", recv(b, g_buf, 1, MSG_WAITALL), "1");
        sync_();
        return;
    }
    g_lport = get_int();
    int c = connect_to(AF_INET, g_lport);
    T("send", send(c, "1", 1, 0), "1");
    sync_();
    int d = connect_to(AF_INET, g_lport);
    T("send", send(d, "2", 1, 0), "1");
    sync_();
}
