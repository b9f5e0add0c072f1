// tests for rl_mpack, the bounded msgpack reader under the role protocol and the trajectory
// records: every int and float width (values at the edges of each), str/bin/ext/array/map
// headers, a valid document cut at every byte (each cut must fail as a truncation and leave the
// cursor where it was), lengths and counts past the end, caps checked after bounds, 0xc1 and ext
// refusal, typed reads with what was expected and found, and nesting limits of rl_mpack_skip
// (including 200000 levels with no limit, which must not recurse). Encodings are written by hand
// from the msgpack spec, so the reader is not checked against the writer it replaces.
#include "rl_err.h"
#include "rl_mpack.h"
#include "rl_test.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define B(...) ((const uint8_t[]){__VA_ARGS__})
#define NB(...) sizeof((const uint8_t[]){__VA_ARGS__})
// a cursor over a literal byte list
#define CUR(r, flags, ...) rl_mpack_init(r, B(__VA_ARGS__), NB(__VA_ARGS__), flags)

// ---- scalars -----------------------------------------------------------------------------------

static void test_ints(void) {
    rl_mpack_t r;
    rl_mpack_item_t it;
    struct {
        const uint8_t *b;
        size_t n;
        rl_mpack_type_t type;
        int width;
        uint64_t u;
        int64_t i;
    } cases[] = {
        {B(0x00), 1, RL_MPACK_UINT, 0, 0, 0},
        {B(0x7f), 1, RL_MPACK_UINT, 0, 127, 0},
        {B(0xff), 1, RL_MPACK_INT, 0, 0, -1},
        {B(0xe0), 1, RL_MPACK_INT, 0, 0, -32},
        {B(0xcc, 0xff), 2, RL_MPACK_UINT, 1, 255, 0},
        {B(0xcd, 0x12, 0x34), 3, RL_MPACK_UINT, 2, 0x1234, 0},
        {B(0xcd, 0xff, 0xff), 3, RL_MPACK_UINT, 2, 65535, 0},
        {B(0xce, 0xde, 0xad, 0xbe, 0xef), 5, RL_MPACK_UINT, 4, 0xdeadbeefu, 0},
        {B(0xcf, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff), 9, RL_MPACK_UINT, 8, UINT64_MAX,
         0},
        {B(0xcf, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08), 9, RL_MPACK_UINT, 8,
         0x0102030405060708ull, 0},
        {B(0xd0, 0x80), 2, RL_MPACK_INT, 1, 0, -128},
        {B(0xd0, 0x7f), 2, RL_MPACK_INT, 1, 0, 127},
        {B(0xd0, 0x05), 2, RL_MPACK_INT, 1, 0, 5}, // a signed form holding a positive value
        {B(0xd1, 0x80, 0x00), 3, RL_MPACK_INT, 2, 0, -32768},
        {B(0xd1, 0xff, 0xfe), 3, RL_MPACK_INT, 2, 0, -2},
        {B(0xd2, 0x80, 0x00, 0x00, 0x00), 5, RL_MPACK_INT, 4, 0, INT32_MIN},
        {B(0xd2, 0x7f, 0xff, 0xff, 0xff), 5, RL_MPACK_INT, 4, 0, INT32_MAX},
        {B(0xd3, 0x80, 0, 0, 0, 0, 0, 0, 0), 9, RL_MPACK_INT, 8, 0, INT64_MIN},
        {B(0xd3, 0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff), 9, RL_MPACK_INT, 8, 0, INT64_MAX},
        {B(0xd3, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff), 9, RL_MPACK_INT, 8, 0, -1},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        rl_mpack_init(&r, cases[k].b, cases[k].n, 0);
        CHECK_INT(rl_mpack_read(&r, &it), 0);
        CHECK_INT(it.type, cases[k].type);
        CHECK_INT(it.width, cases[k].width);
        CHECK_INT(it.at, 0);
        CHECK_INT(it.head, cases[k].b[0]);
        if (cases[k].type == RL_MPACK_UINT) {
            CHECK_MSG(it.u == cases[k].u, "case %zu: %llu", k, (unsigned long long)it.u);
        } else {
            CHECK_MSG(it.i == cases[k].i, "case %zu: %lld", k, (long long)it.i);
        }
        CHECK_INT(rl_mpack_left(&r), 0);

        // the typed reads take either family whenever the value fits
        int64_t v;
        uint64_t u;
        double f;
        int neg = cases[k].type == RL_MPACK_INT && cases[k].i < 0;
        int big = cases[k].type == RL_MPACK_UINT && cases[k].u > (uint64_t)INT64_MAX;
        rl_mpack_init(&r, cases[k].b, cases[k].n, 0);
        CHECK_INT(rl_mpack_read_uint(&r, UINT64_MAX, &u), neg ? RL_EPROTO : 0);
        if (neg) {
            CHECK_INT(r.err.kind, RL_MPACK_ERANGE);
            CHECK_INT(r.off, 0); // unmoved
        } else {
            CHECK(u == (cases[k].type == RL_MPACK_UINT ? cases[k].u : (uint64_t)cases[k].i));
        }
        rl_mpack_init(&r, cases[k].b, cases[k].n, 0);
        CHECK_INT(rl_mpack_read_int(&r, INT64_MIN, INT64_MAX, &v), big ? RL_EPROTO : 0);
        if (big) {
            CHECK_INT(r.err.kind, RL_MPACK_ERANGE);
            CHECK_CONTAINS(r.err.msg, "int 18446744073709551615 outside");
        } else {
            CHECK(v == (cases[k].type == RL_MPACK_UINT ? (int64_t)cases[k].u : cases[k].i));
        }
        rl_mpack_init(&r, cases[k].b, cases[k].n, 0);
        CHECK_INT(rl_mpack_read_number(&r, &f), 0);
        CHECK(f == (cases[k].type == RL_MPACK_UINT ? (double)cases[k].u : (double)cases[k].i));
        // and every shorter prefix is a truncation of the value field
        for (size_t cut = 1; cut < cases[k].n; cut++) {
            rl_mpack_init(&r, cases[k].b, cut, 0);
            CHECK_INT(rl_mpack_read(&r, &it), RL_EPROTO);
            CHECK_INT(r.err.kind, RL_MPACK_EHEAD);
            CHECK_INT(r.err.width, cases[k].width);
            CHECK_INT(r.err.left, cut - 1);
            CHECK_INT(r.off, 0);
        }
    }
    // ranges of the typed reads
    CUR(&r, 0, 0xcd, 0x01, 0x2c); // 300
    uint64_t u = 0;
    CHECK_INT(rl_mpack_read_uint(&r, 255, &u), RL_EPROTO);
    CHECK_STR(r.err.msg, "int 300 outside 0..255");
    CHECK_INT(rl_mpack_read_uint(&r, 300, &u), 0);
    CHECK_INT(u, 300);
    int64_t v = 0;
    CUR(&r, 0, 0xd0, 0xf6); // -10
    CHECK_INT(rl_mpack_read_int(&r, -9, 9, &v), RL_EPROTO);
    CHECK_STR(r.err.msg, "int -10 outside -9..9");
    CHECK_INT(rl_mpack_read_int(&r, -10, 9, &v), 0);
    CHECK_INT(v, -10);
    CUR(&r, 0, 0x05);
    CHECK_INT(rl_mpack_read_int(&r, 6, 9, &v), RL_EPROTO);
    CHECK_INT(r.err.kind, RL_MPACK_ERANGE);
    CUR(&r, 0, 0xa1, 'x');
    CHECK_INT(rl_mpack_read_int(&r, INT64_MIN, INT64_MAX, &v), RL_EPROTO);
    CHECK_INT(r.err.kind, RL_MPACK_ETYPE);
    CHECK_STR(r.err.msg, "expected int, found str");
    CHECK_STR(r.err.expected, "int");
    CHECK_INT(r.err.type, RL_MPACK_STR);
}

