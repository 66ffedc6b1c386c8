/* Fuzz target: uwarp-pmd's control protocol (src/pm/ctl.c).
 *
 * Input: byte 0 seeds the chunking; the rest is a byte stream as a control
 * connection would carry it (requests or replies, any octets).
 *
 * Stream checks: the framer gives the same lines and the same overflow
 * whether the stream arrives whole or in random chunks (one octet at a time
 * included); lines never hold an LF, never exceed the limit, and the
 * overflow is sticky. Every line goes through both parsers: an accepted
 * request formats back to exactly the line, an accepted reply with a known
 * name too, and a parser that fails leaves its output alone.
 *
 * Formatter checks: bytes 1 and 2 pick an error code and a buffer size,
 * the rest is a message of any octets; the reply written parses back to the
 * same code with the message's printable prefix (others as '?'), within the
 * line limit and the buffer. */
#include <string.h>

#include "common.h"
#include "pm/ctl.h"

#define MAX_LINES 4096

typedef struct lines {
    size_t n;
    int end_err; /* 0 or the framer's error */
    size_t len[MAX_LINES];
    char text[MAX_LINES][UW__PM_CTL_LINE_MAX];
} lines;

static lines g_whole, g_split;

static void frame(const uint8_t *p, size_t n, fz_rng *r, lines *out)
{
    uw__pm_ctl_rx rx;
    uw__pm_ctl_rx_init(&rx);
    out->n = 0;
    out->end_err = 0;
    size_t off = 0;
    while (off < n) {
        size_t want = r ? fz_chunk(r, n - off) : n - off;
        const uint8_t *chunk = p + off;
        size_t left = want;
        while (left) {
            const char *line;
            size_t len;
            ssize_t used = uw__pm_ctl_rx_feed(&rx, chunk, left, &line, &len);
            if (used < 0) {
                FZ_CHECK(used == UW_EMSGSIZE);
                /* Sticky: the stream is dead from here on. */
                FZ_CHECK(uw__pm_ctl_rx_feed(&rx, "\n", 1, &line, &len) == UW_EMSGSIZE);
                FZ_CHECK(line == NULL);
                out->end_err = (int)used;
                return;
            }
            FZ_CHECK(used > 0 && (size_t)used <= left);
            if (line) {
                FZ_CHECK(chunk[used - 1] == '\n');
                FZ_CHECK(len < UW__PM_CTL_LINE_MAX && line[len] == '\0');
                FZ_CHECK(memchr(line, '\n', len) == NULL);
                if (out->n < MAX_LINES) {
                    memcpy(out->text[out->n], line, len);
                    out->len[out->n++] = len;
                }
            } else {
                FZ_CHECK((size_t)used == left);
            }
            chunk += used;
            left -= (size_t)used;
        }
        off += want;
    }
}

static void check_request(const char *line, size_t len)
{
    uw__pm_ctl_req r;
    memset(&r, 0x5A, sizeof(r));
    uw__pm_ctl_req before = r;
    int rc = uw__pm_ctl_parse_req(line, len, &r);
    if (rc != 0) {
        FZ_CHECK(rc == UW_EPROTO || rc == UW_EINVAL);
        FZ_CHECK(memcmp(&r, &before, sizeof(r)) == 0);
        return;
    }
    FZ_CHECK(r.op == UW__PM_CTL_MAP || r.op == UW__PM_CTL_UNMAP);
    FZ_CHECK(r.svc != 0 && (r.op == UW__PM_CTL_UNMAP || r.sdp != 0));
    char out[UW__PM_CTL_LINE_MAX + 1];
    ssize_t n = uw__pm_ctl_fmt_req(&r, out, sizeof(out));
    FZ_CHECK(n == (ssize_t)len + 1 && memcmp(out, line, len) == 0 && out[len] == '\n');
}

static void check_reply(const char *line, size_t len)
{
    int err = 1;
    const char *text = NULL;
    size_t tl = 99;
    int rc = uw__pm_ctl_parse_reply(line, len, &err, &text, &tl);
    if (rc != 0) {
        FZ_CHECK(rc == UW_EPROTO && err == 1 && text == NULL && tl == 99);
        return;
    }
    FZ_CHECK(err <= 0 && text >= line && text + tl == line + len);
    if (err == 0) {
        FZ_CHECK(len == 2 && memcmp(line, "OK", 2) == 0);
        return;
    }
    size_t name_len = tl ? (size_t)(text - line) - 5 : len - 4;
    if (uw__pm_ctl_err_from_name(line + 4, name_len) != err)
        return; /* a name this version does not know: reported as UW_EPROTO */
    char msg[UW__PM_CTL_LINE_MAX];
    memcpy(msg, text, tl);
    msg[tl] = '\0';
    char out[UW__PM_CTL_LINE_MAX + 1];
    ssize_t n = uw__pm_ctl_fmt_reply(err, msg, out, sizeof(out));
    FZ_CHECK(n == (ssize_t)len + 1 && memcmp(out, line, len) == 0 && out[len] == '\n');
}

