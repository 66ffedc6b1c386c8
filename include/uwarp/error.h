/* uwarp error codes.
 *
 * Every uwarp function that can fail returns 0 (or a non-negative count) on
 * success and a negative UW_E* code on failure. System-like errors reuse the
 * negative errno value; uwarp-specific protocol errors live in the -4000 range
 * so they can never collide with errno. uw_strerror() gives a sentence for
 * people, uw_err_name() a stable identifier for logs and JSON.
 *
 * Thread-safety: all functions here are pure and may be called from any
 * thread. Returned strings are static and must not be freed (with a C
 * library older than glibc 2.32, the C library's message for a raw errno
 * value lives in a per-thread buffer until that thread's next call).
 */
#ifndef UWARP_ERROR_H
#define UWARP_ERROR_H

#ifdef __cplusplus
extern "C" {
#endif

/* Exported from libuwarp.so, which is built with -fvisibility=hidden. */
#pragma GCC visibility push(default)

/* X(name, value, message) */
#define UW_ERRNO_MAP(X)                                                                            \
    X(EPERM, -1, "operation not permitted")                                                        \
    X(ENOENT, -2, "no such object")                                                                \
    X(EPIPE, -32, "connection closed")                                                             \
    X(EAGAIN, -11, "more input is needed")                                                         \
    X(ENOMEM, -12, "out of memory")                                                                \
    X(EBUSY, -16, "object is busy")                                                                \
    X(EINVAL, -22, "invalid argument")                                                             \
    X(ERANGE, -34, "value out of range")                                                           \
    X(ENOSYS, -38, "not implemented")                                                              \
    X(EPROTO, -71, "protocol error")                                                               \
    X(EMSGSIZE, -90, "message too long")                                                           \
    X(EADDRINUSE, -98, "address already in use")                                                   \
    X(ECONNABORTED, -103, "connection aborted")                                                    \
    X(ENOBUFS, -105, "no buffer space: the configured memory cap was reached")                     \
    X(ECONNRESET, -104, "connection reset by peer")                                                \
    X(ETIMEDOUT, -110, "timed out")                                                                \
    X(ENOTCONN, -107, "not connected")                                                             \
    X(ECONNREFUSED, -111, "connection refused or rejected by the peer")                            \
    X(EHOSTUNREACH, -113, "no route to host")                                                      \
    X(EALREADY, -114, "operation already in progress")                                             \
    X(ECANCELED, -125, "operation canceled (flushed)")                                             \
    /* RFC 5044 section 8 receive errors, reported by the FPDU decoders. */                        \
    X(EMPA_TRUNCATED, -4001, "MPA stream ended inside an FPDU (RFC 5044 error 1)")                 \
    X(EMPA_CRC, -4002, "MPA CRC32c mismatch (RFC 5044 error 2)")                                   \
    X(EMPA_MARKER, -4003, "MPA marker does not point at the FPDU start (RFC 5044 error 3)")        \
    X(EMPA_ULPDU_TOO_LONG, -4004, "ULPDU_Length exceeds the receiver's maximum (invalid FPDU)")    \
    /* Startup frames (RFC 5044 7.1, RFC 6581 6 and 9); Terminate code 4 unless noted. */          \
    X(EMPA_KEY, -4010, "MPA startup frame has an invalid key")                                     \
    X(EMPA_ROLE, -4011, "MPA peer has the same role (Initiator/Initiator or Responder/Responder)") \
    X(EMPA_PD_LENGTH, -4012, "MPA PD_Length exceeds 512 octets")                                   \
    X(EMPA_PD_BUFFER, -4013, "MPA private data is larger than the receiving buffer")               \
    X(EMPA_ENH_WORD, -4014, "MPA frame sets S but carries no RFC 6581 IRD/ORD word")               \
    X(EMPA_REV, -4015, "MPA revision not supported")                                               \
    X(EMPA_NOT_ENHANCED, -4016, "MPA reply to an enhanced request is not enhanced")                \
    X(EMPA_IRD, -4017, "insufficient IRD resources (Terminate code 6)")                            \
    X(EMPA_RTR, -4018, "no matching RTR option (Terminate code 7)")                                \
    X(EMPA_TRUNCATED_FRAME, -4019, "MPA startup frame is incomplete")                              \
    X(EMPA_ENH_UNEXPECTED, -4020, "MPA reply is enhanced but the request was not")                 \
    X(EMPA_RTR_MISSING, -4021, "peer-to-peer: the first message was not the negotiated RTR")       \
    /* DDP (RFC 5041 7.2) and RDMAP (RFC 5040 7.1) receive faults; each maps to one Terminate. */  \
    X(EDDP_STAG, -4100, "DDP: invalid STag")                                                       \
    X(EDDP_BOUNDS, -4101, "DDP: base or bounds violation")                                         \
    X(EDDP_PD, -4102, "DDP: STag not associated with this stream (protection domain)")             \
    X(EDDP_TO_WRAP, -4103, "DDP: tagged offset wraps")                                             \
    X(EDDP_VERSION, -4104, "DDP: invalid DDP version")                                             \
    X(EDDP_QN, -4105, "DDP: invalid queue number")                                                 \
    X(EDDP_NOBUF, -4106, "DDP: no receive buffer posted (invalid MSN)")                            \
    X(EDDP_MSN, -4107, "DDP: MSN out of range")                                                    \
    X(EDDP_MO, -4108, "DDP: invalid message offset")                                               \
    X(EDDP_TOO_LONG, -4109, "DDP: message too long for the receive buffer")                        \
    X(EDDP_HDR, -4110, "DDP: segment shorter than its header")                                     \
    X(ERDMAP_ACCESS, -4120, "RDMAP: access rights violation")                                      \
    X(ERDMAP_VERSION, -4121, "RDMAP: invalid RDMAP version")                                       \
    X(ERDMAP_OPCODE, -4122, "RDMAP: unexpected opcode")                                            \
    X(ERDMAP_INVALIDATE, -4123, "RDMAP: STag cannot be invalidated")                               \
    X(ERDMAP_IRD, -4124, "RDMAP: RDMA Read Request beyond the negotiated IRD")                     \
    X(ERDMAP_STAG, -4125, "RDMAP: invalid STag in an RDMA Read Request")                           \
    X(ERDMAP_BOUNDS, -4126, "RDMAP: base or bounds violation in an RDMA Read Request")             \
    X(ERDMAP_PD, -4127, "RDMAP: STag not associated with this stream")                             \
    X(ERDMAP_TO_WRAP, -4128, "RDMAP: tagged offset wraps")                                         \
    X(ERDMAP_UNEXPECTED, -4129, "RDMAP: response without a matching request")                      \
    X(ETERM_RECEIVED, -4130, "the peer sent a Terminate")                                          \
    X(ELOCAL_CATASTROPHIC, -4131, "local catastrophic error")

enum uw_error {
#define UW__ERR_ENUM(name, value, msg) UW_##name = (value),
    UW_ERRNO_MAP(UW__ERR_ENUM)
#undef UW__ERR_ENUM
};

/* A human-readable sentence for err. A negative errno value that is not
 * one of the codes above (-EMFILE, -EACCES, ...) gets the C library's
 * message; anything else "unknown error". */
const char *uw_strerror(int err);

/* A stable identifier: the enum name without its "UW_" prefix, such as
 * "EMPA_CRC"; "OK" for 0 and "UNKNOWN" otherwise. */
const char *uw_err_name(int err);

#pragma GCC visibility pop

#ifdef __cplusplus
}
#endif
#endif
