/* The preload library's rules (src/preload/conf.c; docs/preload.md,
 * "Configuration"): every grammar rule accepted and refused, every error
 * message word for word with its line and column, matching by role, program
 * glob, address prefix and port range, v4-mapped addresses, first match
 * wins, and the limits (1,024 rules, lines of 1,024 octets). */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "preload/conf.h"

#define N(a) (sizeof(a) / sizeof((a)[0]))

/* Parses text from an exact-size heap copy (no NUL after it), so that the
 * sanitizer build catches any read past len. */
static int parse_n(const char *text, size_t len, uw_pl_conf **out, char *err, size_t errlen)
{
    char *copy = malloc(len ? len : 1);
    assert_non_null(copy);
    memcpy(copy, text, len);
    int rc = uw_pl_conf_parse(copy, len, out, err, errlen);
    free(copy);
    return rc;
}

static uw_pl_conf *parse_ok(const char *text)
{
    uw_pl_conf *c = NULL;
    char err[256] = "untouched";
    int rc = parse_n(text, strlen(text), &c, err, sizeof(err));
    if (rc != 0)
        fail_msg("parse of \"%s\": %d (%s)", text, rc, err);
    assert_non_null(c);
    assert_string_equal(err, "");
    return c;
}

/* Returns 1 (after printing both texts) when the error is not want. */
static int check_error(const char *text, size_t len, const char *want)
{
    uw_pl_conf *c = (uw_pl_conf *)&c; /* not NULL: the parser must clear it */
    char err[512];
    int rc = parse_n(text, len, &c, err, sizeof(err));
    assert_null(c);
    /* The preload library reports errors from a 256-octet buffer. */
    assert_true(strlen(err) < 256);
    if (rc == -EINVAL && strcmp(err, want) == 0)
        return 0;
    print_error("parse of \"%.*s\": %d, error\n  \"%s\"\nexpected\n  \"%s\"\n", (int)len, text, rc,
                err, want);
    return 1;
}

static void expect_error(const char *text, size_t len, const char *want)
{
    if (check_error(text, len, want))
        fail();
}

/* ------------------------------------------------------------------------ */
/* Grammar: what is accepted                                                 */

static void test_accepted(void **state)
{
    (void)state;
    static const struct {
        const char *text;
        size_t rules;
    } ok[] = {
        {"", 0},
        {"\n", 0},
        {"\n\n\n", 0},
        {"   \t  \n", 0},
        {"# only a comment", 0},
        {"   # indented comment\n#another\n", 0},
        {"#\x01\x7f\xff anything goes in a comment", 0},
        {"use sdp * * *", 1},
        {"use sdp * * *\n", 1},
        {"use tcp * * *\r\n", 1},
        {"use tcp * * *\r", 1},
        {"use both * * *", 1},
        {"use sdp server * *", 1},
        {"use sdp client * *", 1},
        {"\t use  sdp\t\t*   *\t* \t", 1},
        {"use sdp * * * # trailing comment", 1},
        {"use sdp * * *# comment touching the address", 1},
        {"use sdp * redis-* *", 1},
        {"use sdp * redis-server *", 1},
        {"use sdp * [a-z]?x* *", 1},
        {"use sdp * caf\xc3\xa9 *", 1}, /* UTF-8 program name */
        {"use sdp * * *:80", 1},
        {"use sdp * * *:0-65535", 1},
        {"use sdp * * 0.0.0.0/0", 1},
        {"use sdp * * 10.0.0.0/8", 1},
        {"use sdp * * 10.1.2.3/8", 1}, /* host bits: accepted, cleared */
        {"use sdp * * 192.0.2.1", 1},
        {"use sdp * * 192.0.2.1/32", 1},
        {"use sdp * * 255.255.255.255", 1},
        {"use sdp * * 0.0.0.0", 1},
        {"use sdp * * 192.0.2.1:80", 1},
        {"use sdp * * 192.0.2.1:80-80", 1},
        {"use sdp * * 192.0.2.0/24:1000-2000", 1},
        {"use sdp * * 192.0.2.0/24:0", 1},
        {"use sdp * * 192.0.2.0/24:65535", 1},
        {"use sdp * * 192.0.2.0/24:00080", 1},
        {"use sdp * * [::]", 1},
        {"use sdp * * [::]/0", 1},
        {"use sdp * * [::1]", 1},
        {"use sdp * * [::1]:80", 1},
        {"use sdp * * [::1]/128:80-90", 1},
        {"use sdp * * [1::]", 1},
        {"use sdp * * [2001:db8::]/32", 1},
        {"use sdp * * [2001:DB8:0:0:0:0:0:1]", 1},
        {"use sdp * * [1:2:3:4:5:6:7:8]", 1},
        {"use sdp * * [1::8]", 1},
        {"use sdp * * [1:2:3:4:5:6::8]", 1},  /* "::" for one group */
        {"use sdp * * [1:2:3:4:5:6:7::]", 1}, /* at the end */
        {"use sdp * * [::2:3:4:5:6:7:8]", 1}, /* at the start */
        {"use sdp * * [0001:00ab::]", 1},
        {"use sdp * * [::ffff:192.0.2.1]", 1},
        {"use sdp * * [::ffff:192.0.2.0]/120", 1},
        {"use sdp * * [::192.0.2.1]", 1},
        {"use sdp * * [1:2:3:4:5:6:1.2.3.4]", 1},
        {"use sdp * * [1::5:6:1.2.3.4]", 1},
        {"use sdp * * [fe80::]/10", 1},
        {"use sdp * * [fe80::]/0", 1},
        {"use sdp * * *\nuse tcp * * *\n# x\n\nuse both server nginx 10.0.0.0/8:80", 3},
        {"\n\n\nuse sdp * * *", 1},
    };
    for (size_t i = 0; i < N(ok); i++) {
        uw_pl_conf *c = parse_ok(ok[i].text);
        if (uw_pl_conf_count(c) != ok[i].rules)
            fail_msg("\"%s\": %zu rules, expected %zu", ok[i].text, uw_pl_conf_count(c),
                     ok[i].rules);
        uw_pl_conf_free(c);
    }
}

