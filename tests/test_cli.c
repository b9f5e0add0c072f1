// tests for the rlctl front door: --version, --help, every listed command's --help (exit 0 and
// a usage line), an unknown command (exit 2), and no arguments (usage on stderr, exit 2).
// The command list is read from `rlctl --help`, so a new command is covered when it is listed.
#include "rl_test.h"


static int s_run(const char *args, char *out, size_t len) {
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "'%s/rlctl' %s 2>&1", RL_BINARY_DIR, args);
    return rl_test_shell(cmd, out, len);
}

int main(void) {
    static char out[1 << 16], sub[1 << 16];
    CHECK_INT(s_run("--version", out, sizeof out), 0);
    CHECK_CONTAINS(out, "rlctl 0.");

    CHECK_INT(s_run("--help", out, sizeof out), 0);
    CHECK_CONTAINS(out, "usage: rlctl <command>");
    char *cmds = strstr(out, "commands:\n");
    CHECK(cmds != NULL);
    int n_cmds = 0;
    char *line = cmds ? strchr(cmds, '\n') + 1 : NULL;
    for (; line && line[0] == ' ' && line[1] == ' ';
         line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
        char name[64];
        if (sscanf(line, " %63s", name) != 1) {
            break;
        }
        char args[128];
        snprintf(args, sizeof args, "%s --help", name);
        int rc = s_run(args, sub, sizeof sub);
        CHECK_MSG(rc == 0, "rlctl %s --help exited %d", name, rc);
        CHECK_MSG(strstr(sub, "usage: rlctl") != NULL, "rlctl %s --help printed: %s", name, sub);
        n_cmds++;
    }
    CHECK_MSG(n_cmds >= 5, "only %d commands listed", n_cmds);

    CHECK_INT(s_run("frobnicate", out, sizeof out), 2);
    CHECK_CONTAINS(out, "unknown command 'frobnicate'");
    CHECK_INT(s_run("", out, sizeof out), 2);
    CHECK_CONTAINS(out, "usage: rlctl");
    RL_TEST_DONE();
}
