# roles/: the protocol codec (rl_wire) and its ZeroMQ transport (rl_chan).
rl_add_test(NAME roles.wire SOURCES test_wire.c LIBS rl_roles LABELS unit TIMEOUT 60)
rl_add_test(NAME roles.chan SOURCES test_chan.c LIBS rl_roles LABELS unit TIMEOUT 120)
