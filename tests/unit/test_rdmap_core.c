/* The RDMAP protocol object on its own: no context, no verbs objects, no
 * engine. It is given plain CQ rings, a plain STag table and an allocator,
 * and everything the engine must act on comes back in rd.news. This is what
 * the QP split promises (docs/design.md, "The QP split"): the core runs and
 * reports without anything above it. test_rdmap_rx.c covers the protocol
 * itself through the engine's QP. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "rdmap/rdmap.h"
#include "util/alloc.h"

/* Stand-ins for the handles: the core only stores and compares them. */
#define QP ((uw_qp *)(uintptr_t)0x1000)
#define PD ((uw_pd *)(uintptr_t)0x2000)

typedef struct core {
    struct uw__rdmap rd;
    uw_wc swc[8], rwc[8];
    struct uw__cqr scq, rcq;
    struct uw__mrt mrt;
    uw_allocator a;
    uw_mr mr;
    uint8_t mem[256];
    uint32_t pos; /* stream position of the next FPDU fed */
} core;

static void core_init_mulpdu(core *c, bool initiator, bool p2p, uint8_t rtr, uint32_t mulpdu)
{
    memset(c, 0, sizeof(*c));
    c->a = uw__allocator(NULL);
    c->scq = (struct uw__cqr){.wc = c->swc, .cap = 8};
    c->rcq = (struct uw__cqr){.wc = c->rwc, .cap = 8};
    assert_int_equal(uw__rd_init(&c->rd, &c->a, 4, 4), 0);
    c->rd.qp = QP;
    c->rd.pd = PD;
    c->rd.scq = &c->scq;
    c->rd.rcq = &c->rcq;
    c->rd.mrt = &c->mrt;
    c->mr = (uw_mr){.pd = PD,
                    .addr = c->mem,
                    .len = sizeof(c->mem),
                    .access = UW_ACCESS_LOCAL_WRITE,
                    .valid = true};
    assert_int_equal(uw__mrt_add(&c->mrt, &c->a, &c->mr), 0);
    uw_mpa_params prm = {.rev = 2,
                         .ddp_version = 1,
                         .crc = true,
                         .enhanced = true,
                         .p2p = p2p,
                         .rtr = rtr,
                         .ird = 4,
                         .ord = 4};
    assert_int_equal(uw__rd_start(&c->rd, &prm, initiator, mulpdu, mulpdu, 0, 0), 0);
    /* Entering RTS asks for a pass: something may be queued already. */
    assert_true(c->rd.news & UW__RD_KICK);
    c->rd.news = 0;
}

static void core_init(core *c, bool initiator, bool p2p, uint8_t rtr)
{
    core_init_mulpdu(c, initiator, p2p, rtr, 1024);
}

static void core_fini(core *c)
{
    uw__rd_fini(&c->rd);
    uw__mrt_free(&c->mrt, &c->a);
}

static void post_recv(core *c, uint64_t id)
{
    struct uw__rwqe *r = &c->rd.rq[(c->rd.rq_head + c->rd.rq_count) % c->rd.rq_cap];
    memset(r, 0, sizeof(*r));
    r->wr.wr_id = id;
    r->wr.num_sge = 1;
    r->sge[0] = (uw_sge){(uint64_t)(uintptr_t)c->mem, sizeof(c->mem), c->mr.stag};
    r->len = sizeof(c->mem);
    c->rd.rq_count++;
}

/* Frames an untagged segment (headers, then payload) and feeds it. */
static int feed_untagged(core *c, uint8_t op, uint32_t qn, uint32_t msn, const void *pay, size_t n)
{
    uint8_t ulpdu[128], fpdu[160];
    uw__ddp_hdr h = {.last = true, .dv = 1, .rv = 1, .opcode = op, .qn = qn, .msn = msn};
    size_t hl = uw__ddp_hdr_encode(&h, ulpdu);
    assert_true(hl + n <= sizeof(ulpdu));
    if (n)
        memcpy(ulpdu + hl, pay, n);
    ssize_t w = uw_mpa_fpdu_encode(fpdu, sizeof(fpdu), ulpdu, hl + n, c->pos, UW_MPA_CRC);
    assert_true(w > 0);
    c->pos += (uint32_t)w;
    return uw__rd_rx_feed(&c->rd, fpdu, (size_t)w);
}

static void test_rtr_is_news(void **st)
{
    (void)st;
    core c;
    core_init(&c, false, true, UW_MPA_RTR_ALL);
    /* The responder sends nothing before the RTR (RFC 6581 7.1). */
    struct iovec iov[8];
    assert_int_equal(uw__rd_tx_iov(&c.rd, iov, 8), 0);
    assert_int_equal(feed_untagged(&c, UW__OP_SEND, UW__QN_SEND, 1, NULL, 0), 0);
    assert_int_equal(c.rd.news, UW__RD_RTR_ARRIVED);
    assert_int_equal(c.rd.mpa.rtr, UW_MPA_RTR_SEND);
    assert_int_equal(c.rcq.count, 0);
    core_fini(&c);
}

