/*
 * ctl_ui.c - `cohortctl ui-link [--scopes read|operate] [--ttl DUR] [--session-ttl DUR]
 * [--url BASE]`: a one-time sign-in link for the dashboard (docs/UI.md).
 *
 * Prints http://HOST:PORT/ui/login?code=CODE on stdout, HOST:PORT being the -c file's
 * http_listen (0.0.0.0 and :: read as 127.0.0.1) unless --url gives the base. The code works
 * once, until --ttl (10m) has passed on the server's clock; the session it opens lasts
 * --session-ttl (8h). The database keeps only the code's SHA-256 (store/sessions.h).
 */
#include <stdio.h>
#include <string.h>

#include "cli/ctl.h"
#include "core/timefmt.h"
#include "core/token.h"
#include "store/sessions.h"

#define UI_LINK_USAGE                                                                          \
    "usage: cohortctl -c FILE ui-link [--scopes read|operate] [--ttl DUR] "                   \
    "[--session-ttl DUR] [--url BASE]\n"
#define DEFAULT_TTL_MS (10 * 60 * 1000LL)
#define DEFAULT_SESSION_TTL_MS (8 * 3600 * 1000LL)
#define MAX_TTL_MS (7 * 86400 * 1000LL)

static int ui_usage(const char *why, const char *arg)
{
    fprintf(stderr, "cohortctl ui-link: %s%s%s%s\n%s", why, arg ? " '" : "", arg ? arg : "",
            arg ? "'" : "", UI_LINK_USAGE);
    return CTL_USAGE;
}

/* The link's base, "http://HOST:PORT", from --url or the file's http_listen. */
static bool link_base(const ctl_t *ctl, const char *url, char *out, size_t len)
{
    if (url) {
        size_t n = strlen(url);
        while (n && url[n - 1] == '/')
            n--;
        snprintf(out, len, "%.*s", (int)n, url);
        return strncmp(out, "http://", 7) == 0 || strncmp(out, "https://", 8) == 0;
    }
    const char *listen = ctl->config ? ctl->config->http_listen : NULL;
    if (!listen || !*listen)
        return false;
    if (strncmp(listen, "0.0.0.0:", 8) == 0)
        snprintf(out, len, "http://127.0.0.1:%s", listen + 8);
    else if (strncmp(listen, "[::]:", 5) == 0)
        snprintf(out, len, "http://127.0.0.1:%s", listen + 5);
    else
        snprintf(out, len, "http://%s", listen);
    return true;
}

int cmd_ui_link(ctl_t *ctl, int argc, char **argv)
{
    struct option options[CLI_MAX_OPTIONS + 1];
    ctl_longopts(ctl, options);
    const char *scopes_text = "read", *url = NULL;
    int64_t ttl = DEFAULT_TTL_MS, session_ttl = DEFAULT_SESSION_TTL_MS;
    int opt;
    ctl_reset_getopt();
    while ((opt = getopt_long(argc, argv, ":", options, NULL)) != -1) {
        switch (opt) {
        case 's':
            scopes_text = optarg;
            break;
        case 't':
            if (!cohort_duration_parse(optarg, &ttl) || ttl <= 0 || ttl > MAX_TTL_MS)
                return ui_usage("--ttl must be a duration from 1ms to 7d, not", optarg);
            break;
        case 'S':
            if (!cohort_duration_parse(optarg, &session_ttl) || session_ttl < 1000 ||
                session_ttl > MAX_TTL_MS)
                return ui_usage("--session-ttl must be a duration from 1s to 7d, not", optarg);
            break;
        case 'u':
            url = optarg;
            break;
        default:
            return ui_usage("unexpected argument", ctl_bad_arg(argv));
        }
    }
    if (optind < argc)
        return ui_usage("unexpected argument", argv[optind]);
    uint32_t scopes;
    if (strcmp(scopes_text, "read") == 0)
        scopes = COHORT_SCOPE_READ;
    else if (strcmp(scopes_text, "operate") == 0)
        scopes = COHORT_SCOPE_READ | COHORT_SCOPE_OPERATE;
    else
        return ui_usage("--scopes is read or operate, not", scopes_text);
    char base[512];
    if (!link_base(ctl, url, base, sizeof base))
        return ui_usage(url ? "--url must start with http:// or https://, not"
                            : "no http_listen in the -c file: pass -c FILE or --url BASE",
                        url);
    char code[COHORT_TOKEN_TEXT_MAX], hash[COHORT_TOKEN_HASH_HEX];
    bson_error_t error;
    if (!cohort_token_generate(code, sizeof code, &error) ||
        !cohort_token_hash(code, hash, sizeof hash)) {
        fprintf(stderr, "cohortctl ui-link: %s\n", error.message);
        return CTL_FAILED;
    }
    int64_t now;
    if (!ctl_reach_database(ctl, &now))
        return CTL_FAILED;
    bson_t array = BSON_INITIALIZER;
    BSON_APPEND_UTF8(&array, "0", "read");
    if (scopes & COHORT_SCOPE_OPERATE)
        BSON_APPEND_UTF8(&array, "1", "operate");
    char by[300];
    ctl_author(by, sizeof by);
    char name[64];
    snprintf(name, sizeof name, "ui %.58s", strstr(by, " ") ? strstr(by, " ") + 1 : by);
    bool ok = cohort_store_create_ui_code(ctl->store, ctl->client, hash, name, &array, now,
                                          now + ttl, session_ttl, &error);
    bson_destroy(&array);
    if (!ok) {
        fprintf(stderr, "cohortctl ui-link: %s\n", error.message);
        return CTL_FAILED;
    }
    printf("%s/ui/login?code=%s\n", base, code);
    fflush(stdout);
    fprintf(stderr, "cohortctl ui-link: the link works once, for %.1f s (scopes: %s)\n",
            (double)ttl / 1000.0, scopes_text);
    return CTL_DONE;
}
