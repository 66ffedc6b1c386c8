/* pl_calls sequences: resets (SO_LINGER 0, unread data at close), EPIPE
 * and SIGPIPE, writes after the peer closed, signals interrupting blocking
 * calls (EINTR, SA_RESTART, SO_RCVTIMEO), and sockets the preload library
 * must leave alone. Expected values are Linux TCP's. */
#include "pl_calls.h"

static const char *count(const char *what, int n)
{
    char *s = sbuf();
    snprintf(s, 160, "%s=%d", what, n);
    return s;
}

/* The peer closes with SO_LINGER 0 (a reset): ECONNRESET once, then EPIPE,
 * SIGPIPE only without MSG_NOSIGNAL. */
void seq_reset_epipe(void)
{
    int fd = pair_open(AF_INET);
    if (SRV) {
        struct linger l = {1, 0};
        T("SO_LINGER 1 0", setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof l), "0");
        TCLOSE("close (reset)", fd, "0");
        sync_();
        return;
    }
    char b[8];
    sync_();
    settle("poll after reset", fd, "IN OUT ERR HUP RDHUP");
    g_sigpipe = 0;
    T("send NOSIGNAL", send(fd, "x", 1, MSG_NOSIGNAL), "-1 ECONNRESET");
    T("send NOSIGNAL again", send(fd, "x", 1, MSG_NOSIGNAL), "-1 EPIPE");
    V("SIGPIPE", count("sigpipe", g_sigpipe), "sigpipe=0");
    T("send", send(fd, "x", 1, 0), "-1 EPIPE");
    V("SIGPIPE", count("sigpipe", g_sigpipe), "sigpipe=1");
    T("write", write(fd, "x", 1), "-1 EPIPE");
    V("SIGPIPE", count("sigpipe", g_sigpipe), "sigpipe=2");
    struct iovec none = {g_buf, 0};
    struct msghdr mh;
    memset(&mh, 0, sizeof mh);
    mh.msg_iov = &none;
    T("sendmsg 0 octets NOSIGNAL", sendmsg(fd, &mh, MSG_NOSIGNAL), "-1 EPIPE");
    V("SIGPIPE", count("sigpipe", g_sigpipe), "sigpipe=2");
    T("recv", recv(fd, b, sizeof b, 0), "0");
    V("SO_ERROR", so_error(fd), "OK");
    V("poll", evs(poll1(fd, ALLEV, 0)), "IN OUT HUP RDHUP");
    T("TCP_INFO state", tcp_state(fd), "7");
    V("getpeername", peername(fd), "-1 ENOTCONN");
    T("shutdown", shutdown(fd, SHUT_RDWR), "-1 ENOTCONN");
}

/* The peer closes with our data unread: a reset; recv says ECONNRESET. */
void seq_reset_unread(void)
{
    int fd = pair_open(AF_INET);
    if (SRV) {
        wait_bytes(fd, 5);
        TCLOSE("close with 5 octets unread", fd, "0");
        sync_();
        return;
    }
    char b[8];
    T("send", send(fd, "12345", 5, 0), "5");
    sync_();
    settle("poll after reset", fd, "IN OUT ERR HUP RDHUP");
    V("SO_ERROR (peek with poll, then read)", evs(poll1(fd, POLLIN, 0)), "IN ERR HUP");
    T("recv", recv(fd, b, sizeof b, 0), "-1 ECONNRESET");
    T("recv again", recv(fd, b, sizeof b, 0), "0");
    V("SO_ERROR", so_error(fd), "OK");
    V("poll", evs(poll1(fd, ALLEV, 0)), "IN OUT HUP RDHUP");
    T("send NOSIGNAL", send(fd, "x", 1, MSG_NOSIGNAL), "-1 EPIPE");
}

/* The peer closed (gracefully); we read its last data and EOF, then write:
 * the peer's kernel answers with a reset. */
void seq_write_after_close(void)
{
    int fd = pair_open(AF_INET);
    if (SRV) {
        T("send", send(fd, "bye", 3, 0), "3");
        TCLOSE("close", fd, "0");
        sync_();
        return;
    }
    char b[8];
    sync_();
    wait_bytes(fd, 3);
    settle("poll peer closed", fd, "IN OUT RDHUP");
    long n = T("recv", recv(fd, b, sizeof b, 0), "3");
    V("data", str_n(b, n), "\"bye\"");
    T("recv EOF", recv(fd, b, sizeof b, 0), "0");
    T("send to a closed peer", send(fd, "x", 1, MSG_NOSIGNAL), "1");
    settle("poll after the peer's reset", fd, "IN OUT ERR HUP RDHUP");
    g_sigpipe = 0;
    T("send NOSIGNAL", send(fd, "x", 1, MSG_NOSIGNAL), "-1 EPIPE");
    T("send NOSIGNAL again", send(fd, "x", 1, MSG_NOSIGNAL), "-1 EPIPE");
    V("SIGPIPE", count("sigpipe", g_sigpipe), "sigpipe=0");
    T("recv", recv(fd, b, sizeof b, 0), "0");
    V("poll", evs(poll1(fd, ALLEV, 0)), "IN OUT HUP RDHUP");
}

