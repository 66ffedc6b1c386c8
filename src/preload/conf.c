/* The preload library's rules (conf.h): a sans-I/O parser and a pure match
 * function.
 *
 * The parser reads the text twice with the same code: the first pass checks
 * every line and counts the rules and the octets their program globs need;
 * the second fills one allocation of exactly that size. So the only
 * allocation is bounded by the input (len plus a fixed record per rule, at
 * most 1,024 rules), and a rejected file allocates nothing.
 *
 * Everything reads through a cursor bounded by the end of the current token,
 * which is bounded by the end of the line, which is bounded by len: no read
 * goes past the text, and the text need not end in NUL. Addresses are parsed
 * here rather than by inet_pton(3) so that an error can say which character
 * is wrong and why. */
#include "conf.h"

#include <errno.h>
#include <fnmatch.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_RULES 1024
#define MAX_LINE 1024 /* octets per line, without the LF (or CR LF) */
#define QUOTE_BUF 48  /* an error message quotes at most 44 octets of a word */

enum { FAM_ANY = 0, FAM_V4 = 4, FAM_V6 = 6 };

typedef struct rule {
    unsigned line;
    uint8_t use;      /* uw_pl_use */
    uint8_t role;     /* uw_pl_role, or 0 for '*' */
    uint8_t family;   /* FAM_* */
    uint8_t prefix;   /* bits of addr that must match (IPv4: of the 4 octets) */
    bool any_program; /* the glob is "*": no fnmatch needed */
    uint16_t port_lo, port_hi;
    uint8_t addr[16]; /* host bits beyond the prefix cleared */
    const char *glob; /* NUL-terminated, in the table's string area */
} rule;

struct uw_pl_conf {
    size_t count;
    rule *rules;
    char *strings;
    /* The rules and the globs follow in the same allocation. */
};

/* ------------------------------------------------------------------------ */
/* Errors                                                                    */

typedef struct perr {
    char *buf;
    size_t cap;
} perr;

/* Writes a token for a message into dst (cap >= 8): printable ASCII as is,
 * any other octet as \xNN so that the message stays one line of text
 * whatever the file holds, and "..." when the token does not fit. */
static void quote(char *dst, size_t cap, const char *s, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    size_t o = 0, i = 0;
    for (; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        bool plain = ch >= 0x20 && ch < 0x7f && ch != '\\';
        if (o + (plain ? 1 : 4) + 4 > cap) /* room for "..." and the NUL */
            break;
        if (plain) {
            dst[o++] = (char)ch;
        } else {
            dst[o++] = '\\';
            dst[o++] = 'x';
            dst[o++] = hex[ch >> 4];
            dst[o++] = hex[ch & 15];
        }
    }
    if (i < n) {
        memcpy(dst + o, "...", 3);
        o += 3;
    }
    dst[o] = '\0';
}

__attribute__((format(printf, 4, 5))) static int fail(perr *e, unsigned line, size_t col,
                                                      const char *fmt, ...)
{
    if (e->buf && e->cap) {
        int n = snprintf(e->buf, e->cap, "%u:%zu: ", line, col);
        if (n >= 0 && (size_t)n < e->cap) {
            va_list ap;
            va_start(ap, fmt);
            vsnprintf(e->buf + n, e->cap - (size_t)n, fmt, ap);
            va_end(ap);
        }
    }
    return -EINVAL;
}

/* ------------------------------------------------------------------------ */
/* Tokens                                                                    */

/* A token: octets [p, end) of the line, starting at 1-based column col. */
typedef struct tok {
    const char *p, *end;
    size_t col;
} tok;

static size_t tok_len(const tok *t)
{
    return (size_t)(t->end - t->p);
}

static bool tok_is(const tok *t, const char *word)
{
    size_t n = strlen(word);
    return tok_len(t) == n && memcmp(t->p, word, n) == 0;
}

/* Parsing state of one line. */
typedef struct lctx {
    perr *e;
    unsigned line;
    const char *start; /* column 1 */
} lctx;

static size_t col_of(const lctx *l, const char *p)
{
    return (size_t)(p - l->start) + 1;
}

static bool is_digit(char c)
{
    return c >= '0' && c <= '9';
}

