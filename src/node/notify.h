/*
 * notify.h - tells a service manager how the node is doing, through systemd's sd_notify
 * protocol: READY=1 once the node can work (database reached, services prepared),
 * STOPPING=1 when it begins to shut down, STATUS=... for `systemctl status`, and WATCHDOG=1
 * from the node's loop when the unit asks for it (WatchdogSec=, which systemd passes as
 * WATCHDOG_USEC), so a loop that stops turning gets the node restarted.
 *
 * Only a process started with NOTIFY_SOCKET (a Type=notify unit, or a test) sends anything;
 * elsewhere each call does nothing. Built without libsystemd (no COHORT_HAVE_SYSTEMD), the
 * calls compile to nothing. A failed send is logged once and otherwise ignored: the manager's
 * own start timeout is what reports a node that never became ready.
 */
#ifndef COHORT_NOTIFY_H
#define COHORT_NOTIFY_H

#include "cohort/handler.h"

/* READY=1, sent by the first call only; later calls do nothing. Returns whether this call was
 * the first. */
bool cohort_notify_ready(void);

/* STOPPING=1. */
void cohort_notify_stopping(void);

/* STATUS=<formatted text> (one line: newlines become spaces). */
void cohort_notify_status(const char *fmt, ...) COHORT_PRINTF(1, 2);

/* How often to send WATCHDOG=1, in ms: a quarter of WATCHDOG_USEC (at least 1 ms) when the
 * service manager asked this process for watchdog pings (sd_watchdog_enabled(3): WATCHDOG_USEC
 * set, and WATCHDOG_PID unset or this process's); 0 when it did not, or without libsystemd. */
int64_t cohort_notify_watchdog_interval_ms(void);

/* WATCHDOG=1: the caller's loop is still turning. */
void cohort_notify_watchdog(void);

#endif
