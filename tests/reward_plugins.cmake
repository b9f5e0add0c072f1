# Reward plugins and the loader's suite. tests/plugins/*.c are real plugins, one per way a
# plugin can be right or broken; cookbook/plugins/format_bonus.c is the example of
# docs/rewards.md, built twice: as a MODULE with the project's flags (warnings, -Werror in CI,
# -fvisibility=hidden from CMAKE_C_VISIBILITY_PRESET) and with the exact build line the docs give.
# No plugin links an rlctl library: on Linux -z defs proves they need no symbol of ours (not
# under sanitizers, whose runtimes resolve at load time).
set(rl_test_plugins ok wrong_abi no_symbol null_table short_table null_callback create_error
    score_error crash hang nan spawn_hang slow_create)
set(rl_plugin_dir ${CMAKE_BINARY_DIR}/tests/plugins)
set(rl_plugin_targets "")

function(rl_add_reward_plugin target src out_name)
  add_library(${target} MODULE ${src})
  target_include_directories(${target} PRIVATE ${CMAKE_SOURCE_DIR}/include)
  set_target_properties(${target} PROPERTIES PREFIX "" SUFFIX ".so" OUTPUT_NAME ${out_name}
                        LIBRARY_OUTPUT_DIRECTORY ${rl_plugin_dir})
  if(CMAKE_SYSTEM_NAME STREQUAL "Linux" AND NOT RL_SANITIZE AND NOT RL_FUZZ)
    target_link_options(${target} PRIVATE -Wl,-z,defs)
  endif()
endfunction()

foreach(p ${rl_test_plugins})
  rl_add_reward_plugin(rl_test_plugin_${p} ${CMAKE_SOURCE_DIR}/tests/plugins/${p}.c ${p})
  list(APPEND rl_plugin_targets rl_test_plugin_${p})
endforeach()
rl_add_reward_plugin(rl_cookbook_format_bonus ${CMAKE_SOURCE_DIR}/cookbook/plugins/format_bonus.c
                     format_bonus)

# a text file with a plugin's name: dlopen must refuse it
set(rl_not_a_plugin ${rl_plugin_dir}/not_a_plugin.so)
file(WRITE ${rl_not_a_plugin} "This is a text file, not a shared object.\n")

# the documented build line, run from the source root as the docs say; only the output moves
# into the build tree
set(rl_format_bonus_cc ${CMAKE_BINARY_DIR}/cookbook/plugins/format_bonus.so)
add_custom_command(
  OUTPUT ${rl_format_bonus_cc}
  COMMAND ${CMAKE_COMMAND} -E make_directory ${CMAKE_BINARY_DIR}/cookbook/plugins
  COMMAND ${CMAKE_C_COMPILER} -shared -fPIC -O2 -I include -o ${rl_format_bonus_cc}
          cookbook/plugins/format_bonus.c
  WORKING_DIRECTORY ${CMAKE_SOURCE_DIR}
  DEPENDS ${CMAKE_SOURCE_DIR}/cookbook/plugins/format_bonus.c
          ${CMAKE_SOURCE_DIR}/include/rlctl/reward.h
  COMMENT "cookbook/plugins/format_bonus.so with the build line of docs/rewards.md"
  VERBATIM)
add_custom_target(rl_cookbook_format_bonus_cc ALL DEPENDS ${rl_format_bonus_cc})

rl_add_test(NAME rewards.reward SOURCES test_reward.c LIBS rl_rewards LABELS unit TIMEOUT 60)
target_compile_definitions(test_rewards_reward PRIVATE
  RL_TEST_PLUGIN_DIR="$<TARGET_FILE_DIR:rl_test_plugin_ok>"
  RL_TEST_NOT_A_PLUGIN="${rl_not_a_plugin}"
  RL_EXAMPLE_PLUGIN="$<TARGET_FILE:rl_cookbook_format_bonus>"
  RL_EXAMPLE_PLUGIN_CC="${rl_format_bonus_cc}")
add_dependencies(test_rewards_reward ${rl_plugin_targets} rl_cookbook_format_bonus
                 rl_cookbook_format_bonus_cc)
