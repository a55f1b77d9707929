/*
 * ctl.h - what cohortctl's command files share: the context, the database helpers, the
 * argument parsing conventions and the commands themselves.
 *
 * ctl_main.c reads the global options (-c FILE, --database) and calls one cmd_* with the
 * command's own argv (argv[0] is the command's name). Each command parses its flags with
 * getopt_long (after ctl_reset_getopt), checks them before it touches the database, then
 * opens the store. Exit status: CTL_DONE, CTL_FAILED (the database, a missing task), CTL_USAGE
 * or CTL_REFUSED (an unknown service: ctl_unknown_service). Messages go to stderr as "cohortctl COMMAND: ..."; tables and JSON to stdout.
 * Every MongoDB access goes through the store (store/<file>.h, one header per store file).
 * Errors are bson_error_t (core/error.h).
 */
#ifndef COHORT_CTL_H
#define COHORT_CTL_H

#include <bson/bson.h>
#include <getopt.h>
#include <mongoc/mongoc.h>
#include <stdbool.h>
#include <stdint.h>

#include "cli/help.h"
#include "core/config.h"
#include "store/store.h"

/* CTL_REFUSED exits 2 like CTL_USAGE, for well-formed arguments naming what does not exist
 * (an unknown service): main adds no usage line. CTL_DIFFERS: `data cas` found another value. */
enum {
    CTL_DONE = 0,
    CTL_FAILED = 1,
    CTL_USAGE = 2,
    CTL_DIFFERS = 3,
    CTL_REFUSED = 4,
    CTL_INTERRUPTED = 130
};

/* The command line (ctl_commands.c): the rows main dispatches on and the help renders. */
extern const cli_program_t ctl_program;
extern const cli_command_t ctl_commands[];

typedef struct ctl {
    cohort_config_t *config; /* NULL without -c; owned by main */
    const char *uri;
    const char *database;
    cohort_store_t *store;   /* NULL until ctl_open_store(); released by main */
    mongoc_client_t *client; /* popped from `store` for the whole run */
    const cli_command_t *command; /* the row of the command being run */
} ctl_t;

/* The command's getopt_long() array, from its row: what it accepts is what its help says. */
void ctl_longopts(const ctl_t *ctl, struct option out[CLI_MAX_OPTIONS + 1]);

/* Opens the store (connecting lazily). False, with the message printed, on a bad URI. */
bool ctl_open_store(ctl_t *ctl);

/* ctl_open_store() and a first round trip, so that an unreachable database is reported as
 * such; *server_ms (may be NULL) receives the server's time. */
bool ctl_reach_database(ctl_t *ctl, int64_t *server_ms);

/* Says that `service` has no config document (as `command`), naming the services that do;
 * returns CTL_REFUSED (exit 2). */
int ctl_unknown_service(ctl_t *ctl, const char *service, const char *command);

/* The same as a status: CTL_DONE, CTL_FAILED (the database) or CTL_REFUSED (no such
 * service), the message printed. */
int ctl_check_service(ctl_t *ctl, const char *service, const char *command);

/* ctl_check_service() for the commands that read a queue: a queue without a config document
 * (tasks enqueued by another program before any node ran) counts as existing. */
int ctl_check_queue(ctl_t *ctl, const char *service, const char *command);

/* Who is running this command, as switches and the task history record it:
 * "cohortctl USER@HOST". */
void ctl_author(char *buf, size_t len);

/* Before a command's getopt_long() loop: parsing starts again at argv[1] and getopt prints
 * nothing (the command words its own message). Commands give short options starting with
 * ':' so that a missing value returns ':' (optopt: the option's val) rather than '?'. */
void ctl_reset_getopt(void);

/* After getopt_long() returned '?' or ':': the argument it stopped at ("--frob"). */
const char *ctl_bad_arg(char **argv);

/* The options of a command that takes `--json` and nothing else (`nodes`, `doctor`): sets
 * *json, or prints "cohortctl COMMAND: unexpected argument '...'" and returns false. */
bool ctl_json_only(ctl_t *ctl, int argc, char **argv, const char *command, bool *json);

/* Strict integer: the whole of `text`, no overflow. */
bool ctl_parse_int(const char *text, int64_t *out);

