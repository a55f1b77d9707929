/*
 * bad_config.c - configuration files no person means to write: binary data, a 100 KB value,
 * control characters and invalid UTF-8 in names, thousands of lines. Each must give a clear
 * problem with its line (or load whole), never a crash or a silently cut value. The config
 * parser's fuzz target (tests/fuzz/fuzz_config.c) tries the rest at random;
 * docs/RELIABILITY.md's bad-input table cites both.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "support.h"
#include "core/config.h"

#define NOOP_SO COHORT_BUILD_DIR "/handlers/cohort_noop.so"

static cohort_config_errors_t errors;

static void clear(void)
{
    cohort_config_errors_clear(&errors);
}

TestSuite(bad_config, .fini = clear);

static char *all_errors(void)
{
    size_t len = 1;
    for (size_t i = 0; i < errors.count; i++)
        len += strlen(errors.messages[i]) + 1;
    char *out = calloc(1, len);
    cr_assert_not_null(out);
    for (size_t i = 0; i < errors.count; i++) {
        strcat(out, errors.messages[i]);
        strcat(out, "\n");
    }
    return out;
}

Test(bad_config, a_binary_file_is_refused_as_not_text)
{
    char *dir = test_tmpdir("badcfg");
    char *path = NULL;
    cr_assert_geq(asprintf(&path, "%s/random.conf", dir), 0);
    FILE *f = fopen(path, "wb");
    cr_assert_not_null(f);
    for (int i = 0; i < 4096; i++)
        fputc((i * 7919) & 0xff, f); /* every byte value, NULs included */
    fclose(f);
    cohort_config_t *c = cohort_config_load(path, &errors);
    char *listed = all_errors();
    cr_assert_null(c, "a binary file was accepted");
    cr_assert(strstr(listed, "not a text file"), "no clear reason:\n%s", listed);
    free(listed);
    remove(path);
    free(path);
    free(dir);
}

Test(bad_config, a_hundred_kilobyte_value_is_kept_whole)
{
    /* In the password: libmongoc itself limits appName (128 bytes) and host names. */
    size_t n = 100000;
    char *app = malloc(n + 1);
    cr_assert_not_null(app);
    memset(app, 'a', n);
    app[n] = '\0';
    char *text = NULL;
    cr_assert_geq(asprintf(&text,
                           "[cluster]\nmongodb_uri = mongodb://u:%s@h/\n"
                           "[service:s]\nhandler = " NOOP_SO "\n",
                           app),
                  0);
    cohort_config_t *c = cohort_config_load_string(text, "big.ini", NULL, &errors);
    char *listed = all_errors();
    cr_assert_not_null(c, "refused:\n%s", listed);
    if (!c->mongodb_uri_from_env)
        cr_assert_eq(strlen(c->mongodb_uri), strlen("mongodb://u:@h/") + n,
                     "the value was cut to %zu characters", strlen(c->mongodb_uri));
    cohort_config_destroy(c);
    free(listed);
    free(text);
    free(app);
}

Test(bad_config, control_characters_and_invalid_utf8_in_names_are_refused_with_their_line)
{
    const char *text = "[cluster]\n"
                       "node_id = a\x01" "b\n"        /* 2 */
                       "[service:caf\xc3\xa9]\n"      /* 3 */
                       "handler = " NOOP_SO "\n"      /* 4 */
                       "[service:\xff\xfe]\n"         /* 5 */
                       "handler = " NOOP_SO "\n"      /* 6 */
                       "[service:ok]\n"               /* 7 */
                       "handler = " NOOP_SO "\n"      /* 8 */
                       "sleep_ms = \xe2\x82\xac\n";   /* 9: a handler option, checked later */
    cohort_config_t *c = cohort_config_load_string(text, "names.ini", NULL, &errors);
    char *listed = all_errors();
    cr_assert_null(c, "accepted:\n%s", listed);
    cr_assert(strstr(listed, "line 2:"), "node_id with a control character:\n%s", listed);
    cr_assert(strstr(listed, "line 3:"), "non-ASCII service name:\n%s", listed);
    cr_assert(strstr(listed, "line 5:"), "invalid UTF-8 service name:\n%s", listed);
    free(listed);
}

Test(bad_config, ten_thousand_lines_of_garbage_list_every_problem)
{
    size_t lines = 10000, cap = lines * 16 + 64;
    char *text = malloc(cap);
    cr_assert_not_null(text);
    size_t len = (size_t)snprintf(text, cap, "[cluster]\n");
    for (size_t i = 0; i < lines; i++)
        len += (size_t)snprintf(text + len, cap - len, "k%zu = v\n", i);
    cohort_config_t *c = cohort_config_load_string(text, "many.ini", NULL, &errors);
    cr_assert_null(c);
    cr_assert_geq(errors.count, lines, "only %zu problems listed for %zu unknown keys",
                  errors.count, lines);
    free(text);
}
