/* pl_calls sequences: the epoll semantics that a user-space emulation of
 * epoll for SDP descriptors (registrations kept in the preload library,
 * epoll_wait answered from the library's readiness merged with the
 * kernel's) could get wrong, pinned down against Linux TCP:
 *   - epoll_ctl's errors, in the kernel's order of checks;
 *   - what a registration is keyed on: the open file description and the
 *     descriptor number it was added with (not the socket, not the number
 *     alone), so dup(), close() and a reused number behave as they do;
 *   - level-triggered reports on every wait, fairly with maxevents 1;
 *   - EPOLL_CTL_MOD of the mask and of data.u64 (all 64 bits);
 *   - edge-triggered: one report per arrival, also while unread data waits;
 *   - EPOLLONESHOT: disarmed until a MOD, which reports at once if ready;
 *   - EPOLLHUP/EPOLLERR always, EPOLLRDHUP only when asked for;
 *   - a thread blocked in epoll_wait woken by the peer's data, by the peer
 *     reading a full connection, by another thread's ADD or MOD;
 *   - an epoll descriptor inside another, and poll() of an epoll descriptor;
 *   - poll() on a registered socket agreeing with epoll_wait.
 * Registrations carry cookies in data.u64, which the steps print (never a
 * descriptor number). Expected values are Linux TCP's (6.x). */
#include "pl_calls.h"

/* epoll_ctl with a cookie in data.u64. */
static int ep_ctl(int ep, int op, int fd, unsigned events, uint64_t cookie)
{
    struct epoll_event ev;
    memset(&ev, 0, sizeof ev);
    ev.events = events;
    ev.data.u64 = cookie;
    return epoll_ctl(ep, op, fd, &ev);
}

/* "N cCOOKIE(EVENTS) ..." for n events, sorted by cookie: the order in which
 * epoll_wait lists ready registrations is not part of its contract. */
static const char *ev_list(int n, struct epoll_event *ev)
{
    char *s = sbuf();
    if (n < 0) {
        snprintf(s, 160, "-1 %s", ename(errno));
        return s;
    }
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && ev[j - 1].data.u64 > ev[j].data.u64; j--) {
            struct epoll_event t = ev[j];
            ev[j] = ev[j - 1];
            ev[j - 1] = t;
        }
    int len = snprintf(s, 160, "%d", n);
    for (int i = 0; i < n && len < 160; i++)
        len += snprintf(s + len, 160 - (size_t)len, " c%llx(%s)",
                        (unsigned long long)ev[i].data.u64, evs((int)ev[i].events));
    return s;
}

/* epoll_wait for up to 8 events, as ev_list prints them. */
static const char *epw(int ep, int ms)
{
    struct epoll_event ev[8];
    memset(ev, 0, sizeof ev);
    int n = epoll_wait(ep, ev, 8, ms);
    return ev_list(n, ev);
}

/* Two consecutive epoll_wait calls with maxevents 1 (no wait): the cookies
 * they returned, sorted ("-" for a call that returned nothing). Which set
 * shows is the point (every ready registration gets its turn), not the
 * order. */
static const char *two_calls(int ep)
{
    char c[2][24];
    for (int i = 0; i < 2; i++) {
        struct epoll_event ev;
        memset(&ev, 0, sizeof ev);
        if (epoll_wait(ep, &ev, 1, 0) == 1)
            snprintf(c[i], sizeof c[i], "c%llx", (unsigned long long)ev.data.u64);
        else
            snprintf(c[i], sizeof c[i], "-");
    }
    char *s = sbuf();
    bool swap = strcmp(c[0], c[1]) > 0;
    snprintf(s, 160, "%s %s", c[swap], c[!swap]);
    return s;
}

/* ---- epoll_ctl's errors -------------------------------------------------------- */

