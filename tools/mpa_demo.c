/* `uwarp-mpa demo`: RFC 5044's example FPDUs (Figures 5 and 6) built, checked
 * and decoded by the library, then the CRC32c speed of this machine. It is the
 * README's quick start, so it explains what it shows. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cliutil.h"
#include "mpa_cmds.h"
#include "uwarp/crc32c.h"
#include "uwarp/mpa.h"

#define FIG_ULPDU_LEN 42u
#define FIG_WIRE_MAX 128u

/* The octets of RFC 5044 Figures 5 and 6, as printed there. */
static const char FIG5_HEX[] = "00000000"                 /* marker */
                               "002a"                     /* ULPDU_Length */
                               "4143"                     /* DDP control */
                               "00000000"                 /* reserved */
                               "00000000"                 /* queue */
                               "00000001"                 /* MSN */
                               "00000000"                 /* MO */
                               "000000000000000000000000" /* 24 octets of Send data */
                               "000000000000000000000000"
                               "52239983"; /* CRC32c */
static const char FIG6_HEX[] = "002a"
                               "4143"
                               "00000000"
                               "00000000"
                               "00000002"
                               "00000000"
                               "00000014" /* marker at 0x200 */
                               "000000000000000000000000"
                               "000000000000000000000000"
                               "84925898";

typedef struct figure {
    int number;
    uint32_t pos;
    uint32_t msn;
    const char *expected_hex;
    const char *story;
    /* results */
    uint8_t ulpdu[FIG_ULPDU_LEN];
    uint8_t wire[FIG_WIRE_MAX];
    size_t wire_len;
    uint8_t expected[FIG_WIRE_MAX];
    size_t expected_len;
    uint32_t crc;
    int build_err;
    bool match;
    /* decoded back */
    int dec_err;
    int dec_count;
    uint32_t dec_pos;
    size_t dec_len;
    uint32_t dec_crc;
    bool dec_same;
} figure;

/* An untagged DDP Send with the Last flag (RFC 5041 4.3 and RFC 5040 4.1:
 * DDP control 0x41, RDMAP control 0x43), queue 0, MO 0, 24 zero octets. */
static void make_ulpdu(uint8_t *u, uint32_t msn)
{
    memset(u, 0, FIG_ULPDU_LEN);
    u[0] = 0x41;
    u[1] = 0x43;
    u[10] = (uint8_t)(msn >> 24);
    u[11] = (uint8_t)(msn >> 16);
    u[12] = (uint8_t)(msn >> 8);
    u[13] = (uint8_t)msn;
}

static int on_decoded(void *ud, const uw_mpa_ulpdu *u)
{
    figure *fg = ud;
    fg->dec_count++;
    fg->dec_pos = u->pos;
    fg->dec_len = u->len;
    fg->dec_crc = u->crc;
    uint8_t flat[FIG_ULPDU_LEN];
    size_t off = 0;
    bool fits = u->len == FIG_ULPDU_LEN;
    for (size_t i = 0; fits && i < u->iovcnt; i++) {
        if (off + u->iov[i].iov_len > sizeof(flat)) {
            fits = false;
            break;
        }
        memcpy(flat + off, u->iov[i].iov_base, u->iov[i].iov_len);
        off += u->iov[i].iov_len;
    }
    fg->dec_same = fits && off == FIG_ULPDU_LEN && memcmp(flat, fg->ulpdu, FIG_ULPDU_LEN) == 0;
    return 0;
}

