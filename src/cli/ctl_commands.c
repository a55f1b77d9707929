/*
 * ctl_commands.c - cohortctl's command line, described once (see help.h): its global options
 * and every command with its synopsis, summary and options. ctl_main.c dispatches on these
 * rows; each command builds its getopt_long() array from its own row (ctl_longopts), and the
 * help, the man page cohortctl.1 and the bash completion are rendered from them. Adding a
 * command is adding a row (and its cmd_* function).
 */
#include "cli/ctl.h"

#define DUR_TIME                                                                               \
    "DUR: 250ms, 30s, 5m, 2h, 1d or a number of ms; TIME: ms since the epoch or UTC like "     \
    "2026-11-21T10:00:00Z."

static const cli_option_t global_options[] = {
    {"config", "FILE", 'c', CLI_SHORT,
     "take the database (mongodb_uri, database) from FILE's [cluster] section, and the "
     "defaults of enqueue and settings from its service sections",
     NULL},
    {"database", "NAME", 'd', CLI_SHORT, "without -c: the database (default cohort)", NULL},
    {"help", NULL, 'h', CLI_SHORT, "print this help (every command and option) and exit", NULL},
    {"version", NULL, 'V', CLI_LONG_ONLY,
     "print the release, the database schema version, the handler ABI range and libmongoc's "
     "version, and exit",
     NULL},
    {"print-man", NULL, 'M', CLI_LONG_ONLY, "print the man page cohortctl(1) (roff) and exit",
     NULL},
    {"print-completion", NULL, 'B', CLI_LONG_ONLY,
     "print the bash completion script and exit", NULL},
    {NULL, NULL, 0, 0, NULL, NULL},
};

#define JSON_OPTION {"json", NULL, 'j', CLI_LONG_ONLY, "print one JSON document", NULL}
#define KIND_OPTION                                                                            \
    {"kind", "K", 'k', CLI_LONG_ONLY, "only tasks of kind K (default: the whole service)", NULL}
#define END_OPTIONS {NULL, NULL, 0, 0, NULL, NULL}
#define LIMIT_OPTION                                                                           \
    {"limit", "N", 'l', CLI_LONG_ONLY, "change at most N tasks (by pages of 1000)", NULL}
#define DRY_RUN_OPTION                                                                         \
    {"dry-run", NULL, 'n', CLI_LONG_ONLY, "print how many tasks would change; change nothing", \
     NULL}

static const cli_option_t pause_options[] = {
    KIND_OPTION,
    {"reason", "TEXT", 'r', CLI_LONG_ONLY, "why, shown by status (at most 1000 bytes)", NULL},
    END_OPTIONS,
};
static const cli_option_t block_options[] = {
    KIND_OPTION,
    {"reason", "TEXT", 'r', CLI_LONG_ONLY,
     "why, shown by status (required, at most 1000 bytes)", NULL},
    END_OPTIONS,
};
static const cli_option_t clear_options[] = {KIND_OPTION, END_OPTIONS};
static const cli_option_t json_options[] = {JSON_OPTION, END_OPTIONS};

