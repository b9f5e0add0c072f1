// test_manifest — manifest.json of a folder (trainer/rl_manifest): written over nested folders
// (sorted, skipping what the caller names and itself), verified clean, and each kind of damage
// found and named: one flipped bit, a file cut short, grown, removed or added, the manifest
// changed (against the CRC a marker holds), missing, malformed or of a newer version, and a link
// planted in the folder (refused, never followed).
#include "rl_crc32c.h"
#include "rl_err.h"
#include "rl_manifest.h"
#include "rl_test.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char s_dir[] = "/tmp/rl_test_manifest_XXXXXX";

// <s_dir>/<rel>; borrowed; valid until the next call.
static const char *s_at(const char *rel) {
    static char p[1200];
    snprintf(p, sizeof p, "%s/%s", s_dir, rel);
    return p;
}

static void s_write(const char *rel, const char *text) {
    FILE *f = fopen(s_at(rel), "wb");
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}

// Flips the lowest bit of byte `at` of <s_dir>/<rel>.
static void s_flip(const char *rel, long at) {
    FILE *f = fopen(s_at(rel), "r+b");
    int c = f && fseek(f, at, SEEK_SET) == 0 ? fgetc(f) : EOF;
    CHECK(c != EOF && fseek(f, at, SEEK_SET) == 0 && fputc(c ^ 1, f) != EOF);
    if (f) {
        fclose(f);
    }
}

static const char *const s_skip[] = {"DONE", NULL};

// verify's result and message for the folder as it is now
static int s_verify(int has_crc, uint32_t crc, char *err, size_t cap) {
    err[0] = '\0';
    return rl_manifest_verify(s_dir, s_skip, has_crc, crc, err, cap);
}

