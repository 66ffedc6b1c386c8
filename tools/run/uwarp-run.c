/* uwarp-run: runs a program with libuwarp-preload.so preloaded, so that its
 * TCP sockets try SDP (docs/preload.md, "uwarp-run"; smc_run plays the same
 * part for SMC-R).
 *
 * It only prepares the environment and execs: LD_PRELOAD gets the library
 * in front of what is already there, and the options become the variables
 * the library reads (UWARP_PRELOAD_LOG, UWARP_PRELOAD_CONF,
 * UWARP_PRELOAD_TCP_ONLY). uwarp-run itself is never preloaded: the library
 * enters LD_PRELOAD only in the environment handed to execvp, and this
 * program links neither the library nor anything that opens a socket. The
 * rules file is parsed here with the library's own parser (conf.c), so a
 * mistake is reported before the program starts rather than in its log.
 *
 * Exit status: the program's own; 2 usage error; 125 uwarp-run could not
 * prepare the run (no library); 126 the program cannot be executed; 127 it
 * was not found (as the shells and env(1) do). */
/* realpath(3) is XSI. */
#define _XOPEN_SOURCE 700

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../cliutil.h"
#include "conf.h"

#define EXIT_USAGE 2
#define EXIT_SETUP 125
#define EXIT_CANNOT_RUN 126
#define EXIT_NOT_FOUND 127

#define LIB_NAME "libuwarp-preload.so"
/* The library reads at most this much and runs everything over TCP when a
 * file is larger (src/preload/init.c): the same limit here. */
#define CONF_MAX (1u << 20)

/* Baked in by tools/run.cmake. */
#ifndef UW_RUN_VERSION
#define UW_RUN_VERSION "unknown"
#endif

static const char help_text[] =
    "usage: uwarp-run [--log LEVEL] [--conf FILE] [--tcp-only] [--] PROGRAM [ARGS...]\n"
    "\n"
    "Runs PROGRAM with " LIB_NAME " preloaded: its TCP sockets (AF_INET and\n"
    "AF_INET6 SOCK_STREAM) use SDP over iWARP where the peer has it and stay\n"
    "plain TCP otherwise.\n"
    "\n"
    "Options (before PROGRAM; everything from PROGRAM on is PROGRAM's):\n"
    "  --log LEVEL   the library logs at LEVEL: error, warn, info or debug, to\n"
    "                stderr or $UWARP_PRELOAD_LOG_FILE (sets UWARP_PRELOAD_LOG)\n"
    "  --conf FILE   rules deciding which sockets try SDP (sets UWARP_PRELOAD_CONF;\n"
    "                default /etc/uwarp/preload.conf). The file is checked first:\n"
    "                an unreadable one is an error; a malformed one is reported and\n"
    "                PROGRAM runs over TCP only, as the library would do\n"
    "  --tcp-only    every socket stays plain TCP, whatever the rules say (sets\n"
    "                UWARP_PRELOAD_TCP_ONLY=1)\n"
    "  --help        this text\n"
    "  --version     the version\n"
    "\n"
    "The library: $UWARP_PRELOAD_LIB when set; else, for the uwarp-run of a build\n"
    "tree, that tree's src/preload/" LIB_NAME "; else the installed\n"
    "LIBDIR/uwarp/" LIB_NAME ". It goes in front of any LD_PRELOAD already set.\n"
    "\n"
    "Exit status: PROGRAM's; 2 usage error; 125 no library; 126 PROGRAM cannot\n"
    "be executed; 127 PROGRAM not found.\n";

__attribute__((format(printf, 1, 2))) static int usage(const char *fmt, ...)
{
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    cli_msg("%s", line);
    cli_msg("usage: uwarp-run [--log LEVEL] [--conf FILE] [--tcp-only] [--] PROGRAM "
            "[ARGS...]; 'uwarp-run --help' explains");
    return EXIT_USAGE;
}

static bool readable_file(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode) && access(path, R_OK) == 0;
}

/* The directory this program runs from (resolved), into dir. */
static bool self_dir(char *dir, size_t cap)
{
    ssize_t n = readlink("/proc/self/exe", dir, cap - 1);
    if (n <= 0 || (size_t)n >= cap - 1)
        return false;
    dir[n] = '\0';
    char *slash = strrchr(dir, '/');
    if (!slash)
        return false;
    *slash = '\0';
    return true;
}

static bool same_dir(const char *a, const char *b)
{
    char ra[PATH_MAX], rb[PATH_MAX];
    return realpath(a, ra) && realpath(b, rb) && strcmp(ra, rb) == 0;
}

/* Finds the library; returns 0 with its absolute path in out, or an exit
 * status after saying where it looked and what to do. */
