/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * blksum_internal.h — what blksum's C files share and the public header does not show.
 *
 * Key functions: blksum_fetch_md() (an OpenSSL digest by name, explicitly fetched when the provider
 * has it), blksum_is_null_digest() ("null": time the I/O alone).
 * Caveats: internal to libblksum; OpenSSL 3.0 or newer.
 */
#ifndef NVMELAB_BLKSUM_INTERNAL_H
#define NVMELAB_BLKSUM_INTERNAL_H

#include <openssl/evp.h>
#include <stdbool.h>

#if OPENSSL_VERSION_NUMBER < 0x30000000L
#error "blksum needs OpenSSL 3.0 or newer (EVP_MD_fetch, EVP_MD_get_size)"
#endif

/* The digest by name: *owned is the fetched object to free with EVP_MD_free() (may be NULL). */
const EVP_MD *blksum_fetch_md(const char *name, EVP_MD **owned);
bool blksum_is_null_digest(const char *name);

#endif /* NVMELAB_BLKSUM_INTERNAL_H */
