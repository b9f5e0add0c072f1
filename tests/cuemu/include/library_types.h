// library_types.h of cuemu (tests/cuemu/): the data types cuBLASLt's layouts name, with CUDA's
// numbers. cuemu's cuBLASLt (cuemu_blaslt.cpp) computes with CUDA_R_16BF and CUDA_R_32F only.
#ifndef CUEMU_LIBRARY_TYPES_H
#define CUEMU_LIBRARY_TYPES_H

enum cudaDataType_t {
    CUDA_R_32F = 0,
    CUDA_R_64F = 1,
    CUDA_R_16F = 2,
    CUDA_R_8I = 3,
    CUDA_R_32I = 10,
    CUDA_R_16BF = 14,
};
typedef enum cudaDataType_t cudaDataType;

#endif