static void test_floats_and_others(void) {
    rl_mpack_t r;
    rl_mpack_item_t it;
    double f = 0;
    CUR(&r, 0, 0xca, 0x3f, 0xc0, 0x00, 0x00); // 1.5f
    CHECK_INT(rl_mpack_read(&r, &it), 0);
    CHECK_INT(it.type, RL_MPACK_FLOAT);
    CHECK_INT(it.width, 4);
    CHECK(it.f == 1.5);
    CUR(&r, 0, 0xca, 0x3d, 0xcc, 0xcc, 0xcd); // 0.1f widened exactly, not rounded to 0.1
    CHECK_INT(rl_mpack_read_number(&r, &f), 0);
    CHECK(f == (double)0.1f);
    CUR(&r, 0, 0xcb, 0x40, 0x09, 0x21, 0xfb, 0x54, 0x44, 0x2d, 0x18); // pi
    CHECK_INT(rl_mpack_read_number(&r, &f), 0);
    CHECK(f == 3.141592653589793);
    CUR(&r, 0, 0xcb, 0x7f, 0xf8, 0, 0, 0, 0, 0, 0); // NaN passes through
    CHECK_INT(rl_mpack_read_number(&r, &f), 0);
    CHECK(f != f);
    CUR(&r, 0, 0xcb, 0x40, 0x09);
    CHECK_INT(rl_mpack_read_number(&r, &f), RL_EPROTO);
    CHECK_INT(r.err.kind, RL_MPACK_EHEAD);
    CHECK_INT(r.err.type, RL_MPACK_FLOAT);
    CHECK_STR(r.err.msg, "truncated: 8 header bytes expected, 2 left");
    CUR(&r, 0, 0xc3);
    CHECK_INT(rl_mpack_read_number(&r, &f), RL_EPROTO);
    CHECK_STR(r.err.msg, "expected number, found bool");

    int b = -1;
    CUR(&r, 0, 0xc2, 0xc3, 0xc0);
    CHECK_INT(rl_mpack_read_bool(&r, &b), 0);
    CHECK_INT(b, 0);
    CHECK_INT(rl_mpack_read_bool(&r, &b), 0);
    CHECK_INT(b, 1);
    CHECK_INT(rl_mpack_read_bool(&r, &b), RL_EPROTO);
    CHECK_STR(r.err.msg, "expected bool, found nil");
    CHECK_INT(rl_mpack_read_nil(&r), 0);
    CHECK_INT(rl_mpack_read_nil(&r), RL_EPROTO);
    CHECK_INT(r.err.kind, RL_MPACK_EEND);
    CHECK_INT(r.err.at, 3);

    // str / bin of every length width, with the body located inside the buffer
    const uint8_t *s = NULL;
    size_t n = 0;
    CUR(&r, 0, 0xa3, 'a', 'b', 'c', 0xd9, 0x01, 'd', 0xda, 0x00, 0x02, 'e', 'f', 0xdb, 0, 0, 0, 0,
        0xc4, 0x01, 0x07, 0xc5, 0x00, 0x00, 0xc6, 0x00, 0x00, 0x00, 0x01, 0x09);
    CHECK_INT(rl_mpack_read_str(&r, 3, &s, &n), 0);
    CHECK(n == 3 && memcmp(s, "abc", 3) == 0 && s == r.p + 1);
    CHECK_INT(rl_mpack_read_str(&r, 3, &s, &n), 0);
    CHECK(n == 1 && s[0] == 'd');
    CHECK_INT(rl_mpack_read_str(&r, 1, &s, &n), RL_EPROTO); // the cap
    CHECK_INT(r.err.kind, RL_MPACK_ECAP);
    CHECK_STR(r.err.msg, "str of 2 bytes (max 1)");
    CHECK_INT(rl_mpack_read_str(&r, 2, &s, &n), 0);
    CHECK(n == 2 && memcmp(s, "ef", 2) == 0);
    CHECK_INT(rl_mpack_read_str(&r, 2, &s, &n), 0);
    CHECK_INT(n, 0);
    CHECK_INT(rl_mpack_read_str(&r, 2, &s, &n), RL_EPROTO);
    CHECK_STR(r.err.msg, "expected str, found bin");
    CHECK_INT(rl_mpack_read_bin(&r, 9, &s, &n), 0);
    CHECK(n == 1 && s[0] == 7);
    CHECK_INT(rl_mpack_read_bin(&r, 9, &s, &n), 0);
    CHECK_INT(n, 0);
    CHECK_INT(rl_mpack_read_bin(&r, 9, &s, &n), 0);
    CHECK(n == 1 && s[0] == 9);
    CHECK_INT(rl_mpack_left(&r), 0);

    // ext: fixext 1..16 and ext 8/16/32, the type byte apart from the data
    CUR(&r, 0, 0xd4, 0x05, 0xaa, 0xd8, 0xfe, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16,
        0xc7, 0x02, 0x01, 0xbb, 0xcc, 0xc8, 0x00, 0x00, 0x03, 0xc9, 0x00, 0x00, 0x00, 0x01, 0x04,
        0xdd);
    CHECK_INT(rl_mpack_read(&r, &it), 0);
    CHECK(it.type == RL_MPACK_EXT && it.ext == 5 && it.n == 1 && it.s[0] == 0xaa);
    CHECK_INT(rl_mpack_read(&r, &it), 0);
    CHECK(it.type == RL_MPACK_EXT && it.ext == -2 && it.n == 16 && it.s[15] == 16);
    CHECK_INT(rl_mpack_read(&r, &it), 0);
    CHECK(it.ext == 1 && it.n == 2 && it.s[0] == 0xbb && it.s[1] == 0xcc);
    CHECK_INT(rl_mpack_read(&r, &it), 0);
    CHECK(it.ext == 3 && it.n == 0);
    CHECK_INT(rl_mpack_read(&r, &it), 0);
    CHECK(it.ext == 4 && it.n == 1 && it.s[0] == 0xdd);
    CHECK_INT(rl_mpack_left(&r), 0);
    CUR(&r, 0, 0xd6, 0x01, 0, 0, 0); // fixext 4 with 3 data bytes
    CHECK_INT(rl_mpack_read(&r, &it), RL_EPROTO);
    CHECK_INT(r.err.kind, RL_MPACK_EBODY);
    CHECK_STR(r.err.msg, "truncated: ext of 4 bytes and its type, 4 left");
    // ... refused by a format that does not use them, also inside a skipped value
    CUR(&r, RL_MPACK_NO_EXT, 0x91, 0xd6, 0x01, 0, 0, 0, 0);
    CHECK_INT(rl_mpack_skip(&r, 0), RL_EPROTO);
    CHECK_INT(r.err.kind, RL_MPACK_EBYTE);
    CHECK_INT(r.err.at, 1);
    CHECK_STR(r.err.msg, "msgpack ext type 0xd6 is not used here");
    CHECK_INT(r.off, 0);
    rl_mpack_type_t t;
    CUR(&r, 0, 0xc1);
    CHECK_INT(rl_mpack_peek(&r, &t), RL_EPROTO);
    CHECK_STR(r.err.msg, "byte 0xc1 is not a msgpack type");
    CHECK_INT(rl_mpack_skip(&r, 4), RL_EPROTO);
    CHECK_INT(r.err.kind, RL_MPACK_EBYTE);
    CHECK_INT(rl_mpack_read_str(&r, 9, &s, &n), RL_EPROTO);
    CHECK_INT(r.err.kind, RL_MPACK_EBYTE);
    CHECK_STR(rl_mpack_type_name(RL_MPACK_UINT), "uint");
    CHECK_STR(rl_mpack_type_name((rl_mpack_type_t)99), "?");
}

