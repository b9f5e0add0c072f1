// rl_crc32c — table-driven CRC-32C, eight bytes per step ("slicing by 8": eight 256-entry tables,
// table k giving the CRC of a byte followed by k zero bytes, so the eight lookups of one step are
// independent). About 5x the speed of the one-table loop, which matters now that every file of a
// checkpoint is checksummed when it is written and again before a resume. The tables are built
// once (pthread_once).
#include "rl_crc32c.h"

#include <pthread.h>

static uint32_t s_table[8][256];
static pthread_once_t s_once = PTHREAD_ONCE_INIT;

static void s_init(void) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) {
            c = (c & 1u) ? (c >> 1) ^ 0x82F63B78u : (c >> 1);
        }
        s_table[0][i] = c;
    }
    for (int k = 1; k < 8; k++) {
        for (uint32_t i = 0; i < 256; i++) {
            uint32_t c = s_table[k - 1][i];
            s_table[k][i] = (c >> 8) ^ s_table[0][c & 0xffu];
        }
    }
}

// little-endian 32-bit load at any alignment, on any host
static uint32_t s_le32(const unsigned char *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

uint32_t rl_crc32c(uint32_t crc, const void *data, size_t n) {
    pthread_once(&s_once, s_init);
    const unsigned char *p = data;
    crc = ~crc;
    for (; n >= 8; n -= 8, p += 8) {
        uint32_t lo = crc ^ s_le32(p), hi = s_le32(p + 4);
        crc = s_table[7][lo & 0xffu] ^ s_table[6][(lo >> 8) & 0xffu] ^
              s_table[5][(lo >> 16) & 0xffu] ^ s_table[4][lo >> 24] ^ s_table[3][hi & 0xffu] ^
              s_table[2][(hi >> 8) & 0xffu] ^ s_table[1][(hi >> 16) & 0xffu] ^
              s_table[0][hi >> 24];
    }
    for (; n > 0; n--, p++) {
        crc = s_table[0][(crc ^ *p) & 0xffu] ^ (crc >> 8);
    }
    return ~crc;
}

uint32_t rl_crc32c_mask(uint32_t crc) {
    return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}
