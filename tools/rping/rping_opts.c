/* uwarp-rping command line. Short options follow rping (they may be
 * clustered, "-vV", and take values attached or separate, "-C5" / "-C 5");
 * long options are uwarp extensions. */
#include <stdio.h>
#include <string.h>

#include "../cliutil.h"
#include "../rdmacli.h"
#include "uwarp/mpa.h"
#include "rping.h"

static const char HELP[] =
    "usage: uwarp-rping -s [-vVdP] [-S size] [-C count] [-a addr] [-p port] [-t secs]\n"
    "       uwarp-rping -c [-vVd] [-S size] [-C count] -a addr [-p port] [-t secs]\n"
    "\n"
    "rdma-core rping's ping-pong over uwarp (iWARP over TCP), wire-compatible with\n"
    "rping on Linux siw and RNICs. Each ping: the client advertises its start\n"
    "buffer in a Send, the server RDMA-Reads it and answers with a go-ahead Send;\n"
    "the client advertises its sink buffer, the server RDMA-Writes the data back\n"
    "and sends another go-ahead; the client can then compare the two buffers.\n"
    "\n"
    "  -s          server (MPA responder); serves one connection, then exits\n"
    "  -c          client (MPA initiator)\n"
    "  -a addr     server: address to listen on (default any IPv4 address);\n"
    "              client: the server's address (required)\n"
    "  -p port     port (default 7174); a server given 0 picks a free port and\n"
    "              prints 'listening on ADDR:PORT' on stderr\n"
    "  -C count    client: number of pings (default: until interrupted);\n"
    "              server (uwarp extension): fail unless the client completed at\n"
    "              least this many before disconnecting\n"
    "  -S size     ping data size, 26..65535 (default 64)\n"
    "  -v          print each ping's data ('ping data: ...' on the client,\n"
    "              'server ping data: ...' on the server)\n"
    "  -V          client: validate the data written back (fails on mismatch)\n"
    "  -d          debug: protocol steps and the library's log on stderr\n"
    "  -P          server: persistent, serves connections one after another\n"
    "  -t secs     limit for connection setup and for each step of a ping\n"
    "              (default 30; a server waits for a connection without limit\n"
    "              unless -t is given). rping's own -t (type of service) does\n"
    "              not apply to iWARP over plain TCP\n"
    "  -h, --help  this text\n"
    "uwarp extensions:\n"
    "  --rev 1|2   highest MPA revision (default 2)\n"
    "  --no-crc    prefer no MPA CRC\n"
    "  --markers   require MPA markers on what we receive\n"
    "  --p2p LIST  peer-to-peer model with RTR types from send,write,read\n"
    "  --pause MS  client: pause after the connection is established before the\n"
    "              first Send (default 5). Linux siw as server can stall when the\n"
    "              client's first FPDU arrives within ~2 ms of its MPA Reply\n"
    "              (siw-vm README, pitfall 13); real rping clients are slow\n"
    "              enough, a user-space client is not\n"
    "\n"
    "Exit status: 0 success; 1 usage error; 2 protocol, transport or data error;\n"
    "3 rejected by the peer; 4 timeout.\n";

/* Handles one short option letter; val is its value when it takes one. */
static int short_opt(rp_opts *o, char opt, const char *val)
{
    uint32_t n;
    switch (opt) {
    case 's':
        o->server = true;
        return -1;
    case 'c':
        o->client = true;
        return -1;
    case 'v':
        o->verbose++;
        return -1;
    case 'V':
        o->validate = true;
        return -1;
    case 'd':
        o->debug++;
        return -1;
    case 'P':
        o->persistent = true;
        return -1;
    case 'q':
        /* rping: "self-created QP"; uwarp has only one way to make a QP. */
        return -1;
    case 'a':
        o->addr = val;
        return -1;
    case 'p':
        o->port = val;
        return -1;
    case 'C':
        if (!cli_parse_u32(val, &n) || n > INT32_MAX)
            return cli_usage("invalid count '%s'", val);
        o->count = (long)n;
        o->count_given = true;
        return -1;
    case 'S':
        if (!cli_parse_u32(val, &n) || n < RP_MIN_SIZE || n > RP_MAX_SIZE)
            return cli_usage("invalid size '%s' (valid range is %d to %d)", val, RP_MIN_SIZE,
                             RP_MAX_SIZE);
        o->size = n;
        return -1;
    case 't':
        if (!rc_parse_seconds(val, &o->timeout_ms) || o->timeout_ms == 0)
            return cli_usage("-t takes seconds (> 0), not '%s'", val);
        return -1;
    default:
        return cli_usage("unknown option '-%c'", opt);
    }
}

int rp_parse_args(int argc, char **argv, rp_opts *o)
{
    memset(o, 0, sizeof(*o));
    o->port = RP_DEFAULT_PORT;
    o->size = RP_DEFAULT_SIZE;
    o->timeout_ms = -1;
    o->rev = 2;
    o->pause_ms = 5;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = NULL;
        int r;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            fputs(HELP, stdout);
            return RC_EXIT_OK;
        } else if (!strcmp(a, "--no-crc")) {
            o->no_crc = true;
        } else if (!strcmp(a, "--markers")) {
            o->markers = true;
        } else if ((r = cli_opt(argc, argv, &i, "--rev", &v)) != 0) {
            if (r < 0)
                return RC_EXIT_USAGE;
            if (rc_parse_rev(v, &o->rev) < 0)
                return RC_EXIT_USAGE;
        } else if ((r = cli_opt(argc, argv, &i, "--p2p", &v)) != 0) {
            if (r < 0)
                return RC_EXIT_USAGE;
            if (rc_parse_rtr_list(v, &o->rtr) < 0)
                return cli_usage("--p2p takes a comma-separated list of send, write, read");
            o->p2p = true;
        } else if ((r = cli_opt(argc, argv, &i, "--pause", &v)) != 0) {
            uint32_t n;
            if (r < 0)
                return RC_EXIT_USAGE;
            if (!cli_parse_u32(v, &n) || n > 10000)
                return cli_usage("--pause takes milliseconds 0..10000, not '%s'", v);
            o->pause_ms = (int)n;
        } else if (a[0] == '-' && a[1] != '-' && a[1] != '\0') {
            for (const char *p = a + 1; *p; p++) {
                if (strchr("apCSt", *p)) {
                    const char *val = p[1] ? p + 1 : (i + 1 < argc ? argv[++i] : NULL);
                    if (!val)
                        return cli_usage("option -%c needs a value", *p);
                    if ((r = short_opt(o, *p, val)) >= 0)
                        return r;
                    break;
                }
                if ((r = short_opt(o, *p, NULL)) >= 0)
                    return r;
            }
        } else {
            return cli_usage("unexpected argument '%s'", a);
        }
    }
    if (o->server == o->client)
        return cli_usage("give exactly one of -s (server) and -c (client)");
    if (o->client && !o->addr)
        return cli_usage("the client needs the server's address (-a)");
    if (o->client && o->persistent)
        return cli_usage("-P is a server option");
    if (o->p2p && o->rev < 2)
        return cli_usage("--p2p needs --rev 2");
    return -1;
}
