/*
 * settings_doc.c - renders the settings table as docs/CONFIGURATION.md (see settings.h).
 *
 * The committed file is exactly this output (tests/unit/settings.c compares them), so the
 * reference cannot drift from the parser: change a row, then regenerate with
 *   build/cohortd --print-settings=markdown > docs/CONFIGURATION.md
 * The prose around the tables is here too, kept short: the guides explain, this lists.
 */
#include "core/settings.h"

#include <inttypes.h>
#include <string.h>

#define DAY_MS (86400000LL)

static const char intro[] =
    "# Configuration reference\n"
    "\n"
    "<!-- Generated from the settings table (src/core/settings_table.c) by\n"
    "     `cohortd --print-settings=markdown`; do not edit by hand. After changing the table:\n"
    "     build/cohortd --print-settings=markdown > docs/CONFIGURATION.md -->\n"
    "\n"
    "A node reads one INI file (`cohortd -c cohort.ini`), parsed with\n"
    "[inih](https://github.com/benhoyt/inih): a `[cluster]` section for the node, and one\n"
    "`[service:NAME]` section per service it hosts. `NAME` is 1 to 64 characters from\n"
    "`A-Z a-z 0-9 _ -`. A node may host several services, and each service elects its primary\n"
    "on its own, so different nodes can lead different services.\n"
    "`deploy/cohort.example.ini` shows every key; `cohortd --check-config -c FILE` lists every\n"
    "problem of a file with its line number.\n"
    "\n"
    "The *changes* column says how a new value takes effect: *live* keys can be set for the\n"
    "whole cluster with `cohortctl settings set SERVICE KEY VALUE` (and a SIGHUP applies their\n"
    "file values), *SIGHUP* keys are re-read from the file by `kill -HUP`, and the others need\n"
    "a restart of the node (a SIGHUP that changes them is refused).\n";

static const char outro[] =
    "\n"
    "## Rules between keys\n"
    "\n"
    "- `takeover_ms` must be greater than `tick_ms`.\n"
    "- `stall_timeout_ms` must be at least `3 × tick_ms` (running tasks are checked in every\n"
    "  third of it).\n"
    "- A value set with `cohortctl settings set` is checked against the same ranges and rules,\n"
    "  with the other values in effect.\n"
    "\n"
    "## When the keys act\n"
    "\n"
    "- Claiming: when a claim finds work, the worker claims again at once; workers poll on the\n"
    "  tick only while the queue is empty.\n"
    "- The primary's maintenance runs every `stall_timeout_ms / 3`, at most 5 s apart: it\n"
    "  resets stalled tasks (with a warning that gives the count) and purges finished tasks past\n"
    "  their retention with an indexed delete, at most 1,000 per status per run, so a backlog\n"
    "  never stalls the tick (while one remains it runs again on the next tick). Tracked tasks\n"
    "  of a batch whose callback has not run yet are kept.\n"
    "- The primary advances tracked batches on every tick while a batch is active, every 5 s "
    "while none is.\n"
    "- A live setting set in the database wins over every node's file while it is set; every\n"
    "  node reads it on its next tick and logs the change.\n";

/* A duration as a person writes it: 1 h, 7 d, 250 ms. */
static void print_duration(FILE *out, int64_t ms)
{
    static const struct {
        int64_t ms;
        const char *unit;
    } units[] = {{DAY_MS, "d"}, {3600000, "h"}, {60000, "min"}, {1000, "s"}};
    if (ms == 0) {
        fputs("0", out);
        return;
    }
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
        if (ms % units[i].ms == 0) {
            fprintf(out, "%" PRId64 " %s", ms / units[i].ms, units[i].unit);
            return;
        }
    }
    fprintf(out, "%" PRId64 " ms", ms);
}

static void print_type(FILE *out, const cohort_setting_t *r)
{
    static const char *const names[] = {
        [COHORT_SETTING_DURATION_MS] = "duration (ms)",
        [COHORT_SETTING_COUNT] = "integer",
        [COHORT_SETTING_STRING] = "text",
        [COHORT_SETTING_PATH] = "path",
        [COHORT_SETTING_OPTION] = "text, for the handler",
    };
    if (r->type != COHORT_SETTING_ENUM) {
        fputs(names[r->type], out);
        return;
    }
    for (size_t i = 0; r->choices[i]; i++)
        fprintf(out, "%s`%s`", i ? ", " : "", r->choices[i]);
}

static void print_default(FILE *out, const cohort_setting_t *r)
{
    if (r->type == COHORT_SETTING_ENUM)
        fprintf(out, "`%s`", r->choices[r->def]);
    else if (r->def_text && (r->type == COHORT_SETTING_STRING))
        fprintf(out, "`%s`", r->def_text);
    else if (r->def_text)
        fputs(r->def_text, out);
    else if (r->type == COHORT_SETTING_STRING)
        fputs("empty", out);
    else if (r->type == COHORT_SETTING_DURATION_MS && r->def >= 1000) {
        fprintf(out, "`%" PRId64 "` (", r->def);
        print_duration(out, r->def);
        fputs(")", out);
    } else if (r->type != COHORT_SETTING_OPTION)
        fprintf(out, "`%" PRId64 "`", r->def);
}

static void print_range(FILE *out, const cohort_setting_t *r)
{
    if (r->type == COHORT_SETTING_DURATION_MS) {
        print_duration(out, r->min);
        fputs(" – ", out);
        print_duration(out, r->max);
    } else if (r->type == COHORT_SETTING_COUNT) {
        fprintf(out, "%" PRId64 " – %" PRId64, r->min, r->max);
    }
}

static void print_section(FILE *out, cohort_setting_section_t section, const char *title)
{
    fprintf(out, "\n## `%s`\n\n", title);
    fputs("| key | type | default | range | changes | meaning |\n", out);
    fputs("|---|---|---|---|---|---|\n", out);
    for (const cohort_setting_t *r = cohort_settings_table; r->name; r++) {
        if (r->section != section)
            continue;
        fprintf(out, "| `%s` | ", r->name);
        print_type(out, r);
        fputs(" | ", out);
        print_default(out, r);
        fputs(" | ", out);
        print_range(out, r);
        fprintf(out, " | %s | %s", r->live ? "live" : r->reloads ? "SIGHUP" : "restart", r->doc);
        if (r->env)
            fprintf(out, "; `%s` in the environment wins over it", r->env);
        fputs(" |\n", out);
    }
}

void cohort_settings_print_markdown(FILE *out)
{
    fputs(intro, out);
    print_section(out, COHORT_SECTION_CLUSTER, "[cluster]");
    print_section(out, COHORT_SECTION_SERVICE, "[service:NAME]");
    fputs(outro, out);
}
