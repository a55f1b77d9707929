/*
 * plugin.c - loading handlers (src/node/handler/plugin.h) and starting a service's handler
 * (cohort_service_new): every way a handler can be wrong gives a message that names the
 * file and the problem, and nothing is left loaded.
 *
 * The broken handlers are built from tests/support/handlers/ into build/tests/handlers/.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "node/handler/plugin.h"
#include "node/service.h"
#include "support.h"

static char *handler_path(const char *name)
{
    char *path = strdup(test_handler_path(name));
    cr_assert_not_null(path);
    return path;
}

/* Loads `path`, expects a failure and returns the message (static). */
static const char *load_error(const char *path)
{
    static char err[1024];
    bson_error_t error;
    strcpy(error.message, "(untouched)");
    cohort_plugin_t *plugin = cohort_plugin_load(path, &error);
    snprintf(err, sizeof err, "%s", error.message);
    cr_assert_null(plugin, "loading %s should fail", path);
    cr_assert_str_neq(err, "(untouched)", "no message for %s", path);
    cr_assert_not_null(strstr(err, path), "the message does not name the file: %s", err);
    return err;
}

static void assert_contains(const char *text, const char *part)
{
    cr_assert_not_null(strstr(text, part), "expected \"%s\" in: %s", part, text);
}

Test(plugin, loads_a_good_handler)
{
    bson_error_t err;
    const char *path = test_build_path("handlers/cohort_noop.so");
    cohort_plugin_t *plugin = cohort_plugin_load(path, &err);
    cr_assert_not_null(plugin, "cannot load the shipped noop handler: %s", err.message);
    cr_assert_eq(plugin->handler->abi_version, COHORT_HANDLER_ABI_VERSION);
    cr_assert_str_eq(plugin->handler->name, "noop");
    cr_assert_not_null(plugin->handler->process_task);
    cr_assert_str_eq(plugin->path, path);
    cohort_plugin_unload(plugin);
}

Test(plugin, file_not_found)
{
    const char *err = load_error("/nonexistent/dir/handler.so");
    assert_contains(err, "cannot load handler");
    assert_contains(err, "No such file");
}

Test(plugin, not_a_shared_object)
{
    char *dir = test_tmpdir("plugin");
    char *path = test_write_file(dir, "text.so", "this is a text file, not an ELF object\n");
    const char *err = load_error(path);
    assert_contains(err, "cannot load handler");
    /* dlerror() says why, e.g. "invalid ELF header" or "file too short" */
    cr_assert(strstr(err, "ELF") || strstr(err, "too short"), "no reason given: %s", err);
    free(path);
    free(dir);
}

Test(plugin, shared_object_without_the_symbol)
{
    char *path = handler_path("missing_symbol");
    const char *err = load_error(path);
    assert_contains(err, "is not a Cohort handler");
    assert_contains(err, "'cohort_handler'");
    free(path);
}

/* cohortd (and this test binary, built the same way) exports only the handler ABI: a handler
 * that calls another function of the daemon fails to load, in one line naming the function. */
Test(plugin, a_handler_calling_an_internal_function_does_not_load)
{
    char *path = handler_path("internal_call");
    const char *err = load_error(path);
    assert_contains(err, "it calls 'cohort_clock_monotonic_ms'");
    assert_contains(err, "not part of the handler ABI");
    cr_assert_null(strchr(err, '\n'), "more than one line: %s", err);
    free(path);
}

/* bson_t crosses the ABI: a handler built against another major version of libbson is
 * refused, and one built against this one (every other test handler) loads. */
Test(plugin, a_handler_built_against_another_libbson_major_does_not_load)
{
    char *path = handler_path("bson_mismatch");
    const char *err = load_error(path);
    char expect[128];
    snprintf(expect, sizeof expect, "built against libbson 99, but this cohortd uses libbson %d",
             BSON_MAJOR_VERSION);
    assert_contains(err, expect);
    assert_contains(err, "rebuild");
    cr_assert_null(strchr(err, '\n'), "more than one line: %s", err);
    free(path);
}

Test(plugin, abi_version_too_new)
{
    char *path = handler_path("wrong_version");
    const char *err = load_error(path);
    char expect[128];
    snprintf(expect, sizeof expect, "ABI version %d", COHORT_HANDLER_ABI_VERSION + 1);
    assert_contains(err, expect);
    snprintf(expect, sizeof expect, "versions 1 to %d", COHORT_HANDLER_ABI_VERSION);
    assert_contains(err, expect);
    assert_contains(err, "rebuild");
    free(path);
}

Test(plugin, handlers_built_for_older_abi_versions_still_load)
{
    bson_error_t err;
    char *v3 = handler_path("abi_v3");
    cohort_plugin_t *plugin = cohort_plugin_load(v3, &err);
    cr_assert_not_null(plugin, "an ABI 3 handler was refused: %s", err.message);
    cr_assert_eq(plugin->handler->abi_version, 3);
    cr_assert_not_null(plugin->handler->kinds, "the kinds of an ABI 3 handler were dropped");
    cr_assert_str_eq(plugin->handler->kinds[0], "mail");
    cohort_plugin_unload(plugin);
    free(v3);

    char *v1 = handler_path("abi_v1");
    plugin = cohort_plugin_load(v1, &err);
    cr_assert_not_null(plugin, "an ABI 1 handler was refused: %s", err.message);
    cr_assert_eq(plugin->handler->abi_version, 1);
    cr_assert_not_null(plugin->handler->process_task);
    cr_assert_null(plugin->handler->on_tasks_completed, "a field ABI 1 lacks was read");
    cohort_plugin_unload(plugin);
    free(v1);
}

