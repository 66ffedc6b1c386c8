/* uwarp-pmd's control protocol (src/pm/ctl.c; docs/portmapper.md, "Dynamic
 * registration"): the line framer in any split, the strict request and
 * reply grammars, the formatters, and their round trips. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "pm/ctl.h"
#include "testutil.h"

static int parse(const char *line, uw__pm_ctl_req *r)
{
    return uw__pm_ctl_parse_req(line, strlen(line), r);
}

static void test_parse_valid(void **state)
{
    (void)state;
    uw__pm_ctl_req r;
    assert_int_equal(parse("MAP 5001 15001", &r), 0);
    assert_int_equal(r.op, UW__PM_CTL_MAP);
    assert_int_equal(r.svc, 5001);
    assert_int_equal(r.sdp, 15001);
    assert_int_equal(parse("MAP 1 65535", &r), 0);
    assert_int_equal(r.svc, 1);
    assert_int_equal(r.sdp, 65535);
    assert_int_equal(parse("MAP 80 80", &r), 0); /* the same port: allowed */
    assert_int_equal(parse("UNMAP 443", &r), 0);
    assert_int_equal(r.op, UW__PM_CTL_UNMAP);
    assert_int_equal(r.svc, 443);
    assert_int_equal(r.sdp, 0);
}

static void test_parse_invalid(void **state)
{
    (void)state;
    static const struct {
        const char *line;
        int err;
    } bad[] = {
        {"", UW_EPROTO},          {"MAP", UW_EPROTO},          {"MAP 1", UW_EPROTO},
        {"MAP 1 2 3", UW_EPROTO}, {"map 1 2", UW_EPROTO},      {"MAP  1 2", UW_EPROTO},
        {" MAP 1 2", UW_EPROTO},  {"MAP 1 2 ", UW_EPROTO},     {"MAP 1\t2", UW_EPROTO},
        {"MAP 1 2\r", UW_EPROTO}, {"UNMAP", UW_EPROTO},        {"UNMAP 1 2", UW_EPROTO},
        {"PING", UW_EPROTO},      {"MAPX 1 2", UW_EPROTO},     {"MAP 0 1", UW_EINVAL},
        {"MAP 1 0", UW_EINVAL},   {"MAP 65536 1", UW_EINVAL},  {"MAP 1 99999", UW_EINVAL},
        {"MAP 01 2", UW_EINVAL},  {"MAP -1 2", UW_EINVAL},     {"MAP +1 2", UW_EINVAL},
        {"MAP 1a 2", UW_EINVAL},  {"MAP 123456 1", UW_EINVAL}, {"UNMAP 0", UW_EINVAL},
        {"UNMAP x", UW_EINVAL},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        uw__pm_ctl_req r, before;
        memset(&r, 0x5A, sizeof(r));
        before = r;
        int rc = parse(bad[i].line, &r);
        if (rc != bad[i].err)
            fail_msg("'%s': %d, want %d", bad[i].line, rc, bad[i].err);
        assert_memory_equal(&r, &before, sizeof(r)); /* not written on error */
    }
    /* An embedded NUL is an octet like any other: not a request. */
    uw__pm_ctl_req r;
    assert_int_equal(uw__pm_ctl_parse_req("MAP 1\0 2", 8, &r), UW_EPROTO);
    assert_int_equal(uw__pm_ctl_parse_req(NULL, 0, &r), UW_EINVAL);
    assert_int_equal(uw__pm_ctl_parse_req("MAP 1 2", 7, NULL), UW_EINVAL);
}

