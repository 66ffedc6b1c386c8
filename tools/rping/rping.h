/* uwarp-rping: rdma-core rping's application protocol over uwarp.
 *
 * The exchange (one "ping"), as rping does it:
 *   client: Send {start buffer address, STag, size}      (16 octets)
 *   server: RDMA Read of the client's start buffer into its own buffer
 *   server: Send go-ahead                                 (16 octets)
 *   client: Send {sink buffer address, STag, size}
 *   server: RDMA Write of its buffer into the client's sink
 *   server: Send go-ahead
 *   client: compares sink and start buffer (-V)
 * The 16-octet record is rping's struct rping_rdma_info: be64 address (a
 * Tagged Offset, i.e. a virtual address), be32 STag (rkey), be32 size. */
#ifndef UW_TOOLS_RPING_H
#define UW_TOOLS_RPING_H

#include <stdbool.h>
#include <stdint.h>

#define RP_INFO_LEN 16
#define RP_DEFAULT_PORT "7174"
#define RP_DEFAULT_SIZE 64
/* rping's limits: room for "rdma-ping-2147483647: " plus its terminating
 * NUL (sizeof of the two strings, 11 + 15), and under 64 KiB. */
#define RP_MIN_SIZE 26
#define RP_MAX_SIZE 65535

typedef struct rp_opts {
    bool server, client, persistent, validate;
    int verbose, debug;
    const char *addr; /* -a */
    const char *port; /* -p */
    long count;       /* -C; 0 = forever (client) / not checked (server) */
    bool count_given;
    uint32_t size;  /* -S */
    int timeout_ms; /* -t: every wait; -1 none */
    /* uwarp extensions for interop matrices. */
    uint8_t rev;
    bool no_crc, markers, p2p;
    uint8_t rtr;
    int pause_ms; /* client: pause after ESTABLISHED before the first Send */
} rp_opts;

int rp_parse_args(int argc, char **argv, rp_opts *o);
int rp_run_client(const rp_opts *o);
int rp_run_server(const rp_opts *o);

#endif
