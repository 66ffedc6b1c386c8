/* `uwarp-mpa frame` and `uwarp-mpa parse-frame`: MPA startup frames
 * (RFC 5044 7.1.1 with the RFC 6581 9 word). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cliutil.h"
#include "mpa_cmds.h"
#include "uwarp/mpa.h"

#define FRAME_MAX (UW_MPA_FRAME_HDR_LEN + UW_MPA_MAX_PD)

/* Parses --p2p's comma-separated subset of send,write,read into RTR bits. */
static bool parse_rtr(const char *s, uint8_t *rtr)
{
    *rtr = 0;
    if (*s == '\0')
        return true; /* p2p without any RTR type: a legal request to show */
    for (;;) {
        const char *comma = strchr(s, ',');
        size_t n = comma ? (size_t)(comma - s) : strlen(s);
        if (n == 4 && strncmp(s, "send", 4) == 0)
            *rtr |= UW_MPA_RTR_SEND;
        else if (n == 5 && strncmp(s, "write", 5) == 0)
            *rtr |= UW_MPA_RTR_WRITE;
        else if (n == 4 && strncmp(s, "read", 4) == 0)
            *rtr |= UW_MPA_RTR_READ;
        else
            return false;
        if (!comma)
            return true;
        s = comma + 1;
    }
}