static void test_fmt_req(void **state)
{
    (void)state;
    char out[UW__PM_CTL_LINE_MAX];
    uw__pm_ctl_req r = {UW__PM_CTL_MAP, 5001, 15001};
    assert_int_equal(uw__pm_ctl_fmt_req(&r, out, sizeof(out)), 15);
    assert_string_equal(out, "MAP 5001 15001\n");
    r = (uw__pm_ctl_req){UW__PM_CTL_UNMAP, 7, 99}; /* sdp ignored */
    assert_int_equal(uw__pm_ctl_fmt_req(&r, out, sizeof(out)), 8);
    assert_string_equal(out, "UNMAP 7\n");
    assert_int_equal(uw__pm_ctl_fmt_req(&r, out, 8), UW_ENOBUFS); /* no room for the NUL */
    assert_int_equal(uw__pm_ctl_fmt_req(&r, out, 9), 8);
    r = (uw__pm_ctl_req){UW__PM_CTL_MAP, 0, 1};
    assert_int_equal(uw__pm_ctl_fmt_req(&r, out, sizeof(out)), UW_EINVAL);
    r = (uw__pm_ctl_req){UW__PM_CTL_MAP, 1, 0};
    assert_int_equal(uw__pm_ctl_fmt_req(&r, out, sizeof(out)), UW_EINVAL);
    r = (uw__pm_ctl_req){3, 1, 1};
    assert_int_equal(uw__pm_ctl_fmt_req(&r, out, sizeof(out)), UW_EINVAL);
    /* Every request formats to a line that parses back to it. */
    tu_rng rng;
    tu_rng_init(&rng, tu_seed(0x7c71));
    for (int i = 0; i < 20000; i++) {
        uw__pm_ctl_req a = {tu_rng_below(&rng, 2) ? UW__PM_CTL_MAP : UW__PM_CTL_UNMAP,
                            (uint16_t)(1 + tu_rng_below(&rng, 65535)), 0};
        if (a.op == UW__PM_CTL_MAP)
            a.sdp = (uint16_t)(1 + tu_rng_below(&rng, 65535));
        ssize_t n = uw__pm_ctl_fmt_req(&a, out, sizeof(out));
        assert_true(n > 0 && out[n - 1] == '\n');
        uw__pm_ctl_req b;
        assert_int_equal(uw__pm_ctl_parse_req(out, (size_t)n - 1, &b), 0);
        assert_memory_equal(&a, &b, sizeof(a));
    }
}

/* Feeds s in chunks of the given sizes (cycled) and collects the lines,
 * joined by '|'; an overflow appends "!". */
static void collect(const char *s, size_t n, const size_t *chunks, size_t nchunks, char *out,
                    size_t cap)
{
    uw__pm_ctl_rx rx;
    uw__pm_ctl_rx_init(&rx);
    size_t off = 0, k = 0, o = 0;
    out[0] = '\0';
    while (off < n) {
        size_t c = chunks[k++ % nchunks];
        if (c > n - off)
            c = n - off;
        size_t left = c;
        const char *p = s + off;
        while (left) {
            const char *line;
            size_t len;
            ssize_t used = uw__pm_ctl_rx_feed(&rx, p, left, &line, &len);
            if (used < 0) {
                assert_int_equal(used, UW_EMSGSIZE);
                o += (size_t)snprintf(out + o, cap - o, "!");
                return;
            }
            if (line)
                o += (size_t)snprintf(out + o, cap - o, "%.*s|", (int)len, line);
            p += used;
            left -= (size_t)used;
        }
        off += c;
    }
}

static void test_framing_splits(void **state)
{
    (void)state;
    const char s[] = "MAP 1 2\nUNMAP 3\r\n\nOK\r\r\npartial";
    const char want[] = "MAP 1 2|UNMAP 3||OK\r|";
    char got[256];
    static const size_t whole[] = {sizeof(s) - 1}, ones[] = {1}, mixed[] = {3, 1, 7, 2};
    collect(s, sizeof(s) - 1, whole, 1, got, sizeof(got));
    assert_string_equal(got, want);
    collect(s, sizeof(s) - 1, ones, 1, got, sizeof(got));
    assert_string_equal(got, want);
    collect(s, sizeof(s) - 1, mixed, 4, got, sizeof(got));
    assert_string_equal(got, want);
    /* Random splits give the same lines. */
    tu_rng rng;
    tu_rng_init(&rng, tu_seed(0x5917));
    for (int i = 0; i < 2000; i++) {
        size_t ch[5];
        for (int k = 0; k < 5; k++)
            ch[k] = 1 + tu_rng_below(&rng, 12);
        collect(s, sizeof(s) - 1, ch, 5, got, sizeof(got));
        assert_string_equal(got, want);
    }
}