static void run_figure(figure *fg)
{
    const unsigned flags = UW_MPA_MARKERS | UW_MPA_CRC;
    size_t bad;
    ssize_t en = cli_unhex(fg->expected_hex, strlen(fg->expected_hex), fg->expected, &bad);
    fg->expected_len = en < 0 ? 0 : (size_t)en;
    make_ulpdu(fg->ulpdu, fg->msn);

    /* The zero-copy path, so the demo shows the CRC value it computed. */
    uw_mpa_fpdu f;
    struct iovec in = {fg->ulpdu, FIG_ULPDU_LEN};
    struct iovec iov[16];
    ssize_t cnt = uw_mpa_fpdu_build(&f, iov, 16, &in, 1, fg->pos, flags);
    if (cnt < 0) {
        fg->build_err = (int)cnt;
        return;
    }
    for (ssize_t i = 0; i < cnt; i++) {
        if (fg->wire_len + iov[i].iov_len > sizeof(fg->wire)) {
            fg->build_err = UW_ENOBUFS;
            return;
        }
        memcpy(fg->wire + fg->wire_len, iov[i].iov_base, iov[i].iov_len);
        fg->wire_len += iov[i].iov_len;
    }
    fg->crc = f.crc;
    fg->match =
        fg->wire_len == fg->expected_len && memcmp(fg->wire, fg->expected, fg->wire_len) == 0;

    uw_mpa_rx_opts o = {.flags = flags, .pos = fg->pos, .max_ulpdu = 0, .alloc = NULL};
    uw_mpa_rx *rx = NULL;
    fg->dec_err = uw_mpa_rx_create(&rx, &o);
    if (fg->dec_err)
        return;
    ssize_t used = uw_mpa_rx_feed(rx, fg->wire, fg->wire_len, on_decoded, fg);
    fg->dec_err = used < 0 ? (int)used : uw_mpa_rx_finish(rx);
    uw_mpa_rx_destroy(rx);
}

static bool figure_ok(const figure *fg)
{
    return fg->build_err == 0 && fg->match && fg->dec_err == 0 && fg->dec_count == 1 &&
           fg->dec_same;
}

/* ------------------------------------------------------------------------ */
/* Annotated dump                                                            */

static uint32_t be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* Names the field of one wire octet. Fields: 0 marker, 1 length, 2-7 the DDP
 * header parts and payload, 8 pad, 9 CRC. */
static int classify(size_t logical, size_t n)
{
    if (logical < 2)
        return 1;
    if (logical < 2 + n) {
        static const size_t ends[] = {2, 6, 10, 14, 18};
        size_t u = logical - 2;
        for (int k = 0; k < 5; k++)
            if (u < ends[k])
                return 2 + k;
        return 7;
    }
    size_t pad = (4 - (2 + n) % 4) % 4;
    return logical < 2 + n + pad ? 8 : 9;
}

static void field_label(char *dst, size_t cap, int field, const figure *fg, const uint8_t *wire,
                        size_t i)
{
    const uint8_t *u = fg->ulpdu;
    switch (field) {
    case 0: {
        unsigned ptr = (unsigned)(wire[i + 2] << 8 | wire[i + 3]);
        if (ptr == 0)
            snprintf(dst, cap, "marker: FPDUPTR 0x0000, an FPDU header follows");
        else
            snprintf(dst, cap, "marker: FPDUPTR 0x%04x, points back to the header at 0x%04lx", ptr,
                     (unsigned long)((fg->pos + (uint32_t)i - ptr) & 0xffffffffu));
        break;
    }
    case 1:
        snprintf(dst, cap, "ULPDU_Length = %u", (unsigned)FIG_ULPDU_LEN);
        break;
    case 2:
        snprintf(dst, cap, "DDP control 0x%02x, RDMAP control 0x%02x: Send, Last flag set", u[0],
                 u[1]);
        break;
    case 3:
        snprintf(dst, cap, "reserved (DDP STag position, no STag)");
        break;
    case 4:
        snprintf(dst, cap, "DDP queue = %lu", (unsigned long)be32(u + 6));
        break;
    case 5:
        snprintf(dst, cap, "DDP MSN = %lu", (unsigned long)be32(u + 10));
        break;
    case 6:
        snprintf(dst, cap, "DDP MO = %lu", (unsigned long)be32(u + 14));
        break;
    case 7:
        snprintf(dst, cap, "Send data (%u octets of zeros)", (unsigned)FIG_ULPDU_LEN - 18);
        break;
    case 8:
        snprintf(dst, cap, "pad");
        break;
    default:
        snprintf(dst, cap, "CRC32c 0x%08lx, least significant octet first", (unsigned long)fg->crc);
        break;
    }
}