void seq_epoll_ctl_errors(void)
{
    int fd = pair_open(AF_INET);
    /* Steps below use closed numbers: first let the other half finish
     * pair_open (its accept and close), as in --role both it shares the
     * descriptor table. */
    sync_();
    if (SRV) {
        sync_();
        return;
    }
    int ep = TF("epoll_create1", epoll_create1(0));
    int other = TF("socket, never added", socket(AF_INET, SOCK_STREAM, 0));
    T("ADD IN|OUT", ep_ctl(ep, EPOLL_CTL_ADD, fd, EPOLLIN | EPOLLOUT, 1), "0");
    T("ADD again", ep_ctl(ep, EPOLL_CTL_ADD, fd, EPOLLIN, 1), "-1 EEXIST");
    T("MOD a socket never added", ep_ctl(ep, EPOLL_CTL_MOD, other, EPOLLIN, 2), "-1 ENOENT");
    T("DEL a socket never added", epoll_ctl(ep, EPOLL_CTL_DEL, other, NULL), "-1 ENOENT");
    /* The key is (open file, descriptor number): a dup of the registered
     * descriptor is another key, though it is the same socket. */
    int d = TF("dup of the added socket", dup(fd));
    T("MOD the dup", ep_ctl(ep, EPOLL_CTL_MOD, d, EPOLLIN, 3), "-1 ENOENT");
    T("DEL the dup", epoll_ctl(ep, EPOLL_CTL_DEL, d, NULL), "-1 ENOENT");
    T("ADD the epoll descriptor to itself", ep_ctl(ep, EPOLL_CTL_ADD, ep, EPOLLIN, 4), "-1 EINVAL");
    int gone = dup(fd);
    close(gone);
    T("ADD a closed descriptor number", ep_ctl(ep, EPOLL_CTL_ADD, gone, EPOLLIN, 5), "-1 EBADF");
    T("ADD descriptor -1", ep_ctl(ep, EPOLL_CTL_ADD, -1, EPOLLIN, 5), "-1 EBADF");
    T("ADD with a socket as the epoll descriptor", ep_ctl(fd, EPOLL_CTL_ADD, other, EPOLLIN, 6),
      "-1 EINVAL");
    T("DEL with a socket as the epoll descriptor", epoll_ctl(fd, EPOLL_CTL_DEL, other, NULL),
      "-1 EINVAL");
    T("ADD with a closed number as the epoll descriptor",
      ep_ctl(gone, EPOLL_CTL_ADD, other, EPOLLIN, 6), "-1 EBADF");
    /* The event is copied in before anything else is looked at. */
    T("ADD with event NULL", epoll_ctl(ep, EPOLL_CTL_ADD, other, NULL), "-1 EFAULT");
    T("unknown op", ep_ctl(ep, 99, fd, EPOLLIN, 7), "-1 EINVAL");
    T("MOD with EPOLLEXCLUSIVE", ep_ctl(ep, EPOLL_CTL_MOD, fd, EPOLLIN | EPOLLEXCLUSIVE, 1),
      "-1 EINVAL");
    FILE *tf = tmpfile();
    if (!tf)
        seq_abort("tmpfile");
    T("ADD a regular file", ep_ctl(ep, EPOLL_CTL_ADD, fileno(tf), EPOLLIN, 8), "-1 EPERM");
    fclose(tf);
    /* The same socket under two numbers: two registrations, two events. */
    T("ADD the dup IN|OUT", ep_ctl(ep, EPOLL_CTL_ADD, d, EPOLLIN | EPOLLOUT, 9), "0");
    V("epoll_wait: both registrations", epw(ep, 0), "2 c1(OUT) c9(OUT)");
    /* A registration of a descriptor that is then closed: the number is
     * stale, so DEL and MOD fail on the number before looking at the set. */
    T("ADD the other socket IN", ep_ctl(ep, EPOLL_CTL_ADD, other, EPOLLIN, 10), "0");
    TCLOSE("close the other socket", other, "0");
    T("MOD after close", ep_ctl(ep, EPOLL_CTL_MOD, other, EPOLLIN, 10), "-1 EBADF");
    T("DEL after close", epoll_ctl(ep, EPOLL_CTL_DEL, other, NULL), "-1 EBADF");
    V("epoll_wait: the closed socket is gone", epw(ep, 0), "2 c1(OUT) c9(OUT)");
    T("DEL the dup", epoll_ctl(ep, EPOLL_CTL_DEL, d, NULL), "0");
    V("epoll_wait: the original registration", epw(ep, 0), "1 c1(OUT)");
    sync_();
}

/* ---- level-triggered: every wait, every ready registration ------------------------ */

