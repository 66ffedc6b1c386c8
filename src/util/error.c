#include "uwarp/error.h"

const char *uw_strerror(int err)
{
    switch (err) {
#define UW__ERR_MSG(name, value, msg)                                                              \
    case value:                                                                                    \
        return msg;
        UW_ERRNO_MAP(UW__ERR_MSG)
#undef UW__ERR_MSG
    case 0:
        return "success";
    default:
        return "unknown error";
    }
}

const char *uw_err_name(int err)
{
    switch (err) {
#define UW__ERR_NAME(name, value, msg)                                                             \
    case value:                                                                                    \
        return #name;
        UW_ERRNO_MAP(UW__ERR_NAME)
#undef UW__ERR_NAME
    case 0:
        return "OK";
    default:
        return "UNKNOWN";
    }
}
