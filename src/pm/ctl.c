/* Control protocol of uwarp-pmd (see ctl.h for the grammar): framing,
 * parsing and formatting, no I/O. The parsers are strict (one canonical
 * spelling per message) so that what they accept is exactly what the
 * formatters write; the fuzz target checks that both ways. */
#include "pm/ctl.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>

void uw__pm_ctl_rx_init(uw__pm_ctl_rx *rx)
{
    memset(rx, 0, sizeof(*rx));
}

ssize_t uw__pm_ctl_rx_feed(uw__pm_ctl_rx *rx, const void *data, size_t len, const char **line,
                           size_t *line_len)
{
    if (!rx || (!data && len) || !line || !line_len)
        return UW_EINVAL;
    *line = NULL;
    *line_len = 0;
    if (rx->overflow)
        return UW_EMSGSIZE;
    if (rx->done) { /* the previous call handed this line out */
        rx->len = 0;
        rx->done = false;
    }
    if (len > SSIZE_MAX)
        len = SSIZE_MAX;
    const uint8_t *p = data;
    for (size_t i = 0; i < len; i++) {
        if (p[i] == '\n') {
            size_t n = rx->len;
            if (n && rx->buf[n - 1] == '\r')
                n--;
            rx->buf[n] = '\0';
            rx->done = true;
            *line = rx->buf;
            *line_len = n;
            return (ssize_t)(i + 1);
        }
        /* Room for the LF that must still come: a line of LINE_MAX octets
         * holds LINE_MAX - 1 before its LF. */
        if (rx->len == UW__PM_CTL_LINE_MAX - 1) {
            rx->overflow = true;
            return UW_EMSGSIZE;
        }
        rx->buf[rx->len++] = (char)p[i];
    }
    return (ssize_t)len;
}

/* Splits line into at most max fields separated by single spaces. Returns
 * the count, or -1 for an empty field (leading, trailing or double space),
 * an octet outside printable ASCII, or more than max fields. */
static int split(const char *line, size_t len, const char **f, size_t *flen, int max)
{
    int n = 0;
    size_t start = 0;
    for (size_t i = 0; i <= len; i++) {
        if (i < len && line[i] != ' ') {
            unsigned char c = (unsigned char)line[i];
            if (c < 0x21 || c > 0x7E)
                return -1;
            continue;
        }
        if (i == start || n == max)
            return -1;
        f[n] = line + start;
        flen[n] = i - start;
        n++;
        start = i + 1;
    }
    return n;
}

static bool field_is(const char *f, size_t n, const char *word)
{
    return n == strlen(word) && memcmp(f, word, n) == 0;
}

/* Canonical decimal 1..65535: digits only, no leading zero. */
static int parse_port(const char *s, size_t n, uint16_t *out)
{
    if (n == 0 || n > 5 || s[0] == '0')
        return UW_EINVAL;
    uint32_t v = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return UW_EINVAL;
        v = v * 10 + (uint32_t)(s[i] - '0');
    }
    if (v > 65535)
        return UW_EINVAL;
    *out = (uint16_t)v;
    return 0;
}

int uw__pm_ctl_parse_req(const char *line, size_t len, uw__pm_ctl_req *out)
{
    if (!line || !out)
        return UW_EINVAL;
    const char *f[3];
    size_t fl[3];
    int n = split(line, len, f, fl, 3);
    if (n < 1)
        return UW_EPROTO;
    uw__pm_ctl_req r = {0, 0, 0};
    if (field_is(f[0], fl[0], "MAP") && n == 3) {
        r.op = UW__PM_CTL_MAP;
        if (parse_port(f[1], fl[1], &r.svc) || parse_port(f[2], fl[2], &r.sdp))
            return UW_EINVAL;
    } else if (field_is(f[0], fl[0], "UNMAP") && n == 2) {
        r.op = UW__PM_CTL_UNMAP;
        if (parse_port(f[1], fl[1], &r.svc))
            return UW_EINVAL;
    } else {
        return UW_EPROTO;
    }
    *out = r;
    return 0;
}

