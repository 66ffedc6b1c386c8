/* strerrordesc_np() is a GNU extension. */
#define _GNU_SOURCE
#include <string.h>

#include "uwarp/error.h"

/* Raw errno values (a failed socket() gives -EMFILE) are passed on as they
 * are, so the C library words them. strerror() may write a shared buffer;
 * strerrordesc_np() returns its constant table entry. */
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 32))
static const char *libc_message(int errnum)
{
    return strerrordesc_np(errnum);
}
#else
static const char *libc_message(int errnum)
{
    /* One buffer per thread: valid until this thread's next call. */
    static _Thread_local char buf[128];
#if defined(__GLIBC__)
    const char *m = strerror_r(errnum, buf, sizeof(buf)); /* the GNU variant */
    return m && strncmp(m, "Unknown error", 13) != 0 ? m : NULL;
#else
    return strerror_r(errnum, buf, sizeof(buf)) == 0 ? buf : NULL;
#endif
}
#endif

const char *uw_strerror(int err)
{
    switch (err) {
#define UW__ERR_MSG(name, value, msg) \
    case value:                       \
        return msg;
        UW_ERRNO_MAP(UW__ERR_MSG)
#undef UW__ERR_MSG
    case 0:
        return "success";
    default:
        break;
    }
    /* The uwarp range starts at -4000; errno values stay well below that. */
    const char *m = err < 0 && err > -4000 ? libc_message(-err) : NULL;
    return m ? m : "unknown error";
}

const char *uw_err_name(int err)
{
    switch (err) {
#define UW__ERR_NAME(name, value, msg) \
    case value:                        \
        return #name;
        UW_ERRNO_MAP(UW__ERR_NAME)
#undef UW__ERR_NAME
    case 0:
        return "OK";
    default:
        return "UNKNOWN";
    }
}
