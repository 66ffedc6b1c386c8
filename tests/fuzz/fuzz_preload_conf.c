/* Fuzz target: the preload library's rules (src/preload/conf.c).
 *
 * Input: the text of a rules file, any octets.
 *
 * Parser checks: the result is 0 or -EINVAL; a table has at most 1,024
 * rules; an error leaves no table and one line of text "LINE:COL: ...
 * expected ...", cut cleanly to a small buffer. The file parses as its lines
 * do one by one: it is good exactly when every line is good and there are at
 * most 1,024 rules, the rule count is the sum, and a bad file reports the
 * first bad line's error (the 1,025th rule when that comes first).
 *
 * Matching checks, against oracles independent of the parser's address
 * code: every rule line's address, read again here with inet_pton(3), must
 * match that rule (its port range's ends too), must stop matching when a bit
 * inside its prefix flips and keep matching when a bit outside flips; an
 * IPv4 rule matches the v4-mapped IPv6 form, an IPv6 rule never an AF_INET
 * address. First match wins: for random queries (addresses and ports taken
 * from the rules, perturbed, or random), the whole table answers with the
 * first line whose one-rule table matches, or UW_PL_USE_BOTH and line 0. */
#include <arpa/inet.h>
#include <errno.h>
#include <fnmatch.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "preload/conf.h"

#define ERRCAP 512
#define PROG_MAX 16 /* a program's short name (TASK_COMM_LEN); see below */

/* One rule line read again here: words split on blanks, up to '#'. */
typedef struct words {
    size_t n;
    const char *w[6];
    size_t len[6];
} words;

static void split_words(const char *s, size_t n, words *out)
{
    const char *end = s + n, *hash = memchr(s, '#', n);
    if (hash)
        end = hash;
    out->n = 0;
    const char *p = s;
    while (out->n < 6) {
        while (p < end && (*p == ' ' || *p == '\t' || *p == '\r'))
            p++;
        if (p == end)
            break;
        out->w[out->n] = p;
        while (p < end && *p != ' ' && *p != '\t' && *p != '\r')
            p++;
        out->len[out->n] = (size_t)(p - out->w[out->n]);
        out->n++;
    }
}

/* What the oracle knows of a rule. */
typedef struct ref_rule {
    int use, role; /* role 0: '*' */
    int fam;       /* 0 '*', 4, 6 */
    uint8_t addr[16];
    unsigned prefix;
    unsigned lo, hi;
    char prog[PROG_MAX + 1]; /* a name the glob matches, "" if none known */
    bool prog_known;
} ref_rule;

static bool parse_num(const char *s, size_t n, unsigned long max, unsigned long *v)
{
    *v = 0;
    if (n == 0 || n > 12)
        return false;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return false;
        *v = *v * 10 + (unsigned long)(s[i] - '0');
    }
    return *v <= max;
}

/* Reads a rule the parser accepted, with libc's inet_pton for addresses.
 * Every step must succeed: the parser accepted the line. */
