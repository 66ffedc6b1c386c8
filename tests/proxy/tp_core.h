/* The fault-injecting part of uwarp-testproxy, without sockets or clocks: one
 * direction of a relayed TCP stream as a bounded ring buffer plus a queue of
 * "chunks" (the units later handed to write()), with the re-segmentation,
 * delay and bit-flip faults applied on the way through. The caller reads into
 * the ring, tells how much arrived, asks what may be written at time `now`
 * and tells how much was written (conventions.md: sans-I/O core, thin
 * adapter). Everything random is drawn from generators seeded by the caller,
 * and the corruption offsets and segment boundaries depend only on stream
 * offsets, so one seed gives the same faults whatever the read sizes were
 * (except segments cut short by the hold timer, see tp_faults.hold_ms). */
#ifndef UW_TESTS_PROXY_TP_CORE_H
#define UW_TESTS_PROXY_TP_CORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

/* splitmix64: tiny, seedable from any 64-bit value, good enough for tests. */
typedef struct tp_rng {
    uint64_t s;
} tp_rng;

void tp_rng_seed(tp_rng *r, uint64_t seed);
uint64_t tp_rng_next(tp_rng *r);
/* Uniform in [0, n); n > 0. The modulo bias is below 2^-40 for the ranges used. */
uint64_t tp_rng_below(tp_rng *r, uint64_t n);
/* A well-mixed 64-bit hash, used to derive independent seeds. */
uint64_t tp_mix(uint64_t x);

/* Faults of one direction. All-zero means a clean relay. */
typedef struct tp_faults {
    bool split;             /* cut the stream into random-size writes */
    uint32_t max_seg;       /* largest write with split, 1..ring size */
    uint32_t hold_ms;       /* longest a partial segment waits for more data */
    uint32_t delay_min_ms;  /* every chunk is held for a delay in [min, max] ms */
    uint32_t delay_max_ms;  /* (both 0: no delay) */
    uint64_t corrupt_count; /* N corruptions spread evenly over corrupt_span bytes */
    uint64_t corrupt_span;
    uint64_t corrupt_every; /* or one corruption in every window of this size */
    uint64_t corrupt_after; /* stream offsets below this are never corrupted */
} tp_faults;

/* The offsets to corrupt: stratified sampling, one uniformly chosen byte in
 * each stratum, so the corruptions are distinct, ascending and spread over
 * the span without knowing how long the stream will be. */
typedef struct tp_plan {
    tp_rng rng;
    uint64_t index; /* stratum of `off` */
    uint64_t off;   /* next offset to corrupt; UINT64_MAX when there is none */
    uint8_t bit;    /* bit to flip there, 0..7 */
} tp_plan;

/* Largest spans and counts accepted, so stratum bounds never overflow. */
#define TP_MAX_SPAN (UINT64_C(1) << 40)
#define TP_MAX_CORRUPT (UINT64_C(1) << 20)

/* Chunk queue length: with 1-byte segments a full ring would need one entry
 * per byte, so reading stops while the queue is full (backpressure). */
#define TP_QCAP 4096

typedef struct tp_chunk {
    uint64_t end;    /* stream offset one past the chunk's last byte */
    int64_t release; /* earliest time (ns) it may be written */
} tp_chunk;

typedef struct tp_stats {
    uint64_t bytes;       /* written to the destination */
    uint64_t reads;       /* reads that returned data */
    uint64_t writes;      /* writes that took data */
    uint64_t merged;      /* chunks holding bytes of more than one read */
    uint64_t corruptions; /* corrupted bytes written */
    uint64_t min_write;   /* smallest and largest write (0 when none) */
    uint64_t max_write;
} tp_stats;

/* Called once per corrupted byte as it is written, in stream order. */
typedef void tp_corrupt_fn(void *ctx, uint64_t off, unsigned bit, uint8_t old_byte,
                           uint8_t new_byte);

typedef struct tp_dir {
    tp_faults f;
    uint8_t *buf;
    size_t cap;
    /* Stream offsets: [wr, rd) is in the ring; [wr, cut) is in chunks. */
    uint64_t rd, wr, cut;
    uint64_t last_read_start;
    int64_t last_read_time;
    int64_t pending_since; /* arrival time of byte `cut`, when cut < rd */
    int64_t last_release;  /* chunks never overtake: releases are monotonic */
    uint64_t next_cut;     /* split: end of the next planned segment */
    bool eof;
    tp_rng seg_rng, delay_rng;
    /* One plan flips bytes as they arrive, a copy replays it as they leave,
     * so only corruptions that were really written get reported. */
    tp_plan apply, report;
    tp_chunk q[TP_QCAP];
    size_t qhead, qlen;
    tp_stats st;
} tp_dir;

/* Sets up d with a ring of cap bytes (allocated here) and a copy of f (NULL:
 * no faults), seeding every generator from seed. Returns 0, or -1 when out of
 * memory. f must already be valid (max_seg <= cap etc.: the CLI checks). */
int tp_dir_init(tp_dir *d, const tp_faults *f, size_t cap, uint64_t seed);
void tp_dir_free(tp_dir *d);

/* Free ring space as up to two iovecs (*niov set to 0..2); returns its size.
 * 0 when the ring or the chunk queue is full, or after EOF. */
size_t tp_dir_read_space(const tp_dir *d, struct iovec iov[2], int *niov);

/* n bytes (n > 0) were read into the space from tp_dir_read_space(). */
void tp_dir_received(tp_dir *d, size_t n, int64_t now);

/* The source sent FIN: what is held is flushed without waiting. */
void tp_dir_set_eof(tp_dir *d, int64_t now);

/* Turns arrived bytes into chunks (called by the two above; call it again
 * when a deadline from tp_dir_deadline() passes). */
void tp_dir_schedule(tp_dir *d, int64_t now);

/* What may be written now: the rest of the first chunk if its release time
 * has come, as up to two iovecs. Returns the byte count (0: nothing). */
size_t tp_dir_ready(const tp_dir *d, int64_t now, struct iovec iov[2], int *niov);

/* n bytes (n > 0) of the tp_dir_ready() iovecs were written; reports the
 * corruptions among them through fn (may be NULL). */
void tp_dir_sent(tp_dir *d, size_t n, tp_corrupt_fn *fn, void *ctx);

/* When to call tp_dir_schedule() and tp_dir_ready() again: the release time
 * of the first chunk if still to come; a time <= now if tp_dir_schedule()
 * would form a chunk (e.g. a --split hold ended); INT64_MAX if nothing waits. */
int64_t tp_dir_deadline(const tp_dir *d, int64_t now);

/* EOF seen and every byte written: time to shut down the destination. */
bool tp_dir_finished(const tp_dir *d);

#endif
