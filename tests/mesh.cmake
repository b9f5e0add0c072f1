# mesh/: the DP×FSDP layout and the single-process collectives (unit), and the MPI collectives
# under mpirun: 4 ranks for dp 2 × fsdp 2 on this machine's cores. What mpirun needs to run as
# root in CI, with more ranks than cores and on one host, is set here, not by whoever runs it:
# --allow-run-as-root, --oversubscribe, ranks that yield when idle, shared memory between ranks.
rl_add_test(NAME mesh.mesh SOURCES test_mesh.c LIBS rl_mesh LABELS unit TIMEOUT 60)
add_executable(test_mesh_coll_mpi test_coll_mpi.c)
target_include_directories(test_mesh_coll_mpi PRIVATE ${RL_TEST_SOURCE_DIR})
target_link_libraries(test_mesh_coll_mpi PRIVATE rl_mesh)
foreach(shape "2;2" "4;1" "1;4")
  list(GET shape 0 dp)
  list(GET shape 1 fsdp)
  math(EXPR np "${dp} * ${fsdp}")
  add_test(NAME mesh.coll_mpi_${dp}x${fsdp}
           COMMAND ${MPIEXEC_EXECUTABLE} --allow-run-as-root --oversubscribe
                   --mca mpi_yield_when_idle 1 --mca btl self,vader -np ${np}
                   $<TARGET_FILE:test_mesh_coll_mpi> ${dp} ${fsdp})
  set_tests_properties(mesh.coll_mpi_${dp}x${fsdp} PROPERTIES TIMEOUT 120 LABELS integration)
endforeach()

# The sharded training step against the 1×1 one: SFT, GRPO and PPO's critic, full and LoRA, on
# dp 2 × fsdp 1, dp 1 × fsdp 2 and dp 2 × fsdp 2 (tests/fsdp_check.sh runs and compares them).
add_executable(test_fsdp test_fsdp.c)
target_include_directories(test_fsdp PRIVATE ${RL_TEST_SOURCE_DIR})
target_compile_definitions(test_fsdp PRIVATE RL_SOURCE_DIR="${CMAKE_SOURCE_DIR}")
target_link_libraries(test_fsdp PRIVATE rl_algorithms rl_serving)
add_test(NAME mesh.fsdp
         COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/fsdp_check.sh $<TARGET_FILE:test_fsdp>
                 ${MPIEXEC_EXECUTABLE} ${CMAKE_CURRENT_BINARY_DIR}/fsdp)
set_tests_properties(mesh.fsdp PROPERTIES TIMEOUT 600 LABELS numeric)

# `rlctl run` on a mesh against 1×1 (SFT, GRPO, PPO, DPO; full and LoRA), checkpoints resharded
# both ways, a rank killed mid-run, impossible meshes refused (tests/test_mesh_run.c).
rl_add_test(NAME mesh.run SOURCES test_mesh_run.c LIBS rl_core LABELS integration TIMEOUT 900)
add_dependencies(test_mesh_run rlctl)
