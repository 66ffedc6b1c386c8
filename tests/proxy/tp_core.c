/* Sans-I/O fault engine of uwarp-testproxy; see tp_core.h. */
#include "tp_core.h"

#include <stdlib.h>
#include <string.h>

#define NS_PER_MS INT64_C(1000000)

/* Derivation tags, so the segment sizes, delays and corruption offsets of
 * one direction come from independent streams: changing --split does not
 * move the corruptions of the same seed. */
enum { TAG_SEG = 1, TAG_DELAY = 2, TAG_CORRUPT = 3 };

uint64_t tp_mix(uint64_t x)
{
    x ^= x >> 30;
    x *= UINT64_C(0xbf58476d1ce4e5b9);
    x ^= x >> 27;
    x *= UINT64_C(0x94d049bb133111eb);
    x ^= x >> 31;
    return x;
}

void tp_rng_seed(tp_rng *r, uint64_t seed)
{
    r->s = seed;
}

uint64_t tp_rng_next(tp_rng *r)
{
    r->s += UINT64_C(0x9e3779b97f4a7c15);
    return tp_mix(r->s);
}

uint64_t tp_rng_below(tp_rng *r, uint64_t n)
{
    return tp_rng_next(r) % n;
}

/* Draws the corruption of stratum p->index. Count mode splits the span into
 * corrupt_count strata of floor/ceil(span/count) bytes (each at least one
 * byte, the CLI makes sure count <= span); every mode uses fixed windows. */
static void plan_draw(tp_plan *p, const tp_faults *f)
{
    uint64_t lo, hi;
    if (f->corrupt_count > 0) {
        if (p->index >= f->corrupt_count) {
            p->off = UINT64_MAX;
            return;
        }
        /* span and count are capped (TP_MAX_*) so the products fit. */
        lo = p->index * f->corrupt_span / f->corrupt_count;
        hi = (p->index + 1) * f->corrupt_span / f->corrupt_count;
    } else if (f->corrupt_every > 0) {
        if (p->index > (UINT64_MAX / 2) / f->corrupt_every) {
            p->off = UINT64_MAX; /* past any stream a test can send */
            return;
        }
        lo = p->index * f->corrupt_every;
        hi = lo + f->corrupt_every;
    } else {
        p->off = UINT64_MAX;
        return;
    }
    p->off = f->corrupt_after + lo + tp_rng_below(&p->rng, hi - lo);
    p->bit = (uint8_t)tp_rng_below(&p->rng, 8);
}

static void plan_next(tp_plan *p, const tp_faults *f)
{
    p->index++;
    plan_draw(p, f);
}

/* Segment sizes are log-uniform: a power of two 2^k with k uniform up to
 * max_seg, then a size uniform in [1, min(2^k, max_seg)]. Plain uniform sizes
 * would almost never produce the 1..16-byte writes that split MPA headers. */
static uint64_t seg_size(tp_dir *d)
{
    unsigned kmax = 0;
    while (kmax < 31 && (UINT32_C(1) << kmax) < d->f.max_seg)
        kmax++;
    unsigned k = (unsigned)tp_rng_below(&d->seg_rng, kmax + 1);
    uint64_t lim = UINT64_C(1) << k;
    if (lim > d->f.max_seg)
        lim = d->f.max_seg;
    return 1 + tp_rng_below(&d->seg_rng, lim);
}

int tp_dir_init(tp_dir *d, const tp_faults *f, size_t cap, uint64_t seed)
{
    memset(d, 0, sizeof(*d));
    if (f != NULL)
        d->f = *f;
    d->buf = malloc(cap);
    if (d->buf == NULL)
        return -1;
    d->cap = cap;
    tp_rng_seed(&d->seg_rng, tp_mix(seed ^ TAG_SEG));
    tp_rng_seed(&d->delay_rng, tp_mix(seed ^ TAG_DELAY));
    tp_rng_seed(&d->apply.rng, tp_mix(seed ^ TAG_CORRUPT));
    plan_draw(&d->apply, &d->f);
    d->report = d->apply;
    if (d->f.split)
        d->next_cut = seg_size(d);
    return 0;
}

void tp_dir_free(tp_dir *d)
{
    free(d->buf);
    d->buf = NULL;
}

/* Up to two iovecs covering ring bytes [from, from + len). */
static int ring_iov(const tp_dir *d, uint64_t from, size_t len, struct iovec iov[2])
{
    size_t start = (size_t)(from % d->cap);
    size_t first = d->cap - start;
    if (first >= len) {
        iov[0] = (struct iovec){.iov_base = d->buf + start, .iov_len = len};
        return 1;
    }
    iov[0] = (struct iovec){.iov_base = d->buf + start, .iov_len = first};
    iov[1] = (struct iovec){.iov_base = d->buf, .iov_len = len - first};
    return 2;
}

size_t tp_dir_read_space(const tp_dir *d, struct iovec iov[2], int *niov)
{
    size_t free_bytes = d->cap - (size_t)(d->rd - d->wr);
    *niov = 0;
    if (d->eof || free_bytes == 0 || d->qlen == TP_QCAP)
        return 0;
    *niov = ring_iov(d, d->rd, free_bytes, iov);
    return free_bytes;
}