const cli_command_t ctl_commands[] = {
    {"help", cmd_help, "[COMMAND]", "print the help of every command, or of one", NULL, NULL},
    {"status", cmd_status, "[--json]",
     "per service: its primary (node, epoch, last active), its task counts by status, and what "
     "is paused or blocked. Queues with tasks but no service document are listed too, marked "
     "(no service document).",
     NULL, json_options},
    {"enqueue", cmd_enqueue,
     "SERVICE [--count N] [--data JSON|@FILE|-] [--from FILE] [--tracked] [--create] "
     "[task options]",
     "insert tasks: one (its id is printed) or N (their number is printed)",
     "The service must exist (a node has run it); --create makes it first. Ctrl-C or SIGTERM "
     "during --count N stops after the current bulk write, prints how many went in and exits "
     "130. The task options are those of cohort_task_create() and the API (docs/API.md); "
     "with --coalesce-key or --unique-key, --count N creates one by one and prints "
     "created=N coalesced=N (or existing=N). " DUR_TIME,
     ctl_enqueue_options},
    {"pause", cmd_switch, "SERVICE [--kind K] [--reason TEXT]",
     "the owner's switch: paused tasks stay pending, unclaimed; nodes apply it by their next "
     "tick and let running tasks finish",
     NULL, pause_options},
    {"resume", cmd_switch, "SERVICE [--kind K]", "clear the pause", NULL, clear_options},
    {"block", cmd_switch, "SERVICE [--kind K] --reason TEXT",
     "the operator's switch, shown with its reason; like pause otherwise", NULL, block_options},
    {"unblock", cmd_switch, "SERVICE [--kind K]", "clear the block", NULL, clear_options},
    {"counts", cmd_counts, "SERVICE [--by status|kind|group] [--json]",
     "task counts by status (default), or kind or group x status", NULL,
     (const cli_option_t[]){
         {"by", "WHAT", 'b', CLI_LONG_ONLY, "status (default), kind or group",
          "status kind group"},
         JSON_OPTION,
         END_OPTIONS,
     }},
    {"tasks", cmd_tasks, "SERVICE [--status S] [--limit N] [--json]",
     "tasks in claim order: priority, then due time, then id", NULL,
     (const cli_option_t[]){
         {"status", "S", 's', CLI_LONG_ONLY, "only tasks in status S (default: any)",
          "pending claimed succeeded failed timed_out cancelled"},
         {"limit", "N", 'l', CLI_LONG_ONLY, "at most N tasks (default 50)", NULL},
         JSON_OPTION,
         END_OPTIONS,
     }},
    {"task", cmd_task, "SERVICE ID",
     "one task's whole document as JSON; its history tells the story of each attempt", NULL,
     NULL},
    {"retry", cmd_retry,
     "SERVICE ID | SERVICE --status failed|timed_out|cancelled [--kind K] [--limit N] "
     "[--dry-run]",
     "back to pending and due now, attempts from 0; last_error and the history stay, with a "
     "retried entry",
     "Prints how many tasks it changed. A task in another status is refused, naming it. A "
     "tracked task whose batch has completed joins the open batch.",
     (const cli_option_t[]){
         {"status", "S", 's', CLI_LONG_ONLY, "every task in status S",
          "failed timed_out cancelled"},
         KIND_OPTION,
         LIMIT_OPTION,
         DRY_RUN_OPTION,
         END_OPTIONS,
     }},
    {"cancel", cmd_cancel,
     "SERVICE ID | SERVICE [--status pending] [--kind K] [--group G] [--limit N] [--dry-run]",
     "pending tasks end cancelled, a final status: never claimed, purged like failed ones, done "
     "for their batch",
     "Prints how many tasks it changed. A claimed (running) task given by id is asked to stop "
     "(its cancel_requested flag, which an external worker reads in its next heartbeat). A "
     "selection needs --status pending (all of them), --kind or --group.",
     (const cli_option_t[]){
         {"status", "S", 's', CLI_LONG_ONLY, "pending, the only status a cancel applies to",
          "pending"},
         KIND_OPTION,
         {"group", "G", 'g', CLI_LONG_ONLY, "only tasks of group G", NULL},
         LIMIT_OPTION,
         DRY_RUN_OPTION,
         END_OPTIONS,
     }},
    {"delete", cmd_delete,
     "SERVICE ID | SERVICE --status S [--older-than DUR] [--limit N] [--dry-run]",
     "delete tasks in a final status (succeeded, failed, timed_out, cancelled)",
     "Prints how many tasks it deleted. A pending or claimed task is refused, naming its "
     "status; tracked tasks of a batch whose completion callback has not run yet stay. "
     DUR_TIME,
     (const cli_option_t[]){
         {"status", "S", 's', CLI_LONG_ONLY, "every task in status S",
          "succeeded failed timed_out cancelled"},
         {"older-than", "DUR", 'o', CLI_LONG_ONLY, "only tasks finished longer than DUR ago",
          NULL},
         LIMIT_OPTION,
         DRY_RUN_OPTION,
         END_OPTIONS,
     }},
    {"data", cmd_data, "get|set|unset|inc|cas SERVICE KEY [JSON | DELTA | EXPECTED NEW]",
     "the service's generic data: get KEY, set KEY to any JSON value, unset KEY, inc KEY by "
     "DELTA (default 1), or cas: set KEY to NEW only while it holds EXPECTED",
     "inc adds DELTA (a 64-bit integer, negative too) to an integer value in one atomic "
     "update (a missing key starts at 0) and prints the new value; a value that is not an "
     "integer, or a sum that would overflow, is refused (exit 2) and nothing changes. cas "
     "compares whole values as MongoDB's $eq does (1 equals 1.0; an array is not its "
     "elements); EXPECTED null means the key is absent and NEW null removes it. cas exits 0 "
     "when it set the key, and 3 when the key holds another value: that value is printed "
     "(null when absent) and nothing changes. Neither is fenced: like cohort_data_inc and "
     "cohort_data_cas from process_task, no concurrent update is lost.",
     NULL},
    {"settings", cmd_settings, "get|set|unset SERVICE [KEY [VALUE]]",
     "live settings (tick_ms, takeover_ms, primary_task_count, secondary_task_count, "
     "stall_timeout_ms, *_retention_ms): while set, the database value wins over the config "
     "file",
     "settings get SERVICE | settings set SERVICE KEY VALUE | settings unset SERVICE KEY. "
     "A duration VALUE takes the config file's units (5s, 250ms, 30m; a bare number is ms). "
     "A change is checked against every live node's own values (its config file's, which "
     "the database's override): one that a node would refuse is refused, naming the node; "
     "get lists the nodes whose values differ, and any node that cannot apply the database's "
     "values.",
     (const cli_option_t[]){
         {"force", NULL, 'f', CLI_LONG_ONLY,
          "set or unset a takeover_ms under 3 x a live node's measured database round trip "
          "(p99) all the same",
          NULL},
         END_OPTIONS,
     }},
    {"step-down", cmd_step_down, "SERVICE [--timeout DUR]",
     "the service's primary gives up its primacy cleanly on its next tick; another node takes "
     "over within a few ticks",
     "Asks (step_down in the config document, fenced on the primary's epoch): the primary "
     "stops acting, then clears its primacy, as on SIGTERM, so two primaries never act at "
     "once; it then leaves the primacy to the other nodes for one lease (alone, it takes it "
     "back after that). Waits until another node is primary and prints it; exits 1 and "
     "withdraws the request if the primary did not step down within --timeout, 2 if the "
     "service has no primary.",
     (const cli_option_t[]){
         {"timeout", "DUR", 't', CLI_LONG_ONLY,
          "how long to wait for the primacy to move (default 30s)", NULL},
         END_OPTIONS,
     }},
    {"nodes", cmd_nodes, "[--json]", "nodes seen in the last day: live or expired, last ping",
     NULL, json_options},
    {"schedules", cmd_schedules, "SERVICE [--json] | pause|resume SERVICE ID",
     "recurring tasks (schedule.ID lines): per schedule its times, last slot, next slot, the "
     "task it created last with its status, and its counts; pause or resume one",
     "A paused schedule's slots are skipped (and counted), so resume starts at the next slot. "
     "With -c, the file's schedules no primary has run yet are listed too. A slot is created "
     "once however primacy moves (README, Recurring tasks).",
     json_options},
    {"tokens", cmd_tokens, "create NAME --scopes S,... | list [--json] | revoke NAME",
     "tokens for the HTTP API: printed once at creation (only their SHA-256 is stored)",
     "Scopes: read (GET), enqueue (create tasks), operate (pause, resume, settings), work "
     "(external workers), admin (all). A revoked token is refused by every node by its next "
     "tick. tokens list never shows a token or its hash.",
     (const cli_option_t[]){
         {"scopes", "S,...", 's', CLI_LONG_ONLY, "the token's scopes, comma-separated (create)",
          "read enqueue operate work admin"},
         {"json", NULL, 'j', CLI_LONG_ONLY, "print one JSON document (list)", NULL},
         END_OPTIONS,
     }},
    {"ui-link", cmd_ui_link, "[--scopes read|operate] [--ttl DUR] [--url BASE]",
     "a one-time sign-in link for the dashboard at /ui/ (docs/UI.md)",
     "Prints http://HOST:PORT/ui/login?code=... (HOST:PORT: the -c file's http_listen). The "
     "code works once, until --ttl has passed; opening it sets an HttpOnly session cookie. "
     "read sees everything and shows no action; operate adds retry, cancel, delete, pause "
     "and resume. Only the code's SHA-256 is stored. " DUR_TIME,
     (const cli_option_t[]){
         {"scopes", "read|operate", 's', CLI_LONG_ONLY, "what the session may do (default read)",
          "read operate"},
         {"ttl", "DUR", 't', CLI_LONG_ONLY, "how long the link works (default 10m)", NULL},
         {"session-ttl", "DUR", 'S', CLI_LONG_ONLY,
          "how long the session it opens lasts (default 8h)", NULL},
         {"url", "BASE", 'u', CLI_LONG_ONLY,
          "the link's base, e.g. https://cohort.example (default http://<http_listen>)", NULL},
         END_OPTIONS,
     }},
    {"doctor", cmd_doctor, "[--json]",
     "check what Cohort depends on: the server, change streams, indexes and query plans, the "
     "live nodes' clocks, settings, releases and round trips, stale claims and unswept "
     "leases; one line per check (ok, warn, fail)",
     "Exits 0 only when every check is ok, 1 otherwise. docs/OPERATING.md says what each "
     "check means and what to do when it warns.",
     json_options},
    {"schema", cmd_schema, "[--json]",
     "the database's schema version, the cluster's feature level, each live node's release "
     "and level, and the migrations (applied: who and when; pending)",
     "JSON: {database, recorded, feature_level, release, release_schema, "
     "release_feature_level, nodes: [{node_id, release, schema, feature_level, level_in_use}], "
     "migrations: [{version, name, state, by, finished_at, changed}]}. docs/OPERATING.md, "
     "Upgrading.",
     json_options},
    {"migrate", cmd_migrate, "[--dry-run] [--to N] [--batch N]",
     "run the schema migrations this release ships (online: nodes of the previous release "
     "keep running)",
     "Each migration is additive, idempotent and resumable: killed part way, run it again. It "
     "reads --batch ids at a time (default 1000) and changes them with one update, and is "
     "recorded in cohort_meta (who, when, how many). It does not raise the database's schema "
     "version: `upgrade finish` does. --dry-run counts what each would change and writes "
     "nothing; --to N stops at schema version N.",
     (const cli_option_t[]){
         {"dry-run", NULL, 'n', CLI_LONG_ONLY, "count what would change; write nothing", NULL},
         {"to", "N", 't', CLI_LONG_ONLY, "run the migrations up to schema version N", NULL},
         {"batch", "N", 'b', CLI_LONG_ONLY, "documents per update (1 to 100000; 1000)", NULL},
         END_OPTIONS,
     }},
    {"upgrade", cmd_upgrade, "finish | lower --to N",
     "finish: commit the database to this release (schema version and feature level); lower: "
     "go back to level N before a downgrade",
     "finish refuses while any live node does not know this release's feature level, naming "
     "it; it runs the pending migrations, then raises the schema version and the feature "
     "level together: live nodes use the new behaviour within 30 s, and nodes of older "
     "releases refuse to start on the database. lower --to N sets both back to N, so that a "
     "release serving N starts again. docs/OPERATING.md, Upgrading.",
     NULL},
    {NULL, NULL, NULL, NULL, NULL, NULL},
};