int cmd_frame(int argc, char **argv)
{
    int type = 0;
    bool markers = false, crc = true, reject = false;
    bool have_rev = false, have_ird = false, have_ord = false, have_p2p = false;
    uint32_t rev = 0, ird = UW_MPA_NO_NEGOTIATION, ord = UW_MPA_NO_NEGOTIATION;
    uint8_t rtr = 0;
    const char *pd_hex = NULL;

    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = NULL;
        int m;
        if (strcmp(a, "--req") == 0 || strcmp(a, "--rep") == 0) {
            int t = a[4] == 'q' ? UW_MPA_REQUEST : UW_MPA_REPLY;
            if (type && type != t)
                return cli_usage("--req and --rep exclude each other: a frame is a Request "
                                 "(Initiator) or a Reply (Responder)");
            type = t;
        } else if (strcmp(a, "--markers") == 0) {
            markers = true;
        } else if (strcmp(a, "--no-crc") == 0) {
            crc = false;
        } else if (strcmp(a, "--reject") == 0) {
            reject = true;
        } else if ((m = cli_opt(argc, argv, &i, "--rev", &v)) != 0) {
            if (m < 0)
                return CLI_EXIT_USAGE;
            if (!cli_parse_u32(v, &rev) || rev > 255)
                return cli_usage("bad --rev '%s': give a revision from 0 to 255 (MPA uses 1, "
                                 "or 2 for RFC 6581)",
                                 v);
            have_rev = true;
        } else if ((m = cli_opt(argc, argv, &i, "--ird", &v)) != 0) {
            if (m < 0)
                return CLI_EXIT_USAGE;
            if (!cli_parse_u32(v, &ird) || ird > UW_MPA_NO_NEGOTIATION)
                return cli_usage("bad --ird '%s': IRD is 14 bits, 0 to 16383 (0x3FFF means no "
                                 "automatic negotiation)",
                                 v);
            have_ird = true;
        } else if ((m = cli_opt(argc, argv, &i, "--ord", &v)) != 0) {
            if (m < 0)
                return CLI_EXIT_USAGE;
            if (!cli_parse_u32(v, &ord) || ord > UW_MPA_NO_NEGOTIATION)
                return cli_usage("bad --ord '%s': ORD is 14 bits, 0 to 16383 (0x3FFF means no "
                                 "automatic negotiation)",
                                 v);
            have_ord = true;
        } else if ((m = cli_opt(argc, argv, &i, "--p2p", &v)) != 0) {
            if (m < 0)
                return CLI_EXIT_USAGE;
            if (!parse_rtr(v, &rtr))
                return cli_usage("bad --p2p '%s': give a comma-separated subset of send,write,"
                                 "read (or '' for none)",
                                 v);
            have_p2p = true;
        } else if ((m = cli_opt(argc, argv, &i, "--pd", &v)) != 0) {
            if (m < 0)
                return CLI_EXIT_USAGE;
            pd_hex = v;
        } else if (a[0] == '-') {
            return cli_usage("unknown option '%s'", a);
        } else {
            return cli_usage("unexpected argument '%s'", a);
        }
    }

    if (!type)
        return cli_usage("say which frame to build: --req (MPA Request) or --rep (MPA Reply)");
    if (reject && type == UW_MPA_REQUEST)
        return cli_usage("--reject needs --rep: only a Reply can reject (RFC 5044 7.1.1, R bit)");
    bool enhanced = have_ird || have_ord || have_p2p;
    if (!have_rev)
        rev = enhanced ? 2 : 1;
    if (enhanced && rev < 2)
        return cli_usage("--ird/--ord/--p2p write the RFC 6581 word, which needs --rev 2 or "
                         "higher (got %lu)",
                         (unsigned long)rev);

    static uw_mpa_frame f;
    memset(&f, 0, sizeof(f));
    f.type = type;
    f.m = markers;
    f.c = crc;
    f.r = reject;
    f.rev = (uint8_t)rev;
    f.enhanced = enhanced;
    f.ird = (uint16_t)ird;
    f.ord = (uint16_t)ord;
    f.p2p = have_p2p;
    f.rtr = rtr;
    if (pd_hex) {
        size_t digits = strlen(pd_hex), bad = 0;
        uint8_t *tmp = malloc(digits / 2 + 1);
        if (!tmp) {
            cli_msg("out of memory for --pd");
            return CLI_EXIT_IO;
        }
        ssize_t n = cli_unhex(pd_hex, digits, tmp, &bad);
        if (n < 0) {
            free(tmp);
            if (bad == digits)
                return cli_usage("bad --pd: odd number of hex digits (%zu); give the private "
                                 "data as two hex digits per octet",
                                 digits);
            return cli_usage("bad --pd: character %zu is not a hex digit; give the private data "
                             "in hex (0-9, a-f, A-F)",
                             bad + 1);
        }
        if ((size_t)n > UW_MPA_MAX_PD) {
            free(tmp);
            cli_msg("--pd has %zd octets: %s; RFC 5044 7.1.1 allows at most 512 octets of "
                    "private data%s",
                    n, uw_strerror(UW_EMPA_PD_LENGTH),
                    enhanced ? ", 508 besides the RFC 6581 word" : "");
            return CLI_EXIT_PROTO;
        }
        memcpy(f.ulp_pd, tmp, (size_t)n);
        f.ulp_pd_len = (uint16_t)n;
        free(tmp);
    }

    uint8_t buf[FRAME_MAX];
    ssize_t len = uw_mpa_frame_encode(&f, buf, sizeof(buf));
    if (len < 0) {
        if (len == UW_EMPA_PD_LENGTH)
            cli_msg("cannot build the frame: %s; with the RFC 6581 word, at most 508 octets of "
                    "ULP private data fit (--pd has %u)",
                    uw_strerror((int)len), (unsigned)f.ulp_pd_len);
        else
            cli_msg("cannot build the frame: %s", uw_strerror((int)len));
        return CLI_EXIT_PROTO;
    }
    if (cli_write_all(STDOUT_FILENO, buf, (size_t)len) < 0) {
        cli_msg("cannot write the output: %s", strerror(errno));
        return CLI_EXIT_IO;
    }
    return CLI_EXIT_OK;
}

/* ------------------------------------------------------------------------ */
/* parse-frame                                                               */

static const char *jbool(bool b)
{
    return b ? "true" : "false";
}

static void frame_json(cli_out *o, const uw_mpa_frame *f)
{
    char tmp[160];
    snprintf(tmp, sizeof(tmp),
             "{\"key\":\"%s\",\"m\":%s,\"c\":%s,\"r\":%s,\"s\":%s,\"rev\":%u,\"pd_length\":%u,",
             f->type == UW_MPA_REQUEST ? "req" : "rep", jbool(f->m), jbool(f->c), jbool(f->r),
             jbool(f->s), (unsigned)f->rev, (unsigned)f->pd_length);
    out_str(o, tmp);
    if (f->enhanced)
        snprintf(tmp, sizeof(tmp), "\"ird\":%u,\"ord\":%u,\"a\":%s,\"b\":%s,\"c_rtr\":%s,\"d\":%s,",
                 (unsigned)f->ird, (unsigned)f->ord, jbool(f->p2p), jbool(f->rtr & UW_MPA_RTR_SEND),
                 jbool(f->rtr & UW_MPA_RTR_WRITE), jbool(f->rtr & UW_MPA_RTR_READ));
    else
        snprintf(tmp, sizeof(tmp),
                 "\"ird\":null,\"ord\":null,\"a\":null,\"b\":null,\"c_rtr\":null,\"d\":null,");
    out_str(o, tmp);
    out_str(o, "\"pd\":\"");
    out_hex(o, f->ulp_pd, f->ulp_pd_len);
    snprintf(tmp, sizeof(tmp), "\",\"res\":%u}\n", (unsigned)f->res);
    out_str(o, tmp);
}