// ---- lengths and counts past the end ------------------------------------------------------------

static void test_past_the_end(void) {
    rl_mpack_t r;
    rl_mpack_item_t it;
    uint64_t n = 0;
    CUR(&r, 0, 0xdb, 0x7f, 0xff, 0xff, 0xff, 'a', 'b', 'c');
    CHECK_INT(rl_mpack_read(&r, &it), RL_EPROTO);
    CHECK_INT(r.err.kind, RL_MPACK_EBODY);
    CHECK_STR(r.err.msg, "truncated: str of 2147483647 bytes, 3 left");
    CHECK(r.err.n == 2147483647u && r.err.left == 3);
    CUR(&r, 0, 0xc6, 0xff, 0xff, 0xff, 0xff);
    CHECK_INT(rl_mpack_read(&r, &it), RL_EPROTO);
    CHECK_STR(r.err.msg, "truncated: bin of 4294967295 bytes, 0 left");
    // an array needs a byte per item, a map two per entry: counted before anything is believed
    CUR(&r, 0, 0xdd, 0xff, 0xff, 0xff, 0xff, 0xc0);
    CHECK_INT(rl_mpack_read_array(&r, UINT64_MAX, &n), RL_EPROTO);
    CHECK_STR(r.err.msg, "truncated: array of 4294967295 items, 1 bytes left");
    CUR(&r, 0, 0x93, 0xc0, 0xc0, 0xc0);
    CHECK_INT(rl_mpack_read_array(&r, 3, &n), 0);
    CHECK_INT(n, 3);
    CUR(&r, 0, 0x94, 0xc0, 0xc0, 0xc0);
    CHECK_INT(rl_mpack_read_array(&r, 9, &n), RL_EPROTO);
    CHECK_INT(r.err.kind, RL_MPACK_EBODY);
    CUR(&r, 0, 0x82, 0xc0, 0xc0, 0xc0);
    CHECK_INT(rl_mpack_read_map(&r, 9, &n), RL_EPROTO);
    CHECK_STR(r.err.msg, "truncated: map of 2 entries, 3 bytes left");
    CUR(&r, 0, 0x82, 0xc0, 0xc0, 0xc0, 0xc0);
    CHECK_INT(rl_mpack_read_map(&r, 9, &n), 0);
    // the bounds come before the cap (a huge count is a truncation, not "too many")
    CUR(&r, 0, 0xdf, 0xff, 0xff, 0xff, 0xff);
    CHECK_INT(rl_mpack_read_map(&r, 256, &n), RL_EPROTO);
    CHECK_INT(r.err.kind, RL_MPACK_EBODY);
    CUR(&r, 0, 0xde, 0x01, 0x2c, 0); // 300 entries: a cap failure needs the bytes first
    CHECK_INT(rl_mpack_read_map(&r, 256, &n), RL_EPROTO);
    CHECK_INT(r.err.kind, RL_MPACK_EBODY);
    uint8_t big[3 + 600] = {0xde, 0x01, 0x2c};
    rl_mpack_init(&r, big, sizeof big, 0);
    CHECK_INT(rl_mpack_read_map(&r, 256, &n), RL_EPROTO);
    CHECK_INT(r.err.kind, RL_MPACK_ECAP);
    CHECK_STR(r.err.msg, "map of 300 entries (max 256)");
    CHECK_INT(r.off, 0);
    uint8_t arr[3 + 300] = {0xdc, 0x01, 0x2c};
    rl_mpack_init(&r, arr, sizeof arr, 0);
    CHECK_INT(rl_mpack_read_array(&r, 299, &n), RL_EPROTO);
    CHECK_STR(r.err.msg, "array of 300 items (max 299)");
    CHECK_INT(rl_mpack_read_array(&r, 300, &n), 0);
    // NULL buffer of length 0 is an empty input
    rl_mpack_init(&r, NULL, 0, 0);
    CHECK_INT(rl_mpack_read(&r, &it), RL_EPROTO);
    CHECK_INT(r.err.kind, RL_MPACK_EEND);
    CHECK_STR(r.err.msg, "truncated: an item expected, the buffer ends");
}

