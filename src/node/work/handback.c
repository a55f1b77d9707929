/*
 * handback.c - the loop's look at prefetched tasks soon after a batch claim (see handback.h).
 */
#include "node/work/handback.h"

#include <errno.h>
#include <event2/event.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "core/error.h"
#include "core/wake.h"
#include "node/work/workers.h"

struct cohort_handback {
    cohort_service_t **services;
    size_t n_services;
    int efd;
    struct event *poked; /* efd readable: a batch claim left tasks in a ready queue */
    struct event *check; /* one-shot: look at the ready queues */
    mongoc_client_t *client;
};

/* Any worker thread: async-signal-safe and lock-free (a counter write). */
static void poke(void *arg)
{
    cohort_handback_t *h = arg;
    uint64_t one = 1;
    ssize_t w = write(h->efd, &one, sizeof one);
    (void)w; /* EAGAIN: the counter is already set, the loop will look */
}

static void arm(cohort_handback_t *h, int64_t ms)
{
    if (ms < 1)
        ms = 1;
    struct timeval tv = {.tv_sec = ms / 1000, .tv_usec = (ms % 1000) * 1000};
    evtimer_add(h->check, &tv);
}

static void on_check(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    cohort_handback_t *h = arg;
    int64_t again = -1;
    for (size_t i = 0; i < h->n_services; i++) {
        int64_t ms = cohort_workers_give_back_unstartable(h->services[i], h->client);
        if (ms >= 0 && (again < 0 || ms < again))
            again = ms;
    }
    if (again >= 0)
        arm(h, again);
}

static void on_poked(evutil_socket_t fd, short what, void *arg)
{
    (void)what;
    cohort_handback_t *h = arg;
    cohort_eventfd_drain(fd);
    if (!evtimer_pending(h->check, NULL))
        on_check(-1, 0, h); /* computes when to look (a window from now, at the latest) */
}

cohort_handback_t *cohort_handback_new(cohort_service_t **services, size_t n_services,
                                       bson_error_t *error)
{
    cohort_handback_t *h = calloc(1, sizeof *h);
    if (!h) {
        cohort_error_nomem(error, "the prefetch check");
        return NULL;
    }
    h->services = services;
    h->n_services = n_services;
    h->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (h->efd < 0) {
        bson_set_error(error, COHORT_DOMAIN_SYSTEM, COHORT_CODE_IO,
                       "cannot set up the prefetch check: %s", strerror(errno));
        free(h);
        return NULL;
    }
    for (size_t i = 0; i < n_services; i++) {
        services[i]->prefetched = poke;
        services[i]->prefetched_arg = h;
    }
    return h;
}

bool cohort_handback_attach(cohort_handback_t *h, struct event_base *base,
                            mongoc_client_t *client, bson_error_t *error)
{
    h->client = client;
    h->check = evtimer_new(base, on_check, h);
    h->poked = event_new(base, h->efd, EV_READ | EV_PERSIST, on_poked, h);
    if (!h->check || !h->poked || event_add(h->poked, NULL) != 0) {
        bson_set_error(error, COHORT_DOMAIN_SYSTEM, COHORT_CODE_IO,
                       "cannot set up the prefetch check on the node's loop");
        return false;
    }
    return true;
}

void cohort_handback_destroy(cohort_handback_t *h)
{
    if (!h)
        return;
    if (h->poked)
        event_free(h->poked);
    if (h->check)
        event_free(h->check);
    close(h->efd);
    free(h);
}
