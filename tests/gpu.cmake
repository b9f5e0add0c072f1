# The model on a GPU (model/cuda/, librlctl_cuda.so through model/rl_device). model.device runs
# everywhere (label unit): names, and cuda:0 usable or refused with its reason. The `gpu` suites
# need a GPU: without one (no module in this build, no driver, no device) they exit 77, which
# ctest reports as skipped, never as passed (scripts/test.sh counts them apart);
# scripts/gpu_check.sh runs them on a GPU machine. Each also runs as <name>.emu against the
# module emulated on the CPU (tests/cuemu/), where the build has it.
rl_add_test(NAME model.device SOURCES test_device.c LIBS rl_model rl_core LABELS unit TIMEOUT 60)
# ... and once more against the emulated module, where cuda:0 is usable: the checks of a usable
# device (its properties, a refusal for too little free memory) run in every build
if(RL_CUEMU_BUILT)
  add_dependencies(test_model_device rlctl_cuda_emu)
  add_test(NAME model.device.emu COMMAND test_model_device)
  set_tests_properties(model.device.emu PROPERTIES TIMEOUT 60 LABELS unit
                       ENVIRONMENT "RLCTL_CUDA_MODULE=${RL_CUEMU_MODULE}")
endif()

# rl_add_gpu_test(NAME ... SOURCES ... [LIBS ...] [TIMEOUT s] [EMU_TIMEOUT s])
# Registers the suite (label gpu) and, where this build has the CUDA module emulated on the CPU
# (tests/cuemu/, librlctl_cuda_emu.so), its twin <NAME>.emu: the same executable with
# RLCTL_CUDA_MODULE pointing at the emulation, label numeric. The twin never skips: exit 77
# (no usable module) is a failure there. It shows the host logic, indexing, barriers and exact
# arithmetic right on every build; it never stands in for the GPU run (docs/gpu.md).
function(rl_add_gpu_test)
  cmake_parse_arguments(G "" "NAME;TIMEOUT;EMU_TIMEOUT" "SOURCES;LIBS" ${ARGN})
  if(NOT G_TIMEOUT)
    set(G_TIMEOUT 300)
  endif()
  if(NOT G_EMU_TIMEOUT)
    set(G_EMU_TIMEOUT 300)
  endif()
  rl_add_test(NAME ${G_NAME} SOURCES ${G_SOURCES} LIBS rl_model rl_core ${G_LIBS} LABELS gpu
              TIMEOUT ${G_TIMEOUT})
  set_tests_properties(${G_NAME} PROPERTIES SKIP_RETURN_CODE 77)
  string(REPLACE "." "_" exe "test_${G_NAME}")
  if(RL_CUDA_BUILT)
    add_dependencies(${exe} rlctl_cuda)
  endif()
  if(RL_CUEMU_BUILT)
    add_dependencies(${exe} rlctl_cuda_emu)
    add_test(NAME ${G_NAME}.emu COMMAND ${exe})
    # NCCL emulated between processes too (tests/cuemu/cuemu_nccl.cpp)
    set_tests_properties(${G_NAME}.emu PROPERTIES TIMEOUT ${G_EMU_TIMEOUT} LABELS numeric
                         ENVIRONMENT "RLCTL_CUDA_MODULE=${RL_CUEMU_MODULE};RLCTL_NCCL_LIBRARY=${RL_CUEMU_NCCL}")
  endif()
endfunction()

# the module's core: bf16 conversions, device memory and its errors, the cuBLASLt matmul in every
# transpose against the CPU in double
rl_add_gpu_test(NAME model.cuda_core SOURCES test_cuda_core.c)

# the vocabulary head and the sampler's draw (model/cuda/rl_cuda_head.cu): the chunked logprob
# head forward/backward against rl_logprob_*_ref and the CPU fp32 head (same bf16 h and w), full
# logits, sampling (every draw against a host model, chi-square against rollout/rl_sample.c's
# distribution, exclusion, greedy ties, reproducibility); host-side checks run everywhere first
rl_add_gpu_test(NAME model.cuda_head SOURCES test_cuda_head.c LIBS rl_rollout)

# the element-wise and small kernels (rl_cuda_elt.cu): embedding (+ backward and its plan),
# RMSNorm (+ per head), RoPE, SwiGLU, residual, dropout, AdamW, the clip's sum of squares and
# scale, the scalar head; against the CPU kernels (bit for bit where the CPU's arithmetic is a
# fixed sequence of IEEE operations) and double sums, fp32 and bf16 outputs, = and +=
rl_add_gpu_test(NAME model.cuda_elt SOURCES test_cuda_elt.c LIBS rl_trainer)

# attention (model/cuda/rl_cuda_attn.cu): the packed training forward and backward against
# rl_attention_*_packed (fp32) and the double twins (head_dim 40/64/128/256 and odd ones, GQA and
# not, lengths 1..4096, edges), determinism, the KV cache write, batched decode and prefill
# against rl_attention_decode / rl_attention_prefill, their twins and the training forward's rows
rl_add_gpu_test(NAME model.cuda_attn SOURCES test_cuda_attn.c)

# the device model (model/rl_model_cuda.c, rl_model_t with opts.device a GPU) against the CPU
# model on the same bf16-valued weights: llama, qwen2, qwen3, tied and untied, GQA and not, tune
# NONE / LORA (dropout, recompute) / FULL; logp, entropy, hidden and every gradient from dlogp and
# from dhidden within bf16 tolerances, determinism, the clip and AdamW on the device against
# rl_optim (the same bits), the cached step (KV cache on the device: prefill and decode logits
# against the CPU's step, decode = prefill, slot copies), a BF16 folder loaded on the device,
# refusals
rl_add_gpu_test(NAME model.cuda_model SOURCES test_cuda_model.c LIBS rl_trainer rl_rollout
                EMU_TIMEOUT 600)

# whole runs with model.device: cuda (issue 31): SFT and DPO losses against the CPU run's, PPO
# with the critic, GRPO's exact resume on the device and its adapter evaluated on the CPU, the
# out-of-memory stop, roles.devices over two emulated devices
rl_add_gpu_test(NAME roles.gpu_run SOURCES test_gpu_run.c LIBS rl_core TIMEOUT 600 EMU_TIMEOUT 600)
add_dependencies(test_roles_gpu_run rlctl)

# the device memory plan (rl_model_device_plan, rlctl plan): byte counts computed by hand for two
# models, the device's allocations equal to the plan, rlctl plan and the refusal of a run that
# does not fit (a small emulated device)
rl_add_gpu_test(NAME model.device_plan SOURCES test_plan.c LIBS rl_core)
add_dependencies(test_model_device_plan rlctl)

# a mesh whose ranks are on GPUs (each rank the whole model on its device; gradients and optimizer
# state split over the mesh through host memory): GRPO, PPO and SFT on two ranks sharing cuda:0
# against 1×1, a checkpoint resharded, the refusals, and (emulated) a rank per device, through
# host memory and with NCCL (emulated: the gradients summed on the devices, AdamW there)
rl_add_gpu_test(NAME mesh.gpu SOURCES test_mesh_gpu.c LIBS rl_core TIMEOUT 600 EMU_TIMEOUT 600)
add_dependencies(test_mesh_gpu rlctl)
