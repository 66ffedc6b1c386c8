/* Command line of uwarp-testproxy; see tp_cli.h. --help is the reference. */
#include "tp_cli.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char HELP[] =
    "usage: uwarp-testproxy [OPTIONS] LISTEN_PORT TARGET_HOST TARGET_PORT\n"
    "\n"
    "Relays TCP connections from LISTEN_PORT to TARGET_HOST:TARGET_PORT, optionally\n"
    "damaging the byte stream, for tests. LISTEN_PORT 0 picks a free port. The first\n"
    "line on stdout is always \"PORT <n>\" with the port listened on (flushed at once).\n"
    "Each accepted connection gets its own connection to the target; FIN is passed\n"
    "on as shutdown(SHUT_WR) once everything before it was written, a reset or\n"
    "socket error on one side as a reset of the other (buffered data is dropped).\n"
    "\n"
    "Options:\n"
    "  --listen ADDR        numeric address to listen on (default 127.0.0.1)\n"
    "  --count N            connections to serve, then exit (default 1)\n"
    "  --timeout S          give up after S seconds in all (default 120): exit 4\n"
    "  --buffer BYTES       ring per direction and connection (default 256K); reading\n"
    "                       stops while it is full\n"
    "  --seed N             seed for every random choice (default: time and pid);\n"
    "                       the seed used is printed on stderr\n"
    "  --dir c2s|s2c|both   directions the faults below apply to (default both)\n"
    "  --split              re-segment: write in random sizes of 1..--max-seg bytes,\n"
    "                       splitting reads and merging several reads into one write\n"
    "                       (sizes are log-uniform, so tiny writes are common)\n"
    "  --max-seg N          largest write with --split (default 4096)\n"
    "  --hold-ms N          longest a partial --split segment waits for more bytes\n"
    "                       before it is written short (default 2)\n"
    "  --delay-ms A[-B]     hold every chunk (a --split segment, else what one read\n"
    "                       returned) for a random A..B ms; order is kept\n"
    "  --corrupt N          flip one random bit in each of N bytes, one chosen at random\n"
    "                       in each of N equal parts of the --corrupt-span bytes after\n"
    "                       --corrupt-after; offsets the stream never reaches are not\n"
    "                       corrupted (the summary says how many were)\n"
    "  --corrupt-span BYTES see --corrupt (default 64K)\n"
    "  --corrupt-every W    instead of --corrupt: one random bit of one random byte in\n"
    "                       every window of W bytes after --corrupt-after\n"
    "  --corrupt-after BYTES  leave the first BYTES of each direction alone, e.g. the\n"
    "                       MPA handshake (default 0)\n"
    "  --log FILE           one line per corrupted byte as it is written:\n"
    "                         dir=c2s|s2c offset=N bit=0..7 old=HH new=HH\n"
    "                       and at the end of each connection, per direction:\n"
    "                         dir=c2s|s2c bytes=N corruptions=N\n"
    "                       (offsets count from the connection's first byte in that\n"
    "                       direction; with --count above 1 lines end in \" conn=K\")\n"
    "  --stats              at the end of each connection, per direction on stderr:\n"
    "                         {\"dir\":\"c2s\",\"bytes\":N,\"writes\":N,\"corruptions\":N,\n"
    "                          \"reads\":N,\"merged\":N,\"min_write\":N,\"max_write\":N,\n"
    "                          \"conn\":K,\"end\":\"fin\"|\"reset\"}   (one line)\n"
    "                       merged counts writes that held bytes of several reads\n"
    "  -h, --help           this text\n"
    "Numbers are decimal or 0x hex; BYTES, W and N may end in K, M or G (binary).\n"
    "\n"
    "Exit status: 0 done, 1 usage error, 2 runtime or network error (e.g. the target\n"
    "refused), 4 timeout.\n";

