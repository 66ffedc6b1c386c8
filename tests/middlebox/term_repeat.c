/* A Terminate always arrives. The corruption cases of corrupt.sh (a flipped
 * bit, with and without markers, with and without re-segmentation) and a
 * DDP fault (a Write to an invalid STag), each repeated many times over
 * loopback through an in-process relay (term_relay.c): the receiver finds
 * the error, sends its Terminate and destroys its QP at once, with the rest
 * of the stream unread; the sender must receive that Terminate, with the
 * layer, type and code the receiver reported, every single time. A close
 * that resets instead of lingering loses it now and then.
 *   term_repeat [RUNS]   (default 200 per case; UW_TEST_SEED picks the faults)
 * Exit 0 when every run delivered its Terminate, 1 otherwise. */
#define _DEFAULT_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "term_relay.h"
#include "uwarp/verbs.h"

#define NMSG 16u
#define MSGLEN 16384u
#define WAIT_MS 5000 /* every wait is bounded */

typedef struct tcase {
    const char *name;
    bool markers, split, flip;
} tcase;

static const tcase CASES[] = {
    {"flip", false, false, true},      {"flip-markers", true, false, true},
    {"flip-split", false, true, true}, {"flip-markers-split", true, true, true},
    {"bad-stag", false, false, false},
};
#define NCASES (sizeof(CASES) / sizeof(CASES[0]))

typedef struct side {
    uw_ctx *ctx;
    uw_pd *pd;
    uw_cq *cq;
    uint8_t *mem;
    uw_mr *mr;
} side;

/* What the receiver reported, by run; guarded by mu. */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static unsigned cur_run;
static bool rx_done[NCASES * 1000];
static uw_term rx_term[NCASES * 1000];
static bool rx_stop;
static unsigned rx_anomalies;
static unsigned codes[3][16]; /* Terminates received, by layer and code (main thread) */

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int side_init(side *s)
{
    memset(s, 0, sizeof(*s));
    size_t len = (size_t)NMSG * MSGLEN;
    s->mem = aligned_alloc(4096, len);
    if (!s->mem || uw_ctx_create(&s->ctx, NULL) || uw_pd_alloc(s->ctx, &s->pd) ||
        uw_cq_create(s->ctx, 1024, &s->cq))
        return -1;
    memset(s->mem, 0x3C, len);
    return uw_mr_reg(s->pd, s->mem, len, UW_ACCESS_LOCAL_WRITE | UW_ACCESS_REMOTE_WRITE, &s->mr);
}

static int side_fini(side *s)
{
    int r = uw_mr_dereg(s->mr) | uw_cq_destroy(s->cq) | uw_pd_dealloc(s->pd);
    r |= uw_ctx_destroy(s->ctx); /* also finishes lingering closes */
    free(s->mem);
    return r;
}

static void drain_cq(side *s)
{
    uw_wc wc[64];
    while (uw_cq_poll(s->cq, wc, 64) > 0) {
    }
}

/* The receiver: accepts, and on its own Terminate records it and destroys
 * the QP at once, the worst moment for the Terminate still in flight. */
typedef struct rx_arg {
    side s;
    uw_listener *l[2]; /* without and with markers */
} rx_arg;

static void *rx_thread(void *arg)
{
    rx_arg *a = arg;
    side *s = &a->s;
    for (;;) {
        pthread_mutex_lock(&mu);
        bool stop = rx_stop;
        pthread_mutex_unlock(&mu);
        if (stop)
            return NULL;
        drain_cq(s);
        uw_cm_event ev;
        if (uw_cm_wait_event(s->ctx, &ev, 50) != 1)
            continue;
        if (ev.type == UW_CM_CONNECT_REQUEST) {
            pthread_mutex_lock(&mu);
            uw_qp_set_context(ev.qp, (void *)(uintptr_t)cur_run);
            pthread_mutex_unlock(&mu);
            for (uint32_t i = 0; i < NMSG; i++) {
                uw_sge g = {(uint64_t)(uintptr_t)(s->mem + (size_t)i * MSGLEN), MSGLEN,
                            uw_mr_stag(s->mr)};
                uw_recv_wr w = {.wr_id = i, .sg_list = &g, .num_sge = 1};
                uw_post_recv(ev.qp, &w, 1, NULL);
            }
            uw_conn_param p = {.markers = ev.listener == a->l[1], .timeout_ms = WAIT_MS};
            if (uw_accept(ev.qp, &p) != 0)
                uw_qp_destroy(ev.qp);
            continue;
        }
        if (ev.type == UW_CM_ESTABLISHED || !ev.qp)
            continue;
        unsigned run = (unsigned)(uintptr_t)uw_qp_get_context(ev.qp);
        pthread_mutex_lock(&mu);
        if (ev.type == UW_CM_TERMINATED && !ev.term_received) {
            rx_term[run] = ev.term;
            rx_done[run] = true;
        } else {
            fprintf(stderr, "run %u: receiver: unexpected %s (%s)\n", run,
                    uw_cm_event_name(ev.type), uw_err_name(ev.err));
            rx_anomalies++;
        }
        pthread_cond_broadcast(&cv);
        pthread_mutex_unlock(&mu);
        uw_qp_destroy(ev.qp);
    }
}

