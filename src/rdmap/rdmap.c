/* The protocol object's life: its queues, entering RTS with the negotiated
 * parameters, retiring send-queue requests in order and flushing. Posting
 * (verbs/qp_core.c) fills the queues; qp_tx.c and qp_rx.c work on them. */
#include <string.h>

#include "rdmap/rdmap.h"

int uw__rd_init(struct uw__rdmap *rd, const uw_allocator *a, uint32_t sqd, uint32_t rqd)
{
    rd->alloc = *a;
    rd->sq = a->alloc(a->ud, sqd * sizeof(*rd->sq));
    rd->rq = a->alloc(a->ud, rqd * sizeof(*rd->rq));
    rd->txf_cap = UW__TX_FRAMES;
    rd->txf = a->alloc(a->ud, UW__TX_FRAMES * sizeof(*rd->txf));
    rd->rx.stage = a->alloc(a->ud, UW__RX_STAGE);
    rd->rx.stage_cap = UW__RX_STAGE;
    if (!rd->sq || !rd->rq || !rd->txf || !rd->rx.stage) {
        uw__rd_fini(rd);
        return UW_ENOMEM;
    }
    rd->sq_cap = sqd;
    rd->rq_cap = rqd;
    for (int i = 0; i < 3; i++)
        rd->msn_tx[i] = rd->msn_rx[i] = 1;
    return 0;
}

void uw__rd_fini(struct uw__rdmap *rd)
{
    const uw_allocator *a = &rd->alloc;
    a->free(a->ud, rd->sq);
    a->free(a->ud, rd->rq);
    a->free(a->ud, rd->txf);
    a->free(a->ud, rd->txiov);
    a->free(a->ud, rd->txb);
    a->free(a->ud, rd->txs);
    a->free(a->ud, rd->rx.stage);
    rd->sq = NULL;
    rd->rq = NULL;
    rd->txf = NULL;
    rd->txiov = NULL;
    rd->txb = NULL;
    rd->txs = NULL;
    rd->rx.stage = NULL;
}

static int wc_opcode(int wr_opcode)
{
    switch (wr_opcode) {
    case UW_WR_RDMA_WRITE:
        return UW_WC_RDMA_WRITE;
    case UW_WR_RDMA_READ:
        return UW_WC_RDMA_READ;
    case UW_WR_LOCAL_INV:
        return UW_WC_LOCAL_INV;
    default:
        return UW_WC_SEND;
    }
}

void uw__rd_sq_retire(struct uw__rdmap *rd)
{
    while (rd->sq_count) {
        struct uw__swqe *q = &rd->sq[rd->sq_head];
        if (q->state != UW__WQE_DONE)
            break;
        if (q->signaled || q->status != UW_WC_SUCCESS) {
            if (uw__cqr_full(rd->scq))
                break; /* resumes when the application polls */
            uw_wc wc = {.wr_id = q->wr.wr_id,
                        .status = q->status,
                        .opcode = wc_opcode(q->wr.opcode),
                        .qp = rd->qp,
                        .err = q->err};
            if (q->wr.opcode == UW_WR_RDMA_READ)
                wc.byte_len = q->len;
            uw__rd_complete(rd, rd->scq, &wc);
        }
        rd->sq_head = (rd->sq_head + 1) % rd->sq_cap;
        rd->sq_count--;
        if (rd->sq_next)
            rd->sq_next--;
    }
}

void uw__rd_flush(struct uw__rdmap *rd, int err)
{
    rd->dead = true;
    /* Unsent frames point into the requests' buffers: they go first. */
    rd->txf_count = 0;
    rd->txf_off = 0;
    rd->txs_used = 0;
    for (uint32_t i = 0; i < rd->sq_count; i++) {
        struct uw__swqe *q = &rd->sq[(rd->sq_head + i) % rd->sq_cap];
        if (q->state != UW__WQE_DONE) {
            q->state = UW__WQE_DONE;
            q->status = UW_WC_WR_FLUSH_ERR;
            q->err = err;
        }
    }
    uw__rd_sq_retire(rd);
    while (rd->rq_count && !uw__cqr_full(rd->rcq)) {
        struct uw__rwqe *r = &rd->rq[rd->rq_head];
        uw_wc wc = {.wr_id = r->wr.wr_id,
                    .status = UW_WC_WR_FLUSH_ERR,
                    .opcode = UW_WC_RECV,
                    .qp = rd->qp,
                    .err = err};
        uw__rd_complete(rd, rd->rcq, &wc);
        rd->rq_head = (rd->rq_head + 1) % rd->rq_cap;
        rd->rq_count--;
    }
}

