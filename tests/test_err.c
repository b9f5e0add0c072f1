// tests for rl_err: every code has a distinct name, errno passes through, rl_errf truncates.
#include "rl_err.h"
#include "rl_test.h"

#include <errno.h>

int main(void) {
    int codes[] = {RL_ENOMEM, RL_EINVAL, RL_EIO, RL_EPROTO, RL_EVERSION, RL_ETIMEOUT,
                   RL_EPLUGIN, RL_ENOTFOUND, RL_EUNSUPPORTED, RL_ECANCELED};
    int n = (int)(sizeof codes / sizeof codes[0]);
    for (int i = 0; i < n; i++) {
        CHECK(strcmp(rl_strerror(codes[i]), "unknown error") != 0);
        for (int j = 0; j < i; j++) {
            CHECK_MSG(strcmp(rl_strerror(codes[i]), rl_strerror(codes[j])) != 0, "%d vs %d",
                      codes[i], codes[j]);
        }
    }
    CHECK_STR(rl_strerror(0), "success");
    CHECK_STR(rl_strerror(ENOENT), strerror(ENOENT));
    CHECK_STR(rl_strerror(-1), "unknown error");

    char buf[8];
    CHECK_INT(rl_errf(buf, sizeof buf, RL_EIO, "abcdefghijkl %d", 5), RL_EIO);
    CHECK_STR(buf, "abcdefg");
    CHECK_INT(rl_errf(NULL, 0, RL_EINVAL, "x"), RL_EINVAL);
    RL_TEST_DONE();
}
