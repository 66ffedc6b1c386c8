/* pl_calls sequences for the waits themselves (the preload library runs the
 * protocol inside poll, select and epoll_wait while SDP sockets exist):
 * timeouts are kept, select writes back the time left, a wait wakes when
 * data arrives in the middle of it, bad arguments fail as they do on TCP,
 * and a signal ends each wait with EINTR. Expected values are Linux TCP's. */
#include "pl_calls.h"

/* The wait kinds, each waiting for POLLIN on fd for at most ms. */
enum { W_POLL, W_PPOLL, W_SELECT, W_PSELECT, W_EPOLL, W_EPOLL_PWAIT, W_EPOLL_PWAIT2, W_N };
static const char *const wname[W_N] = {"poll",       "ppoll",       "select",      "pselect",
                                       "epoll_wait", "epoll_pwait", "epoll_pwait2"};

/* "n=N" and "IN" or "none", or "-1 ERRNO". */
static const char *wait_in(int kind, int fd, int ep, int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
    struct pollfd p = {.fd = fd, .events = POLLIN};
    struct epoll_event ev;
    fd_set r;
    FD_ZERO(&r);
    FD_SET(fd, &r);
    memset(&ev, 0, sizeof ev);
    sigset_t none;
    sigemptyset(&none);
    int n = -1, in = 0;
    switch (kind) {
    case W_POLL:
        n = poll(&p, 1, ms);
        in = (p.revents & POLLIN) != 0;
        break;
    case W_PPOLL:
        n = ppoll(&p, 1, &ts, NULL);
        in = (p.revents & POLLIN) != 0;
        break;
    case W_SELECT:
        n = select(fd + 1, &r, NULL, NULL, &tv);
        in = FD_ISSET(fd, &r);
        break;
    case W_PSELECT:
        n = pselect(fd + 1, &r, NULL, NULL, &ts, &none);
        in = FD_ISSET(fd, &r);
        break;
    case W_EPOLL:
        n = epoll_wait(ep, &ev, 1, ms);
        in = (ev.events & EPOLLIN) != 0;
        break;
    case W_EPOLL_PWAIT:
        n = epoll_pwait(ep, &ev, 1, ms, &none);
        in = (ev.events & EPOLLIN) != 0;
        break;
    case W_EPOLL_PWAIT2:
        n = epoll_pwait2(ep, &ev, 1, &ts, NULL);
        in = (ev.events & EPOLLIN) != 0;
        break;
    }
    char *s = sbuf();
    if (n < 0)
        snprintf(s, 160, "-1 %s", ename(errno));
    else
        snprintf(s, 160, "n=%d %s", n, in ? "IN" : "none");
    return s;
}

/* Every wait on an idle SDP connection times out on time; select writes
 * back the time left (none), a longer select interrupted by data what was
 * left. */
void seq_wait_timeouts(void)
{
    int fd = pair_open(AF_INET);
    if (SRV) {
        sync_();
        sleep_ms(300);
        send_all(fd, "x", 1);
        sync_();
        return;
    }
    int ep = TF("epoll_create1", epoll_create1(0));
    T("epoll_ctl ADD IN", ep_add(ep, fd, EPOLLIN), "0");
    char d[96];
    for (int k = 0; k < W_N; k++) {
        long t0 = now_ms();
        snprintf(d, sizeof d, "%s idle 100 ms", wname[k]);
        V(d, wait_in(k, fd, ep, 100), "n=0 none");
        snprintf(d, sizeof d, "%s took", wname[k]);
        V(d, elapsed(now_ms() - t0, 95, 1000), "in 95-1000 ms");
    }
    struct timeval tv = {0, 50000};
    T("select 50 ms, nothing", select(0, NULL, NULL, NULL, &tv), "0");
    V("select wrote back", tv.tv_sec == 0 && tv.tv_usec == 0 ? "0.000000" : "left", "0.000000");
    sync_();
    fd_set r;
    FD_ZERO(&r);
    FD_SET(fd, &r);
    tv = (struct timeval){5, 0};
    T("select 5 s, data after 300 ms", select(fd + 1, &r, NULL, NULL, &tv), "1");
    long left_ms = tv.tv_sec * 1000L + tv.tv_usec / 1000;
    V("select time left", elapsed(5000 - left_ms, 250, 3000), "in 250-3000 ms");
    char b[4];
    T("recv", recv(fd, b, sizeof b, 0), "1");
    sync_();
}

