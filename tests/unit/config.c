/*
 * config.c - the configuration loader (src/core/config.h) and `cohortd --check-config`.
 *
 * A good file loads with every key and the defaults of omitted ones; a bad file is refused
 * with every problem listed, each with its line number and the key at fault, so an operator
 * fixes everything in one pass. cohortd itself is run for the command line checks.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/config.h"
#include "support.h"

#define NOOP_SO COHORT_BUILD_DIR "/handlers/cohort_noop.so"
#define COHORTD COHORT_BUILD_DIR "/cohortd"

static cohort_config_errors_t errors;

static void setup(void)
{
    /* the override has its own test; everywhere else the file's mongodb_uri must count */
    unsetenv("MONGODB_URI");
}

static void teardown(void)
{
    cohort_config_errors_clear(&errors);
}

static char *all_errors(void)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    for (size_t i = 0; i < errors.count; i++)
        fprintf(f, "  %s\n", errors.messages[i]);
    fclose(f);
    return text;
}

/* Loads a config that must be good. */
static cohort_config_t *load_good(const char *text)
{
    cohort_config_t *c = cohort_config_load_string(text, "test.ini", NULL, &errors);
    char *listed = all_errors();
    cr_assert_not_null(c, "a good config was refused:\n%s", listed);
    cr_assert_eq(errors.count, 0, "a loaded config reported problems:\n%s", listed);
    free(listed);
    return c;
}

/* Loads a config that must be refused. */
static void load_bad(const char *text)
{
    cohort_config_t *c = cohort_config_load_string(text, "test.ini", NULL, &errors);
    cr_assert_null(c, "a bad config was accepted");
    cr_assert_gt(errors.count, 0, "refused without a message");
}

/* True if one message has "line N: " and every one of the NULL-terminated parts. */
static bool has_problem_v(int line, const char *const parts[])
{
    char tag[32];
    snprintf(tag, sizeof tag, "line %d: ", line);
    for (size_t i = 0; i < errors.count; i++) {
        const char *m = errors.messages[i];
        bool all = line <= 0 || strstr(m, tag) != NULL;
        for (size_t j = 0; all && parts[j]; j++)
            all = strstr(m, parts[j]) != NULL;
        if (all)
            return true;
    }
    return false;
}

#define has_problem(line, ...) has_problem_v(line, (const char *const[]){__VA_ARGS__, NULL})

/* Expects (non-fatally, so one run lists every miss) a message on `line` with the parts. */
#define expect_problem(line, ...)                                                                  \
    do {                                                                                           \
        if (!has_problem(line, __VA_ARGS__)) {                                                     \
            char *listed_ = all_errors();                                                          \
            cr_expect_fail("no problem reported on line %d with \"%s\"; reported:\n%s", line,      \
                           (const char *const[]){__VA_ARGS__}[0], listed_);                        \
            free(listed_);                                                                         \
        }                                                                                          \
    } while (0)

TestSuite(config, .init = setup, .fini = teardown);

/* ---- good files ------------------------------------------------------------------------ */

Test(config, full_file_with_every_key)
{
    const char *text = "; Cohort test configuration\n"                                      /* 1 */
                       "[cluster]\n"                                                        /* 2 */
                       "mongodb_uri = mongodb://db1.example:27017/?replicaSet=rs0 ; prod\n" /* 3 */
                       "database = cohort_test\n"                                           /* 4 */
                       "tick_ms = 250\n"                                                    /* 5 */
                       "takeover_ms = 2000   ; eight ticks\n"                               /* 6 */
                       "shutdown_grace_ms = 5000\n"                                         /* 7 */
                       "node_id = web-1.example\n"                                          /* 8 */
                       "log_level = debug\n"                                                /* 9 */
                       "\n"                                                                 /* 10 */
                       "[service:alpha]\n"                                                  /* 11 */
                       "handler = " NOOP_SO "\n"                                            /* 12 */
                       "primary_task_count = 7\n"                                           /* 13 */
                       "secondary_task_count = 3\n"                                         /* 14 */
                       "workers = 4 ; threads\n"                                            /* 15 */
                       "max_attempts = 9\n"                                                 /* 16 */
                       "retry_base_ms = 150\n"                                              /* 17 */
                       "sleep_ms = 5 ; handed to the handler\n"                             /* 18 */
                       "# a hash comment\n"                                                 /* 19 */
                       "fail_first_n = 2\n"                                                 /* 20 */
                       "[service:beta_2-x]\n"                                               /* 21 */
                       "handler = " NOOP_SO "\n";                                           /* 22 */
    cohort_config_t *c = load_good(text);
    cr_assert_str_eq(c->mongodb_uri, "mongodb://db1.example:27017/?replicaSet=rs0");
    cr_assert_not(c->mongodb_uri_from_env);
    cr_assert_str_eq(c->database, "cohort_test");
    cr_assert_eq(c->tick_ms, 250);
    cr_assert_eq(c->takeover_ms, 2000);
    cr_assert_eq(c->shutdown_grace_ms, 5000);
    cr_assert_str_eq(c->node_id, "web-1.example");
    cr_assert_eq(c->log_level, COHORT_LOG_DEBUG);
    cr_assert_eq(c->n_services, 2);

    const cohort_service_config_t *a = cohort_config_find_service(c, "alpha");
    cr_assert_not_null(a);
    cr_assert_str_eq(a->name, "alpha");
    cr_assert_str_eq(a->handler_path, NOOP_SO);
    cr_assert_eq(a->handler_line, 12);
    cr_assert_eq(a->primary_task_count, 7);
    cr_assert_eq(a->secondary_task_count, 3);
    cr_assert_eq(a->workers, 4);
    cr_assert_eq(a->max_attempts, 9);
    cr_assert_eq(a->retry_base_ms, 150);
    cr_assert_eq(a->n_options, 2, "unknown keys go to the handler");
    cr_assert_str_eq(a->options[0].key, "sleep_ms");
    cr_assert_str_eq(a->options[0].value, "5", "the inline comment is part of the value");
    cr_assert_eq(a->options[0].line, 18);
    cr_assert_str_eq(a->options[1].key, "fail_first_n");
    cr_assert_str_eq(a->options[1].value, "2");
    cr_assert_eq(a->options[1].line, 20);

    const cohort_service_config_t *b = cohort_config_find_service(c, "beta_2-x");
    cr_assert_not_null(b);
    cr_assert_eq(b->handler_line, 22);
    cr_assert_eq(b->n_options, 0);
    cr_assert_null(cohort_config_find_service(c, "gamma"));
    cohort_config_destroy(c);
}