/* ------------------------------------------------------------------------ */
/* Grammar: every error, word for word                                       */

static void test_errors(void **state)
{
    (void)state;
    static const struct {
        const char *text;
        const char *err;
    } bad[] = {
        /* Words and keywords */
        {"sdp * * *", "1:1: unknown keyword 'sdp', expected 'use' (a rule reads: use "
                      "sdp|tcp|both server|client|* PROGRAM-GLOB ADDR[/PREFIX][:PORT[-PORT]])"},
        {"USE sdp * * *", "1:1: unknown keyword 'USE', expected 'use' (a rule reads: use "
                          "sdp|tcp|both server|client|* PROGRAM-GLOB "
                          "ADDR[/PREFIX][:PORT[-PORT]])"},
        {"use", "1:5: missing transport after 'use', expected sdp, tcp or both"},
        {"  use   # x", "1:7: missing transport after 'use', expected sdp, tcp or both"},
        {"use rdma * * *", "1:5: unknown transport 'rdma', expected sdp, tcp or both"},
        {"use SDP * * *", "1:5: unknown transport 'SDP', expected sdp, tcp or both"},
        {"use sdp", "1:9: missing role after the transport, expected server, client or *"},
        {"use sdp srv * *", "1:9: unknown role 'srv', expected server, client or *"},
        {"use sdp ** * *", "1:9: unknown role '**', expected server, client or *"},
        {"use sdp server", "1:16: missing program after the role, expected a program name or "
                           "an fnmatch pattern such as * or redis-*"},
        {"use sdp server /usr/bin/nginx *",
         "1:16: '/' in the program pattern '/usr/bin/nginx', expected a name without a "
         "directory (the program's short name is matched, such as nginx)"},
        {"use sdp server bin/nginx *",
         "1:19: '/' in the program pattern 'bin/nginx', expected a name without a directory "
         "(the program's short name is matched, such as nginx)"},
        {"use sdp server nginx", "1:22: missing address after the program, expected *, an IPv4 "
                                 "address or an IPv6 address in brackets, with optional /PREFIX "
                                 "and :PORT[-PORT]"},
        {"use sdp * * * extra", "1:15: unexpected 'extra' after the address, expected the end "
                                "of the rule or a # comment"},
        {"use sdp * * 10.0.0.0 /8", "1:22: unexpected '/8' after the address, expected the end "
                                    "of the rule or a # comment"},
        /* Characters */
        {"use sdp * * *\x01", "1:14: control character (0x01), expected printable text"},
        {"use\x7fsdp", "1:4: control character (0x7f), expected printable text"},
        {"use sdp\r * * *", "1:8: carriage return inside a line (0x0d), expected printable text"},
        {"use sdp * * *\r\r\n", "1:14: carriage return inside a line (0x0d), expected printable "
                                "text"},
        {"use \xff * * *", "1:5: unknown transport '\\xff', expected sdp, tcp or both"},
        {"use sdp * * \xc3\xa9", "1:13: unknown address '\\xc3\\xa9', expected '*', an IPv4 "
                                 "address such as 10.0.0.0/8 or an IPv6 address in brackets "
                                 "such as [fd00::]/8 (names are not resolved)"},
        /* Addresses: names, '*' */
        {"use sdp * * localhost", "1:13: unknown address 'localhost', expected '*', an IPv4 "
                                  "address such as 10.0.0.0/8 or an IPv6 address in brackets "
                                  "such as [fd00::]/8 (names are not resolved)"},
        {"use sdp * * */0", "1:14: prefix after '*', which already means every address, "
                            "expected '*' alone or '*:PORT'"},
        {"use sdp * * *x", "1:14: unexpected 'x' in the address, expected /PREFIX, :PORT, "
                           ":PORT-PORT or a space"},
        /* IPv4 */
        {"use sdp * * 10", "1:15: IPv4 address with 1 number, expected four numbers 0-255 "
                           "separated by dots, such as 192.0.2.1"},
        {"use sdp * * 10/8", "1:15: IPv4 address with 1 number, expected four numbers 0-255 "
                             "separated by dots, such as 192.0.2.1"},
        {"use sdp * * 10.1.2", "1:19: IPv4 address with 3 numbers, expected four numbers 0-255 "
                               "separated by dots, such as 192.0.2.1"},
        {"use sdp * * 10..1.2",
         "1:16: '.' where a number belongs in an IPv4 address, expected a number 0-255"},
        {"use sdp * * 10.1.2.",
         "1:20: nothing after '.' in an IPv4 address, expected a number 0-255"},
        {"use sdp * * 10.1.2.x",
         "1:20: 'x' where a number belongs in an IPv4 address, expected a number 0-255"},
        {"use sdp * * 10.1.2.256", "1:20: IPv4 number 256 is above 255, expected a number "
                                   "0-255"},
        {"use sdp * * 1000.1.2.3", "1:13: IPv4 number 1000 is above 255, expected a number "
                                   "0-255"},
        {"use sdp * * 1.2.3.4444444444444", "1:19: IPv4 number 4444444444444 is above 255, "
                                            "expected a number 0-255"},
        {"use sdp * * 10.01.2.3", "1:16: IPv4 number 01 has a leading zero, expected a decimal "
                                  "number without one"},
        {"use sdp * * 10.0.0.00", "1:20: IPv4 number 00 has a leading zero, expected a decimal "
                                  "number without one"},
        {"use sdp * * 1.2.3.4.5", "1:20: unexpected '.' in the address, expected /PREFIX, "
                                  ":PORT, :PORT-PORT or a space"},
        {"use sdp * * 1.2.3.4]", "1:20: unexpected ']' in the address, expected /PREFIX, "
                                 ":PORT, :PORT-PORT or a space"},
        /* IPv6 */
        {"use sdp * * ::1", "1:13: IPv6 address without brackets, expected it in brackets such "
                            "as [2001:db8::1] or [::1]:80"},
        {"use sdp * * fe80::1", "1:13: IPv6 address without brackets, expected it in brackets "
                                "such as [2001:db8::1] or [::1]:80"},
        {"use sdp * * 2001:db8::1", "1:13: IPv6 address without brackets, expected it in "
                                    "brackets such as [2001:db8::1] or [::1]:80"},
        {"use sdp * * [::1", "1:17: IPv6 address without its closing ']', expected [ADDRESS] "
                             "such as [2001:db8::1]"},
        {"use sdp * * []", "1:14: empty brackets, expected an IPv6 address such as [::1] or "
                           "[fd00::]"},
        {"use sdp * * [:1]", "1:14: IPv6 address starts with a single ':', expected '::' or a "
                             "group of hex digits"},
        {"use sdp * * [1:]", "1:16: IPv6 address ends with a single ':', expected a group of "
                             "hex digits after it"},
        {"use sdp * * [:::1]", "1:16: unexpected ':' in an IPv6 address, expected a group of hex "
                               "digits"},
        {"use sdp * * [1::2::3]", "1:18: second '::' in an IPv6 address (the first is at column "
                                  "15), expected at most one"},
        {"use sdp * * [12345::]", "1:14: IPv6 group 12345 has 5 hex digits, expected at most 4"},
        {"use sdp * * [1:2:3:4:5:6:7:8:9]", "1:30: IPv6 address with more than 8 groups, "
                                            "expected 8 groups or fewer with '::'"},
        {"use sdp * * [1:2:3:4:5:6:7]", "1:27: IPv6 address with 7 groups, expected 8 groups or "
                                        "fewer with '::'"},
        {"use sdp * * [1]", "1:15: IPv6 address with 1 group, expected 8 groups or fewer with "
                            "'::'"},
        {"use sdp * * [1:2:3:4::5:6:7:8]", "1:21: '::' in an IPv6 address that already has 8 "
                                           "groups, expected 7 groups or fewer with '::'"},
        {"use sdp * * [fe80::1%eth0]", "1:21: IPv6 zone (%...) in a rule, expected an address "
                                       "without a zone"},
        {"use sdp * * [fe80::%eth0]", "1:20: IPv6 zone (%...) in a rule, expected an address "
                                      "without a zone"},
        {"use sdp * * [::g]", "1:16: unexpected 'g' in an IPv6 address, expected a group of hex "
                              "digits"},
        {"use sdp * * [::1g]", "1:17: unexpected 'g' in an IPv6 address, expected ':' or ']'"},
        {"use sdp * * [::1.2.3]", "1:21: IPv4 address with 3 numbers, expected four numbers "
                                  "0-255 separated by dots, such as 192.0.2.1"},
        {"use sdp * * [::1.2.3.4.5]", "1:23: unexpected '.' after the IPv4 part of an IPv6 "
                                      "address, expected ']'"},
        {"use sdp * * [::1.2.3.256]", "1:22: IPv4 number 256 is above 255, expected a number "
                                      "0-255"},
        {"use sdp * * [1:2:3:4:5:6:7:1.2.3.4]", "1:28: no room for an IPv4 part after 7 groups, "
                                                "expected at most 6 groups before it"},
        {"use sdp * * [::1:2:3:4:5:6:1.2.3.4]", "1:14: '::' in an IPv6 address that already has "
                                                "8 groups, expected 7 groups or fewer with '::'"},
        {"use sdp * * [::1]x", "1:18: unexpected 'x' in the address, expected /PREFIX, :PORT, "
                               ":PORT-PORT or a space"},
        {"use sdp * * [::1]]", "1:18: unexpected ']' in the address, expected /PREFIX, :PORT, "
                               ":PORT-PORT or a space"},
        /* Prefixes */
        {"use sdp * * 10.0.0.0/", "1:22: nothing after '/', expected a prefix "
                                  "length 0-32"},
        {"use sdp * * 10.0.0.0/x", "1:22: 'x' after '/', expected a prefix length 0-32"},
        {"use sdp * * 10.0.0.0/33", "1:22: prefix length 33 is too long for an IPv4 address, "
                                    "expected 0-32"},
        {"use sdp * * 10.0.0.0/99999999999", "1:22: prefix length 99999999999 is too long for "
                                             "an IPv4 address, expected 0-32"},
        {"use sdp * * [::]/129", "1:18: prefix length 129 is too long for an IPv6 address, "
                                 "expected 0-128"},
        {"use sdp * * [::]/-1", "1:18: '-' after '/', expected a prefix length 0-128"},
        {"use sdp * * 10.0.0.0/8/8", "1:23: unexpected '/' in the address, expected /PREFIX, "
                                     ":PORT, :PORT-PORT or a space"},
        /* Ports */
        {"use sdp * * *:", "1:15: nothing after ':', expected a port number "
                           "0-65535"},
        {"use sdp * * *:*", "1:15: '*' after ':', expected a port number 0-65535"},
        {"use sdp * * *:http", "1:15: 'h' after ':', expected a port number 0-65535"},
        {"use sdp * * *:65536", "1:15: port 65536 is above 65535, expected 0-65535"},
        {"use sdp * * 1.2.3.4:1234567890123", "1:21: port 1234567890123 is above 65535, "
                                              "expected 0-65535"},
        {"use sdp * * *:80-", "1:18: nothing after '-', expected a port number "
                              "0-65535"},
        {"use sdp * * *:80-70000", "1:18: port 70000 is above 65535, expected 0-65535"},
        {"use sdp * * *:90-80", "1:18: port range 90-80 ends below its start, expected LOW-HIGH "
                                "with LOW <= HIGH"},
        {"use sdp * * *:80-90-100", "1:20: unexpected '-' in the address, expected /PREFIX, "
                                    ":PORT, :PORT-PORT or a space"},
        {"use sdp * * *:80:90", "1:17: unexpected ':' in the address, expected /PREFIX, :PORT, "
                                ":PORT-PORT or a space"},
        {"use sdp * * 1.2.3.4:80/8", "1:23: unexpected '/' in the address, expected /PREFIX, "
                                     ":PORT, :PORT-PORT or a space"},
        /* Line numbers: the first bad line, counted with blank lines and comments */
        {"use sdp * * *\n# c\n\nuse sdp * * 1.2.3\n", "4:18: IPv4 address with 3 numbers, "
                                                      "expected four numbers 0-255 separated by "
                                                      "dots, such as 192.0.2.1"},
        {"use sdp * * *\r\nuse sdp * * 1.2.3\r\n", "2:18: IPv4 address with 3 numbers, expected "
                                                   "four numbers 0-255 separated by dots, such "
                                                   "as 192.0.2.1"},
        {"\n\nbad\nworse", "3:1: unknown keyword 'bad', expected 'use' (a rule reads: use "
                           "sdp|tcp|both server|client|* PROGRAM-GLOB "
                           "ADDR[/PREFIX][:PORT[-PORT]])"},
        /* Long words are cut in messages */
        {"use sdp * * aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
         "1:13: unknown address 'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa...', expected '*', "
         "an "
         "IPv4 address such as 10.0.0.0/8 or an IPv6 address in brackets such as [fd00::]/8 "
         "(names are not resolved)"},
        {"\x01", "1:1: control character (0x01), expected printable text"},
        {"\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff",
         "1:1: unknown keyword '\\xff\\xff\\xff\\xff\\xff\\xff\\xff\\xff\\xff\\xff\\xff...', "
         "expected "
         "'use' (a rule reads: use sdp|tcp|both server|client|* PROGRAM-GLOB "
         "ADDR[/PREFIX][:PORT[-PORT]])"},
        {"use sdp * * \\x", "1:13: unknown address '\\x5cx', expected '*', an IPv4 address "
                            "such as 10.0.0.0/8 or an IPv6 address in brackets such as "
                            "[fd00::]/8 (names are not resolved)"},
    };
    /* Every case runs, so that one run lists every difference. */
    int wrong = 0;
    for (size_t i = 0; i < N(bad); i++)
        wrong += check_error(bad[i].text, strlen(bad[i].text), bad[i].err);
    assert_int_equal(wrong, 0);
    /* A NUL octet inside the text (not a terminator: len says more). */
    expect_error("use sdp\0 * * *", 14, "1:8: NUL octet (0x00), expected printable text");
    /* ... but after a '#' it is comment. */
    uw_pl_conf *c = NULL;
    assert_int_equal(parse_n("use sdp * * * #\0\n", 17, &c, NULL, 0), 0);
    assert_int_equal(uw_pl_conf_count(c), 1);
    uw_pl_conf_free(c);
}

