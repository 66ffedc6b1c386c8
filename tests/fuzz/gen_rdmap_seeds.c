/* Writes the seed corpora of fuzz_rdmap_rx and fuzz_rdmap_term:
 *
 *   gen_rdmap_seeds OUTDIR    writes OUTDIR/rdmap_rx/<name> and OUTDIR/rdmap_term/<name>
 *
 * Not part of the build (its name does not match the fuzz_*.c glob). Build
 * and run it by hand against any build of the library, for example:
 *
 *   cc -std=gnu17 -Iinclude -Isrc tests/fuzz/gen_rdmap_seeds.c \
 *      build-rx/src/libuwarp.a -lisal -o /tmp/gen_rdmap_seeds
 *   /tmp/gen_rdmap_seeds tests/fuzz/corpus
 *
 * (-lisal only when the library was built with ISA-L.) Files of the same
 * name are overwritten; others, such as merged fuzzer finds, stay.
 *
 * The rdmap_rx seeds follow the input layout at the top of
 * tests/fuzz/fuzz_rdmap_rx.c and name its regions by their fixed addresses
 * and STags (the constants below repeat that table; keep them in step).
 * Framed seeds are ULPDU records that the target frames itself; raw seeds
 * are the same ULPDUs framed here, with valid CRCs and markers. */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "uwarp/mpa.h"

#define BASE 0x200000000000ull
#define W_TO (BASE + 64)
#define R_TO (BASE + 4224)
#define L_TO (BASE + 8384)
#define INV_TO (BASE + 16640)
#define NOW_TO (BASE + 17728)
#define PD2_TO (BASE + 18816)
#define ST_W 0x101u
#define ST_R 0x201u
#define ST_L 0x301u
#define ST_INV 0x401u
#define ST_NOW 0x501u
#define ST_PD2 0x601u

/* b0 bits (fuzz_rdmap_rx.c) */
#define CRC 0x01u
#define MARK 0x02u
#define P2P 0x04u
#define RTR_SEND 0x00u
#define RTR_WRITE 0x08u
#define RTR_READ 0x10u
#define RTR_ALL 0x18u
#define FRAMED 0x20u
#define INIT 0x40u
#define READS 0x80u

static const char *outdir;
static unsigned long written;

typedef struct sb {
    uint8_t d[70000];
    size_t n;
} sb;

/* The ULPDUs of one seed. */
typedef struct seed {
    uint8_t ul[64][240];
    size_t len[64];
    size_t count;
    uint32_t msn[3];
} seed;

static void put32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

static void put64(uint8_t *p, uint64_t v)
{
    put32(p, (uint32_t)(v >> 32));
    put32(p + 4, (uint32_t)v);
}

static uint8_t *next(seed *s, size_t len)
{
    if (s->count == 64 || len > 239) {
        fprintf(stderr, "seed too large\n");
        exit(1);
    }
    s->len[s->count] = len;
    memset(s->ul[s->count], 0, 240);
    return s->ul[s->count++];
}

static void tagged(seed *s, uint8_t op, bool last, uint32_t stag, uint64_t to, size_t plen,
                   uint8_t fill)
{
    uint8_t *p = next(s, 14 + plen);
    p[0] = (uint8_t)(0x81 | (last ? 0x40 : 0));
    p[1] = (uint8_t)(0x40 | op);
    put32(p + 2, stag);
    put64(p + 6, to);
    memset(p + 14, fill, plen);
}

static uint8_t *untagged(seed *s, uint8_t op, bool last, uint32_t inv, uint32_t qn, uint32_t msn,
                         uint32_t mo, size_t plen)
{
    uint8_t *p = next(s, 18 + plen);
    p[0] = (uint8_t)(0x01 | (last ? 0x40 : 0));
    p[1] = (uint8_t)(0x40 | op);
    put32(p + 2, inv);
    put32(p + 6, qn);
    put32(p + 10, msn);
    put32(p + 14, mo);
    for (size_t i = 0; i < plen; i++)
        p[18 + i] = (uint8_t)(i * 13 + 1);
    return p + 18;
}

/* A Send of plen octets in segments of at most seg octets. */
static void send(seed *s, uint8_t op, uint32_t inv, size_t plen, size_t seg)
{
    uint32_t msn = s->msn[0]++;
    size_t off = 0;
    do {
        size_t c = plen - off < seg ? plen - off : seg;
        untagged(s, op, off + c == plen, inv, 0, msn, (uint32_t)off, c);
        off += c;
    } while (off < plen);
}