Test(config, omitted_keys_take_their_defaults)
{
    cohort_config_t *c = load_good("[service:only]\n"
                                   "handler = " NOOP_SO "\n");
    cr_assert_str_eq(c->mongodb_uri, "mongodb://127.0.0.1:27017");
    cr_assert_str_eq(c->database, "cohort");
    cr_assert_eq(c->tick_ms, 1000);
    cr_assert_eq(c->takeover_ms, 10000);
    cr_assert_eq(c->shutdown_grace_ms, 30000);
    cr_assert_null(c->node_id, "no node_id: one is generated at start");
    cr_assert_eq(c->log_level, COHORT_LOG_INFO);
    cr_assert_eq(c->n_services, 1);
    const cohort_service_config_t *s = &c->services[0];
    cr_assert_eq(s->primary_task_count, 10);
    cr_assert_eq(s->secondary_task_count, 0);
    cr_assert_eq(s->workers, 2);
    cr_assert_eq(s->max_attempts, 5);
    cr_assert_eq(s->retry_base_ms, 20000);
    cr_assert_eq(s->n_options, 0);
    cohort_config_destroy(c);
}

/* A UTF-8 byte-order mark before the first section (as Windows editors save) is accepted. */
Test(config, a_byte_order_mark_is_accepted)
{
    cohort_config_t *c = load_good("\xEF\xBB\xBF[cluster]\n"
                                   "tick_ms = 500\n"
                                   "[service:only]\n"
                                   "handler = " NOOP_SO "\n");
    cr_assert_eq(c->tick_ms, 500);
    cr_assert_eq(c->n_services, 1);
    cohort_config_destroy(c);
}

/* A line ending in a long run of carriage returns (a file mangled by a transfer) once
 * overflowed the line buffer: the line reader copied the whole ending (found by fuzzing). */
Test(config, a_long_run_of_carriage_returns_ends_a_line)
{
    char text[20000];
    int n = snprintf(text, sizeof text, "[cluster]\ntick_ms = 500");
    memset(text + n, '\r', 10000);
    snprintf(text + n + 10000, sizeof text - (size_t)n - 10000,
             "\n[service:only]\nhandler = " NOOP_SO "\n");
    cohort_config_t *c = load_good(text);
    cr_assert_eq(c->tick_ms, 500);
    cohort_config_destroy(c);
}

Test(config, empty_node_id_means_generate_one)
{
    cohort_config_t *c = load_good("[cluster]\n"
                                   "node_id =\n"
                                   "[service:a]\n"
                                   "handler = " NOOP_SO "\n");
    cr_assert_null(c->node_id);
    cohort_config_destroy(c);
}

Test(config, relative_handler_resolves_against_the_base_dir)
{
    cohort_config_t *c =
        cohort_config_load_string("[service:a]\nhandler = cohort_noop.so\n", "test.ini",
                                  COHORT_BUILD_DIR "/handlers", &errors);
    cr_assert_not_null(c, "%s", errors.count ? errors.messages[0] : "");
    cr_assert_str_eq(c->services[0].handler_path, NOOP_SO);
    cohort_config_destroy(c);
}

Test(config, load_reads_a_file_and_resolves_handlers_next_to_it)
{
    char *dir = test_tmpdir("config");
    char *link = NULL;
    cr_assert_geq(asprintf(&link, "%s/h.so", dir), 0);
    cr_assert_eq(symlink(NOOP_SO, link), 0);
    char *path = test_write_file(dir, "cohort.ini",
                                 "[cluster]\n"
                                 "database = from_file\n"
                                 "[service:a]\n"
                                 "handler = h.so\n");
    cohort_config_t *c = cohort_config_load(path, &errors);
    cr_assert_not_null(c, "%s", errors.count ? errors.messages[0] : "");
    cr_assert_str_eq(c->path, path);
    cr_assert_str_eq(c->database, "from_file");
    cr_assert_str_eq(c->services[0].handler_path, link);
    cohort_config_destroy(c);
    unlink(link);
    unlink(path);
    rmdir(dir);
    free(link);
    free(path);
    free(dir);
}

Test(config, load_of_a_missing_file_names_it)
{
    cr_assert_null(cohort_config_load("/nonexistent/cohort.ini", &errors));
    cr_assert_eq(errors.count, 1);
    cr_assert_not_null(strstr(errors.messages[0], "/nonexistent/cohort.ini"));
    cr_assert_not_null(strstr(errors.messages[0], "cannot open"));
}

Test(config, mongodb_uri_environment_overrides_the_file)
{
    cr_assert_eq(setenv("MONGODB_URI", "mongodb://from-env:27999", 1), 0);
    cohort_config_t *c = load_good("[cluster]\n"
                                   "mongodb_uri = mongodb://from-file:27017\n"
                                   "[service:a]\n"
                                   "handler = " NOOP_SO "\n");
    cr_assert_str_eq(c->mongodb_uri, "mongodb://from-env:27999");
    cr_assert(c->mongodb_uri_from_env);
    cohort_config_destroy(c);

    /* without mongodb_uri in the file, too */
    c = load_good("[service:a]\nhandler = " NOOP_SO "\n");
    cr_assert_str_eq(c->mongodb_uri, "mongodb://from-env:27999");
    cohort_config_destroy(c);
}

