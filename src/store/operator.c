/*
 * operator.c - an operator's changes to tasks (cohortctl retry, cancel, delete): one task by
 * id, or every task a selection matches, a page at a time.
 *
 * Every write re-checks the status the task was chosen in, so a task that moved on meanwhile
 * (claimed, finished, changed by another operator) is left alone. A bulk change finds at most
 * COHORT_OPERATOR_PAGE ids (a projection of _id) and changes them with one command, so its
 * memory is one page's whatever the queue's size. Tracked tasks of a batch whose completion
 * callback has not run yet are never deleted (the callback must see them), and a retried
 * tracked task whose batch has completed joins the open batch, so a callback sees its end.
 */
#include "store/operator.h"

#include "store/batches.h"
#include "store/internal.h"
#include "store/queries.h"
#include "store/store.h"

#include "core/error.h"

#include <string.h>

bool cohort_task_action_applies(cohort_task_action_t action, cohort_task_status_t status)
{
    switch (action) {
    case COHORT_ACTION_RETRY:
        return cohort_status_is_final(status) && status != COHORT_STATUS_SUCCEEDED;
    case COHORT_ACTION_CANCEL:
        return status == COHORT_STATUS_PENDING;
    case COHORT_ACTION_DELETE:
        return cohort_status_is_final(status);
    }
    return false;
}

/* What a refusal says the action needs. */
static const char *action_needs(cohort_task_action_t action)
{
    switch (action) {
    case COHORT_ACTION_RETRY:
        return "only a failed, timed_out or cancelled task can be retried";
    case COHORT_ACTION_CANCEL:
        return "only a pending task can be cancelled (a claimed one is running)";
    case COHORT_ACTION_DELETE:
        return "only a task in a final status (succeeded, failed, timed_out, cancelled) can be "
               "deleted";
    }
    return "";
}

/* The batches a change must respect: tracked tasks of batches numbered `keep_from` or later
 * have not been through a callback yet; new tracked tasks join `open`. */
typedef struct batch_bounds {
    int64_t keep_from, open;
} batch_bounds_t;

static bool read_batch_bounds(cohort_store_t *store, mongoc_client_t *client, const char *service,
                              batch_bounds_t *bounds, bson_error_t *error)
{
    cohort_batch_state_t state;
    if (!cohort_store_batch_state(store, client, service, &state, error))
        return false;
    bounds->open = state.open;
    bounds->keep_from = state.draining ? state.draining : state.open;
    return true;
}

/* The operator's entry in the task's history: {event, by, at[, from]}. */
static void append_operator_entry(bson_t *update, const cohort_task_change_t *change,
                                  const char *event, const char *from)
{
    bson_t entry = BSON_INITIALIZER;
    BSON_APPEND_UTF8(&entry, "event", event);
    BSON_APPEND_UTF8(&entry, "by", change->by);
    BSON_APPEND_DATE_TIME(&entry, "at", change->now_ms);
    if (from)
        BSON_APPEND_UTF8(&entry, "from", from);
    store_append_history_push(update, &entry);
    bson_destroy(&entry);
}

/* A retry: pending and due now, attempts from 0, no trace of the last claim or finish; with
 * `batch` > 0 the task joins that batch. last_error and the history stay. */
static bson_t *retry_update(const cohort_task_change_t *change, const char *from, int64_t batch)
{
    bson_t *update = bson_new(), set;
    BSON_APPEND_DOCUMENT_BEGIN(update, "$set", &set);
    BSON_APPEND_UTF8(&set, "status", "pending");
    BSON_APPEND_INT32(&set, "attempts", 0);
    BSON_APPEND_NULL(&set, "claimed_by");
    if (batch > 0)
        BSON_APPEND_INT64(&set, "batch", batch);
    bson_append_document_end(update, &set);
    BCON_APPEND(update, "$currentDate", "{", "run_at", BCON_BOOL(true), "}", "$unset", "{",
                "finished_at", BCON_UTF8(""), "group_lock", BCON_UTF8(""), "claim_token",
                BCON_UTF8(""), "acknowledged", BCON_UTF8(""), "uncounted", BCON_UTF8(""),
                "suspect", BCON_UTF8(""), "}");
    append_operator_entry(update, change, "retried", from);
    return update;
}

