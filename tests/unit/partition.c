/*
 * partition.c - which partition a new task goes to (cohort_store_task_partition(),
 * src/store/insert.c): 0 with one partition; with several, tasks sharing a unique key, a
 * coalesce key or a group share a partition (a sharded unique index holds only within one),
 * and keyless tasks spread over all of them by id.
 */
#include <criterion/criterion.h>

#include "store/insert.h"

Test(partition, one_partition_puts_every_task_in_zero)
{
    bson_oid_t oid;
    bson_oid_init(&oid, NULL);
    cohort_new_task_t keyed = {.unique_key = "k"}, plain = {0};
    cr_assert_eq(cohort_store_task_partition(&keyed, &oid, 1), 0);
    cr_assert_eq(cohort_store_task_partition(&plain, &oid, COHORT_TASK_PARTITIONS), 0);
}

Test(partition, tasks_sharing_a_key_share_a_partition)
{
    bson_oid_t a, b;
    bson_oid_init(&a, NULL);
    bson_oid_init(&b, NULL);
    const cohort_new_task_t tasks[][2] = {
        {{.unique_key = "order-17"}, {.unique_key = "order-17", .group = "g"}},
        {{.coalesce_key = "refresh"}, {.coalesce_key = "refresh"}},
        {{.idempotency_key = "req-9"}, {.idempotency_key = "req-9", .group = "g"}},
        {{.group = "tenant-3"}, {.group = "tenant-3", .kind = "k"}},
    };
    for (size_t i = 0; i < 4; i++) {
        int32_t p = cohort_store_task_partition(&tasks[i][0], &a, 16);
        cr_assert(p >= 0 && p < 16);
        cr_assert_eq(cohort_store_task_partition(&tasks[i][1], &b, 16), p, "pair %zu", i);
    }
}

Test(partition, keyless_tasks_spread_over_every_partition)
{
    bool seen[8] = {false};
    cohort_new_task_t plain = {0};
    for (int i = 0; i < 400; i++) {
        bson_oid_t oid;
        bson_oid_init(&oid, NULL);
        int32_t p = cohort_store_task_partition(&plain, &oid, 8);
        cr_assert(p >= 0 && p < 8);
        seen[p] = true;
    }
    for (int p = 0; p < 8; p++)
        cr_assert(seen[p], "no task of 400 went to partition %d", p);
}