static void dump_figure(cli_out *o, const figure *fg)
{
    char line[200], label[120], cell[8];
    const size_t n = FIG_ULPDU_LEN;
    size_t logical = 0, marker_left = 0;
    size_t i = 0;
    int prev_field = -1;
    out_str(o, "  stream  octets                    field\n");
    while (i < fg->wire_len) {
        /* One row: up to 8 octets of one field. */
        size_t row_start = i;
        int field = -1;
        char cells[8 * 3 + 1] = "";
        size_t k = 0;
        while (i < fg->wire_len && k < 8) {
            uint32_t at = fg->pos + (uint32_t)i;
            int f;
            if (marker_left == 0 && at % UW_MPA_MARKER_INTERVAL == 0)
                marker_left = UW_MPA_MARKER_LEN;
            f = marker_left ? 0 : classify(logical, n);
            if (field >= 0 && f != field)
                break;
            field = f;
            snprintf(cell, sizeof(cell), "%02x ", fg->wire[i]);
            strcat(cells, cell);
            if (marker_left)
                marker_left--;
            else
                logical++;
            i++;
            k++;
        }
        if (field != prev_field)
            field_label(label, sizeof(label), field, fg, fg->wire, row_start);
        else
            label[0] = '\0';
        prev_field = field;
        snprintf(line, sizeof(line), "  %04lx    %-24s  %s",
                 (unsigned long)(fg->pos + (uint32_t)row_start), cells, label);
        size_t len = strlen(line);
        while (len && line[len - 1] == ' ')
            len--;
        out_bytes(o, line, len);
        out_str(o, "\n");
    }
}

static void print_figure(cli_out *o, const figure *fg)
{
    char line[400];
    snprintf(line, sizeof(line),
             "RFC 5044 Figure %d: %s\n"
             "  a 42-octet ULPDU (DDP untagged Send, queue 0, MSN %lu, MO 0, 24 zero octets)\n"
             "  framed by uw_mpa_fpdu_build() at stream position 0x%04lx, markers and CRC on\n",
             fg->number, fg->story, (unsigned long)fg->msn, (unsigned long)fg->pos);
    out_str(o, line);
    if (fg->build_err) {
        snprintf(line, sizeof(line), "  FAILED to build: %s\n\n", uw_strerror(fg->build_err));
        out_str(o, line);
        return;
    }
    dump_figure(o, fg);
    if (fg->match) {
        snprintf(line, sizeof(line), "  %zu octets on the wire: identical to RFC 5044 Figure %d\n",
                 fg->wire_len, fg->number);
    } else {
        size_t d = 0;
        while (d < fg->wire_len && d < fg->expected_len && fg->wire[d] == fg->expected[d])
            d++;
        snprintf(line, sizeof(line),
                 "  MISMATCH with RFC 5044 Figure %d: %zu octets built, %zu in the RFC, first "
                 "difference at 0x%04lx\n  expected: ",
                 fg->number, fg->wire_len, fg->expected_len,
                 (unsigned long)(fg->pos + (uint32_t)d));
        out_str(o, line);
        out_hex(o, fg->expected, fg->expected_len);
        out_str(o, "\n  built:    ");
        out_hex(o, fg->wire, fg->wire_len);
        line[0] = '\n';
        line[1] = '\0';
    }
    out_str(o, line);
    if (fg->dec_err)
        snprintf(line, sizeof(line), "  decoded back by uw_mpa_rx_feed(): FAILED: %s (%s)\n\n",
                 uw_strerror(fg->dec_err), uw_mpa_error_name(fg->dec_err));
    else if (fg->dec_count != 1 || !fg->dec_same)
        snprintf(line, sizeof(line),
                 "  decoded back by uw_mpa_rx_feed(): FAILED: %d ULPDU(s), payload %s\n\n",
                 fg->dec_count, fg->dec_same ? "identical" : "different");
    else
        snprintf(line, sizeof(line),
                 "  decoded back by uw_mpa_rx_feed(): FPDU at 0x%04lx, ULPDU_Length %zu,\n"
                 "  CRC 0x%08lx verified, markers checked and removed, payload identical\n\n",
                 (unsigned long)fg->dec_pos, fg->dec_len, (unsigned long)fg->dec_crc);
    out_str(o, line);
}