/* A cancel: final at once; the task gives up its coalesce key (new work with that key is a
 * new task) and any group lock. It keeps its unique_key, like any finished task. */
static bson_t *cancel_update(const cohort_task_change_t *change)
{
    char reason[300];
    snprintf(reason, sizeof reason, "cancelled by %s", change->by);
    bson_t *update = BCON_NEW("$set", "{", "status", BCON_UTF8("cancelled"), "last_error",
                              BCON_UTF8(reason), "}", "$currentDate", "{", "finished_at",
                              BCON_BOOL(true), "}", "$unset", "{", "coalesce_pending",
                              BCON_UTF8(""), "group_lock", BCON_UTF8(""), "}");
    append_operator_entry(update, change, "cancelled", NULL);
    return update;
}

/* Runs updateMany(filter, update) and adds the tasks it changed to *changed. */
static bool update_tasks(mongoc_collection_t *tasks, const bson_t *filter, const bson_t *update,
                         int64_t *changed, bson_error_t *error)
{
    int64_t n = 0;
    bool ok = store_write(tasks, STORE_UPDATE_MANY, filter, update, NULL, "modifiedCount", &n,
                          error);
    *changed += n;
    return ok;
}

/* A retry of the page: first the tracked tasks whose batch has completed (they join the open
 * batch), then the rest, which keep theirs. */
static bool retry_page(mongoc_collection_t *tasks, const bson_t *page,
                       const cohort_task_change_t *change, const char *status,
                       const batch_bounds_t *bounds, int64_t *changed, bson_error_t *error)
{
    bson_t *late = bson_copy(page);
    bson_t *clause = BCON_NEW("tracked", BCON_BOOL(true), "$or", "[", "{", "batch", "{", "$lt",
                              BCON_INT64(bounds->keep_from), "}", "}", "{", "batch", "{",
                              "$exists", BCON_BOOL(false), "}", "}", "]");
    bson_concat(late, clause);
    bson_t *rejoin = retry_update(change, status, bounds->open);
    bson_t *keep = retry_update(change, status, 0);
    bool ok = update_tasks(tasks, late, rejoin, changed, error) &&
              update_tasks(tasks, page, keep, changed, error);
    bson_destroy(keep);
    bson_destroy(rejoin);
    bson_destroy(clause);
    bson_destroy(late);
    return ok;
}

/* Applies the change to the tasks with these ids still in `status`; *changed adds them. */
static bool change_page(mongoc_collection_t *tasks, const cohort_task_change_t *change,
                        const char *status, const bson_t *ids, const batch_bounds_t *bounds,
                        int64_t *changed, bson_error_t *error)
{
    bson_t page = BSON_INITIALIZER;
    store_append_id_in(&page, ids);
    BSON_APPEND_UTF8(&page, "status", status);
    bool ok = true;
    if (change->action == COHORT_ACTION_RETRY) {
        ok = retry_page(tasks, &page, change, status, bounds, changed, error);
    } else if (change->action == COHORT_ACTION_CANCEL) {
        bson_t *update = cancel_update(change);
        ok = update_tasks(tasks, &page, update, changed, error);
        bson_destroy(update);
    } else {
        store_append_outside_open_batches(&page, bounds->keep_from);
        int64_t n = 0;
        ok = store_write(tasks, STORE_DELETE_MANY, &page, NULL, NULL, "deletedCount", &n, error);
        *changed += n;
    }
    bson_destroy(&page);
    return ok;
}

/* ---- one task by id --------------------------------------------------------------------- */

