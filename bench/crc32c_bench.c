/* uwarp-crc-bench: CRC32c throughput of every available implementation at a
 * few buffer sizes, as a table or as JSON lines. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "uwarp/crc32c.h"

static const size_t SIZES[] = {64, 1024, 4096, 16 * 1024, 64 * 1024, 1024 * 1024};
#define NSIZES (sizeof(SIZES) / sizeof(SIZES[0]))
#define MAXSIZE (1024 * 1024)

/* Results land here so no call can be proven dead. */
static volatile uint32_t sink;

static void usage(FILE *f)
{
    fputs("usage: uwarp-crc-bench [--json] [--median] [--seconds S] [--help]\n"
          "\n"
          "Measures CRC32c throughput of every implementation this build and CPU\n"
          "support (auto is what uw_crc32c_update() does) at 64 B, 1, 4, 16 and\n"
          "64 KiB and 1 MiB, on one cache-hot buffer, with independent calls (as MPA\n"
          "checks each FPDU on its own).\n"
          "\n"
          "  --json       one JSON object per line instead of the table:\n"
          "               {\"impl\":..., \"size\":..., \"gbps\":..., \"ns_per_call\":...,\n"
          "               \"gbps_median\":...}\n"
          "  --median     the table shows each cell's median batch instead of its best\n"
          "  --seconds S  measuring time per cell (default 0.2); calibration and\n"
          "               warm-up add about a tenth of that\n"
          "  --help       this text\n"
          "\n"
          "Each cell reports its fastest batch (of about 100), the one least\n"
          "disturbed by other load on the machine, and its median batch: on a\n"
          "shared host the median is what a data path sees most of the time, and\n"
          "the two can differ by 1.5x. 1 GB/s = 10^9 octets/s.\n",
          f);
}

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static uint32_t run(uw_crc32c_impl impl, const uint8_t *buf, size_t size, uint64_t calls)
{
    uint32_t acc = 0;
    /* auto goes through the public entry point, exactly as the library uses it. */
    if (impl == UW_CRC32C_AUTO) {
        for (uint64_t i = 0; i < calls; i++)
            acc ^= uw_crc32c_update(uw_crc32c_init(), buf, size);
    } else {
        for (uint64_t i = 0; i < calls; i++)
            acc ^= uw_crc32c_update_impl(impl, uw_crc32c_init(), buf, size);
    }
    return acc;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

#define MAXBATCHES 1024

/* Returns the best nanoseconds per call, and the median in *median. */
static double measure(uw_crc32c_impl impl, const uint8_t *buf, size_t size, double seconds,
                      double *median)
{
    double per[MAXBATCHES];
    size_t n = 0;
    double budget = seconds * 1e9, t0, dt;
    uint64_t batch = 1;
    /* Doubling the batch until it lasts a hundredth of the budget both
     * calibrates and warms up caches, branch predictors and clocks. Short
     * batches give the best-of a chance to fall between other processes'
     * time slices on a busy machine. */
    for (;;) {
        t0 = now_ns();
        sink ^= run(impl, buf, size, batch);
        dt = now_ns() - t0;
        if (dt >= budget / 100 || batch >= ((uint64_t)1 << 40))
            break;
        batch *= 2;
    }
    double best = dt / (double)batch, spent = 0;
    do {
        t0 = now_ns();
        sink ^= run(impl, buf, size, batch);
        dt = now_ns() - t0;
        spent += dt;
        if (dt / (double)batch < best)
            best = dt / (double)batch;
        if (n < MAXBATCHES)
            per[n++] = dt / (double)batch;
    } while (spent < budget);
    qsort(per, n, sizeof(per[0]), cmp_double);
    *median = per[n / 2];
    return best;
}

static void size_label(char *out, size_t cap, size_t size)
{
    if (size >= 1024 * 1024)
        snprintf(out, cap, "%zu MiB", size / (1024 * 1024));
    else if (size >= 1024)
        snprintf(out, cap, "%zu KiB", size / 1024);
    else
        snprintf(out, cap, "%zu B", size);
}

int main(int argc, char **argv)
{
    int json = 0, med = 0;
    double seconds = 0.2;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--json")) {
            json = 1;
        } else if (!strcmp(argv[i], "--median")) {
            med = 1;
        } else if (!strcmp(argv[i], "--seconds") && i + 1 < argc) {
            char *end;
            seconds = strtod(argv[++i], &end);
            if (*end || end == argv[i] || !(seconds > 0 && seconds <= 3600)) {
                fprintf(stderr, "uwarp-crc-bench: --seconds wants a number in (0, 3600]\n");
                return 2;
            }
        } else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            return 0;
        } else {
            fprintf(stderr, "uwarp-crc-bench: unknown or incomplete argument '%s'\n", argv[i]);
            usage(stderr);
            return 2;
        }
    }

    uint8_t *buf = aligned_alloc(64, MAXSIZE);
    if (!buf) {
        fprintf(stderr, "uwarp-crc-bench: out of memory\n");
        return 1;
    }
    uint64_t x = 0x9E3779B97F4A7C15ull;
    for (size_t i = 0; i < MAXSIZE; i++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        buf[i] = (uint8_t)(x >> 56);
    }

    char label[32];
    if (!json) {
        printf("CRC32c throughput, GB/s (%s batch, %.3g s per cell)\n%-14s",
               med ? "median" : "best", seconds, "impl");
        for (size_t s = 0; s < NSIZES; s++) {
            size_label(label, sizeof(label), SIZES[s]);
            printf(" %9s", label);
        }
        putchar('\n');
    }
    for (int i = 0; i < UW_CRC32C_IMPL_COUNT; i++) {
        uw_crc32c_impl impl = (uw_crc32c_impl)i;
        if (!uw_crc32c_impl_available(impl))
            continue;
        if (!json)
            printf("%-14s", uw_crc32c_impl_name(impl));
        for (size_t s = 0; s < NSIZES; s++) {
            double mns;
            double ns = measure(impl, buf, SIZES[s], seconds, &mns);
            double gbps = (double)SIZES[s] / ns, mgbps = (double)SIZES[s] / mns;
            if (json)
                printf("{\"impl\":\"%s\",\"size\":%zu,\"gbps\":%.3f,\"ns_per_call\":%.3f,"
                       "\"gbps_median\":%.3f}\n",
                       uw_crc32c_impl_name(impl), SIZES[s], gbps, ns, mgbps);
            else
                printf(" %9.2f", med ? mgbps : gbps);
            fflush(stdout);
        }
        if (!json)
            putchar('\n');
    }
    free(buf);
    return 0;
}
