# The committed arith data is what cookbook/tasks/arith/make_data.py writes, row by row correct,
# with no prompt in both train and eval.
add_test(NAME cookbook.arith_data
         COMMAND /usr/bin/python3 ${CMAKE_SOURCE_DIR}/cookbook/tasks/arith/make_data.py --check)
set_tests_properties(cookbook.arith_data PROPERTIES TIMEOUT 60 LABELS unit)
# The committed preference pairs (make_pairs.sh) are what they must be: chosen right, rejected
# wrong by the task's rule, prompts of the right split, one pair per prompt.
add_test(NAME cookbook.arith_pairs
         COMMAND /usr/bin/python3 ${CMAKE_SOURCE_DIR}/cookbook/tasks/arith/check_pairs.py)
set_tests_properties(cookbook.arith_pairs PROPERTIES TIMEOUT 60 LABELS unit)
