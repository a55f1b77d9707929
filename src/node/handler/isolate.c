/*
 * isolate.c - `isolation = process`: the pool of child worker processes (see isolate.h).
 *
 * The supervisor: one child per worker slot, spoken to through isolate_wire.h (which
 * describes the protocol); the child's side is isolate_child.c.
 *
 * Children are forked by one spawner thread per pool. PR_SET_PDEATHSIG (SIGKILL, so a child
 * stuck in a handler dies with the node) fires when the *thread* that forked exits, so
 * forking from worker threads would kill every child when its thread returns, before
 * cohort_isolate_destroy() can stop it cleanly; the spawner lives until every child is
 * reaped. Between fork() and exec() the child makes only async-signal-safe calls (the node
 * is multithreaded), and the exec of /proc/self/exe runs the very binary of the node even
 * if the file was replaced since. A CLOEXEC pipe reports a failed exec's errno.
 */
#include "node/handler/isolate.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/pidfd.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/config.h"
#include "core/log.h"
#include "core/error.h"
#include "core/wake.h"
#include "node/handler/isolate_wire.h"

#define START_TIMEOUT_MS 30000         /* exec, config, handler init(): until ready */
#define STOP_WAIT_MS 2000              /* after closing its socket, before SIGKILL */
#define REAP_WAIT_MS 1000              /* a child that hung up but has not exited yet */
#define START_FAILURE_REPORT_MS 60000  /* a start failure that goes on is logged this often */

typedef struct child {
    pid_t pid; /* 0: none */
    int fd;    /* the node's end of the socket; -1: none */
    int pidfd; /* readable once the child has exited; -1: none (then only EOF tells) */
} child_t;

/* A worker thread's request to the spawner thread. */
typedef struct spawn_request {
    bool done;
    pid_t pid; /* > 0: started */
    int fd;
    char error[256];
} spawn_request_t;

struct cohort_isolate {
    cohort_service_t *service;
    char *config_path; /* absolute */
    const char *exe;
    char *argv[9];
    size_t n_slots;
    child_t *children; /* one per slot; slot i is touched by its worker thread only */

    pthread_t spawner;
    bool spawner_started;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    spawn_request_t *request; /* the one being served, or waiting */
    bool quit;

    pthread_mutex_t report_lock; /* start failures: logged once per burst */
    bool start_failing;
    uint64_t failed_starts;
    int64_t reported_ms;
    bool handler_warned;

    _Atomic uint64_t starts, crashes, timeouts;
};



/* ---- starting children (the spawner thread) ------------------------------------------- */

/* In the forked child: async-signal-safe calls only, then exec. Reports errno on `errfd`.
 * Its _exit() calls are right for library code: this is a forked copy of the node that
 * failed to become a worker; it must end without running the node's atexit handlers or
 * flushing the stdio buffers it inherited (exit() would do both, twice over). */
static void exec_child(cohort_isolate_t *pool, int sock, int errfd, pid_t parent)
{
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    for (int sig = 1; sig < NSIG; sig++)
        sigaction(sig, &dfl, NULL); /* SIGPIPE was ignored by the node, for one */
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL); /* the spawner blocks every signal */
    int err = 0;
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0)
        err = errno;
    else if (getppid() != parent)
        _exit(127); /* the node died before that took effect */
    if (!err && sock < 3 && (sock = fcntl(sock, F_DUPFD, 3)) < 0)
        err = errno;
    if (!err && errfd < 3 && (errfd = fcntl(errfd, F_DUPFD_CLOEXEC, 3)) < 0)
        err = errno;
    if (!err && (dup2(sock, 0) < 0 || dup2(sock, 1) < 0))
        err = errno;
    if (!err && errfd != 3) {
        if (dup3(errfd, 3, O_CLOEXEC) < 0)
            err = errno;
        else
            errfd = 3;
    }
    if (!err) {
        close_range(4, ~0U, 0); /* nothing else of the node's leaks into the worker */
        execv(pool->exe, pool->argv);
        err = errno;
    }
    ssize_t ignored = write(errfd, &err, sizeof err);
    (void)ignored;
    _exit(127);
}

