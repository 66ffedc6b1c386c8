/* Writes the seed corpora: make_seeds OUTDIR writes OUTDIR/<target>/<name>.
 * Seeds follow each target's input layout (see the comment at the top of
 * tests/fuzz/fuzz_<target>.c): valid streams with and without markers and
 * CRCs at positions around marker boundaries and 2^32, the RFC 5044 Figure 5
 * and 6 FPDUs, broken FPDUs of every kind, and MPA Request/Reply frames
 * including Linux siw's enhanced Request.
 *
 * Regenerate with scripts/fuzz.sh --seeds (overwrites files of the same
 * name, leaves others, such as merged fuzzer finds, alone). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common.h"
#include "uwarp/error.h"
#include "uwarp/mpa.h"

#define MC (UW_MPA_MARKERS | UW_MPA_CRC)

static const char *outdir;
static unsigned long written;

typedef struct sbuf {
    uint8_t *d;
    size_t n, cap;
} sbuf;

static void sb_reserve(sbuf *b, size_t more)
{
    if (b->n + more <= b->cap)
        return;
    while (b->n + more > b->cap)
        b->cap = b->cap ? 2 * b->cap : 4096;
    b->d = realloc(b->d, b->cap);
    if (!b->d)
        abort();
}

static void sb_put(sbuf *b, const void *p, size_t n)
{
    sb_reserve(b, n);
    if (n)
        memcpy(b->d + b->n, p, n);
    b->n += n;
}

static void sb_u8(sbuf *b, unsigned v)
{
    uint8_t c = (uint8_t)v;
    sb_put(b, &c, 1);
}

static void sb_u16(sbuf *b, unsigned v)
{
    sb_u8(b, v >> 8);
    sb_u8(b, v);
}

static void sb_u32(sbuf *b, uint32_t v)
{
    sb_u16(b, v >> 16);
    sb_u16(b, v & 0xFFFF);
}

static void sb_free(sbuf *b)
{
    free(b->d);
    memset(b, 0, sizeof(*b));
}

static void mkdir_p(const char *path)
{
    if (mkdir(path, 0777) != 0 && errno != EEXIST) {
        perror(path);
        exit(1);
    }
}

static void emit(const char *target, const char *name, const sbuf *b)
{
    char path[1024];
    snprintf(path, sizeof(path), "%s/%s", outdir, target);
    mkdir_p(path);
    snprintf(path, sizeof(path), "%s/%s/%s", outdir, target, name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(b->d, 1, b->n, f) != b->n || fclose(f) != 0) {
        perror(path);
        exit(1);
    }
    written++;
}

/* Appends the FPDU of u[0..n) at *pos and advances *pos. */
static void put_fpdu(sbuf *s, const uint8_t *u, size_t n, uint32_t *pos, unsigned flags)
{
    size_t w = uw_mpa_fpdu_wire_len(n, *pos, flags);
    sb_reserve(s, w);
    ssize_t got = uw_mpa_fpdu_encode(s->d + s->n, w, u, n, *pos, flags);
    if (got != (ssize_t)w)
        abort();
    s->n += w;
    *pos += (uint32_t)w;
}

/* RFC 5044 Figures 5 and 6: a 42-octet DDP/RDMAP Send, MSN 1 and 2. */
static void fig_ulpdu(uint8_t *u, unsigned msn)
{
    memset(u, 0, 42);
    u[0] = 0x41;
    u[1] = 0x43;
    u[13] = (uint8_t)msn;
}

static void pattern(uint8_t *u, size_t n, unsigned k)
{
    for (size_t i = 0; i < n; i++)
        u[i] = (uint8_t)(i * 7 + k * 13 + (i >> 8));
}

/* ------------------------------------------------------------------------ */
/* fpdu_rx: b0 flags|repair<<2|pause<<3, b1 posmode|maxmode<<3, pos, max, seed */

static void rx_hdr(sbuf *b, unsigned b0, unsigned posmode, unsigned maxmode, uint32_t pos,
                   unsigned max, uint32_t seed)
{
    sb_u8(b, b0);
    sb_u8(b, posmode | maxmode << 3);
    sb_u32(b, pos);
    sb_u16(b, max);
    sb_u32(b, seed);
}