Test(plugin, kinds_that_break_the_naming_rule)
{
    char *path = handler_path("bad_kinds");
    const char *err = load_error(path);
    assert_contains(err, "kind 'bulk mail'");
    assert_contains(err, "kinds[1]");
    assert_contains(err, "[A-Za-z0-9_-]");
    free(path);
}

Test(plugin, abi_version_zero)
{
    char *path = handler_path("zero_version");
    const char *err = load_error(path);
    assert_contains(err, "ABI version 0");
    free(path);
}

Test(plugin, no_process_task)
{
    char *path = handler_path("no_process");
    const char *err = load_error(path);
    assert_contains(err, "process_task");
    assert_contains(err, "required");
    free(path);
}

Test(plugin, a_short_buffer_truncates_but_stays_terminated)
{
    bson_error_t err;
    memset(&err, 'x', sizeof err);
    cr_assert_null(cohort_plugin_load("/nonexistent/handler.so", &err));
    cr_assert_lt(strlen(err.message), sizeof err.message);
}

/* ---- cohort_service_new: the handler's init() ---------------------------------------- */

/* cohort_service_new() with the file settings of a cluster section of takeover_ms 4000; the
 * error's message goes to `err`. */
static cohort_service_t *new_service(const cohort_service_config_t *config, char *err,
                                     size_t errlen)
{
    cohort_config_t cluster = {.tick_ms = 1000, .takeover_ms = 4000};
    cohort_settings_t file;
    cohort_settings_from_config(&cluster, config, &file);
    bson_error_t error;
    cohort_service_t *s = cohort_service_new(config, "node-1", &file, NULL, NULL, &error);
    if (!s)
        snprintf(err, errlen, "%s", error.message);
    return s;
}

static cohort_service_config_t service_config(const char *name, char *path,
                                              cohort_option_t *options, size_t n_options)
{
    return (cohort_service_config_t){
        .name = (char *)name,
        .handler_path = path,
        .handler_line = 3,
        .primary_task_count = 10,
        .workers = 1,
        .max_attempts = 5,
        .retry_base_ms = 1000,
        .options = options,
        .n_options = n_options,
        .line = 2,
    };
}

Test(service_new, init_failure_carries_the_handlers_message)
{
    char *path = handler_path("init_fails");
    cohort_option_t options[] = {{"colour", "blue", 7}};
    cohort_service_config_t config = service_config("mail", path, options, 1);
    char err[1024] = "";
    cohort_service_t *s = new_service(&config, err, sizeof err);
    cr_assert_null(s);
    assert_contains(err, "[service:mail]");
    assert_contains(err, "'init_fails'");
    assert_contains(err, "init_fails: refusing service 'mail' on purpose (1 option(s))");
    free(path);
}

Test(service_new, init_failure_without_a_message_says_so)
{
    char *path = handler_path("init_fails");
    cohort_option_t options[] = {{"silent", "yes", 9}};
    cohort_service_config_t config = service_config("mail", path, options, 1);
    char err[1024] = "";
    cr_assert_null(new_service(&config, err, sizeof err));
    assert_contains(err, "[service:mail]");
    assert_contains(err, "without a message");
    free(path);
}

Test(service_new, options_for_a_handler_without_init)
{
    char *path = handler_path("no_init");
    cohort_option_t options[] = {{"colour", "blue", 7}, {"size", "3", 8}};
    cohort_service_config_t config = service_config("mail", path, options, 2);
    char err[1024] = "";
    cr_assert_null(new_service(&config, err, sizeof err));
    assert_contains(err, "line 7");
    assert_contains(err, "'colour'");
    assert_contains(err, "[service:mail]");
    assert_contains(err, "takes no options");
    free(path);
}

Test(service_new, handler_without_init_and_no_options_starts)
{
    char *path = handler_path("no_init");
    cohort_service_config_t config = service_config("mail", path, NULL, 0);
    char err[1024] = "";
    cohort_service_t *s = new_service(&config, err, sizeof err);
    cr_assert_not_null(s, "%s", err);
    cr_assert_str_eq(cohort_election_role(&s->election), "secondary");
    cohort_service_destroy(s, NULL);
    free(path);
}

Test(service_new, load_errors_come_through)
{
    char *path = handler_path("no_process");
    cohort_service_config_t config = service_config("mail", path, NULL, 0);
    char err[1024] = "";
    cr_assert_null(new_service(&config, err, sizeof err));
    assert_contains(err, path);
    assert_contains(err, "process_task");
    free(path);
}

Test(service_new, noop_rejects_a_bad_option_with_its_line)
{
    char *path = strdup(test_build_path("handlers/cohort_noop.so"));
    cohort_option_t options[] = {{"sleep_ms", "abc", 12}};
    cohort_service_config_t config = service_config("mail", path, options, 1);
    char err[1024] = "";
    cr_assert_null(new_service(&config, err, sizeof err));
    assert_contains(err, "line 12");
    assert_contains(err, "sleep_ms");
    assert_contains(err, "'abc'");
    free(path);
}
