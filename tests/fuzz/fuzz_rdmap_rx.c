/* Fuzz target: the DDP/RDMAP receive path of a QP (rdmap/qp_rx.c), driven
 * without sockets through uw__qp_rx_feed(), against a small table of
 * registered regions with guard octets around them.
 *
 * Input:  b0  bit0 CRC, bit1 markers (both directions), bit2 peer-to-peer
 *             responder waiting for an RTR, bits3-4 RTR types accepted
 *             (send, write, read, all), bit5 framed mode, bit6 we are the
 *             initiator (sends our RTR first when p2p), bit7 post two RDMA
 *             Reads of our own (so that Read Responses have a request)
 *         b1  bits0-2 IRD (0-7), bits3-5 ORD (0-7), bits6-7 MULPDU mode
 *         b2..b5 split seed
 *         rest    framed mode: ULPDU records (fz_ulpdus_read) that the target
 *                 frames with uw_mpa_fpdu_encode at the right stream
 *                 positions, so CRCs and markers are valid and the DDP/RDMAP
 *                 checks are reached; raw mode: the peer's stream as is
 *
 * The regions sit at a fixed address (FZ_RX_BASE, see below) and get the
 * same STags in every run (registration order in a fresh context: 0x101,
 * 0x201, ...), so inputs (and the seeds of gen_rdmap_seeds.c) can name them.
 *
 *   region  offset  length  access          STag
 *   W           64    4096  LW RW           0x101  target of Writes
 *   R         4224    4096  LW RR           0x201  source of the peer's Reads
 *   L         8384    8192  LW              0x301  receives and our Read sinks
 *   INV      16640    1024  LW RW RI        0x401  remotely invalidatable
 *   NOW      17728    1024  LW RR           0x501  no remote write
 *   PD2      18816    1024  LW RW RR (pd2)  0x601  another protection domain
 *
 * Eight receives (wr_id 1-8) are posted: receive i has (i % 3) + 1 SGEs of
 * 256 octets at L + (i - 1) * 768. Our Reads (wr_id 101, 102) sink into
 * L + 6144 and L + 7168, 1024 octets each, from rkey 0x9900 TO 0x1000/0x2000.
 *
 * The stream is fed in chunks chosen by the seed (fz_chunk: one octet a
 * quarter of the time); what the QP transmits is drained at random points,
 * in random partial writes, and decoded. Checked after every chunk:
 *   - guard octets and regions the peer can never write (R, NOW, PD2) are
 *     unchanged; W and INV change only while valid; L changes only inside
 *     posted receives and Read sinks;
 *   - completions name posted work requests with sane lengths;
 *   - once uw__qp_rx_feed() has failed, it fails again for any further
 *     octets and nothing at all changes (memory, completions, events);
 *   - the transmitted stream decodes as valid FPDUs; every segment has
 *     DDP/RDMAP version 1 and fits the MULPDU; a Terminate is the last thing
 *     sent, at most once, with a code RFC 5040 defines; an ESTABLISHED event
 *     comes at most once and only in peer-to-peer mode. */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "common.h"
#include "uwarp/error.h"
#include "uwarp/mpa.h"
#include "uwarp/verbs.h"
#include "verbs/internal.h"

#define FZ_RX_BASE 0x200000000000ull
#define GUARD 64u
#define ARENA_LEN 19904u
#define MAX_INPUT (256u * 1024u)

enum { R_W, R_R, R_L, R_INV, R_NOW, R_PD2, NREG };
static const struct {
    uint32_t off, len;
    unsigned access;
    int pd;
} reg[NREG] = {
    [R_W] = {64, 4096, UW_ACCESS_LOCAL_WRITE | UW_ACCESS_REMOTE_WRITE, 0},
    [R_R] = {4224, 4096, UW_ACCESS_LOCAL_WRITE | UW_ACCESS_REMOTE_READ, 0},
    [R_L] = {8384, 8192, UW_ACCESS_LOCAL_WRITE, 0},
    [R_INV] = {16640, 1024,
               UW_ACCESS_LOCAL_WRITE | UW_ACCESS_REMOTE_WRITE | UW_ACCESS_REMOTE_INVALIDATE, 0},
    [R_NOW] = {17728, 1024, UW_ACCESS_LOCAL_WRITE | UW_ACCESS_REMOTE_READ, 0},
    [R_PD2] = {18816, 1024, UW_ACCESS_LOCAL_WRITE | UW_ACCESS_REMOTE_WRITE | UW_ACCESS_REMOTE_READ,
               1},
};