// A document with every family, cut at every byte: a whole skip fails as a truncation at each
// cut and succeeds at full length; so does reading it item by item.
static void test_truncation_everywhere(void) {
    static const uint8_t doc[] = {
        0x8a,                                                             // map of 10
        0xa1, 'a',  0x00,                                                 // "a": 0
        0xa1, 'b',  0xcf, 1,    2,    3,    4,    5,    6,    7,    8,    // "b": uint64
        0xa1, 'c',  0xd2, 0xff, 0xff, 0xff, 0x00,                         // "c": int32 -256
        0xa1, 'd',  0xcb, 0x40, 0x09, 0x21, 0xfb, 0x54, 0x44, 0x2d, 0x18, // "d": pi
        0xa1, 'e',  0xc4, 0x03, 9,    8,    7,                            // "e": bin
        0xd9, 0x01, 'f',  0x93, 0xc0, 0xc3, 0xca, 0,    0,    0,    0,    // "f": [nil, true, 0.0f]
        0xa1, 'g',  0x81, 0xa1, 'h',  0x91, 0x90,                         // "g": {"h": [[]]}
        0xa1, 'i',  0xd5, 0x07, 0x01, 0x02,                               // "i": fixext 2
        0xa1, 'j',  0xc7, 0x01, 0x02, 0x03,                               // "j": ext 8
        0xa1, 'k',  0xdc, 0x00, 0x01, 0xe0,                               // "k": array16 [-32]
    };
    for (size_t cut = 0; cut <= sizeof doc; cut++) {
        rl_mpack_t r;
        for (int depth = 0; depth <= 4; depth += 4) { // no limit, and a limit of 4
            rl_mpack_init(&r, doc, cut, 0);
            int rc = rl_mpack_skip(&r, depth);
            if (cut == sizeof doc) {
                CHECK_INT(rc, 0);
                CHECK_INT(rl_mpack_left(&r), 0);
            } else {
                int trunc = r.err.kind == RL_MPACK_EEND || r.err.kind == RL_MPACK_EHEAD ||
                            r.err.kind == RL_MPACK_EBODY;
                CHECK_MSG(rc == RL_EPROTO && trunc && r.off == 0 && r.err.at <= cut,
                          "cut %zu depth %d: rc %d kind %d off %zu at %zu (%s)", cut, depth, rc,
                          (int)r.err.kind, r.off, r.err.at, r.err.msg);
            }
        }
        // item by item: count the items a full walk reads, and stop at the first failure
        rl_mpack_init(&r, doc, cut, 0);
        uint64_t pending = 1;
        int items = 0, rc = 0;
        while (pending && rc == 0) {
            rl_mpack_item_t it;
            size_t before = r.off;
            rc = rl_mpack_read(&r, &it);
            if (rc == 0) {
                items++;
                pending += it.type == RL_MPACK_ARRAY ? it.n
                           : it.type == RL_MPACK_MAP ? 2 * it.n
                                                     : 0;
                pending--;
                CHECK(it.type != RL_MPACK_STR || it.s + it.n <= doc + cut);
            } else {
                CHECK_INT(r.off, before);
            }
        }
        if (cut == sizeof doc) {
            CHECK_INT(rc, 0);
            CHECK_INT(items, 28);
        } else {
            CHECK_MSG(rc == RL_EPROTO, "cut %zu read to the end", cut);
        }
    }
}

