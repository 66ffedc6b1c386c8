/* pl_calls sequences: poll, select, epoll (level- and edge-triggered,
 * EPOLLONESHOT, an epoll descriptor inside another, listeners), readiness
 * after data arrives and after the peer closes, a full send buffer.
 * Expected values are Linux TCP's. */
#include "pl_calls.h"

/* "r=N w=N x=N" from select with timeout ms. */
static const char *sel(int fd, int ms)
{
    fd_set r, w, x;
    FD_ZERO(&r);
    FD_ZERO(&w);
    FD_ZERO(&x);
    FD_SET(fd, &r);
    FD_SET(fd, &w);
    FD_SET(fd, &x);
    struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
    int n = select(fd + 1, &r, &w, &x, &tv);
    char *s = sbuf();
    if (n < 0)
        snprintf(s, 160, "-1 %s", ename(errno));
    else
        snprintf(s, 160, "n=%d r=%d w=%d x=%d", n, !!FD_ISSET(fd, &r), !!FD_ISSET(fd, &w),
                 !!FD_ISSET(fd, &x));
    return s;
}

/* select for reading only. */
static const char *sel_r(int fd, int ms)
{
    fd_set r;
    FD_ZERO(&r);
    FD_SET(fd, &r);
    struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
    int n = select(fd + 1, &r, NULL, NULL, &tv);
    char *s = sbuf();
    if (n < 0)
        snprintf(s, 160, "-1 %s", ename(errno));
    else
        snprintf(s, 160, "n=%d r=%d", n, !!FD_ISSET(fd, &r));
    return s;
}

void seq_poll_select(void)
{
    int fd = pair_open(AF_INET);
    char b[16];
    if (SRV) {
        sync_();
        send_all(fd, "hello", 5);
        sync_();
        sync_();
        T("send OOB", send(fd, "!", 1, MSG_OOB), "1");
        sync_();
        sync_();
        TCLOSE("close", fd, "0");
        sync_();
        return;
    }
    V("poll idle", evs(poll1(fd, ALLEV, 0)), "OUT");
    V("poll IN only, 100 ms", evs(poll1(fd, POLLIN, 100)), "none");
    V("select idle", sel(fd, 0), "n=1 r=0 w=1 x=0");
    sync_();
    V("select read, waits for the data", sel_r(fd, SETTLE_MS), "n=1 r=1");
    wait_bytes(fd, 5);
    V("poll data", evs(poll1(fd, ALLEV, 0)), "IN OUT");
    V("select data", sel(fd, 0), "n=2 r=1 w=1 x=0");
    T("recv", recv(fd, b, sizeof b, 0), "5");
    V("poll after read", evs(poll1(fd, ALLEV, 0)), "OUT");
    V("select after read", sel(fd, 0), "n=1 r=0 w=1 x=0");
    sync_();
    sync_();
    settle("poll urgent (the urgent octet alone)", fd, "PRI OUT");
    V("select urgent", sel(fd, 0), "n=2 r=0 w=1 x=1");
    T("recv OOB", recv(fd, b, 1, MSG_OOB), "1");
    sync_();
    sync_();
    settle("poll peer closed", fd, "IN OUT RDHUP");
    V("select peer closed", sel(fd, 0), "n=2 r=1 w=1 x=0");
    T("recv EOF", recv(fd, b, sizeof b, 0), "0");
    V("poll at EOF", evs(poll1(fd, ALLEV, 0)), "IN OUT RDHUP");
    struct pollfd pf[2] = {{fd, POLLIN, 0}, {-1, POLLIN, 0}};
    T("poll two entries, one -1", poll(pf, 2, 0), "1");
    V("revents of -1", evs(pf[1].revents), "none");
    int d = dup(fd);
    close(d);
    V("poll a closed descriptor", evs(poll1(d, POLLIN, 0)), "NVAL");
    sync_();
}

