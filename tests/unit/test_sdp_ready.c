/* Readiness mirror (src/io/sdp_ready.c): for every state the mirror can show
 * and every transition between them, what poll(), level-triggered epoll and
 * edge-triggered epoll report on the application's fd; the cost of each
 * transition in system calls and time. */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "io/sdp_ready.h"
#include "testutil.h"

#define ALL (POLLIN | POLLOUT | POLLPRI | POLLERR | POLLHUP | POLLRDHUP)

static unsigned poll_bits(int fd)
{
    struct pollfd p = {.fd = fd, .events = POLLIN | POLLOUT | POLLPRI | POLLRDHUP};
    assert_true(poll(&p, 1, 0) >= 0);
    return (unsigned)p.revents & ALL;
}

static unsigned ep_bits(uint32_t e)
{
    unsigned b = 0;
    if (e & EPOLLIN)
        b |= POLLIN;
    if (e & EPOLLOUT)
        b |= POLLOUT;
    if (e & EPOLLPRI)
        b |= POLLPRI;
    if (e & EPOLLERR)
        b |= POLLERR;
    if (e & EPOLLHUP)
        b |= POLLHUP;
    if (e & EPOLLRDHUP)
        b |= POLLRDHUP;
    return b;
}

/* Bits an epoll fd reports for its one member now (0: no event). */
static unsigned ep_wait(int ep)
{
    struct epoll_event ev;
    int n = epoll_wait(ep, &ev, 1, 0);
    assert_true(n >= 0);
    return n ? ep_bits(ev.events) : 0;
}

typedef struct fix {
    uw__sdp_ready r;
    int lt, et;
} fix;

static void fix_init(fix *f)
{
    assert_int_equal(uw__sdp_ready_init(&f->r, false), 0);
    f->lt = epoll_create1(EPOLL_CLOEXEC);
    f->et = epoll_create1(EPOLL_CLOEXEC);
    assert_true(f->lt >= 0 && f->et >= 0);
    struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT | EPOLLPRI | EPOLLRDHUP};
    assert_int_equal(epoll_ctl(f->lt, EPOLL_CTL_ADD, f->r.a, &ev), 0);
    ev.events |= EPOLLET;
    assert_int_equal(epoll_ctl(f->et, EPOLL_CTL_ADD, f->r.a, &ev), 0);
}

static void fix_fini(fix *f)
{
    close(f->lt);
    close(f->et);
    uw__sdp_ready_fini(&f->r);
}

static void check_state(fix *f, unsigned want)
{
    assert_int_equal(uw__sdp_ready_shown(&f->r), want);
    assert_int_equal(poll_bits(f->r.a), want);
    assert_int_equal(ep_wait(f->lt), want);
    /* Level-triggered: reported again. */
    assert_int_equal(ep_wait(f->lt), want);
}

/* The reversible states (PRI implies IN: an OOB octet is data to poll). */
static const unsigned k_states[] = {
    0, POLLIN, POLLOUT, POLLIN | POLLOUT, POLLIN | POLLPRI, POLLIN | POLLOUT | POLLPRI,
};
#define NSTATES (sizeof(k_states) / sizeof(k_states[0]))

static void test_fresh(void **state)
{
    (void)state;
    fix f;
    fix_init(&f);
    check_state(&f, POLLOUT);
    /* A keeps no close-on-exec unless asked; B always has it. */
    assert_int_equal(fcntl(f.r.a, F_GETFD) & FD_CLOEXEC, 0);
    assert_int_not_equal(fcntl(f.r.b, F_GETFD) & FD_CLOEXEC, 0);
    fix_fini(&f);
    uw__sdp_ready r;
    assert_int_equal(uw__sdp_ready_init(&r, true), 0);
    assert_int_not_equal(fcntl(r.a, F_GETFD) & FD_CLOEXEC, 0);
    uw__sdp_ready_fini(&r);
}

/* Every reversible state, reached from every other: poll, LT epoll, and an
 * ET event carrying each bit that turned on. */