static void figure_json(cli_out *o, const figure *fg)
{
    char tmp[200];
    snprintf(tmp, sizeof(tmp), "{\"figure\":%d,\"offset\":%lu,\"match\":%s,\"wire\":\"", fg->number,
             (unsigned long)fg->pos, fg->match ? "true" : "false");
    out_str(o, tmp);
    out_hex(o, fg->wire, fg->wire_len);
    out_str(o, "\",\"expected\":\"");
    out_hex(o, fg->expected, fg->expected_len);
    snprintf(tmp, sizeof(tmp),
             "\",\"crc\":\"%08lx\",\"decoded\":%s,\"decode_error\":", (unsigned long)fg->crc,
             fg->dec_err == 0 && fg->dec_count == 1 && fg->dec_same ? "true" : "false");
    out_str(o, tmp);
    if (fg->build_err || fg->dec_err) {
        out_str(o, "\"");
        out_str(o, fg->build_err ? uw_err_name(fg->build_err) : uw_mpa_error_name(fg->dec_err));
        out_str(o, "\"}");
    } else {
        out_str(o, "null}");
    }
}

/* ------------------------------------------------------------------------ */
/* CRC32c speed                                                              */

static const size_t BENCH_SIZES[] = {64, 1024, 64 * 1024, 1024 * 1024};
#define N_SIZES (sizeof(BENCH_SIZES) / sizeof(BENCH_SIZES[0]))
#define BENCH_TOTAL_S 2.0

typedef struct bench_row {
    uw_crc32c_impl impl;
    bool check_ok;
    double gbps[N_SIZES];
} bench_row;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Keeps the compiler from dropping the timed calls. */
static volatile uint32_t g_sink;

static double measure(uw_crc32c_impl impl, const uint8_t *buf, size_t size, double budget)
{
    /* Each batch covers 1 MiB, so the clock is read rarely even at 64 B. */
    size_t reps = (1u << 20) / size;
    uint32_t st = uw_crc32c_init();
    for (size_t r = 0; r < reps; r++) /* warm caches and branch predictors */
        st = uw_crc32c_update_impl(impl, st, buf, size);
    double t0 = now_s(), t;
    double bytes = 0;
    do {
        for (size_t r = 0; r < reps; r++)
            st = uw_crc32c_update_impl(impl, st, buf, size);
        bytes += (double)reps * (double)size;
        t = now_s();
    } while (t - t0 < budget);
    g_sink = st;
    return bytes / (t - t0) / 1e9;
}

static size_t run_bench(bench_row *rows)
{
    size_t nrows = 0;
    for (int i = 0; i < UW_CRC32C_IMPL_COUNT; i++) {
        if (uw_crc32c_impl_available((uw_crc32c_impl)i))
            rows[nrows++].impl = (uw_crc32c_impl)i;
    }
    if (nrows == 0)
        return 0;
    uint8_t *buf = malloc(BENCH_SIZES[N_SIZES - 1]);
    if (!buf)
        return 0;
    uint32_t x = 0x12345678u; /* xorshift: contents do not matter, only that they vary */
    for (size_t i = 0; i < BENCH_SIZES[N_SIZES - 1]; i++) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        buf[i] = (uint8_t)x;
    }
    double budget = BENCH_TOTAL_S / (double)(nrows * N_SIZES);
    for (size_t r = 0; r < nrows; r++) {
        uint32_t c =
            uw_crc32c_final(uw_crc32c_update_impl(rows[r].impl, uw_crc32c_init(), "123456789", 9));
        rows[r].check_ok = c == 0xE3069283u; /* the standard CRC32c check value */
        for (size_t s = 0; s < N_SIZES; s++)
            rows[r].gbps[s] = measure(rows[r].impl, buf, BENCH_SIZES[s], budget);
    }
    free(buf);
    return nrows;
}

static const char *size_name(size_t s)
{
    switch (s) {
    case 64:
        return "64 B";
    case 1024:
        return "1 KiB";
    case 64 * 1024:
        return "64 KiB";
    default:
        return "1 MiB";
    }
}