/* ------------------------------------------------------------------------ */
/* Limits                                                                    */

static char *repeat_rules(size_t n, const char *line)
{
    size_t l = strlen(line);
    char *t = malloc(n * l + 1);
    assert_non_null(t);
    for (size_t i = 0; i < n; i++)
        memcpy(t + i * l, line, l);
    t[n * l] = '\0';
    return t;
}

static void test_limits(void **state)
{
    (void)state;
    uw_pl_conf *c = NULL;
    char err[512];

    /* 1,024 rules, and any number of comments and blank lines besides. */
    char *t = repeat_rules(1024, "use tcp * * *\n# comment\n\n");
    assert_int_equal(parse_n(t, strlen(t), &c, err, sizeof(err)), 0);
    assert_int_equal(uw_pl_conf_count(c), 1024);
    uw_pl_conf_free(c);
    free(t);
    /* The 1,025th is refused where it is. */
    t = repeat_rules(1025, "use tcp * * *\n\n");
    expect_error(t, strlen(t),
                 "2049:1: rule 1025 of a table that holds 1024, expected at most 1024 rules (a "
                 "prefix, a port range or a glob can merge several)");
    free(t);
    t = repeat_rules(1025, "  use tcp * * *\n");
    expect_error(t, strlen(t),
                 "1025:3: rule 1025 of a table that holds 1024, expected at most 1024 rules (a "
                 "prefix, a port range or a glob can merge several)");
    free(t);

    /* Lines: 1,024 octets (without LF or CR LF) pass, 1,025 do not. */
    char line[1100];
    static const char head[] = "use sdp * * * #";
    for (size_t len = 1020; len <= 1026; len++) {
        memset(line, 'x', sizeof(line));
        memcpy(line, head, strlen(head));
        for (int crlf = 0; crlf < 2; crlf++) {
            for (int lf = 0; lf < 2; lf++) {
                char buf[1200];
                memcpy(buf, line, len);
                size_t n = len;
                if (crlf)
                    buf[n++] = '\r';
                if (lf)
                    buf[n++] = '\n';
                memcpy(buf + n, "use tcp * * *\n", 14);
                n += lf ? 14 : 0;
                if (len <= 1024) {
                    assert_int_equal(parse_n(buf, n, &c, err, sizeof(err)), 0);
                    assert_int_equal(uw_pl_conf_count(c), lf ? 2 : 1);
                    uw_pl_conf_free(c);
                } else {
                    expect_error(buf, n,
                                 "1:1025: line longer than 1024 octets, expected at most "
                                 "1024 octets per line");
                }
            }
        }
    }
    /* A long line after good ones: its own line number. */
    t = malloc(5000);
    assert_non_null(t);
    strcpy(t, "use sdp * * *\n\n");
    memset(t + 15, ' ', 3000);
    expect_error(t, 3015,
                 "3:1025: line longer than 1024 octets, expected at most 1024 octets per "
                 "line");
    free(t);
    /* A word missing from a full line: the column after the line. */
    memset(line, 'p', sizeof(line));
    memcpy(line, "use tcp * ", 10);
    expect_error(line, 1024,
                 "1:1026: missing address after the program, expected *, an IPv4 address or an "
                 "IPv6 address in brackets, with optional /PREFIX and :PORT[-PORT]");
    /* The longest rule: a 1,000-octet glob is kept whole. */
    char rule[1100] = "use tcp * ";
    size_t o = strlen(rule);
    memset(rule + o, 'p', 1000);
    strcpy(rule + o + 1000, " *");
    c = parse_ok(rule);
    char prog[1001];
    memset(prog, 'p', 1000);
    prog[1000] = '\0';
    unsigned ln;
    assert_int_equal(uw_pl_conf_match(c, UW_PL_ROLE_CLIENT, prog, NULL, 0, &ln), UW_PL_USE_TCP);
    assert_int_equal(ln, 1);
    prog[999] = '\0';
    assert_int_equal(uw_pl_conf_match(c, UW_PL_ROLE_CLIENT, prog, NULL, 0, &ln), UW_PL_USE_BOTH);
    assert_int_equal(ln, 0);
    uw_pl_conf_free(c);
}

