# cuemu: the CUDA module built for the CPU (tests/cuemu/, docs/gpu.md). The same model/cuda
# sources, rewritten at build time by cuemu_transform.py (the launch syntax, extern __shared__)
# and compiled by the C++ compiler against cuemu's own cuda_runtime.h, cuda_bf16.h and
# cublasLt.h, into librlctl_cuda_emu.so beside rlctl: the same rl_cuda_module table, with
# every CUDA thread a fiber on the CPU. No CUDA toolkit needed. Tests point rl_device at it with
# RLCTL_CUDA_MODULE (tests/gpu.cmake registers each gpu suite a second time, as <name>.emu).
# Needs a C++17 compiler (g++ or clang++) and python3; not in sanitizer or fuzz builds (its
# threads switch stacks under the sanitizers' feet). -DRLCTL_CUEMU=OFF turns it off.
option(RLCTL_CUEMU "Build librlctl_cuda_emu.so, the CUDA module emulated on the CPU (tests)" ON)
set(RL_CUEMU_BUILT OFF)
set(RL_CUEMU_MODULE ${CMAKE_BINARY_DIR}/librlctl_cuda_emu.so)
set(RL_CUEMU_NCCL ${CMAKE_BINARY_DIR}/libnccl_cuemu.so)
if(RLCTL_CUEMU AND NOT RL_SANITIZE AND NOT RL_FUZZ)
  include(CheckLanguage)
  check_language(CXX)
  find_package(Python3 COMPONENTS Interpreter)
  if(CMAKE_CXX_COMPILER AND Python3_Interpreter_FOUND)
    enable_language(CXX)
  endif()
  if(CMAKE_CXX_COMPILER AND Python3_Interpreter_FOUND
     AND CMAKE_CXX_COMPILER_ID MATCHES "^(GNU|Clang)$")
    set(dir ${CMAKE_SOURCE_DIR}/tests/cuemu)
    set(gen ${CMAKE_BINARY_DIR}/cuemu)
    file(GLOB cu_srcs CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/model/cuda/*.cu)
    file(GLOB cu_hdrs CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/model/cuda/*.cuh)
    set(gen_hdrs "")
    foreach(f ${cu_hdrs})
      get_filename_component(n ${f} NAME)
      add_custom_command(OUTPUT ${gen}/${n}
                         COMMAND Python3::Interpreter ${dir}/cuemu_transform.py ${f} ${gen}/${n}
                         DEPENDS ${f} ${dir}/cuemu_transform.py COMMENT "cuemu: ${n}" VERBATIM)
      list(APPEND gen_hdrs ${gen}/${n})
    endforeach()
    set(gen_srcs "")
    foreach(f ${cu_srcs})
      get_filename_component(n ${f} NAME)
      add_custom_command(OUTPUT ${gen}/${n}.cpp
                         COMMAND Python3::Interpreter ${dir}/cuemu_transform.py ${f}
                                 ${gen}/${n}.cpp
                         DEPENDS ${f} ${dir}/cuemu_transform.py ${gen_hdrs}
                         COMMENT "cuemu: ${n}" VERBATIM)
      list(APPEND gen_srcs ${gen}/${n}.cpp)
    endforeach()
    file(MAKE_DIRECTORY ${gen})
    add_library(rlctl_cuda_emu MODULE ${gen_srcs} ${gen_hdrs} ${dir}/cuemu_block.cpp
                ${dir}/cuemu_fiber.cpp ${dir}/cuemu_runtime.cpp ${dir}/cuemu_blaslt.cpp)
    # the generated copies first (a .cu's "x.cuh" is the rewritten one beside it), then the
    # shim headers, then model/cuda's own .h files
    target_include_directories(rlctl_cuda_emu BEFORE PRIVATE ${gen} ${dir}/include
                               ${CMAKE_SOURCE_DIR}/model/cuda)
    set_target_properties(rlctl_cuda_emu PROPERTIES CXX_STANDARD 17 CXX_STANDARD_REQUIRED ON
                          CXX_EXTENSIONS OFF CXX_VISIBILITY_PRESET hidden
                          VISIBILITY_INLINES_HIDDEN ON LIBRARY_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR})
    # no contraction: __fmul_rn and friends are single IEEE operations, and so is every a * b
    # + c of the kernels (nvcc may fuse the latter: the tests' tolerances cover it)
    target_compile_options(rlctl_cuda_emu PRIVATE -ffp-contract=off -Wall -Wextra -Wshadow)
    if(RL_WERROR)
      target_compile_options(rlctl_cuda_emu PRIVATE -Werror)
    endif()
    target_link_libraries(rlctl_cuda_emu PRIVATE Threads::Threads)
    # NCCL's entries the module opens, emulated between processes (RLCTL_NCCL_LIBRARY)
    add_library(nccl_cuemu MODULE ${dir}/cuemu_nccl.cpp)
    set_target_properties(nccl_cuemu PROPERTIES CXX_STANDARD 17 CXX_STANDARD_REQUIRED ON
                          CXX_EXTENSIONS OFF CXX_VISIBILITY_PRESET hidden
                          LIBRARY_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR})
    target_compile_options(nccl_cuemu PRIVATE -Wall -Wextra -Wshadow)
    if(RL_WERROR)
      target_compile_options(nccl_cuemu PRIVATE -Werror)
    endif()
    add_dependencies(rlctl_cuda_emu nccl_cuemu)
    set(RL_CUEMU_BUILT ON)
    message(STATUS "rlctl: building librlctl_cuda_emu.so, the CUDA module emulated on the CPU "
                   "(${CMAKE_CXX_COMPILER_ID} ${CMAKE_CXX_COMPILER_VERSION}): gpu suites run "
                   "again as <name>.emu")
  else()
    message(STATUS "rlctl: no C++ compiler (g++ or clang++) or python3: librlctl_cuda_emu.so "
                   "is not built, and the gpu suites have no .emu twins")
  endif()
elseif(NOT RLCTL_CUEMU)
  message(STATUS "rlctl: -DRLCTL_CUEMU=OFF: librlctl_cuda_emu.so is not built")
else()
  message(STATUS "rlctl: sanitizer or fuzz build: librlctl_cuda_emu.so is not built")
endif()