/* A signal interrupts a blocking recv: EINTR without SA_RESTART. The peer
 * sends after 1.5 s, which ends a recv that was not interrupted. */
void seq_eintr_recv(void)
{
    int fd = pair_open(AF_INET);
    if (SRV) {
        sync_();
        sleep_ms(1500);
        send_all(fd, "wake", 4);
        sync_();
        return;
    }
    char b[8];
    set_alrm(false);
    g_sigalrm = 0;
    sync_();
    alarm_ms(200);
    long t0 = now_ms();
    T("recv blocking, SIGALRM after 200 ms", recv(fd, b, sizeof b, 0), "-1 EINTR");
    V("after", elapsed(now_ms() - t0, 150, 1000), "in 150-1000 ms");
    V("handler ran", count("sigalrm", g_sigalrm), "sigalrm=1");
    sync_();
    set_rcvtimeo(fd, 5000);
    T("recv the peer's data", recv(fd, b, sizeof b, MSG_WAITALL), "4");
    set_alrm(true);
}

/* The same with SA_RESTART: recv goes on and returns the data sent after
 * the signal. */
void seq_restart_recv(void)
{
    int fd = pair_open(AF_INET);
    if (SRV) {
        sync_();
        sleep_ms(600);
        send_all(fd, "late", 4);
        sync_();
        return;
    }
    char b[8];
    set_alrm(true);
    g_sigalrm = 0;
    sync_();
    alarm_ms(200);
    long t0 = now_ms();
    long n = T("recv blocking, SA_RESTART", recv(fd, b, sizeof b, 0), "4");
    V("data", str_n(b, n), "\"late\"");
    V("after", elapsed(now_ms() - t0, 450, 3000), "in 450-3000 ms");
    V("handler ran", count("sigalrm", g_sigalrm), "sigalrm=1");
    sync_();
}

/* SA_RESTART does not restart a recv on a socket with SO_RCVTIMEO. */
void seq_eintr_rcvtimeo(void)
{
    int fd = pair_open(AF_INET);
    if (SRV) {
        sync_();
        sync_();
        return;
    }
    char b[8];
    set_alrm(true);
    g_sigalrm = 0;
    struct timeval tv = {3, 0};
    T("SO_RCVTIMEO 3 s", setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv), "0");
    sync_();
    alarm_ms(200);
    long t0 = now_ms();
    T("recv, SA_RESTART and SO_RCVTIMEO", recv(fd, b, sizeof b, 0), "-1 EINTR");
    V("after", elapsed(now_ms() - t0, 150, 1000), "in 150-1000 ms");
    V("handler ran", count("sigalrm", g_sigalrm), "sigalrm=1");
    sync_();
}

/* A blocking accept: EINTR without SA_RESTART; restarted with it. */
void seq_eintr_accept(void)
{
    if (SRV) {
        g_lport = get_int();
        sync_();
        sync_();
        sleep_ms(600);
        connect_to(AF_INET, g_lport);
        sync_();
        return;
    }
    int l = mk_listener(AF_INET, 4);
    put_int(g_lport);
    struct timeval tv = {2, 0};
    set_alrm(false);
    g_sigalrm = 0;
    T("SO_RCVTIMEO 2 s on listener", setsockopt(l, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv), "0");
    sync_();
    alarm_ms(200);
    long t0 = now_ms();
    T("accept blocking, SIGALRM after 200 ms", accept(l, NULL, NULL), "-1 EINTR");
    V("after", elapsed(now_ms() - t0, 150, 1000), "in 150-1000 ms");
    V("handler ran", count("sigalrm", g_sigalrm), "sigalrm=1");
    tv.tv_sec = 0;
    T("SO_RCVTIMEO off", setsockopt(l, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv), "0");
    set_alrm(true);
    sync_();
    alarm_ms(200);
    t0 = now_ms();
    TF("accept blocking, SA_RESTART", accept(l, NULL, NULL));
    V("after", elapsed(now_ms() - t0, 450, 3000), "in 450-3000 ms");
    V("handler ran", count("sigalrm", g_sigalrm), "sigalrm=2");
    sync_();
}

/* A blocking send into a full socket: EINTR without SA_RESTART. */
void seq_eintr_send(void)
{
    int fd = pair_open(AF_INET);
    if (SRV) {
        sync_();
        return;
    }
    T("O_NONBLOCK", fcntl(fd, F_SETFL, O_NONBLOCK), "0");
    T("fill until EAGAIN", fill(fd), ">0");
    T("O_NONBLOCK off", fcntl(fd, F_SETFL, 0), "0");
    struct timeval tv = {2, 0};
    T("SO_SNDTIMEO 2 s", setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv), "0");
    set_alrm(false);
    g_sigalrm = 0;
    alarm_ms(200);
    long t0 = now_ms();
    T("send blocking, SIGALRM after 200 ms", send(fd, g_buf, sizeof g_buf, 0), "-1 EINTR");
    V("after", elapsed(now_ms() - t0, 150, 1000), "in 150-1000 ms");
    V("handler ran", count("sigalrm", g_sigalrm), "sigalrm=1");
    /* SA_RESTART does not restart a send on a socket with SO_SNDTIMEO. */
    set_alrm(true);
    fill(fd);
    alarm_ms(200);
    t0 = now_ms();
    T("send blocking, SA_RESTART and SO_SNDTIMEO", send(fd, g_buf, sizeof g_buf, 0), "-1 EINTR");
    V("after", elapsed(now_ms() - t0, 150, 1000), "in 150-1000 ms");
    V("handler ran", count("sigalrm", g_sigalrm), "sigalrm=2");
    sync_();
}