/* The error text: truncated to the buffer, always terminated; no buffer at
 * all is fine; bad arguments. */
static void test_error_buffer(void **state)
{
    (void)state;
    uw_pl_conf *c = NULL;
    char err[16];
    memset(err, '#', sizeof(err));
    assert_int_equal(parse_n("bad", 3, &c, err, 8), -EINVAL);
    assert_string_equal(err, "1:1: un");
    assert_int_equal(err[8], '#');
    assert_int_equal(parse_n("bad", 3, &c, err, 1), -EINVAL);
    assert_string_equal(err, "");
    assert_int_equal(parse_n("bad", 3, &c, err, 0), -EINVAL);
    assert_int_equal(parse_n("bad", 3, &c, NULL, 100), -EINVAL);
    assert_int_equal(parse_n("bad", 3, &c, NULL, 0), -EINVAL);
    assert_null(c);
    /* Success clears the text. */
    strcpy(err, "old");
    assert_int_equal(parse_n("", 0, &c, err, sizeof(err)), 0);
    assert_string_equal(err, "");
    assert_int_equal(uw_pl_conf_count(c), 0);
    uw_pl_conf_free(c);
    /* NULL text of length 0 is an empty file; of length > 0 an error. */
    assert_int_equal(uw_pl_conf_parse(NULL, 0, &c, NULL, 0), 0);
    assert_int_equal(uw_pl_conf_count(c), 0);
    uw_pl_conf_free(c);
    assert_int_equal(uw_pl_conf_parse(NULL, 1, &c, NULL, 0), -EINVAL);
    assert_null(c);
    assert_int_equal(uw_pl_conf_parse("", 0, NULL, NULL, 0), -EINVAL);
    uw_pl_conf_free(NULL);
    assert_int_equal(uw_pl_conf_count(NULL), 0);
}

