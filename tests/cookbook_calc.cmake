# The committed calc SFT data is what cookbook/tasks/calc/make_data.py writes, every turn right,
# from arith's train questions only, and its text is what `rlctl template` renders with the calc
# model's own chat template.
add_test(NAME cookbook.calc_data
         COMMAND /usr/bin/python3 ${CMAKE_SOURCE_DIR}/cookbook/tasks/calc/make_data.py --check
                 --rlctl $<TARGET_FILE:rlctl>)
set_tests_properties(cookbook.calc_data PROPERTIES TIMEOUT 60 LABELS unit)
# One step of cookbook/grpo_calc.yaml: every episode's tokens are its whole conversation rendered
# by the calc template and tokenized (the template is prefix-stable), with tool calls among them.
add_test(NAME cookbook.calc_episodes
         COMMAND /usr/bin/python3 ${CMAKE_SOURCE_DIR}/cookbook/tasks/calc/check_episodes.py
                 --rlctl $<TARGET_FILE:rlctl>)
set_tests_properties(cookbook.calc_episodes PROPERTIES TIMEOUT 300 LABELS integration)