ssize_t uw__pm_ctl_fmt_req(const uw__pm_ctl_req *r, char *out, size_t cap)
{
    if (!r || !out || r->svc == 0)
        return UW_EINVAL;
    char line[UW__PM_CTL_LINE_MAX];
    int n;
    if (r->op == UW__PM_CTL_MAP && r->sdp != 0)
        n = snprintf(line, sizeof(line), "MAP %u %u\n", (unsigned)r->svc, (unsigned)r->sdp);
    else if (r->op == UW__PM_CTL_UNMAP)
        n = snprintf(line, sizeof(line), "UNMAP %u\n", (unsigned)r->svc);
    else
        return UW_EINVAL;
    if ((size_t)n + 1 > cap)
        return UW_ENOBUFS;
    memcpy(out, line, (size_t)n + 1);
    return n;
}

/* The name table: every UW_E* code, from the one X-macro list. */
static const struct {
    const char *name;
    int code;
} k_names[] = {
#define UW__CTL_NAME(name, value, msg) {#name, value},
    UW_ERRNO_MAP(UW__CTL_NAME)
#undef UW__CTL_NAME
};

int uw__pm_ctl_err_from_name(const char *name, size_t len)
{
    if (!name)
        return 0;
    for (size_t i = 0; i < sizeof(k_names) / sizeof(k_names[0]); i++)
        if (field_is(name, len, k_names[i].name))
            return k_names[i].code;
    return 0;
}

ssize_t uw__pm_ctl_fmt_reply(int err, const char *msg, char *out, size_t cap)
{
    if (!out || err > 0)
        return UW_EINVAL;
    if (err == 0) {
        if (cap < 4)
            return UW_ENOBUFS;
        memcpy(out, "OK\n", 4);
        return 3;
    }
    const char *name = uw_err_name(err);
    if (uw__pm_ctl_err_from_name(name, strlen(name)) != err)
        return UW_EINVAL;
    /* limit: octets of the line, LF included. */
    size_t limit = cap ? cap - 1 : 0;
    if (limit > UW__PM_CTL_LINE_MAX)
        limit = UW__PM_CTL_LINE_MAX;
    size_t n = 4 + strlen(name); /* "ERR " name */
    if (n + 1 > limit)
        return UW_ENOBUFS;
    memcpy(out, "ERR ", 4);
    memcpy(out + 4, name, n - 4);
    if (msg && *msg && n + 3 <= limit) { /* SP, one octet of text, LF */
        out[n++] = ' ';
        for (const char *m = msg; *m && n + 1 < limit; m++) {
            unsigned char c = (unsigned char)*m;
            out[n++] = (c >= 0x20 && c <= 0x7E) ? (char)c : '?';
        }
    }
    out[n++] = '\n';
    out[n] = '\0';
    return (ssize_t)n;
}

int uw__pm_ctl_parse_reply(const char *line, size_t len, int *err, const char **text,
                           size_t *text_len)
{
    if (!line || !err)
        return UW_EPROTO;
    if (field_is(line, len, "OK")) {
        *err = 0;
        if (text)
            *text = line + len;
        if (text_len)
            *text_len = 0;
        return 0;
    }
    if (len < 5 || memcmp(line, "ERR ", 4) != 0)
        return UW_EPROTO;
    size_t i = 4, start = 4;
    while (i < len && ((line[i] >= 'A' && line[i] <= 'Z') || (line[i] >= '0' && line[i] <= '9') ||
                       line[i] == '_'))
        i++;
    size_t name_len = i - start;
    if (name_len == 0 || name_len > 31)
        return UW_EPROTO;
    size_t t = i;
    if (i < len) {
        if (line[i] != ' ' || i + 1 == len) /* a space means text follows */
            return UW_EPROTO;
        t = i + 1;
        for (size_t k = t; k < len; k++)
            if ((unsigned char)line[k] < 0x20 || (unsigned char)line[k] > 0x7E)
                return UW_EPROTO;
    }
    int code = uw__pm_ctl_err_from_name(line + start, name_len);
    *err = code ? code : UW_EPROTO;
    if (text)
        *text = line + t;
    if (text_len)
        *text_len = len - t;
    return 0;
}