/* ------------------------------------------------------------------------ */
/* Matching                                                                  */

typedef struct q {
    uw_pl_role role;
    const char *prog;
    const char *addr; /* "1.2.3.4" or "::1" */
    unsigned port;
    uw_pl_use use;
    unsigned line;
} q;

static socklen_t make_addr(const char *s, unsigned port, struct sockaddr_storage *ss)
{
    memset(ss, 0, sizeof(*ss));
    struct sockaddr_in *sin = (struct sockaddr_in *)ss;
    struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)ss;
    if (inet_pton(AF_INET, s, &sin->sin_addr) == 1) {
        sin->sin_family = AF_INET;
        sin->sin_port = htons((uint16_t)port);
        return sizeof(*sin);
    }
    if (inet_pton(AF_INET6, s, &sin6->sin6_addr) != 1)
        fail_msg("bad test address %s", s);
    sin6->sin6_family = AF_INET6;
    sin6->sin6_port = htons((uint16_t)port);
    return sizeof(*sin6);
}

static void check_queries(const char *text, const q *qs, size_t n)
{
    uw_pl_conf *c = parse_ok(text);
    for (size_t i = 0; i < n; i++) {
        struct sockaddr_storage ss;
        socklen_t len = make_addr(qs[i].addr, qs[i].port, &ss);
        unsigned line = 12345;
        uw_pl_use use =
            uw_pl_conf_match(c, qs[i].role, qs[i].prog, (struct sockaddr *)&ss, len, &line);
        if (use != qs[i].use || line != qs[i].line)
            fail_msg("rules:\n%s\nquery %zu (role %d, %s, %s port %u): use %d line %u, expected "
                     "use %d line %u",
                     text, i, qs[i].role, qs[i].prog, qs[i].addr, qs[i].port, use, line, qs[i].use,
                     qs[i].line);
        /* The line is optional. */
        assert_int_equal(
            uw_pl_conf_match(c, qs[i].role, qs[i].prog, (struct sockaddr *)&ss, len, NULL),
            qs[i].use);
    }
    uw_pl_conf_free(c);
}

#define S UW_PL_ROLE_SERVER
#define C UW_PL_ROLE_CLIENT
#define SDP UW_PL_USE_SDP
#define TCP UW_PL_USE_TCP
#define BOTH UW_PL_USE_BOTH