static void test_completion_is_news(void **st)
{
    (void)st;
    core c;
    core_init(&c, true, false, 0);
    post_recv(&c, 7);
    assert_int_equal(feed_untagged(&c, UW__OP_SEND, UW__QN_SEND, 1, "hello", 5), 0);
    assert_true(c.rd.news & UW__RD_WC);
    assert_int_equal(c.rd.wc_new, 1);
    assert_int_equal(c.rcq.count, 1);
    assert_int_equal(c.rwc[0].wr_id, 7);
    assert_int_equal(c.rwc[0].byte_len, 5);
    assert_ptr_equal(c.rwc[0].qp, QP);
    assert_memory_equal(c.mem, "hello", 5);
    core_fini(&c);
}

static void test_terminates_are_news(void **st)
{
    (void)st;
    core c;
    core_init(&c, true, false, 0);
    /* A Send with the wrong MSN: our Terminate, and the fault with it. */
    post_recv(&c, 1);
    assert_int_equal(feed_untagged(&c, UW__OP_SEND, UW__QN_SEND, 9, "x", 1), UW_EDDP_MSN);
    assert_true(c.rd.news & UW__RD_TERM_QUEUED);
    assert_int_equal(c.rd.term_err, UW_EDDP_MSN);
    assert_true(c.rd.dead);
    struct iovec iov[8];
    assert_true(uw__rd_tx_iov(&c.rd, iov, 8) > 0);
    core_fini(&c);

    /* The peer's Terminate: handed up in term_in. */
    core_init(&c, true, false, 0);
    uw__term_msg t = {.term = {UW_TERM_RDMAP, 1, 0}};
    uint8_t b[64];
    size_t n = uw__term_encode(&t, b);
    assert_int_equal(feed_untagged(&c, UW__OP_TERMINATE, UW__QN_TERM, 1, b, n), UW_ETERM_RECEIVED);
    assert_int_equal(c.rd.news, UW__RD_TERM_RECEIVED);
    assert_int_equal(c.rd.term_in.term.layer, UW_TERM_RDMAP);
    assert_int_equal(c.rd.term_in.term.etype, 1);
    assert_true(c.rd.dead);
    core_fini(&c);
}

#define BIG (512u * 1024u)

/* Two cores with MULPDU mulpdu and one RDMA Write of BIG octets from src to
 * dst queued on tx; big_end() takes them down. */
typedef struct big {
    core tx, rx;
    uw_mr smr, dmr;
} big;

static void big_start(big *b, uint8_t *src, uint8_t *dst, uint32_t mulpdu)
{
    core_init_mulpdu(&b->tx, true, false, 0, mulpdu);
    core_init_mulpdu(&b->rx, false, false, 0, mulpdu);
    b->smr =
        (uw_mr){.pd = PD, .addr = src, .len = BIG, .access = UW_ACCESS_LOCAL_WRITE, .valid = true};
    b->dmr = (uw_mr){.pd = PD,
                     .addr = dst,
                     .len = BIG,
                     .access = UW_ACCESS_LOCAL_WRITE | UW_ACCESS_REMOTE_WRITE,
                     .valid = true};
    assert_int_equal(uw__mrt_add(&b->tx.mrt, &b->tx.a, &b->smr), 0);
    assert_int_equal(uw__mrt_add(&b->rx.mrt, &b->rx.a, &b->dmr), 0);
    struct uw__swqe *q = &b->tx.rd.sq[0];
    memset(q, 0, sizeof(*q));
    q->wr = (uw_send_wr){.wr_id = 1,
                         .opcode = UW_WR_RDMA_WRITE,
                         .num_sge = 1,
                         .remote_addr = (uint64_t)(uintptr_t)dst,
                         .rkey = b->dmr.stag};
    q->sge[0] = (uw_sge){(uint64_t)(uintptr_t)src, BIG, b->smr.stag};
    q->len = BIG;
    q->signaled = true;
    q->state = UW__WQE_QUEUED;
    b->tx.rd.sq_count = 1;
}

static void big_end(big *b)
{
    uw__mrt_remove(&b->tx.mrt, &b->smr);
    uw__mrt_remove(&b->rx.mrt, &b->dmr);
    core_fini(&b->tx);
    core_fini(&b->rx);
}

/* A stream of small FPDUs (an Ethernet MTU's) grows the transmit ring up to
 * UW__TX_FRAMES_MAX frames per gather, and the receiver's stage up to
 * UW__RX_STAGE_MAX, while every octet still lands where it belongs. */
