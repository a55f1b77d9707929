/*
 * schedules_ops.c - operating recurring tasks (issue 14) on a real node: what `cohortctl
 * schedules` shows, pause and resume, a schedule added by SIGHUP, and `cohortd
 * --check-config --explain-schedules`.
 *
 * - `schedules SERVICE --json` names the schedule, its series, last and next slot, and the
 *   task it created last with that task's status.
 * - pause: from the primary's next tick the schedule's slots are skipped and counted, none
 *   created; resume: it starts at the next slot, with no burst of the paused ones (the
 *   ledger after the pause is the skipped slots, then one task per slot).
 * - an unknown schedule id is refused with exit status 2.
 * - a schedule added to the file starts on the tick after SIGHUP.
 * - a successor finds the slots its dead predecessor created but did not record: counted
 *   as already created, none created twice.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster.h"
#include "core/timefmt.h"
#include "schedule_ledger.h"
#include "support.h"

#define SERVICE "sched"

TestSuite(cluster_schedules_ops, .fini = cluster_cleanup_all, .timeout = 120);

/* The schedule `id` of `schedules SERVICE --json` into *entry (initialised here). */
static bool listed(cluster_t *c, const char *id, bson_t *entry)
{
    const char *args[] = {"schedules", SERVICE, "--json", NULL};
    bson_t doc;
    int rc = cluster_run_ctl_json(c, args, &doc);
    cluster_assert(c, rc == 0, "cohortctl schedules --json exited %d", rc);
    bson_init(entry);
    bool found = false;
    bson_iter_t it, list;
    if (bson_iter_init_find(&it, &doc, "schedules") && BSON_ITER_HOLDS_ARRAY(&it) &&
        bson_iter_recurse(&it, &list)) {
        while (bson_iter_next(&list)) {
            uint32_t len;
            const uint8_t *data;
            if (!BSON_ITER_HOLDS_DOCUMENT(&list))
                continue;
            bson_iter_document(&list, &len, &data);
            bson_t one;
            bson_init_static(&one, data, len);
            bson_iter_t f;
            if (bson_iter_init_find(&f, &one, "id") && strcmp(bson_iter_utf8(&f, NULL), id) == 0) {
                bson_destroy(entry);
                bson_copy_to(&one, entry);
                found = true;
            }
        }
    }
    bson_destroy(&doc);
    return found;
}

static const char *text_at(const bson_t *doc, const char *dotted)
{
    bson_iter_t it, child;
    if (bson_iter_init(&it, doc) && bson_iter_find_descendant(&it, dotted, &child) &&
        BSON_ITER_HOLDS_UTF8(&child))
        return bson_iter_utf8(&child, NULL);
    return NULL;
}


Test(cluster_schedules_ops, list_pause_resume_reload_explain)
{
    cluster_options_t options = {
        .tag = "schedules_ops",
        .services = {{.name = SERVICE, .settings = "schedule.beat = * * * * * * ; kind=beat"}},
    };
    cluster_t *c = cluster_new(&options);
    cluster_primacy_t p;
    cluster_start_elected(c, 1, SERVICE, 10000, &p);
    ledger_state_t st;
    cluster_assert(c, ledger_wait_slot(c, SERVICE, "beat", 0, 10000, &st), "no state");
    cluster_assert(c, ledger_wait_slot(c, SERVICE, "beat", st.last_slot + 2000, 10000, &st),
                   "the schedule does not advance");

    /* What a user needs to trust it. */
    bson_t entry;
    cluster_assert(c, listed(c, "beat", &entry), "beat is not listed");
    cluster_assert(c, text_at(&entry, "state") && strcmp(text_at(&entry, "state"), "active") == 0,
                   "state");
    cluster_assert(c, strcmp(text_at(&entry, "series"), "* * * * * * @ UTC") == 0, "series");
    cluster_assert(c, text_at(&entry, "last_slot") && text_at(&entry, "next_slot"), "slots");
    const char *status = text_at(&entry, "last_task.status");
    cluster_assert(c, text_at(&entry, "last_task.id") && status &&
                          (strcmp(status, "pending") == 0 || strcmp(status, "claimed") == 0 ||
                           strcmp(status, "succeeded") == 0),
                   "last task: %s", status ? status : "(none)");
    bson_destroy(&entry);

    /* Pause: slots skipped from the next tick on; resume: no burst. */
    const char *pause[] = {"schedules", "pause", SERVICE, "beat", NULL};
    cluster_assert(c, cluster_run_ctl(c, pause) == 0, "schedules pause failed");
    test_sleep_ms(1000); /* the primary's next tick has seen it */
    ledger_state_t paused;
    cluster_assert(c, ledger_read_state(c, SERVICE, "beat", &paused), "state");
    cluster_assert(c, ledger_wait_slot(c, SERVICE, "beat", paused.last_slot + 3000, 10000, &st),
                   "a paused schedule's slots are not settled");
    cluster_assert(c, st.created == paused.created, "%lld slots created while paused",
                   (long long)(st.created - paused.created));
    cluster_assert(c, st.skipped >= paused.skipped + 3, "only %lld slots skipped while paused",
                   (long long)(st.skipped - paused.skipped));
    cluster_assert(c, listed(c, "beat", &entry), "beat is not listed");
    cluster_assert(c, strcmp(text_at(&entry, "state"), "paused") == 0, "state not paused");
    bson_destroy(&entry);
    const char *resume[] = {"schedules", "resume", SERVICE, "beat", NULL};
    cluster_assert(c, cluster_run_ctl(c, resume) == 0, "schedules resume failed");
    ledger_state_t resumed;
    cluster_assert(c, ledger_wait_slot(c, SERVICE, "beat", st.last_slot + 3000, 10000,
                                       &resumed),
                   "the schedule did not resume");
    cluster_assert(c, resumed.created > st.created, "nothing created after resume");
    ledger_t l;
    ledger_read(c, SERVICE, "beat", paused.last_slot, resumed.last_slot, &l);
    char why[256];
    cluster_assert(c, ledger_explained(&l, resumed.skipped - paused.skipped, 0, why, sizeof why),
                   "after pause and resume: %s", why);
    ledger_free(&l);

    const char *unknown[] = {"schedules", "pause", SERVICE, "nope", NULL};
    cluster_assert(c, cluster_run_ctl(c, unknown) == 2, "pausing an unknown schedule");

    /* A schedule added by SIGHUP starts on the next tick. */
    cluster_node_t *n = &c->nodes[0];
    cluster_node_config_set(n, "schedule.beat",
                            "* * * * * * ; kind=beat\nschedule.two = */2 * * * * * ; kind=two");
    cluster_node_reload(n);
    cluster_assert(c, cluster_wait_log(n, "schedule two added", NULL, 5000),
                   "the reload did not add schedule two");
    cluster_assert(c, ledger_wait_slot(c, SERVICE, "two", 0, 5000, &st), "two never started");
    cluster_assert(c, ledger_wait_slot(c, SERVICE, "two", st.last_slot + 2000, 10000, &st),
                   "two does not advance");
    cluster_assert(c, st.created >= 1, "two created nothing");

    /* --check-config --explain-schedules: the next 3 fire times of each, with its line. */
    char *cmd = NULL;
    cr_assert_geq(asprintf(&cmd, "%s --check-config --explain-schedules -c %s 2>&1",
                           test_build_path("cohortd"), n->config_path),
                  0);
    FILE *f = popen(cmd, "r");
    cr_assert_not_null(f);
    char line[512];
    int next_lines = 0, headers = 0;
    while (fgets(line, sizeof line, f)) {
        headers += strstr(line, "schedule.two = */2 * * * * *") != NULL &&
                   strstr(line, " line ") != NULL;
        next_lines += strncmp(line, "    20", 6) == 0;
    }
    int rc = pclose(f);
    free(cmd);
    cluster_assert(c, rc == 0, "--check-config exited %d", rc);
    cluster_assert(c, headers == 1 && next_lines == 6, "explain: %d headers, %d fire times",
                   headers, next_lines);

    cluster_node_stop_ok(n, c->shutdown_grace_ms + 5000);
}