/* A stream of count ULPDUs of the given sizes at pos. */
static void rx_stream(sbuf *s, uint32_t pos, unsigned flags, const size_t *sizes, size_t count)
{
    uint8_t u[2048];
    for (size_t i = 0; i < count; i++) {
        pattern(u, sizes[i], (unsigned)i);
        put_fpdu(s, u, sizes[i], &pos, flags);
    }
}

static void seeds_fpdu_rx(void)
{
    sbuf b = {0};
    char name[128];
    uint8_t u[64];

    /* RFC 5044 Figure 5 at 0 and Figure 6 at 0x1ec, markers and CRC. */
    rx_hdr(&b, MC, 0, 0, 0, 0, 1);
    uint32_t pos = 0;
    fig_ulpdu(u, 1);
    put_fpdu(&b, u, 42, &pos, MC);
    emit("fpdu_rx", "rfc5044_fig5", &b);
    fig_ulpdu(u, 2);
    put_fpdu(&b, u, 42, &pos, MC);
    emit("fpdu_rx", "rfc5044_fig5_then_msn2", &b);
    b.n = 0;
    rx_hdr(&b, MC, 4, 0, 0, 0, 2);
    pos = 0x1ec;
    put_fpdu(&b, u, 42, &pos, MC);
    emit("fpdu_rx", "rfc5044_fig6", &b);
    b.n = 0;
    rx_hdr(&b, MC | 8, 4, 0, 0, 0, 3);
    pos = 0x1ec;
    put_fpdu(&b, u, 42, &pos, MC);
    fig_ulpdu(u, 3);
    put_fpdu(&b, u, 42, &pos, MC);
    emit("fpdu_rx", "rfc5044_fig6_pause", &b);

    /* Valid streams: every flag combination at positions around marker
     * boundaries and 2^32. */
    static const uint32_t positions[] = {0,          4,          0x1ec,      508,
                                         510,        511,        513,        0xFFFFFFF0,
                                         0xFFFFFFFE, 0xFFFFFDFF, 0x7FFFFFFE, 0xFFFF0001};
    static const size_t sizes[][6] = {
        {0, 1, 2, 3, 4, 5}, {42, 42, 42, 42, 42, 42}, {600, 13, 1500, 0, 508, 509}};
    for (unsigned flags = 0; flags < 4; flags++) {
        for (size_t p = 0; p < sizeof(positions) / sizeof(positions[0]); p++) {
            if ((p % 4) != flags && flags != MC)
                continue;
            size_t set = (p + flags) % 3;
            b.n = 0;
            rx_hdr(&b, flags | ((p & 1) ? 8 : 0), 1, 0, positions[p], 0, (uint32_t)p * 77);
            rx_stream(&b, positions[p], flags, sizes[set], 6);
            snprintf(name, sizeof(name), "valid_f%u_pos%08x_set%zu", flags, positions[p], set);
            emit("fpdu_rx", name, &b);
        }
    }

    /* Errors: CRC, marker, ULPDU too long, truncated. */
    static const size_t three[3] = {100, 700, 20};
    size_t body;
    b.n = 0;
    rx_hdr(&b, MC, 1, 0, 500, 0, 5);
    body = b.n;
    rx_stream(&b, 500, MC, three, 3);
    b.d[b.n - 1] ^= 0x01; /* last CRC */
    emit("fpdu_rx", "err_crc_last", &b);
    b.d[b.n - 1] ^= 0x01;
    b.d[body + 120] ^= 0x80; /* payload of the second FPDU */
    emit("fpdu_rx", "err_crc_payload", &b);
    b.d[body + 120] ^= 0x80;
    /* The marker at 512 sits 12 octets into the first FPDU; without CRCs a
     * wrong FPDUPTR is a marker error. */
    b.n = 0;
    rx_hdr(&b, UW_MPA_MARKERS, 1, 0, 500, 0, 6);
    body = b.n;
    rx_stream(&b, 500, UW_MPA_MARKERS, three, 3);
    b.d[body + 12 + 3] ^= 0x04;
    emit("fpdu_rx", "err_marker", &b);
    b.d[body + 12 + 3] ^= 0x01; /* low FPDUPTR bits are ignored: still bad via 0x04 */
    emit("fpdu_rx", "err_marker_lowbits", &b);
    b.d[body + 12 + 3] ^= 0x05;
    b.d[body + 12 + 3] ^= 0x03; /* only the ignored low bits differ */
    emit("fpdu_rx", "marker_lowbits_ignored", &b);
    b.n = 0;
    rx_hdr(&b, MC, 0, 2, 0, 99, 7); /* max_ulpdu 99 */
    rx_stream(&b, 0, MC, three, 3);
    emit("fpdu_rx", "err_too_long", &b);
    b.n = 0;
    rx_hdr(&b, MC, 0, 1, 0, 100, 8); /* max_ulpdu exactly 100 */
    rx_stream(&b, 0, MC, three, 1);
    emit("fpdu_rx", "max_exact", &b);
    b.n = 0;
    rx_hdr(&b, UW_MPA_CRC, 0, 0, 0, 0, 9);
    rx_stream(&b, 0, UW_MPA_CRC, three, 3);
    b.n -= 3;
    emit("fpdu_rx", "err_truncated", &b);
    b.n = 0;
    rx_hdr(&b, MC, 0, 3, 0, 0, 10);
    emit("fpdu_rx", "invalid_max", &b);
    b.n = 0;
    rx_hdr(&b, MC, 0, 0, 0, 0, 11);
    emit("fpdu_rx", "empty", &b);

    /* Repair mode: random octets become valid FPDUs, lengths kept small. */
    for (unsigned k = 0; k < 6; k++) {
        b.n = 0;
        rx_hdr(&b, (k & 3) | 4 | (k & 4 ? 8 : 0), (k * 3) & 7, 0, 0xFFFFFF00u + k * 97, 0,
               1000 + k);
        for (unsigned f = 0; f < 4; f++) {
            unsigned n = 10 + 37 * f + k;
            sb_u16(&b, n);
            for (unsigned i = 0; i < n + 20; i++)
                sb_u8(&b, i * k + f);
        }
        snprintf(name, sizeof(name), "repair_%u", k);
        emit("fpdu_rx", name, &b);
    }

    /* One big FPDU (MULPDU_MAX) with markers, crossing 2^32. */
    b.n = 0;
    rx_hdr(&b, MC, 7, 0, 40000, 0, 12);
    uint8_t *big = calloc(1, UW_MPA_MULPDU_MAX);
    pattern(big, UW_MPA_MULPDU_MAX, 5);
    pos = 0u - 40000u;
    put_fpdu(&b, big, UW_MPA_MULPDU_MAX, &pos, MC);
    emit("fpdu_rx", "mulpdu_max_wrap", &b);
    free(big);
    sb_free(&b);
}