// ---- nesting -----------------------------------------------------------------------------------

static void test_depth(void) {
    rl_mpack_t r;
    // [[[[ 1 ]]]]: 4 levels of arrays, a scalar at level 5
    CUR(&r, 0, 0x91, 0x91, 0x91, 0x91, 0x01);
    CHECK_INT(rl_mpack_skip(&r, 5), 0);
    CHECK_INT(rl_mpack_left(&r), 0);
    CUR(&r, 0, 0x91, 0x91, 0x91, 0x91, 0x01);
    CHECK_INT(rl_mpack_skip(&r, 4), RL_EPROTO);
    CHECK_INT(r.err.kind, RL_MPACK_EDEPTH);
    CHECK_INT(r.err.at, 4);
    CHECK_STR(r.err.msg, "nested deeper than 4 levels");
    CHECK_INT(r.off, 0);
    // an empty container at the last allowed level is fine; a scalar alone needs one level
    CUR(&r, 0, 0x91, 0x91, 0x90, 0x07);
    CHECK_INT(rl_mpack_skip(&r, 3), 0);
    CHECK_INT(rl_mpack_skip(&r, 1), 0);
    CHECK_INT(rl_mpack_left(&r), 0);
    // maps count their keys and values as children
    CUR(&r, 0, 0x81, 0x91, 0x01, 0x81, 0xa0, 0x02);
    CHECK_INT(rl_mpack_skip(&r, 2), RL_EPROTO);
    CHECK_INT(r.err.at, 2);
    CUR(&r, 0, 0x81, 0x91, 0x01, 0x81, 0xa0, 0x02);
    CHECK_INT(rl_mpack_skip(&r, 3), 0);
    CHECK_INT(rl_mpack_left(&r), 0);
    // a count the bytes cannot back is found when its container is read, before any depth
    CUR(&r, 0, 0x91, 0x91, 0x91);
    CHECK_INT(rl_mpack_skip(&r, 2), RL_EPROTO);
    CHECK_INT(r.err.kind, RL_MPACK_EDEPTH);
    CUR(&r, 0, 0x91, 0x91);
    CHECK_INT(rl_mpack_skip(&r, 1), RL_EPROTO);
    CHECK_INT(r.err.kind, RL_MPACK_EDEPTH);
    CUR(&r, 0, 0x91);
    CHECK_INT(rl_mpack_skip(&r, 1), RL_EPROTO);
    CHECK_INT(r.err.kind, RL_MPACK_EBODY);
    CUR(&r, 0, 0x92, 0xcc, 0x05); // the second item of the array is missing
    CHECK_INT(rl_mpack_skip(&r, 2), RL_EPROTO);
    CHECK_INT(r.err.kind, RL_MPACK_EEND);
    CHECK_INT(r.err.at, 3);
    // the deepest limit allowed
    uint8_t deep[RL_MPACK_MAX_DEPTH + 1];
    memset(deep, 0x91, RL_MPACK_MAX_DEPTH);
    deep[RL_MPACK_MAX_DEPTH] = 0x00;
    rl_mpack_init(&r, deep, sizeof deep, 0);
    CHECK_INT(rl_mpack_skip(&r, RL_MPACK_MAX_DEPTH), RL_EPROTO);
    CHECK_INT(r.err.kind, RL_MPACK_EDEPTH);
    CHECK_INT(r.err.at, RL_MPACK_MAX_DEPTH);
    rl_mpack_init(&r, deep, sizeof deep - 1, 0);
    deep[RL_MPACK_MAX_DEPTH - 1] = 0x90;
    CHECK_INT(rl_mpack_skip(&r, RL_MPACK_MAX_DEPTH), 0);
    // no limit: 200000 levels walked with a count, not recursion (ASan would see a deep stack)
    size_t n = 200000;
    uint8_t *huge = malloc(n + 1);
    RL_ASSERT(huge);
    memset(huge, 0x91, n);
    huge[n] = 0xc0;
    rl_mpack_init(&r, huge, n + 1, 0);
    CHECK_INT(rl_mpack_skip(&r, 0), 0);
    CHECK_INT(rl_mpack_left(&r), 0);
    rl_mpack_init(&r, huge, n, 0);
    CHECK_INT(rl_mpack_skip(&r, 0), RL_EPROTO);
    CHECK_INT(r.err.kind, RL_MPACK_EBODY); // the innermost array's item is missing
    CHECK_INT(r.err.at, n - 1);
    CHECK_INT(r.off, 0);
    free(huge);
}

// A cursor is a value: a copy reads the same items again (a decoder's second pass).
static void test_copy(void) {
    rl_mpack_t r, again;
    CUR(&r, 0, 0x92, 0xa2, 'h', 'i', 0x2a);
    uint64_t n = 0, v = 0;
    const uint8_t *s;
    size_t len;
    CHECK_INT(rl_mpack_read_array(&r, 2, &n), 0);
    again = r;
    CHECK_INT(rl_mpack_read_str(&r, 9, &s, &len), 0);
    CHECK_INT(rl_mpack_read_uint(&r, 99, &v), 0);
    CHECK_INT(v, 42);
    CHECK_INT(rl_mpack_read_str(&again, 9, &s, &len), 0);
    CHECK(len == 2 && s[0] == 'h');
    CHECK_INT(rl_mpack_left(&again), 1);
}

int main(void) {
    RL_TEST_RUN(test_ints);
    RL_TEST_RUN(test_floats_and_others);
    RL_TEST_RUN(test_past_the_end);
    RL_TEST_RUN(test_truncation_everywhere);
    RL_TEST_RUN(test_depth);
    RL_TEST_RUN(test_copy);
    RL_TEST_DONE();
}