void tp_dir_received(tp_dir *d, size_t n, int64_t now)
{
    uint64_t end = d->rd + n;
    /* Flip the planned bits as the bytes enter; the ring keeps the flipped
     * byte, so tp_dir_sent() recovers the old value by flipping back. */
    while (d->apply.off < end) {
        d->buf[d->apply.off % d->cap] ^= (uint8_t)(1u << d->apply.bit);
        plan_next(&d->apply, &d->f);
    }
    if (d->cut == d->rd)
        d->pending_since = now;
    d->last_read_start = d->rd;
    d->last_read_time = now;
    d->rd = end;
    d->st.reads++;
    tp_dir_schedule(d, now);
}

void tp_dir_set_eof(tp_dir *d, int64_t now)
{
    d->eof = true;
    tp_dir_schedule(d, now);
}

static int64_t draw_release(tp_dir *d, int64_t now)
{
    int64_t t = now;
    if (d->f.delay_max_ms > 0) {
        uint64_t span = (uint64_t)(d->f.delay_max_ms - d->f.delay_min_ms) + 1;
        uint64_t ms = d->f.delay_min_ms + tp_rng_below(&d->delay_rng, span);
        t += (int64_t)ms * NS_PER_MS;
    }
    /* Order is kept by never releasing a chunk before the one in front. */
    return t > d->last_release ? t : d->last_release;
}

void tp_dir_schedule(tp_dir *d, int64_t now)
{
    while (d->cut < d->rd && d->qlen < TP_QCAP) {
        uint64_t end;
        if (!d->f.split) {
            end = d->rd; /* one chunk per read */
        } else if (d->next_cut <= d->rd) {
            end = d->next_cut;
            d->next_cut += seg_size(d);
        } else if (d->eof || now - d->pending_since >= (int64_t)d->f.hold_ms * NS_PER_MS) {
            /* The segment would need bytes the sender is not sending (yet):
             * write it short rather than stall a request/response protocol.
             * The planned boundary stays, so the next segment ends there. */
            end = d->rd;
        } else {
            break;
        }
        if (d->cut < d->last_read_start && d->last_read_start < end)
            d->st.merged++;
        size_t tail = (d->qhead + d->qlen) % TP_QCAP;
        d->q[tail] = (tp_chunk){.end = end, .release = draw_release(d, now)};
        d->last_release = d->q[tail].release;
        d->qlen++;
        d->cut = end;
        /* What is left over arrived with the last read at the earliest. */
        if (d->cut < d->rd && d->cut >= d->last_read_start)
            d->pending_since = d->last_read_time;
    }
}

size_t tp_dir_ready(const tp_dir *d, int64_t now, struct iovec iov[2], int *niov)
{
    *niov = 0;
    if (d->qlen == 0)
        return 0;
    const tp_chunk *c = &d->q[d->qhead];
    if (c->release > now)
        return 0;
    size_t len = (size_t)(c->end - d->wr);
    *niov = ring_iov(d, d->wr, len, iov);
    return len;
}

void tp_dir_sent(tp_dir *d, size_t n, tp_corrupt_fn *fn, void *ctx)
{
    uint64_t end = d->wr + n;
    while (d->report.off < end) {
        uint8_t now_byte = d->buf[d->report.off % d->cap];
        uint8_t old_byte = (uint8_t)(now_byte ^ (1u << d->report.bit));
        if (fn != NULL)
            fn(ctx, d->report.off, d->report.bit, old_byte, now_byte);
        d->st.corruptions++;
        plan_next(&d->report, &d->f);
    }
    d->wr = end;
    d->st.bytes += n;
    d->st.writes++;
    if (d->st.min_write == 0 || n < d->st.min_write)
        d->st.min_write = n;
    if (n > d->st.max_write)
        d->st.max_write = n;
    if (d->wr == d->q[d->qhead].end) {
        d->qhead = (d->qhead + 1) % TP_QCAP;
        d->qlen--;
    }
}

int64_t tp_dir_deadline(const tp_dir *d, int64_t now)
{
    int64_t t = INT64_MAX;
    if (d->qlen > 0 && d->q[d->qhead].release > now)
        t = d->q[d->qhead].release;
    /* A due chunk is waiting for POLLOUT, so only future releases count.
     * Bytes not yet in chunks move only when tp_dir_schedule() runs: if it
     * would make progress now (a hold that ended after the caller last
     * scheduled, room in a queue that was full), say so with a time <= now,
     * or they would wait forever on an idle connection. */
    if (d->cut < d->rd && d->qlen < TP_QCAP) {
        int64_t h = now;
        if (d->f.split && !d->eof && d->next_cut > d->rd)
            h = d->pending_since + (int64_t)d->f.hold_ms * NS_PER_MS;
        if (h < t)
            t = h;
    }
    return t;
}

bool tp_dir_finished(const tp_dir *d)
{
    return d->eof && d->wr == d->rd;
}