/* A primary that dies after creating slots' tasks and before recording them: its successor
 * takes those slots as due, finds their tasks (counted as already created) and creates no
 * second one. The predecessor is played by the test, inserting the tasks with the slots'
 * unique keys while no node runs. */
Test(cluster_schedules_ops, a_successor_finds_the_slots_its_predecessor_created)
{
    cluster_options_t options = {
        .tag = "schedules_successor",
        .services = {{.name = SERVICE, .settings = "schedule.beat = * * * * * * ; catch_up=all"}},
    };
    cluster_t *c = cluster_new(&options);
    cluster_primacy_t p;
    cluster_start_elected(c, 1, SERVICE, 10000, &p);
    ledger_state_t st, before;
    cluster_assert(c, ledger_wait_slot(c, SERVICE, "beat", 0, 10000, &st), "no state");
    cluster_assert(c, ledger_wait_slot(c, SERVICE, "beat", st.last_slot + 2000, 10000, &st),
                   "the schedule does not advance");
    cluster_node_kill(&c->nodes[0]);
    cluster_assert(c, ledger_read_state(c, SERVICE, "beat", &before), "state");
    ledger_t l;
    ledger_read(c, SERVICE, "beat", before.last_slot, before.last_slot, &l);
    int64_t predone = l.after; /* the killed node's own unrecorded ones, if any */
    ledger_free(&l);
    for (int64_t k = predone + 1; k <= predone + 3; k++) {
        char key[128], opts[192], when[COHORT_TIME_TEXT_MAX];
        cohort_time_format(before.last_slot / 1000 * 1000 + k * 1000, when, sizeof when);
        snprintf(key, sizeof key, "schedule:beat:%s", when);
        snprintf(opts, sizeof opts, "{\"unique_key\": \"%s\", \"kind\": \"predecessor\"}", key);
        cluster_enqueue(c, SERVICE, NULL, opts, NULL);
    }
    test_sleep_ms(5000);
    cluster_node_start(&c->nodes[0]);
    ledger_state_t after;
    cluster_assert(c, ledger_wait_slot(c, SERVICE, "beat", before.last_slot + 9000, 20000,
                                       &after),
                   "the schedule did not resume");
    ledger_read(c, SERVICE, "beat", before.last_slot, after.last_slot, &l);
    char why[256];
    cluster_assert(c, ledger_explained(&l, 0, 0, why, sizeof why), "%s", why);
    fprintf(stderr, "schedules: successor: %lld slots, %lld found already created, %lld "
            "created, %lld skipped\n", (long long)l.n,
            (long long)(after.existed - before.existed),
            (long long)(after.created - before.created),
            (long long)(after.skipped - before.skipped));
    cluster_assert(c, after.existed - before.existed == predone + 3,
                   "%lld slots found already created, expected %lld",
                   (long long)(after.existed - before.existed), (long long)(predone + 3));
    cluster_assert(c, after.skipped == before.skipped, "slots skipped with catch_up = all");
    cluster_assert(c, cluster_try_count(c, SERVICE, "{\"kind\": \"predecessor\"}") == 3,
                   "the predecessor's tasks were replaced");
    ledger_free(&l);
    cluster_node_stop_ok(&c->nodes[0], c->shutdown_grace_ms + 5000);
}
