/* The Terminate tables (term_table.h): the codes the RFCs define with
 * their text, and uwarp's errors with the code each is reported with. */
#include <stddef.h>

#include "util/term_table.h"

#define RDMAP UW_TERM_RDMAP
#define DDP UW_TERM_DDP
#define LLP UW_TERM_LLP

static const struct code_row {
    uint8_t layer, etype, ecode;
    const char *text;
} codes[] = {
    {RDMAP, UW__ET_LOCAL_CATASTROPHIC, 0, "RDMAP: local catastrophic"},
    {RDMAP, UW__ET_RDMAP_REMOTE_PROTECTION, UW__RDMAP_INVALID_STAG, "RDMAP: invalid STag"},
    {RDMAP, UW__ET_RDMAP_REMOTE_PROTECTION, UW__RDMAP_BASE_BOUNDS,
     "RDMAP: base or bounds violation"},
    {RDMAP, UW__ET_RDMAP_REMOTE_PROTECTION, UW__RDMAP_ACCESS_RIGHTS,
     "RDMAP: access rights violation"},
    {RDMAP, UW__ET_RDMAP_REMOTE_PROTECTION, UW__RDMAP_STAG_NOT_THIS_STREAM,
     "RDMAP: STag not associated with this stream"},
    {RDMAP, UW__ET_RDMAP_REMOTE_PROTECTION, UW__RDMAP_TO_WRAP, "RDMAP: TO wrap"},
    {RDMAP, UW__ET_RDMAP_REMOTE_PROTECTION, UW__RDMAP_CANNOT_INVALIDATE,
     "RDMAP: STag cannot be invalidated"},
    {RDMAP, UW__ET_RDMAP_REMOTE_PROTECTION, UW__RDMAP_UNSPECIFIED,
     "RDMAP remote protection: unspecified"},
    {RDMAP, UW__ET_RDMAP_REMOTE_OPERATION, UW__RDMAP_INVALID_VERSION,
     "RDMAP: invalid RDMAP version"},
    {RDMAP, UW__ET_RDMAP_REMOTE_OPERATION, UW__RDMAP_UNEXPECTED_OPCODE, "RDMAP: unexpected opcode"},
    {RDMAP, UW__ET_RDMAP_REMOTE_OPERATION, UW__RDMAP_CATASTROPHIC_STREAM,
     "RDMAP: catastrophic error localized to this stream"},
    {RDMAP, UW__ET_RDMAP_REMOTE_OPERATION, UW__RDMAP_CATASTROPHIC_GLOBAL,
     "RDMAP: catastrophic error, global"},
    {RDMAP, UW__ET_RDMAP_REMOTE_OPERATION, UW__RDMAP_UNSPECIFIED,
     "RDMAP remote operation: unspecified"},
    {DDP, UW__ET_LOCAL_CATASTROPHIC, 0, "DDP: local catastrophic"},
    {DDP, UW__ET_DDP_TAGGED, UW__DDP_T_INVALID_STAG, "DDP tagged buffer: invalid STag"},
    {DDP, UW__ET_DDP_TAGGED, UW__DDP_T_BASE_BOUNDS, "DDP tagged buffer: base or bounds violation"},
    {DDP, UW__ET_DDP_TAGGED, UW__DDP_T_STAG_NOT_THIS_STREAM,
     "DDP tagged buffer: STag not associated with this stream"},
    {DDP, UW__ET_DDP_TAGGED, UW__DDP_T_TO_WRAP, "DDP tagged buffer: TO wrap"},
    {DDP, UW__ET_DDP_TAGGED, UW__DDP_T_INVALID_VERSION, "DDP tagged buffer: invalid DDP version"},
    {DDP, UW__ET_DDP_UNTAGGED, UW__DDP_U_INVALID_QN, "DDP untagged buffer: invalid QN"},
    {DDP, UW__ET_DDP_UNTAGGED, UW__DDP_U_INVALID_MSN_NO_BUFFER,
     "DDP untagged buffer: no buffer (invalid MSN)"},
    {DDP, UW__ET_DDP_UNTAGGED, UW__DDP_U_INVALID_MSN_RANGE,
     "DDP untagged buffer: MSN out of range"},
    {DDP, UW__ET_DDP_UNTAGGED, UW__DDP_U_INVALID_MO, "DDP untagged buffer: invalid MO"},
    {DDP, UW__ET_DDP_UNTAGGED, UW__DDP_U_MSG_TOO_LONG, "DDP untagged buffer: message too long"},
    {DDP, UW__ET_DDP_UNTAGGED, UW__DDP_U_INVALID_VERSION,
     "DDP untagged buffer: invalid DDP version"},
    {LLP, UW__ET_LLP, UW_MPA_ERR_TCP_LOST, "MPA: TCP connection lost"},
    {LLP, UW__ET_LLP, UW_MPA_ERR_CRC, "MPA: CRC error"},
    {LLP, UW__ET_LLP, UW_MPA_ERR_MARKER, "MPA: marker and ULPDU length disagree"},
    {LLP, UW__ET_LLP, UW_MPA_ERR_BAD_FRAME, "MPA: invalid Request or Reply frame"},
    {LLP, UW__ET_LLP, UW_MPA_ERR_LOCAL_CATASTROPHIC, "MPA: local catastrophic"},
    {LLP, UW__ET_LLP, UW_MPA_ERR_IRD, "MPA: insufficient IRD resources"},
    {LLP, UW__ET_LLP, UW_MPA_ERR_RTR, "MPA: no matching RTR option"},
};