void seq_epoll_lt_fair(void)
{
    int a = pair_open(AF_INET);
    int b = pair_open(AF_INET);
    char buf[16];
    if (SRV) {
        sync_();
        send_all(a, "aa", 2);
        send_all(b, "bb", 2);
        sync_();
        return;
    }
    int ep = TF("epoll_create1", epoll_create1(0));
    T("ADD first IN", ep_ctl(ep, EPOLL_CTL_ADD, a, EPOLLIN, 1), "0");
    T("ADD second IN", ep_ctl(ep, EPOLL_CTL_ADD, b, EPOLLIN, 2), "0");
    V("epoll_wait idle", epw(ep, 0), "0");
    sync_();
    wait_bytes(a, 2);
    wait_bytes(b, 2);
    V("epoll_wait both readable", epw(ep, 0), "2 c1(IN) c2(IN)");
    V("epoll_wait again, nothing read", epw(ep, 0), "2 c1(IN) c2(IN)");
    /* maxevents 1: a reported level-triggered registration goes to the back
     * of the ready list, so the next call reports the other one. */
    V("maxevents 1, two calls", two_calls(ep), "c1 c2");
    V("maxevents 1, two more calls", two_calls(ep), "c1 c2");
    T("recv first", recv(a, buf, sizeof buf, 0), "2");
    V("epoll_wait after reading the first", epw(ep, 0), "1 c2(IN)");
    V("maxevents 1, two calls", two_calls(ep), "c2 c2");
    T("recv second", recv(b, buf, sizeof buf, 0), "2");
    V("epoll_wait after reading both", epw(ep, 0), "0");
    T("MOD first IN|OUT", ep_ctl(ep, EPOLL_CTL_MOD, a, EPOLLIN | EPOLLOUT, 1), "0");
    V("epoll_wait writable", epw(ep, 0), "1 c1(OUT)");
    V("epoll_wait writable again", epw(ep, 0), "1 c1(OUT)");
    sync_();
}

/* ---- EPOLL_CTL_MOD: the mask and the data ------------------------------------------ */

void seq_epoll_mod_data(void)
{
    int fd = pair_open(AF_INET);
    char buf[16];
    if (SRV) {
        sync_();
        send_all(fd, "m", 1);
        sync_();
        return;
    }
    int ep = TF("epoll_create1", epoll_create1(0));
    /* A cookie that needs all 64 bits: an emulation must not keep only
     * data.fd or data.u32. */
    T("ADD IN, data 0x1122334455667788",
      ep_ctl(ep, EPOLL_CTL_ADD, fd, EPOLLIN, 0x1122334455667788ull), "0");
    sync_();
    wait_bytes(fd, 1);
    V("epoll_wait data", epw(ep, 0), "1 c1122334455667788(IN)");
    T("MOD OUT, data 0xfedcba9876543210",
      ep_ctl(ep, EPOLL_CTL_MOD, fd, EPOLLOUT, 0xfedcba9876543210ull), "0");
    V("epoll_wait: unread data not asked for", epw(ep, 0), "1 cfedcba9876543210(OUT)");
    T("MOD IN, data 2", ep_ctl(ep, EPOLL_CTL_MOD, fd, EPOLLIN, 2), "0");
    V("epoll_wait", epw(ep, 0), "1 c2(IN)");
    T("MOD IN|OUT, data 3", ep_ctl(ep, EPOLL_CTL_MOD, fd, EPOLLIN | EPOLLOUT, 3), "0");
    V("epoll_wait", epw(ep, 0), "1 c3(IN OUT)");
    T("MOD no events, data 4", ep_ctl(ep, EPOLL_CTL_MOD, fd, 0, 4), "0");
    V("epoll_wait: nothing asked, no HUP or ERR", epw(ep, 0), "0");
    T("recv", recv(fd, buf, sizeof buf, 0), "1");
    T("MOD IN, data 5", ep_ctl(ep, EPOLL_CTL_MOD, fd, EPOLLIN, 5), "0");
    V("epoll_wait after reading", epw(ep, 0), "0");
    T("MOD OUT, data 6", ep_ctl(ep, EPOLL_CTL_MOD, fd, EPOLLOUT, 6), "0");
    V("epoll_wait", epw(ep, 0), "1 c6(OUT)");
    sync_();
}

/* ---- edge-triggered: one report per arrival ----------------------------------------- */

