# trainer/: optimizer, losses, data, checkpoints, metrics, the SFT loop.
rl_add_test(NAME trainer.optim SOURCES test_optim.c LIBS rl_trainer LABELS unit numeric TIMEOUT 60)
rl_add_test(NAME trainer.loss_sft SOURCES test_loss_sft.c LIBS rl_trainer LABELS unit numeric TIMEOUT 60)
rl_add_test(NAME trainer.data SOURCES test_data.c LIBS rl_trainer LABELS unit TIMEOUT 60)
rl_add_test(NAME trainer.metrics SOURCES test_metrics.c LIBS rl_trainer LABELS unit TIMEOUT 60)
rl_add_test(NAME trainer.checkpoint SOURCES test_checkpoint.c LIBS rl_trainer LABELS unit TIMEOUT 60)
