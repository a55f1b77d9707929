/*
 * deploy.c - the operator's files in deploy/ agree with the node they run.
 *
 * - deploy/systemd/cohortd.service: a Type=notify unit starting the installed cohortd, with a
 *   stop timeout longer than the default shutdown_grace_ms, a watchdog (WatchdogSec, which
 *   cohortd answers from its loop) far above a database command's socket timeout, and an open
 *   files limit above the default http_max_connections plus the node's own; it runs as the
 *   package's `cohort` user; `systemd-analyze verify` accepts it (where systemd-analyze
 *   exists; it needs no running systemd).
 * - MemoryDenyWriteExecute=yes in that unit does not stop cohortd from loading the shipped
 *   handlers: --check-config loads them all under the kernel's equivalent, PR_SET_MDWE (where
 *   the kernel has it), while a handler that asks for an executable stack is refused - which
 *   shows the restriction was really in force.
 * - deploy/kubernetes: the manifests parse as YAML (python3 with PyYAML; skipped without it),
 *   probe the node's /readyz and /healthz on the port its cohort.ini listens on, give it more
 *   time to stop than its shutdown_grace_ms, and take MONGODB_URI from a Secret; cohort.ini
 *   passes the configuration loader. And (issue 27): a readiness timeout of at least 3 s, no
 *   service account token, scrape annotations on the metrics port, a CPU limit of at least
 *   one CPU per worker plus one (so busy handlers cannot use up the quota the lease thread
 *   needs), a NetworkPolicy admitting only labelled clients and the scraper to that port, a
 *   Service for the API, and example services that create no tasks of their own.
 * - deploy/container/Dockerfile: every base image pinned by digest, every apt package by
 *   version, the build stage makes the .deb with cpack and the runtime stage installs that
 *   cohort_<version>_amd64.deb; hadolint (or dockerfilelint) passes it where one is installed
 *   (neither is packaged by Debian; npm's `hadolint` is a wrapper without the binary).
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/config.h"
#include "support.h"

#ifndef PR_SET_MDWE
#define PR_SET_MDWE 65
#endif
#ifndef PR_MDWE_REFUSE_EXEC_GAIN
#define PR_MDWE_REFUSE_EXEC_GAIN 1UL
#endif

#define UNIT COHORT_SOURCE_DIR "/deploy/systemd/cohortd.service"
#define K8S COHORT_SOURCE_DIR "/deploy/kubernetes"
#define IMAGE_HANDLER_DIR "/usr/lib/cohort/handlers/"
#define DOCKERFILE COHORT_SOURCE_DIR "/deploy/container/Dockerfile"

/* The value of the first "Key=" line of a unit file, or "" (static buffer). */
static const char *unit_value(const char *unit, const char *key)
{
    static char value[1024];
    value[0] = '\0';
    size_t klen = strlen(key);
    for (const char *line = unit; line; line = strchr(line, '\n')) {
        line += *line == '\n';
        if (strncmp(line, key, klen) == 0 && line[klen] == '=') {
            snprintf(value, sizeof value, "%.*s", (int)strcspn(line + klen + 1, "\n"),
                     line + klen + 1);
            break;
        }
    }
    return value;
}

/* A configuration from `text` whose handlers are the image's (the package's), read from
 * this build's handlers/ instead. Fails the test on any problem. */
static cohort_config_t *load_config_text(const char *text, const char *origin)
{
    char *local = test_replace_all(text, IMAGE_HANDLER_DIR, COHORT_BUILD_DIR "/handlers/");
    cohort_config_errors_t errors = {0};
    cohort_config_t *config = cohort_config_load_string(local, origin, NULL, &errors);
    cr_assert_not_null(config, "%s does not load: %s", origin,
                       errors.count ? errors.messages[0] : "?");
    cohort_config_errors_clear(&errors);
    free(local);
    return config;
}

