// tests for the rlctl front door: --version, --help, every listed command's --help (exit 0 and
// a usage line), an unknown command (exit 2, the nearest one suggested), and no arguments (usage
// on stderr, exit 2). The command list is read from `rlctl --help`, so a new command is covered
// when it is listed. Flags (rl_cli_flags): every flag a command's --help names is one it takes;
// --flag=value, --flag value and an abbreviation give the same result; a typo gets the nearest
// flag, a missing value, a value for a switch and an ambiguous abbreviation a clear message.
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
        char args[256];
        snprintf(args, sizeof args, "%s --help", name);
        int rc = s_run(args, sub, sizeof sub);
        CHECK_MSG(rc == 0, "rlctl %s --help exited %d", name, rc);
        CHECK_MSG(strstr(sub, "usage: rlctl") != NULL, "rlctl %s --help printed: %s", name, sub);
        n_cmds++;
        // every --flag its help names is a flag of the command (`--flag --help` reaches help)
        static char help[1 << 16];
        snprintf(help, sizeof help, "%s", sub);
        for (char *p = strstr(help, "--"); p; p = strstr(p + 2, "--")) {
            char flag[64];
            // a flag of its own: in the usage ("[--flag" or after a space on a usage line) or
            // opening an option line; not one merely mentioned in the prose
            const char *q = p;
            while (q > help && q[-1] == ' ') {
                q--;
            }
            int own = p[-1] == '[' || q == help || q[-1] == '\n' ||
                      (p[-1] == ' ' && strstr(help, "usage:") &&
                       (size_t)(p - help) < (size_t)(strstr(help, "\n\n") - help));
            if (!own || sscanf(p, "--%63[a-z0-9-]", flag) != 1 || !strcmp(flag, "help")) {
                continue;
            }
            snprintf(args, sizeof args, "%s --%s --help", name, flag);
            rc = s_run(args, sub, sizeof sub);
            CHECK_MSG(rc == 0 && !strstr(sub, "unknown option"),
                      "rlctl %s --help names --%s, which it does not take (%d): %.300s", name, flag,
                      rc, sub);
        }
    }
    CHECK_MSG(n_cmds >= 5, "only %d commands listed", n_cmds);

    CHECK_INT(s_run("frobnicate", out, sizeof out), 2);
    CHECK_CONTAINS(out, "unknown command 'frobnicate'");
    CHECK_INT(s_run("tokenizer", out, sizeof out), 2);
    CHECK_CONTAINS(out, "unknown command 'tokenizer'; did you mean 'tokenize'?");

    // flags: the same ids with --flag=value, --flag value and an abbreviation
    static char a[4096], b[4096], c[4096];
    char args[1024];
    const char *model = RL_SOURCE_DIR "/cookbook/models/arith-base";
    snprintf(args, sizeof args, "tokenize --model=%s --text='12+3=15'", model);
    CHECK_INT(s_run(args, a, sizeof a), 0);
    snprintf(args, sizeof args, "tokenize --model %s --text '12+3=15'", model);
    CHECK_INT(s_run(args, b, sizeof b), 0);
    snprintf(args, sizeof args, "tokenize --mod %s --te='12+3=15'", model);
    CHECK_INT(s_run(args, c, sizeof c), 0);
    CHECK_MSG(a[0] && !strcmp(a, b) && !strcmp(a, c),
              "--flag=value, --flag value and an "
              "abbreviation differ:\n%s\n%s\n%s",
              a, b, c);
    struct {
        const char *args, *want;
    } bad[] = {
        {"run x.yaml --forse", "rlctl run: unknown option '--forse'; did you mean '--force'?"},
        {"eval --modle m", "rlctl eval: unknown option '--modle'; did you mean '--model'?"},
        {"generate --t 1", "rlctl generate: option '--t' is ambiguous: --temperature, --top-p, "
                           "--top-k, --threads"},
        {"run x.yaml --stop-at", "rlctl run: option '--stop-at' needs a value"},
        {"validate --keys=1", "rlctl validate: option '--keys' takes no value"},
        {"validate x.yaml --no-file=1", "option '--no-file-checks' takes no value"},
        {"inspect --frobnicate", "rlctl inspect: unknown option '--frobnicate' (rlctl inspect "
                                 "--help)"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        CHECK_INT(s_run(bad[i].args, out, sizeof out), 2);
        CHECK_MSG(strstr(out, bad[i].want) != NULL, "rlctl %s: want '%s', got: %s", bad[i].args,
                  bad[i].want, out);
    }
    CHECK_INT(s_run("", out, sizeof out), 2);
    CHECK_CONTAINS(out, "usage: rlctl");
    RL_TEST_DONE();
}