/* Level-triggered epoll. */
void seq_epoll_lt(void)
{
    int fd = pair_open(AF_INET);
    char b[16];
    if (SRV) {
        sync_();
        send_all(fd, "hello", 5);
        sync_();
        sync_();
        TCLOSE("close", fd, "0");
        sync_();
        return;
    }
    int ep = TF("epoll_create1", epoll_create1(0));
    T("epoll_ctl ADD IN|RDHUP", ep_add(ep, fd, EPOLLIN | EPOLLRDHUP), "0");
    T("epoll_ctl ADD again", ep_add(ep, fd, EPOLLIN), "-1 EEXIST");
    V("epoll_wait idle", ep_wait(ep, 0), "0");
    sync_();
    V("epoll_wait data", ep_wait(ep, SETTLE_MS), "1 IN");
    wait_bytes(fd, 5);
    V("epoll_wait not read yet", ep_wait(ep, 0), "1 IN");
    T("recv", recv(fd, b, sizeof b, 0), "5");
    V("epoll_wait after read", ep_wait(ep, 0), "0");
    T("epoll_ctl MOD OUT", ep_mod(ep, fd, EPOLLOUT), "0");
    V("epoll_wait OUT", ep_wait(ep, 0), "1 OUT");
    T("epoll_ctl MOD IN|RDHUP", ep_mod(ep, fd, EPOLLIN | EPOLLRDHUP), "0");
    sync_();
    sync_();
    V("epoll_wait peer closed", ep_wait(ep, SETTLE_MS), "1 IN RDHUP");
    settle("poll peer closed", fd, "IN OUT RDHUP");
    V("epoll_wait peer closed, settled", ep_wait(ep, 0), "1 IN RDHUP");
    T("recv EOF", recv(fd, b, sizeof b, 0), "0");
    V("epoll_wait at EOF", ep_wait(ep, 0), "1 IN RDHUP");
    T("epoll_ctl DEL", epoll_ctl(ep, EPOLL_CTL_DEL, fd, NULL), "0");
    T("epoll_ctl DEL again", epoll_ctl(ep, EPOLL_CTL_DEL, fd, NULL), "-1 ENOENT");
    V("epoll_wait empty set", ep_wait(ep, 0), "0");
    sync_();
}

/* Edge-triggered epoll. */
void seq_epoll_et(void)
{
    int fd = pair_open(AF_INET);
    char b[64];
    if (SRV) {
        sync_();
        send_all(fd, "one", 3);
        sync_();
        sync_();
        send_all(fd, "two", 3);
        sync_();
        sync_();
        send_all(fd, "three", 5);
        sync_();
        sync_();
        TCLOSE("close", fd, "0");
        sync_();
        return;
    }
    T("O_NONBLOCK", fcntl(fd, F_SETFL, O_NONBLOCK), "0");
    int ep = TF("epoll_create1", epoll_create1(0));
    T("epoll_ctl ADD IN|OUT|RDHUP|ET", ep_add(ep, fd, EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET),
      "0");
    V("epoll_wait first: writable", ep_wait(ep, 0), "1 OUT");
    V("epoll_wait no new edge", ep_wait(ep, 0), "0");
    sync_();
    V("epoll_wait data", ep_wait(ep, SETTLE_MS), "1 IN OUT");
    V("epoll_wait no new edge, data unread", ep_wait(ep, QUIET_MS), "0");
    sync_();
    sync_();
    wait_bytes(fd, 6);
    V("epoll_wait more data while readable", ep_wait(ep, QUIET_MS), "1 IN OUT");
    long n = T("recv all", recv(fd, b, sizeof b, 0), "6");
    V("data", str_n(b, n), "\"onetwo\"");
    T("recv until EAGAIN", recv(fd, b, sizeof b, 0), "-1 EAGAIN");
    V("epoll_wait after EAGAIN", ep_wait(ep, 0), "0");
    sync_();
    sync_();
    V("epoll_wait new data", ep_wait(ep, SETTLE_MS), "1 IN OUT");
    wait_bytes(fd, 5);
    T("recv", recv(fd, b, sizeof b, 0), "5");
    T("recv until EAGAIN", recv(fd, b, sizeof b, 0), "-1 EAGAIN");
    sync_();
    sync_();
    V("epoll_wait peer closed", ep_wait(ep, SETTLE_MS), "1 IN OUT RDHUP");
    T("recv EOF", recv(fd, b, sizeof b, 0), "0");
    V("epoll_wait after EOF read", ep_wait(ep, 0), "0");
    sync_();
}

