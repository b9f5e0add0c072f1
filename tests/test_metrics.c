// test_metrics — metrics.jsonl lines (order, null for NaN, truncation on resume, a torn last
// line dropped, no link followed), CRC-32C masking, and the TensorBoard event file decoded
// twice: by a small protobuf reader here and by tests/tfevents_read.py (an independent Python
// parser) when /usr/bin/python3 exists.
#include "rl_crc32c.h"
#include "rl_metrics.h"
#include "rl_test.h"

#include <dirent.h>
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static uint64_t s_varint(const unsigned char *p, size_t *i) {
    uint64_t v = 0;
    int shift = 0;
    for (;;) {
        unsigned char b = p[(*i)++];
        v |= (uint64_t)(b & 0x7f) << shift;
        shift += 7;
        if (!(b & 0x80)) {
            return v;
        }
    }
}

// Decodes the event file: checks framing and CRCs, returns the number of events; fills the
// first event's file_version and the last event's step and scalar "loss".
static int s_decode(const unsigned char *p, size_t n, char *version, int64_t *last_step,
                    float *loss, int *n_values) {
    size_t i = 0;
    int events = 0;
    while (i < n) {
        CHECK(i + 12 <= n);
        uint64_t len;
        uint32_t c;
        memcpy(&len, p + i, 8);
        memcpy(&c, p + i + 8, 4);
        CHECK_INT(c, rl_crc32c_mask(rl_crc32c(0, p + i, 8)));
        const unsigned char *d = p + i + 12;
        CHECK(i + 16 + len <= n);
        memcpy(&c, d + len, 4);
        CHECK_INT(c, rl_crc32c_mask(rl_crc32c(0, d, len)));
        size_t j = 0;
        *n_values = 0;
        while (j < len) {
            uint64_t key = s_varint(d, &j);
            int field = (int)(key >> 3), wire = (int)(key & 7);
            if (wire == 1) {
                j += 8;
            } else if (wire == 0) {
                uint64_t v = s_varint(d, &j);
                if (field == 2) {
                    *last_step = (int64_t)v;
                }
            } else if (wire == 2) {
                uint64_t l = s_varint(d, &j);
                if (field == 3 && events == 0) {
                    memcpy(version, d + j, l);
                    version[l] = '\0';
                } else if (field == 5) {
                    size_t k = j;
                    while (k < j + l) {
                        CHECK_INT(s_varint(d, &k), (1 << 3) | 2); // Summary.value
                        uint64_t vl = s_varint(d, &k);
                        size_t e = k + vl;
                        char tag[64] = "";
                        float x = 0;
                        while (k < e) {
                            uint64_t vk = s_varint(d, &k);
                            if (vk == ((1 << 3) | 2)) {
                                uint64_t tl = s_varint(d, &k);
                                memcpy(tag, d + k, tl < 63 ? tl : 63);
                                tag[tl < 63 ? tl : 63] = '\0';
                                k += tl;
                            } else {
                                CHECK_INT(vk, (2 << 3) | 5);
                                memcpy(&x, d + k, 4);
                                k += 4;
                            }
                        }
                        (*n_values)++;
                        if (strcmp(tag, "loss") == 0) {
                            *loss = x;
                        }
                    }
                }
                j += l;
            } else {
                CHECK_MSG(0, "unexpected wire type %d", wire);
                return events;
            }
        }
        i += 16 + len;
        events++;
    }
    return events;
}

// Writes text plus `zeros` NUL bytes to path.
static void s_write_bytes(const char *path, const char *text, size_t zeros) {
    FILE *f = fopen(path, "wb");
    if (!f) {
        CHECK_MSG(0, "cannot write %s", path);
        return;
    }
    fputs(text, f);
    for (size_t i = 0; i < zeros; i++) {
        fputc(0, f);
    }
    fclose(f);
}

// Appends one line for `step` through a new sink, as a resumed run does.
static void s_append_step(const char *dir, int64_t step) {
    char err[512];
    rl_metrics_t *m = rl_metrics_new(dir, 0, err, sizeof(err));
    CHECK_MSG(m != NULL, "%s", err);
    if (m) {
        CHECK_INT(rl_metrics_add(m, "loss", 0.5), 0);
        CHECK_INT(rl_metrics_write(m, step, 4.5), 0);
        rl_metrics_destroy(&m);
    }
}

// The number of lines of path, or -1 when one is not a JSON object or the file does not end
// with a newline.
static int s_json_lines(const char *path) {
    size_t n = 0;
    char *txt = rl_test_read_file(path, &n);
    if (!txt || n == 0 || txt[n - 1] != '\n') {
        free(txt);
        return -1;
    }
    int lines = 0;
    for (char *p = txt; *p;) {
        char *e = strchr(p, '\n');
        json_t *o = json_loadb(p, (size_t)(e - p), 0, NULL);
        if (!json_is_object(o)) {
            fprintf(stderr, "not a JSON object: %.*s\n", (int)(e - p), p);
            lines = -1;
        }
        json_decref(o);
        if (lines < 0) {
            break;
        }
        lines++;
        p = e + 1;
    }
    free(txt);
    return lines;
}

