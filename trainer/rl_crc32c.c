// rl_crc32c — table-driven CRC-32C, one byte per step. The table is built on first use; the
// build is idempotent, so a race between two threads only writes the same values twice.
#include "rl_crc32c.h"

static uint32_t s_table[256];
static volatile int s_ready = 0;

static void s_init(void) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) {
            c = (c & 1u) ? (c >> 1) ^ 0x82F63B78u : (c >> 1);
        }
        s_table[i] = c;
    }
    s_ready = 1;
}

uint32_t rl_crc32c(uint32_t crc, const void *data, size_t n) {
    if (!s_ready) {
        s_init();
    }
    const unsigned char *p = data;
    crc = ~crc;
    for (size_t i = 0; i < n; i++) {
        crc = s_table[(crc ^ p[i]) & 0xffu] ^ (crc >> 8);
    }
    return ~crc;
}

uint32_t rl_crc32c_mask(uint32_t crc) {
    return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}
