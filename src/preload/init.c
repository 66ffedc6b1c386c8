/* Process-wide state of the preload library: the environment and the rules
 * (read once, on the first candidate socket), the SDP stack (created on
 * first need), fork() and exit.
 *
 * Nothing runs in a constructor: a program that never makes a candidate
 * socket pays a table lookup per interposed call and nothing else. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io/pm_resolve.h"
#include "preload/pl.h"
#include "preload/uep.h"
#include "uwarp/verbs.h" /* UW_LOG_* levels */

struct pl_state pl_st;

static pthread_once_t once = PTHREAD_ONCE_INIT;
static pthread_mutex_t stack_mu = PTHREAD_MUTEX_INITIALIZER;
static uw_sdp_stack *stack;
static bool stack_failed;
static _Atomic unsigned once_bits;

bool pl_once(unsigned key)
{
    return (atomic_fetch_or(&once_bits, key) & key) == 0;
}

#define CONF_MAX (1u << 20)

static void read_conf(void)
{
    const char *path = getenv("UWARP_PRELOAD_CONF");
    if (!path || !*path)
        path = "/etc/uwarp/preload.conf";
    pl_inside++;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        pl_inside--;
        if (e == ENOENT)
            return; /* no rules: every candidate tries SDP */
        pl_log(PL_LOG_WARN, -1, "%s: %s: running everything over TCP", path, strerror(e));
        pl_st.enabled = false;
        return;
    }
    char *buf = malloc(CONF_MAX);
    size_t len = 0;
    ssize_t n = 0;
    while (buf && len < CONF_MAX && (n = pl_real.read(fd, buf + len, CONF_MAX - len)) > 0)
        len += (size_t)n;
    pl_real.close(fd);
    pl_inside--;
    if (!buf || n < 0 || len >= CONF_MAX) {
        pl_log(PL_LOG_WARN, -1, "%s: %s: running everything over TCP", path,
               !buf    ? "out of memory"
               : n < 0 ? strerror(errno)
                       : "larger than 1 MiB");
        pl_st.enabled = false;
        free(buf);
        return;
    }
    char err[256] = "";
    int r = uw_pl_conf_parse(buf, len, &pl_st.conf, err, sizeof(err));
    free(buf);
    if (r < 0) {
        pl_log(PL_LOG_ERROR, -1, "%s:%s: configuration not used: running everything over TCP", path,
               r == -EINVAL ? err : " out of memory");
        pl_st.conf = NULL;
        pl_st.enabled = false;
        return;
    }
    PL_LOG(PL_LOG_DEBUG, -1, "%s: %zu rules", path, uw_pl_conf_count(pl_st.conf));
}

static void at_fork_prepare(void)
{
    pthread_mutex_lock(&stack_mu);
    pl_tab_lock();
    if (stack) {
        pl_inside++;
        uw_sdp_stack_atfork(stack, UW_SDP_FORK_PREPARE);
        pl_inside--;
    }
    /* The port mapper resolver (sock.c) outlives stacks: the child goes on
     * with it, so its lock must not be held by a parent's thread. */
    uw__pm_resolver_published_atfork(0);
}

static void at_fork_parent(void)
{
    uw__pm_resolver_published_atfork(1);
    if (stack) {
        pl_inside++;
        uw_sdp_stack_atfork(stack, UW_SDP_FORK_PARENT);
        pl_inside--;
    }
    pl_tab_unlock();
    pthread_mutex_unlock(&stack_mu);
}

/* The child has none of the parent's threads, so the stack (its progress
 * thread, its lock, its sockets shared with the parent) cannot be used:
 * the parent's SDP sockets become orphans (docs/preload.md "fork"), and the
 * child gets a stack of its own when it makes a socket. */
static void at_fork_child(void)
{
    uw__pm_resolver_published_atfork(2);
    if (stack) {
        pl_inside++;
        uw_sdp_stack_atfork(stack, UW_SDP_FORK_CHILD);
        pl_inside--;
    }
    pl_tab_unlock();
    pthread_mutex_unlock(&stack_mu);
    pl_st.child = true;
    stack = NULL;
    stack_failed = false;
    pl_tab_orphan_all();
    uep_atfork_child();
    atomic_store(&pl_live, 0);
}

