/*
 * notify.c - sd_notify(3) messages to the service manager (see notify.h). Only send_state()
 * and the formatting of STATUS depend on libsystemd; without it they compile to nothing.
 * Called from the node's main thread only.
 */
#include "node/notify.h"

#include <stdarg.h>
#include <stdbool.h>

#ifdef COHORT_HAVE_SYSTEMD
#include <stdio.h>
#include <string.h>
#include <systemd/sd-daemon.h>

#include "core/log.h"

/* Sends one message (keeping NOTIFY_SOCKET for the next one); logs the first failure. */
static void send_state(const char *state)
{
    static bool failure_logged;
    int rc = sd_notify(0, state);
    if (rc < 0 && !failure_logged) {
        failure_logged = true;
        cohort_log_node(COHORT_LOG_WARN, "cannot notify the service manager (%s): %s", state,
                        strerror(-rc));
    }
}
#else
static void send_state(const char *state)
{
    (void)state;
}
#endif

bool cohort_notify_ready(void)
{
    static bool ready_sent;
    if (ready_sent)
        return false;
    ready_sent = true;
    send_state("READY=1");
    return true;
}

void cohort_notify_stopping(void)
{
    send_state("STOPPING=1");
}

void cohort_notify_status(const char *fmt, ...)
{
#ifdef COHORT_HAVE_SYSTEMD
    char message[512] = "STATUS=";
    size_t prefix = strlen(message);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(message + prefix, sizeof message - prefix, fmt, ap);
    va_end(ap);
    for (char *nl = strchr(message, '\n'); nl; nl = strchr(nl, '\n'))
        *nl = ' ';
    send_state(message);
#else
    (void)fmt;
#endif
}

int64_t cohort_notify_watchdog_interval_ms(void)
{
#ifdef COHORT_HAVE_SYSTEMD
    uint64_t usec = 0;
    if (sd_watchdog_enabled(0, &usec) <= 0 || usec == 0)
        return 0;
    int64_t ms = (int64_t)(usec / 4000);
    return ms > 0 ? ms : 1;
#else
    return 0;
#endif
}

void cohort_notify_watchdog(void)
{
    send_state("WATCHDOG=1");
}