static const int k_codes[] = {
#define FZ_CODE(name, value, msg) value,
    UW_ERRNO_MAP(FZ_CODE)
#undef FZ_CODE
};

static void check_format(const uint8_t *data, size_t size)
{
    if (size < 3)
        return;
    size_t nc = sizeof(k_codes) / sizeof(k_codes[0]);
    int err = data[1] == 0xFF ? 0 : k_codes[data[1] % nc];
    size_t cap = data[2];
    char msg[300];
    size_t ml = size - 3 < sizeof(msg) - 1 ? size - 3 : sizeof(msg) - 1;
    memcpy(msg, data + 3, ml);
    msg[ml] = '\0';
    char out[300];
    memset(out, 0x7F, sizeof(out));
    ssize_t n = uw__pm_ctl_fmt_reply(err, msg, out, cap);
    if (n < 0) {
        FZ_CHECK(n == UW_ENOBUFS);
        FZ_CHECK(cap < (err ? strlen(uw_err_name(err)) + 6 : 4));
        return;
    }
    FZ_CHECK((size_t)n < cap && (size_t)n <= UW__PM_CTL_LINE_MAX && out[n] == '\0');
    FZ_CHECK(n > 0 && out[n - 1] == '\n');
    int got;
    const char *text;
    size_t tl;
    FZ_CHECK(uw__pm_ctl_parse_reply(out, (size_t)n - 1, &got, &text, &tl) == 0);
    FZ_CHECK(got == err);
    FZ_CHECK(tl <= strlen(msg));
    for (size_t i = 0; i < tl; i++) {
        unsigned char c = (unsigned char)msg[i];
        FZ_CHECK(text[i] == ((c >= 0x20 && c <= 0x7E) ? (char)c : '?'));
    }
    /* The text is cut only where the line or the buffer ends. */
    size_t limit = cap - 1 < UW__PM_CTL_LINE_MAX ? cap - 1 : UW__PM_CTL_LINE_MAX;
    if (tl < strlen(msg) && err)
        FZ_CHECK((size_t)n + 2 >= limit);
    /* Requests: any two ports format and parse back. */
    uw__pm_ctl_req r = {data[0] & 1 ? UW__PM_CTL_UNMAP : UW__PM_CTL_MAP,
                        (uint16_t)(data[1] << 8 | data[2]), (uint16_t)(data[2] << 8 | data[1])};
    if (r.op == UW__PM_CTL_UNMAP)
        r.sdp = 0;
    char line[UW__PM_CTL_LINE_MAX + 1];
    n = uw__pm_ctl_fmt_req(&r, line, cap < sizeof(line) ? cap : sizeof(line));
    if (r.svc == 0 || (r.op == UW__PM_CTL_MAP && r.sdp == 0)) {
        FZ_CHECK(n == UW_EINVAL);
        return;
    }
    if (n == UW_ENOBUFS)
        return;
    FZ_CHECK(n > 0);
    uw__pm_ctl_req back;
    FZ_CHECK(uw__pm_ctl_parse_req(line, (size_t)n - 1, &back) == 0);
    FZ_CHECK(back.op == r.op && back.svc == r.svc && back.sdp == r.sdp);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    const uint8_t *s = data + 1;
    size_t n = size - 1;
    frame(s, n, NULL, &g_whole);
    fz_rng r;
    fz_rng_init(&r, data[0]);
    frame(s, n, &r, &g_split);
    FZ_CHECK(g_whole.n == g_split.n && g_whole.end_err == g_split.end_err);
    for (size_t i = 0; i < g_whole.n; i++) {
        FZ_CHECK(g_whole.len[i] == g_split.len[i]);
        FZ_CHECK(memcmp(g_whole.text[i], g_split.text[i], g_whole.len[i]) == 0);
        check_request(g_whole.text[i], g_whole.len[i]);
        check_reply(g_whole.text[i], g_whole.len[i]);
    }
    check_format(data, size);
    return 0;
}
