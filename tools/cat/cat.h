/* uwarp-cat: stdin and stdout over an iWARP connection (RDMAP Sends). */
#ifndef UW_TOOLS_CAT_H
#define UW_TOOLS_CAT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "uwarp/mpa.h"

/* Receives a uwarp-cat keeps posted. The sender side cannot see the peer's
 * receive queue (RDMAP has no flow control, RFC 5040 5.1), so the contract
 * between two uwarp-cat processes is written down in --help: each keeps this
 * many receives of at least 64 KiB posted and never lets more than
 * CAT_RECV_CQ + CAT_POLL_BATCH + 1 of them be in use at once (see cat_main.c). */
#define CAT_NRECV 64u
/* Completions on the receive CQ before the library stops reading the socket
 * (uw_cq_create: "when full, further completions wait inside the QP (the QP
 * stops reading)"). TCP flow control then holds the sender back. */
#define CAT_RECV_CQ 16u
#define CAT_POLL_BATCH 16
/* Sends in flight at most. */
#define CAT_NSEND 8u
#define CAT_MSG_DEFAULT 65536u
#define CAT_MSG_MAX (1u << 20)
#define CAT_RECV_MIN 65536u

typedef struct cat_opts {
    bool listen;
    const char *listen_spec; /* -l [ADDR:]PORT */
    const char *host, *port; /* initiator */
    uint8_t rev;
    bool markers, no_crc, p2p, reject, accept_rev0;
    uint8_t rtr;       /* UW_MPA_RTR_* from --p2p */
    uint16_t ird, ord; /* 0: library default */
    uint8_t pd[UW_MPA_MAX_PD];
    size_t pd_len;
    int timeout_ms; /* -1: none given */
    uint32_t msg_size;
    int verbose;
} cat_opts;

/* Parses argv. Returns -1 to go on, or an exit code (0 after --help, 1 after a
 * usage message). */
int cat_parse_args(int argc, char **argv, cat_opts *o);

/* Runs the transfer; returns the exit code. */
int cat_run(const cat_opts *o);

#endif
