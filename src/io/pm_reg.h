/* Registering a port mapping with the local uwarp-pmd (docs/portmapper.md,
 * "Dynamic registration"): an Accepting Peer that listens on a TCP service
 * port and on an SDP port tells the daemon "requests for svc: answer sdp".
 * The mapping lives exactly as long as the connection to the daemon that
 * registered it: closing the descriptor (or dying) removes it. Internal to
 * the library (the SDP socket layer), not installed.
 *
 * The daemon grants a mapping only to root or to the user who owns every
 * listening TCP socket on both ports, so bind and listen on both first.
 *
 * Thread-safety: the functions keep no state of their own; one descriptor
 * must not be used by two threads at once.
 */
#ifndef UW_IO_PM_REG_H
#define UW_IO_PM_REG_H

#include <stdint.h>

#include "pm/ctl.h"

#define UW__PM_REG_TIMEOUT_MS 1000 /* timeout_ms <= 0 means this */

/* The control socket path a NULL path stands for: the environment variable
 * UWARP_PMD_CONTROL if set and not empty, else /run/uwarp/pmd.sock. Returns
 * path itself when not NULL. The string is the environment's or static. */
const char *uw__pm_control_path(const char *path);

/* Connects to the daemon's control socket (path NULL: uw__pm_control_path()),
 * asks for the mapping svc_port -> sdp_port and waits for the answer, at
 * most timeout_ms in all (<= 0: UW__PM_REG_TIMEOUT_MS). On success returns 0
 * and stores in *fd_out the connected descriptor, nonblocking and
 * close-on-exec: keep it open as long as the mapping must live and close it
 * to drop the mapping. It becomes readable (end of file) if the daemon goes
 * away, which also ends the mapping; it may carry further mappings
 * (uw__pm_reg_map). On error *fd_out is -1 and nothing stays registered.
 * Errors: UW_EPERM (the daemon refused: the caller does not own the
 * listening sockets of both ports; or no permission on the socket path),
 * UW_EADDRINUSE (svc_port is mapped already, statically or by a live
 * registration), UW_ENOENT (no daemon listening at the path, or the path is
 * "none"), UW_ETIMEDOUT, UW_ENOBUFS (the daemon's connection or mapping
 * limits), UW_EINVAL (port 0, NULL fd_out, path too long for a Unix socket),
 * UW_EPROTO (an answer that is not a reply), UW_EPIPE (the daemon closed the
 * connection without answering), UW_ENOMEM, or another reply's code. */
int uw__pm_register(const char *path, uint16_t svc_port, uint16_t sdp_port, int timeout_ms,
                    int *fd_out);

/* One more mapping on a descriptor from uw__pm_register(); it lives as long
 * as that descriptor. Same errors (except UW_ENOENT for a missing daemon);
 * UW_EPIPE when the daemon is gone. After UW_ETIMEDOUT or UW_EPROTO the
 * reply stream is out of step: close the descriptor. */
int uw__pm_reg_map(int fd, uint16_t svc_port, uint16_t sdp_port, int timeout_ms);

/* Drops this descriptor's mapping of svc_port, keeping the connection and
 * its other mappings. Errors: UW_ENOENT (this connection does not map
 * svc_port), and those of uw__pm_reg_map(). */
int uw__pm_reg_unmap(int fd, uint16_t svc_port, int timeout_ms);

#endif