static int64_t default_shutdown_grace_ms(void)
{
    cohort_config_t *config = load_config_text(
        "[service:x]\nhandler = " IMAGE_HANDLER_DIR "cohort_noop.so\n", "defaults");
    int64_t grace = config->shutdown_grace_ms;
    cohort_config_destroy(config);
    return grace;
}

Test(deploy, systemd_unit_fits_the_node)
{
    char *unit = test_read_file(UNIT);
    cr_expect_str_eq(unit_value(unit, "Type"), "notify");
    cr_expect_str_eq(unit_value(unit, "ExecStart"),
                     "/usr/local/bin/cohortd -c /etc/cohort/cohort.ini");
    cr_expect_str_eq(unit_value(unit, "Restart"), "on-failure");
    cr_expect_str_eq(unit_value(unit, "KillSignal"), "SIGTERM");
    cr_expect_str_eq(unit_value(unit, "EnvironmentFile"), "-/etc/cohort/cohortd.env");
    cr_expect_str_eq(unit_value(unit, "MemoryDenyWriteExecute"), "yes");
    cr_expect(strcmp(unit_value(unit, "DynamicUser"), "yes") == 0 || *unit_value(unit, "User"),
              "the unit runs cohortd as root");
    cr_expect_str_eq(unit_value(unit, "User"), "cohort", "not the user the package creates");

    /* The watchdog: cohortd pings every WatchdogSec/4 from its loop, which a database command
     * may hold for socketTimeoutMS (15 s by default): several of those must fit. */
    const char *watchdog = unit_value(unit, "WatchdogSec");
    char *wend;
    long watchdog_s = strtol(watchdog, &wend, 10);
    cr_expect(wend != watchdog && strcmp(wend, "s") == 0, "WatchdogSec=%s: write it in seconds",
              watchdog);
    cr_expect_geq(watchdog_s, 4 * 15, "WatchdogSec=%s: under four socket timeouts", watchdog);

    const char *stop = unit_value(unit, "TimeoutStopSec");
    char *end;
    long seconds = strtol(stop, &end, 10);
    cr_assert(end != stop && (strcmp(end, "s") == 0 || *end == '\0'),
              "TimeoutStopSec=%s: write it in seconds (e.g. 45s)", stop);
    int64_t grace = default_shutdown_grace_ms();
    cr_expect_gt(seconds * 1000, grace + 5000,
                 "TimeoutStopSec=%s leaves no margin over shutdown_grace_ms=%lld", stop,
                 (long long)grace);

    /* Open files: the HTTP connections, 10 per service, 100 for the process (the unit's
     * comment); at least for the defaults and a few services. */
    cohort_config_t *defaults = load_config_text(
        "[service:x]\nhandler = " IMAGE_HANDLER_DIR "cohort_noop.so\n", "defaults");
    long nofile = strtol(unit_value(unit, "LimitNOFILE"), NULL, 10);
    cr_expect_geq(nofile, defaults->http_max_connections + 10 * 10 + 100,
                  "LimitNOFILE=%s is too low for http_max_connections = %lld",
                  unit_value(unit, "LimitNOFILE"), (long long)defaults->http_max_connections);
    cohort_config_destroy(defaults);
    free(unit);
}

static bool copy_file(const char *from, const char *to)
{
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "cp '%s' '%s'", from, to);
    return system(cmd) == 0;
}

