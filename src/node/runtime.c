/*
 * runtime.c - the thread-safe reads of a service's shared state (see runtime.h).
 *
 * They live here, not in service.c, so that the modules below the service (task, metrics,
 * context) read the state through a function of a lower module instead of taking the
 * service's lock themselves or calling up into service.c.
 */
#include "node/runtime.h"

size_t cohort_service_running(cohort_service_t *s)
{
    pthread_mutex_lock(&s->lock);
    size_t running = s->running;
    pthread_mutex_unlock(&s->lock);
    return running;
}

bool cohort_service_stopping(cohort_service_t *s)
{
    pthread_mutex_lock(&s->lock);
    bool stopping = s->stopping;
    pthread_mutex_unlock(&s->lock);
    return stopping;
}
