/*
 * primacy_sampler.c - the sampling and enqueueing thread of the rolling tests (see
 * primacy_sampler.h).
 */
#include "primacy_sampler.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "store/insert.h"
#include "store/nodes.h"
#include "store/services.h"
#include "store/store.h"
#include "support.h"

static void sample_once(cluster_sampler_t *s, cohort_store_t *store, mongoc_client_t *client,
                        int64_t *last_active, int64_t *last_epoch, int64_t *vacant_since)
{
    bson_t doc;
    bool found = false;
    bson_error_t error;
    int64_t now = test_now_ms();
    if (!cohort_store_read_service(store, client, s->service, &doc, &found, &error) || !found) {
        s->read_errors++;
        bson_destroy(&doc);
        return;
    }
    s->samples++;
    bson_iter_t it;
    bool has_primary = bson_iter_init_find(&it, &doc, "primary") && BSON_ITER_HOLDS_UTF8(&it);
    int64_t active = 0, epoch = 0;
    if (bson_iter_init_find(&it, &doc, "last_active") && BSON_ITER_HOLDS_DATE_TIME(&it))
        active = bson_iter_date_time(&it);
    if (bson_iter_init_find(&it, &doc, "epoch") && BSON_ITER_HOLDS_NUMBER(&it))
        epoch = bson_iter_as_int64(&it);
    bson_destroy(&doc);

    if (*last_active && active > *last_active && active - *last_active > s->max_refresh_gap_ms) {
        s->max_refresh_gap_ms = active - *last_active;
        s->gap_at_epoch = epoch;
    }
    if (active > *last_active)
        *last_active = active;
    if (epoch != *last_epoch) {
        s->epochs_seen++;
        *last_epoch = epoch;
    }
    /* A vacancy lasts from the first sample naming no primary to the first naming one. */
    if (!has_primary) {
        s->vacant_samples++;
        if (!*vacant_since)
            *vacant_since = now;
    }
    if (*vacant_since && (has_primary || atomic_load(&s->stop))) {
        if (now - *vacant_since > s->max_vacant_ms)
            s->max_vacant_ms = now - *vacant_since;
        if (has_primary)
            *vacant_since = 0;
    }
}

static void enqueue_once(cluster_sampler_t *s, cohort_store_t *store, mongoc_client_t *client)
{
    bson_error_t error;
    int64_t server_now = 0;
    bson_t *data = BCON_NEW("seq", BCON_INT64(s->enqueued + 1));
    cohort_new_task_t task = {.data = data, .created_by = s->created_by};
    bool ok = cohort_store_server_time(store, client, &server_now, &error);
    task.now_ms = server_now;
    ok = ok && cohort_store_insert_task(store, client, s->service, &task, NULL, NULL, NULL, &error);
    bson_destroy(data);
    if (ok) {
        s->enqueued++;
    } else {
        s->enqueue_errors++;
        snprintf(s->enqueue_error, sizeof s->enqueue_error, "%s", error.message);
    }
}

static void *sampler_main(void *arg)
{
    cluster_sampler_t *s = arg;
    bson_error_t error;
    cohort_store_t *store = cohort_store_new(s->uri, s->db, s->created_by, &error);
    if (!store) {
        snprintf(s->enqueue_error, sizeof s->enqueue_error, "no store: %s", error.message);
        s->enqueue_errors++;
        return NULL;
    }
    mongoc_client_t *client = cohort_store_pop(store);
    int64_t last_active = 0, last_epoch = 0, vacant_since = 0, previous = 0;
    while (!atomic_load(&s->stop)) {
        int64_t now = test_now_ms();
        if (previous && now - previous > s->max_sample_interval_ms)
            s->max_sample_interval_ms = now - previous;
        previous = now;
        sample_once(s, store, client, &last_active, &last_epoch, &vacant_since);
        if (s->enqueue)
            enqueue_once(s, store, client);
        int64_t spent = test_now_ms() - now;
        if (spent < CLUSTER_SAMPLE_MS)
            test_sleep_ms(CLUSTER_SAMPLE_MS - spent);
    }
    cohort_store_push(store, client);
    cohort_store_destroy(store);
    return NULL;
}

void cluster_sampler_start(cluster_t *c, cluster_sampler_t *s)
{
    s->uri = c->uri;
    s->db = c->db;
    if (!s->created_by)
        s->created_by = "primacy-sampler";
    atomic_init(&s->stop, false);
    cluster_assert(c, pthread_create(&s->thread, NULL, sampler_main, s) == 0,
                   "cannot start the sampler thread");
}

void cluster_sampler_stop(cluster_sampler_t *s)
{
    atomic_store(&s->stop, true);
    pthread_join(s->thread, NULL);
}

void cluster_sampler_print(const cluster_sampler_t *s, const char *tag)
{
    fprintf(stderr,
            "%s: service %s: %lld tasks enqueued; %lld samples (longest interval %lld ms, %lld "
            "read errors); longest time between refreshes of last_active %lld ms (ended by "
            "epoch %lld); longest run without a primary %lld ms (%lld samples); %lld epochs "
            "seen\n",
            tag, s->service, (long long)s->enqueued, (long long)s->samples,
            (long long)s->max_sample_interval_ms, (long long)s->read_errors,
            (long long)s->max_refresh_gap_ms, (long long)s->gap_at_epoch,
            (long long)s->max_vacant_ms, (long long)s->vacant_samples, (long long)s->epochs_seen);
}

bool cluster_wait_pinged_by_pid(cluster_t *c, cluster_node_t *n, int64_t timeout_ms)
{
    int64_t deadline = test_now_ms() + timeout_ms;
    char filter[128];
    snprintf(filter, sizeof filter, "{\"_id\": \"%s\", \"pid\": %d}", n->id, (int)n->pid);
    for (;;) {
        if (test_count(c->client, c->db, "nodes", filter) == 1)
            return true;
        if (test_now_ms() >= deadline)
            return false;
        test_sleep_ms(20);
    }
}
