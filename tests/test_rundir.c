// test_rundir — the run folder is ours (rl_rundir): ownership and mode rules for the run folder,
// the folders rlctl creates and the folders above it; no symbolic link inside it is followed
// (.lock, recipe.yaml, logs/); the descriptors it holds are close-on-exec; new folders get
// mode 0700. The other-uid cases need root (CI runs as root) and are skipped, with a note,
// otherwise. The refusal/--force/holds-a-run rules are in test_checkpoint.c, the lock across
// processes and the rlctl end-to-end refusal in test_sft.c.
#include "rl_checkpoint.h"
#include "rl_err.h"
#include "rl_rundir.h"
#include "rl_test.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define S_OTHER_UID 65534 // nobody

static char s_base[] = "/tmp/rl_test_rundir_XXXXXX";
static char s_path[4][1200];

// <base>/<rel>; borrowed; valid until the fourth call after this one.
static const char *s_p(const char *rel) {
    static int k;
    k = (k + 1) % 4;
    snprintf(s_path[k], sizeof(s_path[k]), "%s/%s", s_base, rel);
    return s_path[k];
}

static void s_write(const char *path, const char *text) {
    FILE *f = fopen(path, "wb");
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}

static int s_exists(const char *path) {
    struct stat st;
    return lstat(path, &st) == 0;
}

static int s_mode(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 ? (int)(st.st_mode & 07777) : -1;
}

// The number of entries of a folder besides . and .. (-1 when it cannot be read).
static int s_count(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) {
        return -1;
    }
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        n += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
    }
    closedir(d);
    return n;
}

// Opens `dir` and expects a refusal (RL_EINVAL) whose message contains `needle`.
static void s_refused(const char *dir, rl_rundir_mode_t mode, const char *needle, int line) {
    char err[2048] = "";
    int code = 0;
    rl_rundir_t *h = rl_rundir_open(dir, mode, &code, err, sizeof(err));
    CHECK_MSG(h == NULL, "line %d: %s was accepted", line, dir);
    CHECK_MSG(code == RL_EINVAL, "line %d: code %d (%s)", line, code, err);
    CHECK_MSG(strstr(err, needle) != NULL, "line %d: \"%s\" lacks \"%s\"", line, err, needle);
    rl_rundir_destroy(&h);
}

// Opens `dir` and expects success; returns the handle (caller destroys it).
static rl_rundir_t *s_opened(const char *dir, rl_rundir_mode_t mode, int line) {
    char err[2048] = "";
    int code = 0;
    rl_rundir_t *h = rl_rundir_open(dir, mode, &code, err, sizeof(err));
    CHECK_MSG(h != NULL && code == 0, "line %d: %s refused: %s", line, dir, err);
    return h;
}

// 1 when a descriptor of this process points at `path` and has FD_CLOEXEC; 0 when it has not;
// -1 when no descriptor points at it.
static int s_fd_cloexec(const char *path) {
    DIR *d = opendir("/proc/self/fd");
    if (!d) {
        return -2;
    }
    int found = -1;
    struct dirent *e;
    while ((e = readdir(d))) {
        char link[300], target[1400];
        snprintf(link, sizeof(link), "/proc/self/fd/%s", e->d_name);
        ssize_t n = readlink(link, target, sizeof(target) - 1);
        if (n <= 0) {
            continue;
        }
        target[n] = '\0';
        if (strcmp(target, path) == 0) {
            int fl = fcntl(atoi(e->d_name), F_GETFD);
            found = fl >= 0 && (fl & FD_CLOEXEC) ? (found == -1 ? 1 : found) : 0;
        }
    }
    closedir(d);
    return found;
}

