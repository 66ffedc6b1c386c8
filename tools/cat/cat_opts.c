/* uwarp-cat command line: options, checks and --help. */
#include <stdio.h>
#include <string.h>

#include "../cliutil.h"
#include "../rdmacli.h"
#include "cat.h"

static const char HELP[] =
    "usage: uwarp-cat [OPTIONS] -l [ADDR:]PORT    listen (MPA responder), serve one connection\n"
    "       uwarp-cat [OPTIONS] HOST PORT         connect (MPA initiator)\n"
    "\n"
    "Copies stdin to the peer and the peer's data to stdout over iWARP (RDMAP over\n"
    "MPA over TCP). Each read of stdin (up to --msg-size octets) becomes one RDMAP\n"
    "Send; the payload of every received Send is written to stdout in order. At\n"
    "stdin EOF this side closes its sending direction gracefully (queued Sends\n"
    "finish, then TCP FIN); the program exits once stdin is done and the peer has\n"
    "closed too.\n"
    "\n"
    "Options:\n"
    "  -l [ADDR:]PORT   listen on ADDR (default 0.0.0.0; [v6addr] for IPv6) and PORT;\n"
    "                   port 0 picks a free port, reported on stderr as\n"
    "                   'listening on ADDR:PORT'\n"
    "  --rev 1|2        highest MPA revision (default 2, RFC 6581 enhanced setup)\n"
    "  --markers        require markers in what we receive (RFC 5044 4.3)\n"
    "  --no-crc         prefer no CRC (the peer may still insist on one)\n"
    "  --p2p LIST       peer-to-peer model (RFC 6581 7) with RTR types from\n"
    "                   send,write,read: the initiator offers them and sends one\n"
    "                   the responder accepts; the responder accepts these\n"
    "  --ird N, --ord N inbound/outbound RDMA Read depth to negotiate (1..16383;\n"
    "                   16383 = 'no negotiation'; default 16)\n"
    "  --pd HEX         private data for our Request/Reply (at most 508 octets\n"
    "                   with --rev 2, 512 with --rev 1)\n"
    "  --reject         (responder) reject the connection, sending --pd\n"
    "  --accept-rev0    (responder) also accept RDMAC MPA revision 0 peers\n"
    "  --timeout S      limit for every connection setup wait and for inactivity\n"
    "                   after setup (seconds, fractions allowed); with -l, a\n"
    "                   connection must also arrive within S (and set up within\n"
    "                   another S). Default: the library's setup limits (10 s\n"
    "                   initiator, 5 s responder), no other limits\n"
    "  --msg-size N     largest message (1..1048576, default 65536); receive\n"
    "                   buffers are max(N, 65536) octets, so the peer's\n"
    "                   --msg-size must not exceed ours unless both are <= 65536\n"
    "  -v               print the negotiated parameters on stderr as one JSON line\n"
    "                   after setup: {\"rev\",\"crc\",\"markers_rx\",\"markers_tx\",\n"
    "                   \"ird\",\"ord\",\"p2p\",\"rtr\",\"peer_pd\"}; -vv also prints\n"
    "                   the library's log\n"
    "  -h, --help       this text\n"
    "\n"
    "Who sends first: in the client-server model (no --p2p) a responder sends\n"
    "nothing before the initiator's first message (RFC 5044 7.1.2), so the\n"
    "initiator opens with an empty Send, which writes nothing at the other end.\n"
    "With --p2p the RTR message has that role (RFC 6581 7.1).\n"
    "\n"
    "Flow control: RDMAP has none (a Send that finds no posted receive ends the\n"
    "connection with a Terminate), so two uwarp-cat peers rely on this: a\n"
    "uwarp-cat peer keeps 64 receives posted, re-posts each as soon as its data\n"
    "is on stdout, and lets the library stop reading the socket while 16\n"
    "completions are waiting, so TCP flow control holds the sender back. A\n"
    "sender keeps at most 8 Sends in flight. Other peers must post enough\n"
    "receives themselves.\n"
    "\n"
    "Exit status 0 means that all of stdin was handed to TCP and that both sides\n"
    "closed gracefully; whether the peer's side went well is its own exit status\n"
    "(a peer that has already closed its direction cannot send a Terminate).\n"
    "\n"
    "Exit status: 0 success; 1 usage error; 2 protocol, transport or I/O error\n"
    "(the message names the RFC error and the Terminate's layer/type/code);\n"
    "3 rejected by the peer (its private data is printed in hex); 4 timeout.\n";

static int parse_depth(const char *name, const char *v, uint16_t *out)
{
    uint32_t n;
    if (!cli_parse_u32(v, &n) || n > UW_MPA_NO_NEGOTIATION)
        return cli_usage("%s: '%s' is not a number in 1..16383", name, v);
    /* uw_conn_param treats 0 as "use the default (16)", so a depth of 0
     * cannot be asked for; say so rather than silently sending 16. */
    if (n == 0)
        return cli_usage("%s 0 is not supported (the library reads 0 as its default, 16)", name);
    *out = (uint16_t)n;
    return -1;
}