int uw__rd_start(struct uw__rdmap *rd, const uw_mpa_params *mpa, bool initiator, uint32_t mulpdu,
                 uint32_t mulpdu_max, uint32_t tx_pos, uint32_t rx_pos)
{
    const uw_allocator *a = &rd->alloc;
    rd->txf_iov = UW__TXF_IOV_PLAIN;
    a->free(a->ud, rd->txiov);
    rd->txiov = a->alloc(a->ud, (size_t)rd->txf_cap * rd->txf_iov * sizeof(struct iovec));
    a->free(a->ud, rd->txb);
    rd->txb = a->alloc(a->ud, UW__TXB_BYTES(rd->txf_cap));
    rd->txb_pos = 0;
    a->free(a->ud, rd->txs);
    rd->txs = NULL;
    if (mpa->markers_tx && rd->txiov) {
        /* Room for the largest FPDU: ULPDU, length, pad, CRC and a marker
         * per 508 octets plus a leading one. About 256 KiB in all for
         * 64 KiB FPDUs, so the socket never waits for a slot. */
        if (mulpdu_max < mulpdu)
            mulpdu_max = mulpdu;
        rd->txs_size = (mulpdu_max + 12 + 4 * ((mulpdu_max + 12) / 508 + 2) + 63) & ~63u;
        rd->txs_n = (256u * 1024) / rd->txs_size;
        if (rd->txs_n < 4)
            rd->txs_n = 4;
        if (rd->txs_n > rd->txf_cap)
            rd->txs_n = rd->txf_cap;
        rd->txs_head = rd->txs_used = 0;
        rd->txs = a->alloc(a->ud, (size_t)rd->txs_n * rd->txs_size);
    }
    if (mpa->markers_rx && rd->txiov && rd->rx.stage_cap < UW__RX_STAGE_MARKERS) {
        /* Octets that came with the MPA exchange are kept. */
        uint8_t *st = a->alloc(a->ud, UW__RX_STAGE_MARKERS);
        if (st) {
            uint32_t n = rd->rx.st_tail - rd->rx.st_head;
            memcpy(st, rd->rx.stage + rd->rx.st_head, n);
            a->free(a->ud, rd->rx.stage);
            rd->rx.stage = st;
            rd->rx.stage_cap = UW__RX_STAGE_MARKERS;
            rd->rx.st_head = 0;
            rd->rx.st_tail = n;
        }
    }
    if (!rd->txiov || !rd->txb || (mpa->markers_tx && !rd->txs) ||
        (mpa->markers_rx && rd->rx.stage_cap < UW__RX_STAGE_MARKERS)) {
        rd->dead = true;
        return UW_ENOMEM;
    }
    /* The caller may pass the parameters it negotiated into rd->mpa. */
    if (mpa != &rd->mpa)
        rd->mpa = *mpa;
    rd->started = true;
    rd->flags_tx = (mpa->crc ? UW_MPA_CRC : 0) | (mpa->markers_tx ? UW_MPA_MARKERS : 0);
    rd->flags_rx = (mpa->crc ? UW_MPA_CRC : 0) | (mpa->markers_rx ? UW_MPA_MARKERS : 0);
    rd->mulpdu = mulpdu;
    rd->mulpdu_max = mpa->markers_tx ? mulpdu_max : UW_MPA_MULPDU_MAX;
    rd->tx_pos = tx_pos;
    rd->tx_origin = tx_pos;
    rd->rx.pos = rx_pos;
    rd->rtr_pending_tx = initiator && mpa->p2p;
    rd->rtr_pending_rx = !initiator && mpa->p2p;
    rd->first_rx_pending = !initiator && !mpa->p2p;
    rd->news |= UW__RD_KICK;
    return 0;
}

void uw__rd_tx_grow(struct uw__rdmap *rd)
{
    /* Only while no frame is built: frames point into txiov and txb. */
    rd->tx_grow = false;
    if (rd->txf_count || rd->txf_cap >= UW__TX_FRAMES_MAX)
        return;
    const uw_allocator *a = &rd->alloc;
    uint32_t cap = rd->txf_cap * 2;
    struct uw__txf *f = a->alloc(a->ud, cap * sizeof(*f));
    struct iovec *iov = a->alloc(a->ud, (size_t)cap * rd->txf_iov * sizeof(*iov));
    uint8_t *b = a->alloc(a->ud, UW__TXB_BYTES(cap));
    if (!f || !iov || !b) {
        /* The ring it has still works. */
        a->free(a->ud, f);
        a->free(a->ud, iov);
        a->free(a->ud, b);
        return;
    }
    a->free(a->ud, rd->txf);
    a->free(a->ud, rd->txiov);
    a->free(a->ud, rd->txb);
    rd->txf = f;
    rd->txiov = iov;
    rd->txb = b;
    rd->txf_cap = cap;
    rd->txf_head = 0;
    rd->txb_pos = 0;
}

void uw__rd_rx_grow(struct uw__rdmap *rd)
{
    struct uw__rx *rx = &rd->rx;
    rx->full_reads = 0;
    if (rx->stage_cap >= UW__RX_STAGE_MAX)
        return;
    const uw_allocator *a = &rd->alloc;
    uint32_t cap = rx->stage_cap * 2;
    uint8_t *st = a->alloc(a->ud, cap);
    if (!st)
        return; /* the stage it has still works */
    uint32_t n = rx->st_tail - rx->st_head;
    memcpy(st, rx->stage + rx->st_head, n);
    a->free(a->ud, rx->stage);
    rx->stage = st;
    rx->stage_cap = cap;
    rx->st_head = 0;
    rx->st_tail = n;
}
