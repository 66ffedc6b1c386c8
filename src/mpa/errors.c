/* The one mapping from internal error codes to MPA wire error codes. */
#include "uwarp/mpa.h"

int uw_mpa_error_code(int err)
{
    switch (err) {
    case UW_EMPA_TRUNCATED:
    case UW_ECONNRESET:
        return UW_MPA_ERR_TCP_LOST;
    case UW_EMPA_CRC:
    case UW_EMPA_ULPDU_TOO_LONG: /* an FPDU we cannot validate is an invalid FPDU (RFC 5044 4.4) */
        return UW_MPA_ERR_CRC;
    case UW_EMPA_MARKER:
        return UW_MPA_ERR_MARKER;
    case UW_EMPA_KEY:
    case UW_EMPA_ROLE:
    case UW_EMPA_PD_LENGTH:
    case UW_EMPA_PD_BUFFER:
    case UW_EMPA_ENH_WORD:
    case UW_EMPA_REV:
    case UW_EMPA_NOT_ENHANCED:
    case UW_EMPA_ENH_UNEXPECTED:
    case UW_EMPA_TRUNCATED_FRAME:
        return UW_MPA_ERR_BAD_FRAME;
    case UW_EMPA_IRD:
        return UW_MPA_ERR_IRD;
    case UW_EMPA_RTR:
        return UW_MPA_ERR_RTR;
    default:
        return 0;
    }
}

const char *uw_mpa_error_name(int err)
{
    switch (err) {
    case UW_EMPA_TRUNCATED:
        return "truncated";
    case UW_ECONNRESET:
        return "tcp_lost";
    case UW_EMPA_CRC:
        return "crc_mismatch";
    case UW_EMPA_ULPDU_TOO_LONG:
        return "ulpdu_too_long";
    case UW_EMPA_MARKER:
        return "marker_mismatch";
    case UW_EMPA_KEY:
        return "bad_key";
    case UW_EMPA_ROLE:
        return "wrong_role";
    case UW_EMPA_PD_LENGTH:
        return "pd_length_over_512";
    case UW_EMPA_PD_BUFFER:
        return "pd_over_buffer";
    case UW_EMPA_ENH_WORD:
        return "missing_enhanced_word";
    case UW_EMPA_REV:
        return "unsupported_revision";
    case UW_EMPA_NOT_ENHANCED:
        return "reply_not_enhanced";
    case UW_EMPA_ENH_UNEXPECTED:
        return "reply_unexpectedly_enhanced";
    case UW_EMPA_TRUNCATED_FRAME:
        return "truncated_frame";
    case UW_EMPA_IRD:
        return "insufficient_ird";
    case UW_EMPA_RTR:
        return "no_matching_rtr";
    default:
        return "error";
    }
}
