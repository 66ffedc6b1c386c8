/* A stand-in for libuwarp-preload.so in the uwarp-run tests: it does
 * nothing but say that it was loaded (when UW_RUN_MARK is set), so the
 * tests see ld.so really preload what uwarp-run put in LD_PRELOAD, and do
 * not depend on the real library being built. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

__attribute__((constructor)) static void mark(void)
{
    if (getenv("UW_RUN_MARK")) {
        static const char msg[] = "dummy preload loaded\n";
        ssize_t n = write(STDERR_FILENO, msg, strlen(msg));
        (void)n;
    }
}
