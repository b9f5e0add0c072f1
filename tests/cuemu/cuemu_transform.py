#!/usr/bin/env python3
"""cuemu_transform: one source file of the CUDA module (model/cuda/*.cu, *.cuh) rewritten so that
g++ compiles it against cuemu's headers (tests/cuemu/include), at build time; the sources are
never edited. Only what g++ cannot parse changes, on the same lines (so that g++'s messages and
__LINE__ point at the original, which a #line directive names):

  kernel<<<grid, block[, smem[, stream]]>>>(args);
      -> ::cuemu::launch("kernel", ::cuemu::config(grid, block[, smem[, stream]]), kernel, args);
  extern __shared__ T name[];
      -> T *const name = (T *)::cuemu::dynamic_shared();
  #pragma unroll [n]
      -> (an empty line: an unrolling hint to nvcc, which g++ would warn about)

Comments and string literals are left alone. Anything else with `<<<` or `extern __shared__` in
it is refused (exit 1, naming the file and line), never passed on half rewritten.

usage: cuemu_transform.py IN OUT
"""
import os
import re
import sys


def mask(src):
    """src with every comment and string or character literal replaced by spaces (newlines
    kept), so that searches see code only and offsets stay the same."""
    out = list(src)
    i, n = 0, len(src)
    while i < n:
        c = src[i]
        if src.startswith('//', i):
            j = src.find('\n', i)
            j = n if j < 0 else j
        elif src.startswith('/*', i):
            j = src.find('*/', i + 2)
            j = n if j < 0 else j + 2
        elif c in '"\'':
            j = i + 1
            while j < n and src[j] != c:
                j += 2 if src[j] == '\\' else 1
            j += 1
        else:
            i += 1
            continue
        for k in range(i, min(j, n)):
            if out[k] != '\n':
                out[k] = ' '
        i = j
    return ''.join(out)


def fail(path, src, pos, why):
    line = src.count('\n', 0, pos) + 1
    sys.stderr.write('%s:%d: cuemu_transform: %s\n' % (path, line, why))
    sys.exit(1)


def close_of(code, i, open_c, close_c):
    """Index just past the bracket matching code[i] == open_c, counting () [] {} nesting."""
    depth = 0
    for j in range(i, len(code)):
        if code[j] == open_c:
            depth += 1
        elif code[j] == close_c:
            depth -= 1
            if depth == 0:
                return j + 1
    return -1


def kernel_before(code, end):
    """(start, name) of the kernel expression ending at `end` (before `<<<`): an identifier,
    possibly qualified, possibly with template arguments."""
    j = end
    while j > 0 and code[j - 1].isspace():
        j -= 1
    stop = j
    if j > 0 and code[j - 1] == '>':  # template arguments: back to the matching '<'
        depth = 0
        while j > 0:
            j -= 1
            if code[j] == '>':
                depth += 1
            elif code[j] == '<':
                depth -= 1
                if depth == 0:
                    break
        if depth != 0:
            return -1, None
    m = re.search(r'(::)?[A-Za-z_]\w*(::[A-Za-z_]\w*)*\s*$', code[:j])
    if not m:
        return -1, None
    return m.start(), re.sub(r'\s+', '', code[m.start():stop])


def transform(path, src):
    code = mask(src)
    edits = []  # (start, end, text), on src

    for m in re.finditer(r'\bextern\s+__shared__\b', code):
        semi = code.find(';', m.end())
        decl = code[m.end():semi] if semi >= 0 else ''
        d = re.fullmatch(r'\s*(?:__align__\s*\(\s*\d+\s*\)\s*)?([A-Za-z_][\w\s:]*?)'
                         r'(?:\s*__align__\s*\(\s*\d+\s*\))?\s+(\w+)\s*\[\s*\]\s*', decl)
        if not d:
            fail(path, src, m.start(), 'an extern __shared__ declaration other than '
                 '`extern __shared__ T name[];`')
        typ, name = d.group(1).strip(), d.group(2)
        edits.append((m.start(), semi + 1, '%s *const %s = (%s *)::cuemu::dynamic_shared();'
                      % (typ, name, typ)))

    for m in re.finditer(r'(?m)^[ \t]*#[ \t]*pragma[ \t]+unroll\b.*$', code):
        edits.append((m.start(), m.end(), ''))  # a hint to nvcc; g++ would warn

    for m in re.finditer(r'<<<', code):
        start, name = kernel_before(code, m.start())
        if start < 0:
            fail(path, src, m.start(), 'a launch whose kernel is not a name (with template '
                 'arguments)')
        cfg_end = code.find('>>>', m.end())
        if cfg_end < 0:
            fail(path, src, m.start(), 'a launch without >>>')
        cfg = src[m.end():cfg_end]
        j = cfg_end + 3
        while j < len(code) and code[j].isspace():
            j += 1
        if j >= len(code) or code[j] != '(':
            fail(path, src, m.start(), 'a launch without its argument list')
        args_end = close_of(code, j, '(', ')')
        if args_end < 0:
            fail(path, src, m.start(), 'a launch whose argument list does not close')
        args = src[j + 1:args_end - 1]
        text = '::cuemu::launch("%s", ::cuemu::config(%s), %s' % (name, cfg.strip(), src[start:
                                                                  m.start()].rstrip())
        text += (', ' + args if args.strip() else '') + ')'
        # keep the line count: the launch's newlines go after it
        lost = src.count('\n', start, args_end) - text.count('\n')
        edits.append((start, args_end, text + '\n' * max(lost, 0)))

    edits.sort()
    for a, b in zip(edits, edits[1:]):
        if a[1] > b[0]:
            fail(path, src, b[0], 'overlapping rewrites')
    out, at = [], 0
    for s, e, t in edits:
        out.append(src[at:s])
        out.append(t)
        at = e
    out.append(src[at:])
    return ''.join(out), len(edits)


def main():
    if len(sys.argv) != 3:
        sys.stderr.write('usage: cuemu_transform.py IN OUT\n')
        return 2
    path, dst = sys.argv[1], sys.argv[2]
    with open(path, encoding='utf-8') as f:
        src = f.read()
    out, _ = transform(path, src)
    text = '#line 1 "%s"\n%s' % (os.path.abspath(path), out)
    tmp = dst + '.tmp'
    with open(tmp, 'w', encoding='utf-8') as f:
        f.write(text)
    os.replace(tmp, dst)
    return 0


if __name__ == '__main__':
    sys.exit(main())