/* What the operands of some commands complete to (help.h); the others' first operand follows
 * their synopsis. */
static const cli_operands_t operands[] = {
    {"data", "get|set|unset|inc|cas SERVICE"},
    {"settings", "get|set|unset SERVICE SETTING"},
    {"schedules", "pause|resume|SERVICE SERVICE"},
    {"tokens", "create|list|revoke"},
    {NULL, NULL},
};

const cli_program_t ctl_program = {
    .name = "cohortctl",
    .summary = "inspect and operate a Cohort cluster",
    .synopsis = "[-c FILE | --database NAME] COMMAND [ARGUMENTS]\n"
                "help [COMMAND] | COMMAND --help | --help | --version",
    .description =
        "The operator's tool for Cohort, a leader-elected cluster service on MongoDB: inspect "
        "services, tasks and nodes, enqueue, retry, cancel and delete tasks, pause and block, "
        "read and write generic data and live settings, and manage the HTTP API's tokens. Global options come before the command; a command's options "
        "may follow its operands.",
    .options = global_options,
    .commands = ctl_commands,
    .sections = (const cli_section_t[]){
        {"ENVIRONMENT",
         "MONGODB_URI: the database without -c (default mongodb://127.0.0.1:27017); it wins "
         "over the file's mongodb_uri, as in cohortd. COHORTCTL_PROGRESS_FROM: how many tasks "
         "make a command long enough to show its progress on a terminal (default 10000)."},
        {"EXIT STATUS", "0 done, 1 failed (database, missing task), 2 bad usage (a message "
                        "names the refused argument, or an unknown service), 3 `data cas` "
                        "found another value, 130 interrupted (enqueue)."},
        {"SEE ALSO", "cohortd(1); docs/CLI.md and docs/SCHEDULING.md in the source tree."},
        {NULL, NULL},
    },
    .man_extra = NULL,
    .operands = operands,
};
