/*
 * stream_cost.c - what one insert costs the server while many change streams are open on
 * its collection (docs/BENCHMARKS.md, "The local server holds change streams").
 *
 *   stream_cost URI STREAMS OPLOG INSERTS SERVER_PID
 *
 * First writes OPLOG documents (half into csbench.other, half into csbench.w) so that the
 * server's oplog is large, then opens STREAMS change streams on csbench.w (inserts only,
 * maxAwaitTimeMS 1000), each on a client and thread of its own, so that a getMore of each is
 * held (or polled, on a server that answers at once). Then it inserts INSERTS documents into
 * csbench.w one at a time, 20 ms apart, and waits until every stream saw every insert.
 * Prints the server's CPU time per insert (utime + stime of SERVER_PID, from /proc, over the
 * inserts and their delivery), the insert round trip and whether every event arrived.
 * libmongoc only, no Cohort code. Drop the csbench database before a second run.
 */
#include <mongoc/mongoc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#define MAX_STREAMS 256

static const char *uri;
static atomic_long events;
static atomic_int opened, stop;

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* CPU seconds (user + system) the process has used so far; -1 if unreadable. */
static double cpu_s(int pid)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    unsigned long user = 0, sys = 0;
    int n = fscanf(f, "%*d %*s %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &user, &sys);
    fclose(f);
    return n == 2 ? (double)(user + sys) / (double)sysconf(_SC_CLK_TCK) : -1;
}

static void *watch(void *arg)
{
    (void)arg;
    mongoc_client_t *client = mongoc_client_new(uri);
    mongoc_collection_t *w = mongoc_client_get_collection(client, "csbench", "w");
    bson_t *pipeline =
        BCON_NEW("pipeline", "[", "{", "$match", "{", "operationType", "insert", "}", "}", "]");
    bson_t *opts = BCON_NEW("maxAwaitTimeMS", BCON_INT64(1000));
    mongoc_change_stream_t *stream = mongoc_collection_watch(w, pipeline, opts);
    atomic_fetch_add(&opened, 1);
    const bson_t *doc;
    bson_error_t error;
    while (!atomic_load(&stop)) {
        if (mongoc_change_stream_next(stream, &doc)) {
            atomic_fetch_add(&events, 1);
        } else if (mongoc_change_stream_error_document(stream, &error, NULL)) {
            fprintf(stderr, "stream_cost: change stream: %s\n", error.message);
            break;
        }
    }
    mongoc_change_stream_destroy(stream);
    bson_destroy(opts);
    bson_destroy(pipeline);
    mongoc_collection_destroy(w);
    mongoc_client_destroy(client);
    return NULL;
}

/* Inserts n documents into `collection`, 1,000 a command. */
static bool fill(mongoc_collection_t *collection, int n)
{
    for (int i = 0; i < n; i += 1000) {
        bson_t *own[1000];
        int k = 0;
        for (int j = i; j < i + 1000 && j < n; j++)
            own[k++] = BCON_NEW("i", BCON_INT32(j), "pad", BCON_UTF8("0123456789abcdef0123"));
        bson_error_t error;
        bool ok = mongoc_collection_insert_many(collection, (const bson_t **)own, (size_t)k,
                                                NULL, NULL, &error);
        for (int j = 0; j < k; j++)
            bson_destroy(own[j]);
        if (!ok) {
            fprintf(stderr, "stream_cost: insert: %s\n", error.message);
            return false;
        }
    }
    return true;
}

int main(int argc, char **argv)
{
    if (argc != 6) {
        fprintf(stderr, "usage: stream_cost URI STREAMS OPLOG INSERTS SERVER_PID\n");
        return 2;
    }
    uri = argv[1];
    int streams = atoi(argv[2]), oplog = atoi(argv[3]), inserts = atoi(argv[4]);
    int pid = atoi(argv[5]);
    if (streams < 0 || streams > MAX_STREAMS || oplog < 0 || inserts <= 0 || cpu_s(pid) < 0) {
        fprintf(stderr, "stream_cost: STREAMS 0-%d, OPLOG >= 0, INSERTS > 0, a live PID\n",
                MAX_STREAMS);
        return 2;
    }
    mongoc_init();
    mongoc_client_t *client = mongoc_client_new(uri);
    mongoc_collection_t *other = mongoc_client_get_collection(client, "csbench", "other");
    mongoc_collection_t *w = mongoc_client_get_collection(client, "csbench", "w");
    if (!client || !fill(other, oplog / 2) || !fill(w, oplog - oplog / 2))
        return 1;

    pthread_t threads[MAX_STREAMS];
    for (int i = 0; i < streams; i++)
        pthread_create(&threads[i], NULL, watch, NULL);
    while (atomic_load(&opened) < streams)
        usleep(10 * 1000);
    sleep(2); /* every stream is in its first getMore */

    double cpu0 = cpu_s(pid), rtt = 0, worst = 0;
    for (int i = 0; i < inserts; i++) {
        bson_t *doc = BCON_NEW("n", BCON_INT32(i));
        bson_error_t error;
        double t = now_s();
        if (!mongoc_collection_insert_one(w, doc, NULL, NULL, &error))
            fprintf(stderr, "stream_cost: insert: %s\n", error.message);
        t = now_s() - t;
        rtt += t;
        worst = t > worst ? t : worst;
        bson_destroy(doc);
        usleep(20 * 1000);
    }
    long want = (long)streams * inserts;
    double last = now_s();
    while (atomic_load(&events) < want && now_s() - last < 120)
        usleep(10 * 1000);
    double delivered = now_s() - last, cpu1 = cpu_s(pid);

    printf("streams=%d oplog=%d inserts=%d server_cpu_ms_per_insert=%.2f insert_rtt_ms=%.2f "
           "insert_rtt_max_ms=%.1f events=%ld/%ld delivered_s_after_last=%.2f\n",
           streams, oplog, inserts, (cpu1 - cpu0) * 1000 / inserts, rtt * 1000 / inserts,
           worst * 1000, (long)atomic_load(&events), want, delivered);
    atomic_store(&stop, 1);
    for (int i = 0; i < streams; i++)
        pthread_join(threads[i], NULL);
    mongoc_collection_destroy(w);
    mongoc_collection_destroy(other);
    mongoc_client_destroy(client);
    mongoc_cleanup();
    return atomic_load(&events) == want ? 0 : 1;
}