/* One row per internal error that has a wire code. untagged: the code when
 * the fault hit an untagged buffer, where it differs (RFC 5041 7.2 reports
 * version errors per buffer model). name: the MPA error's short name. */
static const struct err_row {
    int err;
    uw_term term;
    uw_term untagged;
    const char *name;
} errs[] = {
#define ROW(e, l, t, c, n)                         \
    {                                              \
        (e), {(l), (t), (c)}, {(l), (t), (c)}, (n) \
    }
    ROW(UW_EMPA_TRUNCATED, LLP, UW__ET_LLP, UW_MPA_ERR_TCP_LOST, "truncated"),
    ROW(UW_ECONNRESET, LLP, UW__ET_LLP, UW_MPA_ERR_TCP_LOST, "tcp_lost"),
    ROW(UW_EMPA_CRC, LLP, UW__ET_LLP, UW_MPA_ERR_CRC, "crc_mismatch"),
    /* An FPDU whose length we cannot accept cannot be validated: an invalid
     * FPDU, reported as a CRC error (RFC 5044 4.4; docs/design.md). */
    ROW(UW_EMPA_ULPDU_TOO_LONG, LLP, UW__ET_LLP, UW_MPA_ERR_CRC, "ulpdu_too_long"),
    ROW(UW_EMPA_MARKER, LLP, UW__ET_LLP, UW_MPA_ERR_MARKER, "marker_mismatch"),
    ROW(UW_EMPA_KEY, LLP, UW__ET_LLP, UW_MPA_ERR_BAD_FRAME, "bad_key"),
    ROW(UW_EMPA_ROLE, LLP, UW__ET_LLP, UW_MPA_ERR_BAD_FRAME, "wrong_role"),
    ROW(UW_EMPA_PD_LENGTH, LLP, UW__ET_LLP, UW_MPA_ERR_BAD_FRAME, "pd_length_over_512"),
    ROW(UW_EMPA_PD_BUFFER, LLP, UW__ET_LLP, UW_MPA_ERR_BAD_FRAME, "pd_over_buffer"),
    ROW(UW_EMPA_ENH_WORD, LLP, UW__ET_LLP, UW_MPA_ERR_BAD_FRAME, "missing_enhanced_word"),
    ROW(UW_EMPA_REV, LLP, UW__ET_LLP, UW_MPA_ERR_BAD_FRAME, "unsupported_revision"),
    ROW(UW_EMPA_NOT_ENHANCED, LLP, UW__ET_LLP, UW_MPA_ERR_BAD_FRAME, "reply_not_enhanced"),
    ROW(UW_EMPA_ENH_UNEXPECTED, LLP, UW__ET_LLP, UW_MPA_ERR_BAD_FRAME,
        "reply_unexpectedly_enhanced"),
    ROW(UW_EMPA_TRUNCATED_FRAME, LLP, UW__ET_LLP, UW_MPA_ERR_BAD_FRAME, "truncated_frame"),
    ROW(UW_EMPA_IRD, LLP, UW__ET_LLP, UW_MPA_ERR_IRD, "insufficient_ird"),
    ROW(UW_EMPA_RTR, LLP, UW__ET_LLP, UW_MPA_ERR_RTR, "no_matching_rtr"),
    ROW(UW_EMPA_RTR_MISSING, LLP, UW__ET_LLP, UW_MPA_ERR_RTR, "rtr_missing"),
    ROW(UW_EDDP_STAG, DDP, UW__ET_DDP_TAGGED, UW__DDP_T_INVALID_STAG, NULL),
    ROW(UW_EDDP_BOUNDS, DDP, UW__ET_DDP_TAGGED, UW__DDP_T_BASE_BOUNDS, NULL),
    ROW(UW_EDDP_PD, DDP, UW__ET_DDP_TAGGED, UW__DDP_T_STAG_NOT_THIS_STREAM, NULL),
    ROW(UW_EDDP_TO_WRAP, DDP, UW__ET_DDP_TAGGED, UW__DDP_T_TO_WRAP, NULL),
    {UW_EDDP_VERSION,
     {DDP, UW__ET_DDP_TAGGED, UW__DDP_T_INVALID_VERSION},
     {DDP, UW__ET_DDP_UNTAGGED, UW__DDP_U_INVALID_VERSION},
     NULL},
    ROW(UW_EDDP_QN, DDP, UW__ET_DDP_UNTAGGED, UW__DDP_U_INVALID_QN, NULL),
    ROW(UW_EDDP_NOBUF, DDP, UW__ET_DDP_UNTAGGED, UW__DDP_U_INVALID_MSN_NO_BUFFER, NULL),
    ROW(UW_EDDP_MSN, DDP, UW__ET_DDP_UNTAGGED, UW__DDP_U_INVALID_MSN_RANGE, NULL),
    ROW(UW_EDDP_MO, DDP, UW__ET_DDP_UNTAGGED, UW__DDP_U_INVALID_MO, NULL),
    ROW(UW_EDDP_TOO_LONG, DDP, UW__ET_DDP_UNTAGGED, UW__DDP_U_MSG_TOO_LONG, NULL),
    ROW(UW_EDDP_HDR, DDP, UW__ET_LOCAL_CATASTROPHIC, 0, NULL),
    ROW(UW_ERDMAP_STAG, RDMAP, UW__ET_RDMAP_REMOTE_PROTECTION, UW__RDMAP_INVALID_STAG, NULL),
    ROW(UW_ERDMAP_BOUNDS, RDMAP, UW__ET_RDMAP_REMOTE_PROTECTION, UW__RDMAP_BASE_BOUNDS, NULL),
    ROW(UW_ERDMAP_ACCESS, RDMAP, UW__ET_RDMAP_REMOTE_PROTECTION, UW__RDMAP_ACCESS_RIGHTS, NULL),
    ROW(UW_ERDMAP_PD, RDMAP, UW__ET_RDMAP_REMOTE_PROTECTION, UW__RDMAP_STAG_NOT_THIS_STREAM, NULL),
    ROW(UW_ERDMAP_TO_WRAP, RDMAP, UW__ET_RDMAP_REMOTE_PROTECTION, UW__RDMAP_TO_WRAP, NULL),
    ROW(UW_ERDMAP_INVALIDATE, RDMAP, UW__ET_RDMAP_REMOTE_PROTECTION, UW__RDMAP_CANNOT_INVALIDATE,
        NULL),
    ROW(UW_ERDMAP_VERSION, RDMAP, UW__ET_RDMAP_REMOTE_OPERATION, UW__RDMAP_INVALID_VERSION, NULL),
    ROW(UW_ERDMAP_OPCODE, RDMAP, UW__ET_RDMAP_REMOTE_OPERATION, UW__RDMAP_UNEXPECTED_OPCODE, NULL),
    ROW(UW_ERDMAP_UNEXPECTED, RDMAP, UW__ET_RDMAP_REMOTE_OPERATION, UW__RDMAP_UNEXPECTED_OPCODE,
        NULL),
    /* Linux siw reports a Read beyond IRD as a stream-local catastrophe. */
    ROW(UW_ERDMAP_IRD, RDMAP, UW__ET_RDMAP_REMOTE_OPERATION, UW__RDMAP_CATASTROPHIC_STREAM, NULL),
    ROW(UW_ELOCAL_CATASTROPHIC, RDMAP, UW__ET_LOCAL_CATASTROPHIC, 0, NULL),
#undef ROW
};