Test(config, empty_mongodb_uri_environment_does_not_override)
{
    cr_assert_eq(setenv("MONGODB_URI", "", 1), 0);
    cohort_config_t *c = load_good("[cluster]\n"
                                   "mongodb_uri = mongodb://from-file:27017\n"
                                   "[service:a]\n"
                                   "handler = " NOOP_SO "\n");
    cr_assert_str_eq(c->mongodb_uri, "mongodb://from-file:27017");
    cr_assert_not(c->mongodb_uri_from_env);
    cohort_config_destroy(c);
}

Test(config, a_mongodb_uri_libmongoc_cannot_parse_is_refused_with_its_line)
{
    static const char *const bad[] = {"notauri", "mongodb://", "mongodb://host:99999",
                                      "http://db.example:27017"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char *text = NULL;
        cr_assert_geq(asprintf(&text, "[cluster]\ntick_ms = 500\nmongodb_uri = %s\n"
                                      "[service:a]\nhandler = " NOOP_SO "\n",
                               bad[i]),
                      0);
        load_bad(text);
        expect_problem(3, "mongodb_uri is not a MongoDB connection string");
        cr_expect_eq(errors.count, 1, "'%s': %zu problems", bad[i], errors.count);
        cohort_config_errors_clear(&errors);
        free(text);
    }
    /* the override is judged too, without a line of the file */
    cr_assert_eq(setenv("MONGODB_URI", "notauri", 1), 0);
    load_bad("[cluster]\n[service:a]\nhandler = " NOOP_SO "\n");
    expect_problem(0, "mongodb_uri is not a MongoDB connection string", "MONGODB_URI");
    unsetenv("MONGODB_URI");
}

Test(config, an_unknown_cluster_key_near_a_setting_gets_a_did_you_mean)
{
    load_bad("[cluster]\ntick_mss = 500\ncolour = red\n[service:a]\nhandler = " NOOP_SO "\n");
    expect_problem(2, "unknown key 'tick_mss' in [cluster]", "did you mean 'tick_ms'?");
    expect_problem(3, "unknown key 'colour' in [cluster]", "known: ");
    cr_expect_not(has_problem(3, "did you mean"), "a far key got a suggestion");
}

