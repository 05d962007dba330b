/*
 * sha256.h - SHA-256 (FIPS 180-4), for the digests the tuning database records of the code it
 * stores: liblntune loads a shared object only when its bytes hash to the recorded digest.
 */
#ifndef LNTUNE_SHA256_H
#define LNTUNE_SHA256_H

#include <stddef.h>
#include <stdint.h>

enum { LNTUNE_SHA256_BYTES = 32, LNTUNE_SHA256_HEX = 65 /* 64 digits and the NUL */ };

typedef struct lntune_sha256 {
    uint32_t state[8];
    uint64_t length; /* bytes hashed so far */
    unsigned char block[64];
    size_t used; /* bytes of block filled */
} lntune_sha256;

void lntune_sha256_init(lntune_sha256 *s);
void lntune_sha256_update(lntune_sha256 *s, const void *data, size_t len);
void lntune_sha256_final(lntune_sha256 *s, unsigned char digest[LNTUNE_SHA256_BYTES]);

/* lntune_sha256_final's digest as 64 lowercase hex digits. */
void lntune_sha256_final_hex(lntune_sha256 *s, char hex[LNTUNE_SHA256_HEX]);

#endif /* LNTUNE_SHA256_H */