int main(void) {
    char dir[] = "/tmp/rl_test_metrics_XXXXXX";
    rl_test_tmpdir(dir, sizeof dir, "metrics");
    char err[512], path[600];
    // masking of a known CRC (TFRecord: rotate right 15, add 0xa282ead8)
    CHECK_INT(rl_crc32c_mask(0), 0xa282ead8u);
    CHECK_INT(rl_crc32c_mask(0xE3069283u), (((0xE3069283u >> 15) | (0xE3069283u << 17)) +
                                             0xa282ead8u) & 0xffffffffu);

    rl_metrics_t *m = rl_metrics_new(dir, 1, err, sizeof(err));
    RL_TEST_ASSERT_FILE(m, err);
    for (int s = 1; s <= 3; s++) {
        CHECK_INT(rl_metrics_add(m, "loss", 2.5 / s), 0);
        CHECK_INT(rl_metrics_add(m, "grad_norm", 0.75), 0);
        CHECK_INT(rl_metrics_add(m, "learning_rate", 1e-3), 0);
        CHECK_INT(rl_metrics_add(m, "num_tokens", 100.0 * s), 0);
        if (s == 2) {
            CHECK_INT(rl_metrics_add(m, "eval/loss", NAN), 0);
            CHECK_INT(rl_metrics_add(m, "loss", 1.0), 0); // replaces, keeps the position
        }
        CHECK_INT(rl_metrics_write(m, s, 1700000000.5 + s), 0);
    }
    rl_metrics_destroy(&m);
    CHECK(m == NULL);

    snprintf(path, sizeof(path), "%s/metrics.jsonl", dir);
    size_t n;
    char *txt = rl_test_read_file(path, &n);
    RL_TEST_ASSERT_FILE(txt, path);
    CHECK_CONTAINS(txt, "{\"step\":1,\"time\":1700000001.500,\"loss\":2.5,\"grad_norm\":0.75,"
                        "\"learning_rate\":0.001,\"num_tokens\":100}\n");
    CHECK_CONTAINS(txt, "{\"step\":2,\"time\":1700000002.500,\"loss\":1,\"grad_norm\":0.75,"
                        "\"learning_rate\":0.001,\"num_tokens\":200,\"eval/loss\":null}\n");
    CHECK_CONTAINS(txt, "\"step\":3,");
    free(txt);
    // resume after step 2: step 3 goes away
    CHECK_INT(rl_metrics_truncate_after(path, 2, err, sizeof(err)), 0);
    txt = rl_test_read_file(path, &n);
    CHECK(strstr(txt, "\"step\":3,") == NULL);
    CHECK_CONTAINS(txt, "\"step\":2,");
    free(txt);
    snprintf(path, sizeof(path), "%s/none.jsonl", dir);
    CHECK_INT(rl_metrics_truncate_after(path, 2, err, sizeof(err)), 0);

    // ---- a torn last line (a crash mid-write) -----------------------------------------------
    {
        char tdir[700], tpath[800], tmp[800], victim[800];
        snprintf(tdir, sizeof(tdir), "%s/torn", dir);
        CHECK_INT(mkdir(tdir, 0700), 0);
        snprintf(tpath, sizeof(tpath), "%s/metrics.jsonl", tdir);
        snprintf(tmp, sizeof(tmp), "%s/metrics.jsonl.tmp", tdir);
        snprintf(victim, sizeof(victim), "%s/victim.txt", dir);
#define S_GOOD                                                                        \
    "{\"step\":1,\"time\":1.5,\"loss\":2}\n{\"step\":2,\"time\":2.5,\"loss\":1}\n"
        // the crash cut line 3 short; resume from step 2's checkpoint, then log step 3 again
        s_write_bytes(tpath, S_GOOD "{\"step\":3,\"time\":3.5,\"lo", 0);
        CHECK_INT(rl_metrics_truncate_after(tpath, 2, err, sizeof(err)), 0);
        txt = rl_test_read_file(tpath, &n);
        CHECK_STR(txt, S_GOOD);
        free(txt);
        CHECK(access(tmp, F_OK) != 0); // renamed over, nothing left behind
        s_append_step(tdir, 3);
        CHECK_INT(s_json_lines(tpath), 3);
        // the same cut past the checkpoint's step (resume from step 3): still dropped
        s_write_bytes(tpath, S_GOOD "{\"step\":3,\"time\":3.5,\"lo", 0);
        CHECK_INT(rl_metrics_truncate_after(tpath, 10, err, sizeof(err)), 0);
        txt = rl_test_read_file(tpath, &n);
        CHECK_STR(txt, S_GOOD);
        free(txt);
        // zeros a file system leaves after a crash, a blank line, a non-object line
        s_write_bytes(tpath, S_GOOD "\n[1,2]\n", 64);
        CHECK_INT(rl_metrics_truncate_after(tpath, 10, err, sizeof(err)), 0);
        txt = rl_test_read_file(tpath, &n);
        CHECK_STR(txt, S_GOOD);
        CHECK_INT(n, strlen(S_GOOD));
        free(txt);
        // a complete last object without its newline is kept, and ended
        s_write_bytes(tpath, S_GOOD "{\"step\":3,\"time\":3.5}", 0);
        CHECK_INT(rl_metrics_truncate_after(tpath, 10, err, sizeof(err)), 0);
        txt = rl_test_read_file(tpath, &n);
        CHECK_STR(txt, S_GOOD "{\"step\":3,\"time\":3.5}\n");
        free(txt);
        // without a truncation first, a new sink still starts on a line of its own
        s_write_bytes(tpath, S_GOOD "{\"step\":3,\"time\":3.5,\"lo", 0);
        s_append_step(tdir, 3);
        txt = rl_test_read_file(tpath, &n);
        CHECK_CONTAINS(txt, "\"lo\n{\"step\":3,");
        free(txt);
        // a stale temp file that is a link: removed, its target untouched
        s_write_bytes(victim, "keep me\n", 0);
        s_write_bytes(tpath, S_GOOD, 0);
        CHECK_INT(symlink(victim, tmp), 0);
        CHECK_INT(rl_metrics_truncate_after(tpath, 1, err, sizeof(err)), 0);
        txt = rl_test_read_file(victim, &n);
        CHECK_STR(txt, "keep me\n");
        free(txt);
        txt = rl_test_read_file(tpath, &n);
        CHECK_STR(txt, "{\"step\":1,\"time\":1.5,\"loss\":2}\n");
        free(txt);
        // metrics.jsonl itself a link: refused by both, never followed
        CHECK_INT(unlink(tpath), 0);
        CHECK_INT(symlink(victim, tpath), 0);
        CHECK(rl_metrics_truncate_after(tpath, 1, err, sizeof(err)) != 0);
        CHECK_CONTAINS(err, "is a symbolic link");
        m = rl_metrics_new(tdir, 0, err, sizeof(err));
        CHECK(m == NULL);
        CHECK_CONTAINS(err, "is a symbolic link");
        rl_metrics_destroy(&m);
        txt = rl_test_read_file(victim, &n);
        CHECK_STR(txt, "keep me\n");
        free(txt);
#undef S_GOOD
    }

    // find the event file
    DIR *dh = opendir(dir);
    struct dirent *de;
    char ev[700] = "";
    while ((de = readdir(dh))) {
        if (strncmp(de->d_name, "events.out.tfevents.", 20) == 0) {
            snprintf(ev, sizeof(ev), "%s/%s", dir, de->d_name);
        }
    }
    closedir(dh);
    CHECK(ev[0] != '\0');
    char *bytes = rl_test_read_file(ev, &n);
    RL_TEST_ASSERT_FILE(bytes, ev);
    char version[64] = "";
    int64_t last = -1;
    float loss = 0;
    int nv = 0;
    CHECK_INT(s_decode((const unsigned char *)bytes, n, version, &last, &loss, &nv), 4);
    CHECK_STR(version, "brain.Event:2");
    CHECK_INT(last, 3);
    CHECK_CLOSE(loss, 2.5 / 3, 1e-6);
    CHECK_INT(nv, 4);
    free(bytes);

    // an independent reader (Python, hand-written protobuf + CRC-32C)
    if (access("/usr/bin/python3", X_OK) == 0) {
        char cmd[2000], out[700];
        snprintf(out, sizeof(out), "%s/decoded.jsonl", dir);
        snprintf(cmd, sizeof(cmd), "/usr/bin/python3 %s/tests/tfevents_read.py '%s' > '%s'",
                 RL_SOURCE_DIR, ev, out);
        CHECK_INT(system(cmd), 0);
        txt = rl_test_read_file(out, &n);
        CHECK_CONTAINS(txt, "\"file_version\": \"brain.Event:2\"");
        CHECK_CONTAINS(txt, "\"loss\": 2.5");
        CHECK_CONTAINS(txt, "\"eval/loss\": NaN");
        CHECK_CONTAINS(txt, "\"step\": 3, \"wall_time\": 1700000003.5");
        free(txt);
    } else {
        fprintf(stderr, "note: /usr/bin/python3 missing; the Python decoder was skipped\n");
    }
    // a directory that does not exist
    m = rl_metrics_new("/nonexistent/dir", 1, err, sizeof(err));
    CHECK(m == NULL);
    CHECK_CONTAINS(err, "metrics.jsonl: cannot open");

    rl_test_tmpdir_done(dir);
    RL_TEST_DONE();
}