Test(config, did_you_mean_suggests_only_near_misses)
{
    static const struct {
        const char *key, *want;
    } cases[] = {
        {"wokers", "workers"},          {"max_atempts", "max_attempts"},
        {"wrokers", "workers"},         {"stall_timeout_m", "stall_timeout_ms"},
        {"workers", NULL},              {"sleep_ms", NULL},
        {"ttl", NULL},                  {"journal", NULL},
        {"x", NULL},                    {"stall_timeout", NULL},
        {"", NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *got = cohort_settings_did_you_mean(COHORT_SECTION_SERVICE, cases[i].key);
        if (cases[i].want)
            cr_expect(got && strcmp(got, cases[i].want) == 0, "'%s': got %s, want %s",
                      cases[i].key, got ? got : "NULL", cases[i].want);
        else
            cr_expect_null(got, "'%s': suggested %s", cases[i].key, got);
    }
}

Test(config, a_long_mongodb_uri_is_kept_whole)
{
    /* A replica set URI with credentials and options easily passes 200 characters. */
    const char *uri = "mongodb://cohort_service_user:S3cretPassw0rd@mongo-0.mongo.prod.example.com:"
                      "27017,mongo-1.mongo.prod.example.com:27017,mongo-2.mongo.prod.example.com:"
                      "27017/?replicaSet=rs0&authSource=admin&tls=true&retryWrites=true&w=majority"
                      "&readPreference=primary&appName=cohort";
    cr_assert_gt(strlen(uri), 250);
    char *text = NULL;
    cr_assert_geq(asprintf(&text,
                           "[cluster]\n"
                           "mongodb_uri = %s\n"
                           "tick_ms = 500\n"
                           "[service:a]\n"
                           "handler = " NOOP_SO "\n",
                           uri),
                  0);
    cohort_config_t *c = cohort_config_load_string(text, "test.ini", NULL, &errors);
    free(text);
    char *listed = all_errors();
    cr_expect_not_null(c, "a config with a %zu-character mongodb_uri was refused:\n%s", strlen(uri),
                       listed);
    free(listed);
    if (c) {
        cr_expect_str_eq(c->mongodb_uri, uri, "mongodb_uri was cut to '%s'", c->mongodb_uri);
        cr_expect_eq(c->tick_ms, 500);
        cohort_config_destroy(c);
    }
}

/* ---- bad files ------------------------------------------------------------------------- */

Test(config, every_problem_is_reported_with_its_line)
{
    const char *text = "stray = 1\n"                         /* 1: key outside a section */
                       "[cluster]\n"                         /* 2 */
                       "tick_ms = 500\n"                     /* 3 */
                       "takeover_ms = 400\n"                 /* 4: takeover_ms <= tick_ms */
                       "colour = blue\n"                     /* 5: unknown [cluster] key */
                       "shutdown_grace_ms = soon\n"          /* 6: not a number */
                       "tick_ms = 600\n"                     /* 7: duplicate key */
                       "log_level = loud\n"                  /* 8: bad log level */
                       "[service:mail]\n"                    /* 9 */
                       "handler = /nonexistent/handler.so\n" /* 10: missing handler file */
                       "workers = 0\n"                       /* 11: out of range */
                       "max_attempts = 99999\n"              /* 12: out of range */
                       "retry_base_ms = 12abc\n"             /* 13: not a number */
                       "this line has no equals sign\n"      /* 14: syntax error */
                       "[service:bad name!]\n"               /* 15: invalid service name */
                       "handler = " NOOP_SO "\n"             /* 16 */
                       "[service:nohandler]\n"               /* 17: service without handler */
                       "workers = 2\n"                       /* 18 */
                       "[mystery]\n"                         /* 19: unknown section */
                       "key = value\n";                      /* 20 */
    load_bad(text);
    expect_problem(1, "stray", "outside any section");
    expect_problem(4, "takeover_ms", "tick_ms");
    expect_problem(5, "colour", "unknown key");
    expect_problem(6, "shutdown_grace_ms", "'soon'", "not a number");
    expect_problem(7, "duplicate key 'tick_ms'", "line 3");
    expect_problem(8, "log_level", "'loud'");
    expect_problem(10, "handler", "/nonexistent/handler.so");
    expect_problem(11, "workers", "out of range");
    expect_problem(12, "max_attempts", "99999", "out of range");
    expect_problem(13, "retry_base_ms", "'12abc'", "not a number");
    expect_problem(14, "syntax error");
    /* section problems: which line they name is checked in section_problems_name_the_header */
    expect_problem(0, "bad name!", "invalid");
    expect_problem(0, "[service:nohandler]", "handler");
    expect_problem(0, "[mystery]", "unknown section");
    cr_expect_eq(errors.count, 14, "expected 14 problems, got %zu", errors.count);
}

Test(config, section_problems_name_the_header)
{
    /* The problem is the section itself, so the message must point at its header line
     * (config.h: "line of the section header"), not at whatever key happens to follow. */
    load_bad("[cluster]\n"             /* 1 */
             "\n"                      /* 2 */
             "[service:bad name]\n"    /* 3: invalid service name */
             "\n"                      /* 4 */
             "handler = " NOOP_SO "\n" /* 5 */
             "[service:nohandler]\n"   /* 6: service without handler */
             "; a comment\n"           /* 7 */
             "workers = 2\n"           /* 8 */
             "[mystery]\n"             /* 9: unknown section */
             "\n"                      /* 10 */
             "key = value\n"           /* 11 */
             "[service:ok]\n"          /* 12 */
             "handler = " NOOP_SO "\n");
    expect_problem(3, "'bad name'", "invalid");
    expect_problem(6, "[service:nohandler]", "handler");
    expect_problem(9, "[mystery]", "unknown section");
    cr_expect_eq(errors.count, 3);
}

Test(config, unknown_cluster_key)
{
    load_bad("[cluster]\n"
             "tick_ms = 100\n"
             "tik_ms = 200\n"
             "[service:a]\n"
             "handler = " NOOP_SO "\n");
    cr_assert_eq(errors.count, 1);
    expect_problem(3, "unknown key 'tik_ms' in [cluster]");
}

Test(config, takeover_must_exceed_tick)
{
    load_bad("[cluster]\n"
             "tick_ms = 1000\n"
             "takeover_ms = 1000\n"
             "[service:a]\n"
             "handler = " NOOP_SO "\n");
    cr_assert_eq(errors.count, 1);
    expect_problem(3, "takeover_ms (1000) must be greater than tick_ms (1000)");
}

Test(config, takeover_below_the_default_tick_names_the_takeover_line)
{
    load_bad("[cluster]\n"
             "takeover_ms = 500\n"
             "[service:a]\n"
             "handler = " NOOP_SO "\n");
    expect_problem(2, "takeover_ms (500)", "tick_ms (1000)");
}

Test(config, missing_handler_file)
{
    load_bad("[service:a]\n"
             "handler = /nonexistent/x.so\n");
    cr_assert_eq(errors.count, 1);
    expect_problem(2, "handler file '/nonexistent/x.so' cannot be read");
}

Test(config, empty_handler)
{
    load_bad("[service:a]\n"
             "handler =\n");
    expect_problem(2, "handler is empty");
}

Test(config, non_numeric_numbers)
{
    load_bad("[cluster]\n"
             "tick_ms = fast\n"           /* 2 */
             "takeover_ms = 10 s\n"       /* 3 */
             "[service:a]\n"              /* 4 */
             "handler = " NOOP_SO "\n"    /* 5 */
             "workers = \n"               /* 6 */
             "primary_task_count = 1.5\n" /* 7 */
             "max_attempts = -\n");       /* 8 */
    expect_problem(2, "tick_ms", "'fast'");
    expect_problem(3, "takeover_ms", "'10 s'", "a duration such as 250ms");
    expect_problem(6, "workers", "empty");
    expect_problem(7, "primary_task_count", "'1.5'");
    expect_problem(8, "max_attempts", "'-'");
}

Test(config, out_of_range_numbers)
{
    load_bad("[cluster]\n"
             "tick_ms = 5\n"                        /* 2: min 10 */
             "takeover_ms = 99999999999999999999\n" /* 3: overflows int64 */
             "shutdown_grace_ms = -1\n"             /* 4 */
             "[service:a]\n"                        /* 5 */
             "handler = " NOOP_SO "\n"              /* 6 */
             "workers = 1025\n"                     /* 7 */
             "primary_task_count = 0\n"             /* 8 */
             "secondary_task_count = 1000001\n"     /* 9 */
             "retry_base_ms = 86400001\n");         /* 10 */
    expect_problem(2, "tick_ms = 5", "out of range");
    expect_problem(3, "takeover_ms");
    expect_problem(4, "shutdown_grace_ms = -1", "out of range");
    expect_problem(7, "workers = 1025", "[1, 1024]");
    expect_problem(8, "primary_task_count = 0", "out of range");
    expect_problem(9, "secondary_task_count = 1000001", "out of range");
    expect_problem(10, "retry_base_ms = 86400001", "out of range");
}

Test(config, duplicate_keys)
{
    load_bad("[cluster]\n"
             "database = one\n"        /* 2 */
             "database = two\n"        /* 3 */
             "[service:a]\n"           /* 4 */
             "handler = " NOOP_SO "\n" /* 5 */
             "workers = 1\n"           /* 6 */
             "sleep_ms = 1\n"          /* 7 */
             "workers = 2\n"           /* 8 */
             "sleep_ms = 2\n");        /* 9 */
    expect_problem(3, "duplicate key 'database'", "first set on line 2");
    expect_problem(8, "duplicate key 'workers'", "first set on line 6");
    expect_problem(9, "duplicate key 'sleep_ms'", "first set on line 7");
}

Test(config, unknown_section)
{
    load_bad("[clustr]\n"
             "tick_ms = 100\n"
             "[service:a]\n"
             "handler = " NOOP_SO "\n");
    cr_assert_eq(errors.count, 1, "one problem per unknown section, not one per key");
    cr_assert_not_null(strstr(errors.messages[0], "unknown section [clustr]"));
}

Test(config, invalid_service_names)
{
    load_bad("[service:]\n"            /* 1 */
             "handler = " NOOP_SO "\n" /* 2 */
             "[service:a.b]\n"         /* 3 */
             "handler = " NOOP_SO "\n" /* 4 */
             "[service:good]\n"        /* 5 */
             "handler = " NOOP_SO "\n");
    expect_problem(0, "service name ''", "invalid");
    expect_problem(0, "'a.b'", "invalid");
    cr_expect_eq(errors.count, 2);
}

Test(config, service_name_length_limit)
{
    char name[COHORT_SERVICE_NAME_MAX + 2];
    memset(name, 's', sizeof name - 1);
    name[sizeof name - 1] = '\0';
    cr_assert_not(cohort_config_valid_service_name(name));
    name[COHORT_SERVICE_NAME_MAX] = '\0';
    cr_assert(cohort_config_valid_service_name(name));
    cr_assert_not(cohort_config_valid_service_name(""));
    cr_assert_not(cohort_config_valid_service_name("a b"));
    cr_assert_not(cohort_config_valid_service_name("a/b"));
    cr_assert(cohort_config_valid_service_name("A-z_09"));
}

Test(config, service_without_handler)
{
    load_bad("[service:a]\n"   /* 1 */
             "workers = 3\n"); /* 2 */
    cr_assert_eq(errors.count, 1);
    expect_problem(0, "[service:a] has no 'handler'");
}

Test(config, service_section_without_any_key)
{
    /* An operator who writes the section and forgets its keys must hear about it. */
    cohort_config_t *c = cohort_config_load_string("[service:a]\n"
                                                   "handler = " NOOP_SO "\n"
                                                   "[service:empty]\n",
                                                   "test.ini", NULL, &errors);
    char *listed = all_errors();
    cr_expect_null(c, "[service:empty] (no keys, so no handler) was silently dropped");
    cr_expect(has_problem(0, "[service:empty]", "handler"),
              "no problem reported for [service:empty]; reported:\n%s", listed);
    free(listed);
    cohort_config_destroy(c);
}

Test(config, key_outside_a_section)
{
    load_bad("tick_ms = 100\n"
             "[service:a]\n"
             "handler = " NOOP_SO "\n");
    cr_assert_eq(errors.count, 1);
    expect_problem(1, "'tick_ms'", "outside any section");
}

Test(config, syntax_error_line)
{
    load_bad("[cluster]\n"
             "tick_ms 100\n"
             "[service:a]\n"
             "handler = " NOOP_SO "\n");
    cr_assert_eq(errors.count, 1);
    expect_problem(2, "syntax error");
}

Test(config, every_syntax_error_is_reported)
{
    load_bad("[cluster]\n"   /* 1 */
             "tick_ms 100\n" /* 2: syntax error */
             "[service:a]\n" /* 3 */
             "handler = " NOOP_SO "\n"
             "workers 3\n"    /* 5: syntax error */
             "[service:b\n"); /* 6: syntax error */
    expect_problem(2, "syntax error");
    expect_problem(5, "syntax error");
    expect_problem(6, "syntax error");
}

Test(config, no_service_at_all)
{
    load_bad("[cluster]\n"
             "tick_ms = 100\n");
    cr_assert_eq(errors.count, 1);
    cr_assert_not_null(strstr(errors.messages[0], "no [service:NAME] section"), "%s",
                       errors.messages[0]);
}

Test(config, empty_file)
{
    load_bad("");
    cr_assert_not_null(strstr(errors.messages[0], "no [service:NAME] section"));
}

Test(config, invalid_database_node_id_and_log_level)
{
    load_bad("[cluster]\n"
             "database = my.db\n"    /* 2 */
             "node_id = has space\n" /* 3 */
             "log_level = verbose\n" /* 4 */
             "mongodb_uri =\n"       /* 5 */
             "[service:a]\n"
             "handler = " NOOP_SO "\n");
    expect_problem(2, "database", "'my.db'");
    expect_problem(3, "node_id", "'has space'");
    expect_problem(4, "log_level", "'verbose'");
    expect_problem(5, "mongodb_uri is empty");
}

Test(config, messages_name_the_origin)
{
    load_bad("[cluster]\ncolour = red\n[service:a]\nhandler = " NOOP_SO "\n");
    cr_assert_eq(strncmp(errors.messages[0], "test.ini line 2: ", 17), 0, "%s", errors.messages[0]);
}

Test(config, errors_accumulate_across_loads)
{
    load_bad("[cluster]\ncolour = red\n[service:a]\nhandler = " NOOP_SO "\n");
    size_t first = errors.count;
    load_bad("[cluster]\nflavour = mint\n[service:a]\nhandler = " NOOP_SO "\n");
    cr_assert_eq(errors.count, first + 1, "a second load appends its problems");
    cohort_config_errors_clear(&errors);
    cr_assert_eq(errors.count, 0);
    cr_assert_null(errors.messages);
}

/* ---- cohortd on the command line ------------------------------------------------------ */

static test_run_result_t run_cohortd(const char *const args[])
{
    const char *argv[16] = {COHORTD};
    size_t n = 1;
    for (size_t i = 0; args[i] && n < 15; i++)
        argv[n++] = args[i];
    argv[n] = NULL;
    static const char *const env[] = {"MONGODB_URI", NULL};
    test_run_result_t r = test_run(argv, env, 20000);
    cr_assert_not(r.timed_out, "cohortd did not finish within 20 s; stderr:\n%s", r.err);
    return r;
}

static char *write_config(const char *text)
{
    char *dir = test_tmpdir("check");
    char *path = test_write_file(dir, "cohort.ini", text);
    free(dir);
    return path;
}

static void remove_config(char *path)
{
    unlink(path);
    char *slash = strrchr(path, '/');
    *slash = '\0';
    rmdir(path);
    free(path);
}

static void expect_in(const char *text, const char *part)
{
    cr_expect_not_null(strstr(text, part), "expected \"%s\" in:\n%s", part, text);
}

Test(cohortd, check_config_lists_every_problem)
{
    char *path = write_config("[cluster]\n"                         /* 1 */
                              "tick_ms = 500\n"                     /* 2 */
                              "takeover_ms = 100\n"                 /* 3 */
                              "colour = blue\n"                     /* 4 */
                              "[service:mail]\n"                    /* 5 */
                              "handler = /nonexistent/handler.so\n" /* 6 */
                              "workers = many\n"                    /* 7 */
                              "[service:x y]\n"                     /* 8 */
                              "workers = 1\n");                     /* 9 */
    test_run_result_t r = run_cohortd((const char *const[]){"--check-config", "-c", path, NULL});
    cr_expect_neq(r.exit_code, 0, "cohortd --check-config accepted a bad file");
    cr_expect_eq(r.exit_code, 1);
    char tag[512];
    snprintf(tag, sizeof tag, "%s line 3: takeover_ms", path);
    expect_in(r.err, tag);
    snprintf(tag, sizeof tag, "%s line 4: unknown key 'colour'", path);
    expect_in(r.err, tag);
    snprintf(tag, sizeof tag, "%s line 6: handler file '/nonexistent/handler.so'", path);
    expect_in(r.err, tag);
    snprintf(tag, sizeof tag, "%s line 7: workers = 'many' is not a number", path);
    expect_in(r.err, tag);
    expect_in(r.err, "'x y' is invalid");
    expect_in(r.err, "5 problem(s)");
    cr_expect_eq(r.out[0], '\0', "nothing on stdout for a bad file: %s", r.out);
    test_run_result_free(&r);
    remove_config(path);
}

Test(cohortd, check_config_accepts_a_good_file)
{
    char *path = write_config("[cluster]\n"
                              "tick_ms = 200\n"
                              "takeover_ms = 1000\n"
                              "[service:one]\n"
                              "handler = " NOOP_SO "\n"
                              "sleep_ms = 3\n"
                              "[service:two]\n"
                              "handler = " NOOP_SO "\n");
    test_run_result_t r = run_cohortd((const char *const[]){"--check-config", "-c", path, NULL});
    cr_expect_eq(r.exit_code, 0, "exit %d; stderr:\n%s", r.exit_code, r.err);
    expect_in(r.out, "OK (2 service(s))");
    test_run_result_free(&r);
    remove_config(path);
}

Test(cohortd, check_config_reports_options_the_handler_rejects)
{
    char *path = write_config("[cluster]\n"             /* 1 */
                              "tick_ms = 200\n"         /* 2 */
                              "[service:slow]\n"        /* 3 */
                              "handler = " NOOP_SO "\n" /* 4 */
                              "sleep_ms = abc\n"        /* 5 */
                              "[service:typo]\n"        /* 6 */
                              "handler = " NOOP_SO "\n" /* 7 */
                              "journl = /tmp/x\n");     /* 8 */
    test_run_result_t r = run_cohortd((const char *const[]){"--check-config", "-c", path, NULL});
    cr_expect_eq(r.exit_code, 1, "exit %d", r.exit_code);
    /* at the line the handler names, once: not "line 4: line 5: ..." */
    expect_in(r.err, "cohort.ini line 5: [service:slow] handler 'noop' rejected its "
                     "configuration: sleep_ms = 'abc'");
    expect_in(r.err, "cohort.ini line 8: [service:typo] handler 'noop' rejected its "
                     "configuration: unknown option 'journl'");
    cr_expect_null(strstr(r.err, ": line "), "a doubled line prefix:\n%s", r.err);
    expect_in(r.err, "2 problem(s)");
    test_run_result_free(&r);
    remove_config(path);
}

/* How many lines of `text` contain `part`. */
static int lines_with(const char *text, const char *part)
{
    int n = 0;
    for (const char *line = text; line && *line;) {
        const char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line) : strlen(line);
        const char *hit = strstr(line, part);
        n += hit && hit < line + len;
        line = end ? end + 1 : NULL;
    }
    return n;
}

