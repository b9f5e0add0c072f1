# libFuzzer on the bounded msgpack reader itself (rl_mpack): skip against an item-by-item walk,
# typed reads against rl_mpack_read, cursors unmoved on failure (see fuzz_mpack.c). The decoders
# built on it have their own targets (fuzz.wire, fuzz.traj). Seeds in fuzz/corpus/mpack/: every
# family and width, ext forms, deep nesting, and trajectory records and a wire frame 0.
rl_add_fuzz(mpack fuzz_mpack.c rl_core)
