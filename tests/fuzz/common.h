/* Helpers shared by the libFuzzer targets and the seed generator: an input
 * reader, a PRNG for chunk splits and generated payloads, a byte-at-a-time
 * reference FPDU decoder (an independent oracle for uw_mpa_rx and uw_mpa_ooo)
 * and a log of decoded ULPDUs to compare runs.
 *
 * Every check failure goes through FZ_CHECK, which prints where and aborts so
 * libFuzzer (or the replay program) reports a crash with the input. */
#ifndef UW_FUZZ_COMMON_H
#define UW_FUZZ_COMMON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/uio.h>

#include "uwarp/common.h"

/* libFuzzer's entry point, defined by each target. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

void fz_fail(const char *file, int line, const char *what);
#define FZ_CHECK(cond)                          \
    do {                                        \
        if (!(cond))                            \
            fz_fail(__FILE__, __LINE__, #cond); \
    } while (0)

/* UW_FUZZ_DEBUG set in the environment: targets print what they do (for
 * diagnosing a reproducer with the replay program). */
bool fz_debug(void);
#define FZ_DEBUG(...)                     \
    do {                                  \
        if (fz_debug())                   \
            fprintf(stderr, __VA_ARGS__); \
    } while (0)

/* ------------------------------------------------------------------------ */
/* Input reader: reads past the end give zeros, so every input is usable.    */

typedef struct fz_in {
    const uint8_t *p;
    size_t n, off;
} fz_in;

void fz_in_init(fz_in *in, const uint8_t *p, size_t n);
uint8_t fz_u8(fz_in *in);
uint16_t fz_u16(fz_in *in); /* big-endian */
uint32_t fz_u32(fz_in *in); /* big-endian */
size_t fz_left(const fz_in *in);
/* Takes up to *n octets (fewer at the end); returns their address. */
const uint8_t *fz_take(fz_in *in, size_t *n);

/* ------------------------------------------------------------------------ */
/* PRNG (splitmix64): chunk sizes and generated payload.                     */

typedef struct fz_rng {
    uint64_t s;
} fz_rng;

void fz_rng_init(fz_rng *r, uint64_t seed);
uint64_t fz_rng_next(fz_rng *r);
uint64_t fz_rng_below(fz_rng *r, uint64_t n); /* [0, n), n > 0 */
void fz_rng_fill(fz_rng *r, uint8_t *buf, size_t len);

/* A chunk length in [1, left] (left > 0): one octet a quarter of the time,
 * then small, medium (around markers) and large. */
size_t fz_chunk(fz_rng *r, size_t left);

/* Stream position from a 3-bit mode and a raw value: 0, raw, just before
 * 2^32, near a marker boundary, 0x1ec (RFC 5044 Figure 6), aligned, small,
 * up to 70000 before 2^32. */
#define FZ_POS_MODES 8u
uint32_t fz_pick_pos(unsigned mode, uint32_t raw);

/* ------------------------------------------------------------------------ */
/* Reference CRC32c and FPDU geometry (bit by bit, no tables shared with the
 * library).                                                                 */

uint32_t fz_crc32c(uint32_t state, const uint8_t *p, size_t n); /* raw register */

/* Wire length of an FPDU of n ULPDU octets at pos and the largest distance
 * from its ULPDU_Length field to a (non-leading) marker inside it. */
size_t fz_ref_wire_len(uint32_t pos, uint32_t n, bool markers, uint32_t *max_marker_off);

/* ------------------------------------------------------------------------ */
/* ULPDU log                                                                 */

typedef struct fz_rec {
    uint32_t pos, len, crc;
    size_t off; /* into data */
} fz_rec;

typedef struct fz_log {
    fz_rec *rec;
    size_t n, cap;
    uint8_t *data;
    size_t dlen, dcap;
} fz_log;

void fz_log_init(fz_log *l);
void fz_log_free(fz_log *l);
void fz_log_add(fz_log *l, uint32_t pos, uint32_t len, uint32_t crc, const struct iovec *iov,
                size_t iovcnt);
void fz_log_add_flat(fz_log *l, uint32_t pos, uint32_t len, uint32_t crc, const uint8_t *p);
/* Equal record by record (positions, lengths, payload; CRC when with_crc). */
bool fz_log_equal(const fz_log *a, const fz_log *b, bool with_crc);
bool fz_rec_equal(const fz_log *a, size_t i, const fz_log *b, size_t j, bool with_crc);

/* ------------------------------------------------------------------------ */
/* Reference decoder                                                         */

typedef struct fz_ref_result {
    int err;          /* 0, or UW_EMPA_* incl. UW_EMPA_TRUNCATED when the stream ends inside
                         an FPDU */
    uint32_t err_pos; /* position of the FPDU the error was found in */
    size_t good_end;  /* offset after the last complete, valid FPDU */
} fz_ref_result;

/* Decodes s[0..n) (stream position pos) one octet at a time, adding every
 * valid ULPDU to log, and stops at the first error as RFC 5044 8 wants.
 * max_ulpdu 0 means 65535. With repair, FPDUs whose bit in the repair PRNG
 * comes up get their markers and CRC field rewritten in s (so the fuzzer's
 * random bytes turn into valid FPDUs) before they are read. */
void fz_ref_decode(uint8_t *s, size_t n, uint32_t pos, unsigned flags, uint32_t max_ulpdu,
                   fz_rng *repair, fz_log *log, fz_ref_result *res);

/* ------------------------------------------------------------------------ */
/* An allocator that fails the Nth allocation (1-based; 0 = never).          */

typedef struct fz_failalloc {
    uw_allocator a;
    unsigned long count, fail_at;
} fz_failalloc;

void fz_failalloc_init(fz_failalloc *f, unsigned long fail_at);

/* Builds a ULPDU list into a stream for the round-trip and OOO targets.
 * Record format (from in): a byte b; b < 0xF0: a literal ULPDU of b octets
 * taken from the input; else a 16-bit length follows and the payload is
 * generated (zeros when b is 0xF0, PRNG otherwise). */
typedef struct fz_ulpdus {
    size_t count;
    uint32_t *len;
    size_t *off; /* into data */
    uint8_t *data;
    size_t total;
} fz_ulpdus;

void fz_ulpdus_read(fz_ulpdus *u, fz_in *in, fz_rng *r, size_t max_count, size_t max_total);
void fz_ulpdus_free(fz_ulpdus *u);

#endif