static void test_framing_limits(void **state)
{
    (void)state;
    char s[UW__PM_CTL_LINE_MAX + 2];
    char got[512];
    static const size_t whole[] = {sizeof(s)}, ones[] = {1};
    /* LINE_MAX octets with the LF: fits. */
    memset(s, 'A', UW__PM_CTL_LINE_MAX - 1);
    s[UW__PM_CTL_LINE_MAX - 1] = '\n';
    collect(s, UW__PM_CTL_LINE_MAX, whole, 1, got, sizeof(got));
    assert_int_equal(strlen(got), UW__PM_CTL_LINE_MAX); /* 127 octets and '|' */
    collect(s, UW__PM_CTL_LINE_MAX, ones, 1, got, sizeof(got));
    assert_int_equal(strlen(got), UW__PM_CTL_LINE_MAX);
    /* One more: overflow, whatever the split. */
    memset(s, 'A', UW__PM_CTL_LINE_MAX);
    s[UW__PM_CTL_LINE_MAX] = '\n';
    collect(s, UW__PM_CTL_LINE_MAX + 1, whole, 1, got, sizeof(got));
    assert_string_equal(got, "!");
    collect(s, UW__PM_CTL_LINE_MAX + 1, ones, 1, got, sizeof(got));
    assert_string_equal(got, "!");
    /* Sticky: nothing parses after an overflow. */
    uw__pm_ctl_rx rx;
    uw__pm_ctl_rx_init(&rx);
    const char *line;
    size_t len;
    assert_int_equal(uw__pm_ctl_rx_feed(&rx, s, UW__PM_CTL_LINE_MAX + 1, &line, &len), UW_EMSGSIZE);
    assert_int_equal(uw__pm_ctl_rx_feed(&rx, "OK\n", 3, &line, &len), UW_EMSGSIZE);
    assert_null(line);
    /* No input: nothing consumed, no line. */
    uw__pm_ctl_rx_init(&rx);
    assert_int_equal(uw__pm_ctl_rx_feed(&rx, NULL, 0, &line, &len), 0);
    assert_null(line);
    assert_int_equal(uw__pm_ctl_rx_feed(NULL, "x", 1, &line, &len), UW_EINVAL);
    assert_int_equal(uw__pm_ctl_rx_feed(&rx, NULL, 1, &line, &len), UW_EINVAL);
}