/* EPOLLONESHOT: one event, then nothing until EPOLL_CTL_MOD re-arms. */
void seq_epoll_oneshot(void)
{
    int fd = pair_open(AF_INET);
    char b[16];
    if (SRV) {
        sync_();
        send_all(fd, "a", 1);
        sync_();
        sync_();
        send_all(fd, "b", 1);
        sync_();
        return;
    }
    int ep = TF("epoll_create1", epoll_create1(0));
    T("epoll_ctl ADD IN|ONESHOT", ep_add(ep, fd, EPOLLIN | EPOLLONESHOT), "0");
    sync_();
    V("epoll_wait data", ep_wait(ep, SETTLE_MS), "1 IN");
    V("epoll_wait disarmed", ep_wait(ep, 0), "0");
    sync_();
    sync_();
    wait_bytes(fd, 2);
    V("epoll_wait disarmed, more data", ep_wait(ep, 0), "0");
    T("epoll_ctl MOD re-arm", ep_mod(ep, fd, EPOLLIN | EPOLLONESHOT), "0");
    V("epoll_wait re-armed", ep_wait(ep, 0), "1 IN");
    V("epoll_wait disarmed again", ep_wait(ep, 0), "0");
    T("recv", recv(fd, b, sizeof b, 0), "2");
    T("epoll_ctl MOD re-arm", ep_mod(ep, fd, EPOLLIN | EPOLLONESHOT), "0");
    V("epoll_wait nothing to read", ep_wait(ep, 0), "0");
    sync_();
}

/* An epoll descriptor inside another. */
void seq_epoll_nested(void)
{
    int fd = pair_open(AF_INET);
    char b[16];
    if (SRV) {
        sync_();
        send_all(fd, "data", 4);
        sync_();
        sync_();
        TCLOSE("close", fd, "0");
        sync_();
        return;
    }
    int inner = TF("epoll_create1 inner", epoll_create1(0));
    int outer = TF("epoll_create1 outer", epoll_create1(0));
    T("inner ADD socket IN|RDHUP", ep_add(inner, fd, EPOLLIN | EPOLLRDHUP), "0");
    T("outer ADD inner IN", ep_add(outer, inner, EPOLLIN), "0");
    V("outer idle", ep_wait(outer, 0), "0");
    sync_();
    V("outer data", ep_wait(outer, SETTLE_MS), "1 IN");
    V("inner data", ep_wait(inner, 0), "1 IN");
    wait_bytes(fd, 4);
    T("recv", recv(fd, b, sizeof b, 0), "4");
    V("outer after read", ep_wait(outer, 0), "0");
    sync_();
    sync_();
    V("outer peer closed", ep_wait(outer, SETTLE_MS), "1 IN");
    settle("poll peer closed", fd, "IN OUT RDHUP");
    V("inner peer closed", ep_wait(inner, 0), "1 IN RDHUP");
    /* Edge-triggered outer on a level-triggered inner. */
    int outer2 = TF("epoll_create1 outer ET", epoll_create1(0));
    T("outer ET ADD inner", ep_add(outer2, inner, EPOLLIN | EPOLLET), "0");
    V("outer ET first", ep_wait(outer2, 0), "1 IN");
    V("outer ET again", ep_wait(outer2, 0), "0");
    sync_();
}

/* An epoll registration outlives the descriptor it was made with while a
 * duplicate keeps the socket open (it belongs to the open file). */
void seq_epoll_dup(void)
{
    int fd = pair_open(AF_INET);
    char b[16];
    if (SRV) {
        sync_();
        send_all(fd, "x", 1);
        sync_();
        return;
    }
    int ep = TF("epoll_create1", epoll_create1(0));
    T("epoll_ctl ADD IN", ep_add(ep, fd, EPOLLIN), "0");
    int d = TF("dup", dup(fd));
    TCLOSE("close the registered descriptor", fd, "0");
    sync_();
    V("epoll_wait data", ep_wait(ep, SETTLE_MS), "1 IN");
    T("recv on the dup", recv(d, b, sizeof b, 0), "1");
    V("epoll_wait after read", ep_wait(ep, 0), "0");
    T("epoll_ctl ADD the dup", ep_add(ep, d, EPOLLOUT), "0");
    V("epoll_wait", ep_wait(ep, 0), "1 OUT");
    sync_();
}

