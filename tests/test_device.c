// test_device — device names and the CUDA module's checks (model/rl_device), on any machine:
// "cpu", "cuda", "cuda:N" and what is refused; and cuda:0 checked for real: usable on a GPU
// machine, refused with the reason (no module in this build, no driver, no device) elsewhere,
// never a crash. An index past the visible devices is refused naming how many there are. A
// module named by RLCTL_CUDA_MODULE that does not load is refused naming the variable and path.
#include "rl_device.h"
#include "rl_err.h"
#include "rl_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static void test_parse(void) {
    rl_device_t d;
    char err[256], name[32];
    CHECK_INT(rl_device_parse("cpu", &d, err, sizeof err), 0);
    CHECK(!d.cuda);
    CHECK_STR(rl_device_name(&d, name, sizeof name), "cpu");
    CHECK_INT(rl_device_parse("cuda", &d, err, sizeof err), 0);
    CHECK(d.cuda && d.index == 0);
    CHECK_STR(rl_device_name(&d, name, sizeof name), "cuda:0");
    CHECK_INT(rl_device_parse("cuda:3", &d, err, sizeof err), 0);
    CHECK(d.cuda && d.index == 3);
    CHECK_STR(rl_device_name(&d, name, sizeof name), "cuda:3");
    CHECK_INT(rl_device_parse("cuda:1023", &d, err, sizeof err), 0);
    const char *bad[] = {"gpu", "cuda:", "cuda:-1", "cuda:01", "cuda:1024", "cuda:1x", "CUDA",
                         "cuda0", "", " cuda"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err[0] = '\0';
        CHECK_INT(rl_device_parse(bad[i], &d, err, sizeof err), RL_EINVAL);
        CHECK_CONTAINS(err, "allowed: cpu, cuda, cuda:N");
    }
    CHECK_INT(rl_device_parse(NULL, &d, err, sizeof err), RL_EINVAL);
}

static void test_check(void) {
    rl_device_t cpu = {0, 0}, gpu = {1, 0}, far = {1, 999};
    char err[2048] = "";
    rl_device_info_t info;
    CHECK_INT(rl_device_check(&cpu, 0, &info, err, sizeof err), 0);
    int rc = rl_device_check(&gpu, 0, &info, err, sizeof err);
    if (rc == 0) {
        printf("cuda:0 is usable: %s, %d.%d, %.1f GiB (%d visible)\n", info.name, info.cc_major,
               info.cc_minor, (double)info.mem_total / (1 << 30), info.n_devices);
        CHECK(info.n_devices >= 1 && info.mem_total > 0 && info.cc_major >= 8);
        // more memory than any GPU has: refused naming what is free
        CHECK_INT(rl_device_check(&gpu, (size_t)1 << 50, NULL, err, sizeof err), RL_ENOMEM);
        CHECK_CONTAINS(err, "GiB free of");
    } else {
        printf("cuda:0 is not usable here: %s\n", err);
        CHECK(rc == RL_ENOTFOUND || rc == RL_EUNSUPPORTED);
        CHECK_MSG(strncmp(err, "cuda:0", 6) == 0, "the refusal does not name the device: %s",
                  err);
        CHECK_MSG(strstr(err, "built without its CUDA module") || strstr(err, "no CUDA driver") ||
                      strstr(err, "cannot be loaded") || strstr(err, "no usable CUDA device") ||
                      strstr(err, "sees no device") || strstr(err, "compute capability") ||
                      strstr(err, "older than the runtime"),
                  "an unexplained refusal: %s", err);
    }
    rc = rl_device_check(&far, 0, NULL, err, sizeof err);
    CHECK_INT(rc, RL_ENOTFOUND);
    CHECK_MSG(strncmp(err, "cuda:999", 8) == 0, "%s", err);
    // loading twice gives the same table (loaded once per process)
    char e1[512], e2[512];
    CHECK(rl_device_cuda(e1, sizeof e1) == rl_device_cuda(e2, sizeof e2));
}

// RLCTL_CUDA_MODULE names the module to load, and a path that does not load is refused naming
// it. The module is loaded once per process, so each case runs in a child of its own (forked
// before this process loads anything) and sends its refusal back through a pipe.
static void s_named_case(const char *path, const char *want) {
    int fd[2];
    if (pipe(fd) != 0) {
        CHECK_MSG(0, "pipe");
        return;
    }
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        close(fd[0]);
        setenv("RLCTL_CUDA_MODULE", path, 1);
        rl_device_t gpu = {1, 0};
        char err[2048] = "";
        int rc = rl_device_check(&gpu, 0, NULL, err, sizeof err);
        char e2[2048] = "";
        const void *m = rl_device_cuda(e2, sizeof e2);
        dprintf(fd[1], "%d %d %s", rc, m != NULL, err);
        close(fd[1]);
        _exit(0);
    }
    close(fd[1]);
    char got[4096] = "";
    size_t n = 0;
    ssize_t r;
    while (n < sizeof got - 1 && (r = read(fd[0], got + n, sizeof got - 1 - n)) > 0) {
        n += (size_t)r;
    }
    got[n] = '\0';
    close(fd[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    printf("RLCTL_CUDA_MODULE=%s: %s\n", path, got);
    char prefix[64];
    snprintf(prefix, sizeof prefix, "%d 0 cuda:0: RLCTL_CUDA_MODULE=", RL_ENOTFOUND);
    CHECK_MSG(strncmp(got, prefix, strlen(prefix)) == 0, "not refused by name: %s", got);
    CHECK_CONTAINS(got, path);
    CHECK_CONTAINS(got, want);
}

static void test_named_module(void) {
    s_named_case("/nonexistent/librlctl_cuda_emu.so", "no such file");
    // a file that is not a shared library
    s_named_case(RL_SOURCE_DIR "/tests/test_device.c", "cannot be loaded");
    // a shared library that is not a CUDA module (the MPI module, built beside rlctl)
    s_named_case(RL_BINARY_DIR "/librlctl_mpi.so",
                 "is not this rlctl's CUDA module (no rl_cuda_module symbol");
}

int main(void) {
    test_named_module(); // first: its children must not inherit a loaded module
    test_parse();
    test_check();
    RL_TEST_DONE();
}
