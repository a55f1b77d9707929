/*
 * metrics.c - the Prometheus text exposition of a node's metrics (see metrics.h).
 *
 * Each family is written once with its HELP and TYPE lines, then one sample per service,
 * as the format requires (all samples of a family together). Names follow Prometheus
 * conventions: base units (seconds), `_total` for counters, labels for the service and the
 * task status. Service names are [A-Za-z0-9_-] and need no escaping; the version label is
 * escaped all the same.
 */
#include "node/http/metrics.h"

#include <stdio.h>
#include <stdlib.h>

#include "core/status.h"
#include "node/primary/election.h"
#include "node/runtime.h"
#include "node/work/watch.h"
#include "store/store.h"

static void family(FILE *out, const char *name, const char *type, const char *help)
{
    fprintf(out, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* Writes a label value with the format's escapes: backslash, double quote, newline. */
static void label_value(FILE *out, const char *value)
{
    for (const char *p = value; *p; p++) {
        if (*p == '\\' || *p == '"')
            fprintf(out, "\\%c", *p);
        else if (*p == '\n')
            fputs("\\n", out);
        else
            fputc(*p, out);
    }
}

/* Microseconds as seconds, exactly: "1.000250". */
static void seconds_us(FILE *out, uint64_t us)
{
    fprintf(out, "%llu.%06llu", (unsigned long long)(us / 1000000),
            (unsigned long long)(us % 1000000));
}

typedef uint64_t (*service_counter_fn)(const cohort_service_t *service);

/* One reader per counter of the service's statistics, named as the field. */
#define SERVICE_COUNTER(field)                                                                 \
    static uint64_t field(const cohort_service_t *s)                                           \
    {                                                                                          \
        return atomic_load(&s->stats.field);                                                   \
    }
SERVICE_COUNTER(claimed)
SERVICE_COUNTER(succeeded)
SERVICE_COUNTER(failed)
SERVICE_COUNTER(timed_out)
SERVICE_COUNTER(retried)
SERVICE_COUNTER(stalled_reset)
SERVICE_COUNTER(purged)
SERVICE_COUNTER(batches_completed)
SERVICE_COUNTER(lost_claims)
SERVICE_COUNTER(ext_claimed)
SERVICE_COUNTER(ext_succeeded)
SERVICE_COUNTER(ext_failed)
SERVICE_COUNTER(ext_retried)
SERVICE_COUNTER(ext_released)
SERVICE_COUNTER(ext_lost)
SERVICE_COUNTER(leases_expired)
static uint64_t leader_changes(const cohort_service_t *s)
{
    return atomic_load(&s->election.leader_changes);
}

static const struct {
    const char *name;
    const char *help;
    service_counter_fn read;
} service_counters[] = {
    {"cohort_tasks_claimed_total", "Tasks this node claimed.", claimed},
    {"cohort_tasks_succeeded_total", "Tasks this node ran to success.", succeeded},
    {"cohort_tasks_failed_total", "Tasks this node recorded as failed for good.", failed},
    {"cohort_tasks_timed_out_total",
     "Tasks this node recorded as timed_out (ran past task_timeout_ms; never retried).",
     timed_out},
    {"cohort_tasks_retried_total", "Attempts on this node that ended in a retry.", retried},
    {"cohort_tasks_reset_total", "Stalled claimed tasks this node reset to pending as primary.",
     stalled_reset},
    {"cohort_tasks_purged_total",
     "Finished tasks this node deleted as primary after their retention.", purged},
    {"cohort_batches_completed_total",
     "Tracked batches whose completion this node recorded as primary.", batches_completed},
    {"cohort_claims_lost_total",
     "Outcomes not recorded because the claim had moved to another node.", lost_claims},
    {"cohort_leader_changes_total",
     "Times this node became primary of the service or stopped being it.", leader_changes},
    {"cohort_external_claimed_total",
     "Tasks this node handed to external workers (HTTP API claims).", ext_claimed},
    {"cohort_external_succeeded_total",
     "External workers' succeed calls this node recorded.", ext_succeeded},
    {"cohort_external_failed_total",
     "External workers' fail calls this node recorded as a final failure.", ext_failed},
    {"cohort_external_retried_total",
     "External workers' fail calls this node recorded as a retry.", ext_retried},
    {"cohort_external_released_total",
     "External workers' release calls this node recorded, and tasks of claims whose reply "
     "could not be delivered (back to pending, attempt not counted).",
     ext_released},
    {"cohort_external_lost_total",
     "External workers' calls refused with 409 lease_lost: nothing was written.", ext_lost},
    {"cohort_leases_expired_total",
     "External workers' leases that ran out, given back by this node as primary.",
     leases_expired},
};

static void counters(FILE *out, const cohort_metrics_source_t *src)
{
    for (size_t f = 0; f < sizeof service_counters / sizeof service_counters[0]; f++) {
        family(out, service_counters[f].name, "counter", service_counters[f].help);
        for (size_t i = 0; i < src->n_services; i++)
            fprintf(out, "%s{service=\"%s\"} %llu\n", service_counters[f].name,
                    src->services[i]->config->name,
                    (unsigned long long)service_counters[f].read(src->services[i]));
    }
}

static void histogram(FILE *out, const char *service, cohort_histogram_t *h)
{
    static const char *const le[COHORT_HISTOGRAM_BUCKETS] = {
        "0.001", "0.005", "0.01", "0.05", "0.1", "0.5", "1", "5", "10", "60", "+Inf"};
    uint64_t cumulative = 0;
    for (size_t b = 0; b < COHORT_HISTOGRAM_BUCKETS; b++) {
        cumulative += atomic_load_explicit(&h->buckets[b], memory_order_relaxed);
        fprintf(out, "cohort_task_duration_seconds_bucket{service=\"%s\",le=\"%s\"} %llu\n",
                service, le[b], (unsigned long long)cumulative);
    }
    fprintf(out, "cohort_task_duration_seconds_sum{service=\"%s\"} ", service);
    seconds_us(out, atomic_load_explicit(&h->sum_us, memory_order_relaxed));
    fprintf(out, "\ncohort_task_duration_seconds_count{service=\"%s\"} %llu\n", service,
            (unsigned long long)cumulative);
}

static void gauges(FILE *out, const cohort_metrics_source_t *src)
{
    family(out, "cohort_primary", "gauge",
           "1 while this node holds a valid primary lease for the service, else 0.");
    for (size_t i = 0; i < src->n_services; i++)
        fprintf(out, "cohort_primary{service=\"%s\"} %d\n", src->services[i]->config->name,
                cohort_election_has_lease(&src->services[i]->election) ? 1 : 0);
    family(out, "cohort_epoch", "gauge",
           "Epoch of this node's primacy of the service; 0 when it is not primary.");
    for (size_t i = 0; i < src->n_services; i++)
        fprintf(out, "cohort_epoch{service=\"%s\"} %lld\n", src->services[i]->config->name,
                (long long)cohort_election_epoch(&src->services[i]->election));
    family(out, "cohort_tasks_running", "gauge",
           "Tasks this node is claiming or running right now.");
    for (size_t i = 0; i < src->n_services; i++)
        fprintf(out, "cohort_tasks_running{service=\"%s\"} %zu\n", src->services[i]->config->name,
                cohort_service_running(src->services[i]));

    family(out, "cohort_worker_slots_wedged", "gauge",
           "Worker threads still inside a handler call whose task already timed out "
           "(isolation = thread cannot kill them); they serve again once it returns.");
    for (size_t i = 0; i < src->n_services; i++)
        fprintf(out, "cohort_worker_slots_wedged{service=\"%s\"} %lld\n",
                src->services[i]->config->name,
                (long long)atomic_load(&src->services[i]->wedged_slots));

    /* Only the primary counts the queue; a count from an earlier primacy is not shown. */
    family(out, "cohort_queue_tasks", "gauge",
           "Tasks in the service's queue by status, counted by the primary each tick "
           "(reported by the primary only).");
    for (size_t i = 0; i < src->n_services; i++) {
        cohort_service_t *s = src->services[i];
        int64_t epoch = cohort_election_epoch(&s->election);
        if (epoch == 0 || atomic_load(&s->queue_epoch) != epoch)
            continue;
        for (int k = 0; k < COHORT_STATUS_COUNT; k++)
            fprintf(out, "cohort_queue_tasks{service=\"%s\",status=\"%s\"} %lld\n", s->config->name,
                    cohort_status_names[k], (long long)atomic_load(&s->queue_counts[k]));
    }
}

/* The change streams (watch.h): shown with wake = change_stream only. */
static void wake_ups(FILE *out, const cohort_metrics_source_t *src)
{
    if (!src->watcher)
        return;
    family(out, "cohort_wakeups_total", "counter",
           "Inserts into the service's queue whose change stream event woke its idle workers.");
    for (size_t i = 0; i < src->n_services; i++)
        fprintf(out, "cohort_wakeups_total{service=\"%s\"} %llu\n",
                src->services[i]->config->name,
                (unsigned long long)cohort_watcher_wakeups(src->watcher, i));
    family(out, "cohort_wake_stream_up", "gauge",
           "1 while the change stream on the service's queue is open; 0 while new tasks are "
           "found on each tick only (polling).");
    for (size_t i = 0; i < src->n_services; i++)
        fprintf(out, "cohort_wake_stream_up{service=\"%s\"} %d\n",
                src->services[i]->config->name, cohort_watcher_up(src->watcher, i) ? 1 : 0);
}

static void node_wide(FILE *out, const cohort_metrics_source_t *src)
{
    cohort_store_stats_t db = cohort_store_stats(src->store);
    family(out, "cohort_db_commands_total", "counter", "MongoDB commands this node started.");
    fprintf(out, "cohort_db_commands_total %llu\n", (unsigned long long)db.commands);
    family(out, "cohort_db_command_errors_total", "counter",
           "MongoDB commands of this node that failed.");
    fprintf(out, "cohort_db_command_errors_total %llu\n", (unsigned long long)db.command_errors);
    family(out, "cohort_claims_attempted_total", "counter",
           "Claim attempts of this node's workers (a findAndModify or a batch claim round).");
    fprintf(out, "cohort_claims_attempted_total %llu\n", (unsigned long long)db.claims_attempted);
    family(out, "cohort_claims_empty_total", "counter", "Claim attempts that claimed nothing.");
    fprintf(out, "cohort_claims_empty_total %llu\n", (unsigned long long)db.claims_empty);
    family(out, "cohort_claim_candidates_lost_total", "counter",
           "Batch claim candidates another claimer took between the find and the update.");
    fprintf(out, "cohort_claim_candidates_lost_total %llu\n",
            (unsigned long long)db.claim_candidates_lost);
    family(out, "cohort_node_start_time_seconds", "gauge",
           "Start time of this node since the Unix epoch, in seconds.");
    fprintf(out, "cohort_node_start_time_seconds %lld.%03lld\n",
            (long long)(src->started_at_ms / 1000), (long long)(src->started_at_ms % 1000));
    family(out, "cohort_build_info", "gauge", "Always 1; the version of cohortd as a label.");
    fputs("cohort_build_info{version=\"", out);
    label_value(out, src->version ? src->version : "");
    fputs("\"} 1\n", out);
}

char *cohort_metrics_render(const cohort_metrics_source_t *src, size_t *len)
{
    char *text = NULL;
    size_t size = 0;
    FILE *out = open_memstream(&text, &size);
    if (!out)
        return NULL;
    counters(out, src);
    family(out, "cohort_task_duration_seconds", "histogram",
           "Time the handler's process_task took, per task run on this node.");
    for (size_t i = 0; i < src->n_services; i++)
        histogram(out, src->services[i]->config->name, &src->services[i]->stats.task_duration);
    gauges(out, src);
    wake_ups(out, src);
    node_wide(out, src);
    bool failed_writing = ferror(out) != 0;
    if (fclose(out) != 0 || failed_writing) {
        free(text);
        return NULL;
    }
    *len = size;
    return text;
}
