# The model on a GPU (model/cuda/, librlctl_cuda.so through model/rl_device). model.device runs
# everywhere (label unit): names, and cuda:0 usable or refused with its reason. The `gpu` suites
# need a GPU: without one (no module in this build, no driver, no device) they exit 77, which
# ctest reports as skipped, never as passed (scripts/test.sh counts them apart);
# scripts/gpu_check.sh runs them on a GPU machine.
rl_add_test(NAME model.device SOURCES test_device.c LIBS rl_model rl_core LABELS unit TIMEOUT 60)

# rl_add_gpu_test(NAME ... SOURCES ... [LIBS ...] [TIMEOUT s])
function(rl_add_gpu_test)
  cmake_parse_arguments(G "" "NAME;TIMEOUT" "SOURCES;LIBS" ${ARGN})
  if(NOT G_TIMEOUT)
    set(G_TIMEOUT 300)
  endif()
  rl_add_test(NAME ${G_NAME} SOURCES ${G_SOURCES} LIBS rl_model rl_core ${G_LIBS} LABELS gpu
              TIMEOUT ${G_TIMEOUT})
  set_tests_properties(${G_NAME} PROPERTIES SKIP_RETURN_CODE 77)
  if(RL_CUDA_BUILT)
    string(REPLACE "." "_" exe "test_${G_NAME}")
    add_dependencies(${exe} rlctl_cuda)
  endif()
endfunction()

# the module's core: bf16 conversions, device memory and its errors, the cuBLASLt matmul in every
# transpose against the CPU in double
rl_add_gpu_test(NAME model.cuda_core SOURCES test_cuda_core.c)

# attention (model/cuda/rl_cuda_attn.cu): the packed training forward and backward against
# rl_attention_*_packed (fp32) and the double twins (head_dim 40/64/128/256 and odd ones, GQA and
# not, lengths 1..4096, edges), determinism, the KV cache write, batched decode and prefill
# against rl_attention_decode / rl_attention_prefill, their twins and the training forward's rows
rl_add_gpu_test(NAME model.cuda_attn SOURCES test_cuda_attn.c)