/* Why the task `doc` cannot take the change (COHORT_CODE_CONFLICT in `error`), or true. */
static bool check_task(const bson_t *doc, const char *id, const cohort_task_change_t *change,
                       const batch_bounds_t *bounds, const char **status, bson_error_t *error)
{
    bson_iter_t it;
    *status = bson_iter_init_find(&it, doc, "status") && BSON_ITER_HOLDS_UTF8(&it)
                  ? bson_iter_utf8(&it, NULL)
                  : "(none)";
    cohort_task_status_t known;
    if (!cohort_status_parse(*status, &known) ||
        !cohort_task_action_applies(change->action, known)) {
        bson_set_error(error, COHORT_DOMAIN_USAGE, COHORT_CODE_CONFLICT, "task %s is %s: %s", id,
                       *status, action_needs(change->action));
        return false;
    }
    bool tracked = bson_iter_init_find(&it, doc, "tracked") && BSON_ITER_HOLDS_BOOL(&it) &&
                   bson_iter_bool(&it);
    int64_t batch = store_int64_field(doc, "batch", 0);
    if (change->action == COHORT_ACTION_DELETE && tracked && batch >= bounds->keep_from) {
        bson_set_error(error, COHORT_DOMAIN_USAGE, COHORT_CODE_CONFLICT,
                       "task %s belongs to tracked batch %lld, whose completion callback has "
                       "not run yet: delete it after the batch completes",
                       id, (long long)batch);
        return false;
    }
    return true;
}

bool cohort_store_change_task(cohort_store_t *store, mongoc_client_t *client, const char *service,
                              const cohort_task_change_t *change, const char *id,
                              bson_error_t *error)
{
    bson_t doc;
    bool found = false;
    batch_bounds_t bounds;
    if (!read_batch_bounds(store, client, service, &bounds, error) ||
        !cohort_store_read_task(store, client, service, id, &doc, &found, error)) {
        bson_destroy(&doc);
        return false;
    }
    const char *status = "";
    bool ok = found;
    if (!found)
        bson_set_error(error, COHORT_DOMAIN_USAGE, COHORT_CODE_NOT_FOUND,
                       "no task %s in service '%s'", id, service);
    else
        ok = check_task(&doc, id, change, &bounds, &status, error);
    if (ok && !change->dry_run) {
        bson_t ids = BSON_INITIALIZER;
        bson_iter_t it;
        bson_iter_init_find(&it, &doc, "_id");
        bson_append_value(&ids, "0", 1, bson_iter_value(&it));
        int64_t changed = 0;
        mongoc_collection_t *tasks = store_queue(store, client, service);
        ok = change_page(tasks, change, status, &ids, &bounds, &changed, error);
        mongoc_collection_destroy(tasks);
        bson_destroy(&ids);
        if (ok && changed == 0) {
            bson_set_error(error, COHORT_DOMAIN_USAGE, COHORT_CODE_CONFLICT,
                           "task %s changed while this ran (it was %s): nothing done; look at "
                           "it again with `cohortctl task`",
                           id, status);
            ok = false;
        }
    }
    bson_destroy(&doc);
    return ok;
}

bool cohort_store_request_cancel(cohort_store_t *store, mongoc_client_t *client,
                                  const char *service, const char *id, const char *by,
                                  int64_t now_ms, bool *requested, char *claimed_by,
                                  size_t claimed_by_len, bson_error_t *error)
{
    *requested = false;
    if (claimed_by_len)
        claimed_by[0] = '\0';
    bson_oid_t oid;
    if (!store_task_oid(id, &oid, error))
        return false;
    bson_t *filter = BCON_NEW("_id", BCON_OID(&oid), "status", BCON_UTF8("claimed"));
    bson_t update = BSON_INITIALIZER, entry = BSON_INITIALIZER;
    bson_t *set = BCON_NEW("$set", "{", "cancel_requested", BCON_BOOL(true), "}");
    bson_concat(&update, set);
    bson_destroy(set);
    BSON_APPEND_UTF8(&entry, "event", "cancel_requested");
    BSON_APPEND_UTF8(&entry, "by", by);
    BSON_APPEND_DATE_TIME(&entry, "at", now_ms);
    store_append_history_push(&update, &entry);
    bson_t *fields = BCON_NEW("claimed_by", BCON_INT32(1));
    mongoc_collection_t *tasks = store_queue(store, client, service);
    bson_t doc;
    bool ok = store_find_and_modify(tasks, filter, NULL, &update, fields, true, false, &doc,
                                    requested, error);
    if (ok && *requested) {
        bson_iter_t it;
        if (claimed_by_len && bson_iter_init_find(&it, &doc, "claimed_by") &&
            BSON_ITER_HOLDS_UTF8(&it))
            bson_strncpy(claimed_by, bson_iter_utf8(&it, NULL), claimed_by_len);
        bson_destroy(&doc);
    }
    mongoc_collection_destroy(tasks);
    bson_destroy(fields);
    bson_destroy(&entry);
    bson_destroy(&update);
    bson_destroy(filter);
    return ok;
}

