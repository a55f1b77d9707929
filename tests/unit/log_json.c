/*
 * log_json.c - log_format = json: every line is one JSON object that a JSON parser (libbson's
 * bson_new_from_json) reads back, with the message and the ids escaped so that quotes,
 * backslashes, newlines, control characters, non-ASCII text and even bytes that are not
 * UTF-8 never break a line or the object; the text format stays as it was.
 */
#include <bson/bson.h>
#include <criterion/criterion.h>
#include <string.h>

#include "core/log.h"
#include "support.h"

/* Splits the captured output into lines (without their newlines); returns how many. */
static size_t split_lines(char *text, char **lines, size_t max)
{
    size_t n = 0;
    for (char *save = NULL, *line = strtok_r(text, "\n", &save); line;
         line = strtok_r(NULL, "\n", &save)) {
        cr_assert_lt(n, max, "too many lines");
        lines[n++] = line;
    }
    return n;
}

static bson_t *parse_line(const char *line)
{
    bson_error_t error;
    bson_t *doc = bson_new_from_json((const uint8_t *)line, -1, &error);
    cr_assert_not_null(doc, "not a JSON object: %s\n  line: %s", error.message, line);
    return doc;
}

/* The string at `key`, or NULL if absent. Fails the test if it is not a string. */
static const char *string_field(const bson_t *doc, const char *key)
{
    bson_iter_t it;
    if (!bson_iter_init_find(&it, doc, key))
        return NULL;
    cr_assert(BSON_ITER_HOLDS_UTF8(&it), "%s is not a string", key);
    return bson_iter_utf8(&it, NULL);
}

static void assert_time_format(const char *time)
{
    cr_assert_not_null(time, "no time field");
    /* 2026-11-21T13:45:01.123Z */
    cr_assert_eq(strlen(time), 24, "time '%s' is not YYYY-MM-DDTHH:MM:SS.mmmZ", time);
    static const char pattern[] = "dddd-dd-ddTdd:dd:dd.dddZ";
    for (size_t i = 0; i < 24; i++)
        if (pattern[i] == 'd')
            cr_assert(time[i] >= '0' && time[i] <= '9', "time '%s': digit expected at %zu", time,
                      i);
        else
            cr_assert_eq(time[i], pattern[i], "time '%s': '%c' expected at %zu", time, pattern[i],
                         i);
}

Test(log_json, every_line_is_one_json_object_with_the_fields)
{
    cohort_log_set_level(COHORT_LOG_DEBUG);
    cohort_log_set_node("web-1");
    cohort_log_set_json(true);
    test_stderr_begin();
    cohort_logf(COHORT_LOG_INFO, "noop", "primary", 3, "became primary (epoch %d)", 3);
    cohort_logf(COHORT_LOG_WARN, "noop", "secondary", 0, "lost it");
    cohort_logf(COHORT_LOG_ERROR, NULL, NULL, 0, "database unreachable");
    cohort_logf(COHORT_LOG_DEBUG, "noop", NULL, 12, "debug line");
    char *out = test_stderr_end();
    cohort_log_set_json(false);

    char *lines[16];
    cr_assert_eq(split_lines(out, lines, 16), 4, "expected 4 lines");

    bson_t *doc = parse_line(lines[0]);
    assert_time_format(string_field(doc, "time"));
    cr_assert_str_eq(string_field(doc, "level"), "info");
    cr_assert_str_eq(string_field(doc, "node"), "web-1");
    cr_assert_str_eq(string_field(doc, "service"), "noop");
    cr_assert_str_eq(string_field(doc, "role"), "primary");
    bson_iter_t it;
    cr_assert(bson_iter_init_find(&it, doc, "epoch") && BSON_ITER_HOLDS_NUMBER(&it),
              "epoch is not a number: %s", lines[0]);
    cr_assert_eq(bson_iter_as_int64(&it), 3);
    cr_assert_str_eq(string_field(doc, "msg"), "became primary (epoch 3)");
    bson_destroy(doc);

    doc = parse_line(lines[1]);
    cr_assert_str_eq(string_field(doc, "level"), "warn");
    cr_assert_str_eq(string_field(doc, "role"), "secondary");
    cr_assert_not(bson_has_field(doc, "epoch"), "epoch 0 is left out, as in the text format");
    bson_destroy(doc);

    doc = parse_line(lines[2]);
    cr_assert_str_eq(string_field(doc, "level"), "error");
    cr_assert_not(bson_has_field(doc, "service"), "an unknown service is left out");
    cr_assert_not(bson_has_field(doc, "role"), "an unknown role is left out");
    cr_assert_str_eq(string_field(doc, "msg"), "database unreachable");
    bson_destroy(doc);

    doc = parse_line(lines[3]);
    cr_assert_str_eq(string_field(doc, "level"), "debug");
    cr_assert_not(bson_has_field(doc, "role"));
    cr_assert(bson_iter_init_find(&it, doc, "epoch"));
    cr_assert_eq(bson_iter_as_int64(&it), 12);
    bson_destroy(doc);
    free(out);
}

