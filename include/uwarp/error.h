/* uwarp error codes.
 *
 * Every uwarp function that can fail returns 0 (or a non-negative count) on
 * success and a negative UW_E* code on failure. System-like errors reuse the
 * negative errno value; uwarp-specific protocol errors live in the -4000 range
 * so they can never collide with errno. uw_strerror() gives a sentence for
 * people, uw_err_name() a stable identifier for logs and JSON.
 *
 * Thread-safety: all functions here are pure and may be called from any
 * thread. Returned strings are static and must not be freed.
 */
#ifndef UWARP_ERROR_H
#define UWARP_ERROR_H

#ifdef __cplusplus
extern "C" {
#endif

/* X(name, value, message) */
#define UW_ERRNO_MAP(X)                                                                            \
    X(EPERM, -1, "operation not permitted")                                                        \
    X(EAGAIN, -11, "more input is needed")                                                         \
    X(ENOMEM, -12, "out of memory")                                                                \
    X(EBUSY, -16, "object is busy")                                                                \
    X(EINVAL, -22, "invalid argument")                                                             \
    X(ERANGE, -34, "value out of range")                                                           \
    X(ENOSYS, -38, "not implemented")                                                              \
    X(EPROTO, -71, "protocol error")                                                               \
    X(EMSGSIZE, -90, "message too long")                                                           \
    X(ENOBUFS, -105, "no buffer space: the configured memory cap was reached")                     \
    X(ECONNRESET, -104, "connection reset by peer")                                                \
    X(ETIMEDOUT, -110, "timed out")                                                                \
    X(ECONNREFUSED, -111, "connection rejected by the peer")                                       \
    /* RFC 5044 section 8 receive errors, reported by the FPDU decoders. */                        \
    X(EMPA_TRUNCATED, -4001, "MPA stream ended inside an FPDU (RFC 5044 error 1)")                  \
    X(EMPA_CRC, -4002, "MPA CRC32c mismatch (RFC 5044 error 2)")                                    \
    X(EMPA_MARKER, -4003, "MPA marker does not point at the FPDU start (RFC 5044 error 3)")        \
    X(EMPA_ULPDU_TOO_LONG, -4004, "ULPDU_Length exceeds the receiver's maximum (invalid FPDU)")   \
    /* Startup frames (RFC 5044 7.1, RFC 6581 6 and 9); Terminate code 4 unless noted. */           \
    X(EMPA_KEY, -4010, "MPA startup frame has an invalid key")                                      \
    X(EMPA_ROLE, -4011, "MPA peer has the same role (Initiator/Initiator or Responder/Responder)")  \
    X(EMPA_PD_LENGTH, -4012, "MPA PD_Length exceeds 512 octets")                                    \
    X(EMPA_PD_BUFFER, -4013, "MPA private data is larger than the receiving buffer")               \
    X(EMPA_ENH_WORD, -4014, "MPA frame sets S but carries no RFC 6581 IRD/ORD word")                \
    X(EMPA_REV, -4015, "MPA revision not supported")                                                \
    X(EMPA_NOT_ENHANCED, -4016, "MPA reply to an enhanced request is not enhanced")                 \
    X(EMPA_IRD, -4017, "insufficient IRD resources (Terminate code 6)")                             \
    X(EMPA_RTR, -4018, "no matching RTR option (Terminate code 7)")                                 \
    X(EMPA_TRUNCATED_FRAME, -4019, "MPA startup frame is incomplete")                           \
    X(EMPA_ENH_UNEXPECTED, -4020, "MPA reply is enhanced but the request was not")

enum uw_error {
#define UW__ERR_ENUM(name, value, msg) UW_##name = (value),
    UW_ERRNO_MAP(UW__ERR_ENUM)
#undef UW__ERR_ENUM
};

/* A human-readable sentence for err; "unknown error" for unknown codes. */
const char *uw_strerror(int err);

/* A stable identifier: the enum name without its "UW_" prefix, such as
 * "EMPA_CRC"; "OK" for 0 and "UNKNOWN" otherwise. */
const char *uw_err_name(int err);

#ifdef __cplusplus
}
#endif
#endif
