# trainer/: optimizer, losses, data, checkpoints, metrics, the SFT loop.
rl_add_test(NAME trainer.optim SOURCES test_optim.c LIBS rl_trainer LABELS unit numeric TIMEOUT 60)
