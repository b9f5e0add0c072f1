# transport/: the protocol codec (rl_wire), the typed messages (rl_proto) and the ZeroMQ transport
# (rl_chan).
rl_add_test(NAME roles.wire SOURCES test_wire.c LIBS rl_algorithms rl_serving LABELS unit TIMEOUT 60)
rl_add_test(NAME roles.chan SOURCES test_chan.c LIBS rl_algorithms rl_serving LABELS unit TIMEOUT 120)
# the typed messages of every verb (rl_proto): round trips and refusals
rl_add_test(NAME roles.proto SOURCES test_proto.c LIBS rl_algorithms rl_serving LABELS unit TIMEOUT 60)
# docs/protocol.md's field tables against the protocol's definition (transport/rl_proto_def.h);
# `test_roles_proto_doc --write` rewrites them
rl_add_test(NAME roles.proto_doc SOURCES test_proto_doc.c LIBS rl_algorithms rl_serving LABELS unit TIMEOUT 60)
