/* `uwarp-mpa encode` and `uwarp-mpa decode`: Full Operation byte streams. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cliutil.h"
#include "mpa_cmds.h"
#include "uwarp/mpa.h"

/* Parses the options encode and decode share. Returns 0 or an exit code. */
static int stream_opts(int argc, char **argv, unsigned *flags, uint32_t *pos)
{
    *flags = UW_MPA_CRC; /* RFC 5044 4.4: CRCs are the default */
    *pos = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = NULL;
        int m;
        if (strcmp(a, "--markers") == 0) {
            *flags |= UW_MPA_MARKERS;
        } else if (strcmp(a, "--no-crc") == 0) {
            *flags &= ~UW_MPA_CRC;
        } else if ((m = cli_opt(argc, argv, &i, "--offset", &v)) != 0) {
            if (m < 0)
                return CLI_EXIT_USAGE;
            if (!cli_parse_u32(v, pos))
                return cli_usage("bad --offset '%s': give a number from 0 to 4294967295, "
                                 "in decimal or as 0x hex",
                                 v);
        } else if (a[0] == '-') {
            return cli_usage("unknown option '%s'", a);
        } else {
            return cli_usage("unexpected argument '%s': the input comes from stdin", a);
        }
    }
    return 0;
}

/* ------------------------------------------------------------------------ */
/* encode                                                                    */

static bool is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\v' || c == '\f';
}

static const char *show_char(char c, char tmp[8])
{
    unsigned char u = (unsigned char)c;
    if (u >= 0x21 && u < 0x7f)
        snprintf(tmp, 8, "'%c'", c);
    else
        snprintf(tmp, 8, "0x%02x", u);
    return tmp;
}

/* Largest FPDU on the wire: a 65535-octet ULPDU, its header, pad, CRC and a
 * marker for every 508 octets or so, rounded up generously. */
#define WIRE_MAX (UINT16_MAX + 16u + UW_MPA_MARKER_LEN * UW_MPA_FPDU_MAX_MARKERS)

int cmd_encode(int argc, char **argv)
{
    unsigned flags;
    uint32_t pos;
    int rc = stream_opts(argc, argv, &flags, &pos);
    if (rc)
        return rc;

    static cli_out out;
    static uint8_t wire[WIRE_MAX];
    out_init(&out, STDOUT_FILENO);
    char *line = NULL;
    size_t line_cap = 0;
    uint8_t *data = NULL;
    size_t data_cap = 0;
    size_t lineno = 0;
    ssize_t got;
    rc = CLI_EXIT_OK;

    while ((got = getline(&line, &line_cap, stdin)) >= 0) {
        lineno++;
        size_t b = 0, e = (size_t)got;
        while (b < e && is_space(line[b]))
            b++;
        while (e > b && is_space(line[e - 1]))
            e--;
        size_t digits = e - b;
        if (digits / 2 + 1 > data_cap) {
            size_t cap = digits / 2 + 1;
            uint8_t *nd = realloc(data, cap);
            if (!nd) {
                cli_msg("line %zu: out of memory for a %zu-digit line", lineno, digits);
                rc = CLI_EXIT_IO;
                break;
            }
            data = nd;
            data_cap = cap;
        }
        size_t bad = 0;
        ssize_t n = cli_unhex(line + b, digits, data, &bad);
        if (n < 0) {
            char tmp[8];
            if (bad == digits)
                cli_usage("line %zu: odd number of hex digits (%zu): each line must be one ULPDU "
                          "written as two hex digits per octet",
                          lineno, digits);
            else
                cli_usage("line %zu: %s at column %zu is not a hex digit: each line must be one "
                          "ULPDU in hex (0-9, a-f, A-F), with no spaces inside",
                          lineno, show_char(line[b + bad], tmp), b + bad + 1);
            rc = CLI_EXIT_USAGE;
            break;
        }
        ssize_t w = uw_mpa_fpdu_encode(wire, sizeof(wire), data, (size_t)n, pos, flags);
        if (w < 0) {
            if (w == UW_EMSGSIZE && n > UINT16_MAX)
                cli_msg("line %zu: cannot frame a ULPDU of %zd octets: %s; ULPDU_Length is 16 "
                        "bits (RFC 5044 4.1), so split it into ULPDUs of at most 65535 octets",
                        lineno, n, uw_strerror((int)w));
            else if (w == UW_EMSGSIZE)
                cli_msg("line %zu: cannot frame a ULPDU of %zd octets at stream position %lu "
                        "with markers: %s; a marker's FPDUPTR would exceed 16 bits "
                        "(RFC 5044 4.2), so keep marked ULPDUs at or below %u octets",
                        lineno, n, (unsigned long)pos, uw_strerror((int)w),
                        (unsigned)UW_MPA_MULPDU_MAX);
            else
                cli_msg("line %zu: cannot frame the ULPDU: %s", lineno, uw_strerror((int)w));
            rc = CLI_EXIT_PROTO;
            break;
        }
        out_bytes(&out, wire, (size_t)w);
        pos += (uint32_t)w; /* stream positions wrap mod 2^32 */
    }
    if (rc == CLI_EXIT_OK && ferror(stdin)) {
        cli_msg("cannot read stdin: %s", strerror(errno));
        rc = CLI_EXIT_IO;
    }
    free(line);
    free(data);
    /* FPDUs of the lines before a bad one are still written: the output is
     * then exactly the stream of the good prefix. */
    int frc = out_flush(&out);
    return rc ? rc : frc;
}

