/*
 * db_digest.c - the digest of an artifact's code (tuning_db.h): what the database records when
 * lntune stores an artifact and what liblntune checks before it loads one. Its own file: both
 * db_records.c (put) and db_open.c (the schema v4 migration) compute it.
 */
#include "tuning_db.h"

#include "sha256.h"

#include <stdio.h>
#include <string.h>

static void digest_part(lntune_sha256 *s, const void *bytes, size_t len) {
    unsigned char le[8];
    for (int i = 0; i < 8; ++i) le[i] = (unsigned char)((uint64_t)len >> (8 * i));
    lntune_sha256_update(s, le, sizeof le);
    if (len) lntune_sha256_update(s, bytes, len);
}

void lntune_artifact_code_digest(const char *source, const void *shared, size_t shared_len,
                                 const void *object, size_t object_len, const char *ptx,
                                 char hex[65]) {
    lntune_sha256 s;
    lntune_sha256_init(&s);
    digest_part(&s, source, source ? strlen(source) : 0);
    digest_part(&s, shared, shared ? shared_len : 0);
    digest_part(&s, object, object ? object_len : 0);
    digest_part(&s, ptx, ptx ? strlen(ptx) : 0);
    lntune_sha256_final_hex(&s, hex);
}

int lntune_artifact_intact(const lntune_artifact *a, char *why, size_t whylen) {
    char digest[LNTUNE_SHA256_HEX];
    lntune_artifact_code_digest(a->source, a->shared, a->shared_len, a->object, a->object_len,
                                a->ptx, digest);
    if (a->code_sha256 && strcmp(digest, a->code_sha256) == 0) return 1;
    snprintf(why, whylen,
             a->code_sha256 ? "its code does not hash to the SHA-256 lntune recorded when it "
                              "stored it (altered since): not loaded"
                            : "it has no recorded SHA-256 of its code: not loaded");
    return 0;
}