Test(deploy, systemd_analyze_verify, .timeout = 60)
{
    const char *analyze = "/usr/bin/systemd-analyze";
    if (access(analyze, X_OK) != 0)
        cr_skip_test("systemd-analyze is not installed (Debian: systemd)");
    const char *units = access("/usr/lib/systemd/system/sysinit.target", R_OK) == 0
                            ? "/usr/lib/systemd/system"
                            : "/lib/systemd/system";
    /* A root holding the unit, the targets it refers to and the programs it runs: cohortd
     * from this build (installed to /usr/local/bin), the others from this host. */
    char *root = test_tmpdir("verify");
    char cmd[4096];
    snprintf(cmd, sizeof cmd,
             "mkdir -p '%1$s/etc/systemd/system' '%1$s/usr/lib/systemd/system' && "
             "cp '%2$s'/*.target '%1$s/usr/lib/systemd/system/'",
             root, units);
    cr_assert_eq(system(cmd), 0, "cannot prepare %s", root);
    char dest[2048];
    snprintf(dest, sizeof dest, "%s/etc/systemd/system/cohortd.service", root);
    cr_assert(copy_file(UNIT, dest));
    char *unit = test_read_file(UNIT);
    for (const char *line = unit; line; line = strchr(line, '\n')) {
        line += *line == '\n';
        if (strncmp(line, "Exec", 4) != 0 || !strchr(line, '='))
            continue;
        const char *program = strchr(line, '=') + 1;
        program += strspn(program, "-@+!:");
        char path[1024], from[2048];
        snprintf(path, sizeof path, "%.*s", (int)strcspn(program, " \n"), program);
        if (strncmp(path, "/usr/local/bin/", 15) == 0)
            snprintf(from, sizeof from, "%s/%s", COHORT_BUILD_DIR, path + 15);
        else
            snprintf(from, sizeof from, "%s", path);
        snprintf(cmd, sizeof cmd, "mkdir -p \"$(dirname '%s%s')\"", root, path);
        cr_assert_eq(system(cmd), 0, "%s", cmd);
        snprintf(dest, sizeof dest, "%s%s", root, path);
        cr_assert(copy_file(from, dest), "cannot copy %s", from);
    }
    free(unit);

    char root_arg[2048];
    snprintf(root_arg, sizeof root_arg, "--root=%s", root);
    const char *argv[] = {analyze, "verify", root_arg, "cohortd.service", NULL};
    test_run_result_t r = test_run(argv, NULL, 30000);
    cr_expect_eq(r.exit_code, 0, "systemd-analyze verify failed: %s%s", r.out, r.err);
    cr_expect(r.out[0] == '\0' && r.err[0] == '\0', "systemd-analyze verify complains: %s%s", r.out,
              r.err);
    test_run_result_free(&r);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    cr_expect_eq(system(cmd), 0, "%s", cmd);
    free(root);
}

/* Runs `cohortd --check-config -c config`, under PR_SET_MDWE if `mdwe`. Returns its exit
 * status; 77 if the kernel has no PR_SET_MDWE. Its output goes to `log`. */
static int check_config(const char *config, bool mdwe, const char *log)
{
    fflush(NULL);
    pid_t pid = fork();
    cr_assert_geq(pid, 0, "fork failed");
    if (pid == 0) {
        if (mdwe && prctl(PR_SET_MDWE, PR_MDWE_REFUSE_EXEC_GAIN, 0L, 0L, 0L) != 0)
            _exit(77);
        int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd < 0 || dup2(fd, 1) < 0 || dup2(fd, 2) < 0)
            _exit(126);
        execl(COHORT_BUILD_DIR "/cohortd", "cohortd", "--check-config", "-c", config, (char *)NULL);
        _exit(127);
    }
    int status;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* A config with one service per shipped handler (every .so in build/handlers). */
static char *shipped_handlers_config(const char *dir)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    DIR *handlers = opendir(COHORT_BUILD_DIR "/handlers");
    cr_assert_not_null(handlers, "no %s/handlers: build first", COHORT_BUILD_DIR);
    int count = 0;
    for (struct dirent *e; (e = readdir(handlers));) {
        size_t n = strlen(e->d_name);
        if (n > 3 && strcmp(e->d_name + n - 3, ".so") == 0)
            fprintf(f, "[service:s%d]\nhandler = %s/handlers/%s\n", count++, COHORT_BUILD_DIR,
                    e->d_name);
    }
    closedir(handlers);
    fclose(f);
    cr_assert_gt(count, 0, "no shipped handler in %s/handlers", COHORT_BUILD_DIR);
    char *path = test_write_file(dir, "shipped.ini", text);
    free(text);
    return path;
}

