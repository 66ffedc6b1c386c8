/* Socket-side helpers shared by uwarp-pmd and uwarp-pm: conversions between
 * struct sockaddr and the library's uw_pm_udp_addr, address parsing and
 * printing, networks (CIDR), the monotonic clock and entropy. These are the
 * I/O adapters around the sans-I/O port mapper core. */
#ifndef UW_TOOLS_PM_NET_H
#define UW_TOOLS_PM_NET_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include "uwarp/pm.h"

#define PMN_ADDRSTRLEN 64 /* "[v6%scope]:port" fits */

/* sockaddr_in / sockaddr_in6 <-> uw_pm_udp_addr. to_sockaddr returns the
 * length to pass to sendto(). An IPv4-mapped IPv6 source is reported as
 * IPv4, since that is the client's real address family. */
void pmn_from_sockaddr(const struct sockaddr *sa, uw_pm_udp_addr *out);
socklen_t pmn_to_sockaddr(const uw_pm_udp_addr *a, struct sockaddr_storage *ss);

/* A numeric IPv4 or IPv6 address; false if s is neither. */
bool pmn_parse_ip(const char *s, uint8_t *ipv, uint8_t ip[16]);
/* "ADDR", "ADDR:PORT", "[V6]:PORT" or "V6" (no port). *port is left alone
 * when none is given. */
bool pmn_parse_addr_port(const char *s, uw_pm_udp_addr *out);

/* Text of an address (no port) and of an endpoint ("1.2.3.4:5", "[::1]:5"). */
const char *pmn_ip_str(uint8_t ipv, const uint8_t *ip, char buf[PMN_ADDRSTRLEN]);
const char *pmn_addr_str(const uw_pm_udp_addr *a, char buf[PMN_ADDRSTRLEN]);

/* A network "ADDR/LEN" (or a single address). */
typedef struct pmn_net {
    uint8_t ipv;
    uint8_t ip[16];
    unsigned prefix;
} pmn_net;

bool pmn_parse_net(const char *s, pmn_net *out);
bool pmn_net_match(const pmn_net *n, uint8_t ipv, const uint8_t *ip);

/* CLOCK_MONOTONIC in ns: the "now" handed to the core. */
uint64_t pmn_now(void);
/* 64 bits from getrandom(), for AssocHandles and hash keys. */
uint64_t pmn_random(void *ud);

/* Resident set size and its peak, in KiB, from /proc/self/status (0 if
 * unknown). */
void pmn_rss_kb(unsigned long *rss, unsigned long *peak);

#endif