static void write_msg(seed *s, uint32_t stag, uint64_t to, size_t plen, size_t seg)
{
    size_t off = 0;
    do {
        size_t c = plen - off < seg ? plen - off : seg;
        tagged(s, 0, off + c == plen, stag, to + off, c, (uint8_t)(0xA0 + off));
        off += c;
    } while (off < plen);
}

static void read_req(seed *s, uint32_t sink, uint64_t sink_to, uint32_t size, uint32_t src,
                     uint64_t src_to)
{
    uint8_t *p = untagged(s, 1, true, 0, 1, s->msn[1]++, 0, 28);
    put32(p, sink);
    put64(p + 4, sink_to);
    put32(p + 12, size);
    put32(p + 16, src);
    put64(p + 20, src_to);
}

static void term(seed *s, const uint8_t *pl, size_t n)
{
    uint8_t *p = untagged(s, 7, true, 0, 2, s->msn[2]++, 0, n);
    memcpy(p, pl, n);
}

static void write_file(const char *sub, const char *name, const uint8_t *d, size_t n)
{
    char path[1024];
    snprintf(path, sizeof(path), "%s/%s", outdir, sub);
    if (mkdir(path, 0755) != 0 && errno != EEXIST) {
        perror(path);
        exit(1);
    }
    snprintf(path, sizeof(path), "%s/%s/%s", outdir, sub, name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(d, 1, n, f) != n || fclose(f) != 0) {
        perror(path);
        exit(1);
    }
    written++;
}

/* Writes the seed framed by the target (records) and, for raw, framed
 * here. */
static void emit(const char *name, uint8_t b0, uint8_t b1, seed *s)
{
    static sb out;
    out.n = 0;
    uint8_t hdr[6] = {(uint8_t)(b0 | FRAMED), b1, 0x12, 0x34, 0x56, 0x78};
    memcpy(out.d, hdr, 6);
    out.n = 6;
    for (size_t i = 0; i < s->count; i++) {
        out.d[out.n++] = (uint8_t)s->len[i];
        memcpy(out.d + out.n, s->ul[i], s->len[i]);
        out.n += s->len[i];
    }
    char nm[256];
    snprintf(nm, sizeof(nm), "%s-framed", name);
    write_file("rdmap_rx", nm, out.d, out.n);
    /* Raw: the FPDUs themselves, from stream position 0. */
    unsigned flags = ((b0 & CRC) ? UW_MPA_CRC : 0) | ((b0 & MARK) ? UW_MPA_MARKERS : 0);
    hdr[0] = (uint8_t)(b0 & ~FRAMED);
    memcpy(out.d, hdr, 6);
    out.n = 6;
    uint32_t pos = 0;
    for (size_t i = 0; i < s->count; i++) {
        ssize_t w = uw_mpa_fpdu_encode(out.d + out.n, sizeof(out.d) - out.n, s->ul[i], s->len[i],
                                       pos, flags);
        if (w < 0) {
            fprintf(stderr, "encode failed\n");
            exit(1);
        }
        out.n += (size_t)w;
        pos += (uint32_t)w;
    }
    snprintf(nm, sizeof(nm), "%s-raw", name);
    write_file("rdmap_rx", nm, out.d, out.n);
}

static void reset(seed *s)
{
    memset(s, 0, sizeof(*s));
    s->msn[0] = s->msn[1] = s->msn[2] = 1;
}