static void test_reply_roundtrip(void **state)
{
    (void)state;
    char out[UW__PM_CTL_LINE_MAX + 1];
    assert_int_equal(uw__pm_ctl_fmt_reply(0, "ignored", out, sizeof(out)), 3);
    assert_string_equal(out, "OK\n");
    assert_int_equal(uw__pm_ctl_fmt_reply(UW_EPERM, "no listening TCP socket", out, sizeof(out)),
                     34);
    assert_string_equal(out, "ERR EPERM no listening TCP socket\n");
    assert_int_equal(uw__pm_ctl_fmt_reply(UW_EADDRINUSE, NULL, out, sizeof(out)), 15);
    assert_string_equal(out, "ERR EADDRINUSE\n");
    assert_int_equal(uw__pm_ctl_fmt_reply(UW_ENOENT, "", out, sizeof(out)), 11);
    assert_string_equal(out, "ERR ENOENT\n");
    /* Octets outside printable ASCII become '?'. */
    uw__pm_ctl_fmt_reply(UW_EINVAL, "a\nb\tc\x80\x7f", out, sizeof(out));
    assert_string_equal(out, "ERR EINVAL a?b?c??\n");
    /* Long text is cut to the line limit, and to the buffer. */
    char longmsg[300];
    memset(longmsg, 'x', sizeof(longmsg) - 1);
    longmsg[sizeof(longmsg) - 1] = '\0';
    char big[400];
    ssize_t n = uw__pm_ctl_fmt_reply(UW_EPERM, longmsg, big, sizeof(big));
    assert_int_equal(n, UW__PM_CTL_LINE_MAX);
    assert_int_equal(big[n - 1], '\n');
    n = uw__pm_ctl_fmt_reply(UW_EPERM, longmsg, big, 20);
    assert_int_equal(n, 19);
    assert_string_equal(big, "ERR EPERM xxxxxxxx\n");
    /* Too small for even the name; not an error code. */
    assert_int_equal(uw__pm_ctl_fmt_reply(UW_EPERM, NULL, big, 10), UW_ENOBUFS);
    assert_int_equal(uw__pm_ctl_fmt_reply(UW_EPERM, NULL, big, 11), 10);
    assert_int_equal(uw__pm_ctl_fmt_reply(0, NULL, big, 3), UW_ENOBUFS);
    assert_int_equal(uw__pm_ctl_fmt_reply(1, NULL, big, sizeof(big)), UW_EINVAL);
    assert_int_equal(uw__pm_ctl_fmt_reply(-9999, NULL, big, sizeof(big)), UW_EINVAL);
    /* Every code: formatted, parsed back to itself with its text. */
    static const int codes[] = {
#define T_CODE(name, value, msg) value,
        UW_ERRNO_MAP(T_CODE)
#undef T_CODE
    };
    for (size_t i = 0; i < sizeof(codes) / sizeof(codes[0]); i++) {
        n = uw__pm_ctl_fmt_reply(codes[i], "why not", out, sizeof(out));
        assert_true(n > 0);
        int err;
        const char *text;
        size_t tl;
        assert_int_equal(uw__pm_ctl_parse_reply(out, (size_t)n - 1, &err, &text, &tl), 0);
        assert_int_equal(err, codes[i]);
        assert_int_equal(tl, 7);
        assert_memory_equal(text, "why not", 7);
        const char *name = uw_err_name(codes[i]);
        assert_int_equal(uw__pm_ctl_err_from_name(name, strlen(name)), codes[i]);
    }
}

static void test_parse_reply(void **state)
{
    (void)state;
    int err = 1;
    const char *text;
    size_t tl;
    assert_int_equal(uw__pm_ctl_parse_reply("OK", 2, &err, &text, &tl), 0);
    assert_int_equal(err, 0);
    assert_int_equal(tl, 0);
    assert_int_equal(uw__pm_ctl_parse_reply("ERR EPERM", 9, &err, NULL, NULL), 0);
    assert_int_equal(err, UW_EPERM);
    /* A well-formed name this version does not know. */
    assert_int_equal(uw__pm_ctl_parse_reply("ERR EFUTURE soon", 16, &err, &text, &tl), 0);
    assert_int_equal(err, UW_EPROTO);
    assert_int_equal(tl, 4);
    static const char *const bad[] = {"",
                                      "ok",
                                      "OK ",
                                      "OKAY",
                                      "ERR",
                                      "ERR ",
                                      "ERR eperm",
                                      "ERR EPERM ",
                                      "ERR EPERM\tx",
                                      "ERR EPERMx y",
                                      "ERR  EPERM",
                                      "ERR EPERM a\x01",
                                      "ERR A23456789012345678901234567890123"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        err = 1;
        if (uw__pm_ctl_parse_reply(bad[i], strlen(bad[i]), &err, NULL, NULL) != UW_EPROTO)
            fail_msg("'%s' accepted", bad[i]);
        assert_int_equal(err, 1); /* not written */
    }
    assert_int_equal(uw__pm_ctl_err_from_name("OK", 2), 0);
    assert_int_equal(uw__pm_ctl_err_from_name("UNKNOWN", 7), 0);
    assert_int_equal(uw__pm_ctl_err_from_name("EPER", 4), 0);
    assert_int_equal(uw__pm_ctl_err_from_name("EMPA_CRC", 8), UW_EMPA_CRC);
    assert_int_equal(uw__pm_ctl_err_from_name(NULL, 0), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_valid),    cmocka_unit_test(test_parse_invalid),
        cmocka_unit_test(test_fmt_req),        cmocka_unit_test(test_framing_splits),
        cmocka_unit_test(test_framing_limits), cmocka_unit_test(test_reply_roundtrip),
        cmocka_unit_test(test_parse_reply),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
