// rl_jinja_int — internals shared by the files of rl_jinja (not a public header): the arena, the
// failure path, the value model, tokens, the syntax tree and the render state.
//   rl_jinja.c          public API: compile, render, free
//   rl_jinja_value.c    arena, values, Python str()/repr(), equality and order, JSON in and out,
//                       UTF-8 and Unicode helpers
//   rl_jinja_lex.c      source -> tokens, with jinja2's whitespace control
//   rl_jinja_parse.c    tokens -> syntax tree (jinja2's grammar and precedence)
//   rl_jinja_scope.c    which frame owns each variable and how it starts (jinja2's symbols)
//   rl_jinja_eval.c     statements and expressions, scopes, loops, macros
//   rl_jinja_builtin.c  filters, tests, methods of str/dict/list, operators, global functions
//   rl_jinja_str.c      Python's str algorithms (strip, split, replace, %, format, int(), ...)
// Errors anywhere below the public API longjmp to the entry point: every allocation of a compile
// or a render lives in one arena that is freed whole, so unwinding leaks nothing.
#ifndef RL_JINJA_INT_H
#define RL_JINJA_INT_H

#include "rl_jinja.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

// ------------------------------------------------------------------------------------------
// arena and failure

typedef struct rl_jchunk rl_jchunk_t;
typedef struct {
    rl_jchunk_t *head;
    size_t total; // bytes obtained from malloc
    size_t limit; // 0 = unlimited
} rl_jarena_t;

// The failure path of one compile or render: fail() formats err and longjmps to jb.
typedef struct {
    jmp_buf jb;
    char *err;
    size_t err_len;
    const char *name; // template label for messages
    int code;         // RL_E* of the failure
} rl_jfail_t;