/* A wait asleep when the data arrives wakes for it: each kind in turn, the
 * server sending 150 ms after the client started waiting. */
void seq_wait_wakes(void)
{
    int fd = pair_open(AF_INET);
    if (SRV) {
        for (int k = 0; k < W_N; k++) {
            sync_();
            sleep_ms(150);
            send_all(fd, "w", 1);
            sync_();
        }
        return;
    }
    int ep = TF("epoll_create1", epoll_create1(0));
    T("epoll_ctl ADD IN", ep_add(ep, fd, EPOLLIN), "0");
    char d[96], b[4];
    for (int k = 0; k < W_N; k++) {
        sync_();
        long t0 = now_ms();
        snprintf(d, sizeof d, "%s, data after 150 ms", wname[k]);
        V(d, wait_in(k, fd, ep, SETTLE_MS), "n=1 IN");
        snprintf(d, sizeof d, "%s woke", wname[k]);
        V(d, elapsed(now_ms() - t0, 100, 2000), "in 100-2000 ms");
        T("recv", recv(fd, b, sizeof b, 0), "1");
        sync_();
    }
}

/* Bad arguments: the errors of the kernel's calls. */
void seq_wait_errors(void)
{
    int fd = pair_open(AF_INET);
    if (SRV) {
        sync_();
        return;
    }
    int ep = TF("epoll_create1", epoll_create1(0));
    struct epoll_event ev;
    T("epoll_wait maxevents 0", epoll_wait(ep, &ev, 0, 10), "-1 EINVAL");
    T("epoll_wait on a socket", epoll_wait(fd, &ev, 1, 10), "-1 EINVAL");
    T("epoll_wait on a closed fd", epoll_wait(1000, &ev, 1, 10), "-1 EBADF");
    /* A number inside the descriptor table that is not open (select
     * ignores numbers beyond the table). High, so that no other thread's
     * new descriptor takes it (a run got select's 1 for EBADF so). */
    int gone = dup2(fd, 900);
    close(gone);
    struct pollfd p[2] = {{.fd = fd, .events = POLLOUT}, {.fd = gone, .events = POLLIN}};
    T("poll with a closed fd", poll(p, 2, 10), "2");
    V("its revents", evs(p[1].revents), "NVAL");
    fd_set r;
    FD_ZERO(&r);
    FD_SET(gone, &r);
    struct timeval tv = {0, 10000};
    T("select with a closed fd", select(gone + 1, &r, NULL, NULL, &tv), "-1 EBADF");
    T("select nfds -1", select(-1, NULL, NULL, NULL, &tv), "-1 EINVAL");
    struct timespec bad = {0, 1000000000L};
    T("ppoll bad timespec", ppoll(p, 1, &bad, NULL), "-1 EINVAL");
    sync_();
}

/* A signal ends every wait with EINTR, SA_RESTART or not (signal(7): these
 * calls are never restarted). */
void seq_wait_eintr(void)
{
    int fd = pair_open(AF_INET);
    if (SRV) {
        sync_();
        return;
    }
    int ep = TF("epoll_create1", epoll_create1(0));
    T("epoll_ctl ADD IN", ep_add(ep, fd, EPOLLIN), "0");
    char d[96];
    for (int restart = 0; restart < 2; restart++) {
        set_alrm(restart);
        for (int k = 0; k < W_N; k++) {
            g_sigalrm = 0;
            alarm_ms(100);
            long t0 = now_ms();
            snprintf(d, sizeof d, "%s, SIGALRM after 100 ms%s", wname[k],
                     restart ? ", SA_RESTART" : "");
            V(d, wait_in(k, fd, ep, 2000), "-1 EINTR");
            snprintf(d, sizeof d, "%s interrupted", wname[k]);
            V(d, elapsed(now_ms() - t0, 50, 1500), "in 50-1500 ms");
            alarm_ms(0);
        }
    }
    set_alrm(true);
    sync_();
}