Test(deploy, handlers_load_under_memory_deny_write_execute, .timeout = 60)
{
    char *dir = test_tmpdir("mdwe");
    char log[1024];
    snprintf(log, sizeof log, "%s/check.log", dir);

    char *shipped = shipped_handlers_config(dir);
    int rc = check_config(shipped, true, log);
    if (rc == 77)
        cr_skip_test("this kernel has no PR_SET_MDWE (Linux >= 6.3)");
    char *out = test_read_file(log);
    cr_expect_eq(rc, 0, "the shipped handlers do not load under MemoryDenyWriteExecute: %s", out);
    free(out);

    /* The control: a handler whose stack must be executable loads normally, and is refused
     * under the restriction. */
    char *source = test_write_file(
        dir, "execstack.c",
        "#include <cohort/handler.h>\n"
        "static cohort_outcome_t run(cohort_ctx_t *c, void *s, cohort_task_t *t)\n"
        "{\n    (void)c;\n    (void)s;\n    (void)t;\n    return COHORT_TASK_SUCCEEDED;\n}\n"
        "COHORT_HANDLER_EXPORT const cohort_handler_t cohort_handler = {\n"
        "    .abi_version = COHORT_HANDLER_ABI_VERSION, .name = \"execstack\",\n"
        "    .process_task = run};\n");
    char cmd[8192];
    snprintf(cmd, sizeof cmd,
             "'%s' -shared -fPIC -Wl,-z,execstack -o '%s/execstack.so' '%s' -I'%s/include' "
             "$(pkg-config --cflags --libs libbson-1.0)",
             COHORT_CC, dir, source, COHORT_SOURCE_DIR);
    cr_assert_eq(system(cmd), 0, "cannot build the control handler: %s", cmd);
    snprintf(cmd, sizeof cmd, "[service:x]\nhandler = %s/execstack.so\n", dir);
    char *control = test_write_file(dir, "control.ini", cmd);
    if (check_config(control, false, log) == 0) {
        cr_expect_neq(check_config(control, true, log), 0,
                      "a handler needing an executable stack loaded under PR_SET_MDWE: the "
                      "check above proves nothing");
    }

    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    cr_expect_eq(system(cmd), 0, "%s", cmd);
    free(control);
    free(source);
    free(shipped);
    free(dir);
}

/* The value at a dotted path ("spec.template.spec.containers.0.name") of `doc`. */
static bool at(const bson_t *doc, const char *path, bson_iter_t *value)
{
    bson_iter_t it;
    return bson_iter_init(&it, doc) && bson_iter_find_descendant(&it, path, value);
}

static const char *str_at(const bson_t *doc, const char *path)
{
    bson_iter_t v;
    return at(doc, path, &v) && BSON_ITER_HOLDS_UTF8(&v) ? bson_iter_utf8(&v, NULL) : "";
}

static int64_t int_at(const bson_t *doc, const char *path)
{
    bson_iter_t v;
    return at(doc, path, &v) && BSON_ITER_HOLDS_NUMBER(&v) ? bson_iter_as_int64(&v) : -1;
}

/* Copies the first document of kind `kind` from the array `docs` into *out. */
static bool find_kind(const bson_t *all, const char *kind, bson_t *out)
{
    bson_iter_t docs, it;
    if (!at(all, "docs", &docs) || !bson_iter_recurse(&docs, &it))
        return false;
    while (bson_iter_next(&it)) {
        uint32_t len;
        const uint8_t *data;
        if (!BSON_ITER_HOLDS_DOCUMENT(&it))
            continue;
        bson_iter_document(&it, &len, &data);
        bson_t doc;
        if (bson_init_static(&doc, data, len) && strcmp(str_at(&doc, "kind"), kind) == 0) {
            bson_copy_to(&doc, out);
            return true;
        }
    }
    return false;
}