Test(log_json, quotes_newlines_and_control_characters_are_escaped)
{
    static const char *const messages[] = {
        "she said \"hi\" and left",
        "back\\slash \\\" and \\n literally",
        "two\nlines\r\nand a tab\there",
        "control \x01\x02\x1b[31m\x1f and DEL \x7f",
        "unicode: caf\xc3\xa9 \xe2\x9c\x93 \xf0\x9f\x98\x80",
        "{\"looks\": \"like json\"}",
        "",
    };
    size_t n = sizeof messages / sizeof messages[0];
    cohort_log_set_level(COHORT_LOG_INFO);
    cohort_log_set_node("node \"quoted\"\\with\nnewline");
    cohort_log_set_json(true);
    test_stderr_begin();
    for (size_t i = 0; i < n; i++)
        cohort_logf(COHORT_LOG_INFO, "svc", "primary", 1, "%s", messages[i]);
    char *out = test_stderr_end();
    cohort_log_set_json(false);

    char *lines[16];
    cr_assert_eq(split_lines(out, lines, 16), n,
                 "a newline in a message must not split its line:\n%s", out);
    for (size_t i = 0; i < n; i++) {
        bson_t *doc = parse_line(lines[i]);
        cr_assert_str_eq(string_field(doc, "msg"), messages[i], "message %zu changed", i);
        cr_assert_str_eq(string_field(doc, "node"), "node \"quoted\"\\with\nnewline");
        bson_destroy(doc);
        for (const char *c = lines[i]; *c; c++)
            cr_assert((unsigned char)*c >= 0x20, "raw control character 0x%02x in line %zu",
                      (unsigned)(unsigned char)*c, i);
    }
    free(out);
}

Test(log_json, bytes_that_are_not_utf8_still_give_valid_json)
{
    cohort_log_set_node("n1");
    cohort_log_set_json(true);
    test_stderr_begin();
    cohort_logf(COHORT_LOG_WARN, "svc", NULL, 0, "binary \xff\xfe\x80 data \"q\"");
    char *out = test_stderr_end();
    cohort_log_set_json(false);
    char *lines[4];
    cr_assert_eq(split_lines(out, lines, 4), 1);
    bson_t *doc = parse_line(lines[0]);
    const char *msg = string_field(doc, "msg");
    cr_assert_not_null(msg);
    cr_assert(strstr(msg, "binary") && strstr(msg, "data \"q\""), "message lost: %s", msg);
    cr_assert(bson_utf8_validate(msg, strlen(msg), false), "message is not UTF-8");
    bson_destroy(doc);
    free(out);
}

Test(log_json, a_long_message_is_cut_without_breaking_the_line)
{
    /* 3,000 two-byte characters: the cut falls inside the message, perhaps mid-character. */
    size_t chars = 3000;
    char *long_msg = malloc(chars * 2 + 1);
    cr_assert_not_null(long_msg);
    for (size_t i = 0; i < chars; i++)
        memcpy(long_msg + 2 * i, "\xc3\xa9", 2);
    long_msg[chars * 2] = '\0';
    for (int shift = 0; shift < 2; shift++) {
        cohort_log_set_node("n1");
        cohort_log_set_json(true);
        test_stderr_begin();
        cohort_logf(COHORT_LOG_INFO, NULL, NULL, 0, "%s%s", shift ? "x" : "", long_msg);
        char *out = test_stderr_end();
        cohort_log_set_json(false);
        char *lines[4];
        cr_assert_eq(split_lines(out, lines, 4), 1);
        bson_t *doc = parse_line(lines[0]);
        const char *msg = string_field(doc, "msg");
        cr_assert(strlen(msg) > 1000 && strlen(msg) < chars * 2, "length %zu", strlen(msg));
        cr_assert(bson_utf8_validate(msg, strlen(msg), false), "the cut left broken UTF-8");
        cr_assert(strstr(msg, "\xc3\xa9\xc3\xa9"), "the message was replaced, not cut");
        bson_destroy(doc);
        free(out);
    }
    free(long_msg);
}

Test(log_json, the_text_format_is_unchanged)
{
    cohort_log_set_level(COHORT_LOG_INFO);
    cohort_log_set_node("web-1");
    cohort_log_set_json(false);
    test_stderr_begin();
    cohort_logf(COHORT_LOG_INFO, "noop", "primary", 3, "became primary");
    cohort_logf(COHORT_LOG_WARN, NULL, NULL, 0, "plain");
    char *out = test_stderr_end();
    char *lines[4];
    cr_assert_eq(split_lines(out, lines, 4), 2);
    cr_assert_eq(strlen(lines[0]) > 24, true);
    cr_assert_str_eq(lines[0] + 24, " INFO  node=web-1 service=noop role=primary epoch=3 | "
                                    "became primary");
    cr_assert_str_eq(lines[1] + 24, " WARN  node=web-1 | plain");
    lines[0][24] = '\0';
    assert_time_format(lines[0]);
    free(out);
}

Test(log_json, levels_below_the_threshold_are_dropped)
{
    cohort_log_set_level(COHORT_LOG_WARN);
    cohort_log_set_json(true);
    test_stderr_begin();
    cohort_logf(COHORT_LOG_INFO, NULL, NULL, 0, "dropped");
    cohort_logf(COHORT_LOG_ERROR, NULL, NULL, 0, "kept");
    char *out = test_stderr_end();
    cohort_log_set_json(false);
    cohort_log_set_level(COHORT_LOG_INFO);
    char *lines[4];
    cr_assert_eq(split_lines(out, lines, 4), 1);
    bson_t *doc = parse_line(lines[0]);
    cr_assert_str_eq(string_field(doc, "msg"), "kept");
    bson_destroy(doc);
    free(out);
}
