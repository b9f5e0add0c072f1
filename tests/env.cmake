# env/: the environments of multi-turn rollouts. The calc tool against Python's goldens
# (tests/reference/make_calc_goldens.py).
rl_add_test(NAME env.calc SOURCES test_env_calc.c LIBS rl_env rl_core LABELS unit TIMEOUT 60)
# the tool-call formats (hermes, llama3_json) on the shapes models write and on broken ones
rl_add_test(NAME env.toolcall SOURCES test_env_toolcall.c LIBS rl_env rl_core LABELS unit TIMEOUT 60)
# the environment protocol's requests and checked replies, the built-in calc environment and its
# twin in Python (cookbook/envs/calc_env.py) on the same requests
rl_add_test(NAME env.proto SOURCES test_env_proto.c LIBS rl_env rl_core LABELS unit TIMEOUT 120)
# token-in-token-out turns with the real Qwen3 template and tokenizer (fetched fixtures)
rl_add_test(NAME env.turns SOURCES test_env_turns.c LIBS rl_env rl_text rl_core LABELS unit TIMEOUT 60)
# multi-turn episodes against the built-in calc environment with the real Qwen3 template and a
# scripted policy: masks, turns, limits, a wrong environment
rl_add_test(NAME env.episode SOURCES test_env_episode.c LIBS rl_env rl_text rl_core LABELS unit TIMEOUT 60)
# the environment on a server (env.http) alone, against tests/env_server.py: replies, retried
# 500s, a hang cut at env.timeout, a server that is down, https refused
rl_add_test(NAME env.host SOURCES test_env_host.c LIBS rl_env rl_core LABELS unit TIMEOUT 60)
# `env:` in GRPO runs (the cookbook recipe, short): a one-turn episode = GRPO byte for byte,
# multi-turn masks and returns, env workers, limits, each failure named, on_error drop, the
# built-in calc = its Python twin, an environment over HTTP (tests/env_server.py) = the command's,
# its failures named
rl_add_test(NAME env.run SOURCES test_env_run.c LIBS rl_core LABELS integration TIMEOUT 300)
add_dependencies(test_env_run rlctl)
# an episode's environment tokens get no gradient: every policy loss of GRPO's family, every
# aggregation, KL, TIS and dual clip; perturbing them moves nothing, bit for bit
rl_add_test(NAME env.mask SOURCES test_env_mask.c LIBS rl_trainer rl_core LABELS unit TIMEOUT 60)
# environment plugins (include/rlctl/env.h) for env.run: a right one and one of another ABI
foreach(p once wrong_abi)
  add_library(rl_test_env_${p} MODULE ${CMAKE_SOURCE_DIR}/tests/envs/${p}.c)
  target_include_directories(rl_test_env_${p} PRIVATE ${CMAKE_SOURCE_DIR}/include)
  target_link_libraries(rl_test_env_${p} PRIVATE PkgConfig::JANSSON)
  set_target_properties(rl_test_env_${p} PROPERTIES PREFIX "" SUFFIX ".so" OUTPUT_NAME ${p}
                        LIBRARY_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests/envs)
  add_dependencies(test_env_run rl_test_env_${p})
endforeach()
