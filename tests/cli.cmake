# the rlctl front door: --version, --help, every command's --help
rl_add_test(NAME cli.help SOURCES test_cli.c LABELS unit TIMEOUT 180)
add_dependencies(test_cli_help rlctl)
# rlctl devices: the CPU and why there is no GPU; the devices of the emulated CUDA module
rl_add_test(NAME cli.devices SOURCES test_devices.c LIBS rl_core m LABELS unit TIMEOUT 120)
add_dependencies(test_cli_devices rlctl)
if(RL_CUEMU_BUILT)
  add_dependencies(test_cli_devices rlctl_cuda_emu)
  target_compile_definitions(test_cli_devices PRIVATE RL_CUEMU_MODULE="${RL_CUEMU_MODULE}"
                             RL_CUEMU_NCCL="${RL_CUEMU_NCCL}")
endif()
