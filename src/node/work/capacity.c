/*
 * capacity.c - the weight a node holds against its capacity (see capacity.h).
 */
#include "node/work/capacity.h"

#include "core/version.h"
#include "store/claims.h"

/* Lock held. */
static int64_t capacity_of(const cohort_service_t *s)
{
    return s->capacity > 0 ? s->capacity : (int64_t)s->target_workers;
}

bool cohort_capacity_may_claim(const cohort_service_t *s)
{
    return s->weight_reserved == 0 && (s->weight_held == 0 || s->weight_held < capacity_of(s));
}

void cohort_capacity_reserve(cohort_service_t *s)
{
    int64_t room = capacity_of(s) - s->weight_held;
    s->weight_reserved = room > 0 ? room : 1;
    s->weight_any = s->weight_held == 0;
}

void cohort_capacity_filter(cohort_service_t *s, cohort_claim_filter_t *filter)
{
    pthread_mutex_lock(&s->lock);
    filter->weight_room = s->weight_reserved > 0 ? s->weight_reserved : 1;
    filter->weight_any_first = s->weight_any;
    filter->weight_always_set = s->feature_level >= COHORT_LEVEL_TASK_WEIGHT;
    pthread_mutex_unlock(&s->lock);
}

void cohort_capacity_claimed(cohort_service_t *s, const bson_t *docs, size_t n)
{
    int64_t weight = 0;
    for (size_t i = 0; i < n; i++)
        weight += cohort_store_task_weight(&docs[i]);
    pthread_mutex_lock(&s->lock);
    s->weight_held += weight;
    s->weight_missed = n == 0 && !s->weight_any;
    s->weight_reserved = 0;
    s->weight_any = false;
    pthread_cond_broadcast(&s->wake);
    pthread_mutex_unlock(&s->lock);
}

bool cohort_capacity_missed_by_weight(const cohort_service_t *s)
{
    return s->weight_missed;
}

void cohort_capacity_release(cohort_service_t *s, const bson_t *task)
{
    int64_t weight = cohort_store_task_weight(task);
    pthread_mutex_lock(&s->lock);
    s->weight_held = s->weight_held > weight ? s->weight_held - weight : 0;
    pthread_cond_broadcast(&s->wake);
    pthread_mutex_unlock(&s->lock);
}

void cohort_capacity_set(cohort_service_t *s, int64_t capacity)
{
    pthread_mutex_lock(&s->lock);
    s->capacity = capacity;
    pthread_cond_broadcast(&s->wake); /* more room: waiting workers may claim */
    pthread_mutex_unlock(&s->lock);
}

void cohort_capacity_read(cohort_service_t *s, int64_t *capacity, int64_t *held)
{
    pthread_mutex_lock(&s->lock);
    *capacity = capacity_of(s);
    *held = s->weight_held;
    pthread_mutex_unlock(&s->lock);
}
