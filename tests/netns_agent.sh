#!/bin/sh
# The MPI launcher's remote-shell agent for tests (Open MPI's plm_rsh_agent, in ssh's place):
# `netns_agent.sh NS HOST COMMAND...` runs COMMAND (a shell string, as ssh takes it) in network
# namespace NS under a host name of its own (HOST with dots as dashes), so the "host" in the
# hostfile is another network stack on this machine and its processes say so.
ns=$1
host=$2
shift 2
exec ip netns exec "$ns" unshare --uts sh -c "hostname $(echo "$host" | tr . -) && $*"