/* Fields of a document, or the fallback when absent or of another type. */
bool ctl_doc_string(const bson_t *doc, const char *key, const char **out);
int64_t ctl_doc_int(const bson_t *doc, const char *key, int64_t fallback);
int64_t ctl_doc_date(const bson_t *doc, const char *key); /* 0 if absent */

/* Appends `text` as a string, or null when it is NULL. */
void ctl_append_utf8_or_null(bson_t *doc, const char *key, const char *text);

/* Prints a document as relaxed extended JSON and a newline. */
void ctl_print_json(const bson_t *doc);

/* Ends a command that listed rows as it read them (a table printed as it went, a JSON
 * document `out` built alongside): on success prints `out` if `json`; on failure prints
 * "FAILED: error's message" (nothing if `failed` is NULL: already said). Destroys `out`;
 * returns the exit status. */
int ctl_finish_listing(bson_t *out, bool json, bool ok, const char *failed,
                       const bson_error_t *error);

/* Progress of a long command (a bulk change, a big enqueue) on stderr, shown only when
 * stderr is a terminal and the work is long (a total over CTL_PROGRESS_FROM tasks, or past
 * that many done; COHORTCTL_PROGRESS_FROM=N in the environment moves the threshold), so
 * piped runs, scripts and small commands print exactly what they did
 * before: "cohortctl enqueue: 12000 of 50000 tasks, 24%" (or "cohortctl delete: 12000 tasks
 * so far" when the total is not known), rewritten in place at most every
 * CTL_PROGRESS_EVERY_MS; ctl_progress_end() clears the line. */
#define CTL_PROGRESS_FROM 10000
#define CTL_PROGRESS_EVERY_MS 200

typedef struct ctl_progress {
    const char *command;
    int64_t total;   /* 0: unknown */
    bool tty;        /* stderr is a terminal */
    bool shown;      /* a line is on the terminal */
    int64_t last_ms; /* monotonic: when it was last drawn */
    int64_t from;    /* the threshold */
} ctl_progress_t;

/* `total` 0 if unknown; `command` (borrowed) names it on the line. */
void ctl_progress_start(ctl_progress_t *progress, const char *command, int64_t total);
void ctl_progress_update(ctl_progress_t *progress, int64_t done);
void ctl_progress_end(ctl_progress_t *progress);

/* ---- the commands: argv[0] is the command's name ---------------------------------------- */

int cmd_help(ctl_t *ctl, int argc, char **argv); /* ctl_main.c */
int cmd_status(ctl_t *ctl, int argc, char **argv);
int cmd_enqueue(ctl_t *ctl, int argc, char **argv);

/* enqueue's options: --count, --data, --create and a flag per task option (taskopts.h). Filled
 * by ctl_enqueue_describe(), which main() calls before anything reads ctl_commands. */
extern cli_option_t ctl_enqueue_options[CLI_MAX_OPTIONS + 1];
void ctl_enqueue_describe(void);
int cmd_switch(ctl_t *ctl, int argc, char **argv); /* pause, resume, block, unblock */
int cmd_counts(ctl_t *ctl, int argc, char **argv);
int cmd_tasks(ctl_t *ctl, int argc, char **argv);
int cmd_task(ctl_t *ctl, int argc, char **argv);
int cmd_data(ctl_t *ctl, int argc, char **argv);
int cmd_settings(ctl_t *ctl, int argc, char **argv);
int cmd_nodes(ctl_t *ctl, int argc, char **argv);
int cmd_retry(ctl_t *ctl, int argc, char **argv); /* ctl_ops.c */
int cmd_cancel(ctl_t *ctl, int argc, char **argv);
int cmd_delete(ctl_t *ctl, int argc, char **argv);
int cmd_tokens(ctl_t *ctl, int argc, char **argv);
int cmd_schedules(ctl_t *ctl, int argc, char **argv); /* ctl_schedules.c */
int cmd_ui_link(ctl_t *ctl, int argc, char **argv); /* ctl_ui.c */
int cmd_step_down(ctl_t *ctl, int argc, char **argv); /* ctl_stepdown.c */
int cmd_doctor(ctl_t *ctl, int argc, char **argv);  /* ctl_doctor.c */
int cmd_migrate(ctl_t *ctl, int argc, char **argv); /* ctl_upgrade.c */
int cmd_upgrade(ctl_t *ctl, int argc, char **argv);
int cmd_schema(ctl_t *ctl, int argc, char **argv);

#endif
