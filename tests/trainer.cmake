# trainer/: optimizer, losses, data, checkpoints, metrics, the SFT loop.
rl_add_test(NAME trainer.optim SOURCES test_optim.c LIBS rl_trainer LABELS unit numeric
            TIMEOUT 60)
rl_add_test(NAME trainer.loss_sft SOURCES test_loss_sft.c LIBS rl_trainer LABELS unit numeric
            TIMEOUT 60)
rl_add_test(NAME trainer.data SOURCES test_data.c LIBS rl_trainer LABELS unit TIMEOUT 60)
rl_add_test(NAME trainer.metrics SOURCES test_metrics.c LIBS rl_trainer LABELS unit TIMEOUT 60)
rl_add_test(NAME trainer.checkpoint SOURCES test_checkpoint.c LIBS rl_trainer LABELS unit
            TIMEOUT 60)
# a folder's manifest.json (sizes and CRC-32C): every kind of damage found and named
rl_add_test(NAME trainer.manifest SOURCES test_manifest.c LIBS rl_trainer LABELS unit TIMEOUT 60)
# the run folder is ours: ownership/mode rules, no links followed (other-uid cases need root)
rl_add_test(NAME trainer.rundir SOURCES test_rundir.c LIBS rl_trainer LABELS unit TIMEOUT 60)
# `rlctl run` end to end on a tiny random model (runs the rlctl binary)
rl_add_test(NAME trainer.sft SOURCES test_sft.c LIBS rl_trainer LABELS integration TIMEOUT 300)
add_dependencies(test_trainer_sft rlctl)
# the one training step every loss uses (rl_policy_step), on the cookbook's arith base model
rl_add_test(NAME trainer.policy SOURCES test_policy.c LIBS rl_algorithms rl_serving LABELS unit TIMEOUT 60)
