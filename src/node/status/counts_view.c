/*
 * counts_view.c - a service's queue counts without a scan per call (see counts_view.h).
 */
#include "node/status/counts_view.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "core/clock.h"
#include "node/status/api_json.h"
#include "store/queue_counts.h"

typedef struct cached {
    char service[72];
    int64_t mono_ms; /* when it was measured (monotonic); 0: empty slot */
    bson_t *snap;
} cached_t;

static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;
static cached_t cache[COHORT_COUNTS_CACHE_SLOTS];

static bool cache_get(const char *service, bson_t *snap)
{
    int64_t now = cohort_clock_monotonic_ms();
    bool hit = false;
    pthread_mutex_lock(&cache_lock);
    for (size_t i = 0; i < COHORT_COUNTS_CACHE_SLOTS && !hit; i++) {
        cached_t *c = &cache[i];
        if (c->mono_ms && now - c->mono_ms < COHORT_COUNTS_CACHE_MS &&
            strcmp(c->service, service) == 0) {
            bson_copy_to(c->snap, snap);
            hit = true;
        }
    }
    pthread_mutex_unlock(&cache_lock);
    return hit;
}

static void cache_put(const char *service, const bson_t *snap)
{
    pthread_mutex_lock(&cache_lock);
    cached_t *slot = &cache[0];
    for (size_t i = 0; i < COHORT_COUNTS_CACHE_SLOTS; i++) {
        if (strcmp(cache[i].service, service) == 0) {
            slot = &cache[i];
            break;
        }
        if (cache[i].mono_ms < slot->mono_ms)
            slot = &cache[i];
    }
    if (slot->snap)
        bson_destroy(slot->snap);
    snprintf(slot->service, sizeof slot->service, "%s", service);
    slot->snap = bson_copy(snap);
    slot->mono_ms = cohort_clock_monotonic_ms();
    pthread_mutex_unlock(&cache_lock);
}

/* A published snapshot serves when it is recent (three of its primary's paces), counts a
 * queue worth not scanning and has every reader's fields (an older primary's lacks `due`). */
static bool serves(const bson_t *snap, int64_t now)
{
    int64_t every = cohort_counts_every_ms(snap), fresh = COHORT_COUNTS_FRESH_MS;
    if (3 * every > fresh)
        fresh = 3 * every;
    return now - cohort_counts_measured_at(snap) <= fresh &&
           cohort_counts_total(snap) >= COHORT_COUNTS_SNAPSHOT_MIN && bson_has_field(snap, "due");
}

bool cohort_counts_view_get(cohort_store_t *store, mongoc_client_t *client, const char *service,
                            bson_t *snap, bson_error_t *error)
{
    bool found = false;
    if (!cohort_store_read_counts(store, client, service, snap, &found, error))
        return false;
    int64_t now = cohort_clock_cluster_ms();
    if (found && serves(snap, now))
        return true;
    bson_destroy(snap);
    bson_init(snap);
    if (cache_get(service, snap))
        return true;
    bson_destroy(snap);
    if (!cohort_store_measure_counts(store, client, service, now, 0, snap, error))
        return false;
    if (cohort_counts_total(snap) >= COHORT_COUNTS_SNAPSHOT_MIN)
        cache_put(service, snap);
    return true;
}

void cohort_counts_view_append_age(bson_t *out, const char *prefix, const bson_t *snap)
{
    char key[64];
    int64_t at = cohort_counts_measured_at(snap), age = cohort_clock_cluster_ms() - at;
    snprintf(key, sizeof key, "%sas_of", prefix);
    cohort_json_append_time(out, key, at);
    snprintf(key, sizeof key, "%sage_ms", prefix);
    BSON_APPEND_INT64(out, key, age > 0 ? age : 0);
}