void seq_epoll_et_arrivals(void)
{
    int fd = pair_open(AF_INET);
    char buf[64];
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
        return;
    }
    T("O_NONBLOCK", fcntl(fd, F_SETFL, O_NONBLOCK), "0");
    int ep = TF("epoll_create1", epoll_create1(0));
    /* IN only: with OUT as well, ACKs freeing the send buffer would be
     * edges too. */
    T("ADD IN|ET", ep_ctl(ep, EPOLL_CTL_ADD, fd, EPOLLIN | EPOLLET, 1), "0");
    V("epoll_wait idle", epw(ep, 0), "0");
    sync_();
    V("epoll_wait first arrival", epw(ep, SETTLE_MS), "1 c1(IN)");
    V("epoll_wait, no new arrival, data unread", epw(ep, QUIET_MS), "0");
    sync_();
    sync_();
    wait_bytes(fd, 6);
    /* Linux TCP wakes the socket's waiters for every arrival, and each
     * wakeup is an edge, readable before or not. */
    V("epoll_wait second arrival, the first never read", epw(ep, QUIET_MS), "1 c1(IN)");
    V("epoll_wait, no new arrival", epw(ep, 0), "0");
    T("recv part", recv(fd, buf, 2, 0), "2");
    V("epoll_wait after a partial read", epw(ep, 0), "0");
    long n = T("recv the rest", recv(fd, buf, sizeof buf, 0), "4");
    V("data", str_n(buf, n), "\"etwo\"");
    T("recv until EAGAIN", recv(fd, buf, sizeof buf, 0), "-1 EAGAIN");
    V("epoll_wait after EAGAIN", epw(ep, 0), "0");
    sync_();
    sync_();
    V("epoll_wait third arrival", epw(ep, SETTLE_MS), "1 c1(IN)");
    wait_bytes(fd, 5);
    T("recv", recv(fd, buf, sizeof buf, 0), "5");
    sync_();
}

/* ---- EPOLLONESHOT: disarmed until MOD re-arms ---------------------------------------- */

void seq_epoll_oneshot_rearm(void)
{
    int fd = pair_open(AF_INET);
    char buf[16];
    if (SRV) {
        sync_();
        send_all(fd, "a", 1);
        sync_();
        sleep_ms(50); /* while the other half waits, disarmed */
        send_all(fd, "b", 1);
        sync_();
        sync_();
        send_all(fd, "c", 1);
        sync_();
        return;
    }
    int ep = TF("epoll_create1", epoll_create1(0));
    T("ADD IN|ONESHOT", ep_ctl(ep, EPOLL_CTL_ADD, fd, EPOLLIN | EPOLLONESHOT, 1), "0");
    sync_();
    V("epoll_wait first report", epw(ep, SETTLE_MS), "1 c1(IN)");
    V("epoll_wait disarmed, still readable", epw(ep, 0), "0");
    /* Disarmed is still registered. */
    T("ADD again while disarmed", ep_ctl(ep, EPOLL_CTL_ADD, fd, EPOLLIN, 1), "-1 EEXIST");
    sync_();
    V("epoll_wait disarmed, data arrives meanwhile", epw(ep, QUIET_MS), "0");
    wait_bytes(fd, 2);
    V("epoll_wait disarmed after the arrival", epw(ep, 0), "0");
    T("MOD re-arm OUT|ONESHOT", ep_ctl(ep, EPOLL_CTL_MOD, fd, EPOLLOUT | EPOLLONESHOT, 2), "0");
    V("epoll_wait re-armed", epw(ep, 0), "1 c2(OUT)");
    V("epoll_wait disarmed again", epw(ep, 0), "0");
    /* MOD looks at the readiness at once, edge-triggered or not. */
    T("MOD re-arm IN|ONESHOT|ET, data unread",
      ep_ctl(ep, EPOLL_CTL_MOD, fd, EPOLLIN | EPOLLONESHOT | EPOLLET, 3), "0");
    V("epoll_wait re-armed", epw(ep, 0), "1 c3(IN)");
    V("epoll_wait disarmed again", epw(ep, 0), "0");
    T("recv", recv(fd, buf, sizeof buf, 0), "2");
    T("MOD re-arm IN|ONESHOT, nothing to read",
      ep_ctl(ep, EPOLL_CTL_MOD, fd, EPOLLIN | EPOLLONESHOT, 4), "0");
    V("epoll_wait re-armed, nothing to read", epw(ep, 0), "0");
    sync_();
    sync_();
    V("epoll_wait armed, new data", epw(ep, SETTLE_MS), "1 c4(IN)");
    V("epoll_wait disarmed", epw(ep, 0), "0");
    T("DEL disarmed", epoll_ctl(ep, EPOLL_CTL_DEL, fd, NULL), "0");
    sync_();
}

/* ---- close() of a registered descriptor --------------------------------------------- */

/* The only descriptor of the socket: the registration goes with it. A
 * registered number that dup2() gives to another socket (closing the
 * registered one) is not registered for the new socket. (dup2 rather than
 * close and reopen: in --role both the other half shares the descriptor
 * table and could take a number closed here.) */