Test(cohortd, check_config_reports_every_problem_once_with_its_line)
{
    char *path = write_config("\xEF\xBB\xBF[cluster]\n"                   /* 1 (a BOM) */
                              "mongodb_uri = notauri\n"                     /* 2 */
                              "tick_ms = 500\n"                             /* 3 */
                              "[service:hi]\n"                              /* 4 */
                              "handler = " COHORT_BUILD_DIR "/handlers/cohort_hello.so\n"
                              "wokers = 3\n"                                /* 6 */
                              "max_atempts = 4\n"                           /* 7 */
                              "greeting = hi\n"                             /* 8 */
                              "[service:work]\n"                            /* 9 */
                              "handler = " NOOP_SO "\n"                     /* 10 */
                              "sleep_ms = 1\n"                              /* 11 */
                              "wokers = 2\n"                                /* 12 */
                              "zzz = 1\n"                                   /* 13 */
                              "workers = 0\n"                               /* 14 */
                              "[service:gone]\n"                            /* 15 */
                              "handler = /nonexistent/handler.so\n"         /* 16 */
                              "[service:kinds]\n"                           /* 17 */
                              "handler = " COHORT_BUILD_DIR
                              "/tests/handlers/test_handler_bad_kinds.so\n" /* 18 */
                              "[service:abi]\n"                             /* 19 */
                              "handler = " COHORT_BUILD_DIR
                              "/tests/handlers/test_handler_wrong_version.so\n"); /* 20 */
    test_run_result_t r = run_cohortd((const char *const[]){"--check-config", "-c", path, NULL});
    cr_expect_eq(r.exit_code, 1, "exit %d", r.exit_code);
    static const struct {
        int line;
        const char *what;
    } want[] = {
        {2, "mongodb_uri is not a MongoDB connection string"},
        {6, "[service:hi] unknown key 'wokers' (did you mean 'workers'?)"},
        {7, "[service:hi] unknown key 'max_atempts' (did you mean 'max_attempts'?)"},
        {8, "[service:hi] unknown key 'greeting' (handler 'hello' takes no options)"},
        {12, "[service:work] unknown key 'wokers' (did you mean 'workers'?)"},
        {13, "[service:work] handler 'noop' rejected its configuration: unknown option 'zzz'"},
        {14, "workers = 0 is out of range"},
        {16, "handler file '/nonexistent/handler.so' cannot be read"},
        {18, "declares kind 'bulk mail'"},
        {20, "was built for handler ABI version"},
    };
    size_t n = sizeof want / sizeof want[0];
    for (size_t i = 0; i < n; i++) {
        char tag[1024];
        snprintf(tag, sizeof tag, "%s line %d: ", path, want[i].line);
        cr_expect_eq(lines_with(r.err, want[i].what), 1, "'%s' not reported exactly once:\n%s",
                     want[i].what, r.err);
        /* the problem's own line, with its text */
        bool found = false;
        for (const char *at = strstr(r.err, tag); at && !found; at = strstr(at + 1, tag)) {
            const char *eol = strchr(at, '\n');
            const char *hit = strstr(at, want[i].what);
            found = hit && (!eol || hit < eol);
        }
        cr_expect(found, "line %d: '%s' missing:\n%s", want[i].line, want[i].what, r.err);
    }
    char total[64];
    snprintf(total, sizeof total, "cohortd: %zu problem(s)", n);
    expect_in(r.err, total);
    cr_expect_null(strstr(r.err, ": line "), "a doubled line prefix:\n%s", r.err);
    cr_expect_eq(lines_with(r.err, "'sleep_ms'"), 0, "an option the handler accepts:\n%s",
                 r.err);
    test_run_result_free(&r);
    remove_config(path);
}

