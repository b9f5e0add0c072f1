# Learning is proven by results: short runs of the cookbook recipes must improve their held-out
# metric by more than its measured noise (numbers in tests/test_learning.c's header). A check is
# gain:METRIC:POINTS (METRIC at the last step minus at step 0) or min:METRIC:VALUE.
function(rl_learning name recipe steps)
  rl_add_test(NAME roles.${name} SOURCES test_learning.c LIBS rl_core
              ARGS ${recipe} ${steps} ${ARGN} LABELS learning TIMEOUT 600)
  add_dependencies(test_roles_${name} rlctl)
endfunction()
rl_learning(learning grpo_lora.yaml 30 gain:eval/accuracy:8)
rl_learning(learning_ppo ppo_lora.yaml 20 gain:eval/accuracy:8)
rl_learning(learning_dpo dpo_lora.yaml 250 gain:eval/accuracy:8 min:eval/rewards/accuracies:0.9)
rl_learning(learning_rm rm_full.yaml 300 gain:eval/rm/accuracy:15)
rl_learning(learning_grpo_rm grpo_rm.yaml 30 gain:eval/accuracy:5)
rl_learning(learning_async grpo_lora.yaml 30 set:algorithm.max_staleness=1 gain:eval/accuracy:8)
rl_learning(learning_calc grpo_calc.yaml 20 gain:eval/accuracy:20)
