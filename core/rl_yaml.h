// rl_yaml — a small YAML document tree over libyaml, with the source position of every node.
// It exists because a recipe's errors must name file:line:column long after parsing, and
// libyaml's own document API drops what we need (scalar style, positions of keys). Aliases,
// custom tags and multi-document streams are refused; depth, node count and mapping size are
// capped so hostile input cannot exhaust memory or time; keys cannot hold NUL. Duplicate keys
// are kept in the tree (callers report them with both positions). This module knows nothing
// about recipes.
#ifndef RL_YAML_H
#define RL_YAML_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define RL_YAML_MAX_DEPTH 64         // nesting of maps and lists
#define RL_YAML_MAX_NODES 100000     // nodes in one document
#define RL_YAML_MAX_MAP_KEYS 1024    // pairs in one mapping (duplicate checks are quadratic)
#define RL_YAML_MAX_INPUT (16u << 20) // bytes of YAML text

typedef enum { RL_YAML_SCALAR = 0, RL_YAML_SEQ = 1, RL_YAML_MAP = 2 } rl_yaml_kind_t;

// What a scalar means under the recipe rules: quoted scalars are always strings; plain ones are
// null (empty, ~, null), bool (true/false in any of three casings), int (decimal, optional
// sign), float (decimal with fraction and/or exponent) or else strings. No octal, hex, yes/no.
typedef enum {
    RL_YAML_T_NULL = 0,
    RL_YAML_T_BOOL = 1,
    RL_YAML_T_INT = 2,
    RL_YAML_T_FLOAT = 3,
    RL_YAML_T_STRING = 4,
} rl_yaml_type_t;

typedef struct rl_yaml_node rl_yaml_node_t;
struct rl_yaml_node {
    rl_yaml_kind_t kind;
    const char *file;       // borrowed: the name given to rl_yaml_parse; must outlive the tree
    int line, col;          // 1-based position of the node's first character
    char *str;              // SCALAR: NUL-terminated text (owned)
    size_t len;             // SCALAR: bytes in str
    int plain;              // SCALAR: 1 when unquoted and untagged (its type is inferred)
    int n;                  // SEQ: items; MAP: key/value pairs
    int cap;                // allocated slots in kids
    rl_yaml_node_t **kids;  // SEQ: n items; MAP: 2n nodes, key i at 2i, its value at 2i+1
};

// Parses one YAML document from text[0..len). `file` names the source in positions (borrowed;
// must outlive the tree). `col0` is added to the columns of the first line (for a value that
// sits after "key=" on a command line). On success returns 0 and sets *out (NULL when the text
// holds no document). On failure returns RL_EINVAL (or RL_ENOMEM) and writes
// "file:line:col: what is wrong" into err. caller owns *out; free with rl_yaml_destroy.
int rl_yaml_parse(const char *text, size_t len, const char *file, int col0,
                  rl_yaml_node_t **out, char *err, size_t err_len);

// Creates a node (a SCALAR copies `str`, which may be NULL for an empty scalar).
// Returns NULL when out of memory. caller owns result; free with rl_yaml_destroy.
rl_yaml_node_t *rl_yaml_node_new(rl_yaml_kind_t kind, const char *file, int line, int col,
                                 const char *str, int plain);

// Appends `kid` to a SEQ (val == NULL) or the pair kid: val to a MAP. Takes ownership of kid
// and val on success; returns RL_ENOMEM (ownership stays with the caller) on failure.
int rl_yaml_append(rl_yaml_node_t *parent, rl_yaml_node_t *kid, rl_yaml_node_t *val);

// Returns the value of the first pair of MAP `map` whose key equals `key`, or NULL; when
// key_out is not NULL it receives the key node. borrowed; valid until the tree is destroyed.
rl_yaml_node_t *rl_yaml_map_get(const rl_yaml_node_t *map, const char *key,
                                rl_yaml_node_t **key_out);

// Classifies a scalar (see rl_yaml_type_t); a non-scalar gives RL_YAML_T_STRING.
rl_yaml_type_t rl_yaml_scalar_type(const rl_yaml_node_t *node);

// Returns a JSON value for the subtree (scalars typed by rl_yaml_scalar_type; integers that
// do not fit 64 bits become reals). Returns NULL when out of memory.
// caller owns result (a jansson json_t *, declared void * to keep jansson out of this header);
// free with json_decref.
void *rl_yaml_to_json(const rl_yaml_node_t *node);

// Frees the subtree; a no-op when *node_p is NULL; sets *node_p to NULL.
void rl_yaml_destroy(rl_yaml_node_t **node_p);

#ifdef __cplusplus
}
#endif
#endif
