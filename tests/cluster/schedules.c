/*
 * schedules.c - recurring tasks across failovers (issue 14): each slot of a schedule is
 * created exactly once, or skipped only as its catch_up says.
 *
 * (a) A per-second schedule (catch_up = all) on 3 nodes while, for 60 s, the primary is
 * killed (SIGKILL, then started again) and paused (SIGSTOP) past the takeover time and
 * below it, in turn. The slot ledger - every second from the schedule's first slot to the
 * last one recorded, and the tasks whose unique key names it - must show exactly one task
 * per slot, each run (the noop journal: a second run only as a new attempt).
 *
 * tests/cluster/schedules_catch_up.c has each catch_up mode after an outage of all nodes.
 * The ledger reads the database, not the logs: tasks by unique_key ("schedule:ID:TIME"),
 * and the schedules.<ID> state of the config document.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster.h"
#include "schedule_ledger.h"
#include "support.h"

#define SERVICE "sched"

TestSuite(cluster_schedules, .fini = cluster_cleanup_all, .timeout = 180);

static cluster_node_t *primary_node(cluster_t *c, cluster_primacy_t *p)
{
    if (!cluster_wait_primary(c, SERVICE, NULL, 15000, p))
        return NULL;
    return cluster_node_by_id(c, p->primary);
}

Test(cluster_schedules, every_slot_once_while_the_primary_is_killed_and_paused)
{
    cluster_options_t options = {
        .tag = "schedules",
        .services = {{.name = SERVICE,
                      .settings = "journal = @DIR@/journal\n"
                                  "schedule.beat = * * * * * * ; kind=beat ; catch_up=all ; "
                                  "catch_up_max=1000"}},
    };
    cluster_t *c = cluster_new(&options);
    cluster_primacy_t p;
    cluster_start_elected(c, 3, SERVICE, 10000, &p);
    ledger_state_t first, st;
    cluster_assert(c, ledger_wait_slot(c, SERVICE, "beat", 0, 10000, &first),
                   "the schedule never started");
    cluster_assert(c, ledger_wait_slot(c, SERVICE, "beat", first.last_slot + 3000, 10000, &st),
                   "the schedule does not advance");

    int kills = 0, long_pauses = 0, short_pauses = 0;
    int64_t start = test_now_ms();
    for (int round = 0; test_now_ms() - start < 60000; round++) {
        cluster_node_t *n = primary_node(c, &p);
        cluster_assert(c, n, "no primary (round %d)", round);
        switch (round % 3) {
        case 0: /* killed, then started again under its node id */
            cluster_node_kill(n);
            kills++;
            cluster_wait_primary(c, SERVICE, n->id, 15000, &p);
            cluster_node_start(n);
            break;
        case 1: /* paused past takeover_ms: another node takes over meanwhile */
            cluster_node_pause(n);
            long_pauses++;
            cluster_wait_primary(c, SERVICE, n->id, 15000, &p);
            test_sleep_ms(1000);
            cluster_node_resume(n);
            break;
        case 2: /* paused for less than the lease: it stays primary and catches up */
            cluster_node_pause(n);
            short_pauses++;
            test_sleep_ms(c->takeover_ms / 3);
            cluster_node_resume(n);
            break;
        }
        test_sleep_ms(3000);
    }
    /* Settle: every node up, the schedule past the end of the disruptions. */
    int64_t end_wall = test_now_ms();
    cluster_assert(c, primary_node(c, &p), "no primary after the disruptions");
    ledger_state_t last;
    int64_t settled = st.last_slot + (end_wall - start) + 2000;
    cluster_assert(c, ledger_wait_slot(c, SERVICE, "beat", settled, 20000, &last),
                   "the schedule did not catch up after the disruptions");

    ledger_t l;
    ledger_read(c, SERVICE, "beat", first.last_slot, last.last_slot, &l);
    int64_t missing = 0, doubled = 0;
    for (int64_t i = 0; i < l.n; i++) {
        missing += l.tasks[i] == 0;
        doubled += l.tasks[i] > 1;
    }
    fprintf(stderr,
            "schedules: %d kills, %d long pauses, %d short pauses in %lld s; ledger of %lld "
            "slots: %lld missing, %lld doubled, %lld before its first; state: created %lld, found "
            "already created %lld, skipped %lld\n",
            kills, long_pauses, short_pauses, (long long)((end_wall - start) / 1000),
            (long long)l.n, (long long)missing, (long long)doubled, (long long)l.before,
            (long long)last.created, (long long)last.existed, (long long)last.skipped);
    char why[256];
    cluster_assert(c, ledger_explained(&l, 0, 0, why, sizeof why), "%s", why);
    cluster_assert(c, l.before == 0, "%lld tasks for slots before the schedule started",
                   (long long)l.before);
    cluster_assert(c, last.skipped == 0, "%lld slots skipped with catch_up = all",
                   (long long)last.skipped);
    cluster_assert(c, l.n >= 60, "only %lld slots in the ledger", (long long)l.n);
    cluster_assert(c, last.created + last.existed >= l.n, "the state counts %lld + %lld "
                   "creations for %lld slots", (long long)last.created,
                   (long long)last.existed, (long long)l.n);
    cluster_assert(c, cluster_epochs_unique(c, SERVICE, why, sizeof why), "%s", why);

    /* Each slot's task ran; a second run only as a new attempt after a killed claim. */
    cluster_assert(c, cluster_wait_count(c, SERVICE, "{\"status\": \"succeeded\"}",
                                         last.created, 20000),
                   "not every slot's task succeeded");
    char *journal = test_replace_all("@DIR@/journal", "@DIR@", c->dir);
    cluster_journal_report_t r;
    cluster_journal_check(c, SERVICE, journal, &r);
    free(journal);
    fprintf(stderr, "schedules: journal %lld runs of %lld tasks, %lld repeated (%lld not a "
            "first attempt)\n", (long long)r.lines, (long long)r.tasks_in_db,
            (long long)r.duplicates, (long long)r.not_first_attempt);
    cluster_assert(c, r.malformed == 0 && r.unknown == 0, "journal: %s", r.example);
    cluster_assert(c, r.duplicates <= r.not_first_attempt,
                   "a task ran twice within one attempt: %s", r.example);
    ledger_free(&l);
    for (size_t i = 0; i < c->n_nodes; i++)
        if (c->nodes[i].pid > 0)
            cluster_node_stop_ok(&c->nodes[i], c->shutdown_grace_ms + 5000);
}
