/* The in-memory transport (io/mem.c): two connected endpoints, for tests
 * that run the engine and connection manager without sockets or sleeps.
 * Hand one end to uw__tp_connect() and the other to uw__tp_accept() with
 * &uw__mem_ops; the engine closes each end when its connection ends. */
#ifndef UW_IO_MEM_H
#define UW_IO_MEM_H

#include "io/transport.h"

struct uw__mem_end;
extern const struct uw__tp_ops uw__mem_ops;

/* cap: octets each direction holds before writes get EAGAIN; mss: what
 * the engine sizes FPDUs by (0: 1460). The caller holds the pair until
 * uw__mem_release() (either end), so it can look at the ends after the
 * engine has closed them. */
int uw__mem_pair(struct uw__mem_end **a, struct uw__mem_end **b, size_t cap, uint32_t mss);
void uw__mem_release(struct uw__mem_end *e);
/* An end never handed to the engine: closes it as the engine would. */
void uw__mem_close_unused(struct uw__mem_end *e);

/* Faults. The host behind e vanishes: both ends read what is queued,
 * then ECONNRESET, and writes fail. */
void uw__mem_reset(struct uw__mem_end *e);
/* Damages one bit of the octet e sends nth from now (0: the next). */
void uw__mem_flip(struct uw__mem_end *e, uint64_t nth);

/* What e sent, where its FIN went (-1: not yet), whether a reset reached it. */
uint64_t uw__mem_sent(const struct uw__mem_end *e);
int64_t uw__mem_fin_at(const struct uw__mem_end *e);
bool uw__mem_reset_seen(const struct uw__mem_end *e);

#endif
