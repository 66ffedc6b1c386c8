/* A small classic-pcap reader for the interop tests: it turns a capture into
 * TCP connections, each with its two directions reassembled into byte streams
 * in sequence order, so captured iWARP traffic can be replayed through the
 * protocol layers.
 *
 * Scope, kept deliberately narrow (test code, not a general dissector):
 *   - classic pcap, both byte orders, microsecond and nanosecond magic;
 *   - link types Ethernet (1, with 802.1Q/802.1ad tags), Linux cooked v1
 *     (113) and v2 (276), raw IP (101, 228, 229);
 *   - IPv4 (options allowed, fragments rejected) and IPv6 (hop-by-hop,
 *     routing and destination-options headers skipped, fragments rejected);
 *   - TCP: segments are placed by sequence number relative to the SYN (or to
 *     the lowest sequence number seen when the handshake was not captured);
 *     retransmissions and overlaps must repeat the same octets; a hole in a
 *     direction is an error because the byte stream would be wrong.
 * Non-TCP packets are skipped. Checksums are not verified: loopback captures
 * carry partial (offloaded) checksums.
 *
 * Malformed input never crashes the reader: every length is checked against
 * the octets present, and every failure returns TP_ERR with a message naming
 * the packet. Memory is bounded by tp_limits.
 *
 * Not thread-safe per capture object; distinct objects are independent.
 */
#ifndef UW_TESTS_INTEROP_PCAP_H
#define UW_TESTS_INTEROP_PCAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TP_OK 0
#define TP_ERR (-1)

typedef struct tp_limits {
    size_t max_file;     /* largest capture accepted (octets); 0: 256 MiB */
    size_t max_packet;   /* largest captured packet; 0: 262144 (tcpdump's snaplen) */
    size_t max_stream;   /* largest reassembled direction; 0: 64 MiB */
    size_t max_conns;    /* most TCP connections; 0: 4096 */
    size_t max_segments; /* most payload-carrying segments in the whole capture; 0: 1 << 20 */
} tp_limits;

typedef struct tp_endpoint {
    int family;       /* 4 or 6 */
    uint8_t addr[16]; /* IPv4 in the first 4 octets */
    uint16_t port;
} tp_endpoint;

/* One direction of a connection: the octets src sent to dst, in order. */
typedef struct tp_stream {
    tp_endpoint src, dst;
    uint8_t *data; /* owned by the capture; NULL when len is 0 */
    size_t len;
    bool syn;     /* this side's SYN was captured (data starts at ISN + 1) */
    bool fin;     /* this side's FIN was captured */
    bool rst;     /* this side sent a RST */
    uint32_t isn; /* valid when syn */
} tp_stream;

typedef struct tp_conn {
    /* dir[0] is the TCP client (sent the SYN without ACK); when the handshake
     * is missing, the sender of the first packet seen. */
    tp_stream dir[2];
    bool handshake; /* dir[0]'s SYN was captured */
} tp_conn;

typedef struct tp_capture {
    uint32_t linktype;
    bool swapped;   /* the file's byte order differs from the "native" magic */
    bool nanosec;   /* timestamps are in nanoseconds */
    size_t packets; /* records in the file */
    size_t tcp_packets;
    tp_conn *conns; /* in order of first appearance */
    size_t nconns;
} tp_capture;

/* Parses a whole capture held in memory. lim may be NULL for the defaults.
 * On TP_ERR, err (if errlen > 0) holds a NUL-terminated reason and *cap is
 * left empty (nothing to free, though tp_capture_free is harmless). */
int tp_pcap_parse(const uint8_t *buf, size_t len, const tp_limits *lim, tp_capture *cap, char *err,
                  size_t errlen);

/* Reads path and parses it (same contract as tp_pcap_parse). */
int tp_pcap_load(const char *path, const tp_limits *lim, tp_capture *cap, char *err, size_t errlen);

void tp_capture_free(tp_capture *cap);

/* "a.b.c.d:port" or "[v6]:port" into out (always NUL-terminated). Returns out. */
char *tp_endpoint_str(const tp_endpoint *e, char *out, size_t cap);

/* "SRC > DST", the direction naming of siw-vm's iwarp_decode.py. */
char *tp_stream_name(const tp_stream *s, char *out, size_t cap);

#endif