static int find_library(char *out)
{
    const char *env = getenv("UWARP_PRELOAD_LIB");
    if (env && *env) {
        if (!readable_file(env) || !realpath(env, out)) {
            cli_msg("UWARP_PRELOAD_LIB=%s: %s", env,
                    access(env, F_OK) == 0 ? "not a readable file" : strerror(ENOENT));
            cli_msg("point UWARP_PRELOAD_LIB at " LIB_NAME ", or unset it to use the one "
                    "installed with uwarp-run");
            return EXIT_SETUP;
        }
        return 0;
    }
    char dir[PATH_MAX];
    bool have_dir = self_dir(dir, sizeof(dir));
#ifdef UW_RUN_BUILD_DIR
    /* The uwarp-run of a build tree uses that tree's library, never an
     * installed one of another version. */
    if (have_dir && same_dir(dir, UW_RUN_BUILD_DIR)) {
        if (readable_file(UW_RUN_BUILD_LIB) && realpath(UW_RUN_BUILD_LIB, out))
            return 0;
        cli_msg(LIB_NAME " is not built: this uwarp-run is in the build tree %s and looked "
                         "for %s",
                UW_RUN_BUILD_ROOT, UW_RUN_BUILD_LIB);
        cli_msg("build it with 'cmake --build %s', or set UWARP_PRELOAD_LIB to a "
                "built " LIB_NAME,
                UW_RUN_BUILD_ROOT);
        return EXIT_SETUP;
    }
#endif
    /* Installed: next to this program (an install moved with
     * 'cmake --install --prefix'), then where it was configured to go. */
    char rel[PATH_MAX] = "";
    if (have_dir) {
        int n = snprintf(rel, sizeof(rel), "%s/%s/uwarp/" LIB_NAME, dir, UW_RUN_BIN_TO_LIB);
        if (n > 0 && (size_t)n < sizeof(rel) && readable_file(rel) && realpath(rel, out))
            return 0;
    }
    if (readable_file(UW_RUN_INSTALL_LIB) && realpath(UW_RUN_INSTALL_LIB, out))
        return 0;
    char relr[PATH_MAX];
    /* Say the relative candidate without "bin/.." in it when possible. */
    if (have_dir) {
        char base[PATH_MAX];
        int n = snprintf(base, sizeof(base), "%s/%s", dir, UW_RUN_BIN_TO_LIB);
        if (n > 0 && (size_t)n < sizeof(base) && realpath(base, relr)) {
            size_t l = strlen(relr);
            snprintf(relr + l, sizeof(relr) - l, "/uwarp/" LIB_NAME);
        } else {
            snprintf(relr, sizeof(relr), "%s", rel);
        }
    }
    if (have_dir && strcmp(relr, UW_RUN_INSTALL_LIB) != 0)
        cli_msg(LIB_NAME " not found: looked for %s and %s", relr, UW_RUN_INSTALL_LIB);
    else
        cli_msg(LIB_NAME " not found: looked for %s", UW_RUN_INSTALL_LIB);
    cli_msg("install uwarp ('cmake --install BUILD-DIR'), or set UWARP_PRELOAD_LIB to the "
            "path of " LIB_NAME);
    return EXIT_SETUP;
}

/* Reads a whole rules file, up to CONF_MAX octets. Returns the text
 * (caller frees; *big when the file is larger) or NULL with errno set. */
static char *read_file(const char *path, size_t *len, bool *big)
{
    *big = false;
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    char *buf = malloc(CONF_MAX);
    size_t n = 0;
    if (buf) {
        n = fread(buf, 1, CONF_MAX, f);
        *big = n == CONF_MAX;
    }
    int err = ferror(f) ? errno : 0;
    fclose(f);
    if (!buf || err) {
        free(buf);
        errno = buf ? err : ENOMEM;
        return NULL;
    }
    *len = n;
    return buf;
}

/* Checks a rules file as the library will read it. Returns 0 when it could
 * be read, good or not (a malformed or oversized one is reported: the
 * library then runs the program over TCP), or -1 with errno set. */
static int check_conf(const char *path, const char *program)
{
    size_t len = 0;
    bool big;
    char *text = read_file(path, &len, &big);
    if (!text)
        return -1;
    uw_pl_conf *c = NULL;
    char err[512];
    int rc = big ? -EFBIG : uw_pl_conf_parse(text, len, &c, err, sizeof(err));
    free(text);
    if (rc == 0) {
        uw_pl_conf_free(c);
        return 0;
    }
    if (rc == -EFBIG)
        cli_msg("%s: larger than 1 MiB, more than the library reads", path);
    else if (rc == -ENOMEM)
        cli_msg("%s: out of memory while checking it", path);
    else
        cli_msg("%s:%s", path, err);
    cli_msg("%s is not usable: %s runs over TCP only until it is fixed (the rules: "
            "docs/preload.md, \"Configuration\")",
            path, program);
    return 0;
}

