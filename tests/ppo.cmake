# trainer/rl_ppo: PPO rewards, GAE, whitening, the clipped value loss, the explained variance and
# the adaptive KL controller (and rl_grpo_loss as the PPO policy loss), against hand values,
# finite differences and the PyTorch goldens of tests/reference/make_ppo_goldens.py
# (tests/fixtures/ppo/).
rl_add_test(NAME trainer.ppo SOURCES test_ppo.c LIBS rl_trainer LABELS unit numeric TIMEOUT 60)