static int hex_val(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* The character at p for a message: 'x', or "nothing" at the end. */
static void what_at(char *dst, size_t cap, const char *p, const char *end)
{
    if (p >= end) {
        snprintf(dst, cap, "nothing");
    } else {
        char q[8];
        quote(q, sizeof(q), p, 1);
        snprintf(dst, cap, "'%s'", q);
    }
}

/* ------------------------------------------------------------------------ */
/* Addresses                                                                 */

/* Decimal digits at *p (bounded by end) into *v; *many when there are more
 * than 9 after any leading zeros (the value is then only "too big").
 * Returns how many digits there were. */
static size_t read_decimal(const char **p, const char *end, unsigned long *v, bool *many)
{
    size_t n = 0, sig = 0;
    *v = 0;
    *many = false;
    while (*p < end && is_digit(**p)) {
        if (sig || **p != '0')
            sig++;
        if (sig <= 9)
            *v = *v * 10 + (unsigned long)(**p - '0');
        else
            *many = true;
        (*p)++;
        n++;
    }
    return n;
}

/* IPv4 dotted quad at *p: four decimal numbers 0-255 without leading zeros
 * (a leading zero means octal to inet_aton(3) and decimal to inet_pton(3),
 * so it is refused rather than guessed). Stops after the fourth number. */
static int parse_v4(lctx *l, const char **p, const char *end, uint8_t out[4])
{
    for (int i = 0; i < 4; i++) {
        if (i > 0) {
            if (*p >= end || **p != '.')
                return fail(l->e, l->line, col_of(l, *p),
                            "IPv4 address with %d number%s, expected four numbers 0-255 "
                            "separated by dots, such as 192.0.2.1",
                            i, i == 1 ? "" : "s");
            (*p)++;
        }
        const char *d = *p;
        unsigned long v;
        bool many;
        size_t n = read_decimal(p, end, &v, &many);
        if (n == 0) {
            char w[32];
            what_at(w, sizeof(w), *p, end);
            return fail(l->e, l->line, col_of(l, *p),
                        "%s %s in an IPv4 address, expected a number 0-255", w,
                        *p >= end ? "after '.'" : "where a number belongs");
        }
        char q[QUOTE_BUF];
        quote(q, sizeof(q), d, n);
        if (many || v > 255)
            return fail(l->e, l->line, col_of(l, d),
                        "IPv4 number %s is above 255, expected a number 0-255", q);
        if (n > 1 && *d == '0')
            return fail(l->e, l->line, col_of(l, d),
                        "IPv4 number %s has a leading zero, expected a decimal number "
                        "without one",
                        q);
        out[i] = (uint8_t)v;
    }
    return 0;
}

/* The inside of [...]: RFC 4291 2.2 text forms (eight groups of 1-4 hex
 * digits, one "::" for one or more zero groups, an IPv4 tail in the last 32
 * bits). No zone: a rule names addresses, not interfaces. */
static int parse_v6(lctx *l, const char *s, const char *end, uint8_t out[16])
{
    uint16_t g[8];
    int n = 0;    /* groups so far (an IPv4 tail counts 2) */
    int gap = -1; /* groups before the "::" */
    const char *p = s;
    const char *gap_at = NULL;

    if (p == end)
        return fail(l->e, l->line, col_of(l, p),
                    "empty brackets, expected an IPv6 address such as [::1] or [fd00::]");
    if (*p == ':') {
        if (p + 1 >= end || p[1] != ':')
            return fail(l->e, l->line, col_of(l, p),
                        "IPv6 address starts with a single ':', expected '::' or a group of "
                        "hex digits");
        gap = 0;
        gap_at = p;
        p += 2;
    }
    while (p < end) {
        const char *gs = p;
        unsigned v = 0;
        size_t k = 0;
        while (p < end && hex_val(*p) >= 0) {
            if (k < 4)
                v = v * 16 + (unsigned)hex_val(*p);
            p++;
            k++;
        }
        if (p < end && *p == '.') {
            /* IPv4 tail: the group read so far was its first number. */
            if (n > 6) {
                return fail(l->e, l->line, col_of(l, gs),
                            "no room for an IPv4 part after %d groups, expected at most 6 "
                            "groups before it",
                            n);
            }
            uint8_t v4[4];
            p = gs;
            int rc = parse_v4(l, &p, end, v4);
            if (rc)
                return rc;
            if (p < end) {
                char w[32];
                what_at(w, sizeof(w), p, end);
                return fail(l->e, l->line, col_of(l, p),
                            "unexpected %s after the IPv4 part of an IPv6 address, expected ']'",
                            w);
            }
            g[n++] = (uint16_t)(v4[0] << 8 | v4[1]);
            g[n++] = (uint16_t)(v4[2] << 8 | v4[3]);
            break;
        }
        if (k == 0) {
            char w[32];
            what_at(w, sizeof(w), p, end);
            if (*p == '%')
                return fail(l->e, l->line, col_of(l, p),
                            "IPv6 zone (%%...) in a rule, expected an address without a zone");
            return fail(l->e, l->line, col_of(l, p),
                        "unexpected %s in an IPv6 address, expected a group of hex digits", w);
        }
        if (k > 4) {
            char q[QUOTE_BUF];
            quote(q, sizeof(q), gs, k);
            return fail(l->e, l->line, col_of(l, gs),
                        "IPv6 group %s has %zu hex digits, expected at most 4", q, k);
        }
        if (n == 8)
            return fail(l->e, l->line, col_of(l, gs),
                        "IPv6 address with more than 8 groups, expected 8 groups or fewer "
                        "with '::'");
        g[n++] = (uint16_t)v;
        if (p == end)
            break;
        if (*p != ':') {
            char w[32];
            what_at(w, sizeof(w), p, end);
            if (*p == '%')
                return fail(l->e, l->line, col_of(l, p),
                            "IPv6 zone (%%...) in a rule, expected an address without a zone");
            return fail(l->e, l->line, col_of(l, p),
                        "unexpected %s in an IPv6 address, expected ':' or ']'", w);
        }
        p++;
        if (p < end && *p == ':') {
            if (gap >= 0)
                return fail(l->e, l->line, col_of(l, p - 1),
                            "second '::' in an IPv6 address (the first is at column %zu), "
                            "expected at most one",
                            col_of(l, gap_at));
            gap = n;
            gap_at = p - 1;
            p++;
        } else if (p == end) {
            return fail(l->e, l->line, col_of(l, p),
                        "IPv6 address ends with a single ':', expected a group of hex digits "
                        "after it");
        }
    }
    if (gap < 0 && n != 8)
        return fail(l->e, l->line, col_of(l, end),
                    "IPv6 address with %d group%s, expected 8 groups or fewer with '::'", n,
                    n == 1 ? "" : "s");
    if (gap >= 0 && n == 8)
        return fail(l->e, l->line, col_of(l, gap_at),
                    "'::' in an IPv6 address that already has 8 groups, expected 7 groups or "
                    "fewer with '::'");
    int zeros = 8 - n, o = 0;
    memset(out, 0, 16);
    for (int i = 0; i < n; i++) {
        if (i == gap)
            o += zeros;
        out[2 * o] = (uint8_t)(g[i] >> 8);
        out[2 * o + 1] = (uint8_t)g[i];
        o++;
    }
    return 0;
}

/* A port number: decimal 0-65535. */
static int parse_port(lctx *l, const char **p, const char *end, const char *after, uint16_t *out)
{
    const char *d = *p;
    unsigned long v;
    bool many;
    size_t n = read_decimal(p, end, &v, &many);
    if (n == 0) {
        char w[32];
        what_at(w, sizeof(w), *p, end);
        return fail(l->e, l->line, col_of(l, *p), "%s after '%s', expected a port number 0-65535",
                    w, after);
    }
    if (many || v > 65535) {
        char q[QUOTE_BUF];
        quote(q, sizeof(q), d, n);
        return fail(l->e, l->line, col_of(l, d), "port %s is above 65535, expected 0-65535", q);
    }
    *out = (uint16_t)v;
    return 0;
}

/* True when the token (no brackets) looks like an IPv6 address: two colons
 * or more. */
static bool looks_v6(const tok *t)
{
    int colons = 0;
    for (const char *p = t->p; p < t->end; p++)
        colons += *p == ':';
    return colons >= 2;
}

/* ADDR[/PREFIX][:PORT[-PORT]] with ADDR '*', IPv4 or [IPv6]. */
static int parse_addr(lctx *l, const tok *t, rule *r)
{
    const char *p = t->p, *end = t->end;
    int rc;

    memset(r->addr, 0, sizeof(r->addr));
    r->port_lo = 0;
    r->port_hi = 65535;
    if (*p == '*') {
        p++;
        r->family = FAM_ANY;
        r->prefix = 0;
        if (p < end && *p == '/')
            return fail(l->e, l->line, col_of(l, p),
                        "prefix after '*', which already means every address, expected '*' "
                        "alone or '*:PORT'");
    } else if (*p == '[') {
        const char *close = memchr(p, ']', tok_len(t));
        if (!close)
            return fail(l->e, l->line, col_of(l, end),
                        "IPv6 address without its closing ']', expected [ADDRESS] such as "
                        "[2001:db8::1]");
        rc = parse_v6(l, p + 1, close, r->addr);
        if (rc)
            return rc;
        r->family = FAM_V6;
        r->prefix = 128;
        p = close + 1;
    } else if (is_digit(*p)) {
        const char *s = p;
        rc = parse_v4(l, &p, end, r->addr);
        if (rc) {
            if (looks_v6(t))
                return fail(l->e, l->line, col_of(l, s),
                            "IPv6 address without brackets, expected it in brackets such as "
                            "[2001:db8::1] or [::1]:80");
            return rc;
        }
        r->family = FAM_V4;
        r->prefix = 32;
    } else {
        char q[QUOTE_BUF];
        quote(q, sizeof(q), t->p, tok_len(t));
        if (looks_v6(t))
            return fail(l->e, l->line, col_of(l, p),
                        "IPv6 address without brackets, expected it in brackets such as "
                        "[2001:db8::1] or [::1]:80");
        return fail(l->e, l->line, col_of(l, p),
                    "unknown address '%s', expected '*', an IPv4 address such as 10.0.0.0/8 "
                    "or an IPv6 address in brackets such as [fd00::]/8 (names are not "
                    "resolved)",
                    q);
    }

    if (p < end && *p == '/') {
        unsigned max = r->family == FAM_V4 ? 32 : 128;
        const char *d = ++p;
        unsigned long v;
        bool many;
        size_t n = read_decimal(&p, end, &v, &many);
        if (n == 0) {
            char w[32];
            what_at(w, sizeof(w), p, end);
            return fail(l->e, l->line, col_of(l, p), "%s after '/', expected a prefix length 0-%u",
                        w, max);
        }
        if (many || v > max) {
            char q[QUOTE_BUF];
            quote(q, sizeof(q), d, n);
            return fail(l->e, l->line, col_of(l, d),
                        "prefix length %s is too long for an %s address, expected 0-%u", q,
                        max == 32 ? "IPv4" : "IPv6", max);
        }
        r->prefix = (uint8_t)v;
    }
    if (p < end && *p == ':') {
        p++;
        rc = parse_port(l, &p, end, ":", &r->port_lo);
        if (rc)
            return rc;
        r->port_hi = r->port_lo;
        if (p < end && *p == '-') {
            const char *dash = p++;
            rc = parse_port(l, &p, end, "-", &r->port_hi);
            if (rc)
                return rc;
            if (r->port_hi < r->port_lo)
                return fail(l->e, l->line, col_of(l, dash + 1),
                            "port range %u-%u ends below its start, expected LOW-HIGH with "
                            "LOW <= HIGH",
                            r->port_lo, r->port_hi);
        }
    }
    if (p < end) {
        char w[32];
        what_at(w, sizeof(w), p, end);
        return fail(l->e, l->line, col_of(l, p),
                    "unexpected %s in the address, expected /PREFIX, :PORT, :PORT-PORT or a "
                    "space",
                    w);
    }
    /* Keep only the network part, so that matching compares whole octets
     * and one partial octet. (10.1.2.3/8 is accepted as 10.0.0.0/8.) */
    unsigned bytes = r->family == FAM_V4 ? 4 : 16;
    for (unsigned i = 0; i < bytes; i++) {
        unsigned bit = i * 8;
        if (bit >= r->prefix)
            r->addr[i] = 0;
        else if (r->prefix - bit < 8)
            r->addr[i] &= (uint8_t)(0xff << (8 - (r->prefix - bit)));
    }
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Lines                                                                     */

/* What a line holds when it is a rule. */
typedef struct lres {
    rule r;
    const char *glob; /* into the line, glob_len octets, not NUL-terminated */
    size_t glob_len;
    size_t col; /* column of "use" */
} lres;

#define SYNTAX "use sdp|tcp|both server|client|* PROGRAM-GLOB ADDR[/PREFIX][:PORT[-PORT]]"

/* One line without its LF (and without the CR before it). Returns 1 with
 * *out filled when the line is a rule, 0 when it is blank or a comment, or
 * -EINVAL. */
static int parse_line(lctx *l, const char *s, size_t n, lres *out)
{
    const char *end = s + n;
    const char *hash = memchr(s, '#', n);
    if (hash)
        end = hash; /* a comment runs to the end of the line, whatever it holds */
    /* Outside comments: printable text, tabs separating like spaces. Octets
     * from 0x80 up pass (a program's name may be UTF-8). */
    for (const char *p = s; p < end; p++) {
        unsigned char c = (unsigned char)*p;
        if ((c < 0x20 && c != '\t') || c == 0x7f) {
            const char *what = c == '\r' ? "carriage return inside a line"
                               : c == 0  ? "NUL octet"
                                         : "control character";
            return fail(l->e, l->line, col_of(l, p), "%s (0x%02x), expected printable text", what,
                        c);
        }
    }

    tok t[5];
    int nt = 0;
    const char *p = s;
    char q[QUOTE_BUF];
    for (;;) {
        while (p < end && (*p == ' ' || *p == '\t'))
            p++;
        if (p == end)
            break;
        const char *b = p;
        while (p < end && *p != ' ' && *p != '\t')
            p++;
        if (nt == 5) {
            quote(q, sizeof(q), b, (size_t)(p - b));
            return fail(l->e, l->line, col_of(l, b),
                        "unexpected '%s' after the address, expected the end of the rule or "
                        "a # comment",
                        q);
        }
        t[nt].p = b;
        t[nt].end = p;
        t[nt].col = col_of(l, b);
        nt++;
    }
    if (nt == 0)
        return 0;
    /* Where a missing word would start: one column after the last one. */
    size_t next_col = col_of(l, t[nt - 1].end) + 1;
    rule *r = &out->r;

    if (!tok_is(&t[0], "use")) {
        quote(q, sizeof(q), t[0].p, tok_len(&t[0]));
        return fail(l->e, l->line, t[0].col,
                    "unknown keyword '%s', expected 'use' (a rule reads: " SYNTAX ")", q);
    }
    if (nt < 2)
        return fail(l->e, l->line, next_col,
                    "missing transport after 'use', expected sdp, tcp or both");
    if (tok_is(&t[1], "sdp")) {
        r->use = UW_PL_USE_SDP;
    } else if (tok_is(&t[1], "tcp")) {
        r->use = UW_PL_USE_TCP;
    } else if (tok_is(&t[1], "both")) {
        r->use = UW_PL_USE_BOTH;
    } else {
        quote(q, sizeof(q), t[1].p, tok_len(&t[1]));
        return fail(l->e, l->line, t[1].col, "unknown transport '%s', expected sdp, tcp or both",
                    q);
    }
    if (nt < 3)
        return fail(l->e, l->line, next_col,
                    "missing role after the transport, expected server, client or *");
    if (tok_is(&t[2], "server")) {
        r->role = UW_PL_ROLE_SERVER;
    } else if (tok_is(&t[2], "client")) {
        r->role = UW_PL_ROLE_CLIENT;
    } else if (tok_is(&t[2], "*")) {
        r->role = 0;
    } else {
        quote(q, sizeof(q), t[2].p, tok_len(&t[2]));
        return fail(l->e, l->line, t[2].col, "unknown role '%s', expected server, client or *", q);
    }
    if (nt < 4)
        return fail(l->e, l->line, next_col,
                    "missing program after the role, expected a program name or an fnmatch "
                    "pattern such as * or redis-*");
    const tok *prog = &t[3];
    const char *slash = memchr(prog->p, '/', tok_len(prog));
    if (slash) {
        quote(q, sizeof(q), prog->p, tok_len(prog));
        return fail(l->e, l->line, col_of(l, slash),
                    "'/' in the program pattern '%s', expected a name without a directory "
                    "(the program's short name is matched, such as nginx)",
                    q);
    }
    if (nt < 5)
        return fail(l->e, l->line, next_col,
                    "missing address after the program, expected *, an IPv4 address or an "
                    "IPv6 address in brackets, with optional /PREFIX and :PORT[-PORT]");
    int rc = parse_addr(l, &t[4], r);
    if (rc)
        return rc;
    out->glob = prog->p;
    out->glob_len = tok_len(prog);
    r->any_program = tok_is(prog, "*");
    out->col = t[0].col;
    return 1;
}

/* Both passes: with c NULL, checks and counts rules and glob octets; with c,
 * fills it (the text is then known to be good). */
static int parse_all(const char *text, size_t len, perr *e, uw_pl_conf *c, size_t *nrules,
                     size_t *nglob)
{
    size_t pos = 0;
    unsigned line = 0;
    *nrules = 0;
    *nglob = 0;
    while (pos < len) {
        line++;
        const char *s = text + pos;
        size_t rest = len - pos;
        /* Look no further than a line may run (plus CR LF): a long line
         * is an error found without scanning the rest of the text. */
        size_t window = rest < MAX_LINE + 2 ? rest : MAX_LINE + 2;
        const char *lf = memchr(s, '\n', window);
        size_t n = lf ? (size_t)(lf - s) : window;
        size_t next = lf ? pos + n + 1 : len;
        if (n > 0 && s[n - 1] == '\r')
            n--;
        if (n > MAX_LINE)
            return fail(e, line, MAX_LINE + 1,
                        "line longer than %d octets, expected at most %d octets per line", MAX_LINE,
                        MAX_LINE);
        lctx l = {e, line, s};
        lres res;
        int rc = parse_line(&l, s, n, &res);
        if (rc < 0)
            return rc;
        if (rc == 1) {
            if (*nrules == MAX_RULES)
                return fail(e, line, res.col,
                            "rule %d of a table that holds %d, expected at most %d rules (a "
                            "prefix, a port range or a glob can merge several)",
                            MAX_RULES + 1, MAX_RULES, MAX_RULES);
            if (c) {
                char *g = c->strings + *nglob;
                memcpy(g, res.glob, res.glob_len);
                g[res.glob_len] = '\0';
                res.r.glob = g;
                res.r.line = line;
                c->rules[*nrules] = res.r;
            }
            (*nrules)++;
            *nglob += res.glob_len + 1;
        }
        pos = next;
    }
    return 0;
}

int uw_pl_conf_parse(const char *text, size_t len, uw_pl_conf **out, char *err, size_t errlen)
{
    perr e = {err, errlen};
    if (err && errlen)
        err[0] = '\0';
    if (!out)
        return -EINVAL;
    *out = NULL;
    if (!text && len)
        return fail(&e, 0, 0, "no text, expected a buffer of the given length");
    if (!text)
        text = "";

    size_t nrules, nglob;
    int rc = parse_all(text, len, &e, NULL, &nrules, &nglob);
    if (rc)
        return rc;

    size_t head = sizeof(uw_pl_conf) + nrules * sizeof(rule);
    if (nglob > SIZE_MAX - head)
        return -ENOMEM;
    uw_pl_conf *c = malloc(head + nglob);
    if (!c) {
        if (err && errlen)
            snprintf(err, errlen, "out of memory for %zu rules", nrules);
        return -ENOMEM;
    }
    c->rules = (rule *)(c + 1);
    c->strings = (char *)(c->rules + nrules);
    size_t n2, g2;
    rc = parse_all(text, len, &e, c, &n2, &g2);
    /* Same text, same code: the second pass cannot disagree. */
    if (rc || n2 != nrules || g2 != nglob) {
        free(c);
        return rc ? rc : -EINVAL;
    }
    c->count = nrules;
    *out = c;
    return 0;
}

void uw_pl_conf_free(uw_pl_conf *c)
{
    free(c);
}

size_t uw_pl_conf_count(const uw_pl_conf *c)
{
    return c ? c->count : 0;
}

/* ------------------------------------------------------------------------ */
/* Matching                                                                  */

typedef struct query {
    int fam;     /* FAM_V4, FAM_V6, or FAM_ANY when the address is unusable */
    bool mapped; /* FAM_V6 and ::ffff:0:0/96: also an IPv4 address (v4) */
    uint8_t v4[4];
    uint8_t v6[16];
    uint16_t port;
} query;

static void read_query(const struct sockaddr *addr, socklen_t len, query *q)
{
    memset(q, 0, sizeof(*q));
    if (!addr || len < (socklen_t)sizeof(sa_family_t))
        return;
    /* Copies, so that a caller's buffer of any alignment is fine. */
    sa_family_t fam;
    memcpy(&fam, (const char *)addr + offsetof(struct sockaddr, sa_family), sizeof(fam));
    if (fam == AF_INET && len >= (socklen_t)sizeof(struct sockaddr_in)) {
        struct sockaddr_in sin;
        memcpy(&sin, addr, sizeof(sin));
        memcpy(q->v4, &sin.sin_addr, 4);
        const uint8_t *pp = (const uint8_t *)&sin.sin_port;
        q->port = (uint16_t)(pp[0] << 8 | pp[1]);
        q->fam = FAM_V4;
    } else if (fam == AF_INET6 && len >= (socklen_t)sizeof(struct sockaddr_in6)) {
        struct sockaddr_in6 sin6;
        memcpy(&sin6, addr, sizeof(sin6));
        memcpy(q->v6, &sin6.sin6_addr, 16);
        const uint8_t *pp = (const uint8_t *)&sin6.sin6_port;
        q->port = (uint16_t)(pp[0] << 8 | pp[1]);
        q->fam = FAM_V6;
        static const uint8_t v4mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
        if (memcmp(q->v6, v4mapped, 12) == 0) {
            q->mapped = true;
            memcpy(q->v4, q->v6 + 12, 4);
        }
    }
}

/* The first bits of a and b are equal. */
static bool prefix_equal(const uint8_t *a, const uint8_t *b, unsigned bits)
{
    unsigned whole = bits / 8, rest = bits % 8;
    if (memcmp(a, b, whole) != 0)
        return false;
    if (rest == 0)
        return true;
    uint8_t mask = (uint8_t)(0xff << (8 - rest));
    return ((a[whole] ^ b[whole]) & mask) == 0;
}

static bool addr_match(const rule *r, const query *q)
{
    if (q->fam == FAM_ANY) /* nothing to compare: only "any address, any port" */
        return r->family == FAM_ANY && r->port_lo == 0 && r->port_hi == 65535;
    if (q->port < r->port_lo || q->port > r->port_hi)
        return false;
    switch (r->family) {
    case FAM_V4:
        if (q->fam == FAM_V4 || q->mapped)
            return prefix_equal(r->addr, q->v4, r->prefix);
        return false;
    case FAM_V6:
        return q->fam == FAM_V6 && prefix_equal(r->addr, q->v6, r->prefix);
    default:
        return true;
    }
}

uw_pl_use uw_pl_conf_match(const uw_pl_conf *c, uw_pl_role role, const char *program,
                           const struct sockaddr *addr, socklen_t len, unsigned *rule_line)
{
    if (rule_line)
        *rule_line = 0;
    if (!c)
        return UW_PL_USE_BOTH;
    query q;
    read_query(addr, len, &q);
    if (!program)
        program = "";
    for (size_t i = 0; i < c->count; i++) {
        const rule *r = &c->rules[i];
        if (r->role && (unsigned)r->role != (unsigned)role)
            continue;
        if (!addr_match(r, &q))
            continue;
        /* Last: fnmatch is the dearest test. */
        if (!r->any_program && fnmatch(r->glob, program, 0) != 0)
            continue;
        if (rule_line)
            *rule_line = r->line;
        return (uw_pl_use)r->use;
    }
    return UW_PL_USE_BOTH;
}
