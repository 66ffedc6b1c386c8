/* Shared plumbing of the uwarp command-line tools: robust I/O on raw file
 * descriptors, hex and number parsing, and the exit-code policy.
 *
 * Everything reports problems on stderr with the program and command name as
 * prefix; stdout carries only data. */
#ifndef UW_TOOLS_CLIUTIL_H
#define UW_TOOLS_CLIUTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Exit codes, documented in --help. */
#define CLI_EXIT_OK 0
#define CLI_EXIT_USAGE 1
#define CLI_EXIT_PROTO 2
#define CLI_EXIT_IO 3

/* Prefix for messages, such as "uwarp-mpa decode". */
void cli_set_prog(const char *prog);

/* Prints "<prog>: <fmt...>\n" on stderr. */
void cli_msg(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* cli_msg() plus a pointer to --help; returns CLI_EXIT_USAGE for `return`. */
int cli_usage(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Writes all of buf to fd, retrying on EINTR and partial writes. Returns 0 or
 * -1 with errno set. */
int cli_write_all(int fd, const void *buf, size_t len);

/* Reads up to cap octets, retrying on EINTR. Returns the count (0 at EOF) or
 * -1 with errno set. */
ssize_t cli_read_some(int fd, void *buf, size_t cap);

/* A buffered writer for stdout. Once a write fails, the error is kept and
 * later calls do nothing; out_flush() reports it. */
typedef struct cli_out {
    int fd;
    int err; /* errno of the first failed write, 0 if none */
    size_t len;
    uint8_t buf[1u << 16];
} cli_out;

void out_init(cli_out *o, int fd);
void out_bytes(cli_out *o, const void *p, size_t n);
void out_str(cli_out *o, const char *s);
void out_u32(cli_out *o, uint32_t v);
void out_hex(cli_out *o, const void *p, size_t n); /* lowercase, no separators */
/* Returns 0, or CLI_EXIT_IO after saying why on stderr. */
int out_flush(cli_out *o);

/* Parses a 32-bit unsigned number: decimal digits, or 0x/0X and hex digits.
 * No sign, no spaces, no other bases. */
bool cli_parse_u32(const char *s, uint32_t *out);

/* Decodes hex digits (either case) s[0..n) into out, which has room for n/2
 * octets. Returns the octet count, or -1 with *bad_at set to the index of the
 * first offending character (n when the digit count is odd). */
ssize_t cli_unhex(const char *s, size_t n, uint8_t *out, size_t *bad_at);

/* Matches argv[*i] against a valued option: "--name VALUE" (advancing *i) or
 * "--name=VALUE". Returns 1 with *val set, 0 if argv[*i] is another option, or
 * -1 after a usage message when the value is missing. */
int cli_opt(int argc, char **argv, int *i, const char *name, const char **val);

/* Lowercase hex of p[0..n) into dst (2n + 1 octets, NUL-terminated). */
void cli_hex(char *dst, const void *p, size_t n);

#endif
