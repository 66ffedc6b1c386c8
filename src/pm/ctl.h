/* The control protocol between uwarp-pmd and the local processes that
 * register port mappings with it (docs/portmapper.md, "Dynamic
 * registration"): the line framer, the request and reply parsers and their
 * formatters. Sans-I/O: the daemon (tools/pm/pmd_ctl.c) and the library's
 * client (src/io/pm_reg.c) do the socket work around it. Internal, not
 * installed.
 *
 * The protocol is text, one line per message, over a Unix-domain stream
 * socket:
 *
 *   request = "MAP" SP port SP port LF     map service port to SDP port
 *           / "UNMAP" SP port LF           drop this connection's mapping
 *   reply   = "OK" LF
 *           / "ERR" SP name [SP text] LF   name: uw_err_name() of a UW_E* code
 *   port    = 1..65535 in decimal, no sign, no leading zero
 *   text    = printable ASCII (0x20..0x7E)
 *
 * A line is at most UW__PM_CTL_LINE_MAX octets, its LF included; a CR just
 * before the LF is ignored (so people can type at it with socat). Every
 * request gets exactly one reply, in order.
 *
 * Thread-safety: every function is reentrant; a uw__pm_ctl_rx belongs to one
 * caller at a time.
 */
#ifndef UW_PM_CTL_H
#define UW_PM_CTL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "uwarp/error.h"

#define UW__PM_CTL_LINE_MAX 128 /* octets per line, LF included */
/* Where uwarp-pmd listens and clients connect, unless told otherwise. */
#define UW__PM_CTL_DEFAULT_PATH "/run/uwarp/pmd.sock"
#define UW__PM_CTL_ENV "UWARP_PMD_CONTROL" /* overrides the default; "none" disables */

/* ------------------------------------------------------------------------ */
/* Line framer                                                               */

typedef struct uw__pm_ctl_rx {
    size_t len;    /* octets of the current line held */
    bool overflow; /* a line was too long: the stream is dead */
    bool done;     /* buf holds a complete line, handed out by the last feed */
    char buf[UW__PM_CTL_LINE_MAX];
} uw__pm_ctl_rx;

void uw__pm_ctl_rx_init(uw__pm_ctl_rx *rx);

/* Takes octets from data[0..len) up to and including the first LF and returns
 * how many it took (all of them when no LF is among them). When that
 * completes a line, *line points at it, NUL-terminated, with the LF and a CR
 * before it removed, and *line_len is its length; the line stays valid until
 * the next call. Otherwise *line is NULL. Feed the rest again to get the
 * following lines: input may arrive split anywhere.
 * Errors: UW_EMSGSIZE (the line exceeds UW__PM_CTL_LINE_MAX octets; fatal:
 * every later call fails the same way, since the stream cannot be
 * resynchronised), UW_EINVAL (NULL argument). */
ssize_t uw__pm_ctl_rx_feed(uw__pm_ctl_rx *rx, const void *data, size_t len, const char **line,
                           size_t *line_len);

/* ------------------------------------------------------------------------ */
/* Requests                                                                  */

enum uw__pm_ctl_op {
    UW__PM_CTL_MAP = 1,   /* svc -> sdp, for as long as the connection lives */
    UW__PM_CTL_UNMAP = 2, /* drop this connection's mapping of svc */
};

typedef struct uw__pm_ctl_req {
    int op;       /* enum uw__pm_ctl_op */
    uint16_t svc; /* the service's conventional TCP port */
    uint16_t sdp; /* MAP only: the SDP listen port (may equal svc) */
} uw__pm_ctl_req;

/* Parses one line (without its LF, as the framer gives it). Returns 0, or
 * UW_EPROTO (not a request: unknown verb, wrong number of fields, stray
 * spaces or octets), UW_EINVAL (a port that is not 1..65535 in canonical
 * decimal). On error *out is not written. */
int uw__pm_ctl_parse_req(const char *line, size_t len, uw__pm_ctl_req *out);

/* Writes r as one line, LF included, NUL-terminated, and returns its length
 * (without the NUL). Errors: UW_EINVAL (unknown op, port 0), UW_ENOBUFS (cap
 * too small for line and NUL). Whatever this writes parses back to r. */
ssize_t uw__pm_ctl_fmt_req(const uw__pm_ctl_req *r, char *out, size_t cap);

/* ------------------------------------------------------------------------ */
/* Replies                                                                   */

/* Writes "OK\n" for err 0, else "ERR <uw_err_name(err)> <msg>\n", NUL-
 * terminated; returns its length (without the NUL). Octets of msg outside
 * printable ASCII become '?', and msg is cut so the line fits both
 * UW__PM_CTL_LINE_MAX and cap. msg may be NULL or empty (no text then).
 * Errors: UW_EINVAL (err not a UW_E* code, or positive), UW_ENOBUFS (cap
 * cannot hold even "ERR <name>\n" and the NUL). */
ssize_t uw__pm_ctl_fmt_reply(int err, const char *msg, char *out, size_t cap);

/* Parses one reply line (without its LF); as strict as the requests, so
 * that exactly what uw__pm_ctl_fmt_reply() writes is accepted ("ERR NAME "
 * with no text is not). Returns 0 with *err 0 for OK or the
 * negative UW_E* code the name stands for (UW_EPROTO for a well-formed name
 * this version does not know), and *text / *text_len the text (empty when
 * none; text and text_len may be NULL). Returns UW_EPROTO for a line that is
 * not a reply; then nothing is written. */
int uw__pm_ctl_parse_reply(const char *line, size_t len, int *err, const char **text,
                           size_t *text_len);

/* The UW_E* code whose uw_err_name() is name[0..len), or 0 if none. */
int uw__pm_ctl_err_from_name(const char *name, size_t len);

#endif
