// cuda_bf16.h of cuemu (tests/cuemu/): the bfloat16 type and the conversions model/cuda uses,
// with the GPU's rounding: fp32 -> bf16 to nearest even (subnormals kept), any NaN to the
// canonical 0x7fff, as cvt.rn.bf16.f32 and the toolkit's host code do; bf16 -> fp32 exact.
// No bf16 arithmetic: code that needs it fails to compile here, loudly.
#ifndef CUEMU_CUDA_BF16_H
#define CUEMU_CUDA_BF16_H

#include "cuda_runtime.h"

#include <stdint.h>
#include <string.h>

inline unsigned short cuemu_bf16_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) {
        return 0x7fffu;
    }
    uint32_t rest = u << 16, r = u >> 16;
    if (rest > 0x80000000u || (rest == 0x80000000u && (r & 1u))) {
        r++;
    }
    return (unsigned short)r;
}

struct __nv_bfloat16 {
    unsigned short __x;
    __nv_bfloat16() = default;
    __nv_bfloat16(float f) : __x(cuemu_bf16_bits(f)) {}
    operator float() const {
        uint32_t u = (uint32_t)__x << 16;
        float f;
        memcpy(&f, &u, 4);
        return f;
    }
};

inline __nv_bfloat16 __float2bfloat16_rn(float f) {
    return __nv_bfloat16(f);
}

inline __nv_bfloat16 __float2bfloat16(float f) {
    return __nv_bfloat16(f);
}

inline float __bfloat162float(__nv_bfloat16 b) {
    return (float)b;
}

#endif
