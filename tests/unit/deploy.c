/*
 * deploy.c - the operator's files in deploy/ agree with the node they run.
 *
 * - deploy/systemd/cohortd.service: a Type=notify unit starting the installed cohortd, with a
 *   stop timeout longer than the default shutdown_grace_ms; `systemd-analyze verify` accepts it
 *   (where systemd-analyze exists; it needs no running systemd).
 * - MemoryDenyWriteExecute=yes in that unit does not stop cohortd from loading the shipped
 *   handlers: --check-config loads them all under the kernel's equivalent, PR_SET_MDWE (where
 *   the kernel has it), while a handler that asks for an executable stack is refused - which
 *   shows the restriction was really in force.
 * - deploy/kubernetes: the manifests parse as YAML (python3 with PyYAML; skipped without it),
 *   probe the node's /readyz and /healthz on the port its cohort.ini listens on, give it more
 *   time to stop than its shutdown_grace_ms, and take MONGODB_URI from a Secret; cohort.ini
 *   passes the configuration loader.
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
#define IMAGE_HANDLER_DIR "/opt/cohort/lib/cohort/handlers/"

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

/* A configuration from `text` whose handlers are the image's (/opt/cohort/...), read from
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

    const char *stop = unit_value(unit, "TimeoutStopSec");
    char *end;
    long seconds = strtol(stop, &end, 10);
    cr_assert(end != stop && (strcmp(end, "s") == 0 || *end == '\0'),
              "TimeoutStopSec=%s: write it in seconds (e.g. 45s)", stop);
    int64_t grace = default_shutdown_grace_ms();
    cr_expect_gt(seconds * 1000, grace + 5000,
                 "TimeoutStopSec=%s leaves no margin over shutdown_grace_ms=%lld", stop,
                 (long long)grace);
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

    cohort_config_destroy(config);
    free(ini);
    bson_destroy(&kustomization);
    bson_destroy(&deployment);
    bson_destroy(all);
}
