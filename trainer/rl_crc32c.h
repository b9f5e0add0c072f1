// rl_crc32c — CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), the checksum of
// TensorBoard's record framing (REFERENCE.md §6) and of rlctl's own binary state files.
// A plain table-driven implementation; not a general hashing module.
#ifndef RL_CRC32C_H
#define RL_CRC32C_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// CRC-32C of n bytes, continuing from `crc` (0 to start): rl_crc32c(rl_crc32c(0, a), b) equals
// the CRC of a followed by b. rl_crc32c(0, "123456789", 9) == 0xE3069283.
uint32_t rl_crc32c(uint32_t crc, const void *data, size_t n);

// TensorBoard / TFRecord masking: ((crc >> 15) | (crc << 17)) + 0xa282ead8.
uint32_t rl_crc32c_mask(uint32_t crc);

#ifdef __cplusplus
}
#endif
#endif