static void print_bench(cli_out *o, const bench_row *rows, size_t nrows)
{
    char line[200];
    out_str(o, "CRC32c speed on this machine (GB/s, one core, about 2 s in all)\n");
    snprintf(line, sizeof(line), "  %-14s", "impl");
    out_str(o, line);
    for (size_t s = 0; s < N_SIZES; s++) {
        snprintf(line, sizeof(line), "%10s", size_name(BENCH_SIZES[s]));
        out_str(o, line);
    }
    out_str(o, "   check value\n");
    for (size_t r = 0; r < nrows; r++) {
        snprintf(line, sizeof(line), "  %-14s", uw_crc32c_impl_name(rows[r].impl));
        out_str(o, line);
        for (size_t s = 0; s < N_SIZES; s++) {
            snprintf(line, sizeof(line), "%10.2f", rows[r].gbps[s]);
            out_str(o, line);
        }
        out_str(o, rows[r].check_ok ? "   ok\n" : "   WRONG\n");
    }
    if (nrows == 0)
        out_str(o, "  no implementation available\n");
    out_str(o, "  (\"auto\" is what uw_crc32c_update() picks per call)\n");
}

static void bench_json(cli_out *o, const bench_row *rows, size_t nrows)
{
    char tmp[200];
    out_str(o, "[");
    for (size_t r = 0; r < nrows; r++) {
        snprintf(tmp, sizeof(tmp), "%s{\"impl\":\"%s\",\"check_ok\":%s,\"gbps\":{", r ? "," : "",
                 uw_crc32c_impl_name(rows[r].impl), rows[r].check_ok ? "true" : "false");
        out_str(o, tmp);
        for (size_t s = 0; s < N_SIZES; s++) {
            snprintf(tmp, sizeof(tmp), "%s\"%zu\":%.3f", s ? "," : "", BENCH_SIZES[s],
                     rows[r].gbps[s]);
            out_str(o, tmp);
        }
        out_str(o, "}}");
    }
    out_str(o, "]");
}

int cmd_demo(int argc, char **argv)
{
    bool json = false, bench = true;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--json") == 0)
            json = true;
        else if (strcmp(argv[i], "--no-bench") == 0)
            bench = false;
        else if (argv[i][0] == '-')
            return cli_usage("unknown option '%s'", argv[i]);
        else
            return cli_usage("unexpected argument '%s'", argv[i]);
    }

    static figure figs[2];
    memset(figs, 0, sizeof(figs));
    figs[0].number = 5;
    figs[0].pos = 0;
    figs[0].msn = 1;
    figs[0].expected_hex = FIG5_HEX;
    figs[0].story = "the first FPDU of the stream, so it starts with a marker";
    figs[1].number = 6;
    figs[1].pos = 0x1ec;
    figs[1].msn = 2;
    figs[1].expected_hex = FIG6_HEX;
    figs[1].story = "the second FPDU (after a 492-octet one), a marker inside it";
    for (int k = 0; k < 2; k++)
        run_figure(&figs[k]);
    bool ok = figure_ok(&figs[0]) && figure_ok(&figs[1]);

    static cli_out out;
    out_init(&out, STDOUT_FILENO);
    static bench_row rows[UW_CRC32C_IMPL_COUNT];
    size_t nrows = 0;
    if (json) {
        out_str(&out, "{\"figures\":[");
        figure_json(&out, &figs[0]);
        out_str(&out, ",");
        figure_json(&out, &figs[1]);
        out_str(&out, "],\"crc32c\":");
        if (bench)
            nrows = run_bench(rows);
        bench_json(&out, rows, nrows);
        out_str(&out, ok ? ",\"ok\":true}\n" : ",\"ok\":false}\n");
    } else {
        out_str(&out, "uwarp-mpa demo: RFC 5044's example FPDUs, built and decoded by uwarp\n\n");
        print_figure(&out, &figs[0]);
        print_figure(&out, &figs[1]);
        bool bytes_ok = figs[0].match && figs[1].match;
        out_str(&out, ok ? "Both figures match the RFC byte for byte and decode back.\n\n"
                      : bytes_ok
                          ? "The figures match the RFC but do NOT decode back (see above).\n\n"
                          : "The library does NOT reproduce the RFC's bytes (see above).\n\n");
        /* Show the figures before the benchmark keeps the terminal busy. */
        int frc = out_flush(&out);
        if (frc)
            return frc;
        if (bench) {
            nrows = run_bench(rows);
            print_bench(&out, rows, nrows);
        }
    }
    int frc = out_flush(&out);
    if (frc)
        return frc;
    return ok ? CLI_EXIT_OK : CLI_EXIT_PROTO;
}
