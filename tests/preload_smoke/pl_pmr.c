/* The port mapper resolver as the preload library uses it (src/preload/
 * sock.c, src/io/pm_resolve.h): one resolver for the process, published so
 * that the SDP stack finds the answers the library got before the stack
 * existed; a negative cache that starts small and grows up to its limit
 * without forgetting; the lock handed over across fork().
 *
 * A fake port mapper (a thread on a UDP port of 127.0.0.1) answers PMDeny
 * for odd ports and PMAccept (SDP port + 1000, PmTime 20) for even ones, and
 * counts the PMReqs, so every check can tell an asked question from a
 * cached one. Exit status 0 when every check passes. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "io/pm_resolve.h"
#include "uwarp/pm.h"

static int fails;
static _Atomic int reqs; /* PMReqs the fake port mapper answered */
static int pm_fd;

#define CHECK(cond, ...)                   \
    do {                                   \
        if (!(cond)) {                     \
            fails++;                       \
            printf("FAIL %d: ", __LINE__); \
            printf(__VA_ARGS__);           \
            printf("\n");                  \
        }                                  \
    } while (0)

static void *fake_pm(void *arg)
{
    (void)arg;
    for (;;) {
        uint8_t buf[128];
        struct sockaddr_storage from;
        socklen_t fl = sizeof(from);
        ssize_t n = recvfrom(pm_fd, buf, sizeof(buf), 0, (struct sockaddr *)&from, &fl);
        if (n <= 0)
            return NULL; /* shut down */
        uw_pm_msg m;
        if (uw_pm_decode(buf, (size_t)n, &m) != 0 || m.type != UW_PM_REQ)
            continue; /* PMAcks */
        atomic_fetch_add(&reqs, 1);
        if (m.ap_port % 2) {
            m.type = UW_PM_DENY;
        } else {
            m.type = UW_PM_ACCEPT;
            m.pmtime = 20;
            m.ap_port = (uint16_t)(m.ap_port + 1000);
        }
        uint8_t out[UW_PM_MSG_LEN];
        if (uw_pm_encode(&m, out, sizeof(out)) == UW_PM_MSG_LEN)
            sendto(pm_fd, out, sizeof(out), 0, (struct sockaddr *)&from, fl);
    }
}

static struct sockaddr_in dst(unsigned port)
{
    struct sockaddr_in a;
    memset(&a, 0, sizeof(a));
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    return a;
}

/* Resolves 127.0.0.1:port; returns the PMReqs it cost the fake port mapper. */
static int ask(uw__pm_resolver *r, unsigned port, uw__pm_resolution *res)
{
    struct sockaddr_in a = dst(port);
    int before = atomic_load(&reqs);
    int rc = uw__pm_resolve(r, (struct sockaddr *)&a, sizeof(a), NULL, 0, res);
    CHECK(rc == 0, "resolve %u: %d", port, rc);
    return atomic_load(&reqs) - before;
}