// Fails with "<name>:<line>:<col>: <message>" (line 0: no position). Never returns.
_Noreturn void rl_jfail(rl_jfail_t *f, int code, int line, int col, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

// Arena allocation of n zeroed bytes; fails through f (RL_ENOMEM or the memory limit).
void *rl_jalloc(rl_jarena_t *a, rl_jfail_t *f, size_t n);
void rl_jarena_free(rl_jarena_t *a);

// ------------------------------------------------------------------------------------------
// values

typedef enum {
    JV_UNDEF = 0, // jinja2's default Undefined
    JV_NONE,
    JV_BOOL,
    JV_INT,
    JV_FLOAT,
    JV_STR,    // k = 1: Markup (from |safe / |escape)
    JV_LIST,   // k = JL_*: list, tuple, range, dict views
    JV_DICT,   // insertion-ordered
    JV_GEN,    // one-shot iterator (generator / reverse iterator): no len, no indexing
    JV_NS,     // namespace(): mutable attributes
    JV_LOOP,   // the `loop` variable of a for block
    JV_MACRO,  // a {% macro %}
    JV_FUNC,   // a global function (range, dict, namespace, raise_exception, strftime_now)
    JV_METHOD, // a bound method: receiver + method id
} rl_jvtype_t;

enum { JL_LIST = 0, JL_TUPLE, JL_RANGE, JL_KEYS, JL_VALUES, JL_ITEMS };
enum { JG_GENERATOR = 0, JG_REVITER };

typedef struct rl_jstr rl_jstr_t;
typedef struct rl_jlist rl_jlist_t;
typedef struct rl_jdict rl_jdict_t;
typedef struct rl_jundef rl_jundef_t;
typedef struct rl_jloop rl_jloop_t;
typedef struct rl_jmacro rl_jmacro_t;
typedef struct rl_jv rl_jv_t;

struct rl_jv {
    uint8_t t;  // rl_jvtype_t
    uint8_t k;  // kind (see above)
    uint16_t m; // method / function id
    union {
        int64_t i; // BOOL, INT
        double f;
        rl_jstr_t *s;
        rl_jlist_t *l; // LIST, GEN
        rl_jdict_t *d; // DICT, NS
        rl_jundef_t *u;
        rl_jloop_t *loop;
        rl_jmacro_t *mac;
        rl_jv_t *recv; // METHOD
    } u;
};

struct rl_jstr {
    size_t n;   // bytes
    size_t ncp; // code points
    char p[];   // NUL-terminated
};

struct rl_jlist {
    size_t n;
    rl_jv_t *v;
    int64_t r0, r1, rs; // JL_RANGE: start, stop, step (for printing)
    int used;           // JV_GEN: consumed
};

struct rl_jdict {
    size_t n, cap;
    rl_jv_t *k, *v;
};

struct rl_jundef {
    const char *name; // variable, attribute or key (repr'd text for keys)
    const char *obj;  // "dict object" etc.; NULL for an undefined variable
    int element;      // 1: "has no element" (non-string key)
    const char *hint; // a full message instead of the above
};

// ------------------------------------------------------------------------------------------
// tokens

enum {
    JT_EOF = 0,
    JT_DATA,
    JT_VAR_BEGIN,
    JT_VAR_END,
    JT_BLOCK_BEGIN,
    JT_BLOCK_END,
    JT_NAME,
    JT_STRING,
    JT_INT,
    JT_FLOAT,
    JT_OP,
};

enum {
    JO_ADD = 1,
    JO_SUB,
    JO_DIV,
    JO_FLOORDIV,
    JO_MUL,
    JO_MOD,
    JO_POW,
    JO_TILDE,
    JO_LBRACKET,
    JO_RBRACKET,
    JO_LPAREN,
    JO_RPAREN,
    JO_LBRACE,
    JO_RBRACE,
    JO_EQ,
    JO_NE,
    JO_GT,
    JO_GTEQ,
    JO_LT,
    JO_LTEQ,
    JO_ASSIGN,
    JO_DOT,
    JO_COLON,
    JO_PIPE,
    JO_COMMA,
    JO_SEMICOLON,
};

typedef struct {
    uint8_t type;
    uint8_t op;
    int line, col;
    const char *s; // NAME (interned), STRING, DATA: NUL-terminated arena text
    size_t n;      // bytes of s
    int64_t i;
    double f;
} rl_jtok_t;

// Splits normalized source src[0..n) into tokens (arena). Returns the count; *toks_p ends with
// JT_EOF.
size_t rl_jlex(rl_jarena_t *a, rl_jfail_t *f, const char *src, size_t n, rl_jtok_t **toks_p);

// Operator text for messages ("+", "[", ...).
const char *rl_jop_text(int op);

// ------------------------------------------------------------------------------------------
// syntax tree

enum {
    // expressions
    JN_CONST = 1, // val
    JN_NAME,      // name
    JN_ATTR,      // a . name
    JN_ITEM,      // a [ b ]
    JN_SLICE,     // a : b : c (each may be NULL), only as JN_ITEM's b
    JN_CALL,      // a ( args, kw )
    JN_FILTER,    // a | name ( args, kw ); a NULL: the input of a filter block / set block
    JN_TEST,      // a is name ( args, kw )
    JN_NOT,
    JN_NEG,
    JN_POS,
    JN_BIN,  // a op b: JO_ADD SUB MUL DIV FLOORDIV MOD POW TILDE
    JN_AND,  // a and b
    JN_OR,   // a or b
    JN_CMP,  // a (ops[i] args[i])*: JO_EQ..JO_LTEQ, JN_IN, JN_NOTIN
    JN_COND, // b if a else c (c may be NULL)
    JN_LIST,
    JN_TUPLE,
    JN_DICT, // args = keys, kwv = values
    // statements
    JN_TEXT,        // val (a string)
    JN_OUT,         // {{ a }}
    JN_IF,          // if a: body, else: orelse (an elif is an JN_IF alone in orelse)
    JN_FOR,         // for a in b [if c]: body, else: orelse
    JN_SET,         // set a = b
    JN_SETBLOCK,    // set a [| filters b]: body
    JN_MACRO,       // macro name(params = defaults): body
    JN_FILTERBLOCK, // filter b: body
    JN_BREAK,
    JN_CONTINUE,
    JN_WITH,  // with targets (args) = values (kwv): body
    JN_NSREF, // a target: name . attr
    // comparison operators beyond JO_*
    JN_IN = 100,
    JN_NOTIN,
};

// The variables a frame (template, loop body, macro, set/filter/with block) declares at entry,
// and how each starts: a parameter (loop target, macro argument), resolved from the caller's
// variables, a copy of the enclosing frame's variable, or undefined.
enum { JD_PARAM = 1, JD_RESOLVE, JD_ALIAS, JD_UNDEFINED };
typedef struct {
    const char **names;
    uint8_t *modes;
    size_t n;
} rl_jframe_t;

typedef struct rl_jnode rl_jnode_t;
struct rl_jnode {
    uint8_t kind;
    uint8_t op;
    uint8_t varargs, kwargs; // JN_MACRO: the body reads varargs / kwargs
    int line, col;
    int fid; // filter / test id
    const char *name;
    const char *attr; // JN_NSREF
    rl_jnode_t *a, *b, *c;
    rl_jnode_t **args; // positional args / list items / dict keys / macro defaults (NULL = none)
    size_t nargs;
    rl_jnode_t **kwv; // keyword values / dict values
    const char **kwn; // keyword names / macro parameter names
    size_t nkw;
    uint8_t *ops; // JN_CMP
    rl_jnode_t **body, **orelse;
    size_t nbody, norelse;
    rl_jv_t val;
    uint8_t elif;       // JN_IF: written as {% elif %} of the enclosing if
    rl_jframe_t *fr[3]; // frames: JN_FOR body, filter test, else; JN_MACRO, JN_SETBLOCK,
                        // JN_FILTERBLOCK, JN_WITH: fr[0]
};

// Works out the frames of a parsed template (jinja2's symbol analysis); *root gets the
// template's own frame. Fails through f only on memory.
void rl_jscope_analyze(rl_jarena_t *a, rl_jfail_t *f, rl_jnode_t **body, size_t nbody,
                       rl_jframe_t **root);

// Parses tokens into the statements of the template. Fails through f.
rl_jnode_t **rl_jparse(rl_jarena_t *a, rl_jfail_t *f, const rl_jtok_t *toks, size_t ntok,
                       size_t *nbody);

// Filter and test tables (rl_jinja_builtin.c): id of a name, or -1 unknown; -2: jinja2 has it
// but this engine does not.
int rl_jfilter_id(const char *name);
int rl_jtest_id(const char *name);

// ------------------------------------------------------------------------------------------
// the compiled template

struct rl_jinja {
    rl_jarena_t arena;
    char *name;
    rl_jnode_t **body;
    size_t nbody;
    rl_jframe_t *frame; // the template's top-level frame
};

// ------------------------------------------------------------------------------------------
// render state

typedef struct rl_jscope rl_jscope_t;
struct rl_jscope {
    rl_jscope_t *parent;
    const char **k;
    rl_jv_t *v;
    size_t n, cap;
};

typedef struct {
    char *p;
    size_t n, cap;
} rl_jbuf_t;

struct rl_jmacro {
    const rl_jnode_t *def;
    rl_jscope_t *closure;
};

struct rl_jloop {
    int64_t index0, length;
    rl_jv_t *items; // the (filtered) items
    int64_t depth0;
    rl_jv_t changed_last;
    int has_changed;
};

typedef struct rl_jx {
    rl_jfail_t fail;
    rl_jarena_t arena;
    const rl_jinja_t *t;
    rl_jscope_t *root;  // template-level variables
    rl_jdict_t *ctx;    // the caller's variables
    rl_jbuf_t *out;     // where output goes now
    rl_jbuf_t *top;     // the template's output (bounded by max_output)
    rl_jscope_t *scope; // the innermost scope now
    size_t max_output;
    uint64_t steps, max_steps;
    int depth, max_depth;
    int fixed_now;
    int64_t now;
} rl_jx_t;

// Fails at node n (its line and column). Never returns.
_Noreturn void rl_jx_fail(rl_jx_t *x, const rl_jnode_t *n, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
void *rl_jx_alloc(rl_jx_t *x, size_t n);

// ---- construction
rl_jv_t rl_jv_undef(rl_jx_t *x, const char *name, const char *obj, int element, const char *hint);
rl_jv_t rl_jv_none(void);
rl_jv_t rl_jv_bool(int b);
rl_jv_t rl_jv_int(int64_t i);
rl_jv_t rl_jv_float(double f);
rl_jv_t rl_jv_str(rl_jx_t *x, const char *s, size_t n);
rl_jv_t rl_jv_strz(rl_jx_t *x, const char *s);
rl_jv_t rl_jv_str_cp(rl_jx_t *x, const char *s, size_t n, size_t ncp); // known code points
rl_jv_t rl_jv_list(rl_jx_t *x, int kind, size_t n);                    // n items, all none
rl_jv_t rl_jv_gen(rl_jx_t *x, int kind, size_t n);
rl_jv_t rl_jv_dict(rl_jx_t *x, size_t cap);
void rl_jdict_set(rl_jx_t *x, rl_jdict_t *d, rl_jv_t k, rl_jv_t v); // insert or replace
// value of key k or NULL
rl_jv_t *rl_jdict_get(rl_jx_t *x, const rl_jdict_t *d, rl_jv_t k);
rl_jv_t *rl_jdict_gets(const rl_jdict_t *d, const char *k, size_t n);

// JSON -> value (deep copy into the render arena). Fails on nesting beyond max_depth.
rl_jv_t rl_jv_from_json(rl_jx_t *x, const json_t *j, int depth);

// ---- text
void rl_jbuf_put(rl_jx_t *x, rl_jbuf_t *b, const char *s, size_t n);
void rl_jbuf_puts(rl_jx_t *x, rl_jbuf_t *b, const char *s);
void rl_jbuf_putc(rl_jx_t *x, rl_jbuf_t *b, char c);
void rl_jbuf_printf(rl_jx_t *x, rl_jbuf_t *b, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
rl_jv_t rl_jbuf_take(rl_jx_t *x, rl_jbuf_t *b); // the buffer's text as a string value

// Python str(v) / repr(v) appended to b; n is the node for errors (values that jinja2 prints as
// an object address fail).
void rl_jv_write_str(rl_jx_t *x, const rl_jnode_t *n, rl_jbuf_t *b, rl_jv_t v);
void rl_jv_write_repr(rl_jx_t *x, const rl_jnode_t *n, rl_jbuf_t *b, rl_jv_t v, int depth);
rl_jv_t rl_jv_to_str(rl_jx_t *x, const rl_jnode_t *n, rl_jv_t v); // str(v); strings as is
void rl_jfloat_repr(double f, char *out, size_t out_len);         // Python repr(float)

// json.dumps(v, ensure_ascii, indent, separators, sort_keys) appended to b. indent NULL: none.
void rl_jv_write_json(rl_jx_t *x, const rl_jnode_t *n, rl_jbuf_t *b, rl_jv_t v, const char *indent,
                      const char *item_sep, const char *key_sep, int sort_keys, int ensure_ascii,
                      int level);

// ---- Python semantics
int rl_jv_truthy(rl_jv_t v);
int rl_jv_eq(rl_jx_t *x, const rl_jnode_t *n, rl_jv_t a, rl_jv_t b, int depth);
// a < b as Python; fails on types without an order
int rl_jv_lt(rl_jx_t *x, const rl_jnode_t *n, rl_jv_t a, rl_jv_t b, int depth);
const char *rl_jv_type_name(rl_jv_t v); // Python type name: "str", "dict", "NoneType", ...
const char *rl_jv_obj_desc(rl_jv_t v);  // jinja2's object_type_repr: "dict object", "None"
int rl_jv_is_number(rl_jv_t v);         // int, float or bool
double rl_jv_num(rl_jv_t v);            // as double (int / float / bool)
// The message of an undefined value, as jinja2 words it.
const char *rl_jundef_msg(rl_jx_t *x, rl_jv_t v);
// Fails with the undefined error of v (jinja2's UndefinedError).
_Noreturn void rl_jv_undef_fail(rl_jx_t *x, const rl_jnode_t *n, rl_jv_t v);

// Items of an iterable as an array (strings: one string per code point; dicts: keys; undefined:
// none; generators: consumed). Fails for non-iterables with Python's message.
rl_jv_t *rl_jv_iter(rl_jx_t *x, const rl_jnode_t *n, rl_jv_t v, size_t *count);
// len(v), or fails (-1 never returned).
int64_t rl_jv_len(rl_jx_t *x, const rl_jnode_t *n, rl_jv_t v);

// ---- UTF-8 and Unicode
size_t rl_jutf8_dec(const char *s, size_t n, uint32_t *cp);       // bytes of one code point (>= 1)
size_t rl_jutf8_enc(uint32_t cp, char *out);                      // bytes written (1..4)
size_t rl_jutf8_count(const char *s, size_t n);                   // code points
size_t rl_jutf8_offset(const char *s, size_t n, size_t cp_index); // byte offset of code point
int rl_jutf8_valid(const char *s, size_t n, size_t *bad_at);
int rl_jis_space(uint32_t cp); // Python str.isspace
// Python's case class of a code point: 'U' uppercase, 'L' lowercase, 'T' titlecase, 0 uncased.
int rl_jcase_kind(uint32_t cp);
// Python str.upper/lower/capitalize/title/jinja title; fail through x for unsupported specials
rl_jv_t rl_jstr_case(rl_jx_t *x, const rl_jnode_t *n, rl_jv_t s, int how);
enum { JC_UPPER, JC_LOWER, JC_CAPITALIZE, JC_PYTITLE, JC_JTITLE, JC_SWAPCASE };

// ------------------------------------------------------------------------------------------
// evaluation (rl_jinja_eval.c) and builtins (rl_jinja_builtin.c)

rl_jv_t rl_jeval(rl_jx_t *x, const rl_jnode_t *n);
// The scope of frame fr entered below parent, its variables initialized.
rl_jscope_t *rl_jscope_enter(rl_jx_t *x, rl_jscope_t *parent, const rl_jframe_t *fr);
void rl_jexec_body(rl_jx_t *x, rl_jnode_t **body, size_t nbody, rl_jscope_t *scope);
// Calls a callable value with evaluated arguments (kwn[i] names kwv[i]).
rl_jv_t rl_jcall(rl_jx_t *x, const rl_jnode_t *n, rl_jv_t fn, rl_jv_t *args, size_t nargs,
                 const char **kwn, rl_jv_t *kwv, size_t nkw);
// obj.name and obj[key] as the sandboxed environment does them.
rl_jv_t rl_jgetattr(rl_jx_t *x, const rl_jnode_t *n, rl_jv_t obj, const char *name);
rl_jv_t rl_jgetitem(rl_jx_t *x, const rl_jnode_t *n, rl_jv_t obj, rl_jv_t key);
// Applies filter / test fid to v.
rl_jv_t rl_jfilter(rl_jx_t *x, const rl_jnode_t *n, int fid, rl_jv_t v, rl_jv_t *args, size_t nargs,
                   const char **kwn, rl_jv_t *kwv, size_t nkw);
int rl_jtest(rl_jx_t *x, const rl_jnode_t *n, int tid, rl_jv_t v, rl_jv_t *args, size_t nargs,
             const char **kwn, rl_jv_t *kwv, size_t nkw);
// A bound method (attribute `name` of obj) or 0 when obj has no such method; fails for methods
// Python has but this engine does not.
int rl_jmethod_lookup(rl_jx_t *x, const rl_jnode_t *n, rl_jv_t obj, const char *name, rl_jv_t *out);
rl_jv_t rl_jmethod_call(rl_jx_t *x, const rl_jnode_t *n, rl_jv_t m, rl_jv_t *args, size_t nargs,
                        const char **kwn, rl_jv_t *kwv, size_t nkw);
rl_jv_t rl_jfunc_call(rl_jx_t *x, const rl_jnode_t *n, rl_jv_t fn, rl_jv_t *args, size_t nargs,
                      const char **kwn, rl_jv_t *kwv, size_t nkw);
// Global function by name (range, dict, namespace, raise_exception, strftime_now, ...), or 0.
int rl_jglobal(const char *name, rl_jv_t *out);
// Python's binary operators (JO_ADD ...) and `in`.
rl_jv_t rl_jbinop(rl_jx_t *x, const rl_jnode_t *n, int op, rl_jv_t a, rl_jv_t b);
int rl_jcontains(rl_jx_t *x, const rl_jnode_t *n, rl_jv_t container, rl_jv_t item);
// Python printf-style formatting: fmt % args.
rl_jv_t rl_jpercent(rl_jx_t *x, const rl_jnode_t *n, rl_jv_t fmt, rl_jv_t args);

// Argument checks shared by builtins: v must be a str / an int (bool counts), and must not be a
// Markup string; they fail with Python's TypeError (an undefined v: its UndefinedError).
const char *rl_jneed_str(rl_jx_t *x, const rl_jnode_t *n, rl_jv_t v, const char *what);
int64_t rl_jneed_int(rl_jx_t *x, const rl_jnode_t *n, rl_jv_t v, const char *what);
void rl_jno_markup(rl_jx_t *x, const rl_jnode_t *n, rl_jv_t v, const char *what);

// ------------------------------------------------------------------------------------------
// Python's str algorithms (rl_jinja_str.c); strings are UTF-8 values, indexes are code points

// A string's code points and their byte offsets (off[n] = bytes), in the render arena.
typedef struct {
    uint32_t *cp;
    size_t *off;
    size_t n;
} rl_jcps_t;
rl_jcps_t rl_jstr_decode(rl_jx_t *x, rl_jv_t s);
size_t rl_jstr_cp_index(const rl_jcps_t *c, size_t byte); // code point at a byte offset
// Byte offset of needle in hay[from..to), searching from the end when reverse; -1 if absent.
int64_t rl_jstr_find(const char *hay, size_t from, size_t to, const char *nd, size_t nn,
                     int reverse);
// Python's start/end arguments args[first], args[first + 1] as code point bounds of len.
void rl_jstr_bounds(rl_jx_t *x, const rl_jnode_t *n, size_t len, rl_jv_t *args, size_t nargs,
                    size_t first, size_t *lo, size_t *hi);
// str.strip (which: 1 left, 2 right, 3 both; chars NONE: whitespace), str.replace (count < 0:
// all), str.split / rsplit (sep NONE: whitespace runs; maxsplit < 0: no limit),
// str.splitlines, str.center / ljust / rjust (how 0 / 1 / 2; fill NONE: space).
rl_jv_t rl_jstr_strip(rl_jx_t *x, const rl_jnode_t *n, rl_jv_t s, rl_jv_t chars, int which);
rl_jv_t rl_jstr_replace(rl_jx_t *x, rl_jv_t s, rl_jv_t old, rl_jv_t nw, int64_t count);
rl_jv_t rl_jstr_split(rl_jx_t *x, const rl_jnode_t *n, rl_jv_t s, rl_jv_t sep, int64_t maxsplit,
                      int reverse);
rl_jv_t rl_jstr_splitlines(rl_jx_t *x, rl_jv_t s, int keepends);
rl_jv_t rl_jstr_pad(rl_jx_t *x, const rl_jnode_t *n, rl_jv_t s, int64_t width, rl_jv_t fill,
                    int how);
// markupsafe.escape: & < > " ' as entities; the result is a Markup string.
rl_jv_t rl_jstr_escape(rl_jx_t *x, rl_jv_t s);
// int(s) in base 10: 1 and *out, 0 for Python's ValueError, -1 beyond 64 bits. float(s): 1 or 0.
int rl_jstr_parse_int(const char *p, size_t n, int64_t *out);
int rl_jstr_parse_float(const char *p, size_t n, double *out);
// str.format with {} / {0} / {name} fields and !s / !r (format specs are refused).
rl_jv_t rl_jstr_format(rl_jx_t *x, const rl_jnode_t *n, rl_jv_t fmt, rl_jv_t *args, size_t nargs,
                       const char **kwn, rl_jv_t *kwv, size_t nkw);

#endif
