/*
 * ui_assets.c - the dashboard's embedded files (src/node/http/ui.h, cmake/embed_assets.cmake):
 * every file under src/node/http/ui/ is in the table byte for byte with a distinct ETag and a
 * known Content-Type; paths map as documented and nothing outside the table is found; the
 * If-None-Match reading; and the rules of docs/UI.md the files must keep: no innerHTML, no
 * inline script or handler, nothing loaded from another origin.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "node/http/ui.h"

#define UI_DIR COHORT_SOURCE_DIR "/src/node/http/ui"

/* The bytes of a file (NUL-terminated, caller frees) and its length. */
static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    cr_assert_not_null(f, "cannot open %s", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    cr_assert_eq(fread(buf, 1, (size_t)n, f), (size_t)n);
    buf[n] = '\0';
    fclose(f);
    *len = (size_t)n;
    return buf;
}

/* Calls fn on each file below `dir` (relative name, full path); returns how many. */
static size_t walk(const char *dir, const char *rel, void (*fn)(const char *, const char *))
{
    size_t n = 0;
    DIR *d = opendir(dir);
    cr_assert_not_null(d, "cannot open %s", dir);
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        char path[1024], name[512];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        snprintf(name, sizeof name, "%s%s%s", rel, *rel ? "/" : "", e->d_name);
        struct stat st;
        cr_assert_eq(stat(path, &st), 0);
        if (S_ISDIR(st.st_mode)) {
            n += walk(path, name, fn);
        } else {
            fn(name, path);
            n++;
        }
    }
    closedir(d);
    return n;
}

static const cohort_ui_asset_t *by_name(const char *name)
{
    for (size_t i = 0; i < cohort_ui_asset_count; i++)
        if (strcmp(cohort_ui_assets[i].name, name) == 0)
            return &cohort_ui_assets[i];
    return NULL;
}

static void same_bytes(const char *name, const char *path)
{
    const cohort_ui_asset_t *a = by_name(name);
    cr_assert_not_null(a, "%s is not embedded", name);
    size_t len;
    char *bytes = slurp(path, &len);
    cr_assert_eq(a->len, len, "%s: %zu bytes embedded, %zu on disk", name, a->len, len);
    cr_assert(memcmp(a->bytes, bytes, len) == 0, "%s differs from the file", name);
    cr_assert_eq(a->bytes[len], 0, "%s: no NUL after the bytes", name);
    cr_assert_neq(strcmp(cohort_ui_content_type(name), "application/octet-stream"), 0,
                  "%s: no Content-Type for its extension", name);
    free(bytes);
}

Test(ui_assets, every_file_embedded_byte_for_byte)
{
    size_t n = walk(UI_DIR, "", same_bytes);
    cr_assert_eq(n, cohort_ui_asset_count, "%zu files, %zu embedded", n, cohort_ui_asset_count);
    cr_assert_geq(n, 5);
}

Test(ui_assets, etags_are_quoted_and_distinct)
{
    for (size_t i = 0; i < cohort_ui_asset_count; i++) {
        const char *e = cohort_ui_assets[i].etag;
        cr_assert_eq(strlen(e), 18, "%s", e);
        cr_assert(e[0] == '"' && e[17] == '"', "%s", e);
        for (size_t j = 0; j < i; j++)
            if (cohort_ui_assets[i].len != cohort_ui_assets[j].len ||
                memcmp(cohort_ui_assets[i].bytes, cohort_ui_assets[j].bytes,
                       cohort_ui_assets[i].len) != 0)
                cr_assert_str_neq(e, cohort_ui_assets[j].etag);
    }
}

Test(ui_assets, paths)
{
    cr_assert_str_eq(cohort_ui_find("/ui/")->name, "index.html");
    cr_assert_str_eq(cohort_ui_find("/ui/login")->name, "login.html");
    cr_assert_str_eq(cohort_ui_find("/ui/js/app.js")->name, "js/app.js");
    cr_assert_null(cohort_ui_find("/ui/nope.js"));
    cr_assert_null(cohort_ui_find("/ui/../CMakeLists.txt"));
    cr_assert_null(cohort_ui_find("/ui/js/../../ui.c"));
    cr_assert_null(cohort_ui_find("/ui"));
    cr_assert_null(cohort_ui_find("/index.html"));
    cr_assert_null(cohort_ui_find(NULL));
    cr_assert(cohort_ui_path("/ui"));
    cr_assert(cohort_ui_path("/ui/x"));
    cr_assert_not(cohort_ui_path("/uix"));
    cr_assert_not(cohort_ui_path("/api/v1/ui"));
}

Test(ui_assets, content_types)
{
    cr_assert_str_eq(cohort_ui_content_type("a.html"), "text/html; charset=utf-8");
    cr_assert_str_eq(cohort_ui_content_type("js/a.js"), "text/javascript; charset=utf-8");
    cr_assert_str_eq(cohort_ui_content_type("a.css"), "text/css; charset=utf-8");
    cr_assert_str_eq(cohort_ui_content_type("vendor/x/LICENSE"), "text/plain; charset=utf-8");
    cr_assert_str_eq(cohort_ui_content_type("COPYING"), "application/octet-stream");
    cr_assert_str_eq(cohort_ui_content_type("a.b/c"), "application/octet-stream");
}

Test(ui_assets, if_none_match)
{
    const char *e = "\"0123456789abcdef\"";
    cr_assert(cohort_ui_etag_matches("\"0123456789abcdef\"", e));
    cr_assert(cohort_ui_etag_matches("W/\"0123456789abcdef\"", e));
    cr_assert(cohort_ui_etag_matches("\"x\", \"0123456789abcdef\"", e));
    cr_assert(cohort_ui_etag_matches("*", e));
    cr_assert_not(cohort_ui_etag_matches(NULL, e));
    cr_assert_not(cohort_ui_etag_matches("", e));
    cr_assert_not(cohort_ui_etag_matches("\"0123456789abcdef0\"", e));
    cr_assert_not(cohort_ui_etag_matches("\"0123456789abcde\"", e));
}

/* The pages' own rules (docs/UI.md): our files only, vendored libraries excepted. */
static void keeps_the_rules(const char *name, const char *path)
{
    if (strncmp(name, "vendor/", 7) == 0)
        return;
    size_t len;
    char *text = slurp(path, &len);
    cr_assert_null(strstr(text, "innerHTML"), "%s uses innerHTML", name);
    cr_assert_null(strstr(text, "outerHTML"), "%s uses outerHTML", name);
    cr_assert_null(strstr(text, "insertAdjacentHTML"), "%s inserts HTML", name);
    cr_assert_null(strstr(text, "document.write"), "%s uses document.write", name);
    cr_assert_null(strstr(text, "eval("), "%s uses eval", name);
    cr_assert_null(strstr(text, "src=\"http"), "%s loads from another origin", name);
    cr_assert_null(strstr(text, "href=\"http"), "%s links another origin's file", name);
    cr_assert_null(strstr(text, "//cdn"), "%s names a CDN", name);
    if (strstr(name, ".html")) {
        cr_assert_null(strstr(text, "<script>"), "%s has an inline script", name);
        cr_assert_null(strstr(text, "<style"), "%s has an inline style sheet", name);
        cr_assert_null(strstr(text, " onclick="), "%s has an inline handler", name);
        cr_assert_null(strstr(text, " style="), "%s has an inline style", name);
    }
    free(text);
}

Test(ui_assets, pages_keep_the_rules)
{
    walk(UI_DIR, "", keeps_the_rules);
}