static void test_transitions(void **state)
{
    (void)state;
    for (size_t i = 0; i < NSTATES; i++) {
        for (size_t j = 0; j < NSTATES; j++) {
            fix f;
            fix_init(&f);
            unsigned from = k_states[i], to = k_states[j];
            assert_int_equal(uw__sdp_ready_set(&f.r, from), from);
            check_state(&f, from);
            while (ep_wait(f.et)) {
            }
            unsigned long sc = f.r.syscalls;
            assert_int_equal(uw__sdp_ready_set(&f.r, to), to);
            if (from == to)
                assert_int_equal(f.r.syscalls, sc); /* cached: no system call */
            check_state(&f, to);
            unsigned on = to & ~from;
            unsigned et = ep_wait(f.et);
            if (on) {
                /* An edge for what turned on; the event shows the new state. */
                assert_int_equal(et & on, on);
                assert_int_equal(et, to);
            } else if (et) {
                assert_int_equal(et, to); /* a spurious edge would at least be current */
            }
            assert_int_equal(ep_wait(f.et), 0); /* edge-triggered: once */
            /* And back: the original state again. */
            assert_int_equal(uw__sdp_ready_set(&f.r, from), from);
            check_state(&f, from);
            fix_fini(&f);
        }
    }
}

/* The one-way states, from every reversible one. */
static void test_terminal(void **state)
{
    (void)state;
    static const struct {
        unsigned set, want;
    } term[] = {
        {POLLIN | POLLOUT | POLLRDHUP, POLLIN | POLLOUT | POLLRDHUP}, /* peer's DisConn */
        {POLLIN | POLLRDHUP, POLLIN | POLLRDHUP},                     /* ... send buffer full */
        {POLLRDHUP, POLLIN | POLLRDHUP},                              /* RDHUP implies IN */
        {POLLHUP, POLLIN | POLLOUT | POLLHUP | POLLRDHUP},            /* closed both ways */
        {POLLERR, POLLIN | POLLOUT | POLLERR | POLLHUP | POLLRDHUP},  /* reset */
    };
    for (size_t i = 0; i < NSTATES; i++) {
        for (size_t t = 0; t < sizeof(term) / sizeof(term[0]); t++) {
            fix f;
            fix_init(&f);
            unsigned from = k_states[i];
            uw__sdp_ready_set(&f.r, from);
            while (ep_wait(f.et)) {
            }
            assert_int_equal(uw__sdp_ready_set(&f.r, term[t].set), term[t].want);
            check_state(&f, term[t].want);
            unsigned on = term[t].want & ~from;
            unsigned et = ep_wait(f.et);
            assert_int_equal(et & on, on);
            /* One-way: asking for less keeps RDHUP/HUP. */
            unsigned after = uw__sdp_ready_set(&f.r, POLLOUT);
            assert_int_equal(after & (term[t].want & (POLLRDHUP | POLLHUP)),
                             term[t].want & (POLLRDHUP | POLLHUP));
            assert_int_equal(poll_bits(f.r.a), after);
            if (term[t].set == POLLERR) {
                /* The error is taken: POLLERR goes, the hang-up stays. */
                assert_int_equal(after, POLLIN | POLLOUT | POLLHUP | POLLRDHUP);
                assert_int_equal(uw__sdp_ready_set(&f.r, POLLERR), after); /* no way back */
            }
            /* From RDHUP on to HUP and ERR. */
            if (term[t].set & POLLRDHUP) {
                assert_int_equal(uw__sdp_ready_set(&f.r, POLLHUP),
                                 POLLIN | POLLOUT | POLLHUP | POLLRDHUP);
                check_state(&f, POLLIN | POLLOUT | POLLHUP | POLLRDHUP);
            }
            fix_fini(&f);
        }
    }
    /* Urgent data pending at the peer's DisConn stays until taken; it
     * cannot come back once B stopped writing. Then ERR. */
    fix f;
    fix_init(&f);
    uw__sdp_ready_set(&f.r, POLLIN | POLLPRI);
    assert_int_equal(uw__sdp_ready_set(&f.r, POLLIN | POLLPRI | POLLRDHUP),
                     POLLIN | POLLRDHUP | POLLPRI);
    check_state(&f, POLLIN | POLLRDHUP | POLLPRI);
    assert_int_equal(uw__sdp_ready_set(&f.r, POLLIN | POLLRDHUP), POLLIN | POLLRDHUP);
    check_state(&f, POLLIN | POLLRDHUP);
    assert_int_equal(uw__sdp_ready_set(&f.r, POLLIN | POLLPRI | POLLRDHUP), POLLIN | POLLRDHUP);
    assert_int_equal(uw__sdp_ready_set(&f.r, POLLERR),
                     POLLIN | POLLOUT | POLLERR | POLLHUP | POLLRDHUP);
    check_state(&f, POLLIN | POLLOUT | POLLERR | POLLHUP | POLLRDHUP);
    fix_fini(&f);
}