static unsigned pd_length_of(const uint8_t *b, size_t len)
{
    return len >= UW_MPA_FRAME_HDR_LEN ? (unsigned)(b[18] << 8 | b[19]) : 0;
}

static int frame_invalid(int err, const uint8_t *b, size_t len)
{
    char hex[2 * 16 + 1];
    const char *hint;
    char detail[200];
    switch (err) {
    case UW_EMPA_KEY:
        cli_hex(hex, b, len < 16 ? len : 16);
        snprintf(detail, sizeof(detail),
                 "the first 16 octets must be \"MPA ID Req Frame\" or \"MPA ID Rep Frame\" "
                 "(got %s): check that the input starts at the MPA startup frame",
                 hex);
        hint = detail;
        break;
    case UW_EMPA_PD_LENGTH:
    case UW_EMPA_PD_BUFFER:
        snprintf(detail, sizeof(detail),
                 "PD_Length (octets 18-19) is %u, over the 512 octets RFC 5044 7.1.1 allows",
                 pd_length_of(b, len));
        hint = detail;
        break;
    case UW_EMPA_ENH_WORD:
        snprintf(detail, sizeof(detail),
                 "Rev %u with S set needs the 4-octet RFC 6581 IRD/ORD word, but PD_Length is %u",
                 len > 17 ? (unsigned)b[17] : 0u, pd_length_of(b, len));
        hint = detail;
        break;
    default:
        hint = "check that the input is one MPA Request or Reply frame";
        break;
    }
    cli_msg("invalid frame: %s (%s): %s", uw_strerror(err), uw_mpa_error_name(err), hint);
    return CLI_EXIT_PROTO;
}

int cmd_parse_frame(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (argv[i][0] == '-')
            return cli_usage("unknown option '%s'", argv[i]);
        return cli_usage("unexpected argument '%s': the frame comes from stdin", argv[i]);
    }

    /* Keep the largest possible frame and only count what follows it. */
    uint8_t buf[FRAME_MAX];
    size_t have = 0;
    unsigned long long extra = 0;
    uint8_t sink[4096];
    for (;;) {
        uint8_t *dst = have < sizeof(buf) ? buf + have : sink;
        size_t cap = have < sizeof(buf) ? sizeof(buf) - have : sizeof(sink);
        ssize_t n = cli_read_some(STDIN_FILENO, dst, cap);
        if (n < 0) {
            cli_msg("cannot read stdin: %s", strerror(errno));
            return CLI_EXIT_IO;
        }
        if (n == 0)
            break;
        if (dst == sink)
            extra += (unsigned long long)n;
        else
            have += (size_t)n;
    }

    static uw_mpa_frame f;
    ssize_t len = uw_mpa_frame_decode(buf, have, UW_MPA_ANY, UW_MPA_MAX_PD, &f);
    if (len == UW_EAGAIN) {
        size_t need = have < UW_MPA_FRAME_HDR_LEN ? UW_MPA_FRAME_HDR_LEN
                                                  : UW_MPA_FRAME_HDR_LEN + pd_length_of(buf, have);
        if (have < UW_MPA_FRAME_HDR_LEN)
            cli_msg("truncated: frame needs %zu octets, got %zu (the header alone is 20 octets); "
                    "give the whole frame",
                    need, have);
        else
            cli_msg("truncated: frame needs %zu octets, got %zu (20-octet header + PD_Length "
                    "%u); give the whole frame",
                    need, have, pd_length_of(buf, have));
        return CLI_EXIT_PROTO;
    }
    if (len < 0)
        return frame_invalid((int)len, buf, have);

    extra += have - (size_t)len;
    if (extra)
        cli_msg("note: ignored %llu octet%s after the %zd-octet frame", extra,
                extra == 1 ? "" : "s", len);
    static cli_out out;
    out_init(&out, STDOUT_FILENO);
    frame_json(&out, &f);
    return out_flush(&out);
}
