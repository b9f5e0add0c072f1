# The committed arith data is what cookbook/tasks/arith/make_data.py writes, row by row correct,
# with no prompt in both train and eval.
add_test(NAME cookbook.arith_data
         COMMAND /usr/bin/python3 ${CMAKE_SOURCE_DIR}/cookbook/tasks/arith/make_data.py --check)
set_tests_properties(cookbook.arith_data PROPERTIES TIMEOUT 60 LABELS unit)