/* One run on the sender's side; returns 0 when the Terminate arrived as
 * the receiver reported it. */
static int run_once(side *s, relay *r, const tcase *tc, unsigned run, uint64_t seed,
                    const int port[2])
{
    uint64_t x = seed ^ (run * 0x9E3779B97F4A7C15ull);
    x ^= x >> 31;
    x *= 0xBF58476D1CE4E5B9ull;
    x ^= x >> 29;
    /* After the MPA exchange, and with at least 150 KiB of stream behind
     * it: a flipped length field may make the receiver wait for up to
     * 64 KiB more before the CRC can fail. */
    relay_case rc = {.flip_off = tc->flip ? 4096 + x % (96 * 1024) : UINT64_MAX,
                     .flip_bit = (unsigned)(x >> 40) % 8,
                     .split = tc->split,
                     .seed = x,
                     .dst_port = port[tc->markers]};
    relay_set_case(r, &rc);
    pthread_mutex_lock(&mu);
    cur_run = run;
    pthread_mutex_unlock(&mu);

    uw_qp *qp;
    uw_qp_attr qa = {.pd = s->pd, .send_cq = s->cq, .recv_cq = s->cq, .max_send_wr = 64};
    if (uw_qp_create(s->ctx, &qa, &qp))
        return -1;
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons((uint16_t)r->port)};
    sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    uw_conn_param p = {.markers = tc->markers, .timeout_ms = WAIT_MS};
    uw_cm_event ev;
    int rc_ = -1;
    if (uw_connect(qp, (struct sockaddr *)&sin, sizeof(sin), &p) ||
        uw_cm_wait_event(s->ctx, &ev, WAIT_MS) != 1 || ev.type != UW_CM_ESTABLISHED) {
        fprintf(stderr, "run %u (%s): not established\n", run, tc->name);
        goto out;
    }
    for (uint32_t i = 0; i < NMSG; i++) {
        uw_sge g = {(uint64_t)(uintptr_t)(s->mem + (size_t)i * MSGLEN), MSGLEN, uw_mr_stag(s->mr)};
        uw_send_wr w = {.wr_id = i, .opcode = UW_WR_SEND, .sg_list = &g, .num_sge = 1};
        if (!tc->flip && i == NMSG / 2) {
            /* No region has this STag: a DDP error mid-stream. */
            uw_send_wr bad = {.wr_id = 99,
                              .opcode = UW_WR_RDMA_WRITE,
                              .sg_list = &g,
                              .num_sge = 1,
                              .remote_addr = 4096,
                              .rkey = 0x7FFFFF01u};
            uw_post_send(qp, &bad, 1, NULL);
        }
        uw_post_send(qp, &w, 1, NULL);
    }
    int64_t end = now_ms() + WAIT_MS;
    for (;;) {
        drain_cq(s);
        int left = (int)(end - now_ms());
        if (left <= 0 || uw_cm_wait_event(s->ctx, &ev, left) != 1) {
            fprintf(stderr, "run %u (%s): no event within %d ms\n", run, tc->name, WAIT_MS);
            goto out;
        }
        if (ev.type == UW_CM_TERMINATED && ev.term_received)
            break;
        fprintf(stderr, "run %u (%s): Terminate lost: %s (%s) came instead\n", run, tc->name,
                uw_cm_event_name(ev.type), uw_err_name(ev.err));
        goto out;
    }
    /* The receiver reported its Terminate before we could read it, but its
     * thread may not have taken the event yet. */
    pthread_mutex_lock(&mu);
    struct timespec dl;
    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_sec += WAIT_MS / 1000;
    while (!rx_done[run] && pthread_cond_timedwait(&cv, &mu, &dl) == 0) {
    }
    bool done = rx_done[run];
    uw_term t = rx_term[run];
    pthread_mutex_unlock(&mu);
    if (!done) {
        fprintf(stderr, "run %u (%s): the receiver never reported its Terminate\n", run, tc->name);
        goto out;
    }
    bool layer_ok = tc->flip ? ev.term.layer == UW_TERM_LLP : ev.term.layer == UW_TERM_DDP;
    if (!layer_ok || t.layer != ev.term.layer || t.etype != ev.term.etype ||
        t.ecode != ev.term.ecode) {
        fprintf(stderr, "run %u (%s): sent %u/%u/%u, received %u/%u/%u\n", run, tc->name, t.layer,
                t.etype, t.ecode, ev.term.layer, ev.term.etype, ev.term.ecode);
        goto out;
    }
    codes[t.layer % 3][t.ecode & 15]++;
    rc_ = 0;