void seq_epoll_close_last(void)
{
    int fd = pair_open(AF_INET);
    if (SRV) {
        sync_();
        send_all(fd, "x", 1);
        sync_();
        pair_open(AF_INET);
        int h = pair_open(AF_INET);
        send_all(h, "y", 1);
        sync_();
        sync_();
        return;
    }
    int ep = TF("epoll_create1", epoll_create1(0));
    T("ADD IN", ep_ctl(ep, EPOLL_CTL_ADD, fd, EPOLLIN, 1), "0");
    sync_();
    wait_bytes(fd, 1);
    V("epoll_wait data", epw(ep, 0), "1 c1(IN)");
    TCLOSE("close, data unread", fd, "0");
    V("epoll_wait after close", epw(ep, 0), "0");
    T("DEL the closed number", epoll_ctl(ep, EPOLL_CTL_DEL, fd, NULL), "-1 EBADF");
    sync_();
    int g = pair_open(AF_INET);
    int h = pair_open(AF_INET);
    T("ADD another connection IN", ep_ctl(ep, EPOLL_CTL_ADD, g, EPOLLIN, 2), "0");
    sync_();
    wait_bytes(h, 1);
    V("epoll_wait: the registered one is idle", epw(ep, 0), "0");
    T("dup2 a readable socket onto the registered number", dup2(h, g), "fd");
    xclose(h);
    V("epoll_wait: the new socket under that number is not registered", epw(ep, 0), "0");
    T("DEL that number", epoll_ctl(ep, EPOLL_CTL_DEL, g, NULL), "-1 ENOENT");
    T("ADD that number", ep_ctl(ep, EPOLL_CTL_ADD, g, EPOLLIN, 3), "0");
    V("epoll_wait", epw(ep, 0), "1 c3(IN)");
    sync_();
}

/* A dup still open: the registration (of the open file) outlives the
 * descriptor it was added with and keeps its data, but can no longer be
 * changed or removed through either number. */
void seq_epoll_close_dup(void)
{
    int fd = pair_open(AF_INET);
    char buf[16];
    sync_(); /* as in epoll_ctl_errors: a closed number is used */
    if (SRV) {
        sync_();
        send_all(fd, "x", 1);
        sync_();
        sync_();
        send_all(fd, "z", 1);
        sync_();
        return;
    }
    int ep = TF("epoll_create1", epoll_create1(0));
    T("ADD IN", ep_ctl(ep, EPOLL_CTL_ADD, fd, EPOLLIN, 1), "0");
    int d = TF("dup", dup(fd));
    int num = fd;
    TCLOSE("close the registered descriptor", fd, "0");
    V("epoll_wait idle", epw(ep, 0), "0");
    sync_();
    V("epoll_wait data: the registration of the closed number", epw(ep, SETTLE_MS), "1 c1(IN)");
    T("MOD the closed number", ep_ctl(ep, EPOLL_CTL_MOD, num, EPOLLIN, 2), "-1 EBADF");
    T("DEL the closed number", epoll_ctl(ep, EPOLL_CTL_DEL, num, NULL), "-1 EBADF");
    T("DEL the dup, never added", epoll_ctl(ep, EPOLL_CTL_DEL, d, NULL), "-1 ENOENT");
    T("ADD the dup", ep_ctl(ep, EPOLL_CTL_ADD, d, EPOLLIN, 2), "0");
    V("epoll_wait: both registrations", epw(ep, 0), "2 c1(IN) c2(IN)");
    T("DEL the dup", epoll_ctl(ep, EPOLL_CTL_DEL, d, NULL), "0");
    V("epoll_wait: the first one still", epw(ep, 0), "1 c1(IN)");
    T("recv on the dup", recv(d, buf, sizeof buf, 0), "1");
    V("epoll_wait after reading", epw(ep, 0), "0");
    sync_();
    sync_();
    wait_bytes(d, 1);
    V("epoll_wait new data", epw(ep, 0), "1 c1(IN)");
    TCLOSE("close the dup, the last descriptor", d, "0");
    V("epoll_wait after the last close", epw(ep, 0), "0");
    sync_();
}

/* ---- HUP, ERR, RDHUP ---------------------------------------------------------------- */

/* The socket in five sets asking for different events: RDHUP only when
 * asked for, HUP always (even with no event asked for at all). */