static int set(const char *name, const char *value)
{
    if (setenv(name, value, 1) == 0)
        return 0;
    cli_msg("cannot set %s: %s", name, strerror(errno));
    return EXIT_SETUP;
}

int main(int argc, char **argv)
{
    cli_set_prog("uwarp-run");
    const char *log = NULL, *conf = NULL;
    bool tcp_only = false;
    int i = 1;
    for (; i < argc; i++) {
        const char *a = argv[i], *val;
        if (strcmp(a, "--") == 0) {
            i++;
            break;
        }
        if (a[0] != '-' || a[1] == '\0')
            break; /* PROGRAM */
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            fputs(help_text, stdout);
            return fflush(stdout) == 0 ? 0 : EXIT_SETUP;
        }
        if (strcmp(a, "--version") == 0) {
            printf("uwarp-run (uwarp) %s\n", UW_RUN_VERSION);
            return fflush(stdout) == 0 ? 0 : EXIT_SETUP;
        }
        if (strcmp(a, "--tcp-only") == 0) {
            tcp_only = true;
            continue;
        }
        int r = cli_opt(argc, argv, &i, "--log", &val);
        if (r < 0)
            return EXIT_USAGE;
        if (r > 0) {
            if (strcmp(val, "error") && strcmp(val, "warn") && strcmp(val, "info") &&
                strcmp(val, "debug"))
                return usage("unknown log level '%s', expected error, warn, info or debug", val);
            log = val;
            continue;
        }
        r = cli_opt(argc, argv, &i, "--conf", &val);
        if (r < 0)
            return EXIT_USAGE;
        if (r > 0) {
            if (!*val)
                return usage("--conf needs a file name");
            conf = val;
            continue;
        }
        return usage("unknown option '%s' (options go before PROGRAM; '--' ends them)", a);
    }
    if (i >= argc)
        return usage("missing PROGRAM: which program should run with the library?");
    const char *program = argv[i];

    char lib[PATH_MAX];
    int rc = find_library(lib);
    if (rc)
        return rc;
    /* LD_PRELOAD separates entries with ':' and blanks: a path holding one
     * would load something else. */
    if (strpbrk(lib, ": \t")) {
        cli_msg("the library path '%s' holds ':' or a blank, which LD_PRELOAD cannot "
                "carry; move the library or set UWARP_PRELOAD_LIB to a path without them",
                lib);
        return EXIT_SETUP;
    }

    /* The rules file the library will read: checked now, so a mistake is
     * seen before the program starts. */
    if (conf) {
        char abs[PATH_MAX];
        if (check_conf(conf, program) != 0 || !realpath(conf, abs)) {
            cli_msg("--conf %s: %s", conf, strerror(errno));
            cli_msg("give --conf a readable rules file (docs/preload.md, \"Configuration\")");
            return EXIT_USAGE;
        }
        /* Absolute: the program may change directory before it reads it. */
        if ((rc = set("UWARP_PRELOAD_CONF", abs)) != 0)
            return rc;
    } else {
        const char *env = getenv("UWARP_PRELOAD_CONF");
        const char *path = env && *env ? env : "/etc/uwarp/preload.conf";
        if ((env && *env) || access(path, F_OK) == 0) {
            if (check_conf(path, program) != 0)
                cli_msg("warning: %s: %s (the library reads the rules from it)", path,
                        strerror(errno));
        }
    }
    if (log && (rc = set("UWARP_PRELOAD_LOG", log)) != 0)
        return rc;
    if (tcp_only && (rc = set("UWARP_PRELOAD_TCP_ONLY", "1")) != 0)
        return rc;

    const char *old = getenv("LD_PRELOAD");
    size_t need = strlen(lib) + (old ? strlen(old) : 0) + 2;
    char *preload = malloc(need);
    if (!preload) {
        cli_msg("out of memory");
        return EXIT_SETUP;
    }
    if (old && *old)
        snprintf(preload, need, "%s:%s", lib, old);
    else
        snprintf(preload, need, "%s", lib);
    if ((rc = set("LD_PRELOAD", preload)) != 0)
        return rc;
    free(preload);
    if (log && strcmp(log, "debug") == 0)
        cli_msg("LD_PRELOAD=%s", getenv("LD_PRELOAD"));

    execvp(program, argv + i);
    int e = errno;
    if (e == ENOENT) {
        if (strchr(program, '/'))
            cli_msg("%s: no such file", program);
        else
            cli_msg("%s: command not found (not in PATH)", program);
        return EXIT_NOT_FOUND;
    }
    cli_msg("%s: cannot execute: %s", program, strerror(e));
    return EXIT_CANNOT_RUN;
}