static void rx_seeds(void)
{
    static seed s;
    static const uint8_t modes[4] = {CRC, 0, CRC | MARK, MARK};
    static const char *const mn[4] = {"crc", "plain", "crc-markers", "markers"};
    uint8_t b1 = 0x04 | (0x04 << 3) | 0x40; /* IRD 4, ORD 4, MULPDU 512 */
    for (int m = 0; m < 4; m++) {
        char name[128];
        uint8_t b0 = modes[m];
        /* Writes: one segment, several segments, zero length. */
        reset(&s);
        write_msg(&s, ST_W, W_TO + 8, 100, 100);
        write_msg(&s, ST_W, W_TO + 1000, 200, 64);
        write_msg(&s, ST_W, W_TO, 0, 1);
        write_msg(&s, ST_INV, INV_TO + 4, 30, 30);
        snprintf(name, sizeof(name), "writes-%s", mn[m]);
        emit(name, b0, b1, &s);
        /* Sends into the posted receives: all four opcodes, invalidation. */
        reset(&s);
        send(&s, 3, 0, 200, 70);
        send(&s, 5, 0, 0, 1);
        send(&s, 3, 0, 250, 200); /* receive 3 holds 256 */
        send(&s, 4, ST_INV, 40, 40);
        send(&s, 6, ST_INV, 10, 10);
        write_msg(&s, ST_INV, INV_TO, 8, 8); /* invalidated: DDP 1/0 */
        snprintf(name, sizeof(name), "sends-%s", mn[m]);
        emit(name, b0, b1, &s);
        /* The peer reads from R; our Reads answered. */
        reset(&s);
        read_req(&s, 0xABCD00, 0x10000, 200, ST_R, R_TO + 16);
        read_req(&s, 0xABCE00, 0x20000, 1, ST_R, R_TO + 4095);
        read_req(&s, 0xABCF00, 0x30000, 0, ST_R, 0);
        for (int r = 0; r < 2; r++) {
            uint64_t to = L_TO + 6144 + (uint64_t)r * 1024;
            for (size_t off = 0; off < 1024; off += 200) {
                size_t c = 1024 - off < 200 ? 1024 - off : 200;
                tagged(&s, 2, off + c == 1024, ST_L, to + off, c, (uint8_t)(r + 1));
            }
        }
        snprintf(name, sizeof(name), "reads-%s", mn[m]);
        emit(name, (uint8_t)(b0 | READS), b1, &s);
    }
    /* Peer-to-peer responder: each RTR, then traffic. */
    static const struct {
        uint8_t b0;
        const char *n;
    } rtr[] = {{P2P | CRC | RTR_SEND, "rtr-send"},
               {P2P | CRC | RTR_WRITE, "rtr-write"},
               {P2P | CRC | RTR_READ, "rtr-read"},
               {P2P | RTR_ALL, "rtr-all-write"}};
    for (int i = 0; i < 4; i++) {
        reset(&s);
        if ((rtr[i].b0 & RTR_ALL) == RTR_SEND)
            send(&s, 3, 0, 0, 1);
        else if ((rtr[i].b0 & RTR_ALL) == RTR_READ)
            read_req(&s, 0, 0, 0, 1, 0);
        else
            tagged(&s, 0, true, 1, 0, 0, 0);
        send(&s, 3, 0, 50, 50);
        write_msg(&s, ST_W, W_TO, 20, 20);
        emit(rtr[i].n, rtr[i].b0, b1, &s);
    }
    /* Initiator in p2p: our RTR goes out first; the peer answers a Read RTR. */
    reset(&s);
    tagged(&s, 2, true, 0, 0, 0, 0);
    send(&s, 3, 0, 10, 10);
    emit("initiator-read-rtr", P2P | INIT | CRC | RTR_READ, b1, &s);
    reset(&s);
    send(&s, 3, 0, 0, 1);
    emit("rtr-wrong-first", P2P | CRC | RTR_WRITE, b1, &s);
    /* Terminates. */
    static const uint8_t t_rfc[4] = {0x20, 0x07, 0, 0}, t_siw[4] = {0x02, 0x07, 0, 0};
    uint8_t t_ddp[20] = {0x11, 0x00, 0xC0, 0x00, 0x00, 0x1E, 0xC1, 0x40, 0, 0, 0x12, 0x01};
    reset(&s);
    term(&s, t_rfc, 4);
    emit("term-rfc", CRC, b1, &s);
    reset(&s);
    term(&s, t_siw, 4);
    emit("term-siw", 0, b1, &s);
    reset(&s);
    send(&s, 3, 0, 20, 20);
    term(&s, t_ddp, sizeof(t_ddp));
    emit("term-ddp", CRC, b1, &s);
    reset(&s);
    term(&s, t_siw, 4);
    emit("term-before-rtr", P2P | CRC | RTR_ALL, b1, &s);
    /* One seed per receive check (each ends in a Terminate). */
    reset(&s);
    write_msg(&s, 0xBAD01, W_TO, 16, 16);
    emit("err-stag", CRC, b1, &s);
    reset(&s);
    write_msg(&s, ST_W, W_TO + 4090, 16, 16);
    emit("err-bounds", CRC, b1, &s);
    reset(&s);
    write_msg(&s, ST_W, W_TO - 1, 16, 16);
    emit("err-base", CRC, b1, &s);
    reset(&s);
    write_msg(&s, ST_PD2, PD2_TO, 16, 16);
    emit("err-pd", CRC, b1, &s);
    reset(&s);
    write_msg(&s, ST_NOW, NOW_TO, 16, 16);
    emit("err-access", CRC, b1, &s);
    reset(&s);
    write_msg(&s, ST_W, UINT64_MAX - 7, 16, 16);
    emit("err-to-wrap", CRC, b1, &s);
    reset(&s);
    read_req(&s, 0x100, 0, 16, ST_W, W_TO);
    emit("err-read-access", CRC, b1, &s);
    reset(&s);
    for (int i = 0; i < 5; i++)
        read_req(&s, 0x100, 0, 16, ST_R, R_TO);
    emit("err-read-ird", CRC, (uint8_t)(b1 & ~7u), &s);
    reset(&s);
    untagged(&s, 3, true, 0, 3, 1, 0, 8);
    emit("err-qn", CRC, b1, &s);
    reset(&s);
    untagged(&s, 3, true, 0, 0, 7, 0, 8);
    emit("err-msn", CRC, b1, &s);
    reset(&s);
    untagged(&s, 3, true, 0, 0, 1, 4, 8);
    emit("err-mo", CRC, b1, &s);
    reset(&s);
    send(&s, 3, 0, 220, 220);
    emit("err-too-long", CRC, b1, &s);
    reset(&s);
    send(&s, 4, ST_W, 8, 8);
    emit("err-inv", CRC, b1, &s);
    reset(&s);
    untagged(&s, 0, true, 0, 0, 1, 0, 8);
    emit("err-opcode", CRC, b1, &s);
    reset(&s);
    tagged(&s, 2, true, ST_L, L_TO, 8, 0);
    emit("err-resp-unexpected", CRC, b1, &s);
    reset(&s);
    uint8_t *v = next(&s, 10);
    v[0] = 0x41;
    v[1] = 0x43;
    emit("err-short", CRC, b1, &s);
    reset(&s);
    v = next(&s, 22);
    v[0] = 0x40; /* DDP version 0 */
    v[1] = 0x43;
    v[13] = 1;
    emit("err-ddp-version", CRC, b1, &s);
    reset(&s);
    v = next(&s, 22);
    v[0] = 0x41;
    v[1] = 0x83; /* RDMAP version 2 */
    v[13] = 1;
    emit("err-rdmap-version", CRC, b1, &s);
}

