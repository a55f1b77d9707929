/*
 * suggest.c - "did you mean ...?" for a configuration key that is not a setting: the fixed
 * key of the section nearest to it by edit distance, if it is near enough to be a typo.
 *
 * Near enough: at most two single-character edits (insertion, deletion, substitution or a
 * swap of neighbours), and fewer than half the key's length, so that short handler options
 * ("ttl", "url") are not mistaken for misspelt settings.
 */
#include "core/settings.h"

#include <string.h>

#define SUGGEST_MAX_DISTANCE 2
#define SUGGEST_MAX_KEY 64 /* longer keys are no typo of a setting name */

/* The optimal string alignment distance between a and b (both at most SUGGEST_MAX_KEY long):
 * edits as above, a swap of two neighbours counting one. */
static size_t edit_distance(const char *a, const char *b)
{
    size_t n = strlen(a), m = strlen(b);
    size_t d[SUGGEST_MAX_KEY + 1][SUGGEST_MAX_KEY + 1];
    for (size_t i = 0; i <= n; i++)
        d[i][0] = i;
    for (size_t j = 0; j <= m; j++)
        d[0][j] = j;
    for (size_t i = 1; i <= n; i++) {
        for (size_t j = 1; j <= m; j++) {
            size_t cost = a[i - 1] != b[j - 1];
            size_t best = d[i - 1][j - 1] + cost;
            if (d[i - 1][j] + 1 < best)
                best = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < best)
                best = d[i][j - 1] + 1;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
                d[i - 2][j - 2] + 1 < best)
                best = d[i - 2][j - 2] + 1;
            d[i][j] = best;
        }
    }
    return d[n][m];
}

const char *cohort_settings_did_you_mean(cohort_setting_section_t section, const char *key)
{
    size_t len = strlen(key);
    if (len == 0 || len > SUGGEST_MAX_KEY)
        return NULL;
    const char *best = NULL;
    size_t best_distance = SUGGEST_MAX_DISTANCE + 1;
    for (const cohort_setting_t *r = cohort_settings_table; r->name; r++) {
        if (r->section != section || r->pattern || strlen(r->name) > SUGGEST_MAX_KEY)
            continue;
        size_t distance = edit_distance(key, r->name);
        if (distance > 0 && distance < best_distance && 2 * distance < len) {
            best = r->name;
            best_distance = distance;
        }
    }
    return best;
}
