/* CRC32c (Castagnoli), as used by MPA (RFC 5044 4.4) and iSCSI.
 *
 * The running state is the raw CRC register: start with uw_crc32c_init(),
 * fold data in with uw_crc32c_update() (any split gives the same result), and
 * finish with uw_crc32c_final(). The standard check value of "123456789" is
 * 0xE3069283. MPA transmits the final value least-significant octet first.
 *
 * uw_crc32c_update() picks the fastest implementation available on this CPU
 * for the given length at run time (from 1 KiB carry-less folding and crc32
 * instructions side by side, ISA-L for medium buffers, the SSE4.2 crc32
 * instruction for short ones, a portable table otherwise). The per-impl entry
 * points exist for benchmarks and cross-checking tests.
 *
 * Thread-safety: all functions are pure and reentrant.
 */
#ifndef UWARP_CRC32C_H
#define UWARP_CRC32C_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Exported from libuwarp.so, which is built with -fvisibility=hidden. */
#pragma GCC visibility push(default)

static inline uint32_t uw_crc32c_init(void)
{
    return 0xFFFFFFFFu;
}

static inline uint32_t uw_crc32c_final(uint32_t state)
{
    return state ^ 0xFFFFFFFFu;
}

/* Folds len octets of buf into state. buf may be NULL when len is 0. */
uint32_t uw_crc32c_update(uint32_t state, const void *buf, size_t len);

/* Folds every iovec in order into state. */
uint32_t uw_crc32c_update_iov(uint32_t state, const struct iovec *iov, size_t iovcnt);

/* One-shot standard CRC32c of buf. */
uint32_t uw_crc32c(const void *buf, size_t len);

typedef enum uw_crc32c_impl {
    UW_CRC32C_AUTO = 0,      /* what uw_crc32c_update() does */
    UW_CRC32C_TABLE,         /* portable slicing-by-8 */
    UW_CRC32C_SSE42,         /* one crc32 instruction stream, 8 octets a step */
    UW_CRC32C_SSE42_3WAY,    /* three interleaved crc32 streams joined with pclmul-free shifts */
    UW_CRC32C_ISAL,          /* Intel ISA-L crc32_iscsi */
    UW_CRC32C_HYBRID,        /* pclmulqdq folding beside three crc32 streams, one loop */
    UW_CRC32C_HYBRID_AVX512, /* the same, merging XORs with 128-bit AVX-512 vpternlogq */
    UW_CRC32C_IMPL_COUNT
} uw_crc32c_impl;

/* 1 if impl can run on this machine and build, else 0. */
int uw_crc32c_impl_available(uw_crc32c_impl impl);

/* Short lowercase name such as "isal". */
const char *uw_crc32c_impl_name(uw_crc32c_impl impl);

/* uw_crc32c_update() with a forced implementation. impl must be available. */
uint32_t uw_crc32c_update_impl(uw_crc32c_impl impl, uint32_t state, const void *buf, size_t len);

#pragma GCC visibility pop

#ifdef __cplusplus
}
#endif
#endif