int main(void) {
    rl_test_tmpdir(s_dir, sizeof s_dir, "manifest");
    char err[1024];
    mkdir(s_at("adapter"), 0755);
    mkdir(s_at("critic"), 0755);
    mkdir(s_at("critic/adapter"), 0755);
    mkdir(s_at("empty"), 0755);
    s_write("state.json", "{\"step\": 5}\n");
    s_write("adapter/adapter_model.safetensors", "0123456789abcdef0123456789abcdef");
    s_write("adapter/adapter_config.json", "{}");
    s_write("critic/adapter/adapter_model.safetensors", "weights of the critic");
    s_write("DONE", "");

    uint32_t crc = 0;
    CHECK_INT(rl_manifest_write(s_dir, s_skip, &crc, err, sizeof err), 0);
    char *m = rl_test_read_file(s_at("manifest.json"), NULL);
    CHECK(m != NULL);
    if (m) {
        CHECK_INT(rl_crc32c(0, m, strlen(m)), crc);
        // nested paths, sorted; DONE and the manifest itself are not listed
        const char *a = strstr(m, "\"adapter/adapter_config.json\"");
        const char *b = strstr(m, "\"adapter/adapter_model.safetensors\"");
        const char *c = strstr(m, "\"critic/adapter/adapter_model.safetensors\"");
        const char *s = strstr(m, "\"state.json\"");
        CHECK(a && b && c && s && a < b && b < c && c < s);
        CHECK(!strstr(m, "DONE") && !strstr(m, "\"manifest.json\""));
        CHECK_CONTAINS(m, "\"format\": \"rlctl-manifest\"");
        CHECK_CONTAINS(m, "\"checksum\": \"crc32c\"");
        // {"step": 5}\n is 12 bytes; CRC-32C of it as 8 hex digits
        char want[64];
        snprintf(want, sizeof want, "\"size\": 12,\n   \"crc32c\": \"%08x\"",
                 rl_crc32c(0, "{\"step\": 5}\n", 12));
        CHECK_CONTAINS(m, want);
    }
    free(m);
    CHECK_INT(s_verify(1, crc, err, sizeof err), 0);
    CHECK_INT(s_verify(0, 0, err, sizeof err), 0);
    s_write("DONE", "anything"); // a skipped name is not checked
    CHECK_INT(s_verify(1, crc, err, sizeof err), 0);

    // one bit flipped in a weight file: found by its CRC, named
    s_flip("adapter/adapter_model.safetensors", 7);
    CHECK_INT(s_verify(1, crc, err, sizeof err), RL_EPROTO);
    CHECK_CONTAINS(err, "/adapter/adapter_model.safetensors: checksum mismatch (crc32c ");
    CHECK_CONTAINS(err, "manifest.json says ");
    s_flip("adapter/adapter_model.safetensors", 7);
    CHECK_INT(s_verify(1, crc, err, sizeof err), 0);
    // cut short / grown: by size, before anything is read
    s_write("critic/adapter/adapter_model.safetensors", "weights");
    CHECK_INT(s_verify(1, crc, err, sizeof err), RL_EPROTO);
    CHECK_CONTAINS(err, "/critic/adapter/adapter_model.safetensors: 7 bytes, manifest.json "
                        "says 21");
    s_write("critic/adapter/adapter_model.safetensors", "weights of the critic, and more");
    CHECK_INT(s_verify(1, crc, err, sizeof err), RL_EPROTO);
    CHECK_CONTAINS(err, "31 bytes, manifest.json says 21");
    s_write("critic/adapter/adapter_model.safetensors", "weights of the critic");
    // a file added (anywhere), a listed one removed
    s_write("empty/notes.txt", "x");
    CHECK_INT(s_verify(1, crc, err, sizeof err), RL_EPROTO);
    CHECK_CONTAINS(err, "/empty/notes.txt: not in manifest.json");
    unlink(s_at("empty/notes.txt"));
    char cfg[1200], moved[1200];
    snprintf(cfg, sizeof cfg, "%s", s_at("adapter/adapter_config.json"));
    snprintf(moved, sizeof moved, "%s", s_at("cfg.json"));
    CHECK_INT(rename(cfg, moved), 0);
    CHECK_INT(s_verify(1, crc, err, sizeof err), RL_EPROTO);
    CHECK_CONTAINS(err, "/cfg.json: not in manifest.json");
    CHECK_INT(rename(moved, cfg), 0);
    unlink(s_at("state.json"));
    CHECK_INT(s_verify(1, crc, err, sizeof err), RL_EPROTO);
    CHECK_CONTAINS(err, "/state.json: missing (manifest.json lists it)");
    s_write("state.json", "{\"step\": 5}\n");
    CHECK_INT(s_verify(1, crc, err, sizeof err), 0);
    // a link planted in the folder: refused, not followed
    CHECK_INT(symlink("/etc/passwd", s_at("adapter/link")), 0);
    CHECK_INT(s_verify(1, crc, err, sizeof err), RL_EINVAL);
    CHECK_CONTAINS(err, "/adapter/link: not a regular file");
    CHECK_INT(rl_manifest_write(s_dir, s_skip, &crc, err, sizeof err), RL_EINVAL);
    unlink(s_at("adapter/link"));

    // the manifest itself: changed (a size edited to match a grown file), against the CRC the
    // marker holds; then without a CRC to check it by, the grown file passes the sizes but not
    // its CRC
    CHECK_INT(rl_manifest_write(s_dir, s_skip, &crc, err, sizeof err), 0);
    m = rl_test_read_file(s_at("manifest.json"), NULL);
    char *at = m ? strstr(m, "\"size\": 12,") : NULL;
    CHECK(at != NULL);
    if (at) {
        memcpy(at, "\"size\": 13,", 11);
        s_write("manifest.json", m);
        s_write("state.json", "{\"step\": 50}\n");
        CHECK_INT(s_verify(1, crc, err, sizeof err), RL_EPROTO);
        CHECK_CONTAINS(err, "/manifest.json: checksum mismatch (crc32c ");
        CHECK_CONTAINS(err, "the DONE marker says");
        CHECK_INT(s_verify(0, 0, err, sizeof err), RL_EPROTO);
        CHECK_CONTAINS(err, "/state.json: checksum mismatch");
    }
    free(m);
    // malformed, another version, missing
    s_write("manifest.json", "{\"format\": \"rlctl-manifest\", \"version\": 2}");
    CHECK_INT(s_verify(0, 0, err, sizeof err), RL_EVERSION);
    CHECK_CONTAINS(err, "manifest format version 2");
    s_write("manifest.json", "{\"format\": \"rlctl-manifest\", \"version\": 1, \"checksum\": "
                             "\"crc32c\", \"files\": {\"state.json\": {\"size\": -1}}}");
    CHECK_INT(s_verify(0, 0, err, sizeof err), RL_EPROTO);
    s_write("manifest.json", "{\"format\": ");
    CHECK_INT(s_verify(0, 0, err, sizeof err), RL_EPROTO);
    CHECK_CONTAINS(err, "manifest.json:1:");
    unlink(s_at("manifest.json"));
    CHECK_INT(s_verify(0, 0, err, sizeof err), RL_ENOTFOUND);
    CHECK_CONTAINS(err, "manifest.json: missing");

    rl_test_tmpdir_done(s_dir);
    RL_TEST_DONE();
}
