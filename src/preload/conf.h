/* The preload library's rules: which sockets try SDP (docs/preload.md,
 * "Configuration"). Sans-I/O: text in, a rule table out, and a pure match
 * function; reading the file and logging are the caller's.
 *
 * Grammar, one rule per line, '#' starts a comment, blank lines ignored:
 *     use sdp|tcp|both server|client|* PROGRAM-GLOB ADDR[/PREFIX][:PORT[-PORT]]
 * PROGRAM-GLOB is an fnmatch(3) pattern for the program's short name.
 * ADDR is an IPv4 address, an IPv6 address in brackets ([::1], [::]/0), or
 * '*' (any address of either family); PREFIX defaults to the full length;
 * PORT or PORT-PORT (inclusive) defaults to every port, and '*:PORT' is
 * allowed. For a server the address and port are the ones bound; for a
 * client, the destination's. First match wins.
 *
 * Ownership: a uw_pl_conf is immutable after parsing; any number of threads
 * may match against it at once. */
#ifndef UW_PRELOAD_CONF_H
#define UW_PRELOAD_CONF_H

#include <stddef.h>
#include <sys/socket.h>

typedef enum {
    UW_PL_USE_SDP = 1,  /* server: SDP only; client: SDP or fail (ECONNREFUSED) */
    UW_PL_USE_TCP = 2,  /* untouched: plain TCP */
    UW_PL_USE_BOTH = 3, /* server: SDP and TCP; client: SDP, else TCP (the default) */
} uw_pl_use;

typedef enum {
    UW_PL_ROLE_SERVER = 1,
    UW_PL_ROLE_CLIENT = 2,
} uw_pl_role;

typedef struct uw_pl_conf uw_pl_conf;

/* Parses len octets of text (need not end in NUL). Returns 0 and a table
 * (possibly with no rules), or -EINVAL with *out NULL and err holding one
 * line "LINE:COLUMN: what is wrong, and what was expected", or -ENOMEM.
 * Limits (more is -EINVAL): 1,024 rules, lines of 1,024 octets. */
int uw_pl_conf_parse(const char *text, size_t len, uw_pl_conf **out, char *err, size_t errlen);
void uw_pl_conf_free(uw_pl_conf *c);
/* Rules in the table. */
size_t uw_pl_conf_count(const uw_pl_conf *c);
/* The first rule matching role, program and address decides; with no match
 * (or c NULL) UW_PL_USE_BOTH. addr is AF_INET or AF_INET6 (a v4-mapped IPv6
 * address matches IPv4 rules too). *rule_line, when not NULL, receives the
 * matching rule's line number (0: none), for the log's "why". */
uw_pl_use uw_pl_conf_match(const uw_pl_conf *c, uw_pl_role role, const char *program,
                           const struct sockaddr *addr, socklen_t len, unsigned *rule_line);

#endif