static void spawn_child(cohort_isolate_t *pool, spawn_request_t *req)
{
    int sv[2], errpipe[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
        snprintf(req->error, sizeof req->error, "socketpair: %s", strerror(errno));
        return;
    }
    if (pipe2(errpipe, O_CLOEXEC) != 0) {
        snprintf(req->error, sizeof req->error, "pipe: %s", strerror(errno));
        close(sv[0]);
        close(sv[1]);
        return;
    }
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid == 0)
        exec_child(pool, sv[1], errpipe[1], parent);
    int fork_errno = errno;
    close(sv[1]);
    close(errpipe[1]);
    if (pid < 0) {
        snprintf(req->error, sizeof req->error, "fork: %s", strerror(fork_errno));
        close(sv[0]);
        close(errpipe[0]);
        return;
    }
    int child_errno = 0;
    ssize_t n;
    do
        n = read(errpipe[0], &child_errno, sizeof child_errno);
    while (n < 0 && errno == EINTR);
    close(errpipe[0]);
    if (n == (ssize_t)sizeof child_errno) {
        waitpid(pid, NULL, 0);
        close(sv[0]);
        snprintf(req->error, sizeof req->error, "cannot execute %s: %s", pool->exe,
                 strerror(child_errno));
        return;
    }
    req->pid = pid;
    req->fd = sv[0];
}

static void *spawner_main(void *arg)
{
    cohort_isolate_t *pool = arg;
    pthread_mutex_lock(&pool->lock);
    for (;;) {
        while (!pool->quit && (!pool->request || pool->request->done))
            pthread_cond_wait(&pool->cond, &pool->lock);
        if (pool->quit)
            break;
        spawn_request_t *req = pool->request;
        pthread_mutex_unlock(&pool->lock);
        spawn_child(pool, req);
        pthread_mutex_lock(&pool->lock);
        req->done = true;
        pthread_cond_broadcast(&pool->cond);
    }
    pthread_mutex_unlock(&pool->lock);
    return NULL;
}

/* Asks the spawner for a child; one request at a time. */
static void request_spawn(cohort_isolate_t *pool, spawn_request_t *req)
{
    pthread_mutex_lock(&pool->lock);
    while (pool->request && !pool->quit)
        pthread_cond_wait(&pool->cond, &pool->lock);
    if (pool->quit) {
        snprintf(req->error, sizeof req->error, "the worker pool is shutting down");
        pthread_mutex_unlock(&pool->lock);
        return;
    }
    pool->request = req;
    pthread_cond_broadcast(&pool->cond);
    while (!req->done)
        pthread_cond_wait(&pool->cond, &pool->lock);
    pool->request = NULL;
    pthread_cond_broadcast(&pool->cond);
    pthread_mutex_unlock(&pool->lock);
}

/* ---- child bookkeeping (the slot's worker thread) ------------------------------------- */

static void describe_status(int status, char *out, size_t len)
{
    if (WIFSIGNALED(status))
        snprintf(out, len, "worker process killed by signal %d (%s)", WTERMSIG(status),
                 strsignal(WTERMSIG(status)));
    else if (WIFEXITED(status))
        snprintf(out, len, "worker process exited with status %d", WEXITSTATUS(status));
    else
        snprintf(out, len, "worker process ended (wait status %d)", status);
}

/* Waits for `pid` until `deadline_ms`; then SIGKILL and wait. Returns its wait status. */
static int reap(pid_t pid, int64_t deadline_ms)
{
    int status = 0;
    for (;;) {
        pid_t r = waitpid(pid, &status, WNOHANG);
        if (r == pid || (r < 0 && errno != EINTR))
            return status;
        if (r == 0 && cohort_clock_monotonic_ms() >= deadline_ms)
            break;
        struct timespec ts = {0, 5 * 1000000L};
        nanosleep(&ts, NULL);
    }
    kill(pid, SIGKILL);
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    return status;
}

/* Closes the slot's socket and reaps its child (SIGKILL at once with `kill_now`); `why`
 * (may be NULL) receives how it ended. */
static void end_child(child_t *c, bool kill_now, char *why, size_t whylen)
{
    if (c->fd >= 0)
        close(c->fd);
    if (c->pidfd >= 0)
        close(c->pidfd);
    c->fd = c->pidfd = -1;
    if (c->pid > 0) {
        if (kill_now)
            kill(c->pid, SIGKILL);
        int status = reap(c->pid, cohort_clock_monotonic_ms() + REAP_WAIT_MS);
        if (why)
            describe_status(status, why, whylen);
    }
    c->pid = 0;
}

/* An idle child must have nothing to say: readable means it hung up (or misbehaves). */
static bool idle_child_gone(const child_t *c)
{
    struct pollfd p[2] = {{.fd = c->fd, .events = POLLIN}, {.fd = c->pidfd, .events = POLLIN}};
    return poll(p, 2, 0) != 0;
}