static uint8_t *arena; /* at FZ_RX_BASE when the kernel lets us */
static uint8_t shadow[ARENA_LEN];
static uint8_t pattern[ARENA_LEN]; /* what the arena holds at the start of each run */
/* Octets of L that placement may touch: posted receives and Read sinks. */
static bool l_writable[8192];

static void arena_setup(void)
{
    if (arena)
        return;
    void *p = mmap((void *)(uintptr_t)FZ_RX_BASE, ARENA_LEN, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
    if (p == MAP_FAILED || p != (void *)(uintptr_t)FZ_RX_BASE) {
        /* Still a valid target; inputs naming fixed addresses miss, though. */
        if (p != MAP_FAILED)
            munmap(p, ARENA_LEN);
        p = malloc(ARENA_LEN);
        FZ_CHECK(p != NULL);
    }
    arena = p;
    for (uint32_t i = 0; i < ARENA_LEN; i++)
        pattern[i] = (uint8_t)(i * 7u + 3u);
    for (int i = 1; i <= 8; i++) {
        uint32_t base = (uint32_t)(i - 1) * 768u;
        for (uint32_t k = 0; k < (uint32_t)((i % 3) + 1) * 256u; k++)
            l_writable[base + k] = true;
    }
    for (uint32_t k = 6144; k < 8192; k++)
        l_writable[k] = true;
}

typedef struct fz_qp {
    uw_ctx *ctx;
    uw_pd *pd, *pd2;
    uw_cq *scq, *rcq;
    uw_qp *qp;
    uw_mr *mr[NREG];
    bool p2p;
    unsigned txflags;
    uint32_t mulpdu;
    uw_mpa_rx *txdec;
    bool term_seen, dead_tx;
    unsigned established, terminated;
    uint8_t inv_snap[1024]; /* INV after its invalidation */
    bool inv_gone;
    fz_rng split;
} fz_qp;

static uint8_t *at(int r)
{
    return arena + reg[r].off;
}

static int on_tx(void *ud, const uw_mpa_ulpdu *u)
{
    fz_qp *f = ud;
    uint8_t b[128];
    size_t n = 0;
    for (size_t i = 0; i < u->iovcnt && n < sizeof(b); i++) {
        size_t t = u->iov[i].iov_len;
        if (t > sizeof(b) - n)
            t = sizeof(b) - n;
        memcpy(b + n, u->iov[i].iov_base, t);
        n += t;
    }
    /* Nothing after a Terminate. */
    FZ_CHECK(!f->term_seen);
    /* RFC 5041 5.2: every segment fits the MULPDU (128 or more here). */
    FZ_CHECK(u->len <= f->mulpdu);
    FZ_CHECK(u->len >= 14);
    FZ_CHECK((b[0] & 3) == 1 && (b[1] >> 6) == 1);
    FZ_CHECK((b[0] & 0x3C) == 0 && (b[1] & 0x30) == 0);
    uint8_t op = b[1] & 0xF;
    bool tagged = b[0] & 0x80;
    if (tagged) {
        /* Read Responses, or our Write RTR. */
        FZ_CHECK(op == 2 || op == 0);
    } else {
        FZ_CHECK(u->len >= 18);
        FZ_CHECK(op == 1 || op == 3 || op == 7);
        if (op == 7) {
            FZ_CHECK(u->len >= 22);
            uw__term_msg t;
            FZ_CHECK(uw__term_decode(b + 18, n - 18 < u->len - 18 ? n - 18 : u->len - 18, &t) == 0);
            FZ_CHECK(uw__term_valid(t.term));
            f->term_seen = true;
        }
    }
    return 0;
}

static void drain_tx(fz_qp *f)
{
    uint8_t tmp[4096];
    for (int round = 0; round < 10000; round++) {
        struct iovec iov[32];
        int k = uw__qp_tx_iov(f->qp, iov, 32);
        FZ_CHECK(k >= 0);
        if (k == 0)
            return;
        /* Part of the offered octets, as a socket might take. */
        size_t take = 0;
        for (int i = 0; i < k && take < sizeof(tmp); i++) {
            size_t t = iov[i].iov_len;
            if (t > sizeof(tmp) - take)
                t = sizeof(tmp) - take;
            memcpy(tmp + take, iov[i].iov_base, t);
            take += t;
        }
        if (take > 1 && fz_rng_below(&f->split, 2))
            take = 1 + (size_t)fz_rng_below(&f->split, take);
        uw__qp_tx_advance(f->qp, take);
        ssize_t r = uw_mpa_rx_feed(f->txdec, tmp, take, on_tx, f);
        FZ_CHECK(r == (ssize_t)take);
    }
    FZ_CHECK(!"transmit never ran dry");
}

static void check_wc(fz_qp *f)
{
    uw_wc wc[16];
    int n;
    /* uw_cq_poll() also progresses the context (system calls): only when
     * there is something to take. */
    if (!f->rcq->ring.count && !f->scq->ring.count)
        return;
    while ((n = uw_cq_poll(f->rcq, wc, 16)) > 0) {
        for (int i = 0; i < n; i++) {
            FZ_CHECK(wc[i].status == UW_WC_SUCCESS);
            FZ_CHECK(wc[i].opcode == UW_WC_RECV);
            FZ_CHECK(wc[i].wr_id >= 1 && wc[i].wr_id <= 8);
            FZ_CHECK(wc[i].byte_len <= ((wc[i].wr_id % 3) + 1) * 256u);
            /* Only INV may be invalidated by the peer. */
            if (wc[i].flags & UW_WC_WITH_INV)
                FZ_CHECK(wc[i].invalidated_stag == uw_mr_stag(f->mr[R_INV]));
        }
    }
    FZ_CHECK(n == 0);
    while ((n = uw_cq_poll(f->scq, wc, 16)) > 0) {
        for (int i = 0; i < n; i++) {
            FZ_CHECK(wc[i].opcode == UW_WC_RDMA_READ);
            FZ_CHECK(wc[i].wr_id == 101 || wc[i].wr_id == 102);
            if (wc[i].status == UW_WC_SUCCESS)
                FZ_CHECK(wc[i].byte_len == 1024);
        }
    }
    FZ_CHECK(n == 0);
}

static void check_events(fz_qp *f)
{
    uw_cm_event ev;
    if (!f->ctx->ev_head)
        return;
    while (uw_cm_get_event(f->ctx, &ev) == 1) {
        FZ_CHECK(ev.qp == f->qp);
        if (ev.type == UW_CM_ESTABLISHED) {
            FZ_CHECK(f->p2p);
            f->established++;
            FZ_CHECK(f->established == 1);
        } else {
            FZ_CHECK(ev.type == UW_CM_TERMINATED);
            FZ_CHECK(ev.term_received);
            f->terminated++;
            FZ_CHECK(f->terminated == 1);
        }
    }
}

/* The octets that must not have changed. */
static void check_memory(fz_qp *f)
{
    bool same = memcmp(arena, shadow, ARENA_LEN) == 0;
    for (uint32_t i = 0; !same && i < ARENA_LEN; i++) {
        if (arena[i] == shadow[i])
            continue;
        /* W and INV: remote writes while valid; L: its receives and sinks. */
        bool ok = false;
        if (i >= reg[R_W].off && i < reg[R_W].off + reg[R_W].len)
            ok = true;
        else if (i >= reg[R_INV].off && i < reg[R_INV].off + reg[R_INV].len)
            ok = true;
        else if (i >= reg[R_L].off && i < reg[R_L].off + reg[R_L].len)
            ok = l_writable[i - reg[R_L].off];
        if (!ok) {
            FZ_DEBUG("octet %u changed (%02x -> %02x)\n", i, shadow[i], arena[i]);
            FZ_CHECK(!"write outside the writable regions");
        }
    }
    if (!f->inv_gone && !uw_mr_valid(f->mr[R_INV])) {
        f->inv_gone = true;
        memcpy(f->inv_snap, at(R_INV), sizeof(f->inv_snap));
    } else if (f->inv_gone) {
        FZ_CHECK(memcmp(f->inv_snap, at(R_INV), sizeof(f->inv_snap)) == 0);
    }
    FZ_CHECK(uw_mr_valid(f->mr[R_W]));
}

static void setup(fz_qp *f, uint8_t b0, uint8_t b1, uint32_t seed)
{
    memset(f, 0, sizeof(*f));
    fz_rng_init(&f->split, seed);
    /* A copy, not a loop: the harness's own loops count as coverage work. */
    memcpy(arena, pattern, ARENA_LEN);
    memcpy(shadow, pattern, ARENA_LEN);
    FZ_CHECK(uw_ctx_create(&f->ctx, NULL) == 0);
    FZ_CHECK(uw_pd_alloc(f->ctx, &f->pd) == 0);
    FZ_CHECK(uw_pd_alloc(f->ctx, &f->pd2) == 0);
    FZ_CHECK(uw_cq_create(f->ctx, 64, &f->scq) == 0);
    FZ_CHECK(uw_cq_create(f->ctx, 64, &f->rcq) == 0);
    for (int i = 0; i < NREG; i++)
        FZ_CHECK(uw_mr_reg(reg[i].pd ? f->pd2 : f->pd, at(i), reg[i].len, reg[i].access,
                           &f->mr[i]) == 0);
    uw_qp_attr qa = {
        .pd = f->pd, .send_cq = f->scq, .recv_cq = f->rcq, .max_send_wr = 16, .max_recv_wr = 16};
    FZ_CHECK(uw__qp_alloc(f->ctx, &qa, &f->qp) == 0);
    static const uint8_t rtrs[4] = {UW_MPA_RTR_SEND, UW_MPA_RTR_WRITE, UW_MPA_RTR_READ,
                                    UW_MPA_RTR_ALL};
    static const uint32_t muls[4] = {128, 512, 1448, 64768};
    bool crc = b0 & 1, markers = b0 & 2, initiator = b0 & 0x40;
    f->p2p = (b0 & 4) != 0;
    uint8_t rtr = rtrs[(b0 >> 3) & 3];
    if (f->p2p && initiator && rtr == UW_MPA_RTR_ALL)
        rtr = UW_MPA_RTR_WRITE; /* an initiator sends one type */
    f->mulpdu = muls[b1 >> 6];
    uw_mpa_params prm = {.rev = 2,
                         .ddp_version = 1,
                         .crc = crc,
                         .markers_rx = markers,
                         .markers_tx = markers,
                         .enhanced = true,
                         .ird = b1 & 7,
                         .ord = (b1 >> 3) & 7,
                         .p2p = f->p2p,
                         .rtr = rtr};
    prm.peer_ird = prm.ord;
    prm.peer_ord = prm.ird;
    uw__qp_start(f->qp, &prm, initiator, f->mulpdu, f->mulpdu, 0, 0);
    FZ_CHECK(uw_qp_state(f->qp) == UW_QPS_RTS);
    f->txflags = (crc ? UW_MPA_CRC : 0) | (markers ? UW_MPA_MARKERS : 0);
    uw_mpa_rx_opts ro = {.flags = f->txflags};
    FZ_CHECK(uw_mpa_rx_create(&f->txdec, &ro) == 0);
    uint32_t lkey = uw_mr_stag(f->mr[R_L]);
    for (int i = 1; i <= 8; i++) {
        uw_sge sg[3];
        int n = (i % 3) + 1;
        for (int k = 0; k < n; k++)
            sg[k] = (uw_sge){(uint64_t)(uintptr_t)(at(R_L) + (i - 1) * 768 + k * 256), 256, lkey};
        uw_recv_wr w = {.wr_id = (uint64_t)i, .sg_list = sg, .num_sge = n};
        FZ_CHECK(uw_post_recv(f->qp, &w, 1, NULL) == 0);
    }
    if (b0 & 0x80) {
        for (int i = 0; i < 2; i++) {
            uw_sge sg = {(uint64_t)(uintptr_t)(at(R_L) + 6144 + i * 1024), 1024, lkey};
            uw_send_wr w = {.wr_id = 101u + (uint64_t)i,
                            .opcode = UW_WR_RDMA_READ,
                            .flags = UW_SEND_SIGNALED,
                            .sg_list = &sg,
                            .num_sge = 1,
                            .remote_addr = 0x1000u * (uint64_t)(i + 1),
                            .rkey = 0x9900};
            FZ_CHECK(uw_post_send(f->qp, &w, 1, NULL) == 0);
        }
    }
}

static void teardown(fz_qp *f)
{
    FZ_CHECK(uw_qp_destroy(f->qp) == 0);
    for (int i = 0; i < NREG; i++)
        FZ_CHECK(uw_mr_dereg(f->mr[i]) == 0);
    FZ_CHECK(uw_cq_destroy(f->scq) == 0);
    FZ_CHECK(uw_cq_destroy(f->rcq) == 0);
    FZ_CHECK(uw_pd_dealloc(f->pd) == 0);
    FZ_CHECK(uw_pd_dealloc(f->pd2) == 0);
    FZ_CHECK(uw_ctx_destroy(f->ctx) == 0);
    uw_mpa_rx_destroy(f->txdec);
}

/* Frames the records of in as FPDUs from stream position 0. */
static uint8_t *frame_records(fz_in *in, unsigned flags, size_t *len)
{
    fz_rng gen;
    fz_rng_init(&gen, 0x5EED);
    fz_ulpdus u;
    fz_ulpdus_read(&u, in, &gen, 512, 64u * 1024u);
    /* Per FPDU at most 2 + 3 + 4 octets of framing and a leading marker;
     * an inner marker every 508 octets. */
    size_t cap = 2 * u.total + u.count * 16 + 64;
    uint8_t *s = malloc(cap);
    FZ_CHECK(s != NULL);
    size_t n = 0;
    uint32_t pos = 0;
    for (size_t i = 0; i < u.count; i++) {
        ssize_t w = uw_mpa_fpdu_encode(s + n, cap - n, u.data + u.off[i], u.len[i], pos, flags);
        if (w < 0)
            break; /* a marked ULPDU too long for 16-bit FPDUPTRs: stop there */
        n += (size_t)w;
        pos += (uint32_t)w;
    }
    fz_ulpdus_free(&u);
    *len = n;
    return s;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 6 || size > MAX_INPUT)
        return 0;
    arena_setup();
    fz_in in;
    fz_in_init(&in, data, size);
    uint8_t b0 = fz_u8(&in), b1 = fz_u8(&in);
    uint32_t seed = fz_u32(&in);
    fz_qp f;
    setup(&f, b0, b1, seed);
    size_t slen;
    uint8_t *stream;
    if (b0 & 0x20) {
        stream = frame_records(&in, f.txflags, &slen);
    } else {
        slen = fz_left(&in);
        stream = malloc(slen ? slen : 1);
        FZ_CHECK(stream != NULL);
        memcpy(stream, fz_take(&in, &slen), slen);
    }
    FZ_DEBUG("b0 %02x b1 %02x stream %zu octets\n", b0, b1, slen);
    drain_tx(&f); /* our RTR and Read Requests, if any */
    size_t off = 0;
    int err = 0;
    while (off < slen) {
        size_t c = fz_chunk(&f.split, slen - off);
        int r = uw__qp_rx_feed(f.qp, stream + off, c);
        FZ_DEBUG("feed %zu at %zu: %d\n", c, off, r);
        off += c;
        /* A full CQ would pause the QP; the CQs are polled after every
         * chunk and hold more than eight receives and two Reads. */
        FZ_CHECK(r != UW_ENOBUFS);
        check_wc(&f);
        check_events(&f);
        if (fz_rng_below(&f.split, 4) == 0)
            drain_tx(&f);
        /* The memory check costs two passes over the arena: after some
         * chunks, always after an error and at the end. Octets outside the
         * writable areas are never legitimately written, so a stray write
         * is still caught by a later check. */
        if (r < 0 || off == slen || fz_rng_below(&f.split, 8) == 0) {
            check_memory(&f);
            /* Keep the shadow in step with what legitimately changed. */
            memcpy(shadow, arena, ARENA_LEN);
        }
        if (r < 0) {
            err = r;
            break;
        }
    }
    drain_tx(&f);
    if (err) {
        /* RFC 5040 / RFC 5044 8: after an error nothing more is processed. */
        FZ_CHECK(f.qp->rd.dead);
        unsigned est = f.established, term = f.terminated;
        bool term_seen = f.term_seen;
        if (off < slen)
            FZ_CHECK(uw__qp_rx_feed(f.qp, stream + off, slen - off) == UW_EPIPE);
        static const uint8_t more[64];
        FZ_CHECK(uw__qp_rx_feed(f.qp, more, sizeof(more)) == UW_EPIPE);
        check_memory(&f);
        FZ_CHECK(memcmp(shadow, arena, ARENA_LEN) == 0);
        uw_wc wc[4];
        FZ_CHECK(uw_cq_poll(f.rcq, wc, 4) == 0);
        check_events(&f);
        FZ_CHECK(f.established == est && f.terminated == term);
        drain_tx(&f);
        FZ_CHECK(f.term_seen == term_seen);
        /* Either we sent a Terminate or we received one. */
        FZ_CHECK(f.term_seen || err == UW_ETERM_RECEIVED);
    }
    free(stream);
    teardown(&f);
    return 0;
}