static void test_match_roles_programs(void **state)
{
    (void)state;
    static const char rules[] = "# roles and programs\n"
                                "use tcp server nginx *\n"      /* 2 */
                                "use sdp client nginx *\n"      /* 3 */
                                "use sdp * redis-* *\n"         /* 4 */
                                "use tcp client ?url *\n"       /* 5 */
                                "use both * [mn]emcache[d] *\n" /* 6 */
                                "use tcp * *.py *\n"            /* 7 */
                                "use sdp * \\* *\n";            /* 8: a literal '*' */
    static const q qs[] = {
        {S, "nginx", "10.0.0.1", 80, TCP, 2},
        {C, "nginx", "10.0.0.1", 80, SDP, 3},
        {S, "nginx-debug", "10.0.0.1", 80, BOTH, 0},
        {S, "nginx", "::1", 80, TCP, 2},
        {S, "redis-server", "10.0.0.1", 6379, SDP, 4},
        {C, "redis-cli", "::1", 6379, SDP, 4},
        {C, "redis-", "::1", 6379, SDP, 4},
        {C, "redis", "::1", 6379, BOTH, 0},
        {C, "xredis-cli", "::1", 6379, BOTH, 0},
        {C, "curl", "192.0.2.1", 443, TCP, 5},
        {S, "curl", "192.0.2.1", 443, BOTH, 0},
        {C, "url", "192.0.2.1", 443, BOTH, 0},
        {C, "memcached", "192.0.2.1", 11211, BOTH, 6},
        {C, "nemcached", "192.0.2.1", 11211, BOTH, 6},
        {C, "memcache", "192.0.2.1", 11211, BOTH, 0},
        {S, "app.py", "192.0.2.1", 8000, TCP, 7},
        {S, ".py", "192.0.2.1", 8000, TCP, 7},
        {S, "*", "192.0.2.1", 8000, SDP, 8},
        {S, "a", "192.0.2.1", 8000, BOTH, 0},
        {S, "", "192.0.2.1", 8000, BOTH, 0},
        /* A role that is neither: only '*' rules. */
        {(uw_pl_role)0, "nginx", "10.0.0.1", 80, BOTH, 0},
        {(uw_pl_role)0, "redis-x", "10.0.0.1", 80, SDP, 4},
        {(uw_pl_role)7, "curl", "10.0.0.1", 80, BOTH, 0},
    };
    check_queries(rules, qs, N(qs));

    /* NULL program: matched as "" (only "*" and patterns that match ""). */
    uw_pl_conf *c = parse_ok("use tcp * x *\nuse sdp * * *");
    unsigned ln;
    assert_int_equal(uw_pl_conf_match(c, S, NULL, NULL, 0, &ln), SDP);
    assert_int_equal(ln, 2);
    uw_pl_conf_free(c);
}

static void test_match_ipv4(void **state)
{
    (void)state;
    static const char rules[] = "use tcp * * 10.0.0.0/8\n"           /* 1 */
                                "use sdp * * 192.0.2.128/25:80\n"    /* 2 */
                                "use both * * 192.0.2.0/24\n"        /* 3 */
                                "use sdp * * 198.51.100.7/32\n"      /* 4 */
                                "use tcp * * 198.51.100.6/31\n"      /* 5 */
                                "use sdp * * 172.16.0.0/12\n"        /* 6 */
                                "use tcp * * 203.0.113.77\n"         /* 7 */
                                "use sdp * * 100.64.0.0/10:1-1023\n" /* 8 */
                                "use tcp * * 0.0.0.0/1\n";           /* 9 */
    static const q qs[] = {
        {C, "p", "10.0.0.0", 1, TCP, 1},
        {C, "p", "10.255.255.255", 1, TCP, 1},
        {C, "p", "11.0.0.0", 1, TCP, 9}, /* 0.0.0.0/1: everything below 128. */
        {C, "p", "9.255.255.255", 1, TCP, 9},
        {C, "p", "192.0.2.128", 80, SDP, 2},
        {C, "p", "192.0.2.255", 80, SDP, 2},
        {C, "p", "192.0.2.127", 80, BOTH, 3},
        {C, "p", "192.0.2.200", 81, BOTH, 3},
        {C, "p", "192.0.2.0", 81, BOTH, 3},
        {C, "p", "192.0.3.0", 81, BOTH, 0},
        {C, "p", "198.51.100.7", 5, SDP, 4},
        {C, "p", "198.51.100.6", 5, TCP, 5},
        {C, "p", "198.51.100.1", 5, BOTH, 0},
        {C, "p", "198.51.100.2", 5, BOTH, 0},
        {C, "p", "172.16.0.1", 5, SDP, 6},
        {C, "p", "172.31.255.255", 5, SDP, 6},
        {C, "p", "172.32.0.0", 5, BOTH, 0},
        {C, "p", "172.15.255.255", 5, BOTH, 0},
        {C, "p", "203.0.113.77", 0, TCP, 7},
        {C, "p", "203.0.113.76", 0, BOTH, 0},
        {C, "p", "203.0.113.78", 0, BOTH, 0},
        {C, "p", "100.64.0.1", 1, SDP, 8},
        {C, "p", "100.127.255.255", 1023, SDP, 8},
        {C, "p", "100.64.0.1", 0, TCP, 9}, /* port out of rule 8's range */
        {C, "p", "100.64.0.1", 1024, TCP, 9},
        {C, "p", "200.64.0.1", 1024, BOTH, 0},
        {C, "p", "100.128.0.0", 5, TCP, 9}, /* not in /10: next rule */
        {C, "p", "128.0.0.0", 5, BOTH, 0},
        /* IPv6 addresses never match IPv4 rules, except v4-mapped ones. */
        {C, "p", "::a00:1", 5, BOTH, 0},     /* ::10.0.0.1, v4-compatible: not mapped */
        {C, "p", "::ffff:a00:1", 5, TCP, 1}, /* ::ffff:10.0.0.1 */
        {C, "p", "::ffff:192.0.2.130", 80, SDP, 2},
        {C, "p", "::ffff:192.0.2.130", 8080, BOTH, 3},
        {C, "p", "::ffff:128.0.0.1", 8080, BOTH, 0},
        {C, "p", "::fffe:a00:1", 5, BOTH, 0},
        {C, "p", "1::ffff:a00:1", 5, BOTH, 0},
    };
    check_queries(rules, qs, N(qs));
    static const q all[] = {
        {C, "p", "0.0.0.0", 0, TCP, 1},
        {C, "p", "255.255.255.255", 65535, TCP, 1},
        {C, "p", "::ffff:1.2.3.4", 9, TCP, 1},
        {C, "p", "::1", 9, BOTH, 0},
        {C, "p", "::", 9, BOTH, 0},
    };
    check_queries("use tcp * * 0.0.0.0/0", all, N(all));
}