static void report_start_failure(cohort_isolate_t *pool, const char *why)
{
    cohort_service_t *s = pool->service;
    pthread_mutex_lock(&pool->report_lock);
    pool->failed_starts++;
    int64_t now = cohort_clock_monotonic_ms();
    if (!pool->start_failing || now - pool->reported_ms >= START_FAILURE_REPORT_MS) {
        cohort_logf(COHORT_LOG_ERROR, s->config->name, cohort_election_role(&s->election), 0,
                    "cannot start a worker process: %s (%llu failed start(s) so far; the tasks "
                    "are retried; reported again in %d s while this goes on)",
                    why, (unsigned long long)pool->failed_starts, START_FAILURE_REPORT_MS / 1000);
        pool->reported_ms = now;
        pool->start_failing = true;
    }
    pthread_mutex_unlock(&pool->report_lock);
}

static void report_started(cohort_isolate_t *pool, const char *handler)
{
    cohort_service_t *s = pool->service;
    atomic_fetch_add(&pool->starts, 1);
    pthread_mutex_lock(&pool->report_lock);
    if (pool->start_failing)
        cohort_logf(COHORT_LOG_INFO, s->config->name, cohort_election_role(&s->election), 0,
                    "worker processes start again (after %llu failed start(s))",
                    (unsigned long long)pool->failed_starts);
    pool->start_failing = false;
    pool->failed_starts = 0;
    if (!pool->handler_warned && strcmp(handler, s->config->handler_path) != 0) {
        pool->handler_warned = true;
        cohort_logf(COHORT_LOG_WARN, s->config->name, cohort_election_role(&s->election), 0,
                    "worker processes load handler %s but this node loaded %s: the "
                    "configuration file changed since the node started; restart the node",
                    handler, s->config->handler_path);
    }
    pthread_mutex_unlock(&pool->report_lock);
}

/* Starts slot's child and waits until it is ready. False with the reason in `why`. */
static bool start_child(cohort_isolate_t *pool, size_t slot, char *why, size_t whylen)
{
    spawn_request_t req = {.fd = -1};
    request_spawn(pool, &req);
    if (req.pid <= 0) {
        snprintf(why, whylen, "%s", req.error);
        return false;
    }
    child_t *c = &pool->children[slot];
    c->pid = req.pid;
    c->fd = req.fd;
    c->pidfd = pidfd_open(req.pid, 0); /* -1 on kernels before 5.3: EOF alone tells */
    bson_t *hello = NULL;
    cohort_wire_status_t st =
        cohort_wire_read(c->fd, c->pidfd, cohort_clock_monotonic_ms() + START_TIMEOUT_MS, &hello);
    bson_iter_t it;
    if (st == COHORT_WIRE_OK &&
        !(bson_iter_init_find(&it, hello, "ready") && BSON_ITER_HOLDS_BOOL(&it)))
        st = COHORT_WIRE_BAD;
    bool ready = st == COHORT_WIRE_OK && bson_iter_bool(&it);
    if (ready)
        report_started(pool, cohort_wire_utf8(hello, "handler", ""));
    else if (st == COHORT_WIRE_OK)
        snprintf(why, whylen, "%s", cohort_wire_utf8(hello, "error", "it gave no reason"));
    bson_destroy(hello);
    if (ready)
        return true;
    char ended[160];
    end_child(c, st == COHORT_WIRE_TIMEOUT || st == COHORT_WIRE_BAD, ended, sizeof ended);
    if (st == COHORT_WIRE_TIMEOUT)
        snprintf(why, whylen, "not ready after %d ms (killed)", START_TIMEOUT_MS);
    else if (st == COHORT_WIRE_BAD)
        snprintf(why, whylen, "it sent a malformed message (killed)");
    else if (st == COHORT_WIRE_EOF)
        snprintf(why, whylen, "%s before it was ready (its log lines say why)", ended);
    return false;
}

/* A run that ended without an outcome from the handler: retried while attempts remain. */
static void retry_or_fail(cohort_isolate_t *pool, cohort_task_run_t *run)
{
    const cohort_service_config_t *config = pool->service->config;
    run->result.error = run->why;
    int counted = cohort_task_counted_attempts(&run->task);
    if (counted < config->max_attempts) {
        run->result.finish = COHORT_FINISH_RETRY;
        run->result.retry_at_ms = cohort_clock_cluster_ms() +
                                  cohort_task_retry_delay_ms(config->retry_base_ms, counted);
    } else {
        run->result.finish = COHORT_FINISH_FAILED;
    }
}

/* Fills run->result from the child's reply. False if the reply makes no sense. The retry
 * time is this node's clock plus the delay the child chose: the node's clock is the one
 * its claims and outcomes use. */