/* ------------------------------------------------------------------------ */
/* fpdu_roundtrip: b0 flags|maxmode<<2, b1 posmode, pos, max, seed, records */

static void rt_hdr(sbuf *b, unsigned b0, unsigned posmode, uint32_t pos, unsigned max,
                   uint32_t seed)
{
    sb_u8(b, b0);
    sb_u8(b, posmode);
    sb_u32(b, pos);
    sb_u16(b, max);
    sb_u32(b, seed);
}

static void rt_lit(sbuf *b, unsigned n, unsigned k)
{
    sb_u8(b, n);
    for (unsigned i = 0; i < n; i++)
        sb_u8(b, i * 3 + k);
}

static void rt_gen(sbuf *b, unsigned n, bool zero)
{
    sb_u8(b, zero ? 0xF0 : 0xF1);
    sb_u16(b, n);
}

static void seeds_fpdu_roundtrip(void)
{
    sbuf b = {0};
    char name[128];
    static const uint32_t positions[] = {0, 0x1ec, 510, 0xFFFFFFFE, 0xFFFFFE00, 12345};
    for (unsigned flags = 0; flags < 4; flags++) {
        for (size_t p = 0; p < 6; p++) {
            b.n = 0;
            rt_hdr(&b, flags | (unsigned)(p % 3) << 2, 1, positions[p], 300, (uint32_t)p);
            rt_lit(&b, 42, 0);
            rt_lit(&b, 0, 0);
            rt_lit(&b, 1, 1);
            rt_lit(&b, 200, 2);
            rt_gen(&b, 1500 + (unsigned)p * 100, p & 1);
            rt_lit(&b, 3, 3);
            snprintf(name, sizeof(name), "mix_f%u_pos%08x", flags, positions[p]);
            emit("fpdu_roundtrip", name, &b);
        }
    }
    /* Largest ULPDUs: 65535 with markers cannot be framed (FPDUPTR), the
     * MULPDU_MAX can; without markers both can. */
    for (unsigned flags = 0; flags < 4; flags++) {
        b.n = 0;
        rt_hdr(&b, flags, 2, 100, 0, 99);
        rt_gen(&b, 65535, false);
        rt_gen(&b, UW_MPA_MULPDU_MAX, true);
        rt_gen(&b, 65000, false);
        rt_lit(&b, 5, 1);
        snprintf(name, sizeof(name), "huge_f%u", flags);
        emit("fpdu_roundtrip", name, &b);
    }
    /* max_ulpdu one below the largest: UW_EMPA_ULPDU_TOO_LONG mid-stream. */
    b.n = 0;
    rt_hdr(&b, MC | 3u << 2, 3, 0x200, 0, 7);
    rt_lit(&b, 10, 0);
    rt_lit(&b, 11, 0);
    rt_lit(&b, 10, 0);
    emit("fpdu_roundtrip", "too_long_mid", &b);
    /* Many small ULPDUs across a marker-dense stretch. */
    b.n = 0;
    rt_hdr(&b, MC, 3, 0x12345678, 0, 8);
    for (unsigned i = 0; i < 120; i++)
        rt_lit(&b, (i * 29) % 80, i);
    emit("fpdu_roundtrip", "many_small", &b);
    sb_free(&b);
}

