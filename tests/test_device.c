// test_device — device names and the CUDA module's checks (model/rl_device), on any machine:
// "cpu", "cuda", "cuda:N" and what is refused; and cuda:0 checked for real: usable on a GPU
// machine, refused with the reason (no module in this build, no driver, no device) elsewhere,
// never a crash. An index past the visible devices is refused naming how many there are.
#include "rl_device.h"
#include "rl_err.h"
#include "rl_test.h"

#include <stdio.h>
#include <string.h>

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

int main(void) {
    RL_TEST_RUN(test_parse);
    RL_TEST_RUN(test_check);
    RL_TEST_DONE();
}