void seq_epoll_hup_rdhup(void)
{
    int fd = pair_open(AF_INET);
    if (SRV) {
        sync_();
        T("shutdown SHUT_WR", shutdown(fd, SHUT_WR), "0");
        sync_();
        return;
    }
    static const unsigned mask[5] = {EPOLLIN, EPOLLIN | EPOLLRDHUP, 0, EPOLLOUT, EPOLLRDHUP};
    static const char *const name[5] = {"IN", "IN|RDHUP", "nothing", "OUT", "RDHUP"};
    int ep[5];
    char d[96];
    for (int i = 0; i < 5; i++) {
        ep[i] = TF("epoll_create1", epoll_create1(0));
        snprintf(d, sizeof d, "ADD %s", name[i]);
        T(d, ep_ctl(ep[i], EPOLL_CTL_ADD, fd, mask[i], (uint64_t)i + 1), "0");
    }
    static const char *const idle[5] = {"0", "0", "0", "1 c4(OUT)", "0"};
    static const char *const fin[5] = {"1 c1(IN)", "1 c2(IN RDHUP)", "0", "1 c4(OUT)",
                                       "1 c5(RDHUP)"};
    static const char *const hup[5] = {"1 c1(IN HUP)", "1 c2(IN HUP RDHUP)", "1 c3(HUP)",
                                       "1 c4(OUT HUP)", "1 c5(HUP RDHUP)"};
    for (int i = 0; i < 5; i++) {
        snprintf(d, sizeof d, "epoll_wait %s, idle", name[i]);
        V(d, epw(ep[i], 0), idle[i]);
    }
    sync_();
    settle("poll after the peer's shutdown", fd, "IN OUT RDHUP");
    for (int i = 0; i < 5; i++) {
        snprintf(d, sizeof d, "epoll_wait %s, peer shut down", name[i]);
        V(d, epw(ep[i], 0), fin[i]);
    }
    T("shutdown SHUT_WR", shutdown(fd, SHUT_WR), "0");
    settle("poll, both directions shut", fd, "IN OUT HUP RDHUP");
    for (int i = 0; i < 5; i++) {
        snprintf(d, sizeof d, "epoll_wait %s, both shut", name[i]);
        V(d, epw(ep[i], 0), hup[i]);
    }
    sync_();
}

/* A reset (the peer closed with data unread): ERR and HUP without being
 * asked for; ERR goes once SO_ERROR took the error. */
void seq_epoll_err(void)
{
    int fd = pair_open(AF_INET);
    if (SRV) {
        sync_();
        wait_bytes(fd, 6);
        TCLOSE("close with data unread (reset)", fd, "0");
        sync_();
        sync_();
        return;
    }
    static const unsigned mask[3] = {EPOLLIN, 0, EPOLLOUT};
    static const char *const name[3] = {"IN", "nothing", "OUT"};
    int ep[3];
    char d[96];
    for (int i = 0; i < 3; i++) {
        ep[i] = TF("epoll_create1", epoll_create1(0));
        snprintf(d, sizeof d, "ADD %s", name[i]);
        T(d, ep_ctl(ep[i], EPOLL_CTL_ADD, fd, mask[i], (uint64_t)i + 1), "0");
    }
    send_all(fd, "unread", 6);
    sync_();
    sync_();
    settle("poll after the reset", fd, "IN OUT ERR HUP RDHUP");
    static const char *const rst[3] = {"1 c1(IN ERR HUP)", "1 c2(ERR HUP)", "1 c3(OUT ERR HUP)"};
    for (int i = 0; i < 3; i++) {
        snprintf(d, sizeof d, "epoll_wait %s, reset", name[i]);
        V(d, epw(ep[i], 0), rst[i]);
    }
    V("SO_ERROR", so_error(fd), "ECONNRESET");
    static const char *const taken[3] = {"1 c1(IN HUP)", "1 c2(HUP)", "1 c3(OUT HUP)"};
    for (int i = 0; i < 3; i++) {
        snprintf(d, sizeof d, "epoll_wait %s, error taken", name[i]);
        V(d, epw(ep[i], 0), taken[i]);
    }
    sync_();
}

/* ---- a thread blocked in epoll_wait --------------------------------------------------- */

/* A helper thread that waits once in epoll_wait (maxevents 1). It records
 * nothing itself (the step records belong to the half's thread). */
struct waiter {
    pthread_t th;
    int ep, ms;
    atomic_int started;
    int n, err;
    struct epoll_event ev;
    long took;
};

static void *waiter_main(void *arg)
{
    struct waiter *w = arg;
    memset(&w->ev, 0, sizeof w->ev);
    long t0 = now_ms();
    atomic_store(&w->started, 1);
    w->n = epoll_wait(w->ep, &w->ev, 1, w->ms);
    w->err = errno;
    w->took = now_ms() - t0;
    return NULL;
}