static void ref_read(const words *w, ref_rule *r)
{
    FZ_CHECK(w->n == 5);
    static const char *const uses[] = {"sdp", "tcp", "both"};
    r->use = 0;
    for (int i = 0; i < 3; i++)
        if (w->len[1] == strlen(uses[i]) && memcmp(w->w[1], uses[i], w->len[1]) == 0)
            r->use = i + 1;
    FZ_CHECK(r->use != 0);
    r->role = w->w[2][0] == 's' ? UW_PL_ROLE_SERVER : w->w[2][0] == 'c' ? UW_PL_ROLE_CLIENT : 0;

    /* A program the glob matches: the glob itself when it has no special
     * characters; any name for "*". Names stay short: fnmatch's '*' costs
     * grow with the name's length to the power of the stars, and the
     * library matches a program's short name (at most 15 octets). */
    r->prog_known = false;
    r->prog[0] = '\0';
    if (w->len[3] == 1 && w->w[3][0] == '*') {
        r->prog_known = true;
        memcpy(r->prog, "anything", 9);
    } else if (w->len[3] <= PROG_MAX && !memchr(w->w[3], '*', w->len[3]) &&
               !memchr(w->w[3], '?', w->len[3]) && !memchr(w->w[3], '[', w->len[3]) &&
               !memchr(w->w[3], '\\', w->len[3])) {
        memcpy(r->prog, w->w[3], w->len[3]);
        r->prog[w->len[3]] = '\0';
        r->prog_known = true;
    }

    const char *a = w->w[4], *end = a + w->len[4];
    char text[64];
    memset(r->addr, 0, sizeof(r->addr));
    const char *p;
    if (*a == '*') {
        r->fam = 0;
        r->prefix = 0;
        p = a + 1;
    } else if (*a == '[') {
        const char *close = memchr(a, ']', (size_t)(end - a));
        FZ_CHECK(close && (size_t)(close - a - 1) < sizeof(text));
        memcpy(text, a + 1, (size_t)(close - a - 1));
        text[close - a - 1] = '\0';
        /* The parser accepted it: so must libc. */
        FZ_CHECK(inet_pton(AF_INET6, text, r->addr) == 1);
        r->fam = 6;
        r->prefix = 128;
        p = close + 1;
    } else {
        p = a;
        while (p < end && *p != '/' && *p != ':')
            p++;
        FZ_CHECK((size_t)(p - a) < sizeof(text));
        memcpy(text, a, (size_t)(p - a));
        text[p - a] = '\0';
        FZ_CHECK(inet_pton(AF_INET, text, r->addr) == 1);
        r->fam = 4;
        r->prefix = 32;
    }
    unsigned long v;
    if (p < end && *p == '/') {
        const char *d = ++p;
        while (p < end && *p != ':')
            p++;
        while (p - d > 1 && *d == '0')
            d++;
        FZ_CHECK(parse_num(d, (size_t)(p - d), r->fam == 4 ? 32 : 128, &v));
        r->prefix = (unsigned)v;
    }
    r->lo = 0;
    r->hi = 65535;
    if (p < end && *p == ':') {
        const char *d = ++p;
        while (p < end && *p != '-')
            p++;
        /* Leading zeros are allowed in ports: strip them for parse_num. */
        while (p - d > 1 && *d == '0')
            d++;
        FZ_CHECK(parse_num(d, (size_t)(p - d), 65535, &v));
        r->lo = r->hi = (unsigned)v;
        if (p < end) {
            d = ++p;
            while (end - d > 1 && *d == '0')
                d++;
            FZ_CHECK(parse_num(d, (size_t)(end - d), 65535, &v));
            r->hi = (unsigned)v;
            p = end;
        }
    }
    FZ_CHECK(p == end && r->lo <= r->hi);
}

typedef struct line1 {
    unsigned no;
    uw_pl_conf *c; /* this rule line alone */
    ref_rule r;
} line1;

typedef struct qaddr {
    struct sockaddr_storage ss;
    socklen_t len;
} qaddr;

static void set_v4(qaddr *q, const uint8_t a[4], unsigned port)
{
    memset(q, 0, sizeof(*q));
    struct sockaddr_in *s = (struct sockaddr_in *)&q->ss;
    s->sin_family = AF_INET;
    s->sin_port = htons((uint16_t)port);
    memcpy(&s->sin_addr, a, 4);
    q->len = sizeof(*s);
}

static void set_v6(qaddr *q, const uint8_t a[16], unsigned port)
{
    memset(q, 0, sizeof(*q));
    struct sockaddr_in6 *s = (struct sockaddr_in6 *)&q->ss;
    s->sin6_family = AF_INET6;
    s->sin6_port = htons((uint16_t)port);
    memcpy(&s->sin6_addr, a, 16);
    q->len = sizeof(*s);
}