/* Kubernetes "cpu" quantities ("3", "250m", "1.5") in millicores; -1 if absent or odd. */
static int64_t millicores(const bson_t *doc, const char *path)
{
    bson_iter_t v;
    if (!at(doc, path, &v))
        return -1;
    if (BSON_ITER_HOLDS_NUMBER(&v))
        return (int64_t)(bson_iter_as_double(&v) * 1000);
    if (!BSON_ITER_HOLDS_UTF8(&v))
        return -1;
    const char *text = bson_iter_utf8(&v, NULL);
    char *end;
    double value = strtod(text, &end);
    if (end == text)
        return -1;
    return strcmp(end, "m") == 0 ? (int64_t)value : *end ? -1 : (int64_t)(value * 1000);
}

/* The app.kubernetes.io/name label in the labels document at `path` (its dots defeat at()). */
static const char *app_label(const bson_t *doc, const char *path)
{
    bson_iter_t labels, name;
    if (!at(doc, path, &labels) || !bson_iter_recurse(&labels, &name) ||
        !bson_iter_find(&name, "app.kubernetes.io/name") || !BSON_ITER_HOLDS_UTF8(&name))
        return "";
    return bson_iter_utf8(&name, NULL);
}

/* The operator's points of issue 27 (see the top of this file). */
static void check_kubernetes_ops(const bson_t *all, const bson_t *d, const cohort_config_t *config,
                                 const char *port_name, int64_t port)
{
    const char *c = "spec.template.spec.containers.0";
    char path[256];
    snprintf(path, sizeof path, "%s.readinessProbe.timeoutSeconds", c);
    cr_expect_geq(int_at(d, path), 3, "the readiness probe's timeout is under 3 s "
                                      "(/readyz took 3.19 s in a database outage)");
    bson_iter_t v;
    cr_expect(at(d, "spec.template.spec.automountServiceAccountToken", &v) &&
                  BSON_ITER_HOLDS_BOOL(&v) && !bson_iter_bool(&v),
              "the pod mounts a service account token (automountServiceAccountToken: false)");

    char port_text[16];
    snprintf(port_text, sizeof port_text, "%lld", (long long)port);
    bson_iter_t it, key;
    cr_assert(at(d, "spec.template.metadata.annotations", &it) && bson_iter_recurse(&it, &key),
              "the pods have no scrape annotations");
    const char *scrape = "", *scrape_port = "", *scrape_path = "/metrics";
    while (bson_iter_next(&key)) {
        const char *k = bson_iter_key(&key);
        const char *value = BSON_ITER_HOLDS_UTF8(&key) ? bson_iter_utf8(&key, NULL) : "";
        if (strcmp(k, "prometheus.io/scrape") == 0)
            scrape = value;
        else if (strcmp(k, "prometheus.io/port") == 0)
            scrape_port = value;
        else if (strcmp(k, "prometheus.io/path") == 0)
            scrape_path = value;
    }
    cr_expect_str_eq(scrape, "true");
    cr_expect_str_eq(scrape_port, port_text, "prometheus.io/port is not the metrics port");
    cr_expect_str_eq(scrape_path, "/metrics");

    /* CPU: the limit holds every worker busy plus one CPU for the loop and the lease. */
    int64_t workers = 0;
    for (size_t i = 0; i < config->n_services; i++)
        workers += config->services[i].workers;
    snprintf(path, sizeof path, "%s.resources.limits.cpu", c);
    int64_t limit = millicores(d, path);
    snprintf(path, sizeof path, "%s.resources.requests.cpu", c);
    int64_t request = millicores(d, path);
    cr_expect_geq(limit, (workers + 1) * 1000,
                  "CPU limit %lldm < (%lld workers + 1) CPUs: busy handlers could throttle the "
                  "lease thread",
                  (long long)limit, (long long)workers);
    cr_expect(request > 0 && request <= limit, "CPU request %lldm: none, or above the limit",
              (long long)request);

    /* Example services create no tasks of their own: the hello handler's primary makes one
     * every tick, noop's generate_per_tick forever. */
    for (size_t i = 0; i < config->n_services; i++) {
        const cohort_service_config_t *s = &config->services[i];
        cr_expect(strstr(s->handler_path, "cohort_hello.so") == NULL,
                  "service %s runs hello, whose primary enqueues forever", s->name);
        for (size_t j = 0; j < s->n_options; j++)
            cr_expect(strcmp(s->options[j].key, "generate_per_tick") != 0 ||
                          strcmp(s->options[j].value, "0") == 0,
                      "service %s generates tasks forever", s->name);
    }

    /* The Service for the API's clients, on the named port. */
    bson_t service, policy;
    cr_assert(find_kind(all, "Service", &service), "no Service for the API's clients");
    cr_expect_str_eq(app_label(&service, "spec.selector"), "cohort");
    cr_expect(strcmp(str_at(&service, "spec.ports.0.targetPort"), port_name) == 0 ||
                  int_at(&service, "spec.ports.0.targetPort") == port,
              "the Service does not lead to the node's port");

    /* The NetworkPolicy: these pods, ingress only from selected pods, to that port only. */
    cr_assert(find_kind(all, "NetworkPolicy", &policy), "no NetworkPolicy");
    cr_expect_str_eq(app_label(&policy, "spec.podSelector.matchLabels"),
                     "cohort");
    cr_expect_str_eq(str_at(&policy, "spec.policyTypes.0"), "Ingress");
    bson_iter_t rules, rule;
    cr_assert(at(&policy, "spec.ingress", &rules) && bson_iter_recurse(&rules, &rule));
    int n_rules = 0, n_peers = 0;
    while (bson_iter_next(&rule)) {
        n_rules++;
        uint32_t len;
        const uint8_t *data;
        bson_iter_document(&rule, &len, &data);
        bson_t r;
        cr_assert(bson_init_static(&r, data, len));
        cr_expect(strcmp(str_at(&r, "ports.0.port"), port_name) == 0 ||
                      int_at(&r, "ports.0.port") == port,
                  "an ingress rule admits a port other than the node's");
        cr_expect(!test_doc_has(&r, "ports.1"), "an ingress rule admits a second port");
        bson_iter_t from, peer;
        cr_assert(at(&r, "from", &from) && bson_iter_recurse(&from, &peer),
                  "an ingress rule without `from` admits everyone");
        while (bson_iter_next(&peer)) {
            n_peers++;
            bson_iter_document(&peer, &len, &data);
            bson_t p;
            cr_assert(bson_init_static(&p, data, len));
            cr_expect(!test_doc_has(&p, "ipBlock"), "an ingress peer is an address block");
            cr_expect(test_doc_has(&p, "podSelector.matchLabels"),
                      "an ingress peer selects no pods by label (whole namespaces or all)");
        }
    }
    cr_expect_eq(n_rules, 1);
    cr_expect_eq(n_peers, 2, "not exactly the API's clients and the scraper");
    bson_destroy(&policy);
    bson_destroy(&service);
}