/* Without a handler to judge the options (missing, or not loadable), the near misses of a
 * setting name are still reported in the same run, not only once the handler is fixed. */
Test(cohortd, check_config_reports_typos_when_the_handler_is_missing)
{
    char *path = write_config("[cluster]\n"                          /* 1 */
                              "[service:gone]\n"                     /* 2 */
                              "handler = /nonexistent/handler.so\n"  /* 3 */
                              "wokers = 3\n"                         /* 4 */
                              "colour = blue\n"                      /* 5 */
                              "[service:broken]\n"                   /* 6 */
                              "handler = " COHORT_BUILD_DIR
                              "/tests/handlers/test_handler_wrong_version.so\n" /* 7 */
                              "max_atempts = 4\n");                  /* 8 */
    test_run_result_t r = run_cohortd((const char *const[]){"--check-config", "-c", path, NULL});
    cr_expect_eq(r.exit_code, 1, "exit %d", r.exit_code);
    char tag[1024];
    snprintf(tag, sizeof tag,
             "%s line 4: [service:gone] unknown key 'wokers' (did you mean 'workers'?)", path);
    expect_in(r.err, tag);
    snprintf(tag, sizeof tag,
             "%s line 8: [service:broken] unknown key 'max_atempts' (did you mean "
             "'max_attempts'?)",
             path);
    expect_in(r.err, tag);
    /* Not a near miss: only the handler can say whether it is one of its options. */
    cr_expect_null(strstr(r.err, "'colour'"), "an option only the handler can judge:\n%s",
                   r.err);
    expect_in(r.err, "cohortd: 4 problem(s)");
    test_run_result_free(&r);
    remove_config(path);
}

