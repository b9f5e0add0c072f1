# core's two readers of untrusted bytes: rl_mpack (the bounded msgpack reader under the role
# protocol and the trajectory records) and rl_jsonl (the JSONL reader under the SFT, prompt and
# eval datasets). Their decoders' own suites stay in wire.cmake, traj.cmake, trainer.cmake, ...
rl_add_test(NAME core.mpack SOURCES test_mpack.c LIBS rl_core LABELS unit TIMEOUT 60)
rl_add_test(NAME core.jsonl SOURCES test_jsonl.c LIBS rl_core LABELS unit TIMEOUT 60)