/* ------------------------------------------------------------------------ */
/* frame: b0 expect (0 req, 1 rep, 2 any, 3 invalid) | struct<<2, b1 pd_max, seed */

static const char KEY_REQ[] = "MPA ID Req Frame";
static const char KEY_REP[] = "MPA ID Rep Frame";

static void raw_frame(sbuf *b, const char *key, unsigned flags, unsigned rev, unsigned pd_len,
                      const uint8_t *pd, size_t pd_have)
{
    sb_put(b, key, 16);
    sb_u8(b, flags);
    sb_u8(b, rev);
    sb_u16(b, pd_len);
    sb_put(b, pd, pd_have);
}

static void fr_hdr(sbuf *b, unsigned expect, unsigned pd_max, uint32_t seed)
{
    sb_u8(b, expect);
    sb_u8(b, pd_max);
    sb_u32(b, seed);
}

#define PDMAX_512 (0x80u | (512u - 393u))

static void seeds_frame(void)
{
    sbuf b = {0};
    char name[128];
    uint8_t pd[600];
    pattern(pd, sizeof(pd), 9);
    static const uint8_t siw_word[4] = {0x00, 0x01, 0x00, 0x01};

    struct {
        const char *name;
        const char *key;
        unsigned flags, rev, pd_len;
        const uint8_t *pd;
        size_t have;
        unsigned expect;
    } fr[] = {
        {"siw_request", KEY_REQ, 0x10, 2, 4, siw_word, 4, 0},
        {"siw_request_crc", KEY_REQ, 0x50, 2, 4, siw_word, 4, 0},
        {"rev1_request", KEY_REQ, 0x40, 1, 0, NULL, 0, 0},
        {"rev1_request_pd", KEY_REQ, 0xC0, 1, 20, pd, 20, 0},
        {"rev1_reply", KEY_REP, 0x40, 1, 0, NULL, 0, 1},
        {"rev1_reply_reject", KEY_REP, 0x20, 1, 5, pd, 5, 1},
        {"rev2_reply_enh_p2p", KEY_REP, 0x50, 2, 8, (const uint8_t *)"\x80\x10\x40\x08pdpd", 8, 1},
        {"rev2_request_enh_p2p_all_rtr", KEY_REQ, 0x10, 2, 4, (const uint8_t *)"\xc0\x10\xc0\x10",
         4, 0},
        {"rev2_no_ird_ord", KEY_REQ, 0x10, 2, 4, (const uint8_t *)"\x3f\xff\x3f\xff", 4, 0},
        {"rev2_s_clear", KEY_REQ, 0x40, 2, 4, siw_word, 4, 0},
        {"rev1_s_set_reserved", KEY_REQ, 0x1F, 1, 2, pd, 2, 0},
        {"rev0_request", KEY_REQ, 0xC0, 0, 0, NULL, 0, 0},
        {"rev9_request", KEY_REQ, 0x50, 9, 4, siw_word, 4, 2},
        {"pd_512", KEY_REQ, 0x40, 1, 512, pd, 512, 2},
        {"err_pd_513", KEY_REQ, 0x40, 1, 513, pd, 513, 2},
        {"err_pd_ffff", KEY_REQ, 0x40, 1, 0xFFFF, pd, 10, 2},
        {"err_enh_word", KEY_REQ, 0x10, 2, 3, pd, 3, 0},
        {"err_enh_word_zero", KEY_REQ, 0x10, 2, 0, NULL, 0, 0},
        {"err_role_req", KEY_REQ, 0x40, 1, 0, NULL, 0, 1},
        {"err_role_rep", KEY_REP, 0x40, 1, 0, NULL, 0, 0},
        {"err_key", "MPA ID Rex Frame", 0x40, 1, 0, NULL, 0, 2},
        {"err_key_early", "XPA ID Req Frame", 0x40, 1, 0, NULL, 0, 2},
        {"truncated_pd", KEY_REQ, 0x40, 1, 100, pd, 50, 2},
        {"invalid_expect", KEY_REQ, 0x40, 1, 0, NULL, 0, 3},
    };
    for (size_t i = 0; i < sizeof(fr) / sizeof(fr[0]); i++) {
        b.n = 0;
        fr_hdr(&b, fr[i].expect, PDMAX_512, (uint32_t)i * 31);
        raw_frame(&b, fr[i].key, fr[i].flags, fr[i].rev, fr[i].pd_len, fr[i].pd, fr[i].have);
        emit("frame", fr[i].name, &b);
    }
    /* siw's Request followed by the first FPDU: the parser stops at the frame. */
    b.n = 0;
    fr_hdr(&b, 2, PDMAX_512, 77);
    raw_frame(&b, KEY_REQ, 0x50, 2, 4, siw_word, 4);
    uint32_t pos = 0;
    uint8_t u[42];
    fig_ulpdu(u, 1);
    put_fpdu(&b, u, 42, &pos, MC);
    emit("frame", "siw_request_then_fpdu", &b);
    /* pd_max below the PD_Length: UW_EMPA_PD_BUFFER; and exactly equal. */
    b.n = 0;
    fr_hdr(&b, 0, 19, 1);
    raw_frame(&b, KEY_REQ, 0x40, 1, 20, pd, 20);
    emit("frame", "err_pd_buffer", &b);
    b.n = 0;
    fr_hdr(&b, 0, 20, 2);
    raw_frame(&b, KEY_REQ, 0x40, 1, 20, pd, 20);
    emit("frame", "pd_max_exact", &b);

    /* Struct mode: type, flags(m c r s enh p2p), res, rev, ird, ord, rtr,
     * pd_length, ulp_pd_len, cap, pd. */
    struct {
        unsigned type, fl, res, rev, ird, ord, rtr, ulp, cap;
    } st[] = {
        {1, 0x10 | 0x02, 0, 2, 1, 1, 0, 0, 599},
        {2, 0x10 | 0x20 | 0x02, 0, 2, 16, 16, 7, 10, 599},
        {1, 0x08, 0, 2, 0, 0, 0, 8, 599},   /* S without the word: read back as one */
        {1, 0x08, 0, 2, 0, 0, 0, 2, 599},   /* ... too short for one */
        {1, 0x10, 0, 1, 0, 0, 0, 0, 599},   /* enhanced needs rev 2 */
        {2, 0x10, 0, 2, 0, 0, 0, 509, 599}, /* 513 with the word */
        {1, 0x01, 0x0F, 1, 0, 0, 0, 30, 40},
        {1, 0x01, 0x10 | 0, 1, 0, 0, 0, 0, 599}, /* res beyond 4 bits (with fl bit6) */
        {3, 0x00, 0, 1, 0, 0, 0, 0, 599},        /* bad type */
        {2, 0x10 | 0x80, 0, 2, 0x4000, 0, 0, 0, 599},
    };
    for (size_t i = 0; i < sizeof(st) / sizeof(st[0]); i++) {
        b.n = 0;
        fr_hdr(&b, 4, PDMAX_512, 0);
        sb_u8(&b, st[i].type | (st[i].cap == 599 ? 8u : 0u));
        sb_u8(&b, st[i].fl | (i == 7 ? 0x40u : 0u));
        sb_u8(&b, st[i].res);
        sb_u8(&b, st[i].rev);
        sb_u16(&b, st[i].ird);
        sb_u16(&b, st[i].ord);
        sb_u8(&b, st[i].rtr);
        sb_u16(&b, 0);
        sb_u16(&b, st[i].ulp);
        sb_u16(&b, st[i].cap);
        sb_put(&b, pd, st[i].ulp < 512 ? st[i].ulp : 512);
        snprintf(name, sizeof(name), "struct_%zu", i);
        emit("frame", name, &b);
    }
    sb_free(&b);
}

