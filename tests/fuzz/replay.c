/*
 * replay.c - main() for the fuzz targets in builds without libFuzzer: runs every file named
 * on the command line (directories: every file in them) through LLVMFuzzerTestOneInput()
 * once, so the committed corpus and every past crash (tests/fuzz/regressions/) are replayed
 * by ctest in the ordinary and the sanitizer builds. Exits non-zero if a file cannot be
 * read; a crash is a crash.
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int replay_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        perror(path);
        return 1;
    }
    uint8_t *data = NULL;
    size_t size = 0, cap = 0;
    for (;;) {
        if (size == cap) {
            cap = cap ? 2 * cap : 4096;
            uint8_t *grown = realloc(data, cap);
            if (!grown) {
                free(data);
                fclose(f);
                fprintf(stderr, "%s: out of memory\n", path);
                return 1;
            }
            data = grown;
        }
        size_t got = fread(data + size, 1, cap - size, f);
        if (got == 0)
            break;
        size += got;
    }
    int failed = ferror(f);
    fclose(f);
    if (failed) {
        fprintf(stderr, "%s: read error\n", path);
        free(data);
        return 1;
    }
    LLVMFuzzerTestOneInput(data, size);
    free(data);
    return 0;
}

static int compare_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Every regular file of `dir`, in name order so runs are repeatable. */
static int replay_dir(const char *dir, int *count)
{
    DIR *d = opendir(dir);
    if (!d) {
        perror(dir);
        return 1;
    }
    char **names = NULL;
    size_t n = 0;
    struct dirent *e;
    int problems = 0;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        char **grown = realloc(names, (n + 1) * sizeof *names);
        char *path = NULL;
        if (!grown || asprintf(&path, "%s/%s", dir, e->d_name) < 0) {
            free(grown ? grown : names);
            closedir(d);
            fprintf(stderr, "%s: out of memory\n", dir);
            return 1;
        }
        names = grown;
        names[n++] = path;
    }
    closedir(d);
    if (n > 0)
        qsort(names, n, sizeof *names, compare_names);
    for (size_t i = 0; i < n; i++) {
        struct stat st;
        if (stat(names[i], &st) == 0 && S_ISREG(st.st_mode)) {
            problems += replay_file(names[i]);
            (*count)++;
        }
        free(names[i]);
    }
    free(names);
    return problems;
}

int main(int argc, char **argv)
{
    LLVMFuzzerInitialize(&argc, &argv);
    int problems = 0, count = 0;
    for (int i = 1; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st) != 0) {
            perror(argv[i]);
            problems++;
        } else if (S_ISDIR(st.st_mode)) {
            problems += replay_dir(argv[i], &count);
        } else {
            problems += replay_file(argv[i]);
            count++;
        }
    }
    printf("replayed %d input(s), %d problem(s)\n", count, problems);
    return problems ? 1 : 0;
}
