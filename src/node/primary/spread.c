/*
 * spread.c - how long a vacant primacy waits for a node that leads fewer services (see
 * spread.h). Pure arithmetic on what the election passes in; no database, no clock.
 */
#include "node/primary/spread.h"

int64_t cohort_spread_wait_ms(int64_t held, int64_t tick_ms)
{
    return held > 0 ? held * tick_ms : 0;
}

bool cohort_spread_defer(const int64_t *held, bool vacant, int64_t *vacant_since_ms,
                         int64_t now_ms, int64_t tick_ms)
{
    if (!vacant) {
        *vacant_since_ms = 0;
        return true;
    }
    if (*vacant_since_ms == 0)
        *vacant_since_ms = now_ms;
    if (!held)
        return false;
    return now_ms - *vacant_since_ms < cohort_spread_wait_ms(*held, tick_ms);
}

void cohort_spread_count(int64_t *held, int64_t delta)
{
    if (held)
        *held += delta;
}
