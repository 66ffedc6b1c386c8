/* uwarp-mpa: MPA (RFC 5044, RFC 6581) from the command line, for debugging
 * captures and cross-checking other implementations. The subcommands live in
 * mpa_stream.c, mpa_frame.c and mpa_demo.c; this file dispatches and holds the
 * help text, which is the tool's reference documentation. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cliutil.h"
#include "mpa_cmds.h"

static const char HELP_INTRO[] =
    "usage: uwarp-mpa COMMAND [OPTIONS]   (uwarp-mpa COMMAND --help for one command)\n"
    "\n"
    "MPA (RFC 5044 framing with the RFC 6581 enhancements) from the command line.\n"
    "Data goes to stdout, messages to stderr.\n"
    "\n"
    "Commands:\n"
    "  encode       frame ULPDUs (hex lines on stdin) into a Full Operation byte stream\n"
    "  decode       decode a Full Operation byte stream into JSON lines, one per FPDU\n"
    "  frame        write one MPA Request or Reply startup frame\n"
    "  parse-frame  print the fields of a startup frame as JSON\n"
    "  demo         RFC 5044 Figures 5 and 6 built, checked and decoded; CRC32c speed\n"
    "\n";

static const char HELP_STREAM_COMMON[] =
    "  --markers     markers every 512 octets of stream position (RFC 5044 4.3)\n"
    "  --no-crc      CRCs off (RFC 5044 4.4; the default is on)\n"
    "  --offset N    stream position of the first octet, 0..4294967295, decimal or\n"
    "                0x hex (default 0); positions wrap modulo 2^32. Markers sit at\n"
    "                positions that are multiples of 512.\n";

static const char HELP_ENCODE[] =
    "uwarp-mpa encode [--markers] [--no-crc] [--offset N]\n"
    "  Reads ULPDUs from stdin, one per line in hex (upper or lower case; spaces,\n"
    "  tabs and CR around the digits are ignored; an empty line is a zero-length\n"
    "  ULPDU), and writes the raw FPDU byte stream to stdout: each ULPDU framed at\n"
    "  the running stream position, with ULPDU_Length, pad, CRC32c (zero with\n"
    "  --no-crc) and, with --markers, the markers that fall inside it.\n"
    "  A ULPDU over 65535 octets, or one whose markers' FPDUPTR would not fit in\n"
    "  16 bits, cannot be framed (exit 2). On a bad line the FPDUs of the lines\n"
    "  before it have already been written.\n";

static const char HELP_DECODE[] =
    "uwarp-mpa decode [--markers] [--no-crc] [--offset N]\n"
    "  Reads a raw Full Operation byte stream from stdin, checks every FPDU (CRC\n"
    "  unless --no-crc; markers with --markers) and writes one JSON object per line:\n"
    "    {\"offset\":N,\"ulpdu_len\":N,\"crc\":\"ok\"|\"off\",\"ulpdu\":\"HEX\"}\n"
    "  offset is the stream position of the FPDU's first octet (a marker right in\n"
    "  front of its header belongs to it); ulpdu is lowercase hex without markers,\n"
    "  header, pad or CRC; crc is \"ok\" when checked, \"off\" with --no-crc.\n"
    "  Decoding stops at the first error, which is written as\n"
    "    {\"error\":\"NAME\",\"mpa_error\":CODE,\"offset\":N}\n"
    "  (exit 2, with an explanation on stderr). offset is the FPDU's position;\n"
    "  NAME and CODE (RFC 5044 section 8):\n"
    "    truncated        1  the input ends inside an FPDU\n"
    "    crc_mismatch     2  CRC32c does not match\n"
    "    ulpdu_too_long   2  ULPDU_Length above the receiver's maximum\n"
    "    marker_mismatch  3  a marker's FPDUPTR does not point at the FPDU header\n";

static const char HELP_FRAME[] =
    "uwarp-mpa frame --req|--rep [--rev N] [--markers] [--no-crc] [--reject]\n"
    "                [--ird N] [--ord N] [--p2p LIST] [--pd HEX]\n"
    "  Writes one startup frame (RFC 5044 7.1.1) to stdout.\n"
    "  --req, --rep   MPA Request (\"MPA ID Req Frame\") or Reply (\"MPA ID Rep Frame\")\n"
    "  --markers      set M (markers required on what this side receives)\n"
    "  --no-crc       clear C (C is set by default)\n"
    "  --reject       set R (Reply only)\n"
    "  --rev N        Rev, 0..255; default 2 with the RFC 6581 word, else 1\n"
    "  --ird N, --ord N\n"
    "                 RFC 6581 IRD/ORD, 0..16383; 16383 (0x3FFF) means no automatic\n"
    "                 negotiation and is the default for the one not given\n"
    "  --p2p LIST     peer-to-peer: sets A and the RTR flags for a comma-separated\n"
    "                 subset of send (B), write (C), read (D); '' sets A alone\n"
    "  --pd HEX       ULP private data (after the RFC 6581 word, if any)\n"
    "  Any of --ird, --ord, --p2p writes the 4-octet RFC 6581 word first in the\n"
    "  private data and sets S; that needs Rev 2 or more. PD_Length counts the word;\n"
    "  private data over 512 octets in all cannot be sent (exit 2).\n"
    "  Example: frame --req --rev 2 --no-crc --ird 1 --ord 1 is the Request Linux\n"
    "  siw sends: \"MPA ID Req Frame\" 10 02 00 04 00 01 00 01.\n";

static const char HELP_PARSE[] =
    "uwarp-mpa parse-frame\n"
    "  Reads one Request or Reply frame from stdin (private data up to 512 octets)\n"
    "  and prints its fields as one JSON line:\n"
    "    {\"key\":\"req\"|\"rep\",\"m\":B,\"c\":B,\"r\":B,\"s\":B,\"rev\":N,\"pd_length\":N,\n"
    "     \"ird\":N,\"ord\":N,\"a\":B,\"b\":B,\"c_rtr\":B,\"d\":B,\"pd\":\"HEX\",\"res\":N}\n"
    "  (on one line, no spaces). B is true or false, as on the wire. ird, ord, a, b,\n"
    "  c_rtr, d come from the RFC 6581 word and are null when the frame carries none\n"
    "  (it does when Rev >= 2 and S is set). pd is the private data after the word\n"
    "  (all of it without a word), lowercase hex, \"\" when empty. res is the 4\n"
    "  reserved bits of octet 16. Octets after the frame are ignored (noted on\n"
    "  stderr). An invalid frame (bad key, PD_Length over 512, S without room for\n"
    "  the word) or an incomplete one exits 2 with the reason on stderr.\n";

static const char HELP_DEMO[] =
    "uwarp-mpa demo [--json] [--no-bench]\n"
    "  Builds the FPDUs of RFC 5044 Figures 5 and 6 with the library, prints them\n"
    "  as annotated hex dumps, says whether they match the RFC's bytes, decodes\n"
    "  them back, then measures CRC32c speed (GB/s) of every implementation at\n"
    "  64 B, 1 KiB, 64 KiB and 1 MiB (about 2 s). --json prints one JSON object:\n"
    "    {\"figures\":[{\"figure\":5,\"offset\":N,\"match\":B,\"wire\":\"HEX\",\n"
    "      \"expected\":\"HEX\",\"crc\":\"HEX\",\"decoded\":B,\"decode_error\":null|\"NAME\"},\n"
    "      ...],\"crc32c\":[{\"impl\":\"NAME\",\"check_ok\":B,\n"
    "      \"gbps\":{\"64\":X,\"1024\":X,\"65536\":X,\"1048576\":X}},...],\"ok\":B}\n"
    "  --no-bench skips the measurement. Exits 0 only if both figures match the\n"
    "  RFC and decode back, else 2.\n";

static const char HELP_EXIT[] =
    "Exit codes:\n"
    "  0  success\n"
    "  1  usage: unknown option, bad number, bad hex on the command line or on an\n"
    "     input line (the message names the line)\n"
    "  2  protocol: decode error, invalid or incomplete frame, a ULPDU or private\n"
    "     data too long to frame, demo figures not matching the RFC\n"
    "  3  system: stdin or stdout failed, out of memory\n";

int mpa_help(const char *name)
{
    static cli_out o;
    out_init(&o, STDOUT_FILENO);
    bool all = name == NULL;
    if (all)
        out_str(&o, HELP_INTRO);
    if (all || strcmp(name, "encode") == 0) {
        out_str(&o, HELP_ENCODE);
        out_str(&o, HELP_STREAM_COMMON);
        out_str(&o, "\n");
    }
    if (all || strcmp(name, "decode") == 0) {
        out_str(&o, HELP_DECODE);
        if (all)
            out_str(&o,
                    "  --markers, --no-crc, --offset N: as for encode (both ends must agree)\n");
        else
            out_str(&o, HELP_STREAM_COMMON);
        out_str(&o, "\n");
    }
    if (all || strcmp(name, "frame") == 0) {
        out_str(&o, HELP_FRAME);
        out_str(&o, "\n");
    }
    if (all || strcmp(name, "parse-frame") == 0) {
        out_str(&o, HELP_PARSE);
        out_str(&o, "\n");
    }
    if (all || strcmp(name, "demo") == 0) {
        out_str(&o, HELP_DEMO);
        out_str(&o, "\n");
    }
    out_str(&o, HELP_EXIT);
    return out_flush(&o);
}

typedef struct command {
    const char *name;
    int (*run)(int argc, char **argv);
} command;

static const command COMMANDS[] = {
    {"encode", cmd_encode},           {"decode", cmd_decode}, {"frame", cmd_frame},
    {"parse-frame", cmd_parse_frame}, {"demo", cmd_demo},
};

static bool is_help(const char *a)
{
    return strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0;
}

int main(int argc, char **argv)
{
    cli_set_prog("uwarp-mpa");
    if (argc < 2)
        return cli_usage("missing command: encode, decode, frame, parse-frame or demo");
    if (is_help(argv[1]))
        return mpa_help(NULL);
    if (strcmp(argv[1], "help") == 0) {
        if (argc < 3)
            return mpa_help(NULL);
        for (size_t c = 0; c < sizeof(COMMANDS) / sizeof(COMMANDS[0]); c++)
            if (strcmp(argv[2], COMMANDS[c].name) == 0)
                return mpa_help(argv[2]);
        return cli_usage("no help for '%s': use encode, decode, frame, parse-frame or demo",
                         argv[2]);
    }

    for (size_t c = 0; c < sizeof(COMMANDS) / sizeof(COMMANDS[0]); c++) {
        if (strcmp(argv[1], COMMANDS[c].name) != 0)
            continue;
        static char prog[64];
        snprintf(prog, sizeof(prog), "uwarp-mpa %s", COMMANDS[c].name);
        cli_set_prog(prog);
        /* --help wins wherever it is, so a half-typed command line can ask. */
        for (int i = 2; i < argc; i++)
            if (is_help(argv[i]))
                return mpa_help(COMMANDS[c].name);
        return COMMANDS[c].run(argc - 1, argv + 1);
    }
    return cli_usage("unknown command '%s': use encode, decode, frame, parse-frame or demo",
                     argv[1]);
}