int cat_parse_args(int argc, char **argv, cat_opts *o)
{
    memset(o, 0, sizeof(*o));
    o->rev = 2;
    o->timeout_ms = -1;
    o->msg_size = CAT_MSG_DEFAULT;
    const char *pos[2];
    int npos = 0;
    bool rev_given = false;

    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = NULL;
        int r;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            fputs(HELP, stdout);
            return RC_EXIT_OK;
        } else if (!strcmp(a, "-v")) {
            o->verbose++;
        } else if (!strcmp(a, "-vv")) {
            o->verbose += 2;
        } else if (!strcmp(a, "-l")) {
            if (i + 1 >= argc)
                return cli_usage("-l needs [ADDR:]PORT");
            o->listen = true;
            o->listen_spec = argv[++i];
        } else if (!strcmp(a, "--markers")) {
            o->markers = true;
        } else if (!strcmp(a, "--no-crc")) {
            o->no_crc = true;
        } else if (!strcmp(a, "--reject")) {
            o->reject = true;
        } else if (!strcmp(a, "--accept-rev0")) {
            o->accept_rev0 = true;
        } else if ((r = cli_opt(argc, argv, &i, "--rev", &v)) != 0) {
            if (r < 0)
                return RC_EXIT_USAGE;
            if (rc_parse_rev(v, &o->rev) < 0)
                return RC_EXIT_USAGE;
            rev_given = true;
        } else if ((r = cli_opt(argc, argv, &i, "--p2p", &v)) != 0) {
            if (r < 0)
                return RC_EXIT_USAGE;
            if (rc_parse_rtr_list(v, &o->rtr) < 0)
                return cli_usage(
                    "--p2p takes a comma-separated list of send, write, read; got '%s'", v);
            o->p2p = true;
        } else if ((r = cli_opt(argc, argv, &i, "--ird", &v)) != 0) {
            if (r < 0 || (r = parse_depth("--ird", v, &o->ird)) >= 0)
                return RC_EXIT_USAGE;
        } else if ((r = cli_opt(argc, argv, &i, "--ord", &v)) != 0) {
            if (r < 0 || (r = parse_depth("--ord", v, &o->ord)) >= 0)
                return RC_EXIT_USAGE;
        } else if ((r = cli_opt(argc, argv, &i, "--pd", &v)) != 0) {
            if (r < 0)
                return RC_EXIT_USAGE;
            size_t n = strlen(v), bad = 0;
            if (n > 2 * UW_MPA_MAX_PD)
                return cli_usage("--pd: at most %u octets of private data", UW_MPA_MAX_PD);
            ssize_t got = cli_unhex(v, n, o->pd, &bad);
            if (got < 0)
                return cli_usage("--pd: not hex at character %zu of '%s'", bad + 1, v);
            o->pd_len = (size_t)got;
        } else if ((r = cli_opt(argc, argv, &i, "--timeout", &v)) != 0) {
            if (r < 0)
                return RC_EXIT_USAGE;
            if (!rc_parse_seconds(v, &o->timeout_ms) || o->timeout_ms == 0)
                return cli_usage("--timeout takes seconds (> 0, e.g. 5 or 0.5), not '%s'", v);
        } else if ((r = cli_opt(argc, argv, &i, "--msg-size", &v)) != 0) {
            if (r < 0)
                return RC_EXIT_USAGE;
            if (!cli_parse_u32(v, &o->msg_size) || o->msg_size == 0 || o->msg_size > CAT_MSG_MAX)
                return cli_usage("--msg-size takes 1..%u, not '%s'", CAT_MSG_MAX, v);
        } else if (a[0] == '-' && a[1] != '\0') {
            return cli_usage("unknown option '%s'", a);
        } else {
            if (npos == 2)
                return cli_usage("too many arguments ('%s')", a);
            pos[npos++] = a;
        }
    }

    if (o->listen) {
        if (npos)
            return cli_usage("-l takes no HOST PORT arguments ('%s')", pos[0]);
    } else {
        if (npos != 2)
            return cli_usage("give HOST PORT to connect, or -l [ADDR:]PORT to listen");
        o->host = pos[0];
        o->port = pos[1];
        if (o->reject)
            return cli_usage("--reject is for the responder (-l): an initiator has nothing to "
                             "reject");
        if (o->accept_rev0)
            return cli_usage("--accept-rev0 is for the responder (-l)");
    }
    /* RFC 6581 9: the IRD/ORD word and the RTR flags exist only in the
     * enhanced (Rev 2) frames. */
    if (o->rev == 1 && o->p2p)
        return cli_usage("--p2p needs --rev 2 (RFC 6581 enhanced connection setup)");
    if (o->rev == 1 && (o->ird || o->ord) && rev_given)
        return cli_usage("--ird/--ord need --rev 2 (the RFC 6581 word)");
    /* RFC 6581 9: in Rev 2 the 4-octet IRD/ORD word counts against the 512
     * octets of private data. */
    size_t pd_max = o->rev == 2 ? UW_MPA_MAX_PD - UW_MPA_ENH_WORD_LEN : UW_MPA_MAX_PD;
    if (o->pd_len > pd_max)
        return cli_usage("--pd: %zu octets, at most %zu with --rev %u", o->pd_len, pd_max,
                         (unsigned)o->rev);
    return -1;
}