static void term_seeds(void)
{
    static const struct {
        const char *n;
        uint8_t d[64];
        size_t len;
    } t[] = {
        {"rfc-llp7", {0x01, 0x20, 0x07, 0x00, 0x00}, 5},
        {"siw-llp7", {0x01, 0x02, 0x07, 0x00, 0x00}, 5},
        {"siw-llp6", {0x00, 0x02, 0x06, 0x00, 0x00}, 5},
        {"crc", {0x01, 0x20, 0x02, 0x00, 0x00}, 5},
        {"ddp-tagged",
         {0x01, 0x11, 0x00, 0xC0, 0x00, 0x00, 0x1E, 0xC1, 0x40, 0, 0,
          0x12, 0x01, 0,    0,    0,    0,    0,    0,    0x10, 0},
         21},
        {"ddp-untagged", {0x01, 0x12, 0x02, 0xC0, 0x00, 0x00, 0x1A, 0x41, 0x43}, 4 + 1 + 2 + 18},
        {"rdmap-read", {0x01, 0x01, 0x02, 0xE0, 0x00, 0x00, 0x2E, 0x41, 0x41}, 1 + 4 + 2 + 18 + 28},
        {"r-only", {0x00, 0x02, 0x06, 0x20, 0x00}, 1 + 4 + 28},
        {"rdmap-ff", {0x01, 0x02, 0xFF, 0x00, 0x00}, 5},
        {"truncated", {0x01, 0x11, 0x00, 0xC0, 0x00, 0x00}, 6},
        {"empty", {0x00}, 1},
    };
    for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++)
        write_file("rdmap_term", t[i].n, t[i].d, t[i].len);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s OUTDIR\n", argv[0]);
        return 2;
    }
    outdir = argv[1];
    rx_seeds();
    term_seeds();
    printf("wrote %lu seeds\n", written);
    return 0;
}