void tp_msg(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("uwarp-testproxy: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

static int usage(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int usage(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("uwarp-testproxy: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputs(" (see --help)\n", stderr);
    va_end(ap);
    return EXIT_USAGE;
}

/* Decimal or 0x hex, optional K/M/G suffix, at most max. No sign or spaces. */
static bool parse_num(const char *s, uint64_t max, uint64_t *out)
{
    unsigned base = 10;
    uint64_t v = 0;
    if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
        base = 16;
        s += 2;
    }
    const char *digits = s;
    for (; *s != '\0'; s++) {
        unsigned d;
        if (*s >= '0' && *s <= '9')
            d = (unsigned)(*s - '0');
        else if (base == 16 && *s >= 'a' && *s <= 'f')
            d = (unsigned)(*s - 'a' + 10);
        else if (base == 16 && *s >= 'A' && *s <= 'F')
            d = (unsigned)(*s - 'A' + 10);
        else
            break;
        if (v > (UINT64_MAX - d) / base)
            return false;
        v = v * base + d;
    }
    if (s == digits)
        return false;
    unsigned shift = 0;
    if (*s != '\0' && base == 10) {
        shift = *s == 'K' || *s == 'k'   ? 10
                : *s == 'M' || *s == 'm' ? 20
                : *s == 'G' || *s == 'g' ? 30
                                         : 0;
        if (shift == 0 || s[1] != '\0')
            return false;
        if (v > (UINT64_MAX >> shift))
            return false;
        v <<= shift;
    } else if (*s != '\0') {
        return false;
    }
    if (v > max)
        return false;
    *out = v;
    return true;
}

/* "--name VALUE" or "--name=VALUE" at argv[*i]: 1 with *val, 0 if another
 * option, -1 when the value is missing. */
static int opt_val(int argc, char **argv, int *i, const char *name, const char **val)
{
    size_t n = strlen(name);
    if (strncmp(argv[*i], name, n) != 0)
        return 0;
    if (argv[*i][n] == '=') {
        *val = argv[*i] + n + 1;
        return 1;
    }
    if (argv[*i][n] != '\0')
        return 0;
    if (*i + 1 >= argc) {
        usage("%s needs a value", name);
        return -1;
    }
    *val = argv[++*i];
    return 1;
}

/* Plain decimal 0..65535: getaddrinfo() would also take service names. */
static bool is_port(const char *s, uint64_t *out)
{
    if (strspn(s, "0123456789") != strlen(s))
        return false;
    return parse_num(s, 65535, out);
}

static int parse_delay(const char *s, tp_faults *f)
{
    char a[32];
    const char *dash = strchr(s, '-');
    size_t alen = dash != NULL ? (size_t)(dash - s) : strlen(s);
    uint64_t lo, hi;
    if (alen >= sizeof(a))
        return -1;
    memcpy(a, s, alen);
    a[alen] = '\0';
    if (!parse_num(a, 600000, &lo))
        return -1;
    hi = lo;
    if (dash != NULL && !parse_num(dash + 1, 600000, &hi))
        return -1;
    if (hi < lo)
        return -1;
    f->delay_min_ms = (uint32_t)lo;
    f->delay_max_ms = (uint32_t)hi;
    return 0;
}

/* Valued options: name, and the upper bound for numbers (0: not a number). */
enum {
    O_LISTEN,
    O_COUNT,
    O_TIMEOUT,
    O_BUFFER,
    O_SEED,
    O_DIR,
    O_MAXSEG,
    O_HOLD,
    O_DELAY,
    O_CORRUPT,
    O_SPAN,
    O_EVERY,
    O_AFTER,
    O_LOG,
    O_NOPTS
};
static const struct {
    const char *name;
    uint64_t max;
} OPTS[O_NOPTS] = {
    [O_LISTEN] = {"--listen", 0},
    [O_COUNT] = {"--count", MAX_COUNT},
    [O_TIMEOUT] = {"--timeout", 86400},
    [O_BUFFER] = {"--buffer", UINT64_C(64) << 20},
    [O_SEED] = {"--seed", UINT64_MAX},
    [O_DIR] = {"--dir", 0},
    [O_MAXSEG] = {"--max-seg", UINT64_C(64) << 20},
    [O_HOLD] = {"--hold-ms", 60000},
    [O_DELAY] = {"--delay-ms", 0},
    [O_CORRUPT] = {"--corrupt", TP_MAX_CORRUPT},
    [O_SPAN] = {"--corrupt-span", TP_MAX_SPAN},
    [O_EVERY] = {"--corrupt-every", TP_MAX_SPAN},
    [O_AFTER] = {"--corrupt-after", UINT64_C(1) << 62},
    [O_LOG] = {"--log", 0},
};

static int apply_opt(config *c, int o, const char *v, bool *span_given)
{
    uint64_t n = 0;
    if (OPTS[o].max > 0 && !parse_num(v, OPTS[o].max, &n))
        return usage("bad %s '%s': a number up to %" PRIu64 " expected", OPTS[o].name, v,
                     OPTS[o].max);
    switch (o) {
    case O_LISTEN:
        c->listen_addr = v;
        break;
    case O_COUNT:
        c->count = (unsigned)n;
        break;
    case O_TIMEOUT:
        c->timeout_s = (unsigned)n;
        break;
    case O_BUFFER:
        c->buffer = (size_t)n;
        break;
    case O_SEED:
        c->seed = n;
        c->seed_given = true;
        break;
    case O_MAXSEG:
        c->faults.max_seg = (uint32_t)n;
        break;
    case O_HOLD:
        c->faults.hold_ms = (uint32_t)n;
        break;
    case O_CORRUPT:
        c->faults.corrupt_count = n;
        break;
    case O_SPAN:
        c->faults.corrupt_span = n;
        *span_given = true;
        break;
    case O_EVERY:
        c->faults.corrupt_every = n;
        break;
    case O_AFTER:
        c->faults.corrupt_after = n;
        break;
    case O_LOG:
        c->log_path = v;
        break;
    case O_DIR:
        c->fault_dir[0] = strcmp(v, "c2s") == 0 || strcmp(v, "both") == 0;
        c->fault_dir[1] = strcmp(v, "s2c") == 0 || strcmp(v, "both") == 0;
        if (!c->fault_dir[0] && !c->fault_dir[1])
            return usage("bad --dir '%s': c2s, s2c or both expected", v);
        break;
    case O_DELAY:
        if (parse_delay(v, &c->faults) != 0)
            return usage("bad --delay-ms '%s': A or A-B with 0 <= A <= B <= 600000", v);
        break;
    default:
        break;
    }
    return 0;
}

int tp_parse_args(int argc, char **argv, config *c)
{
    const char *pos[3];
    int npos = 0;
    bool span_given = false;
    *c = (config){.listen_addr = "127.0.0.1",
                  .count = 1,
                  .timeout_s = 120,
                  .fault_dir = {true, true},
                  .buffer = 256 * 1024};
    c->faults = (tp_faults){.max_seg = 4096, .hold_ms = 2, .corrupt_span = 64 * 1024};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = NULL;
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            fputs(HELP, stdout);
            exit(fflush(stdout) == 0 ? 0 : EXIT_RUNTIME);
        }
        if (strcmp(a, "--split") == 0) {
            c->faults.split = true;
            continue;
        }
        if (strcmp(a, "--stats") == 0) {
            c->stats = true;
            continue;
        }
        if (a[0] == '-' && a[1] == '-') {
            int o, r = 0;
            for (o = 0; o < O_NOPTS; o++) {
                r = opt_val(argc, argv, &i, OPTS[o].name, &v);
                if (r != 0)
                    break;
            }
            if (r < 0)
                return EXIT_USAGE;
            if (o == O_NOPTS)
                return usage("unknown option '%s'", a);
            if (apply_opt(c, o, v, &span_given) != 0)
                return EXIT_USAGE;
            continue;
        }
        if (a[0] == '-' && a[1] != '\0')
            return usage("unknown option '%s'", a);
        if (npos == 3)
            return usage("unexpected argument '%s'", a);
        pos[npos++] = a;
    }
    if (npos < 3)
        return usage("expected LISTEN_PORT TARGET_HOST TARGET_PORT");
    uint64_t port;
    if (!is_port(pos[0], &port))
        return usage("bad LISTEN_PORT '%s': 0..65535 expected", pos[0]);
    if (!is_port(pos[2], &port) || port == 0)
        return usage("bad TARGET_PORT '%s': 1..65535 expected", pos[2]);
    c->listen_port = pos[0];
    c->target_host = pos[1];
    c->target_port = pos[2];
    tp_faults *f = &c->faults;
    if (c->count == 0 || c->timeout_s == 0)
        return usage("--count and --timeout must be at least 1");
    if (c->buffer < 4096)
        return usage("--buffer must be at least 4096");
    if (f->max_seg == 0 || f->max_seg > c->buffer)
        return usage("--max-seg must be 1..--buffer (%zu)", c->buffer);
    if (f->corrupt_count > 0 && f->corrupt_every > 0)
        return usage("--corrupt and --corrupt-every exclude each other");
    if (span_given && f->corrupt_count == 0)
        return usage("--corrupt-span needs --corrupt");
    if (f->corrupt_count > f->corrupt_span)
        return usage("--corrupt N needs N <= --corrupt-span");
    return 0;
}