out:
    uw_qp_destroy(qp);
    drain_cq(s);
    return rc_;
}

/* " MPA code 2: 200" and so on, for the runs since the last call. */
static void codes_take(char *out, size_t cap)
{
    static const char *const layer[3] = {"RDMAP", "DDP", "MPA"};
    size_t n = 0;
    out[0] = '\0';
    for (unsigned l = 0; l < 3; l++)
        for (unsigned k = 0; k < 16; k++)
            if (codes[l][k] && n < cap) {
                n +=
                    (size_t)snprintf(out + n, cap - n, " %s code %u: %u", layer[l], k, codes[l][k]);
                codes[l][k] = 0;
            }
}

static int listen_on(rx_arg *a, int i, int *port)
{
    uw_qp_attr qa = {.pd = a->s.pd, .send_cq = a->s.cq, .recv_cq = a->s.cq, .max_recv_wr = NMSG};
    uw_conn_param p = {.markers = i == 1, .timeout_ms = WAIT_MS};
    struct sockaddr_in sin = {.sin_family = AF_INET};
    sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    struct sockaddr_storage ss;
    socklen_t sl = sizeof(ss);
    if (uw_listen(a->s.ctx, (struct sockaddr *)&sin, sizeof(sin), &qa, &p, &a->l[i]) ||
        uw_listener_addr(a->l[i], &ss, &sl))
        return -1;
    *port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
    return 0;
}

int main(int argc, char **argv)
{
    unsigned runs = argc > 1 ? (unsigned)atoi(argv[1]) : 200;
    if (runs == 0 || runs > 1000)
        runs = 200;
    const char *e = getenv("UW_TEST_SEED");
    uint64_t seed = e ? strtoull(e, NULL, 0) : 20;
    printf("term_repeat: %u runs per case, seed %llu\n", runs, (unsigned long long)seed);
    static rx_arg ra;
    side tx;
    relay r;
    int port[2];
    if (side_init(&ra.s) || side_init(&tx) || listen_on(&ra, 0, &port[0]) ||
        listen_on(&ra, 1, &port[1]) || relay_start(&r)) {
        fprintf(stderr, "term_repeat: setup failed\n");
        return 1;
    }
    pthread_t th;
    if (pthread_create(&th, NULL, rx_thread, &ra) != 0)
        return 1;
    int64_t t0 = now_ms();
    unsigned failed = 0;
    for (unsigned c = 0; c < NCASES; c++) {
        int64_t tc0 = now_ms();
        unsigned ok = 0;
        for (unsigned i = 0; i < runs; i++)
            ok += run_once(&tx, &r, &CASES[c], c * 1000 + i, seed, port) == 0;
        failed += runs - ok;
        char seen[256];
        codes_take(seen, sizeof(seen));
        printf("%-18s %u/%u runs, Terminate received as sent every time: %s (%.1f s;%s)\n",
               CASES[c].name, ok, runs, ok == runs ? "yes" : "NO",
               (double)(now_ms() - tc0) / 1000.0, seen);
        fflush(stdout);
    }
    pthread_mutex_lock(&mu);
    rx_stop = true;
    unsigned anomalies = rx_anomalies;
    pthread_mutex_unlock(&mu);
    pthread_join(th, NULL);
    relay_stop(&r);
    int fin = uw_listener_destroy(ra.l[0]) | uw_listener_destroy(ra.l[1]);
    fin |= side_fini(&ra.s) | side_fini(&tx);
    printf("total %.1f s; relay resets %u, stuck %u; receiver anomalies %u\n",
           (double)(now_ms() - t0) / 1000.0, r.resets, r.stuck, anomalies);
    if (fin)
        fprintf(stderr, "term_repeat: teardown failed (object still busy)\n");
    return failed || anomalies || fin ? 1 : 0;
}