/* Starts the waiter and gives it 100 ms to be asleep in epoll_wait. */
static void waiter_start(struct waiter *w, int ep, int ms)
{
    memset(w, 0, sizeof *w);
    w->ep = ep;
    w->ms = ms;
    if (pthread_create(&w->th, NULL, waiter_main, w) != 0)
        seq_abort("pthread_create");
    while (!atomic_load(&w->started))
        sleep_ms(1);
    sleep_ms(100);
}

/* Joins it: what its epoll_wait returned, as epw prints it. */
static const char *waiter_join(struct waiter *w)
{
    pthread_join(w->th, NULL);
    errno = w->err;
    return ev_list(w->n, &w->ev);
}

void seq_epoll_thread_wake(void)
{
    int fd = pair_open(AF_INET);
    char buf[16];
    if (SRV) {
        sync_();
        send_all(fd, "w", 1);
        /* Read everything the other half sent, which makes it writable. */
        set_rcvtimeo(fd, 5000);
        long total = get_int(), got = 0, n;
        sync_();
        while (got < total && (n = recv(fd, g_buf, sizeof g_buf, 0)) > 0)
            got += n;
        V("read everything sent", got == total ? "yes" : "no", "yes");
        sync_();
        send_all(fd, "r", 1);
        sync_();
        return;
    }
    struct waiter w;
    int ep = TF("epoll_create1", epoll_create1(0));
    T("ADD IN", ep_ctl(ep, EPOLL_CTL_ADD, fd, EPOLLIN, 1), "0");
    /* The peer's data wakes a thread asleep in epoll_wait; this thread
     * meanwhile only waits for the peer. */
    waiter_start(&w, ep, 3000);
    sync_();
    V("thread in epoll_wait 3 s, the peer sends", waiter_join(&w), "1 c1(IN)");
    V("it woke", elapsed(w.took, 50, 2000), "in 50-2000 ms");
    T("recv", recv(fd, buf, sizeof buf, 0), "1");
    /* The peer reading a full connection wakes a thread waiting for OUT. */
    T("O_NONBLOCK", fcntl(fd, F_SETFL, O_NONBLOCK), "0");
    long total = T("send until EAGAIN", fill(fd), ">0");
    put_int((int)total);
    T("MOD OUT", ep_ctl(ep, EPOLL_CTL_MOD, fd, EPOLLOUT, 2), "0");
    V("epoll_wait full", epw(ep, 0), "0");
    waiter_start(&w, ep, 3000);
    sync_();
    V("thread in epoll_wait 3 s, the peer reads everything", waiter_join(&w), "1 c2(OUT)");
    V("it woke", elapsed(w.took, 50, 2000), "in 50-2000 ms");
    sync_();
    wait_bytes(fd, 1);
    /* Another thread's ADD of a ready socket wakes the waiter. */
    T("DEL", epoll_ctl(ep, EPOLL_CTL_DEL, fd, NULL), "0");
    waiter_start(&w, ep, 3000);
    T("ADD IN of a readable socket while a thread waits", ep_ctl(ep, EPOLL_CTL_ADD, fd, EPOLLIN, 3),
      "0");
    V("the waiting thread", waiter_join(&w), "1 c3(IN)");
    V("it woke", elapsed(w.took, 50, 2000), "in 50-2000 ms");
    /* Another thread's MOD re-arming a one-shot registration wakes it. */
    T("MOD IN|ONESHOT", ep_ctl(ep, EPOLL_CTL_MOD, fd, EPOLLIN | EPOLLONESHOT, 4), "0");
    V("epoll_wait, one shot", epw(ep, 0), "1 c4(IN)");
    waiter_start(&w, ep, 3000);
    T("MOD re-arm while a thread waits", ep_ctl(ep, EPOLL_CTL_MOD, fd, EPOLLIN | EPOLLONESHOT, 5),
      "0");
    V("the waiting thread", waiter_join(&w), "1 c5(IN)");
    V("it woke", elapsed(w.took, 50, 2000), "in 50-2000 ms");
    sync_();
}

/* ---- nested epoll descriptors --------------------------------------------------------- */