static void do_init(void)
{
    pl_real_init();
    pl_log_open();
    pl_st.enabled = true;
    pl_st.prog = program_invocation_short_name ? program_invocation_short_name : "";
    if (getauxval(AT_SECURE)) {
        pl_st.enabled = false; /* setuid/setgid: never touched */
        return;
    }
    const char *v = getenv("UWARP_PRELOAD_TCP_ONLY");
    if (v && *v && strcmp(v, "0") != 0) {
        pl_st.enabled = false;
        PL_LOG(PL_LOG_INFO, -1, "UWARP_PRELOAD_TCP_ONLY: everything over TCP");
        return;
    }
    v = getenv("UWARP_PM_PORT");
    if (v && *v) {
        char *end;
        long p = strtol(v, &end, 10);
        if (*end || p < 1 || p > 65535)
            pl_log(PL_LOG_WARN, -1, "UWARP_PM_PORT=%s: not a port; using 3935", v);
        else
            pl_st.pm_port = (unsigned short)p;
    }
    v = getenv("UWARP_PM_SOCKET");
    if (v && *v)
        snprintf(pl_st.pmd_control, sizeof(pl_st.pmd_control), "%s", v);
    read_conf();
    pthread_atfork(at_fork_prepare, at_fork_parent, at_fork_child);
}

void pl_init(void)
{
    pthread_once(&once, do_init);
}

static void stack_log(void *ud, int level, const char *msg)
{
    (void)ud;
    /* The stack's warnings (resets, setup timeouts, Terminates) are what a
     * user reading the info log wants to see next to the transport lines. */
    int l = level <= UW_LOG_ERROR ? PL_LOG_WARN : level == UW_LOG_WARN ? PL_LOG_INFO : PL_LOG_DEBUG;
    PL_LOG(l, -1, "%s", msg);
}

static void thread_start(void)
{
    pl_inside = 1; /* everything the stack's threads call is the stack's own */
}

uw_sdp_stack *pl_stack(void)
{
    pthread_mutex_lock(&stack_mu);
    if (!stack && !stack_failed) {
        uw_sdp_stack_attr a;
        memset(&a, 0, sizeof(a));
        a.log = stack_log;
        a.log_level = pl_log_level >= PL_LOG_DEBUG  ? UW_LOG_DEBUG
                      : pl_log_level >= PL_LOG_INFO ? UW_LOG_WARN
                                                    : UW_LOG_ERROR;
        a.pmd_control = pl_st.pmd_control[0] ? pl_st.pmd_control : NULL;
        a.pm_port = pl_st.pm_port;
        a.thread_start = thread_start;
        a.ready_rose = uep_wake;
        pl_inside++;
        int r = uw_sdp_stack_create(&stack, &a);
        pl_inside--;
        if (r < 0) {
            stack = NULL;
            stack_failed = true;
            pl_log(PL_LOG_WARN, -1, "SDP stack: %s: running everything over TCP", uw_strerror(r));
        } else {
            PL_LOG(PL_LOG_DEBUG, -1, "SDP stack created");
        }
    }
    uw_sdp_stack *st = stack;
    pthread_mutex_unlock(&stack_mu);
    return st;
}

uw_sdp_stack *pl_stack_peek(void)
{
    pthread_mutex_lock(&stack_mu);
    uw_sdp_stack *st = stack;
    pthread_mutex_unlock(&stack_mu);
    return st;
}

/* exit(): SDP data still queued in this process would be lost with it,
 * while TCP's kernel buffers outlive a process. Close what the application
 * left open (gracefully, as the kernel closes TCP sockets at exit) and give
 * the closes up to 2 s (uw_sdp_stack_destroy), unless a call is still in
 * flight in another thread (then the stack is left as it is). */
__attribute__((destructor)) static void pl_fini(void)
{
    pthread_mutex_lock(&stack_mu);
    uw_sdp_stack *st = stack;
    pthread_mutex_unlock(&stack_mu);
    if (!st || pl_st.child)
        return;
    pl_tab_close_all();
    int live = atomic_load(&pl_live), waits = atomic_load(&pl_waits);
    if (live != 0 || waits != 0) {
        /* Said aloud: the data these connections still queue is lost
         * with the process (their peers see a reset). */
        pl_log(PL_LOG_WARN, -1,
               "exit: %d SDP sockets still in use, %d waits in other threads: "
               "closes not flushed",
               live, waits);
        return;
    }
    /* The kernel would go on sending a closed TCP socket's data after the
     * process exits; SDP data still in this process must leave first. At
     * most 30 s (a peer that stopped reading would hold exit forever). */
    pl_inside++;
    int left = uw_sdp_stack_flush(st, 30000);
    pl_inside--;
    if (left > 0)
        pl_log(PL_LOG_WARN, -1, "exit: %d SDP connections still closing after 30 s: reset", left);
    pthread_mutex_lock(&stack_mu);
    stack = NULL;
    stack_failed = true;
    pthread_mutex_unlock(&stack_mu);
    pl_inside++;
    uw_sdp_stack_destroy(st);
    pl_inside--;
}