int main(void)
{
    pm_fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in pa = dst(0);
    socklen_t pl = sizeof(pa);
    if (pm_fd < 0 || bind(pm_fd, (struct sockaddr *)&pa, sizeof(pa)) != 0 ||
        getsockname(pm_fd, (struct sockaddr *)&pa, &pl) != 0) {
        perror("pl_pmr: udp");
        return 1;
    }
    pthread_t th;
    if (pthread_create(&th, NULL, fake_pm, NULL) != 0)
        return 1;
    char server[32];
    snprintf(server, sizeof(server), "127.0.0.1:%u", ntohs(pa.sin_port));

    uw__pm_resolver_opts o;
    memset(&o, 0, sizeof(o));
    o.server = server;
    o.cache_max = 20;
    uw__pm_resolver *r;
    if (uw__pm_resolver_create(&r, &o) != 0) {
        printf("FAIL: create\n");
        return 1;
    }
    uw__pm_resolution res;

    /* Denials: asked once each, then remembered; the cache grows (it
     * starts at 8) without losing what it holds, and beyond its 20 entries
     * the oldest go first. */
    for (unsigned i = 0; i < 12; i++) {
        int n = ask(r, 1001 + 2 * i, &res);
        CHECK(n == 1 && res.reason == UW__PM_RES_DENY && !res.use_sdp,
              "deny %u: %d PMReqs, reason %d", i, n, res.reason);
        CHECK(!strcmp(uw__pm_res_short_why(&res), "pm deny"), "why %s", uw__pm_res_short_why(&res));
    }
    for (unsigned i = 0; i < 12; i++) {
        int n = ask(r, 1001 + 2 * i, &res);
        CHECK(n == 0 && res.reason == UW__PM_RES_CACHED && res.cached_reason == UW__PM_RES_DENY,
              "cached deny %u: %d PMReqs, reason %d/%d", i, n, res.reason, res.cached_reason);
        CHECK(!strcmp(uw__pm_res_short_why(&res), "pm deny"), "cached why %s",
              uw__pm_res_short_why(&res));
    }
    for (unsigned i = 12; i < 30; i++)
        ask(r, 1001 + 2 * i, &res);
    int again = 0;
    for (unsigned i = 10; i < 30; i++)
        again += ask(r, 1001 + 2 * i, &res);
    CHECK(again == 0, "the 20 newest denials: %d asked again", again);
    CHECK(ask(r, 1001, &res) == 1, "the oldest denial was not the one to go");

    /* A PMAccept: asked once, then from the cache (what the stack's connect
     * finds after the library's own question). */
    CHECK(ask(r, 2000, &res) == 1 && res.reason == UW__PM_RES_ACCEPT && res.use_sdp,
          "accept: reason %d", res.reason);
    CHECK(!strcmp(uw__pm_res_short_why(&res), "port mapper accept"), "accept why");
    struct sockaddr_in got;
    memcpy(&got, &res.addr, sizeof(got));
    CHECK(ntohs(got.sin_port) == 3000, "SDP port %u", ntohs(got.sin_port));
    CHECK(ask(r, 2000, &res) == 0 && res.reason == UW__PM_RES_CACHED && res.use_sdp,
          "cached accept: reason %d", res.reason);
    CHECK(!strcmp(uw__pm_res_short_why(&res), "port mapper accept (cached)"), "cached accept why");
    /* 7.5.1: the SDP Address refused: a denial from now on. */
    struct sockaddr_in a = dst(2000);
    uw__pm_resolver_sdp_reset(r, (struct sockaddr *)&a, sizeof(a), NULL);
    CHECK(ask(r, 2000, &res) == 0 && !res.use_sdp && res.cached_reason == UW__PM_RES_DENY,
          "after an SDP reset: use_sdp %d, cached %d", res.use_sdp, res.cached_reason);

    /* Publishing: found by equal settings only. */
    CHECK(uw__pm_resolver_published(&o) == NULL, "published before publish");
    uw__pm_resolver_publish(r);
    CHECK(uw__pm_resolver_is_published(r), "is_published");
    CHECK(uw__pm_resolver_published(&o) == r, "same options");
    uw__pm_resolver_opts o2 = o;
    o2.timeout_ms = 1000; /* 0 means 1000: the same settings */
    CHECK(uw__pm_resolver_published(&o2) == r, "equal effective timeout");
    o2.timeout_ms = 999;
    CHECK(uw__pm_resolver_published(&o2) == NULL, "another timeout");
    o2 = o;
    o2.server = "127.0.0.2:3935";
    CHECK(uw__pm_resolver_published(&o2) == NULL, "another server");
    o2 = o;
    o2.cache_max = 0;
    CHECK(uw__pm_resolver_published(&o2) == NULL, "another cache size");

    /* fork(): the child goes on with the published resolver (its lock was
     * held over the fork and released on both sides). */
    uw__pm_resolver_published_atfork(0);
    pid_t pid = fork();
    if (pid == 0) {
        uw__pm_resolver_published_atfork(2);
        int n = ask(r, 1059, &res); /* remembered in the parent */
        _exit(n == 0 && res.reason == UW__PM_RES_CACHED && !fails ? 0 : 1);
    }
    uw__pm_resolver_published_atfork(1);
    int st = 0;
    CHECK(pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0,
          "child after fork: status %d", st);
    CHECK(ask(r, 1059, &res) == 0, "parent after fork");

    uw__pm_resolver_publish(NULL);
    CHECK(!uw__pm_resolver_is_published(r), "unpublished");
    uw__pm_resolver_destroy(r);
    shutdown(pm_fd, SHUT_RDWR);
    pthread_join(th, NULL);
    close(pm_fd);
    printf(fails ? "pl_pmr: %d checks failed\n" : "pl_pmr: all checks passed\n", fails);
    return fails ? 1 : 0;
}
