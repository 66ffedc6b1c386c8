/* Two uwarp endpoints joined by the in-memory transport (io/mem.h), on a
 * virtual clock: connection-manager tests with no sockets and no sleeps,
 * the same on every run. Side a is the initiator, b the responder (a
 * listener on its context). */
#ifndef UW_TEST_MEM_WORLD_H
#define UW_TEST_MEM_WORLD_H

#include <stdbool.h>
#include <stdint.h>

#include "io/mem.h"
#include "uwarp/verbs.h"

#define MW_BUF (1u << 18)
#define MW_MS 1000000ull

typedef struct mw_side {
    uw_ctx *ctx;
    uw_pd *pd;
    uw_cq *cq;
    uw_qp *qp;
    uw_listener *l;
    uint8_t *buf;
    uw_mr *mr;
    struct uw__mem_end *end;
    bool end_used;    /* handed to the engine, which closes it */
    char trace[4096]; /* "FROM -> TO (why);" for every state change */
} mw_side;

typedef struct mw {
    uint64_t now; /* virtual nanoseconds */
    mw_side a, b;
} mw;

/* Both contexts (CQs of cq_depth, 0: 64) and the pair (cap octets each
 * way, 0: 64 KiB); nothing connected yet. */
void mw_init(mw *w, size_t cap, unsigned cq_depth);
/* b listens with pb; a connects with pa; b's listener accepts. */
void mw_dial(mw *w, const uw_conn_param *pa, const uw_conn_param *pb);
/* Half of it: a connects to an end nobody accepts, or b accepts one
 * nobody connected from (a's end stays silent). */
void mw_dial_a(mw *w, const uw_conn_param *pa);
void mw_dial_b(mw *w, const uw_conn_param *pb);
/* Everything, then the pair (after the engine closed its ends). */
void mw_fini(mw *w);

/* Runs the sides in mask (MW_A, MW_B) until neither has work; then moves
 * the clock to the earliest deadline if it is at or before `until` and
 * goes on. Ends with the clock at `until` (or where it was, if later). */
enum { MW_A = 1, MW_B = 2, MW_AB = 3 };
void mw_run(mw *w, int mask, uint64_t until);
/* Until idle, time standing still. */
void mw_idle(mw *w);

/* The next event of s, running both sides (time standing still); type 0
 * when there is none. */
uw_cm_event mw_event(mw *w, mw_side *s);
/* The next event must be of this type (and returns it). */
uw_cm_event mw_expect(mw *w, mw_side *s, int type);
/* No event is waiting on s. */
void mw_no_event(mw *w, mw_side *s);

/* Connects with pa/pb and accepts: both ESTABLISHED, returns a's params. */
uw_mpa_params mw_connect(mw *w, const uw_conn_param *pa, const uw_conn_param *pb);
/* Send a->b (or b->a with rev), then Write and Read back: data intact. */
void mw_exchange(mw *w, uint32_t len, bool rev);
/* One completion from s's CQ (running both sides), which must exist. */
uw_wc mw_wc(mw *w, mw_side *s);

#endif
