/*
 * schedules_catch_up.c - each catch_up mode of recurring tasks (issue 14) after a 10 s outage
 * of all nodes.
 *
 * Four per-second schedules on one service: none, latest, all with catch_up_max = 5, and all
 * with room for every missed slot. Every node is killed, 10 s pass, the nodes start again.
 * Per schedule, the ledger after the slot recorded before the outage must be `skipped` slots
 * without a task (the count the primary recorded) followed only by slots with exactly one
 * task, and `skipped` must be what the mode says of the slots missed: all of them (none),
 * all but the latest (latest), all but 5, or none.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster.h"
#include "schedule_ledger.h"
#include "support.h"

#define SERVICE "sched"

TestSuite(cluster_schedules_catch_up, .fini = cluster_cleanup_all, .timeout = 180);

static cluster_node_t *primary_node(cluster_t *c, cluster_primacy_t *p)
{
    if (!cluster_wait_primary(c, SERVICE, NULL, 15000, p))
        return NULL;
    return cluster_node_by_id(c, p->primary);
}

static const struct mode_case {
    const char *id;
    int64_t keep; /* missed slots run; -1: all of them */
} modes[] = {{"none", 0}, {"latest", 1}, {"five", 5}, {"every", -1}};

Test(cluster_schedules_catch_up, each_catch_up_mode_after_an_outage_of_all_nodes)
{
    cluster_options_t options = {
        .tag = "schedules_catch_up",
        .services = {{.name = SERVICE,
                      .settings = "schedule.none = * * * * * * ; catch_up=none\n"
                                  "schedule.latest = * * * * * * ; catch_up=latest\n"
                                  "schedule.five = * * * * * * ; catch_up=all ; catch_up_max=5\n"
                                  "schedule.every = * * * * * * ; catch_up=all ; "
                                  "catch_up_max=100"}},
    };
    cluster_t *c = cluster_new(&options);
    cluster_primacy_t p;
    cluster_start_elected(c, 2, SERVICE, 10000, &p);
    ledger_state_t before[4], after[4];
    for (size_t i = 0; i < 4; i++) {
        ledger_state_t first;
        cluster_assert(c, ledger_wait_slot(c, SERVICE, modes[i].id, 0, 10000, &first),
                       "%s never started",
                       modes[i].id);
        int64_t two_more = first.last_slot + 2000;
        cluster_assert(c, ledger_wait_slot(c, SERVICE, modes[i].id, two_more, 10000, &first),
                       "%s does not advance", modes[i].id);
    }
    for (size_t i = 0; i < c->n_nodes; i++)
        cluster_node_kill(&c->nodes[i]);
    /* What the killed primary created beyond its last record (it died in between). */
    int64_t predone[4];
    for (size_t i = 0; i < 4; i++) {
        cluster_assert(c, ledger_read_state(c, SERVICE, modes[i].id, &before[i]) &&
                              before[i].found,
                       "cannot read %s", modes[i].id);
        ledger_t l;
        ledger_read(c, SERVICE, modes[i].id, before[i].last_slot, before[i].last_slot, &l);
        predone[i] = l.after;
        ledger_free(&l);
    }
    test_sleep_ms(10000);
    for (size_t i = 0; i < c->n_nodes; i++)
        cluster_node_start(&c->nodes[i]);
    cluster_assert(c, primary_node(c, &p), "no primary after the outage");
    /* All four are settled by the same primary in the same round, so one moment (when its
     * primacy began) divides missed slots from on-time ones for all of them. `none` skips
     * exactly the missed ones: its count, shifted by where each schedule's last recorded
     * slot was, is how many each of the others missed. */
    int64_t none_missed = 0;
    for (size_t i = 0; i < 4; i++) {
        const struct mode_case *m = &modes[i];
        int64_t resumed = before[i].last_slot + 14000;
        cluster_assert(c, ledger_wait_slot(c, SERVICE, m->id, resumed, 20000, &after[i]),
                       "%s did not resume", m->id);
        ledger_t l;
        ledger_read(c, SERVICE, m->id, before[i].last_slot, after[i].last_slot, &l);
        int64_t skipped = after[i].skipped - before[i].skipped;
        if (i == 0)
            none_missed = skipped;
        int64_t missed = none_missed + (before[0].last_slot - before[i].last_slot) / 1000;
        int64_t want = m->keep < 0 ? 0 : missed > m->keep ? missed - m->keep : 0;
        fprintf(stderr,
                "schedules: catch_up %s: %lld slots since the last recorded before the outage: "
                "%lld missed, %lld skipped, then %lld with one task each\n",
                m->id, (long long)l.n, (long long)missed, (long long)skipped,
                (long long)(l.n - skipped));
        char why[256];
        cluster_assert(c, ledger_explained(&l, skipped, predone[i], why, sizeof why), "%s: %s", m->id,
                       why);
        /* The outage lasted 10 s and more: at least 9 whole slots came due without a node. */
        cluster_assert(c, missed >= 9, "%s: only %lld slots missed in a 10 s outage", m->id,
                       (long long)missed);
        cluster_assert(c, skipped == want, "%s: %lld skipped of %lld missed, expected %lld",
                       m->id, (long long)skipped, (long long)missed, (long long)want);
        ledger_free(&l);
    }
    for (size_t i = 0; i < c->n_nodes; i++)
        if (c->nodes[i].pid > 0)
            cluster_node_stop_ok(&c->nodes[i], c->shutdown_grace_ms + 5000);
}
