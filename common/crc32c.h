/*
 * crc32c.h - CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), the
 * checksum of every header in the cache and checkpoint files and the hash
 * of a cache's source bytes.  Software, slice-by-8; the same value on every
 * machine.  crc32c("123456789") = 0xE3069283.
 */
#ifndef NCF_CRC32C_H
#define NCF_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/* Continue a CRC: pass 0 to start, the previous result to extend. */
uint32_t ncf_crc32c(uint32_t crc, const void *buf, size_t len);

#endif
