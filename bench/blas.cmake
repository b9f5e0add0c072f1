# bench_blas: the ceilings (sgemm on the model's shapes, sgemv, memcpy) measured in the same run.
add_executable(bench_blas ${CMAKE_CURRENT_SOURCE_DIR}/bench_blas.c)
target_link_libraries(bench_blas PRIVATE PkgConfig::OPENBLAS)
