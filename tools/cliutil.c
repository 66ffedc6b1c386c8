#include "cliutil.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static const char *g_prog = "uwarp";

void cli_set_prog(const char *prog)
{
    g_prog = prog;
}

__attribute__((format(printf, 1, 0))) static void vmsg(const char *fmt, va_list ap)
{
    /* One fprintf per line would interleave badly with another writer on
     * the same stderr; format the whole line first. */
    char line[4096];
    int n = snprintf(line, sizeof(line), "%s: ", g_prog);
    if (n < 0)
        return;
    if ((size_t)n < sizeof(line))
        vsnprintf(line + n, sizeof(line) - (size_t)n, fmt, ap);
    size_t len = strlen(line);
    if (len == sizeof(line) - 1)
        line[len - 1] = '\n';
    else
        line[len++] = '\n';
    (void)cli_write_all(STDERR_FILENO, line, len);
}

void cli_msg(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vmsg(fmt, ap);
    va_end(ap);
}

int cli_usage(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vmsg(fmt, ap);
    va_end(ap);
    cli_msg("run '%s --help' for the options", g_prog);
    return CLI_EXIT_USAGE;
}

int cli_write_all(int fd, const void *buf, size_t len)
{
    const uint8_t *p = buf;
    while (len) {
        ssize_t n = write(fd, p, len);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

ssize_t cli_read_some(int fd, void *buf, size_t cap)
{
    for (;;) {
        ssize_t n = read(fd, buf, cap);
        if (n >= 0 || errno != EINTR)
            return n;
    }
}

void out_init(cli_out *o, int fd)
{
    o->fd = fd;
    o->err = 0;
    o->len = 0;
}

static void out_drain(cli_out *o)
{
    if (o->err == 0 && o->len && cli_write_all(o->fd, o->buf, o->len) < 0)
        o->err = errno;
    o->len = 0;
}

void out_bytes(cli_out *o, const void *p, size_t n)
{
    const uint8_t *s = p;
    while (n) {
        if (o->len == sizeof(o->buf))
            out_drain(o);
        size_t take = sizeof(o->buf) - o->len;
        if (take > n)
            take = n;
        memcpy(o->buf + o->len, s, take);
        o->len += take;
        s += take;
        n -= take;
    }
}

void out_str(cli_out *o, const char *s)
{
    out_bytes(o, s, strlen(s));
}

void out_u32(cli_out *o, uint32_t v)
{
    char tmp[16];
    int n = snprintf(tmp, sizeof(tmp), "%lu", (unsigned long)v);
    out_bytes(o, tmp, (size_t)n);
}

static const char HEXDIG[] = "0123456789abcdef";

void out_hex(cli_out *o, const void *p, size_t n)
{
    const uint8_t *s = p;
    for (size_t i = 0; i < n; i++) {
        if (sizeof(o->buf) - o->len < 2)
            out_drain(o);
        o->buf[o->len++] = (uint8_t)HEXDIG[s[i] >> 4];
        o->buf[o->len++] = (uint8_t)HEXDIG[s[i] & 15];
    }
}

int out_flush(cli_out *o)
{
    out_drain(o);
    if (o->err) {
        cli_msg("cannot write the output: %s", strerror(o->err));
        return CLI_EXIT_IO;
    }
    return 0;
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

bool cli_parse_u32(const char *s, uint32_t *out)
{
    if (!s || !*s)
        return false;
    uint64_t v = 0;
    if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
        s += 2;
        if (!*s)
            return false;
        for (; *s; s++) {
            int d = hexval(*s);
            if (d < 0)
                return false;
            v = v * 16 + (uint64_t)d;
            if (v > UINT32_MAX)
                return false;
        }
    } else {
        /* Plain decimal even with leading zeros: "010" is ten, not octal
         * eight, because nobody types stream offsets in octal. */
        for (; *s; s++) {
            if (*s < '0' || *s > '9')
                return false;
            v = v * 10 + (uint64_t)(*s - '0');
            if (v > UINT32_MAX)
                return false;
        }
    }
    *out = (uint32_t)v;
    return true;
}

ssize_t cli_unhex(const char *s, size_t n, uint8_t *out, size_t *bad_at)
{
    size_t i = 0;
    for (; i + 1 < n; i += 2) {
        int hi = hexval(s[i]), lo = hexval(s[i + 1]);
        if (hi < 0 || lo < 0) {
            *bad_at = hi < 0 ? i : i + 1;
            return -1;
        }
        out[i / 2] = (uint8_t)(hi << 4 | lo);
    }
    if (i < n) {
        /* Odd count: a stray non-hex last character is the clearer report. */
        *bad_at = hexval(s[i]) < 0 ? i : n;
        return -1;
    }
    return (ssize_t)(n / 2);
}

void cli_hex(char *dst, const void *p, size_t n)
{
    const uint8_t *s = p;
    for (size_t i = 0; i < n; i++) {
        dst[2 * i] = HEXDIG[s[i] >> 4];
        dst[2 * i + 1] = HEXDIG[s[i] & 15];
    }
    dst[2 * n] = '\0';
}

int cli_opt(int argc, char **argv, int *i, const char *name, const char **val)
{
    const char *a = argv[*i];
    size_t n = strlen(name);
    if (strncmp(a, name, n) != 0)
        return 0;
    if (a[n] == '=') {
        *val = a + n + 1;
        return 1;
    }
    if (a[n] != '\0')
        return 0;
    if (*i + 1 >= argc) {
        cli_usage("option %s needs a value", name);
        return -1;
    }
    *val = argv[++*i];
    return 1;
}