Test(deploy, kubernetes_manifests_fit_the_node, .timeout = 60)
{
    const char *probe[] = {"/bin/sh", "-c", "python3 -c 'import yaml'", NULL};
    test_run_result_t r = test_run(probe, NULL, 30000);
    bool have_yaml = r.exit_code == 0;
    test_run_result_free(&r);
    if (!have_yaml)
        cr_skip_test("python3 with PyYAML (Debian: python3-yaml) is not installed");

    const char *script = "import json, sys, yaml\n"
                         "docs = [d for f in sys.argv[1:] for d in yaml.safe_load_all(open(f)) "
                         "if d]\n"
                         "print(json.dumps({'docs': docs}))\n";
    const char *argv[] = {"/usr/bin/env",
                          "python3",
                          "-c",
                          script,
                          K8S "/deployment.yaml",
                          K8S "/poddisruptionbudget.yaml",
                          K8S "/kustomization.yaml",
                          K8S "/service.yaml",
                          K8S "/networkpolicy.yaml",
                          NULL};
    r = test_run(argv, NULL, 30000);
    cr_assert_eq(r.exit_code, 0, "the manifests are not valid YAML: %s", r.err);
    bson_error_t error;
    bson_t *all = bson_new_from_json((const uint8_t *)r.out, -1, &error);
    cr_assert_not_null(all, "%s", error.message);
    test_run_result_free(&r);

    bson_t deployment, kustomization;
    cr_assert(find_kind(all, "Deployment", &deployment), "no Deployment");
    cr_assert(find_kind(all, "Kustomization", &kustomization), "no Kustomization");
    const bson_t *d = &deployment;
    cr_expect_eq(int_at(d, "spec.replicas"), 3);

    char *ini = test_read_file(K8S "/cohort.ini");
    cohort_config_t *config = load_config_text(ini, "deploy/kubernetes/cohort.ini");
    cr_assert_not_null(config->http_listen, "cohort.ini sets no http_listen: nothing to probe");
    const char *colon = strrchr(config->http_listen, ':');
    cr_assert_not_null(colon);
    int64_t port = strtoll(colon + 1, NULL, 10);

    const char *c = "spec.template.spec.containers.0";
    char path[256];
    snprintf(path, sizeof path, "%s.ports.0.containerPort", c);
    cr_expect_eq(int_at(d, path), port, "containerPort is not http_listen's port %lld",
                 (long long)port);
    snprintf(path, sizeof path, "%s.ports.0.name", c);
    char port_name[64];
    snprintf(port_name, sizeof port_name, "%s", str_at(d, path));
    static const char *const probes[][2] = {{"readinessProbe", "/readyz"},
                                            {"livenessProbe", "/healthz"}};
    for (size_t i = 0; i < 2; i++) {
        snprintf(path, sizeof path, "%s.%s.httpGet.path", c, probes[i][0]);
        cr_expect_str_eq(str_at(d, path), probes[i][1]);
        snprintf(path, sizeof path, "%s.%s.httpGet.port", c, probes[i][0]);
        cr_expect(strcmp(str_at(d, path), port_name) == 0 || int_at(d, path) == port,
                  "%s does not probe the node's port", probes[i][0]);
    }
    int64_t grace_s = int_at(d, "spec.template.spec.terminationGracePeriodSeconds");
    cr_expect_gt(grace_s * 1000, config->shutdown_grace_ms + 5000,
                 "terminationGracePeriodSeconds %lld leaves no margin over shutdown_grace_ms %lld",
                 (long long)grace_s, (long long)config->shutdown_grace_ms);

    snprintf(path, sizeof path, "%s.env.0.name", c);
    cr_expect_str_eq(str_at(d, path), "MONGODB_URI");
    snprintf(path, sizeof path, "%s.env.0.valueFrom.secretKeyRef.name", c);
    cr_expect_str_neq(str_at(d, path), "", "MONGODB_URI does not come from a Secret");

    /* cohortd reads the file the ConfigMap generated from cohort.ini becomes. */
    snprintf(path, sizeof path, "%s.args.1", c);
    cr_expect_str_eq(str_at(d, path), "/etc/cohort/cohort.ini");
    snprintf(path, sizeof path, "%s.volumeMounts.0.mountPath", c);
    cr_expect_str_eq(str_at(d, path), "/etc/cohort");
    cr_expect_str_eq(str_at(d, "spec.template.spec.volumes.0.configMap.name"),
                     str_at(&kustomization, "configMapGenerator.0.name"));
    cr_expect_str_eq(str_at(&kustomization, "configMapGenerator.0.files.0"), "cohort.ini");

    check_kubernetes_ops(all, d, config, port_name, port);

    cohort_config_destroy(config);
    free(ini);
    bson_destroy(&kustomization);
    bson_destroy(&deployment);
    bson_destroy(all);
}

