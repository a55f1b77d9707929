/*
 * jsondoc.c - the gate for documents users hand Cohort to store (see jsondoc.h).
 *
 * JSON text is read twice: a scan of its structure (strings, numbers, brackets; no values
 * built) finds what libbson would get wrong (an integer past int64, text after the object,
 * nesting) and names the field from the keys it passed; then libbson builds the document,
 * reporting every syntax error itself; then one walk of the BSON checks the keys. The scan
 * and the walk cost time linear in the input (duplicate keys are found by sorting).
 */
#include "core/jsondoc.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"

#define PATH_MAX_TEXT 200 /* bytes of a field's path in a message */
#define SCAN_DEPTH_LIMIT 128

static bool refuse(bson_error_t *error, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static bool refuse(bson_error_t *error, const char *fmt, ...)
{
    char text[sizeof error->message];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    bson_set_error(error, COHORT_DOMAIN_USAGE, COHORT_CODE_INVALID, "%s", text);
    return false;
}

/* Appends `n` bytes of `s` to the path `out` (cap bytes), cut with "..." when it is full. */
static void path_add(char *out, size_t cap, const char *s, size_t n)
{
    size_t len = strlen(out);
    if (n == 0)
        return;
    if (len + n + 1 > cap) {
        if (len + 4 <= cap)
            strcpy(out + len, "...");
        return;
    }
    memcpy(out + len, s, n);
    out[len + n] = '\0';
}

/* Appends the element `key` (an object's) or `index` (an array's) to the path. */
static void path_element(char *out, size_t cap, bool array, const char *key, size_t key_len,
                         uint32_t index)
{
    char part[16];
    if (array) {
        snprintf(part, sizeof part, "[%u]", index);
        path_add(out, cap, part, strlen(part));
        return;
    }
    if (out[0])
        path_add(out, cap, ".", 1);
    path_add(out, cap, key, key_len);
}

/* ---- the scan of JSON text ------------------------------------------------------------- */

typedef struct frame {
    bool array;
    const char *key; /* an object's current key, raw as in the text (escapes kept) */
    size_t key_len;
    uint32_t index; /* an array's current element */
} frame_t;

typedef struct scan {
    const char *text;
    size_t len, at;
    frame_t frames[SCAN_DEPTH_LIMIT];
    int depth;
} scan_t;

static void scan_path(const scan_t *s, char *out, size_t cap)
{
    out[0] = '\0';
    for (int i = 0; i < s->depth; i++)
        path_element(out, cap, s->frames[i].array, s->frames[i].key, s->frames[i].key_len,
                     s->frames[i].index);
}

/* An integer's digits (after an optional '-') must fit int64; leading zeros count nothing. */
static bool integer_fits(const char *token, size_t n)
{
    size_t sign = token[0] == '-', first = sign;
    while (first + 1 < n && token[first] == '0')
        first++;
    if (n - first > 19)
        return false;
    char buf[24];
    snprintf(buf, sizeof buf, "%s%.*s", sign ? "-" : "", (int)(n - first), token + first);
    errno = 0;
    (void)strtoll(buf, NULL, 10);
    return errno != ERANGE;
}

/* A number token at s->at: an integer (no '.', 'e' or 'E') out of int64 is refused. */
static bool scan_number(scan_t *s, bson_error_t *error)
{
    size_t start = s->at;
    bool integer = true;
    while (s->at < s->len && strchr("-+0123456789.eE", s->text[s->at]) && s->text[s->at]) {
        integer = integer && !strchr(".eE", s->text[s->at]);
        s->at++;
    }
    size_t n = s->at - start;
    if (!integer || n == 0 || integer_fits(s->text + start, n))
        return true;
    char path[PATH_MAX_TEXT];
    scan_path(s, path, sizeof path);
    return refuse(error,
                  "field '%s': %.*s%s is outside the 64-bit integer range "
                  "(-9223372036854775808..9223372036854775807)",
                  path, (int)(n > 40 ? 40 : n), s->text + start, n > 40 ? "..." : "");
}

/* A string at s->at (its opening quote); false if it does not end (libbson will say so). */
static bool scan_string(scan_t *s, const char **body, size_t *body_len)
{
    size_t i = s->at + 1;
    while (i < s->len && s->text[i] != '"')
        i += s->text[i] == '\\' ? 2 : 1;
    if (i >= s->len)
        return false;
    *body = s->text + s->at + 1;
    *body_len = i - s->at - 1;
    s->at = i + 1;
    return true;
}

/* Opens an object or an array at s->at. */
static bool scan_open(scan_t *s, int max_depth, bson_error_t *error)
{
    if (s->depth >= max_depth || s->depth >= SCAN_DEPTH_LIMIT) {
        char path[PATH_MAX_TEXT];
        scan_path(s, path, sizeof path);
        return refuse(error, "field '%s': nested deeper than %d levels", path, max_depth);
    }
    s->frames[s->depth++] = (frame_t){.array = s->text[s->at] == '['};
    s->at++;
    return true;
}

/* Scans from the opening '{' at s->at to its closing '}' and checks that only white space
 * follows. Text it cannot follow (a syntax error) ends the scan with true: libbson's parse
 * reports it. */
static bool scan_object(scan_t *s, int max_depth, bson_error_t *error)
{
    bool expect_key = false;
    while (s->at < s->len) {
        char c = s->text[s->at];
        frame_t *top = s->depth ? &s->frames[s->depth - 1] : NULL;
        if (c == '{' || c == '[') {
            if (!scan_open(s, max_depth, error))
                return false;
            expect_key = c == '{';
        } else if (c == '}' || c == ']') {
            s->at++;
            expect_key = false;
            if (!top)
                return true;
            if (--s->depth == 0)
                break;
        } else if (c == '"') {
            const char *body;
            size_t n;
            if (!scan_string(s, &body, &n))
                return true;
            if (top && !top->array && expect_key) {
                top->key = body;
                top->key_len = n;
                expect_key = false;
            }
        } else if (c == ',') {
            s->at++;
            if (top && top->array)
                top->index++;
            else
                expect_key = true;
        } else if (c == '-' || (c >= '0' && c <= '9')) {
            if (!scan_number(s, error))
                return false;
        } else if (strchr(" \t\r\n:", c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) {
            s->at++; /* white space, ':', true, false, null */
        } else {
            return true;
        }
    }
    if (s->depth != 0)
        return true; /* unterminated: libbson says where */
    size_t rest = s->at;
    while (rest < s->len && strchr(" \t\r\n", s->text[rest]) && s->text[rest])
        rest++;
    if (rest < s->len) {
        /* The text is not NUL-terminated: quote at most what is there. */
        size_t quoted = s->len - rest < 20 ? s->len - rest : 20;
        return refuse(error,
                      "the JSON object ends at byte %zu and something follows it ('%.*s'): "
                      "send exactly one object",
                      s->at, (int)quoted, s->text + rest);
    }
    return true;
}

/* ---- the walk of BSON ------------------------------------------------------------------ */

static int compare_keys(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* A key given twice in `doc` into *dup (NULL: none); false when out of memory. */
static bool find_duplicate(const bson_t *doc, const char **dup)
{
    *dup = NULL;
    uint32_t n = bson_count_keys(doc);
    if (n < 2)
        return true;
    const char **keys = malloc(n * sizeof *keys);
    if (!keys)
        return false;
    bson_iter_t it;
    uint32_t i = 0;
    if (bson_iter_init(&it, doc))
        while (i < n && bson_iter_next(&it))
            keys[i++] = bson_iter_key(&it);
    qsort(keys, i, sizeof *keys, compare_keys);
    for (uint32_t j = 1; j < i && !*dup; j++)
        if (strcmp(keys[j - 1], keys[j]) == 0)
            *dup = keys[j];
    free(keys);
    return true;
}

/* What a walk checks: the depth, and whether keys may start with '$'. */
typedef struct rules {
    int max_depth;
    bool dollar_ok;
} rules_t;

static bool walk(const bson_t *doc, bool array, char *path, int depth, const rules_t *r,
                 bson_error_t *error);

/* One element of a document being walked; `path` holds its parent's path. */
static bool walk_element(bson_iter_t *it, bool array, uint32_t index, char *path, int depth,
                         const rules_t *r, bson_error_t *error)
{
    const char *key = bson_iter_key(it);
    size_t parent = strlen(path);
    path_element(path, PATH_MAX_TEXT, array, key, strlen(key), index);
    bool ok = true;
    if (!array && !*key)
        ok = refuse(error, "field '%s': a key is empty (MongoDB refuses it)", path);
    else if (!array && key[0] == '$' && !r->dollar_ok)
        ok = refuse(error,
                    "field '%s': a key may not start with '$' (MongoDB refuses it in a "
                    "stored document)",
                    path);
    else if (BSON_ITER_HOLDS_DOCUMENT(it) || BSON_ITER_HOLDS_ARRAY(it)) {
        uint32_t len = 0;
        const uint8_t *raw = NULL;
        bson_t child;
        if (BSON_ITER_HOLDS_DOCUMENT(it))
            bson_iter_document(it, &len, &raw);
        else
            bson_iter_array(it, &len, &raw);
        ok = (raw && bson_init_static(&child, raw, len))
                 ? walk(&child, BSON_ITER_HOLDS_ARRAY(it), path, depth + 1, r, error)
                 : refuse(error, "field '%s' is not a valid document", path);
    }
    path[parent] = '\0';
    return ok;
}

static bool walk(const bson_t *doc, bool array, char *path, int depth, const rules_t *r,
                 bson_error_t *error)
{
    if (depth > r->max_depth)
        return refuse(error, "field '%s': nested deeper than %d levels", path, r->max_depth);
    const char *dup = NULL;
    if (!array && !find_duplicate(doc, &dup))
        return cohort_error_nomem(error, "checking a document's keys");
    if (dup) {
        size_t parent = strlen(path);
        path_element(path, PATH_MAX_TEXT, false, dup, strlen(dup), 0);
        refuse(error, "field '%s' given twice (a key may appear once in an object)", path);
        path[parent] = '\0';
        return false;
    }
    bson_iter_t it;
    if (!bson_iter_init(&it, doc))
        return refuse(error, "field '%s' is not a valid document", path);
    uint32_t index = 0;
    while (bson_iter_next(&it))
        if (!walk_element(&it, array, index++, path, depth, r, error))
            return false;
    return true;
}

/* Keys and depth of `doc`, whose path is `where` ("" for a body's fields). */
static bool check_keys(const bson_t *doc, bool array, const char *where, const rules_t *r,
                       bson_error_t *error)
{
    char path[PATH_MAX_TEXT] = "";
    path_add(path, sizeof path, where, strlen(where));
    return walk(doc, array, path, 1, r, error);
}

/* ---- the entry points ------------------------------------------------------------------ */

/* cohort_json_parse_object() under `r`. */
static bool parse_object(const char *text, ssize_t len, const rules_t *r, bson_t *doc,
                         bson_error_t *error)
{
    scan_t *s = calloc(1, sizeof *s);
    if (!s)
        return cohort_error_nomem(error, "reading JSON");
    s->text = text;
    s->len = len < 0 ? strlen(text) : (size_t)len;
    while (s->at < s->len && strchr(" \t\r\n", text[s->at]) && text[s->at])
        s->at++;
    bool ok = s->at < s->len && text[s->at] == '{'
                  ? scan_object(s, r->max_depth, error)
                  : refuse(error, "the JSON text must be an object (start with '{')");
    size_t n = s->len;
    free(s);
    if (!ok)
        return false;
    bson_error_t why;
    if (!bson_init_from_json(doc, text, (ssize_t)n, &why))
        return refuse(error, "the JSON text is not valid: %.300s", why.message);
    if (!check_keys(doc, false, "", r, error)) {
        bson_destroy(doc);
        return false;
    }
    return true;
}

bool cohort_json_parse_object(const char *text, ssize_t len, int max_depth, bson_t *doc,
                              bson_error_t *error)
{
    rules_t r = {.max_depth = max_depth};
    return parse_object(text, len, &r, doc, error);
}

static bool check_size(const bson_t *doc, const char *where, bson_error_t *error)
{
    return doc->len <= COHORT_DOC_BYTES_MAX ||
           refuse(error, "%s%s%s is %u bytes as BSON: at most %d", *where ? "field '" : "",
                  *where ? where : "the document", *where ? "'" : "", doc->len,
                  COHORT_DOC_BYTES_MAX);
}

bool cohort_json_parse_doc(const char *text, bool dollar_keys, bson_t *doc, bson_error_t *error)
{
    rules_t r = {.max_depth = COHORT_DOC_DEPTH_MAX, .dollar_ok = dollar_keys};
    if (!parse_object(text, -1, &r, doc, error))
        return false;
    if (check_size(doc, "", error))
        return true;
    bson_destroy(doc);
    return false;
}

bool cohort_doc_check(const bson_t *doc, const char *where, bson_error_t *error)
{
    size_t offset = 0;
    if (!bson_validate(doc, BSON_VALIDATE_UTF8 | BSON_VALIDATE_UTF8_ALLOW_NULL, &offset))
        return refuse(error, "field '%s' is not valid BSON or not valid UTF-8 (at byte %zu)",
                      where, offset);
    rules_t r = {.max_depth = COHORT_DOC_DEPTH_MAX};
    return check_size(doc, where, error) && check_keys(doc, false, where, &r, error);
}

bool cohort_value_check(const bson_value_t *value, const char *where, bson_error_t *error)
{
    if (!value ||
        (value->value_type != BSON_TYPE_DOCUMENT && value->value_type != BSON_TYPE_ARRAY))
        return true;
    bson_t doc;
    if (!bson_init_static(&doc, value->value.v_doc.data, value->value.v_doc.data_len))
        return refuse(error, "field '%s' is not a valid document", where);
    rules_t r = {.max_depth = COHORT_DOC_DEPTH_MAX, .dollar_ok = true};
    return check_size(&doc, where, error) &&
           check_keys(&doc, value->value_type == BSON_TYPE_ARRAY, where, &r, error);
}

bool cohort_iter_doc(const bson_iter_t *it, bson_t *doc)
{
    uint32_t len = 0;
    const uint8_t *raw = NULL;
    if (!BSON_ITER_HOLDS_DOCUMENT(it))
        return false;
    bson_iter_document(it, &len, &raw);
    return bson_init_static(doc, raw, len);
}