/* ---- many tasks -------------------------------------------------------------------------- */

/* The filter of a selection: its status, kind, group, finish time; for a delete, outside the
 * batches a callback has not seen. */
static void selection_filter(bson_t *filter, const cohort_task_change_t *change,
                             const cohort_task_selection_t *selection, const batch_bounds_t *bounds)
{
    BSON_APPEND_UTF8(filter, "status", cohort_status_name(selection->status));
    if (selection->kind)
        BSON_APPEND_UTF8(filter, "kind", selection->kind);
    if (selection->group)
        BSON_APPEND_UTF8(filter, "group", selection->group);
    if (selection->finished_before_ms > 0) {
        bson_t before;
        BSON_APPEND_DOCUMENT_BEGIN(filter, "finished_at", &before);
        BSON_APPEND_DATE_TIME(&before, "$lt", selection->finished_before_ms);
        bson_append_document_end(filter, &before);
    }
    if (change->action == COHORT_ACTION_DELETE)
        store_append_outside_open_batches(filter, bounds->keep_from);
}

/* Counts what a selection matches now (at most its limit): the dry run. */
static bool count_selection(mongoc_collection_t *tasks, const bson_t *filter, int64_t limit,
                            int64_t *count, bson_error_t *error)
{
    bson_t *opts = limit > 0 ? BCON_NEW("limit", BCON_INT64(limit)) : NULL;
    *count = mongoc_collection_count_documents(tasks, filter, opts, NULL, NULL, error);
    bson_destroy(opts);
    return *count >= 0;
}

/* The change, a page of ids at a time. Each page's tasks leave the selection when changed
 * (their status moves on), so the next find starts on new ones; a page that changed nothing
 * ends the walk, so tasks that keep coming back cannot hold it. */
static bool change_in_pages(mongoc_collection_t *tasks, const bson_t *filter,
                            const cohort_task_change_t *change,
                            const cohort_task_selection_t *selection, const batch_bounds_t *bounds,
                            int64_t *changed, bson_error_t *error)
{
    const char *status = cohort_status_name(selection->status);
    int64_t left = selection->limit > 0 ? selection->limit : INT64_MAX;
    bool ok = true;
    while (ok && left > 0) {
        int64_t size = left < COHORT_OPERATOR_PAGE ? left : COHORT_OPERATOR_PAGE;
        bson_t *opts = BCON_NEW("projection", "{", "_id", BCON_INT32(1), "}", "limit",
                                BCON_INT64(size));
        bson_t ids = BSON_INITIALIZER;
        uint32_t n = 0;
        int64_t in_page = 0;
        ok = store_find_ids(tasks, filter, opts, &ids, &n, error);
        if (ok && n > 0)
            ok = change_page(tasks, change, status, &ids, bounds, &in_page, error);
        bson_destroy(&ids);
        bson_destroy(opts);
        *changed += in_page;
        left = in_page > 0 ? left - in_page : 0;
        if (ok && change->progress)
            change->progress(change->progress_arg, *changed);
    }
    return ok;
}

bool cohort_store_change_tasks(cohort_store_t *store, mongoc_client_t *client,
                               const char *service, const cohort_task_change_t *change,
                               const cohort_task_selection_t *selection, int64_t *changed,
                               bson_error_t *error)
{
    *changed = 0;
    if (!cohort_task_action_applies(change->action, selection->status)) {
        bson_set_error(error, COHORT_DOMAIN_USAGE, COHORT_CODE_INVALID, "--status %s: %s",
                       cohort_status_name(selection->status), action_needs(change->action));
        return false;
    }
    batch_bounds_t bounds;
    if (!read_batch_bounds(store, client, service, &bounds, error))
        return false;
    bson_t filter = BSON_INITIALIZER;
    selection_filter(&filter, change, selection, &bounds);
    mongoc_collection_t *tasks = store_queue(store, client, service);
    bool ok = change->dry_run
                  ? count_selection(tasks, &filter, selection->limit, changed, error)
                  : change_in_pages(tasks, &filter, change, selection, &bounds, changed, error);
    mongoc_collection_destroy(tasks);
    bson_destroy(&filter);
    return ok;
}