Test(cohortd, check_config_of_a_missing_file)
{
    test_run_result_t r =
        run_cohortd((const char *const[]){"--check-config", "-c", "/nonexistent/cohort.ini", NULL});
    cr_expect_eq(r.exit_code, 1);
    expect_in(r.err, "/nonexistent/cohort.ini: cannot open");
    test_run_result_free(&r);
}

Test(cohortd, version)
{
    test_run_result_t r = run_cohortd((const char *const[]){"--version", NULL});
    cr_expect_eq(r.exit_code, 0);
    char expect[64];
    snprintf(expect, sizeof expect, "handler ABI 1..%d", COHORT_HANDLER_ABI_VERSION);
    cr_expect_eq(strncmp(r.out, "cohortd " COHORT_VERSION, strlen("cohortd " COHORT_VERSION)), 0,
                 "%s", r.out);
    expect_in(r.out, expect);
    test_run_result_free(&r);
}

Test(cohortd, help)
{
    test_run_result_t r = run_cohortd((const char *const[]){"--help", NULL});
    cr_expect_eq(r.exit_code, 0);
    expect_in(r.out, "Usage: cohortd -c FILE");
    expect_in(r.out, "--check-config");
    expect_in(r.out, "MONGODB_URI");
    test_run_result_free(&r);
}

Test(cohortd, usage_errors_exit_2)
{
    test_run_result_t r = run_cohortd((const char *const[]){NULL});
    cr_expect_eq(r.exit_code, 2, "no -c");
    expect_in(r.err, "no configuration file");
    test_run_result_free(&r);

    r = run_cohortd((const char *const[]){"--bogus", NULL});
    cr_expect_eq(r.exit_code, 2, "unknown option");
    expect_in(r.err, "Usage:");
    test_run_result_free(&r);

    r = run_cohortd((const char *const[]){"-c", "x.ini", "extra", NULL});
    cr_expect_eq(r.exit_code, 2, "stray argument");
    expect_in(r.err, "unexpected argument 'extra'");
    test_run_result_free(&r);
}

/* ---- scheduling keys (issue 6) --------------------------------------------------------- */

