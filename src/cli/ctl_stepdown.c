/*
 * ctl_stepdown.c - `cohortctl step-down SERVICE [--timeout DUR]`: the current primary gives
 * its primacy up cleanly, and another node takes it within a few ticks.
 *
 * cohortctl cannot run the primary's code, and clearing `primary` from here would let another
 * node take over while the old one still acts on its lease (which ends on its own monotonic
 * clock, not when the document changes): two primaries at once, under two epochs. So the
 * command only asks: it writes step_down {epoch, by, at} into the config document, fenced on
 * the primary and epoch it read. The primary reads the request with its next renewal, stops
 * acting, and only then clears `primary` itself, exactly as on SIGTERM
 * (node/primary/election.c): the lease argument of docs/ARCHITECTURE.md is unchanged. It
 * records stepped_down {node_id, epoch, by, at} and leaves the primacy to the other nodes
 * for one lease. This command waits until the primacy moved, and withdraws its request if
 * the primary did not act on it in time (a node too old to know it, or a hung one).
 * Exit status: 0 it stepped down; 1 the database, or not honoured in time; 2 bad usage, an
 * unknown service or no primary to step down.
 */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "cli/ctl.h"
#include "core/clock.h"
#include "core/timefmt.h"
#include "store/services.h"

#define POLL_MS 100
#define DEFAULT_TIMEOUT_MS 30000

typedef struct primacy {
    char primary[160]; /* "" if none */
    int64_t epoch;
} primacy_t;

/* The service's primary and epoch now; *found false if it has no config document. */
static bool read_primacy(ctl_t *ctl, const char *service, primacy_t *p, bool *found,
                         bson_error_t *error)
{
    bson_t doc;
    bool ok = cohort_store_read_service(ctl->store, ctl->client, service, &doc, found, error);
    const char *primary = NULL;
    p->primary[0] = '\0';
    p->epoch = 0;
    if (ok && *found) {
        if (ctl_doc_string(&doc, "primary", &primary))
            snprintf(p->primary, sizeof p->primary, "%s", primary);
        p->epoch = ctl_doc_int(&doc, "epoch", 0);
    }
    bson_destroy(&doc);
    return ok;
}

static void sleep_ms(int64_t ms)
{
    struct timespec t = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000};
    nanosleep(&t, NULL);
}

/* Polls until the primacy `before` is gone and another node holds it, or `timeout_ms` has
 * passed; *now is the last reading. */
static bool wait_for_move(ctl_t *ctl, const char *service, const primacy_t *before,
                          int64_t timeout_ms, primacy_t *now, bson_error_t *error)
{
    int64_t deadline = cohort_clock_monotonic_ms() + timeout_ms;
    for (;;) {
        bool found;
        if (!read_primacy(ctl, service, now, &found, error))
            return false;
        bool moved = now->epoch != before->epoch || strcmp(now->primary, before->primary) != 0;
        if ((moved && now->primary[0]) || cohort_clock_monotonic_ms() >= deadline)
            return true;
        sleep_ms(POLL_MS);
    }
}

/* Reads SERVICE and --timeout DUR; CTL_DONE or CTL_USAGE with the message printed. */
static int parse_args(const ctl_t *ctl, int argc, char **argv, const char **service,
                      int64_t *timeout_ms)
{
    struct option options[CLI_MAX_OPTIONS + 1];
    ctl_longopts(ctl, options);
    ctl_reset_getopt();
    int opt;
    while ((opt = getopt_long(argc, argv, ":", options, NULL)) != -1) {
        if (opt != 't' || !cohort_duration_parse(optarg, timeout_ms) || *timeout_ms <= 0) {
            fprintf(stderr, "cohortctl step-down: bad argument '%s'%s\n",
                    opt == 't' ? optarg : ctl_bad_arg(argv),
                    opt == 't' ? " (--timeout takes a duration such as 30s)" : "");
            return CTL_USAGE;
        }
    }
    if (optind + 1 != argc) {
        fprintf(stderr, "cohortctl step-down: give one SERVICE\n");
        return CTL_USAGE;
    }
    *service = argv[optind];
    if (!cohort_config_valid_service_name(*service)) {
        fprintf(stderr, "cohortctl step-down: '%s' is not a valid service name\n", *service);
        return CTL_USAGE;
    }
    return CTL_DONE;
}

/* Says how it ended: moved, stepped down with nobody in its place yet, or not honoured (the
 * request is then withdrawn). */
static int report(ctl_t *ctl, const char *service, const primacy_t *before,
                  const primacy_t *now, int64_t timeout_ms)
{
    bson_error_t error;
    if (now->epoch == before->epoch && strcmp(now->primary, before->primary) == 0) {
        bool withdrawn = false;
        cohort_store_request_step_down(ctl->store, ctl->client, service, before->primary,
                                       before->epoch, NULL, true, &withdrawn, &error);
        fprintf(stderr,
                "cohortctl step-down: %s (epoch %lld) did not step down within %lld ms; the "
                "request is withdrawn (a node older than this cohortctl ignores it; SIGTERM to "
                "the node steps it down too)\n",
                before->primary, (long long)before->epoch, (long long)timeout_ms);
        return CTL_FAILED;
    }
    if (now->primary[0])
        printf("%s: %s stepped down from epoch %lld; %s is primary (epoch %lld)\n", service,
               before->primary, (long long)before->epoch, now->primary, (long long)now->epoch);
    else
        printf("%s: %s stepped down from epoch %lld; no node has taken over yet\n", service,
               before->primary, (long long)before->epoch);
    return CTL_DONE;
}

/* step-down SERVICE [--timeout DUR] */
int cmd_step_down(ctl_t *ctl, int argc, char **argv)
{
    const char *service = NULL;
    int64_t timeout_ms = DEFAULT_TIMEOUT_MS;
    int rc = parse_args(ctl, argc, argv, &service, &timeout_ms);
    if (rc != CTL_DONE)
        return rc;
    if (!ctl_reach_database(ctl, NULL))
        return CTL_FAILED;
    primacy_t before, now;
    bool found = false, applied = false;
    bson_error_t error;
    if (!read_primacy(ctl, service, &before, &found, &error))
        goto failed;
    if (!found)
        return ctl_unknown_service(ctl, service, "step-down");
    if (!before.primary[0]) {
        fprintf(stderr, "cohortctl step-down: refused: %s has no primary now (epoch %lld)\n",
                service, (long long)before.epoch);
        return CTL_REFUSED;
    }
    char by[300];
    ctl_author(by, sizeof by);
    if (!cohort_store_request_step_down(ctl->store, ctl->client, service, before.primary,
                                        before.epoch, by, false, &applied, &error))
        goto failed;
    if (!applied) { /* it moved between the read and the write: done, by others */
        fprintf(stderr, "cohortctl step-down: refused: the primacy of %s moved meanwhile "
                        "(it was %s, epoch %lld); nothing asked\n",
                service, before.primary, (long long)before.epoch);
        return CTL_REFUSED;
    }
    fprintf(stderr, "cohortctl step-down: asked %s (epoch %lld) to step down on its next tick\n",
            before.primary, (long long)before.epoch);
    if (!wait_for_move(ctl, service, &before, timeout_ms, &now, &error))
        goto failed;
    return report(ctl, service, &before, &now, timeout_ms);
failed:
    fprintf(stderr, "cohortctl step-down: %s\n", error.message);
    return CTL_FAILED;
}