/* ------------------------------------------------------------------------ */
/* negotiate: responder policy, initiator policy (11 octets each), mode,
 * Reply pd length, Request pd length, raw Request. */

static void policy(sbuf *b, unsigned fl, unsigned rev, unsigned ird, unsigned ord, unsigned ird_max,
                   unsigned ord_min, unsigned rtr)
{
    /* pick14: raw >> 14 == 1 keeps the low 14 bits; 2 with bit0 gives 0x3FFF */
    sb_u8(b, fl);
    sb_u8(b, rev);
    unsigned v[4] = {ird, ord, ird_max, ord_min};
    for (int i = 0; i < 4; i++)
        sb_u16(b, v[i] == 0x3FFF ? 0x8001 : (0x4000 | v[i]));
    sb_u8(b, rtr);
}

/* revs[] index: 0 -> 2, 1 -> 1 */
#define P_CRC 1u
#define P_MARK 2u
#define P_ENH 4u
#define P_P2P 8u
#define P_REV0 16u
#define P_DEFAULT 128u

static void seeds_negotiate(void)
{
    sbuf b = {0};
    uint8_t pd[64];
    pattern(pd, sizeof(pd), 3);
    static const uint8_t siw_word[4] = {0x00, 0x01, 0x00, 0x01};
    struct {
        const char *name;
        unsigned rfl, rrev, rird, rord, rirdmax, rordmin, rrtr;
        unsigned ifl, irev, iird, iord, iirdmax, iordmin, irtr;
        unsigned mode, reppd, reqpd;
        unsigned qflags, qrev;
        const uint8_t *qpd;
        unsigned qpdlen;
    } ng[] = {
        {"defaults_siw", P_DEFAULT, 0,        0, 0, 0, 0, 0, P_DEFAULT, 0, 0, 0, 0, 0, 0, 0, 0, 0,
         0x10,           2,         siw_word, 4},
        {"p2p_write",
         P_CRC | P_ENH,
         0,
         4,
         4,
         8,
         0,
         7,
         P_CRC | P_ENH | P_P2P,
         0,
         4,
         4,
         0,
         0,
         2,
         0,
         10,
         10,
         0x50,
         2,
         (const uint8_t *)"\x80\x04\x40\x04",
         4},
        {"p2p_read_ird0",
         P_ENH,
         0,
         0,
         4,
         0,
         0,
         4,
         P_ENH | P_P2P,
         0,
         0,
         0,
         0,
         0,
         4,
         0,
         0,
         0,
         0x10,
         2,
         (const uint8_t *)"\x80\x00\x40\x00",
         4},
        {"p2p_no_common_rtr",
         P_ENH,
         0,
         4,
         4,
         0,
         0,
         1,
         P_ENH | P_P2P,
         0,
         4,
         4,
         0,
         0,
         2,
         0,
         0,
         0,
         0x10,
         2,
         (const uint8_t *)"\xc0\x04\x00\x04",
         4},
        {"no_negotiation",
         P_ENH | P_CRC,
         0,
         0x3FFF,
         0x3FFF,
         0,
         0,
         7,
         P_ENH,
         0,
         0x3FFF,
         0x3FFF,
         0,
         0,
         7,
         0,
         0,
         0,
         0x10,
         2,
         (const uint8_t *)"\x3f\xff\x3f\xff",
         4},
        {"ord_min_reject",
         P_ENH,
         0,
         8,
         8,
         0,
         6,
         7,
         P_ENH,
         0,
         2,
         2,
         0,
         0,
         7,
         0,
         0,
         0,
         0x10,
         2,
         (const uint8_t *)"\x00\x02\x00\x02",
         4},
        {"rev1_both", P_CRC, 1, 2, 2, 0, 0, 0, P_MARK, 1, 2, 2, 0, 0, 0, 0, 4, 4, 0xC0, 1, pd, 4},
        {"rev1_responder_rev2_req",
         P_CRC,
         1,
         2,
         2,
         0,
         0,
         0,
         P_ENH,
         0,
         2,
         2,
         0,
         0,
         0,
         0,
         0,
         0,
         0x10,
         2,
         siw_word,
         4},
        {"rev0_permissive",
         P_REV0,
         0,
         2,
         2,
         0,
         0,
         0,
         P_REV0,
         1,
         2,
         2,
         0,
         0,
         0,
         0,
         0,
         0,
         0xC0,
         0,
         NULL,
         0},
        {"reject", P_ENH, 0, 2, 2, 0,  0, 7,    P_ENH, 0,        2,
         2,        0,     0, 7, 1, 30, 0, 0x10, 2,     siw_word, 4},
        {"markers_both",
         P_MARK | P_ENH,
         0,
         1,
         1,
         0,
         0,
         7,
         P_MARK | P_ENH,
         0,
         1,
         1,
         0,
         0,
         7,
         0,
         0,
         0,
         0xD0,
         2,
         siw_word,
         4},
        {"ird_max_above",
         P_ENH,
         0,
         2,
         16,
         32,
         0,
         7,
         P_ENH,
         0,
         64,
         64,
         128,
         0,
         7,
         0,
         0,
         0,
         0x10,
         2,
         (const uint8_t *)"\x00\x40\x00\x40",
         4},
        {"ird_max_below_ird",
         P_ENH,
         0,
         4,
         16,
         0,
         0,
         7,
         P_ENH,
         0,
         16,
         4,
         2,
         0,
         7,
         0,
         0,
         0,
         0x10,
         2,
         (const uint8_t *)"\x00\x10\x00\x04",
         4},
        {"pd_too_long", P_ENH, 0,    2, 2,        0, 0, 7, P_ENH, 0, 2, 2, 0, 0, 7, 0,
         510,           509,   0x10, 2, siw_word, 4},
        {"invalid_policy", P_ENH | 32, 7, 2, 2, 0, 0, 7, P_P2P, 0, 2, 2, 0, 0, 0, 2, 0, 0, 0x10, 2,
         siw_word,         4},
    };
    for (size_t i = 0; i < sizeof(ng) / sizeof(ng[0]); i++) {
        b.n = 0;
        policy(&b, ng[i].rfl, ng[i].rrev, ng[i].rird, ng[i].rord, ng[i].rirdmax, ng[i].rordmin,
               ng[i].rrtr);
        policy(&b, ng[i].ifl, ng[i].irev, ng[i].iird, ng[i].iord, ng[i].iirdmax, ng[i].iordmin,
               ng[i].irtr);
        sb_u8(&b, ng[i].mode);
        sb_u16(&b, ng[i].reppd);
        sb_u16(&b, ng[i].reqpd);
        raw_frame(&b, KEY_REQ, ng[i].qflags, ng[i].qrev, ng[i].qpdlen, ng[i].qpd, ng[i].qpdlen);
        emit("negotiate", ng[i].name, &b);
    }
    /* Struct mode: an undecodable frame with odd fields. */
    b.n = 0;
    policy(&b, P_DEFAULT, 0, 0, 0, 0, 0, 0);
    policy(&b, P_DEFAULT, 0, 0, 0, 0, 0, 0);
    sb_u8(&b, 2);
    sb_u16(&b, 0);
    sb_u16(&b, 0);
    static const uint8_t odd[] = {0x21, 1, 0xF0, 0x40, 0, 0x40, 0, 1, 0xFF, 0, 0, 1, 0};
    sb_put(&b, odd, sizeof(odd));
    emit("negotiate", "struct_enh_rev1", &b);
    sb_free(&b);
}