static void test_match_ipv6(void **state)
{
    (void)state;
    static const char rules[] = "use tcp * * [::1]\n"                 /* 1 */
                                "use sdp * * [2001:db8::]/32:443\n"   /* 2 */
                                "use tcp * * [2001:db8:8000::]/33\n"  /* 3 */
                                "use sdp * * [fe80::]/10\n"           /* 4 */
                                "use tcp * * [fd00::1:2]/127\n"       /* 5 */
                                "use sdp * * [::ffff:10.0.0.0]/104\n" /* 6: v6 rule, mapped */
                                "use both * * [2001:db8::]/31\n"      /* 7 */
                                "use tcp * * [::]/0:7-9\n";           /* 8 */
    static const q qs[] = {
        {C, "p", "::1", 1, TCP, 1},
        {C, "p", "::2", 1, BOTH, 0},
        {C, "p", "::1", 8, TCP, 1},
        {C, "p", "::2", 8, TCP, 8},
        {C, "p", "::", 7, TCP, 8},
        {C, "p", "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", 9, TCP, 8},
        {C, "p", "::", 10, BOTH, 0},
        {C, "p", "2001:db8::1", 443, SDP, 2},
        {C, "p", "2001:db8:ffff:ffff:ffff:ffff:ffff:ffff", 443, SDP, 2},
        {C, "p", "2001:db8:8000::", 444, TCP, 3},
        {C, "p", "2001:db8:7fff::", 444, BOTH, 7},
        {C, "p", "2001:db9::", 444, BOTH, 7},
        {C, "p", "2001:dba::", 444, BOTH, 0},
        {C, "p", "fe80::1", 1, SDP, 4},
        {C, "p", "febf:ffff::1", 1, SDP, 4},
        {C, "p", "fec0::1", 1, BOTH, 0},
        {C, "p", "fd00::1:2", 1, TCP, 5},
        {C, "p", "fd00::1:3", 1, TCP, 5},
        {C, "p", "fd00::1:4", 1, BOTH, 0},
        {C, "p", "fd00::1:1", 1, BOTH, 0},
        {C, "p", "::ffff:10.1.2.3", 1, SDP, 6},
        {C, "p", "::ffff:11.1.2.3", 1, BOTH, 0},
        /* An AF_INET address never matches an IPv6 rule, [::]/0 included. */
        {C, "p", "10.1.2.3", 1, BOTH, 0},
        {C, "p", "10.1.2.3", 8, BOTH, 0},
    };
    check_queries(rules, qs, N(qs));
    static const q all[] = {
        {C, "p", "::", 0, TCP, 1},
        {C, "p", "::ffff:1.2.3.4", 0, TCP, 1},
        {C, "p", "1.2.3.4", 0, BOTH, 0},
    };
    check_queries("use tcp * * [::]/0", all, N(all));
    /* Every prefix length against an address and its neighbour one bit
     * after the prefix: /0 to /128 (and /0 to /32 for IPv4). */
    for (unsigned len = 0; len <= 128; len++) {
        char text[96];
        snprintf(text, sizeof(text), "use tcp * * [2001:db8:aaaa:5555:ffff:0:ffff:1]/%u", len);
        uw_pl_conf *c = parse_ok(text);
        uint8_t a[16];
        assert_int_equal(inet_pton(AF_INET6, "2001:db8:aaaa:5555:ffff:0:ffff:1", a), 1);
        for (unsigned flip = 0; flip < 128; flip++) {
            struct sockaddr_in6 s6;
            memset(&s6, 0, sizeof(s6));
            s6.sin6_family = AF_INET6;
            memcpy(&s6.sin6_addr, a, 16);
            ((uint8_t *)&s6.sin6_addr)[flip / 8] ^= (uint8_t)(0x80 >> (flip % 8));
            uw_pl_use want = flip >= len ? TCP : BOTH;
            assert_int_equal(uw_pl_conf_match(c, C, "p", (struct sockaddr *)&s6, sizeof(s6), NULL),
                             want);
        }
        uw_pl_conf_free(c);
    }
    for (unsigned len = 0; len <= 32; len++) {
        char text[64];
        snprintf(text, sizeof(text), "use tcp * * 203.0.113.201/%u", len);
        uw_pl_conf *c = parse_ok(text);
        for (unsigned flip = 0; flip < 32; flip++) {
            struct sockaddr_in s4;
            memset(&s4, 0, sizeof(s4));
            s4.sin_family = AF_INET;
            assert_int_equal(inet_pton(AF_INET, "203.0.113.201", &s4.sin_addr), 1);
            ((uint8_t *)&s4.sin_addr)[flip / 8] ^= (uint8_t)(0x80 >> (flip % 8));
            uw_pl_use want = flip >= len ? TCP : BOTH;
            assert_int_equal(uw_pl_conf_match(c, C, "p", (struct sockaddr *)&s4, sizeof(s4), NULL),
                             want);
            /* The same through a v4-mapped IPv6 address. */
            struct sockaddr_in6 s6;
            memset(&s6, 0, sizeof(s6));
            s6.sin6_family = AF_INET6;
            ((uint8_t *)&s6.sin6_addr)[10] = 0xff;
            ((uint8_t *)&s6.sin6_addr)[11] = 0xff;
            memcpy((uint8_t *)&s6.sin6_addr + 12, &s4.sin_addr, 4);
            assert_int_equal(uw_pl_conf_match(c, C, "p", (struct sockaddr *)&s6, sizeof(s6), NULL),
                             want);
        }
        uw_pl_conf_free(c);
    }
}

static void test_match_ports_wildcards(void **state)
{
    (void)state;
    static const char rules[] = "use tcp * * *:22\n"             /* 1 */
                                "use sdp * * *:5000-5999\n"      /* 2 */
                                "use tcp * * 10.0.0.0/8:0\n"     /* 3 */
                                "use both * * *:65535\n"         /* 4 */
                                "use sdp * * [::1]:6000-6001\n"; /* 5 */
    static const q qs[] = {
        {C, "p", "1.2.3.4", 22, TCP, 1},      {C, "p", "::1", 22, TCP, 1},
        {C, "p", "1.2.3.4", 21, BOTH, 0},     {C, "p", "1.2.3.4", 23, BOTH, 0},
        {C, "p", "1.2.3.4", 4999, BOTH, 0},   {C, "p", "1.2.3.4", 5000, SDP, 2},
        {C, "p", "::", 5500, SDP, 2},         {C, "p", "1.2.3.4", 5999, SDP, 2},
        {C, "p", "1.2.3.4", 6000, BOTH, 0},   {C, "p", "10.9.9.9", 0, TCP, 3},
        {C, "p", "10.9.9.9", 1, BOTH, 0},     {C, "p", "11.9.9.9", 0, BOTH, 0},
        {C, "p", "11.9.9.9", 65535, BOTH, 4}, {C, "p", "::1", 5999, SDP, 2},
        {C, "p", "::1", 6000, SDP, 5},        {C, "p", "::1", 6001, SDP, 5},
        {C, "p", "::1", 6002, BOTH, 0},       {C, "p", "::2", 6001, BOTH, 0},
    };
    check_queries(rules, qs, N(qs));
}

