// cli/run/hosts.h - emulated hosts for `pstrain run --link/--placement`:
// each host is a network namespace with one address on a private
// segment, a bridge in a namespace of its own ("the hub") joined to
// every host by a veth pair. With --link RATE each host's link is shaped
// in both directions with tbf: its eth0 (what it sends) and its port on
// the bridge (what it receives), so a host sends and receives at RATE at
// most, as with a switch and one network card per host; DELAY adds netem
// where the kernel has it, else every process holds each message it
// sends for DELAY (--send-delay, common/later.h). Processes of one
// host talk to each other over that host's loopback, unshaped.
//
// Nothing is made in the launcher's own namespace, so no interface,
// address or route of a job appears there. The names are pstrain-PID-
// START-hub and pstrain-PID-START-hK (the launcher's pid and start time,
// as for its socket folder): pti_hosts_up first deletes the namespaces of
// launchers that no longer exist (killed with kill -9), and
// pti_hosts_down deletes this launcher's. Built with iproute2's `ip` and
// `tc`; needs root (CAP_SYS_ADMIN and CAP_NET_ADMIN). Any other user
// gets them in a user namespace of the job's own (pti_hosts_userns):
// there the names are in a /run/netns of its own mount namespace, and
// everything goes when the job's last process does.
#ifndef PT_CLI_RUN_HOSTS_H
#define PT_CLI_RUN_HOSTS_H

#include "common/config.h"
#include "common/placement.h"

// pti_hosts_userns, for a job that needs hosts in a process that is not
// root, runs this same command in a child that is root of a new user
// namespace (and mount namespace) of its own, and sets *status to the
// child's exit status once it is done: the caller exits with it. Else
// (root, or no hosts) it returns 0 with *status -1 and the caller goes
// on. PT_EINVAL saying why when the system refuses user namespaces.
int pti_hosts_userns(const pti_config *c, int *status);

// pti_hosts_up makes c's hosts in h. PT_EINVAL saying why when this
// process may not (not root, see pti_hosts_userns; no `ip` or `tc`);
// PT_EIO naming the command that failed. Whatever was made is deleted
// then.
int pti_hosts_up(pti_hosts *h, const pti_config *c);

// pti_hosts_enter moves the calling process (a child about to exec) into
// host k. Returns 0, or an errno.
int pti_hosts_enter(const pti_hosts *h, uint32_t k);

// pti_hosts_down deletes h's namespaces (their links go with them);
// idempotent.
void pti_hosts_down(pti_hosts *h);

#endif // PT_CLI_RUN_HOSTS_H