static void test_small_fpdus_grow_ring_and_stage(void **st)
{
    (void)st;
    static uint8_t src[BIG], dst[BIG];
    for (uint32_t i = 0; i < BIG; i++)
        src[i] = (uint8_t)(i * 131 + (i >> 9));
    memset(dst, 0, sizeof(dst));
    big b;
    big_start(&b, src, dst, 1024);
    assert_int_equal(b.tx.rd.txf_cap, UW__TX_FRAMES);
    assert_int_equal(b.rx.rd.rx.stage_cap, UW__RX_STAGE);
    uint32_t most = 0, rounds = 0;
    static uint8_t wire[(UW__TX_FRAMES_MAX + 2) * (1024 + 64)];
    for (;;) {
        struct iovec iov[UW__TX_IOV];
        int n = uw__rd_tx_iov(&b.tx.rd, iov, UW__TX_IOV);
        if (n <= 0)
            break;
        size_t len = 0;
        for (int i = 0; i < n; i++) {
            assert_true(len + iov[i].iov_len <= sizeof(wire));
            memcpy(wire + len, iov[i].iov_base, iov[i].iov_len);
            len += iov[i].iov_len;
        }
        if (b.tx.rd.txf_count > most)
            most = b.tx.rd.txf_count;
        uw__rd_tx_advance(&b.tx.rd, len);
        /* The receiver reads it as a socket would: a stage-full at a time. */
        for (size_t off = 0; off < len;) {
            struct iovec r[UW__RX_PLAN];
            int k = uw__rd_rx_iov(&b.rx.rd, r, UW__RX_PLAN);
            assert_true(k > 0);
            size_t got = 0;
            for (int i = 0; i < k && off < len; i++) {
                size_t c = r[i].iov_len < len - off ? r[i].iov_len : len - off;
                memcpy(r[i].iov_base, wire + off, c);
                off += c;
                got += c;
                if (c < r[i].iov_len)
                    break;
            }
            assert_int_equal(uw__rd_rx_advance(&b.rx.rd, got), 0);
        }
        rounds++;
    }
    assert_int_equal(b.tx.rd.sq_count, 0); /* completed: every FPDU went */
    assert_int_equal(b.tx.scq.count, 1);
    assert_int_equal(b.tx.swc[0].status, UW_WC_SUCCESS);
    assert_int_equal(b.tx.rd.txf_cap, UW__TX_FRAMES_MAX);
    assert_int_equal(most, UW__TX_FRAMES_MAX);
    assert_true(rounds < BIG / 1024 / UW__TX_FRAMES);
    assert_int_equal(b.rx.rd.rx.stage_cap, UW__RX_STAGE_MAX);
    assert_memory_equal(dst, src, BIG);
    assert_false(b.rx.rd.dead);
    big_end(&b);
}

/* At MTU 9000 (an 8,948-octet FPDU) the receiver reads many FPDUs per call
 * into its stage, not each payload straight to its place with a system
 * call apiece: that held it to 6 GB/s where the stage reached 9. */
static void test_jumbo_fpdus_are_staged(void **st)
{
    (void)st;
    static uint8_t src[BIG], dst[BIG];
    for (uint32_t i = 0; i < BIG; i++)
        src[i] = (uint8_t)(i * 7 + (i >> 11));
    memset(dst, 0, sizeof(dst));
    const uint32_t mulpdu = 8948 - 6; /* EMSS 8,948 less length and CRC */
    big b;
    big_start(&b, src, dst, mulpdu);
    /* The whole stream first, as a socket buffer would hold it. */
    static uint8_t wire[BIG + BIG / 16];
    size_t len = 0;
    for (;;) {
        struct iovec iov[UW__TX_IOV];
        int n = uw__rd_tx_iov(&b.tx.rd, iov, UW__TX_IOV);
        if (n <= 0)
            break;
        size_t got = 0;
        for (int i = 0; i < n; i++) {
            assert_true(len + iov[i].iov_len <= sizeof(wire));
            memcpy(wire + len, iov[i].iov_base, iov[i].iov_len);
            len += iov[i].iov_len;
            got += iov[i].iov_len;
        }
        uw__rd_tx_advance(&b.tx.rd, got);
    }
    assert_int_equal(b.tx.rd.sq_count, 0);
    uint32_t fpdus = (BIG + mulpdu - UW__DDP_TAGGED_HLEN - 1) / (mulpdu - UW__DDP_TAGGED_HLEN);
    uint32_t reads = 0;
    for (size_t off = 0; off < len;) {
        struct iovec r[UW__RX_PLAN];
        int k = uw__rd_rx_iov(&b.rx.rd, r, UW__RX_PLAN);
        assert_int_equal(k, 1); /* one staging read, never a direct plan */
        size_t c = r[0].iov_len < len - off ? r[0].iov_len : len - off;
        memcpy(r[0].iov_base, wire + off, c);
        off += c;
        reads++;
        assert_int_equal(uw__rd_rx_advance(&b.rx.rd, c), 0);
    }
    assert_true(reads < fpdus / 4);
    assert_int_equal(b.rx.rd.rx.stage_cap, UW__RX_STAGE_MAX);
    assert_memory_equal(dst, src, BIG);
    assert_false(b.rx.rd.dead);
    big_end(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rtr_is_news),
        cmocka_unit_test(test_completion_is_news),
        cmocka_unit_test(test_terminates_are_news),
        cmocka_unit_test(test_small_fpdus_grow_ring_and_stage),
        cmocka_unit_test(test_jumbo_fpdus_are_staged),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