/* First match wins, whatever comes after; later rules still decide what the
 * earlier ones leave. */
static void test_first_match_wins(void **state)
{
    (void)state;
    static const char rules[] = "use tcp client curl 192.0.2.1:80\n" /* 1 */
                                "use sdp * * 192.0.2.0/24:80\n"      /* 2 */
                                "use both server * *\n"              /* 3 */
                                "use tcp * curl *\n"                 /* 4 */
                                "use sdp * * *\n"                    /* 5 */
                                "use tcp * * *\n";                   /* 6: never reached */
    static const q qs[] = {
        {C, "curl", "192.0.2.1", 80, TCP, 1}, {C, "wget", "192.0.2.1", 80, SDP, 2},
        {S, "curl", "192.0.2.1", 80, SDP, 2}, {S, "curl", "192.0.2.1", 81, BOTH, 3},
        {C, "curl", "192.0.2.1", 81, TCP, 4}, {C, "curl", "::1", 81, TCP, 4},
        {C, "wget", "::1", 81, SDP, 5},       {C, "wget", "::ffff:192.0.2.9", 80, SDP, 2},
    };
    check_queries(rules, qs, N(qs));
    /* The same rules reversed: the catch-all first decides everything. */
    static const q rev[] = {
        {C, "curl", "192.0.2.1", 80, TCP, 1},
        {S, "x", "::", 1, TCP, 1},
    };
    check_queries("use tcp * * *\nuse sdp client curl 192.0.2.1:80\n", rev, N(rev));
    /* Comments and blank lines count in the line numbers. */
    static const q ln[] = {{C, "x", "::", 1, SDP, 5}};
    check_queries("# a\n\n  # b\n\nuse sdp * * *   # e\n", ln, N(ln));
}

/* No rules, no table, no usable address. */
static void test_match_defaults(void **state)
{
    (void)state;
    struct sockaddr_storage ss;
    socklen_t len = make_addr("192.0.2.1", 80, &ss);
    unsigned ln = 99;
    assert_int_equal(uw_pl_conf_match(NULL, C, "p", (struct sockaddr *)&ss, len, &ln), BOTH);
    assert_int_equal(ln, 0);
    uw_pl_conf_match(NULL, C, "p", NULL, 0, NULL);

    uw_pl_conf *c = parse_ok("# nothing\n");
    ln = 99;
    assert_int_equal(uw_pl_conf_match(c, S, "p", (struct sockaddr *)&ss, len, &ln), BOTH);
    assert_int_equal(ln, 0);
    uw_pl_conf_free(c);

    /* An address the rules cannot read (NULL, short, another family) only
     * matches a rule for every address and every port. */
    c = parse_ok("use tcp * * 192.0.2.0/24\nuse sdp * * *:80\nuse tcp * * [::]/0\n"
                 "use both * x *\nuse sdp * * *\n");
    ln = 99;
    assert_int_equal(uw_pl_conf_match(c, C, "p", NULL, 0, &ln), SDP);
    assert_int_equal(ln, 5);
    assert_int_equal(uw_pl_conf_match(c, C, "p", (struct sockaddr *)&ss, len - 1, &ln), SDP);
    assert_int_equal(ln, 5);
    struct sockaddr_storage s6;
    socklen_t len6 = make_addr("::1", 80, &s6);
    assert_int_equal(uw_pl_conf_match(c, C, "p", (struct sockaddr *)&s6, len6 - 1, &ln), SDP);
    assert_int_equal(ln, 5);
    struct sockaddr_storage un;
    memset(&un, 0, sizeof(un));
    un.ss_family = AF_UNIX;
    assert_int_equal(uw_pl_conf_match(c, C, "x", (struct sockaddr *)&un, sizeof(un), &ln), BOTH);
    assert_int_equal(ln, 4);
    assert_int_equal(uw_pl_conf_match(c, C, "p", (struct sockaddr *)&ss, len, &ln), TCP);
    assert_int_equal(ln, 1);
    assert_int_equal(uw_pl_conf_match(c, C, "p", (struct sockaddr *)&s6, len6, &ln), SDP);
    assert_int_equal(ln, 2);
    uw_pl_conf_free(c);
}

/* A table is immutable: matching does not depend on what came before, and
 * the text can go away after parsing. */
static void test_text_not_kept(void **state)
{
    (void)state;
    char *text = strdup("use sdp * prog 10.0.0.0/8\n");
    assert_non_null(text);
    uw_pl_conf *c = NULL;
    assert_int_equal(uw_pl_conf_parse(text, strlen(text), &c, NULL, 0), 0);
    memset(text, 'z', strlen(text));
    free(text);
    struct sockaddr_storage ss;
    socklen_t len = make_addr("10.1.1.1", 1, &ss);
    for (int i = 0; i < 3; i++)
        assert_int_equal(uw_pl_conf_match(c, S, "prog", (struct sockaddr *)&ss, len, NULL), SDP);
    uw_pl_conf_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_accepted),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_limits),
        cmocka_unit_test(test_error_buffer),
        cmocka_unit_test(test_match_roles_programs),
        cmocka_unit_test(test_match_ipv4),
        cmocka_unit_test(test_match_ipv6),
        cmocka_unit_test(test_match_ports_wildcards),
        cmocka_unit_test(test_first_match_wins),
        cmocka_unit_test(test_match_defaults),
        cmocka_unit_test(test_text_not_kept),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