static bool take_reply(const bson_t *reply, cohort_task_run_t *run)
{
    int64_t finish = cohort_wire_int(reply, "finish", -1);
    if (finish != COHORT_FINISH_SUCCEEDED && finish != COHORT_FINISH_RETRY &&
        finish != COHORT_FINISH_FAILED)
        return false;
    run->result.finish = (cohort_finish_t)finish;
    int64_t retry_in = cohort_wire_int(reply, "retry_in_ms", 0);
    run->result.retry_at_ms = cohort_clock_cluster_ms() + (retry_in > 0 ? retry_in : 0);
    const char *error = cohort_wire_utf8(reply, "error", NULL);
    run->result.error = NULL;
    if (error) {
        snprintf(run->why, sizeof run->why, "%s", error);
        run->result.error = run->why;
    } else if (finish != COHORT_FINISH_SUCCEEDED) {
        snprintf(run->why, sizeof run->why, "worker process gave no reason");
        run->result.error = run->why;
    }
    return true;
}

static void log_crash(cohort_isolate_t *pool, size_t slot, pid_t pid, const cohort_task_run_t *run)
{
    cohort_service_t *s = pool->service;
    cohort_logf(COHORT_LOG_WARN, s->config->name, cohort_election_role(&s->election), 0,
                "worker process %ld (slot %zu) ended while running task %s attempt %d: %s "
                "(%llu crash(es) in this pool so far); a new one starts for the next task",
                (long)pid, slot + 1, run->task.id, run->task.attempt, run->why,
                (unsigned long long)atomic_load(&pool->crashes));
}

void cohort_isolate_run(cohort_isolate_t *pool, size_t slot, const bson_t *claimed,
                        cohort_task_run_t *run)
{
    cohort_service_t *s = pool->service;
    if (slot >= pool->n_slots) {
        snprintf(run->why, sizeof run->why, "worker slot %zu has no worker process (pool of %zu)",
                 slot + 1, pool->n_slots);
        retry_or_fail(pool, run);
        return;
    }
    child_t *c = &pool->children[slot];
    if (c->pid > 0 && idle_child_gone(c)) {
        char ended[160];
        end_child(c, true, ended, sizeof ended);
        atomic_fetch_add(&pool->crashes, 1);
        cohort_logf(COHORT_LOG_WARN, s->config->name, cohort_election_role(&s->election), 0,
                    "worker process of slot %zu ended while idle: %s; starting a new one", slot + 1,
                    ended);
    }
    if (c->pid == 0) {
        char why[400];
        if (!start_child(pool, slot, why, sizeof why)) {
            report_start_failure(pool, why);
            snprintf(run->why, sizeof run->why, "worker process could not start: %s", why);
            retry_or_fail(pool, run);
            return;
        }
    }

    bson_t message = BSON_INITIALIZER;
    BSON_APPEND_DOCUMENT(&message, "task", claimed);
    if (cohort_clock_synced())
        BSON_APPEND_INT64(&message, "clock_offset_ms",
                          cohort_clock_cluster_ms() - cohort_clock_monotonic_ms());
    int64_t timeout_ms = cohort_task_timeout_ms(s->config, &run->task);
    int64_t started_ms = cohort_clock_monotonic_ms();
    bool sent = cohort_wire_write(c->fd, &message);
    bson_destroy(&message);
    bson_t *reply = NULL;
    int64_t deadline_ms = timeout_ms > 0 ? started_ms + timeout_ms : -1;
    cohort_wire_status_t st =
        sent ? cohort_wire_read(c->fd, c->pidfd, deadline_ms, &reply) : COHORT_WIRE_EOF;
    cohort_histogram_observe(&s->stats.task_duration,
                             (cohort_clock_monotonic_ms() - started_ms) * 1000);
    if (st == COHORT_WIRE_OK && take_reply(reply, run)) {
        bson_destroy(reply);
        return;
    }
    bson_destroy(reply);
    pid_t pid = c->pid;
    if (st == COHORT_WIRE_TIMEOUT) {
        end_child(c, true, NULL, 0);
        atomic_fetch_add(&pool->timeouts, 1);
        snprintf(run->why, sizeof run->why, "timed out after %lld ms (worker process killed)",
                 (long long)timeout_ms);
        run->result.finish = COHORT_FINISH_TIMED_OUT;
        run->result.error = run->why;
        return;
    }
    char ended[160];
    end_child(c, st != COHORT_WIRE_EOF, ended, sizeof ended);
    atomic_fetch_add(&pool->crashes, 1);
    if (st == COHORT_WIRE_EOF)
        snprintf(run->why, sizeof run->why, "%s", ended);
    else
        snprintf(run->why, sizeof run->why, "worker process sent a malformed reply (killed)");
    log_crash(pool, slot, pid, run);
    retry_or_fail(pool, run);
    run->result.crashed = true; /* the history tells this attempt's story as a crash */
}