static const struct code_row *code_of(uw_term t)
{
    for (size_t i = 0; i < sizeof(codes) / sizeof(codes[0]); i++)
        if (codes[i].layer == t.layer && codes[i].etype == t.etype && codes[i].ecode == t.ecode)
            return &codes[i];
    return NULL;
}

static const struct err_row *err_of(int err)
{
    for (size_t i = 0; i < sizeof(errs) / sizeof(errs[0]); i++)
        if (errs[i].err == err)
            return &errs[i];
    return NULL;
}

bool uw__term_valid(uw_term t)
{
    return code_of(t) != NULL;
}

const char *uw_term_describe(uw_term t)
{
    const struct code_row *c = code_of(t);
    return c ? c->text : "undefined Terminate code";
}

uw_term uw__term_for_error(int err, bool tagged)
{
    const struct err_row *e = err_of(err);
    if (!e)
        return (uw_term){RDMAP, UW__ET_RDMAP_REMOTE_OPERATION, UW__RDMAP_UNSPECIFIED};
    return tagged ? e->term : e->untagged;
}

int uw_mpa_error_code(int err)
{
    const struct err_row *e = err_of(err);
    return e && e->term.layer == LLP ? e->term.ecode : 0;
}

const char *uw_mpa_error_name(int err)
{
    const struct err_row *e = err_of(err);
    return e && e->name ? e->name : "error";
}