/* close() with unsent data returns at once; the data and the EOF still
 * reach the peer (the kernel finishes the connection). */
void seq_close_pending(void)
{
    int fd = pair_open(AF_INET);
    if (CLI) {
        long total = T("fill until EAGAIN", fill(fd), ">0");
        put_int((int)total);
        long t0 = now_ms();
        TCLOSE("close with unsent data", fd, "0");
        V("close returned", elapsed(now_ms() - t0, 0, 500), "in 0-500 ms");
        sync_();
        return;
    }
    long total = get_int(), got = 0, n = 0;
    set_rcvtimeo(fd, 5000);
    while ((n = recv(fd, g_buf, sizeof g_buf, 0)) > 0)
        got += n;
    V("read everything the peer sent", got == total ? "yes" : "no", "yes");
    T("then EOF", n, "0");
    sync_();
}

/* sendmsg/recvmsg with msg_iov NULL and msg_iovlen 0 (valid: no data), on
 * a connected socket and after a reset. Last in the table: a library that
 * trips a sanitizer here ends the run without hiding the other sequences. */
void seq_msg_null_iov(void)
{
    int fd = pair_open(AF_INET);
    struct msghdr mh;
    memset(&mh, 0, sizeof mh);
    if (SRV) {
        T("recvmsg NULL iov DONTWAIT", recvmsg(fd, &mh, MSG_DONTWAIT), "-1 EAGAIN");
        sync_();
        struct linger l = {1, 0};
        setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof l);
        TCLOSE("close (reset)", fd, "0");
        sync_();
        return;
    }
    T("sendmsg NULL iov", sendmsg(fd, &mh, MSG_NOSIGNAL), "0");
    sync_();
    sync_();
    settle("poll after reset", fd, "IN OUT ERR HUP RDHUP");
    T("sendmsg NULL iov after reset", sendmsg(fd, &mh, MSG_NOSIGNAL), "-1 ECONNRESET");
    T("sendmsg NULL iov again", sendmsg(fd, &mh, MSG_NOSIGNAL), "-1 EPIPE");
}

/* UDP and AF_UNIX stream sockets: not candidates, untouched. */
void seq_passthrough(void)
{
    if (!CLI)
        return;
    struct sockaddr_storage ss, from;
    char b[16];
    int u1 = TF("socket INET DGRAM", socket(AF_INET, SOCK_DGRAM, 0));
    int u2 = TF("socket INET DGRAM", socket(AF_INET, SOCK_DGRAM, 0));
    socklen_t len = loop_addr(AF_INET, 0, &ss);
    T("bind", bind(u1, (struct sockaddr *)&ss, len), "0");
    g_lport = local_port(u1);
    len = loop_addr(AF_INET, g_lport, &ss);
    T("sendto", sendto(u2, "dgram", 5, 0, (struct sockaddr *)&ss, len), "5");
    T("poll", poll1(u1, POLLIN, SETTLE_MS), "1");
    socklen_t flen = sizeof from;
    long n = T("recvfrom", recvfrom(u1, b, sizeof b, 0, (struct sockaddr *)&from, &flen), "5");
    V("data", str_n(b, n), "\"dgram\"");
    V("source", sa_str(&from, flen), "inet 127.0.0.1 port=eph len=16");
    T("SO_TYPE", gi(u1, SOL_SOCKET, SO_TYPE), "2");
    int sv[2];
    T("socketpair UNIX STREAM", socketpair(AF_UNIX, SOCK_STREAM, 0, sv), "0");
    track(sv[0]);
    track(sv[1]);
    T("send", send(sv[0], "unix", 4, 0), "4");
    n = T("recv", recv(sv[1], b, sizeof b, 0), "4");
    V("data", str_n(b, n), "\"unix\"");
    T("SO_DOMAIN", gi(sv[0], SOL_SOCKET, SO_DOMAIN), "1");
}

/* A blocking recv returns 0 when the peer closes while it waits. */
void seq_recv_wakeup_eof(void)
{
    int fd = pair_open(AF_INET);
    if (SRV) {
        sync_();
        sleep_ms(300);
        TCLOSE("close", fd, "0");
        sync_();
        return;
    }
    set_rcvtimeo(fd, 3000);
    sync_();
    long t0 = now_ms();
    T("recv blocking, the peer closes after 300 ms", recv(fd, g_buf, 16, 0), "0");
    V("after", elapsed(now_ms() - t0, 250, 2000), "in 250-2000 ms");
    sync_();
}