/* A thread sleeping in poll() or epoll_wait() on A wakes on each transition
 * to readable or writable. */
static void test_wakes_sleeper(void **state)
{
    (void)state;
    fix f;
    fix_init(&f);
    uw__sdp_ready_set(&f.r, 0);
    while (ep_wait(f.et)) {
    }
    for (int round = 0; round < 100; round++) {
        uw__sdp_ready_set(&f.r, POLLIN);
        struct epoll_event ev;
        assert_int_equal(epoll_wait(f.et, &ev, 1, 1000), 1);
        assert_int_equal(ep_bits(ev.events), POLLIN);
        uw__sdp_ready_set(&f.r, 0);
        uw__sdp_ready_set(&f.r, POLLOUT);
        assert_int_equal(epoll_wait(f.et, &ev, 1, 1000), 1);
        assert_int_equal(ep_bits(ev.events), POLLOUT);
        uw__sdp_ready_set(&f.r, 0);
    }
    fix_fini(&f);
}

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

/* Cost per transition, in system calls and nanoseconds (printed; the
 * numbers in docs/sdp.md come from here). */
static void test_cost(void **state)
{
    (void)state;
    static const struct {
        const char *name;
        unsigned from, to;
    } tr[] = {
        {"readable on   (OUT -> IN|OUT)", POLLOUT, POLLIN | POLLOUT},
        {"readable off  (IN|OUT -> OUT)", POLLIN | POLLOUT, POLLOUT},
        {"writable off  (OUT -> 0)", POLLOUT, 0},
        {"writable on   (0 -> OUT)", 0, POLLOUT},
        {"urgent on     (IN|OUT -> +PRI)", POLLIN | POLLOUT, POLLIN | POLLOUT | POLLPRI},
        {"urgent off    (+PRI -> IN|OUT)", POLLIN | POLLOUT | POLLPRI, POLLIN | POLLOUT},
    };
    const int n = 20000;
    for (size_t k = 0; k < sizeof(tr) / sizeof(tr[0]); k++) {
        fix f;
        fix_init(&f);
        uw__sdp_ready_set(&f.r, tr[k].from);
        unsigned long sc = 0;
        double t = 0;
        for (int i = 0; i < n; i++) {
            unsigned long s0 = f.r.syscalls;
            double t0 = now_ns();
            uw__sdp_ready_set(&f.r, tr[k].to);
            t += now_ns() - t0;
            sc += f.r.syscalls - s0;
            uw__sdp_ready_set(&f.r, tr[k].from);
        }
        fprintf(stderr, "# %-34s %.2f syscalls, %6.0f ns\n", tr[k].name, (double)sc / n, t / n);
        fix_fini(&f);
    }
    /* One-way transitions: measured once each, on fresh pairs. */
    static const struct {
        const char *name;
        unsigned from, to;
    } one[] = {
        {"peer EOF      (OUT -> +IN|RDHUP)", POLLOUT, POLLIN | POLLOUT | POLLRDHUP},
        {"hang-up       (OUT -> HUP)", POLLOUT, POLLHUP},
        {"error         (OUT -> ERR)", POLLOUT, POLLERR},
        {"error taken   (ERR -> HUP)", POLLERR, POLLHUP},
    };
    for (size_t k = 0; k < sizeof(one) / sizeof(one[0]); k++) {
        unsigned long sc = 0;
        double t = 0;
        for (int i = 0; i < 2000; i++) {
            fix f;
            fix_init(&f);
            uw__sdp_ready_set(&f.r, one[k].from);
            unsigned long s0 = f.r.syscalls;
            double t0 = now_ns();
            uw__sdp_ready_set(&f.r, one[k].to);
            t += now_ns() - t0;
            sc += f.r.syscalls - s0;
            fix_fini(&f);
        }
        fprintf(stderr, "# %-34s %.2f syscalls, %6.0f ns\n", one[k].name, (double)sc / 2000,
                t / 2000);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fresh),    cmocka_unit_test(test_transitions),
        cmocka_unit_test(test_terminal), cmocka_unit_test(test_wakes_sleeper),
        cmocka_unit_test(test_cost),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