static void set_mapped(qaddr *q, const uint8_t a[4], unsigned port)
{
    uint8_t m[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    memcpy(m + 12, a, 4);
    set_v6(q, m, port);
}

static unsigned match1(const uw_pl_conf *c, int role, const char *prog, const qaddr *q,
                       uw_pl_use *use)
{
    unsigned line = 777;
    *use =
        uw_pl_conf_match(c, (uw_pl_role)role, prog, (const struct sockaddr *)&q->ss, q->len, &line);
    FZ_CHECK(*use == UW_PL_USE_SDP || *use == UW_PL_USE_TCP || *use == UW_PL_USE_BOTH);
    FZ_CHECK(line != 777);
    FZ_CHECK(line != 0 || *use == UW_PL_USE_BOTH);
    return line;
}

/* The independent checks of one rule (a one-rule table c). */
static void check_rule(const uw_pl_conf *c, const ref_rule *r, fz_rng *rng)
{
    if (!r->prog_known)
        return;
    int role = r->role ? r->role : (int)(1 + fz_rng_below(rng, 2));
    unsigned port = r->lo + (unsigned)fz_rng_below(rng, r->hi - r->lo + 1u);
    uw_pl_use use;
    qaddr q;
    uint8_t a[16];

    if (r->fam == 0) {
        fz_rng_fill(rng, a, sizeof(a));
        set_v4(&q, a, port);
        FZ_CHECK(match1(c, role, r->prog, &q, &use) == 1 && (int)use == r->use);
        set_v6(&q, a, port);
        FZ_CHECK(match1(c, role, r->prog, &q, &use) == 1 && (int)use == r->use);
        return;
    }
    unsigned bits = r->fam == 4 ? 32 : 128;
    memcpy(a, r->addr, 16);
    /* The address itself, at both ends of the port range. */
    for (int end = 0; end < 3; end++) {
        unsigned pt = end == 0 ? r->lo : end == 1 ? r->hi : port;
        if (r->fam == 4) {
            set_v4(&q, a, pt);
            FZ_CHECK(match1(c, role, r->prog, &q, &use) == 1 && (int)use == r->use);
            set_mapped(&q, a, pt);
            FZ_CHECK(match1(c, role, r->prog, &q, &use) == 1 && (int)use == r->use);
        } else {
            set_v6(&q, a, pt);
            FZ_CHECK(match1(c, role, r->prog, &q, &use) == 1 && (int)use == r->use);
            set_v4(&q, a + 12, pt);
            FZ_CHECK(match1(c, role, r->prog, &q, &use) == 0);
        }
    }
    /* Just outside the port range. */
    if (r->lo > 0) {
        if (r->fam == 4)
            set_v4(&q, a, r->lo - 1);
        else
            set_v6(&q, a, r->lo - 1);
        FZ_CHECK(match1(c, role, r->prog, &q, &use) == 0);
    }
    if (r->hi < 65535) {
        if (r->fam == 4)
            set_v4(&q, a, r->hi + 1);
        else
            set_v6(&q, a, r->hi + 1);
        FZ_CHECK(match1(c, role, r->prog, &q, &use) == 0);
    }
    /* One bit flipped: inside the prefix it no longer matches, outside it
     * still does. */
    unsigned bit = (unsigned)fz_rng_below(rng, bits);
    uint8_t b[16];
    memcpy(b, a, 16);
    b[bit / 8] ^= (uint8_t)(0x80 >> (bit % 8));
    if (r->fam == 4)
        set_v4(&q, b, port);
    else
        set_v6(&q, b, port);
    unsigned line = match1(c, role, r->prog, &q, &use);
    FZ_CHECK(line == (bit < r->prefix ? 0u : 1u));
    /* The other role, when the rule has one. */
    if (r->role) {
        if (r->fam == 4)
            set_v4(&q, a, port);
        else
            set_v6(&q, a, port);
        FZ_CHECK(match1(c, 3 - r->role, r->prog, &q, &use) == 0);
    }
}

/* Differential check of the address parsers against inet_pton(3), both
 * ways: a bare address word ("a.b.c.d" or "[...]") is accepted exactly when
 * libc accepts it. (ref_read then checks that the bytes agree.) */
static void check_addr_word(const char *w, size_t n)
{
    char inner[80], line[100];
    int fam;
    if (n < 3 || n > 64 || memchr(w, '\0', n)) /* libc would stop at a NUL */
        return;
    if (w[0] == '[' && w[n - 1] == ']') {
        if (memchr(w + 1, ']', n - 2))
            return;
        memcpy(inner, w + 1, n - 2);
        inner[n - 2] = '\0';
        fam = AF_INET6;
    } else {
        for (size_t i = 0; i < n; i++)
            if (!((w[i] >= '0' && w[i] <= '9') || w[i] == '.'))
                return;
        memcpy(inner, w, n);
        inner[n] = '\0';
        fam = AF_INET;
    }
    uint8_t buf[16];
    int libc = inet_pton(fam, inner, buf) == 1;
    int len = snprintf(line, sizeof(line), "use tcp * * %.*s", (int)n, w);
    uw_pl_conf *c = NULL;
    int rc = uw_pl_conf_parse(line, (size_t)len, &c, NULL, 0);
    FZ_DEBUG("address word %s: libc %d, parser %d\n", line + 12, libc, rc);
    FZ_CHECK((rc == 0) == libc);
    uw_pl_conf_free(c);
}

static uint64_t hash(const uint8_t *p, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}

/* The error text: "LINE:COL: ... expected ...", one line. */
static void check_err_text(const char *err, unsigned *line, const char **rest)
{
    /* The preload library reports errors from a 256-octet buffer. */
    FZ_CHECK(strlen(err) < 256);
    FZ_CHECK(strchr(err, '\n') == NULL);
    char *e;
    unsigned long l = strtoul(err, &e, 10);
    FZ_CHECK(e != err && *e == ':');
    char *e2;
    unsigned long col = strtoul(e + 1, &e2, 10);
    FZ_CHECK(e2 != e + 1 && e2[0] == ':' && e2[1] == ' ');
    /* A missing word is reported one column after the last: up to 1026. */
    FZ_CHECK(l >= 1 && col >= 1 && col <= 1026);
    FZ_CHECK(strstr(e2, "expected") != NULL);
    *line = (unsigned)l;
    *rest = e2; /* ": what..." */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *text = (const char *)data;
    uint64_t h = hash(data, size);
    fz_rng rng;
    fz_rng_init(&rng, h);

    uw_pl_conf *c = NULL;
    char err[ERRCAP];
    memset(err, 'x', sizeof(err));
    int rc = uw_pl_conf_parse(text, size, &c, err, sizeof(err));
    FZ_CHECK(rc == 0 || rc == -EINVAL);
    FZ_CHECK((rc == 0) == (c != NULL));
    FZ_CHECK(memchr(err, '\0', sizeof(err)) != NULL);
    unsigned err_line = 0;
    const char *err_rest = NULL;
    if (rc == 0) {
        FZ_CHECK(err[0] == '\0');
        FZ_CHECK(uw_pl_conf_count(c) <= 1024);
    } else {
        check_err_text(err, &err_line, &err_rest);
        /* A small buffer gets a clean prefix of the same text. */
        size_t small = 1 + (size_t)fz_rng_below(&rng, 24);
        char *buf = malloc(small); /* exact size: ASan sees an overflow */
        uw_pl_conf *c2 = NULL;
        FZ_CHECK(uw_pl_conf_parse(text, size, &c2, buf, small) == -EINVAL && !c2);
        size_t want = strlen(err) < small - 1 ? strlen(err) : small - 1;
        FZ_CHECK(strlen(buf) == want && memcmp(buf, err, want) == 0);
        free(buf);
    }

    /* Line by line. */
    size_t cap = 16, nl = 0;
    line1 *lines = malloc(cap * sizeof(*lines));
    FZ_CHECK(lines != NULL);
    size_t pos = 0, total = 0;
    unsigned no = 0;
    bool decided = false; /* the line that fails the whole file was seen */
    while (pos < size && !decided) {
        no++;
        const uint8_t *lf = memchr(data + pos, '\n', size - pos);
        size_t n = lf ? (size_t)(lf - (data + pos)) : size - pos;
        /* Any fifth word that is a bare address: against libc. */
        words aw;
        split_words(text + pos, n, &aw);
        if (aw.n >= 5)
            check_addr_word(aw.w[4], aw.len[4]);
        uw_pl_conf *one = NULL;
        char e1[ERRCAP];
        int r1 = uw_pl_conf_parse(text + pos, n, &one, e1, sizeof(e1));
        if (r1 != 0) {
            /* The file fails here, with this line's error. */
            FZ_CHECK(rc == -EINVAL && err_line == no);
            unsigned l1;
            const char *rest1;
            check_err_text(e1, &l1, &rest1);
            FZ_CHECK(l1 == 1 && strcmp(rest1, err_rest) == 0);
            decided = true;
        } else {
            size_t k = uw_pl_conf_count(one);
            FZ_CHECK(k <= 1);
            total += k;
            if (total > 1024) {
                FZ_CHECK(rc == -EINVAL && err_line == no && strstr(err, "rule 1025 "));
                decided = true;
            }
            if (k == 1 && !decided) {
                if (nl == cap) {
                    cap *= 2;
                    line1 *nn = realloc(lines, cap * sizeof(*lines));
                    FZ_CHECK(nn != NULL);
                    lines = nn;
                }
                lines[nl].no = no;
                lines[nl].c = one;
                nl++;
                one = NULL;
                /* The independent reading of this rule. */
                words w;
                split_words(text + pos, n, &w);
                ref_read(&w, &lines[nl - 1].r);
                check_rule(lines[nl - 1].c, &lines[nl - 1].r, &rng);
            }
            uw_pl_conf_free(one);
        }
        pos += n + (lf ? 1 : 0);
    }
    if (rc == 0) {
        FZ_CHECK(!decided && total == uw_pl_conf_count(c));
    } else {
        FZ_CHECK(decided);
    }

    /* First match wins: random queries against the table and the oracle. */
    if (rc == 0) {
        FZ_CHECK(uw_pl_conf_match(NULL, UW_PL_ROLE_CLIENT, "x", NULL, 0, NULL) == UW_PL_USE_BOTH);
        static const char *const progs[] = {"", "a", "nginx", "redis-server", "curl", "x.py"};
        for (int i = 0; i < 24; i++) {
            int role = (int)fz_rng_below(&rng, 8) == 0 ? 0 : (int)(1 + fz_rng_below(&rng, 2));
            const char *prog = progs[fz_rng_below(&rng, sizeof(progs) / sizeof(progs[0]))];
            unsigned port = (unsigned)fz_rng_below(&rng, 65536);
            uint8_t a[16];
            fz_rng_fill(&rng, a, sizeof(a));
            unsigned kind = (unsigned)fz_rng_below(&rng, 4);
            if (nl && fz_rng_below(&rng, 4) != 0) {
                /* Near a rule: its address, a bit or two flipped, and a
                 * port in or next to its range. */
                const ref_rule *r = &lines[fz_rng_below(&rng, nl)].r;
                if (r->fam == 4) {
                    memcpy(a, r->addr, 4);
                    kind = (unsigned)fz_rng_below(&rng, 2) ? 1 : 0;
                } else if (r->fam == 6) {
                    memcpy(a, r->addr, 16);
                    kind = 2;
                }
                unsigned flips = (unsigned)fz_rng_below(&rng, 3);
                unsigned bits = r->fam == 4 ? 32 : 128;
                for (unsigned f = 0; f < flips; f++) {
                    unsigned bit = (unsigned)fz_rng_below(&rng, bits);
                    a[bit / 8] ^= (uint8_t)(0x80 >> (bit % 8));
                }
                switch (fz_rng_below(&rng, 4)) {
                case 0:
                    port = r->lo ? r->lo - 1 : 0;
                    break;
                case 1:
                    port = r->hi < 65535 ? r->hi + 1 : 65535;
                    break;
                default:
                    port = r->lo + (unsigned)fz_rng_below(&rng, r->hi - r->lo + 1u);
                }
                if (r->prog_known && fz_rng_below(&rng, 2))
                    prog = r->prog;
                if (r->role && fz_rng_below(&rng, 2))
                    role = r->role;
            }
            qaddr q;
            if (kind == 0)
                set_v4(&q, a, port);
            else if (kind == 1)
                set_mapped(&q, a, port);
            else if (kind == 2)
                set_v6(&q, a, port);
            else {
                set_v4(&q, a, port);
                q.len = (socklen_t)fz_rng_below(&rng, sizeof(struct sockaddr_in));
            }
            uw_pl_use use;
            unsigned line = match1(c, role, prog, &q, &use);
            /* The oracle: the first one-rule table that matches. */
            unsigned want_line = 0;
            uw_pl_use want_use = UW_PL_USE_BOTH;
            for (size_t j = 0; j < nl; j++) {
                uw_pl_use u;
                if (match1(lines[j].c, role, prog, &q, &u) == 1) {
                    want_line = lines[j].no;
                    want_use = u;
                    break;
                }
            }
            FZ_CHECK(line == want_line && use == want_use);
            /* v4-mapped: every rule an AF_INET address matches also
             * matches its mapped form, so that form's first match is no
             * later. */
            if (kind == 0) {
                qaddr m;
                set_mapped(&m, a, port);
                uw_pl_use um;
                unsigned lm = match1(c, role, prog, &m, &um);
                FZ_CHECK(line == 0 || (lm != 0 && lm <= line));
            }
        }
    }

    for (size_t j = 0; j < nl; j++)
        uw_pl_conf_free(lines[j].c);
    free(lines);
    uw_pl_conf_free(c);
    return 0;
}