void seq_epoll_nested_wake(void)
{
    int fd = pair_open(AF_INET);
    char buf[16];
    if (SRV) {
        sync_();
        sleep_ms(100); /* the other half is asleep on the outer set by now */
        send_all(fd, "n", 1);
        sync_();
        sync_();
        send_all(fd, "m", 1);
        sync_();
        return;
    }
    int inner = TF("epoll_create1 inner", epoll_create1(0));
    int outer = TF("epoll_create1 outer", epoll_create1(0));
    T("inner ADD socket IN", ep_ctl(inner, EPOLL_CTL_ADD, fd, EPOLLIN, 1), "0");
    T("outer ADD inner IN", ep_ctl(outer, EPOLL_CTL_ADD, inner, EPOLLIN, 2), "0");
    V("outer idle", epw(outer, 0), "0");
    V("poll on inner idle", evs(poll1(inner, ALLEV, 0)), "none");
    sync_();
    long t0 = now_ms();
    V("outer, asleep until the peer sends", epw(outer, 3000), "1 c2(IN)");
    V("it woke", elapsed(now_ms() - t0, 50, 2000), "in 50-2000 ms");
    V("inner", epw(inner, 0), "1 c1(IN)");
    V("poll on inner", evs(poll1(inner, ALLEV, 0)), "IN");
    V("outer again, nothing read", epw(outer, 0), "1 c2(IN)");
    T("recv", recv(fd, buf, sizeof buf, 0), "1");
    V("outer after read", epw(outer, 0), "0");
    V("poll on inner after read", evs(poll1(inner, ALLEV, 0)), "none");
    T("inner DEL socket", epoll_ctl(inner, EPOLL_CTL_DEL, fd, NULL), "0");
    sync_();
    sync_();
    wait_bytes(fd, 1);
    V("outer, the socket readable but not in inner", epw(outer, 0), "0");
    /* Adding a ready socket to the inner set makes the outer see it. */
    T("inner ADD the readable socket", ep_ctl(inner, EPOLL_CTL_ADD, fd, EPOLLIN, 3), "0");
    V("outer", epw(outer, 0), "1 c2(IN)");
    V("inner", epw(inner, 0), "1 c3(IN)");
    sync_();
}

/* ---- poll() on a registered socket ----------------------------------------------------- */

/* "POLL / EPOLL": poll()'s revents and the events of a level-triggered
 * registration asking for the same events, at the same moment. */
static const char *both(int fd, int ep)
{
    struct epoll_event ev;
    memset(&ev, 0, sizeof ev);
    const char *p = evs(poll1(fd, ALLEV, 0));
    int n = epoll_wait(ep, &ev, 1, 0);
    char *s = sbuf();
    snprintf(s, 160, "%s / %s", p, n < 0 ? "-1" : n == 0 ? "none" : evs((int)ev.events));
    return s;
}

void seq_epoll_poll_agree(void)
{
    int fd = pair_open(AF_INET);
    char buf[16];
    if (SRV) {
        sync_();
        send_all(fd, "p", 1);
        sync_();
        sync_();
        T("shutdown SHUT_WR", shutdown(fd, SHUT_WR), "0");
        sync_();
        return;
    }
    int lt = TF("epoll_create1", epoll_create1(0));
    int et = TF("epoll_create1 (edge-triggered)", epoll_create1(0));
    T("ADD IN|PRI|OUT|RDHUP", ep_ctl(lt, EPOLL_CTL_ADD, fd, ALLEV, 1), "0");
    T("ADD IN|PRI|OUT|RDHUP|ET", ep_ctl(et, EPOLL_CTL_ADD, fd, ALLEV | EPOLLET, 2), "0");
    V("idle: poll / epoll", both(fd, lt), "OUT / OUT");
    V("edge-triggered", epw(et, 0), "1 c2(OUT)");
    V("poll after the edge was reported", evs(poll1(fd, ALLEV, 0)), "OUT");
    sync_();
    wait_bytes(fd, 1);
    V("data: poll / epoll", both(fd, lt), "IN OUT / IN OUT");
    V("edge-triggered", epw(et, 0), "1 c2(IN OUT)");
    V("edge-triggered again", epw(et, 0), "0");
    /* Neither an epoll_wait nor a poll takes the readiness away. */
    V("data: poll / epoll again", both(fd, lt), "IN OUT / IN OUT");
    T("recv", recv(fd, buf, sizeof buf, 0), "1");
    V("after read: poll / epoll", both(fd, lt), "OUT / OUT");
    sync_();
    sync_();
    settle("poll after the peer's shutdown", fd, "IN OUT RDHUP");
    V("peer shut down: poll / epoll", both(fd, lt), "IN OUT RDHUP / IN OUT RDHUP");
    T("shutdown SHUT_WR", shutdown(fd, SHUT_WR), "0");
    settle("poll, both directions shut", fd, "IN OUT HUP RDHUP");
    V("both shut: poll / epoll", both(fd, lt), "IN OUT HUP RDHUP / IN OUT HUP RDHUP");
    sync_();
}