/* ------------------------------------------------------------------------ */
/* decode                                                                    */

typedef struct decode_ctx {
    cli_out *out;
    bool crc;
} decode_ctx;

static int on_ulpdu(void *ud, const uw_mpa_ulpdu *u)
{
    decode_ctx *c = ud;
    out_str(c->out, "{\"offset\":");
    out_u32(c->out, u->pos);
    out_str(c->out, ",\"ulpdu_len\":");
    out_u32(c->out, (uint32_t)u->len);
    out_str(c->out, c->crc ? ",\"crc\":\"ok\",\"ulpdu\":\"" : ",\"crc\":\"off\",\"ulpdu\":\"");
    for (size_t i = 0; i < u->iovcnt; i++)
        out_hex(c->out, u->iov[i].iov_base, u->iov[i].iov_len);
    out_str(c->out, "\"}\n");
    return 0;
}

static const char *decode_hint(int err)
{
    switch (err) {
    case UW_EMPA_CRC:
        return "the octets are corrupt, or the options differ from the sender's: check --no-crc, "
               "--markers and --offset (the stream position of the first input octet)";
    case UW_EMPA_MARKER:
        return "markers sit at stream positions that are multiples of 512: check --offset and "
               "that the sender really inserts markers (--markers)";
    case UW_EMPA_TRUNCATED:
        return "the input ends inside this FPDU: give the whole stream, or cut it at an FPDU "
               "boundary";
    case UW_EMPA_ULPDU_TOO_LONG:
        return "the ULPDU_Length field is implausible: the input is probably not positioned at "
               "an FPDU start (check --offset and --markers)";
    default:
        return "the input is not a valid MPA Full Operation stream";
    }
}

static int decode_fail(cli_out *out, const uw_mpa_rx *rx, int err)
{
    uint32_t at = uw_mpa_rx_error_pos(rx);
    int code = uw_mpa_error_code(err);
    if (code == 0) {
        (void)out_flush(out);
        cli_msg("decoder failed: %s", uw_strerror(err));
        return CLI_EXIT_IO;
    }
    out_str(out, "{\"error\":\"");
    out_str(out, uw_mpa_error_name(err));
    out_str(out, "\",\"mpa_error\":");
    out_u32(out, (uint32_t)code);
    out_str(out, ",\"offset\":");
    out_u32(out, at);
    out_str(out, "}\n");
    int frc = out_flush(out);
    cli_msg("%s, in the FPDU at stream position %lu (0x%lx): %s", uw_strerror(err),
            (unsigned long)at, (unsigned long)at, decode_hint(err));
    return frc ? frc : CLI_EXIT_PROTO;
}

int cmd_decode(int argc, char **argv)
{
    unsigned flags;
    uint32_t pos;
    int rc = stream_opts(argc, argv, &flags, &pos);
    if (rc)
        return rc;

    uw_mpa_rx_opts o = {.flags = flags, .pos = pos, .max_ulpdu = 0, .alloc = NULL};
    uw_mpa_rx *rx = NULL;
    int err = uw_mpa_rx_create(&rx, &o);
    if (err) {
        cli_msg("cannot create the decoder: %s", uw_strerror(err));
        return CLI_EXIT_IO;
    }
    static cli_out out;
    static uint8_t chunk[1u << 16];
    out_init(&out, STDOUT_FILENO);
    decode_ctx ctx = {&out, (flags & UW_MPA_CRC) != 0};

    for (;;) {
        ssize_t n = cli_read_some(STDIN_FILENO, chunk, sizeof(chunk));
        if (n < 0) {
            int e = errno;
            (void)out_flush(&out);
            cli_msg("cannot read stdin: %s", strerror(e));
            rc = CLI_EXIT_IO;
            break;
        }
        if (n == 0) {
            err = uw_mpa_rx_finish(rx);
            rc = err ? decode_fail(&out, rx, err) : out_flush(&out);
            break;
        }
        /* The callback never pauses, so a non-negative return is n. */
        ssize_t used = uw_mpa_rx_feed(rx, chunk, (size_t)n, on_ulpdu, &ctx);
        if (used < 0) {
            rc = decode_fail(&out, rx, (int)used);
            break;
        }
        if (out.err) { /* the reader went away: stop early */
            rc = out_flush(&out);
            break;
        }
    }
    uw_mpa_rx_destroy(rx);
    return rc;
}