/* ------------------------------------------------------------------------ */
/* ooo: b0 flags|valid<<2|twice<<3|capmode<<4|maxlargest<<6|repair<<7, b1 posmode,
 * pos, seq0, max, seed, nseg, segs (off24, len16), rest. */

static void ooo_hdr(sbuf *b, unsigned b0, unsigned posmode, uint32_t pos, uint32_t seq0,
                    unsigned max, uint32_t seed)
{
    sb_u8(b, b0);
    sb_u8(b, posmode);
    sb_u32(b, pos);
    sb_u32(b, seq0);
    sb_u16(b, max);
    sb_u32(b, seed);
}

static void ooo_segs(sbuf *b, const unsigned (*segs)[2], size_t n)
{
    sb_u8(b, (unsigned)n);
    for (size_t i = 0; i < n; i++) {
        sb_u8(b, segs[i][0] >> 16);
        sb_u16(b, segs[i][0] & 0xFFFF);
        sb_u16(b, segs[i][1]);
    }
}

static void seeds_ooo(void)
{
    sbuf b = {0};
    char name[128];
    /* Segments of 1000 octets in reverse, with a duplicate and overlaps. */
    static const unsigned rev_segs[][2] = {{5000, 1000}, {4000, 1000}, {3000, 1000},
                                           {2500, 1000}, {1000, 1000}, {1000, 1000},
                                           {0, 700},     {600, 500},   {2000, 1000}};
    static const unsigned odd_segs[][2] = {{1, 1},      {513, 3}, {0, 1},    {2, 510},
                                           {700, 9000}, {100, 0}, {9999, 17}};
    static const uint32_t positions[] = {0, 0x1ec, 0xFFFFF000, 510};
    for (unsigned k = 0; k < 8; k++) {
        unsigned flags = (k & 1) ? MC : (k & 2) ? UW_MPA_MARKERS : UW_MPA_CRC;
        b.n = 0;
        ooo_hdr(&b, flags | 4 | (k & 4 ? 8 : 0) | (k & 3) << 4 | (k & 2 ? 64 : 0), 1,
                positions[k % 4], 0xFFFFFFFFu - k * 100000, 0, k);
        if (k & 4)
            ooo_segs(&b, odd_segs, sizeof(odd_segs) / sizeof(odd_segs[0]));
        else
            ooo_segs(&b, rev_segs, sizeof(rev_segs) / sizeof(rev_segs[0]));
        for (unsigned i = 0; i < 12; i++)
            rt_lit(&b, (i * 53 + k * 11) % 240, i);
        rt_gen(&b, 1500, k & 1);
        rt_lit(&b, 0, 0);
        snprintf(name, sizeof(name), "valid_%u_f%u", k, flags);
        emit("ooo", name, &b);
    }
    /* A big FPDU and a stream longer than the 128 KiB cap, out of order. */
    static const unsigned far_segs[][2] = {{150000, 8000}, {70000, 8000},  {3000, 8000},
                                           {0, 3000},      {140000, 8999}, {11000, 8000}};
    b.n = 0;
    ooo_hdr(&b, MC | 4, 7, 30000, 12345, 0, 99);
    ooo_segs(&b, far_segs, sizeof(far_segs) / sizeof(far_segs[0]));
    rt_gen(&b, UW_MPA_MULPDU_MAX, false);
    rt_gen(&b, 40000, true);
    rt_gen(&b, 60000, false);
    rt_gen(&b, 9000, false);
    rt_lit(&b, 7, 1);
    emit("ooo", "valid_beyond_cap", &b);
    /* Raw streams: a valid one to start from, then damaged copies. */
    for (unsigned k = 0; k < 6; k++) {
        unsigned flags = k & 1 ? MC : UW_MPA_MARKERS;
        b.n = 0;
        ooo_hdr(&b, flags | (k >= 4 ? 128 : 0), 1, positions[k % 4], 7777, 0, 50 + k);
        ooo_segs(&b, rev_segs, sizeof(rev_segs) / sizeof(rev_segs[0]));
        size_t body = b.n;
        uint32_t pos = positions[k % 4];
        uint8_t u[300];
        for (unsigned i = 0; i < 20; i++) {
            pattern(u, 100 + i * 9, i);
            put_fpdu(&b, u, 100 + i * 9, &pos, flags);
        }
        if (k == 2 || k == 3)
            b.d[body + 1500] ^= 0x10; /* a CRC or marker error in the middle */
        if (k == 3)
            b.n -= 5; /* and truncated */
        snprintf(name, sizeof(name), "raw_%u_f%u", k, flags);
        emit("ooo", name, &b);
    }
    sb_free(&b);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s OUTDIR (writes OUTDIR/<target>/<seed>)\n", argv[0]);
        return 2;
    }
    outdir = argv[1];
    mkdir_p(outdir);
    seeds_fpdu_rx();
    seeds_fpdu_roundtrip();
    seeds_frame();
    seeds_negotiate();
    seeds_ooo();
    printf("wrote %lu seeds under %s\n", written, outdir);
    return 0;
}
