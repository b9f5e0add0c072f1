// rlctl worker — a worker process of a run (roles/rl_worker.h). Started by the controller of
// `rlctl run`; not meant to be typed by hand, but runnable by hand to debug a role.
#include "rl_cli.h"
#include "rl_algos.h"
#include "rl_role.h"
#include "rl_worker.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void s_help(FILE *out) {
    fprintf(out,
            "usage: rlctl worker --role actor|sampler|reward|reference --rank N\n"
            "                    --connect ENDPOINT --secret-fd FD [--parent PID]\n"
            "                    [--heartbeat SECONDS] [--max-frame BYTES]\n"
            "       rlctl worker --role actor|critic|reference --mesh DP,FSDP --secret-file FILE\n"
            "                    --connect ENDPOINT --parent PID --log-dir DIR [...]\n"
            "       rlctl worker --role ROLE --mesh DP,FSDP --key FILE --mesh-nonce HEX\n"
            "                    --connect tcp://ADDR:PORT [...]\n\n"
            "A worker process of a run: reads its secret from FD (\"token <hex>\" and\n"
            "\"identity <role>/<rank>~<nonce>\" lines, written by the controller), connects to\n"
            "the controller's ROUTER at ENDPOINT under that identity, says hello, loads what its\n"
            "role needs when the controller sends `configure` (the resolved recipe) and serves\n"
            "the role's requests (docs/protocol.md) until told to shut down. `rlctl run` starts\n"
            "these itself. With --mesh it is one rank of a DP x FSDP mesh, started by the MPI\n"
            "launcher (mpirun) that `rlctl run` spawns: its rank is its MPI world rank, its\n"
            "secret the line of FILE (in the controller's private folder) for that rank, its log\n"
            "DIR/<role>-<rank>.log (docs/mesh.md). With --key it is a rank across hosts: it\n"
            "connects over tcp with CURVE, its key pair from FILE, trusting the controller's\n"
            "public key in $RLCTL_MESH_SERVER_KEY, as <role>/<rank>~HEX.\n");
}

int rl_cmd_worker(int argc, char **argv) {
    if (rl_cli_wants_help(argc, argv)) {
        s_help(stdout);
        return RL_EXIT_OK;
    }
    rl_worker_opts_t o;
    memset(&o, 0, sizeof(o));
    o.algos = rl_algos();
    o.heartbeat = 1.0;
    o.secret_fd = -1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) {
            fprintf(stderr, "rlctl worker: %s needs a value\n", a);
            return RL_EXIT_USAGE;
        }
        int bad = 0;
        float hb;
        if (strcmp(a, "--role") == 0) {
            o.role = v;
        } else if (strcmp(a, "--rank") == 0) {
            bad = rl_cli_int("worker", a, v, 0, 1 << 20, &o.rank);
        } else if (strcmp(a, "--connect") == 0) {
            o.endpoint = v;
        } else if (strcmp(a, "--parent") == 0) {
            bad = rl_cli_int("worker", a, v, 0, 1 << 30, &o.parent);
        } else if (strcmp(a, "--secret-fd") == 0) {
            bad = rl_cli_int("worker", a, v, 0, 1 << 20, &o.secret_fd);
        } else if (strcmp(a, "--max-frame") == 0) {
            char *end = NULL;
            long long mf = strtoll(v, &end, 10);
            if (!end || *end || mf < 0) {
                fprintf(stderr, "rlctl worker: --max-frame wants bytes >= 0, not '%s'\n", v);
                return RL_EXIT_USAGE;
            }
            o.max_frame = mf;
        } else if (strcmp(a, "--mesh") == 0) {
            char tail = 0;
            if (sscanf(v, "%d,%d%c", &o.mesh_dp, &o.mesh_fsdp, &tail) != 2 || o.mesh_dp < 1 ||
                o.mesh_fsdp < 1) {
                fprintf(stderr, "rlctl worker: --mesh wants DP,FSDP (each >= 1), not '%s'\n", v);
                return RL_EXIT_USAGE;
            }
        } else if (strcmp(a, "--secret-file") == 0) {
            o.secret_file = v;
        } else if (strcmp(a, "--key") == 0) {
            o.key_file = v;
        } else if (strcmp(a, "--mesh-nonce") == 0) {
            o.mesh_nonce = v;
        } else if (strcmp(a, "--log-dir") == 0) {
            o.log_dir = v;
        } else if (strcmp(a, "--heartbeat") == 0) {
            bad = rl_cli_float("worker", a, v, 1e-3, 3600, &hb);
            o.heartbeat = hb;
        } else {
            fprintf(stderr, "rlctl worker: unknown option '%s' (rlctl worker --help)\n", a);
            return RL_EXIT_USAGE;
        }
        if (bad) {
            return bad;
        }
        i++;
    }
    int mesh_ok = o.secret_file || (o.key_file && o.mesh_nonce);
    if (!o.role || !o.endpoint || (o.mesh_dp > 0 ? !mesh_ok : o.secret_fd < 0)) {
        s_help(stderr);
        return RL_EXIT_USAGE;
    }
    o.serves = rl_role_find(o.role);
    return rl_worker_main(&o) == 0 ? RL_EXIT_OK : RL_EXIT_FAIL;
}
