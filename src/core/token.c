/*
 * token.c - API tokens and other secrets (see token.h): random bytes from getrandom(), SHA-256
 * from OpenSSL's libcrypto (already linked by libmongoc for TLS), constant-time comparison.
 */
#include "core/token.h"

#include <errno.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>

#include "core/error.h"

#define TOKEN_RANDOM_BYTES 32
#define TOKEN_BODY_LEN 43 /* base64url of 32 bytes, unpadded */

const char *const cohort_scope_names[COHORT_SCOPE_COUNT] = {"read", "enqueue", "operate", "work",
                                                            "admin"};

static const char base64url[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/* Unpadded base64url of `n` bytes into `out` (room for 4 * ceil(n / 3) + 1). */
static void encode_base64url(const uint8_t *in, size_t n, char *out)
{
    size_t o = 0;
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)in[i] << 16;
        if (i + 1 < n)
            v |= (uint32_t)in[i + 1] << 8;
        if (i + 2 < n)
            v |= in[i + 2];
        size_t chars = n - i >= 3 ? 4 : n - i + 1;
        for (size_t c = 0; c < chars; c++)
            out[o++] = base64url[(v >> (18 - 6 * c)) & 63];
    }
    out[o] = '\0';
}

/* `n` bytes from the kernel's CSPRNG; false with `error` set if it gives none. */
static bool random_bytes(uint8_t *bytes, size_t n, bson_error_t *error)
{
    size_t got = 0;
    while (got < n) {
        ssize_t r = getrandom(bytes + got, n - got, 0);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            bson_set_error(error, COHORT_DOMAIN_SYSTEM, COHORT_CODE_IO,
                           "cannot read random bytes: %s", strerror(errno));
            return false;
        }
        got += (size_t)r;
    }
    return true;
}

bool cohort_secret_hex(char out[COHORT_SECRET_HEX_SIZE], bson_error_t *error)
{
    uint8_t bytes[(COHORT_SECRET_HEX_SIZE - 1) / 2];
    if (!random_bytes(bytes, sizeof bytes, error))
        return false;
    for (size_t i = 0; i < sizeof bytes; i++)
        snprintf(out + 2 * i, 3, "%02x", bytes[i]);
    OPENSSL_cleanse(bytes, sizeof bytes);
    return true;
}

bool cohort_token_generate(char *out, size_t len, bson_error_t *error)
{
    uint8_t bytes[TOKEN_RANDOM_BYTES];
    if (!random_bytes(bytes, sizeof bytes, error))
        return false;
    if (len < COHORT_TOKEN_TEXT_MAX) {
        bson_set_error(error, COHORT_DOMAIN_SYSTEM, COHORT_CODE_INVALID,
                       "token buffer too small");
        return false;
    }
    memcpy(out, COHORT_TOKEN_PREFIX, strlen(COHORT_TOKEN_PREFIX));
    encode_base64url(bytes, sizeof bytes, out + strlen(COHORT_TOKEN_PREFIX));
    OPENSSL_cleanse(bytes, sizeof bytes);
    return true;
}

bool cohort_token_well_formed(const char *text)
{
    size_t prefix = strlen(COHORT_TOKEN_PREFIX);
    if (!text || strncmp(text, COHORT_TOKEN_PREFIX, prefix) != 0)
        return false;
    const char *body = text + prefix;
    return strlen(body) == TOKEN_BODY_LEN && strspn(body, base64url) == TOKEN_BODY_LEN;
}

bool cohort_sha256(const void *data, size_t len, uint8_t digest[32])
{
    unsigned int out_len = 0;
    return EVP_Digest(data, len, digest, &out_len, EVP_sha256(), NULL) == 1 && out_len == 32;
}

bool cohort_token_hash(const char *text, char *hex, size_t len)
{
    uint8_t digest[32];
    if (len < COHORT_TOKEN_HASH_HEX || !cohort_sha256(text, strlen(text), digest))
        return false;
    for (size_t i = 0; i < sizeof digest; i++)
        snprintf(hex + 2 * i, 3, "%02x", digest[i]);
    return true;
}

bool cohort_token_equal(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    return la == lb && CRYPTO_memcmp(a, b, la) == 0;
}

bool cohort_scopes_parse(const char *text, uint32_t *scopes, bson_error_t *error)
{
    *scopes = 0;
    const char *p = text;
    do {
        size_t n = strcspn(p, ",");
        int found = -1;
        for (int i = 0; i < COHORT_SCOPE_COUNT && found < 0; i++)
            if (strlen(cohort_scope_names[i]) == n && strncmp(p, cohort_scope_names[i], n) == 0)
                found = i;
        if (found < 0) {
            bson_set_error(error, COHORT_DOMAIN_USAGE, COHORT_CODE_INVALID,
                           "unknown scope '%.*s' (known: read, enqueue, operate, work, admin)",
                           (int)(n > 64 ? 64 : n), p);
            return false;
        }
        *scopes |= 1u << found;
        p += n;
    } while (*p++ == ',');
    return true;
}

bool cohort_scopes_allow(uint32_t have, uint32_t need)
{
    return (have & COHORT_SCOPE_ADMIN) || (have & need) == need;
}

bool cohort_token_valid_name(const char *name)
{
    static const char allowed[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                                  "0123456789_.-";
    size_t n = strlen(name);
    return n >= 1 && n <= COHORT_TOKEN_NAME_MAX && strspn(name, allowed) == n;
}