int main(void) {
    rl_test_tmpdir(s_base, sizeof s_base, "rundir");
    char err[2048], victim[1200], run[1200];
    int code = 0;
    int root = geteuid() == 0;

    // ---- created folders: mode 0700, the real path ---------------------------------------------
    snprintf(run, sizeof(run), "%s", s_p("made/deep/run"));
    rl_rundir_t *h = s_opened(run, RL_RUNDIR_NEW, __LINE__);
    CHECK_INT(s_mode(s_p("made")), 0700);
    CHECK_INT(s_mode(s_p("made/deep")), 0700);
    CHECK_INT(s_mode(run), 0700);
    CHECK_STR(h ? rl_rundir_path(h) : NULL, run);
    // the lock and the folder descriptors are not handed to spawned workers
    CHECK_INT(s_fd_cloexec(s_p("made/deep/run/.lock")), 1);
    CHECK_INT(s_fd_cloexec(run), 1);
    rl_rundir_destroy(&h);
    CHECK_INT(s_fd_cloexec(s_p("made/deep/run/.lock")), -1); // closed with the handle
    // a path with "//", "." and a trailing slash; the real path comes back clean
    snprintf(run, sizeof(run), "%s//made/./deep/run2/", s_base);
    h = s_opened(run, RL_RUNDIR_NEW, __LINE__);
    CHECK_STR(h ? rl_rundir_path(h) : NULL, s_p("made/deep/run2"));
    rl_rundir_destroy(&h);
    // through a symbolic link to a folder of ours: fine, and the real path is the target's
    CHECK_INT(symlink(s_p("made/deep"), s_p("deeplink")), 0);
    snprintf(run, sizeof(run), "%s", s_p("deeplink/run"));
    h = s_opened(run, RL_RUNDIR_NEW, __LINE__);
    CHECK_STR(h ? rl_rundir_path(h) : NULL, s_p("made/deep/run"));
    rl_rundir_destroy(&h);
    // an existing folder keeps its mode
    CHECK_INT(mkdir(s_p("mine755"), 0755), 0);
    CHECK_INT(chmod(s_p("mine755"), 0755), 0);
    h = s_opened(s_p("mine755"), RL_RUNDIR_NEW, __LINE__);
    CHECK_INT(s_mode(s_p("mine755")), 0755);
    rl_rundir_destroy(&h);

    // ---- writable by others: the run folder, and a folder above without the sticky bit ---------
    CHECK_INT(mkdir(s_p("open"), 0700), 0);
    CHECK_INT(chmod(s_p("open"), 0777), 0);
    s_refused(s_p("open"), RL_RUNDIR_NEW, "has mode 0777, writable by others", __LINE__);
    s_refused(s_p("open"), RL_RUNDIR_NEW, "chmod go-w", __LINE__);
    CHECK_INT(s_count(s_p("open")), 0); // nothing written: no .lock
    CHECK_INT(chmod(s_p("open"), 0707), 0);
    s_refused(s_p("open"), RL_RUNDIR_RESUME, "has mode 0707", __LINE__);
    CHECK_INT(chmod(s_p("open"), 0777), 0);
    // to be created inside a world-writable, non-sticky folder: refused, nothing created
    s_refused(s_p("open/runs/x"), RL_RUNDIR_NEW, "a folder on its path, has mode 0777",
              __LINE__);
    CHECK_INT(s_count(s_p("open")), 0);
    // an existing run folder of ours below it: refused as well (the folder could be swapped)
    CHECK_INT(mkdir(s_p("open/mine"), 0700), 0);
    s_refused(s_p("open/mine"), RL_RUNDIR_RESUME, "not sticky", __LINE__);
    CHECK(!s_exists(s_p("open/mine/.lock")));
    // sticky, as /tmp: creating into it is fine; the new folder is 0700
    CHECK_INT(chmod(s_p("open"), 01777), 0);
    h = s_opened(s_p("open/runs/x"), RL_RUNDIR_NEW, __LINE__);
    CHECK_INT(s_mode(s_p("open/runs")), 0700);
    CHECK_INT(s_mode(s_p("open/runs/x")), 0700);
    rl_rundir_destroy(&h);
    h = s_opened(s_p("open/mine"), RL_RUNDIR_RESUME, __LINE__);
    rl_rundir_destroy(&h);
    // group-writable: refused unless the group is our private one (our group, no members)
    CHECK_INT(mkdir(s_p("grp"), 0700), 0);
    CHECK_INT(chmod(s_p("grp"), 0770), 0);
    struct group *g = getgrgid(getegid());
    struct passwd *pw = getpwuid(geteuid());
    int private_group = g != NULL && pw != NULL;
    for (char **m = g ? g->gr_mem : NULL; m && *m; m++) {
        private_group &= strcmp(*m, pw->pw_name) == 0;
    }
    if (private_group) {
        h = s_opened(s_p("grp"), RL_RUNDIR_NEW, __LINE__); // umask 002 makes such folders
        rl_rundir_destroy(&h);
    } else {
        s_refused(s_p("grp"), RL_RUNDIR_NEW, "has mode 0770", __LINE__);
    }
    if (root) {
        CHECK_INT(chown(s_p("grp"), 0, S_OTHER_UID), 0); // group nogroup: not ours
        s_refused(s_p("grp"), RL_RUNDIR_NEW, "has mode 0770, writable by others", __LINE__);
    }

    // ---- another user's folders (root only) ----------------------------------------------------
    if (root) {
        // an existing run folder made by another user (a /tmp/x made first): refused, untouched
        CHECK_INT(mkdir(s_p("theirs"), 0755), 0);
        CHECK_INT(chown(s_p("theirs"), S_OTHER_UID, S_OTHER_UID), 0);
        s_refused(s_p("theirs"), RL_RUNDIR_NEW, "is owned by uid 65534", __LINE__);
        s_refused(s_p("theirs"), RL_RUNDIR_RESUME, "not by you (uid 0)", __LINE__);
        s_refused(s_p("theirs"), RL_RUNDIR_FORCE, "is owned by uid 65534", __LINE__);
        CHECK_INT(s_count(s_p("theirs")), 0);
        // creating below it (it is the nearest existing folder): refused, nothing created
        s_refused(s_p("theirs/runs/x"), RL_RUNDIR_NEW, "a folder on its path, is owned by uid "
                  "65534", __LINE__);
        CHECK_INT(s_count(s_p("theirs")), 0);
        // a folder of ours inside theirs: refused too (they could swap it)
        CHECK_INT(mkdir(s_p("theirs/mine"), 0700), 0);
        s_refused(s_p("theirs/mine"), RL_RUNDIR_RESUME, "not by you (uid 0) or root", __LINE__);
        CHECK(!s_exists(s_p("theirs/mine/.lock")));
        // the /tmp scenario: in a sticky world-writable folder, another user made `x` first
        CHECK_INT(mkdir(s_p("tmp"), 0700), 0);
        CHECK_INT(chmod(s_p("tmp"), 01777), 0);
        CHECK_INT(mkdir(s_p("tmp/x"), 0700), 0);
        CHECK_INT(chown(s_p("tmp/x"), S_OTHER_UID, S_OTHER_UID), 0);
        s_refused(s_p("tmp/x"), RL_RUNDIR_NEW, "is owned by uid 65534", __LINE__);
        s_refused(s_p("tmp/x/run"), RL_RUNDIR_NEW, "is owned by uid 65534", __LINE__);
        CHECK_INT(s_count(s_p("tmp/x")), 0);
        // ... while a run folder we create there ourselves is fine
        h = s_opened(s_p("tmp/runs/y"), RL_RUNDIR_NEW, __LINE__);
        rl_rundir_destroy(&h);
        // another user's `runs` appearing where we would create it: refused
        CHECK_INT(mkdir(s_p("tmp/runs2"), 0755), 0);
        CHECK_INT(chown(s_p("tmp/runs2"), S_OTHER_UID, S_OTHER_UID), 0);
        s_refused(s_p("tmp/runs2/z"), RL_RUNDIR_NEW, "is owned by uid 65534", __LINE__);
        CHECK(!s_exists(s_p("tmp/runs2/z")));
        // an entry of another user inside our run folder
        h = s_opened(s_p("own/r"), RL_RUNDIR_NEW, __LINE__);
        rl_rundir_destroy(&h);
        CHECK_INT(mkdir(s_p("own/r/logs"), 0700), 0);
        CHECK_INT(chown(s_p("own/r/logs"), S_OTHER_UID, S_OTHER_UID), 0);
        s_refused(s_p("own/r"), RL_RUNDIR_RESUME, "logs is owned by uid 65534", __LINE__);
        CHECK_INT(rl_checkpoint_rmtree(s_p("own/r/logs")), 0);
    } else {
        fprintf(stderr, "note: not root (euid %u): the cases with folders of another uid were "
                "skipped\n", (unsigned)geteuid());
    }

    // ---- no symbolic link inside the run folder is followed ------------------------------------
    snprintf(victim, sizeof(victim), "%s", s_p("victim.txt"));
    s_write(victim, "keep me\n");
    // .lock -> a file elsewhere: refused, the file is not truncated nor given our pid
    h = s_opened(s_p("links/a"), RL_RUNDIR_NEW, __LINE__);
    rl_rundir_destroy(&h);
    CHECK_INT(unlink(s_p("links/a/.lock")), 0);
    CHECK_INT(symlink(victim, s_p("links/a/.lock")), 0);
    s_refused(s_p("links/a"), RL_RUNDIR_RESUME, ".lock is a symbolic link", __LINE__);
    char *txt = rl_test_read_file(victim, NULL);
    CHECK_STR(txt, "keep me\n");
    free(txt);
    CHECK_INT(unlink(s_p("links/a/.lock")), 0);
    // recipe.yaml -> a file not there yet: refused in every mode but --force, nothing created;
    // --force removes the link itself, never its target
    char planted[1200];
    snprintf(planted, sizeof(planted), "%s", s_p("planted.yaml"));
    CHECK_INT(symlink(planted, s_p("links/a/recipe.yaml")), 0);
    s_refused(s_p("links/a"), RL_RUNDIR_NEW, "recipe.yaml is a symbolic link", __LINE__);
    s_refused(s_p("links/a"), RL_RUNDIR_RESUME, "recipe.yaml is a symbolic link", __LINE__);
    CHECK(!s_exists(planted));
    CHECK_INT(unlink(s_p("links/a/recipe.yaml")), 0);
    CHECK_INT(symlink(victim, s_p("links/a/recipe.yaml")), 0);
    s_refused(s_p("links/a"), RL_RUNDIR_RESUME, "recipe.yaml is a symbolic link", __LINE__);
    h = s_opened(s_p("links/a"), RL_RUNDIR_FORCE, __LINE__);
    CHECK(!s_exists(s_p("links/a/recipe.yaml")));
    txt = rl_test_read_file(victim, NULL);
    CHECK_STR(txt, "keep me\n");
    free(txt);
    rl_rundir_destroy(&h);
    // logs/ -> a folder elsewhere (the workers load logs/recipe.yaml): refused
    CHECK_INT(mkdir(s_p("elsewhere"), 0700), 0);
    CHECK_INT(symlink(s_p("elsewhere"), s_p("links/a/logs")), 0);
    s_refused(s_p("links/a"), RL_RUNDIR_RESUME, "logs is a symbolic link", __LINE__);
    s_refused(s_p("links/a"), RL_RUNDIR_NEW, "logs is a symbolic link", __LINE__);
    CHECK_INT(unlink(s_p("links/a/logs")), 0);
    CHECK_INT(symlink(s_p("elsewhere"), s_p("links/a/checkpoints")), 0);
    s_refused(s_p("links/a"), RL_RUNDIR_RESUME, "checkpoints is a symbolic link", __LINE__);
    CHECK_INT(unlink(s_p("links/a/checkpoints")), 0);

    // ---- files and folders through the handle --------------------------------------------------
    h = s_opened(s_p("links/a"), RL_RUNDIR_NEW, __LINE__);
    if (h) {
        char *data = NULL;
        size_t n = 0;
        CHECK_INT(rl_rundir_read_file(h, "recipe.yaml", &data, &n, err, sizeof(err)), ENOENT);
        CHECK_INT(rl_rundir_write_file(h, "recipe.yaml", "a: 1\n", 5, err, sizeof(err)), 0);
        CHECK_INT(s_mode(s_p("links/a/recipe.yaml")), 0644);
        CHECK_INT(rl_rundir_read_file(h, "recipe.yaml", &data, &n, err, sizeof(err)), 0);
        CHECK_STR(data, "a: 1\n");
        CHECK_INT(n, 5);
        free(data);
        CHECK_INT(rl_rundir_write_file(h, "recipe.yaml", "b\n", 2, err, sizeof(err)), 0);
        txt = rl_test_read_file(s_p("links/a/recipe.yaml"), NULL);
        CHECK_STR(txt, "b\n"); // replaced, not appended
        free(txt);
        // a link put in place after open: refused, its target untouched
        CHECK_INT(unlink(s_p("links/a/recipe.yaml")), 0);
        CHECK_INT(symlink(victim, s_p("links/a/recipe.yaml")), 0);
        CHECK_INT(rl_rundir_write_file(h, "recipe.yaml", "x\n", 2, err, sizeof(err)), RL_EINVAL);
        CHECK_CONTAINS(err, "recipe.yaml is a symbolic link");
        CHECK_INT(rl_rundir_read_file(h, "recipe.yaml", &data, &n, err, sizeof(err)), RL_EINVAL);
        CHECK(data == NULL);
        txt = rl_test_read_file(victim, NULL);
        CHECK_STR(txt, "keep me\n");
        free(txt);
        CHECK_INT(unlink(s_p("links/a/recipe.yaml")), 0);
        // logs/: made 0700; logs/recipe.yaml written in it
        CHECK_INT(rl_rundir_write_file(h, "logs/recipe.yaml", "y\n", 2, err, sizeof(err)),
                  ENOENT);
        CHECK_INT(rl_rundir_mkdir(h, "logs", err, sizeof(err)), 0);
        CHECK_INT(s_mode(s_p("links/a/logs")), 0700);
        CHECK_INT(rl_rundir_mkdir(h, "logs", err, sizeof(err)), 0); // already there: fine
        CHECK_INT(rl_rundir_write_file(h, "logs/recipe.yaml", "y\n", 2, err, sizeof(err)), 0);
        txt = rl_test_read_file(s_p("links/a/logs/recipe.yaml"), NULL);
        CHECK_STR(txt, "y\n");
        free(txt);
        // logs/ swapped for a link: refused for mkdir and for a file in it; nothing written there
        CHECK_INT(rl_checkpoint_rmtree(s_p("links/a/logs")), 0);
        CHECK_INT(symlink(s_p("elsewhere"), s_p("links/a/logs")), 0);
        CHECK_INT(rl_rundir_mkdir(h, "logs", err, sizeof(err)), RL_EINVAL);
        CHECK_CONTAINS(err, "logs is a symbolic link");
        CHECK_INT(rl_rundir_write_file(h, "logs/recipe.yaml", "z\n", 2, err, sizeof(err)),
                  RL_EINVAL);
        CHECK_CONTAINS(err, "logs is a symbolic link");
        CHECK_INT(s_count(s_p("elsewhere")), 0);
        CHECK_INT(unlink(s_p("links/a/logs")), 0);
        // logs/ writable by others: refused (chmod go-w)
        CHECK_INT(mkdir(s_p("links/a/logs"), 0700), 0);
        CHECK_INT(chmod(s_p("links/a/logs"), 0777), 0);
        CHECK_INT(rl_rundir_mkdir(h, "logs", err, sizeof(err)), RL_EINVAL);
        CHECK_CONTAINS(err, "has mode 0777");
        CHECK_INT(rl_rundir_write_file(h, "logs/recipe.yaml", "z\n", 2, err, sizeof(err)),
                  RL_EINVAL);
        CHECK(!s_exists(s_p("links/a/logs/recipe.yaml")));
        rl_rundir_destroy(&h);
    }

    // ---- a file where the folder should be ---------------------------------------------------
    s_write(s_p("plain"), "x");
    s_refused(s_p("plain"), RL_RUNDIR_NEW, "is not a folder", __LINE__);
    h = rl_rundir_open(s_p("plain/run"), RL_RUNDIR_NEW, &code, err, sizeof(err));
    CHECK(h == NULL);
    CHECK_CONTAINS(err, "is not a folder");

    CHECK_INT(rl_checkpoint_rmtree(s_base), 0);
    RL_TEST_DONE();
}
