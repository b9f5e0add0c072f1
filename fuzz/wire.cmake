# libFuzzer on the role protocol's decoder (rl_msg_decode), and so on core's msgpack reader
# (rl_mpack) the way the protocol uses it (ext refused, unlimited skips); the input is split into
# ZeroMQ-like frames (see fuzz_wire.c); seeds in fuzz/corpus/wire/.
rl_add_fuzz(wire fuzz_wire.c rl_algorithms rl_serving)
