/* Shared plumbing of the RDMA command-line tools (uwarp-cat, uwarp-rping):
 * addresses, time, the exit-code policy and the wording of connection-manager
 * failures, so both tools explain a failed connection the same way.
 *
 * Messages go to stderr through cli_msg() (tools/cliutil.h); stdout carries
 * only data. */
#ifndef UW_TOOLS_RDMACLI_H
#define UW_TOOLS_RDMACLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "uwarp/verbs.h"

/* Exit codes of the RDMA tools, documented in each --help. */
#define RC_EXIT_OK 0
#define RC_EXIT_USAGE 1
#define RC_EXIT_PROTO 2    /* protocol, transport or local I/O failure */
#define RC_EXIT_REJECTED 3 /* the peer's MPA Reply had R set */
#define RC_EXIT_TIMEOUT 4

/* Longest single sleep on the context fd. verbs.h: queued completions and
 * events do not make uw_ctx_fd() readable, so both queues must be empty
 * before sleeping; but every call that empties one queue progresses the
 * context and may fill the other (uw_cm_get_event() can queue a completion
 * just before it returns 0, uw_cq_poll() an event). A tool that waits for
 * both can therefore sleep on work that is already queued; bounding each
 * sleep bounds the delay that costs (reported to the library's owner). */
#define RC_WAIT_SLICE_MS 20

/* Monotonic clock in milliseconds. */
int64_t rc_now_ms(void);

/* Milliseconds left until deadline (a rc_now_ms() value), clamped to
 * [0, INT32_MAX]; -1 when deadline is negative (no deadline). */
int rc_remaining_ms(int64_t deadline);

/* Parses seconds such as "5", "0.25" or "1.5" into milliseconds (at least 1
 * for any positive value). Rejects signs, exponents and values over a day. */
bool rc_parse_seconds(const char *s, int *ms);

/* Parses an RTR type list such as "send,write,read" (any order, at least
 * one, no empty items) into UW_MPA_RTR_* bits. Returns 0 or -1. */
int rc_parse_rtr_list(const char *s, uint8_t *out);

/* Parses an MPA revision argument ("1" or "2"); prints the usage error and
 * returns -1 for anything else. */
int rc_parse_rev(const char *s, uint8_t *out);

/* Resolves host (NULL: the wildcard address for a listener) and a numeric
 * port. IPv4 results are preferred when the name has both families, because
 * a listener on the default wildcard address is IPv4. Returns 0, or -1 after
 * a message. */
int rc_resolve(const char *host, const char *port, bool passive, struct sockaddr_storage *ss,
               socklen_t *len);

/* Splits "[ADDR:]PORT" (ADDR may be "[v6-address]") into a host (NULL when
 * absent; written into hostbuf) and the port text. Returns 0 or -1 after a
 * message. */
int rc_split_listen(const char *spec, char *hostbuf, size_t cap, const char **host,
                    const char **port);

/* "127.0.0.1:7174" or "[::1]:7174". */
void rc_addr_str(const struct sockaddr *sa, char *buf, size_t cap);

/* One line explaining err for people: the stable name, the sentence and, for
 * MPA-layer errors, the RFC 5044/6581 error code that a Terminate carries,
 * e.g. "EMPA_CRC (MPA CRC32c mismatch (RFC 5044 error 2); MPA error 2
 * crc_mismatch)". */
void rc_err_text(int err, char *buf, size_t cap);

/* Explains a failure event (CONNECT_ERROR, REJECTED, TERMINATED, CONN_ERROR,
 * an unexpected DISCONNECTED) on stderr with context `what` ("connect to
 * 127.0.0.1:7174", ...) and returns the exit code it maps to. */
int rc_report_event(const char *what, const uw_cm_event *ev);

/* Exit code for a bare error code (timeouts give RC_EXIT_TIMEOUT). */
int rc_exit_for_err(int err);

/* Name of a completion status ("WR_FLUSH_ERR", ...). */
const char *rc_wc_status_name(int status);

/* RTR set as text: "none", "send", "write", "read", or several joined with
 * '|' (a responder may accept more than one). */
void rc_rtr_str(uint8_t rtr, char *buf, size_t cap);

/* Log callback for uw_ctx_attr: prints "<prog>: uwarp: <msg>" on stderr. */
void rc_log(void *ud, int level, const char *msg);

#endif