/* The blank-separated words of `text` (at most max, each at most 1023 characters). */
static size_t words(const char *text, char out[][1024], size_t max)
{
    size_t n = 0;
    text += strspn(text, " \t");
    while (*text && n < max) {
        size_t len = strcspn(text, " \t");
        snprintf(out[n++], 1024, "%.*s", (int)len, text);
        text += len;
        text += strspn(text, " \t");
    }
    return n;
}

/* The Dockerfile's instructions, continuation lines joined (caller frees each and the array). */
static size_t dockerfile_instructions(char ***out)
{
    char *text = test_read_file(DOCKERFILE);
    char *joined = test_replace_all(text, "\\\n", " ");
    size_t n = 0, cap = 64;
    char **lines = calloc(cap, sizeof *lines);
    cr_assert_not_null(lines);
    for (char *line = strtok(joined, "\n"); line; line = strtok(NULL, "\n")) {
        if (line[0] == '#' || line[0] == '\0')
            continue;
        cr_assert_lt(n, cap);
        lines[n++] = strdup(line);
    }
    free(joined);
    free(text);
    *out = lines;
    return n;
}

Test(deploy, dockerfile_pins_and_installs_the_package, .timeout = 120)
{
    char **lines;
    size_t n = dockerfile_instructions(&lines);
    char deb[256];
    snprintf(deb, sizeof deb, "cohort_%s_amd64.deb", COHORT_VERSION);
    int stages = 0, installs = 0;
    bool cpack = false, copied_deb = false, installed_deb = false;
    for (size_t i = 0; i < n; i++) {
        const char *line = lines[i];
        if (strncmp(line, "FROM ", 5) == 0) {
            stages++;
            const char *digest = strstr(line, "@sha256:");
            cr_expect(digest && strspn(digest + 8, "0123456789abcdef") == 64,
                      "a base image not pinned by digest: %s", line);
            continue;
        }
        if (strstr(line, "cpack -G DEB") && strstr(line, "-DCOHORT_PACKAGE=ON"))
            cpack = true;
        if (stages >= 2 && strncmp(line, "COPY --from=", 12) == 0 && strstr(line, deb))
            copied_deb = true;
        /* Each `apt-get install` names its packages with versions (NAME=VERSION). */
        for (const char *install = strstr(line, "apt-get install"); install;
             install = strstr(install + 1, "apt-get install")) {
            installs++;
            char w[64][1024];
            size_t nw = words(install + strlen("apt-get install"), w, 64);
            for (size_t j = 0; j < nw && strcmp(w[j], "&&") != 0; j++) {
                if (w[j][0] == '-')
                    continue;
                size_t len = strlen(w[j]);
                if (len > 4 && strcmp(w[j] + len - 4, ".deb") == 0) {
                    cr_expect(stages >= 2 && strstr(w[j], deb),
                              "installs %s, not %s in the runtime stage", w[j], deb);
                    installed_deb = true;
                    continue;
                }
                cr_expect(strchr(w[j], '=') != NULL, "apt package %s has no pinned version",
                          w[j]);
            }
        }
    }
    cr_expect_eq(stages, 2, "expected a build stage and a runtime stage");
    cr_expect_gt(installs, 0);
    cr_expect(cpack, "the build stage does not build the package (cpack -G DEB, COHORT_PACKAGE)");
    cr_expect(copied_deb, "the runtime stage does not copy %s from the build stage", deb);
    cr_expect(installed_deb, "the runtime stage does not install %s", deb);
    for (size_t i = 0; i < n; i++)
        free(lines[i]);
    free(lines);
}

/* A linter, where one is installed. */
Test(deploy, dockerfile_lint, .timeout = 120)
{
    const char *lint = "if command -v hadolint >/dev/null; then hadolint '" DOCKERFILE "'; "
                       "elif command -v dockerfilelint >/dev/null; then "
                       "dockerfilelint '" DOCKERFILE "'; else exit 77; fi";
    const char *argv[] = {"/bin/sh", "-c", lint, NULL};
    test_run_result_t r = test_run(argv, NULL, 60000);
    int rc = r.exit_code;
    cr_expect(rc == 0 || rc == 77, "the Dockerfile linter complains (%d): %s%s", rc, r.out, r.err);
    test_run_result_free(&r);
    if (rc == 77)
        cr_skip_test("neither hadolint nor dockerfilelint is installed (npm install -g "
                     "dockerfilelint)");
}
