/*
 * token.h - API tokens: making one, hashing it, its scopes, and comparing hashes.
 *
 * A token is "cht_" followed by 43 base64url characters (32 bytes from getrandom(), the
 * kernel's CSPRNG). It is shown once, when made; the database keeps only its SHA-256 (as 64
 * lowercase hex digits, OpenSSL's EVP), so a leaked database does not leak working tokens.
 * Hashes are compared in constant time. Pure functions apart from the random bytes.
 */
#ifndef COHORT_TOKEN_H
#define COHORT_TOKEN_H

#include <bson/bson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define COHORT_TOKEN_PREFIX "cht_"
#define COHORT_TOKEN_TEXT_MAX 48 /* "cht_" + 43 characters + NUL */
#define COHORT_TOKEN_HASH_HEX 65 /* 64 hex digits + NUL */
#define COHORT_TOKEN_NAME_MAX 64

/* What a token allows, as bits. `admin` allows everything. */
typedef enum cohort_scope {
    COHORT_SCOPE_READ = 1 << 0,    /* GET */
    COHORT_SCOPE_ENQUEUE = 1 << 1, /* create tasks */
    COHORT_SCOPE_OPERATE = 1 << 2, /* pause, resume (retry, cancel, delete: later) */
    COHORT_SCOPE_WORK = 1 << 3,    /* external workers' calls: claims and leases */
    COHORT_SCOPE_ADMIN = 1 << 4,   /* all of the above */
} cohort_scope_t;

/* The scope names, in bit order ("read", "enqueue", "operate", "work", "admin"). */
extern const char *const cohort_scope_names[];
#define COHORT_SCOPE_COUNT 5

/* Makes a new token into `out` (COHORT_TOKEN_TEXT_MAX bytes). False with `error` set if the
 * kernel gives no random bytes. */
bool cohort_token_generate(char *out, size_t len, bson_error_t *error);

/* A secret that grants a right but is not an API token (an external worker's claim, whose
 * lease token is its capability): 128 bits from getrandom() as 32 lowercase hex digits and a
 * NUL. False with `error` set if the kernel gives no random bytes. */
#define COHORT_SECRET_HEX_SIZE 33
bool cohort_secret_hex(char out[COHORT_SECRET_HEX_SIZE], bson_error_t *error);

/* True if `text` has the shape of a token ("cht_" + 43 base64url characters). */
bool cohort_token_well_formed(const char *text);

/* SHA-256 of `text` as 64 lowercase hex digits into `hex` (COHORT_TOKEN_HASH_HEX bytes). */
bool cohort_token_hash(const char *text, char *hex, size_t len);

/* SHA-256 of `data` into `digest` (32 bytes). False only if OpenSSL fails. */
bool cohort_sha256(const void *data, size_t len, uint8_t digest[32]);

/* Whether two NUL-terminated strings are equal, in time that depends only on their lengths. */
bool cohort_token_equal(const char *a, const char *b);

/* Parses "read,enqueue" into bits; false with `error` naming the unknown or empty scope. */
bool cohort_scopes_parse(const char *text, uint32_t *scopes, bson_error_t *error);

/* Whether `have` grants every bit of `need` (admin grants all). */
bool cohort_scopes_allow(uint32_t have, uint32_t need);

/* A token's name: 1-64 of [A-Za-z0-9_.-]. */
bool cohort_token_valid_name(const char *name);

#endif
