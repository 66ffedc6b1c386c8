/* Terminate codes (RFC 5040 7.4 for the layer field and RDMAP, RFC 5041 7.2
 * for DDP, RFC 5044 8 and RFC 6581 8 for MPA, the LLP) and the one mapping
 * from uwarp's internal errors to them. Plain constant data: any layer may
 * use it. uw_mpa_error_code(), uw_mpa_error_name() (uwarp/mpa.h) and
 * uw_term_describe() (uwarp/verbs.h) are implemented here too. */
#ifndef UW_UTIL_TERM_TABLE_H
#define UW_UTIL_TERM_TABLE_H

#include <stdbool.h>

#include "uwarp/mpa.h"
#include "uwarp/verbs.h"

/* Error types. RDMAP (RFC 5040 7.4); DDP (RFC 5041 7.2); the LLP has one. */
enum {
    UW__ET_LOCAL_CATASTROPHIC = 0,
    UW__ET_RDMAP_REMOTE_PROTECTION = 1,
    UW__ET_RDMAP_REMOTE_OPERATION = 2,
    UW__ET_DDP_TAGGED = 1,
    UW__ET_DDP_UNTAGGED = 2,
    UW__ET_LLP = 0,
};

/* RDMAP error codes (RFC 5040 7.4: protection 0x00-0x04, 0x09; operation
 * 0x05-0x08; 0xFF unspecified in both). */
enum {
    UW__RDMAP_INVALID_STAG = 0x00,
    UW__RDMAP_BASE_BOUNDS = 0x01,
    UW__RDMAP_ACCESS_RIGHTS = 0x02,
    UW__RDMAP_STAG_NOT_THIS_STREAM = 0x03,
    UW__RDMAP_TO_WRAP = 0x04,
    UW__RDMAP_INVALID_VERSION = 0x05,
    UW__RDMAP_UNEXPECTED_OPCODE = 0x06,
    UW__RDMAP_CATASTROPHIC_STREAM = 0x07,
    UW__RDMAP_CATASTROPHIC_GLOBAL = 0x08,
    UW__RDMAP_CANNOT_INVALIDATE = 0x09,
    UW__RDMAP_UNSPECIFIED = 0xFF,
};

/* DDP error codes (RFC 5041 7.2): tagged buffer 0x00-0x04, untagged
 * buffer 0x01-0x06. */
enum {
    UW__DDP_T_INVALID_STAG = 0x00,
    UW__DDP_T_BASE_BOUNDS = 0x01,
    UW__DDP_T_STAG_NOT_THIS_STREAM = 0x02,
    UW__DDP_T_TO_WRAP = 0x03,
    UW__DDP_T_INVALID_VERSION = 0x04,
    UW__DDP_U_INVALID_QN = 0x01,
    UW__DDP_U_INVALID_MSN_NO_BUFFER = 0x02,
    UW__DDP_U_INVALID_MSN_RANGE = 0x03,
    UW__DDP_U_INVALID_MO = 0x04,
    UW__DDP_U_MSG_TOO_LONG = 0x05,
    UW__DDP_U_INVALID_VERSION = 0x06,
};

/* The LLP's codes are enum uw_mpa_errcode (uwarp/mpa.h). */

/* True when (layer, etype, ecode) is a combination the RFCs define. */
bool uw__term_valid(uw_term t);

/* The Terminate a local receive fault err (UW_E*) is reported with; tagged
 * picks between the two codes of an error DDP reports per buffer model.
 * Errors without a row: RDMAP remote operation, unspecified. */
uw_term uw__term_for_error(int err, bool tagged);

#endif