/* A listener in poll and epoll. */
void seq_epoll_listener(void)
{
    if (SRV) {
        int l = mk_listener(AF_INET, 8);
        put_int(g_lport);
        T("O_NONBLOCK", fcntl(l, F_SETFL, O_NONBLOCK), "0");
        int ep = TF("epoll_create1", epoll_create1(0));
        T("epoll_ctl ADD listener IN", ep_add(ep, l, EPOLLIN), "0");
        V("epoll_wait idle", ep_wait(ep, 0), "0");
        V("poll idle", evs(poll1(l, ALLEV, 0)), "none");
        sync_();
        V("epoll_wait connection", ep_wait(ep, SETTLE_MS), "1 IN");
        V("poll", evs(poll1(l, ALLEV, 0)), "IN");
        int a = TF("accept", accept(l, NULL, NULL));
        (void)a;
        T("accept again", accept(l, NULL, NULL), "-1 EAGAIN");
        V("epoll_wait after accept", ep_wait(ep, 0), "0");
        sync_();
        sync_();
        V("epoll_wait two connections", ep_wait(ep, SETTLE_MS), "1 IN");
        TF("accept", accept(l, NULL, NULL));
        V("poll: the second connection", evs(poll1(l, POLLIN, SETTLE_MS)), "IN");
        TF("accept", accept(l, NULL, NULL));
        V("epoll_wait after both", ep_wait(ep, 0), "0");
        sync_();
        return;
    }
    g_lport = get_int();
    sync_();
    connect_to(AF_INET, g_lport);
    sync_();
    connect_to(AF_INET, g_lport);
    connect_to(AF_INET, g_lport);
    sync_();
    sync_();
}

/* A nonblocking send into a full socket; writable again after the peer
 * reads. */
void seq_nonblock_full(void)
{
    int fd = pair_open(AF_INET);
    if (CLI) {
        T("O_NONBLOCK", fcntl(fd, F_SETFL, O_NONBLOCK), "0");
        long total = T("send until EAGAIN", fill(fd), ">0");
        if (T("write 1 octet", write(fd, g_buf, 1), "-1 EAGAIN") > 0)
            total++;
        V("poll full", evs(poll1(fd, ALLEV, 0)), "none");
        V("poll OUT, 100 ms", evs(poll1(fd, POLLOUT, 100)), "none");
        put_int((int)total);
        sync_();
        settle("poll after the peer read everything", fd, "OUT");
        T("send again", send(fd, g_buf, 100, 0), "100");
        sync_();
        return;
    }
    set_rcvtimeo(fd, 5000);
    long total = get_int(), got = 0, n;
    while (got < total && (n = recv(fd, g_buf, sizeof g_buf, 0)) > 0)
        got += n;
    V("read everything sent", got == total ? "yes" : "no", "yes");
    T("nothing more", recv(fd, g_buf, 1, MSG_DONTWAIT), "-1 EAGAIN");
    sync_();
    sync_();
}

/* A socket registered in five epoll sets (data.u64 cookies; the second one
 * edge-triggered) before a blocking connect(): every set sees the
 * connection's readiness. */
void seq_epoll_many_before_connect(void)
{
    enum { NEP = 5 };
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
    int c = TF("socket", socket(AF_INET, SOCK_STREAM, 0));
    int ep[NEP];
    for (int i = 0; i < NEP; i++) {
        ep[i] = TF("epoll_create1", epoll_create1(0));
        struct epoll_event ev;
        memset(&ev, 0, sizeof ev);
        ev.events = EPOLLIN | EPOLLRDHUP | (i == 1 ? EPOLLET : 0);
        ev.data.u64 = 1000u + (unsigned)i;
        T("epoll_ctl ADD", epoll_ctl(ep[i], EPOLL_CTL_ADD, c, &ev), "0");
    }
    T("connect", connect(c, (struct sockaddr *)&ss, len), "0");
    sync_();
    wait_bytes(c, 1);
    for (int i = 0; i < NEP; i++) {
        struct epoll_event ev;
        memset(&ev, 0, sizeof ev);
        int n = epoll_wait(ep[i], &ev, 1, SETTLE_MS);
        char *s = sbuf();
        snprintf(s, 160, "%d %s data=%llu", n, n > 0 ? evs((int)ev.events) : "-",
                 (unsigned long long)ev.data.u64);
        char exp[64];
        snprintf(exp, sizeof exp, "1 IN data=%u", 1000u + (unsigned)i);
        V("epoll_wait set", s, exp);
    }
    T("recv", recv(c, g_buf, 16, 0), "1");
    sync_();
}
