# run/: `rlctl run` of GRPO end to end (controller + actor, sampler and reward workers), with
# the reward test plugins for the failure cases.
rl_add_test(NAME roles.grpo_run SOURCES test_grpo_run.c LIBS rl_rollout rl_core
            LABELS integration TIMEOUT 600)
target_compile_definitions(test_roles_grpo_run PRIVATE
  RL_TEST_PLUGIN_DIR="$<TARGET_FILE_DIR:rl_test_plugin_ok>")
add_dependencies(test_roles_grpo_run rlctl ${rl_plugin_targets})
# one sampler worker process driven from a raw ZeroMQ ROUTER with the role protocol
rl_add_test(NAME roles.worker SOURCES test_worker.c LIBS rl_algorithms rl_serving LABELS integration TIMEOUT 120)
add_dependencies(test_roles_worker rlctl)
# GRPO runs under faults (docs/reliability.md): intruders on the control socket, garbage from a
# sampler, a failing store or final/, branches and a corrupt checkpoint, SIGTERM while a reward
# hangs; each compared with an undisturbed run
rl_add_test(NAME roles.grpo_faults SOURCES test_grpo_faults.c LIBS rl_algorithms rl_serving
            LABELS integration TIMEOUT 900)
target_compile_definitions(test_roles_grpo_faults PRIVATE
  RL_TEST_PLUGIN_DIR="$<TARGET_FILE_DIR:rl_test_plugin_ok>")
add_dependencies(test_roles_grpo_faults rlctl ${rl_plugin_targets})
# the controller's request/reply group against fake workers (the suite spawns itself as their
# worker process, serving fake roles through the real worker loop): calls, overlapping posts,
# one failure in call_each, a timeout, a worker exiting mid-request, an unknown role, destroy
rl_add_test(NAME roles.group SOURCES test_group.c LIBS rl_algorithms rl_serving LABELS unit TIMEOUT 120)
# CURVE key files and the authenticated tcp:// chan of remote samplers (allowlist, refusals,
# rebind on a removed key)
rl_add_test(NAME roles.curve SOURCES test_curve.c LIBS rl_algorithms rl_serving LABELS unit TIMEOUT 60)
# remote samplers end to end: two `rlctl sampler serve` in a network namespace (loopback when
# none can be made) match two local samplers; the refusals; a sampler killed mid-run
rl_add_test(NAME roles.remote SOURCES test_remote.c LIBS rl_algorithms rl_serving LABELS integration
            TIMEOUT 600)
add_dependencies(test_roles_remote rlctl)
# asynchronous GRPO rollouts (algorithm.max_staleness 1 and 2): the bound in every stored
# trajectory, the metrics, and an exact resume from a checkpoint
rl_add_test(NAME roles.async SOURCES test_async.c LIBS rl_rollout rl_core LABELS integration
            TIMEOUT 600)
add_dependencies(test_roles_async rlctl)
# the OpenAI-compatible endpoint of `rlctl serve`, from outside: urllib (standard library) and
# curl; logprobs equal `rlctl logprobs`
add_test(NAME roles.http COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/http_check.py
         $<TARGET_FILE:rlctl> ${CMAKE_SOURCE_DIR})
set_tests_properties(roles.http PROPERTIES TIMEOUT 300 LABELS integration)
# POST /v1/chat/completions with the official OpenAI Node client (fetched by
# tests/reference/fetch_openai.sh): content, token ids and logprobs equal /v1/completions of the
# chatml-rendered prompt; streaming (deltas add up to the message; a client leaving at the first
# delta stops the generation); ignore_eos; n with a seed; tools; refusals naming the field
add_test(NAME roles.http_chat COMMAND node ${CMAKE_CURRENT_SOURCE_DIR}/chat_check.mjs
         $<TARGET_FILE:rlctl> ${CMAKE_SOURCE_DIR})
set_tests_properties(roles.http_chat PROPERTIES TIMEOUT 120 LABELS integration)
# the spread of a step's prompts over the samplers (roles.balance: even, speed)
rl_add_test(NAME roles.split SOURCES test_split.c LIBS rl_algorithms rl_serving LABELS unit TIMEOUT 60)
# rl_http_complete without HTTP: a reply never leaves a value out (a NaN model: 500; an
# overflowing temperature: 400), the work cap, the cancel callback; rl_http_chat's stream
rl_add_test(NAME roles.http_complete SOURCES test_http.c LIBS rl_algorithms rl_serving LABELS unit TIMEOUT 60)
# the endpoint's limits from outside, each client an address of its own on loopback: Slowloris
# (per-client connections, the head and body deadlines), generation off the I/O thread, the
# queue and its 429s, a client that leaves mid-generation, the work cap
add_test(NAME roles.http_limits COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/http_limits.py
         $<TARGET_FILE:rlctl> ${CMAKE_SOURCE_DIR})
set_tests_properties(roles.http_limits PROPERTIES TIMEOUT 120 LABELS integration)
