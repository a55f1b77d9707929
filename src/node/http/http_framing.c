/*
 * http_framing.c - one way only to read where a request ends (see http_framing.h).
 *
 * The scanner follows a request byte by byte: its head line by line (a line starting with a
 * space or tab is a folded one), then, if the head named a Transfer-Encoding, its chunks
 * (size line, data, line end) and trailer. A request framed by Content-Length needs no scan
 * past its head: the parsed headers say all (cohort_http_framing_fault).
 */
#include "node/http/http_framing.h"

#include <ctype.h>
#include <event2/keyvalq_struct.h>
#include <string.h>
#include <strings.h>

#define CHUNK_SIZE_DIGITS 15 /* under 2^60: far past any body limit, never overflows */

void cohort_http_framing_reset(cohort_http_framing_t *f)
{
    memset(f, 0, sizeof *f);
}

static void refuse(cohort_http_framing_t *f, const char *why)
{
    f->fault = why;
    f->state = COHORT_FRAMING_DONE;
}

/* One byte of the head. */
static void head_byte(cohort_http_framing_t *f, char ch)
{
    if (ch == '\r')
        return;
    if (ch != '\n') {
        if (f->line_len == 0 && f->line_no > 0 && (ch == ' ' || ch == '\t'))
            return refuse(f, "a folded header line (obs-fold) is not accepted");
        if (f->line_len < sizeof f->name - 1)
            f->name[f->line_len] = (char)tolower((unsigned char)ch);
        f->line_len++;
        return;
    }
    if (f->line_len == 0 && f->line_no > 0) { /* the empty line: the head ends */
        f->state = f->chunked ? COHORT_FRAMING_CHUNK_SIZE : COHORT_FRAMING_DONE;
        return;
    }
    if (f->line_no > 0 && strncmp(f->name, "transfer-encoding:", 18) == 0)
        f->chunked = true;
    if (f->line_len > 0)
        f->line_no++;
    f->line_len = 0;
    memset(f->name, 0, sizeof f->name);
}

static int hex_value(char ch)
{
    if (ch >= '0' && ch <= '9')
        return ch - '0';
    ch = (char)tolower((unsigned char)ch);
    return ch >= 'a' && ch <= 'f' ? ch - 'a' + 10 : -1;
}

/* One byte of a chunk-size line: 1 to 15 hex digits, then CRLF (or LF). */
static void size_byte(cohort_http_framing_t *f, char ch)
{
    if (ch == '\r')
        return;
    if (ch == '\n') {
        if (f->line_len == 0)
            return refuse(f, "a chunk-size line is empty");
        f->state = f->size ? COHORT_FRAMING_CHUNK_DATA : COHORT_FRAMING_TRAILER;
        f->remaining = f->size;
        f->size = 0;
        f->line_len = 0;
        return;
    }
    int v = hex_value(ch);
    if (v < 0 || ++f->line_len > CHUNK_SIZE_DIGITS)
        return refuse(f, "a chunk size must be 1 to 15 hex digits, nothing else");
    f->size = f->size * 16 + (uint64_t)v;
}

void cohort_http_framing_scan(cohort_http_framing_t *f, const char *bytes, size_t len)
{
    for (size_t i = 0; i < len && f->state != COHORT_FRAMING_DONE; i++) {
        char ch = bytes[i];
        switch (f->state) {
        case COHORT_FRAMING_HEAD:
            head_byte(f, ch);
            break;
        case COHORT_FRAMING_CHUNK_SIZE:
            size_byte(f, ch);
            break;
        case COHORT_FRAMING_CHUNK_DATA: {
            size_t take = len - i < f->remaining ? len - i : (size_t)f->remaining;
            f->remaining -= take;
            i += take - 1;
            if (!f->remaining)
                f->state = COHORT_FRAMING_CHUNK_END;
            break;
        }
        case COHORT_FRAMING_CHUNK_END: /* CRLF (or LF), nothing else */
            if (ch == '\r' && !f->line_len) {
                f->line_len = 1;
            } else if (ch == '\n') {
                f->state = COHORT_FRAMING_CHUNK_SIZE;
                f->line_len = 0;
            } else {
                refuse(f, "a chunk's data must end with its line end");
            }
            break;
        case COHORT_FRAMING_TRAILER:
            if (ch == '\n') {
                if (f->line_len == 0)
                    f->state = COHORT_FRAMING_DONE;
                f->line_len = 0;
            } else if (ch != '\r') {
                f->line_len++;
            }
            break;
        case COHORT_FRAMING_DONE:
            break;
        }
    }
}

/* Whether `value` is 1 to 18 decimal digits and nothing else (no sign, no space). */
static bool plain_digits(const char *value)
{
    size_t n = strspn(value, "0123456789");
    return n > 0 && n <= 18 && value[n] == '\0';
}

const char *cohort_http_framing_fault(const struct evkeyvalq *headers, bool bodyless)
{
    size_t lengths = 0, encodings = 0;
    bool plain = true, chunked = true, empty = true;
    for (const struct evkeyval *kv = headers->tqh_first; kv; kv = kv->next.tqe_next) {
        if (strcasecmp(kv->key, "Content-Length") == 0) {
            lengths++;
            plain = plain && plain_digits(kv->value);
            empty = empty && strspn(kv->value, "0") == strlen(kv->value);
        } else if (strcasecmp(kv->key, "Transfer-Encoding") == 0) {
            encodings++;
            chunked = chunked && strcasecmp(kv->value, "chunked") == 0;
        }
    }
    if (lengths > 1)
        return "two Content-Length headers";
    if (encodings > 1)
        return "two Transfer-Encoding headers";
    if (lengths && encodings)
        return "both Content-Length and Transfer-Encoding";
    if (!plain)
        return "Content-Length must be plain decimal digits (no sign, no space)";
    if (!chunked)
        return "the only Transfer-Encoding accepted is chunked";
    if (bodyless && (encodings || !empty))
        return "a body on a HEAD or TRACE request";
    return NULL;
}