Test(config, scheduling_keys_and_kind_defaults)
{
    cohort_config_t *c = load_good("[cluster]\n"
                                   "[service:a]\n"
                                   "handler = " NOOP_SO "\n"
                                   "priority = 3\n"
                                   "not_after_ms = 60000\n"
                                   "not_after_boost = 50\n"
                                   "task_timeout_ms = 1500\n"
                                   "claim_batch = 32\n"
                                   "isolation = process\n"
                                   "kind.report.priority = -7\n"
                                   "kind.report.task_timeout_ms = 0\n"
                                   "kind.mail.not_after_ms = 5000\n");
    const cohort_service_config_t *s = &c->services[0];
    cr_assert_eq(s->claim_batch, 32);
    cr_assert_eq(s->isolation, COHORT_ISOLATION_PROCESS);
    cr_assert_eq(s->not_after_boost, 50);
    cr_assert_eq(s->n_options, 0, "scheduling keys must not reach the handler");
    cohort_task_defaults_t none = cohort_config_task_defaults(s, NULL);
    cr_assert_eq(none.priority, 3);
    cr_assert_eq(none.not_after_ms, 60000);
    cr_assert_eq(none.task_timeout_ms, 1500);
    cohort_task_defaults_t report = cohort_config_task_defaults(s, "report");
    cr_assert_eq(report.priority, -7, "the kind's priority wins");
    cr_assert_eq(report.task_timeout_ms, 0, "a kind may switch the timeout off");
    cr_assert_eq(report.not_after_ms, 60000, "unset kind keys fall back to the service's");
    cohort_task_defaults_t mail = cohort_config_task_defaults(s, "mail");
    cr_assert_eq(mail.priority, 3);
    cr_assert_eq(mail.not_after_ms, 5000);
    cohort_task_defaults_t other = cohort_config_task_defaults(s, "other");
    cr_assert_eq(other.priority, 3, "an unconfigured kind gets the service's defaults");
    cohort_config_destroy(c);
}

/* Durations take the units cohortctl enqueue takes (core/timefmt); a bare number is ms. */
Test(config, durations_take_units_and_bare_numbers_are_milliseconds)
{
    cohort_config_t *c = load_good("[cluster]\n"
                                   "tick_ms = 250ms\n"
                                   "takeover_ms = 5s\n"
                                   "shutdown_grace_ms = 1500\n"
                                   "[service:a]\n"
                                   "handler = " NOOP_SO "\n"
                                   "stall_timeout_ms = 30m\n"
                                   "succeeded_retention_ms = 2d\n"
                                   "history_retention_ms = 1h\n"
                                   "task_timeout_ms = 0\n"
                                   "kind.report.task_timeout_ms = 90s\n");
    cr_assert_eq(c->tick_ms, 250);
    cr_assert_eq(c->takeover_ms, 5000);
    cr_assert_eq(c->shutdown_grace_ms, 1500, "a bare number is milliseconds");
    const cohort_service_config_t *s = &c->services[0];
    cr_assert_eq(s->stall_timeout_ms, 30 * 60000);
    cr_assert_eq(s->succeeded_retention_ms, 2 * 86400000LL);
    cr_assert_eq(s->history_retention_ms, 3600000);
    cr_assert_eq(cohort_config_task_defaults(s, "report").task_timeout_ms, 90000);
    cohort_config_destroy(c);
    /* Ranges and rules apply to the value in ms; a unit is no number of tasks. */
    load_bad("[cluster]\n"
             "tick_ms = 2h\n"        /* 2: over 1 h */
             "takeover_ms = 1.5s\n"  /* 3 */
             "[service:a]\n"         /* 4 */
             "handler = " NOOP_SO "\n" /* 5 */
             "workers = 2s\n"        /* 6: a count */
             "stall_timeout_ms = -5m\n"); /* 7 */
    expect_problem(2, "tick_ms = 7200000 is out of range");
    expect_problem(3, "takeover_ms", "'1.5s'", "a duration");
    expect_problem(6, "workers", "'2s' is not a number");
    expect_problem(7, "stall_timeout_ms", "'-5m'");
}

Test(config, claim_batch_takes_auto_or_a_number)
{
    cohort_config_t *c = load_good("[cluster]\n[service:a]\nhandler = " NOOP_SO "\n"
                                   "claim_batch = auto\n[service:b]\nhandler = " NOOP_SO "\n"
                                   "claim_batch = 256\n");
    cr_assert_eq(c->services[0].claim_batch, COHORT_CLAIM_BATCH_AUTO);
    cr_assert_eq(c->services[1].claim_batch, 256);
    cohort_config_destroy(c);
    load_bad("[cluster]\n[service:a]\nhandler = " NOOP_SO "\nclaim_batch = automatic\n");
    expect_problem(4, "claim_batch", "not a number");
}

Test(config, scheduling_defaults_when_omitted)
{
    cohort_config_t *c = load_good("[cluster]\n[service:a]\nhandler = " NOOP_SO "\n");
    const cohort_service_config_t *s = &c->services[0];
    cr_assert_eq(s->claim_batch, COHORT_CLAIM_BATCH_AUTO, "claim_batch defaults to auto");
    cr_assert_eq(s->isolation, COHORT_ISOLATION_THREAD);
    cr_assert_eq(s->not_after_boost, 10);
    cr_assert_eq(s->defaults.priority, 0);
    cr_assert_eq(s->defaults.task_timeout_ms, 0);
    cohort_config_destroy(c);
}

Test(config, bad_scheduling_keys)
{
    load_bad("[cluster]\n"                     /* 1 */
             "[service:a]\n"                   /* 2 */
             "handler = " NOOP_SO "\n"         /* 3 */
             "priority = 2000000\n"            /* 4 */
             "kind.bad!.priority = 1\n"        /* 5 */
             "kind.ok.colour = 3\n"            /* 6 */
             "isolation = fork\n"              /* 7 */
             "claim_batch = 0\n"               /* 8 */
             "kind.priority = 4\n"             /* 9 */
             "task_timeout_ms = -1\n");        /* 10 */
    expect_problem(4, "priority", "out of range");
    expect_problem(5, "kind 'bad!'");
    expect_problem(6, "unknown kind setting 'colour'");
    expect_problem(7, "isolation", "'fork'");
    expect_problem(8, "claim_batch", "out of range");
    expect_problem(9, "kind.NAME.KEY");
    expect_problem(10, "task_timeout_ms");
}
