/* The I/O engine: the only place with sockets, epoll and timers. */
#ifndef UW_IO_ENGINE_H
#define UW_IO_ENGINE_H

#include "verbs/internal.h"

void uw__ctx_arm_timer(uw_ctx *c);
void uw__cm_accept_fd(uw_listener *l);
int uw__cm_handshake(uw_qp *qp, unsigned events);
/* The MULPDU of the socket's current EMSS (TCP_MAXSEG), capped by
 * uw_conn_param.max_fpdu. */
uint32_t uw__cm_mulpdu(uw_qp *qp, bool markers);

#endif