/* ---- the pool ------------------------------------------------------------------------- */

cohort_isolate_t *cohort_isolate_new(cohort_service_t *service, const char *config_path,
                                     size_t slots, bson_error_t *error)
{
    if (!config_path) {
        bson_set_error(error, COHORT_DOMAIN_CONFIG, COHORT_CODE_INVALID,
                       "[service:%s] isolation = process needs the node's configuration file, "
                       "which its worker processes load (none was given)",
                       service->config->name);
        return NULL;
    }
    if (slots == 0) {
        bson_set_error(error, COHORT_DOMAIN_USAGE, COHORT_CODE_INVALID,
                       "[service:%s] a worker process pool needs at least one slot",
                       service->config->name);
        return NULL;
    }
    cohort_isolate_t *pool = calloc(1, sizeof *pool);
    child_t *children = calloc(slots, sizeof *children);
    char *path = realpath(config_path, NULL);
    if (!pool || !children || !path) {
        bson_set_error(error, COHORT_DOMAIN_SYSTEM, path ? COHORT_CODE_NO_MEMORY : COHORT_CODE_IO,
                       "[service:%s] cannot set up its worker processes: %s%s%s",
                       service->config->name, path ? "" : config_path, path ? "" : ": ",
                       strerror(errno ? errno : ENOMEM));
        free(pool);
        free(children);
        free(path);
        return NULL;
    }
    for (size_t i = 0; i < slots; i++)
        children[i] = (child_t){.pid = 0, .fd = -1, .pidfd = -1};
    pool->service = service;
    pool->config_path = path;
    pool->n_slots = slots;
    pool->children = children;
    /* COHORT_WORKER_EXE (tests): a cohortd to run when this process is not one. */
    const char *exe = getenv("COHORT_WORKER_EXE");
    pool->exe = exe && *exe ? exe : "/proc/self/exe";
    char *const argv[] = {"cohortd",   "--worker",
                          "-c",        pool->config_path,
                          "--service", service->config->name,
                          "--node-id", (char *)service->node_id,
                          NULL};
    memcpy(pool->argv, argv, sizeof argv);
    pthread_mutex_init(&pool->lock, NULL);
    pthread_cond_init(&pool->cond, NULL);
    pthread_mutex_init(&pool->report_lock, NULL);

    /* The spawner takes no signals: they stay with the node's own threads. */
    if (!cohort_thread_start(&pool->spawner, spawner_main, pool, true, error,
                             "the worker process spawner of service '%s'",
                             service->config->name)) {
        cohort_isolate_destroy(pool);
        return NULL;
    }
    pool->spawner_started = true;
    return pool;
}

void cohort_isolate_destroy(cohort_isolate_t *pool)
{
    if (!pool)
        return;
    /* Hang up on every child first, so they all run destroy() at once, then reap them. */
    for (size_t i = 0; i < pool->n_slots; i++) {
        if (pool->children[i].fd >= 0)
            close(pool->children[i].fd);
        if (pool->children[i].pidfd >= 0)
            close(pool->children[i].pidfd);
        pool->children[i].fd = pool->children[i].pidfd = -1;
    }
    int64_t deadline = cohort_clock_monotonic_ms() + STOP_WAIT_MS;
    for (size_t i = 0; i < pool->n_slots; i++) {
        if (pool->children[i].pid > 0)
            reap(pool->children[i].pid, deadline);
        pool->children[i].pid = 0;
    }
    if (pool->spawner_started) {
        pthread_mutex_lock(&pool->lock);
        pool->quit = true;
        pthread_cond_broadcast(&pool->cond);
        pthread_mutex_unlock(&pool->lock);
        pthread_join(pool->spawner, NULL);
    }
    uint64_t starts = atomic_load(&pool->starts);
    if (starts > 0) {
        cohort_service_t *s = pool->service;
        cohort_logf(COHORT_LOG_INFO, s->config->name, NULL, 0,
                    "worker processes stopped: %llu started, %llu crashed, %llu killed at a "
                    "task timeout",
                    (unsigned long long)starts, (unsigned long long)atomic_load(&pool->crashes),
                    (unsigned long long)atomic_load(&pool->timeouts));
    }
    pthread_mutex_destroy(&pool->report_lock);
    pthread_cond_destroy(&pool->cond);
    pthread_mutex_destroy(&pool->lock);
    free(pool->children);
    free(pool->config_path);
    free(pool);
}
