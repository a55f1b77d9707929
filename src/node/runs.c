/*
 * runs.c - one process per node_id (see runs.h).
 */
#include "node/runs.h"

#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "core/clock.h"
#include "core/error.h"
#include "core/log.h"
#include "store/store.h"
#include "store/nodes.h"
#include "store/runs.h"

void cohort_run_init(cohort_run_t *run, const char *node_id)
{
    memset(run, 0, sizeof *run);
    run->node_id = node_id;
    uint8_t bytes[COHORT_RUN_ID_LEN / 2];
    size_t got = 0;
    while (got < sizeof bytes) {
        ssize_t n = getrandom(bytes + got, sizeof bytes - got, 0);
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    if (got < sizeof bytes) {
        /* No kernel randomness: an ObjectId (random per process, time, counter) still tells
         * two processes apart, which is all a run id is for. */
        bson_oid_t oid;
        bson_oid_init(&oid, NULL);
        memcpy(bytes, oid.bytes, sizeof oid.bytes);
        memset(bytes + sizeof oid.bytes, 0, sizeof bytes - sizeof oid.bytes);
    }
    for (size_t i = 0; i < sizeof bytes; i++)
        snprintf(run->run_id + 2 * i, 3, "%02x", bytes[i]);
}

static void sleep_ms(int64_t ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static bool is_live(const cohort_node_run_t *other, int64_t server_ms, int64_t liveness_ms)
{
    return other->run_id[0] && server_ms - other->seen_at_ms < liveness_ms;
}

/* "run R on host H, pid P, last seen N ms ago" */
static void describe(const cohort_node_run_t *other, int64_t server_ms, char *out, size_t len)
{
    snprintf(out, len, "run %s on host %s, pid %lld, last seen %lld ms ago", other->run_id,
             other->host[0] ? other->host : "?", (long long)other->pid,
             (long long)(server_ms - other->seen_at_ms));
}

cohort_run_start_t cohort_run_start(cohort_run_t *run, cohort_store_t *store,
                                    mongoc_client_t *client, int64_t liveness_ms,
                                    int64_t poll_ms, bson_error_t *error)
{
    int64_t server_ms;
    cohort_node_run_t other, first;
    if (!cohort_store_other_run(store, client, run->node_id, run->run_id, &server_ms, &first,
                                error))
        return COHORT_RUN_RETRY;
    other = first;
    /* Bounded however the server's clock behaves: a run not seen again by then is dead. */
    int64_t give_up = cohort_clock_monotonic_ms() + 2 * liveness_ms + 5000;
    char who[400];
    if (is_live(&first, server_ms, liveness_ms)) {
        describe(&first, server_ms, who, sizeof who);
        cohort_log_node(COHORT_LOG_INFO,
                        "another process with node_id '%s' checked in recently (%s): waiting up "
                        "to %lld ms to see whether it is still alive",
                        run->node_id, who, (long long)liveness_ms);
    }
    while (is_live(&other, server_ms, liveness_ms) && cohort_clock_monotonic_ms() < give_up) {
        /* Checked in again since the first look (or another run appeared): alive. */
        if (strcmp(other.run_id, first.run_id) != 0 || other.seen_at_ms > first.seen_at_ms) {
            describe(&other, server_ms, who, sizeof who);
            bson_set_error(error, COHORT_DOMAIN_USAGE, COHORT_CODE_INVALID,
                           "node_id '%s' is in use by another live process (%s): refusing "
                           "to start; give each process its own node_id, or stop the other "
                           "one first",
                           run->node_id, who);
            return COHORT_RUN_REFUSED;
        }
        sleep_ms(poll_ms);
        if (!cohort_store_other_run(store, client, run->node_id, run->run_id, &server_ms, &other,
                                    error))
            return COHORT_RUN_RETRY;
    }
    /* Nothing alive: earlier runs' entries are history. */
    if (!cohort_store_forget_runs(store, client, run->node_id, error))
        return COHORT_RUN_RETRY;
    run->since_ms = server_ms;
    run->started = true;
    return COHORT_RUN_STARTED;
}

void cohort_run_judge(cohort_run_t *run, const cohort_node_run_t *other, int64_t server_ms,
                      int64_t liveness_ms)
{
    if (!is_live(other, server_ms, liveness_ms)) {
        /* A run that stood back resumes only once the other ended cleanly (its entry gone).
         * One that merely stopped checking in may be in its database backoff with tasks
         * still running, under this same node_id that fences their outcomes: claiming then
         * would run tasks beside it (the chaos run of 26eda68, after about 1.4 s). */
        if (run->standing_back && other->run_id[0]) {
            if (run->clash)
                cohort_log_node(COHORT_LOG_ERROR,
                                "the other process with node_id '%s' (run %s) stopped checking "
                                "in but did not end cleanly: it may still run tasks (a "
                                "database outage), so this one keeps standing back. Stop this "
                                "process, or restart it once the other is stopped",
                                run->node_id, other->run_id);
            run->clash = false;
            return;
        }
        if (run->clash)
            cohort_log_node(COHORT_LOG_INFO,
                            "no other live process uses node_id '%s' any more%s",
                            run->node_id, run->standing_back ? ": claiming again" : "");
        run->clash = run->standing_back = false;
        return;
    }
    bool newer = run->since_ms > other->since_ms ||
                 (run->since_ms == other->since_ms && strcmp(run->run_id, other->run_id) > 0);
    run->clash = true;
    run->standing_back = newer;
    char who[400];
    describe(other, server_ms, who, sizeof who);
    cohort_log_node(COHORT_LOG_ERROR,
                    "node_id '%s' is used by two live processes: this one (run %s) and %s; %s. "
                    "Give each process its own node_id and stop one of them",
                    run->node_id, run->run_id, who,
                    newer ? "this one started later and stands back: it claims neither primacy "
                            "nor tasks while the other runs"
                          : "the other started later and stands back");
}

void cohort_run_end(cohort_run_t *run, cohort_store_t *store, mongoc_client_t *client)
{
    if (!run->started)
        return;
    bson_error_t error;
    if (!cohort_store_end_run(store, client, run->node_id, run->run_id, &error))
        cohort_log_node(COHORT_LOG_WARN,
                        "could not remove this run from the node's document (%s): the next "
                        "start with node_id '%s' waits until this run's check-in is stale",
                        error.message, run->node_id);
}
