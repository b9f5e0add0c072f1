#!/usr/bin/env python3
"""cuemu_mutants: shows that the emulated gpu suites catch the bugs CUDA kernels get wrong. Each
mutant is one hand-planted edit of a scratch copy of model/cuda (a dropped or misplaced
__syncthreads, a short warp butterfly, a warp shuffle under divergence, an off-by-one on the
tail block, a wrong scan or mask); the script builds the emulated module from that copy (the
same transform and shim headers as CMake's build, tests/cuemu/cuemu.cmake) and runs the suite
that covers the kernel against it (RLCTL_CUDA_MODULE) under each thread order (CUEMU_ORDER). A
mutant is caught when the suite fails under some order (ctest runs the forward one). A missing
barrier is a race only in one direction, so one order may miss it (e.g. a tree reduction
without its barriers gives the right sum when its threads run last to first). Never part of ctest: it takes minutes, and the sources
are never touched.

usage: tests/cuemu/cuemu_mutants.py [BUILD_DIR] [MUTANT_NAME...]
  BUILD_DIR: a build with the gpu suites' executables (default build/release)
Prints a table (mutant, order, result, first failure line); exits 1 if a mutant is missed under
every order.
"""
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
ORDERS = ['forward', 'reverse', 'random:1']

# (name, file in model/cuda, old text (its first occurrence is replaced), new text, suite)
MUTANTS = [
    ('elt: sumsq tree without its barrier', 'rl_cuda_elt.cu',
     '''            sh[threadIdx.x] += sh[threadIdx.x + s];
        }
        __syncthreads();''',
     '''            sh[threadIdx.x] += sh[threadIdx.x + s];
        }''', 'elt'),
    ('elt: sumsq barrier inside the branch', 'rl_cuda_elt.cu',
     '''            sh[threadIdx.x] += sh[threadIdx.x + s];
        }
        __syncthreads();''',
     '''            sh[threadIdx.x] += sh[threadIdx.x + s];
            __syncthreads();
        }''', 'elt'),
    ('elt: warp butterfly one step short', 'rl_cuda_elt.cu',
     'for (int o = 16; o > 0; o >>= 1) {', 'for (int o = 16; o > 1; o >>= 1) {', 'elt'),
    ('elt: scale tail one past n', 'rl_cuda_elt.cu',
     'for (size_t i = s_tid(); i < n; i += s_stride()) {\n        x[i] = __fmul_rn(x[i], c);',
     'for (size_t i = s_tid(); i <= n; i += s_stride()) {\n        x[i] = __fmul_rn(x[i], c);',
     'elt'),
    ('lin: bias rows tail block one past', 'rl_cuda_lin.cu',
     'if (i < (size_t)N * (size_t)OC) {', 'if (i <= (size_t)N * (size_t)OC) {', 'core'),
    ('core: bf16 conversion misses the last element', 'rl_cuda.cu',
     '''    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        out[i] = __float2bfloat16_rn(in[i]);''',
     '''    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i + 1 < n;
         i += (size_t)gridDim.x * blockDim.x) {
        out[i] = __float2bfloat16_rn(in[i]);''', 'core'),
    ('head: block sum without its first barrier (sh reused)', 'rl_cuda_head.cu',
     '    __syncthreads(); // sh may still be read from the previous call\n', '', 'head'),
    ('head: block scan adds one lane short', 'rl_cuda_head.cu',
     'if (lane >= o) {', 'if (lane > o) {', 'head'),
    ('head: warp 0 shuffles with half its lanes', 'rl_cuda_head.cu',
     '''    if (wid == 0) {
        float x = lane < nw ? sh[lane] : -INFINITY;
        x = s_warp_max(x);''',
     '''    if (threadIdx.x < 16) {
        float x = lane < nw ? sh[lane] : -INFINITY;
        x = s_warp_max(x);''', 'head'),
    ('attn: forward reads k, v before the tile is loaded', 'rl_cuda_attn.cu',
     '''        s_load_rows(sv, v + (size_t)k0 * ks, (size_t)ks, nk, BC, D, ld, S_THREADS);
        __syncthreads();''',
     '''        s_load_rows(sv, v + (size_t)k0 * ks, (size_t)ks, nk, BC, D, ld, S_THREADS);''',
     'attn'),
    ('attn: forward loads the next tile over one still read', 'rl_cuda_attn.cu',
     '        __syncthreads(); // the previous tile\'s sk, sv, sp are read (and sq is written)\n',
     '', 'attn'),
    ('attn: causal mask drops the diagonal', 'rl_cuda_attn.cu',
     'k0 + tx + 16 * j <= tpos[i]', 'k0 + tx + 16 * j < tpos[i]', 'attn'),
    ('attn bf16: softmax reads the scores before the warp stored them', 'rl_cuda_attn.cu',
     '        __syncwarp();\n        // online softmax over this tile', '        // online softmax',
     'attn'),
    ('attn bf16: P V reads P before the warp wrote it', 'rl_cuda_attn.cu',
     '        __syncwarp(); // P and the rescaled O complete\n', '', 'attn'),
    ('attn bf16: a warp skips the tile that holds its last row', 'rl_cuda_attn.cu',
     '|| k0 > wlast) {', '|| (k0 >= wlast && k0 > 0)) {', 'attn'),
    ('attn bf16: causal mask drops the diagonal', 'rl_cuda_attn.cu',
     'k0 + col <= tpos', 'k0 + col < tpos', 'attn'),
    ('attn bf16: backward dV/dK read P^T, dS^T before the warp wrote them', 'rl_cuda_attn.cu',
     '            // P^T and dS^T complete\n            __syncwarp();\n', '', 'attn'),
    ('attn bf16: backward adds its gradients before the warp stored them', 'rl_cuda_attn.cu',
     '    __syncwarp(); // o stored\n', '', 'attn'),
    ('attn bf16: backward dQ mask drops the diagonal', 'rl_cuda_attn.cu',
     'if (row < nr && k0 + c <= q0 + row) {', 'if (row < nr && k0 + c < q0 + row) {', 'attn'),
    ('attn bf16: backward dK/dV warp skips a query tile it sees', 'rl_cuda_attn.cu',
     'q0 + nr - 1 < k0 + 16 * warp', 'q0 + nr - 1 < k0 + 16 * warp + 8', 'attn'),
    ('attn bf16: backward reads k unrounded', 'rl_cuda_attn.cu',
     '    s_load_rows<R16>(sk, k + ko, (size_t)ks, nk, BC, D, ld, S_THREADS);',
     '    s_load_rows(sk, k + ko, (size_t)ks, nk, BC, D, ld, S_THREADS);', 'attn'),
]

CXXFLAGS = ['-std=c++17', '-O2', '-fPIC', '-fvisibility=hidden', '-fvisibility-inlines-hidden',
            '-ffp-contract=off', '-w']


def run(cmd, **kw):
    return subprocess.run(cmd, check=True, **kw)


def build(src_dir, work, objs_cache):
    """The emulated module from the sources in src_dir; objects of unchanged files reused."""
    gen = os.path.join(work, 'gen')
    os.makedirs(gen, exist_ok=True)
    names = sorted(os.listdir(src_dir))
    for n in names:
        if n.endswith('.cuh'):
            run([sys.executable, os.path.join(HERE, 'cuemu_transform.py'),
                 os.path.join(src_dir, n), os.path.join(gen, n)])
    objs = []
    inc = ['-I' + gen, '-I' + os.path.join(HERE, 'include'), '-I' + src_dir]
    for n in names:
        if not n.endswith('.cu'):
            continue
        with open(os.path.join(src_dir, n), 'rb') as f:
            key = (n, hash(f.read()))
        if key not in objs_cache:
            cpp = os.path.join(gen, n + '.cpp')
            run([sys.executable, os.path.join(HERE, 'cuemu_transform.py'),
                 os.path.join(src_dir, n), cpp])
            obj = os.path.join(work, 'obj-%d-%s.o' % (len(objs_cache), n))
            run(['g++'] + CXXFLAGS + inc + ['-c', cpp, '-o', obj])
            objs_cache[key] = obj
        objs.append(objs_cache[key])
    for n in ['cuemu_block.cpp', 'cuemu_fiber.cpp', 'cuemu_runtime.cpp', 'cuemu_blaslt.cpp']:
        key = (n, 'runtime')
        if key not in objs_cache:
            obj = os.path.join(work, 'rt-' + n + '.o')
            run(['g++'] + CXXFLAGS + ['-O3'] + inc + ['-c', os.path.join(HERE, n), '-o', obj])
            objs_cache[key] = obj
        objs.append(objs_cache[key])
    so = os.path.join(work, 'librlctl_cuda_mutant.so')
    run(['g++', '-shared', '-o', so] + objs + ['-lpthread'])
    return so


def first_failure(text):
    """The emulator's report, else the suite's first failed check, else its last line."""
    for key in ('cuemu:', 'FAIL'):
        for line in text.splitlines():
            if key in line:
                return line[line.index(key):].strip()[:150]
    return text.strip().splitlines()[-1][:150] if text.strip() else ''


def main():
    args = sys.argv[1:]
    build_dir = os.path.abspath(args.pop(0) if args and os.path.isdir(args[0]) else
                                os.path.join(ROOT, 'build', 'release'))
    only = set(args)
    work = tempfile.mkdtemp(prefix='cuemu-mutants.')
    cache = {}
    missed = 0
    rows = []
    try:
        for name, fname, old, new, suite in MUTANTS:
            if only and name not in only:
                continue
            exe = os.path.join(build_dir, 'tests', 'test_model_cuda_' + suite)
            if not os.path.exists(exe):
                sys.exit('%s: not built (cmake --build %s --target test_model_cuda_%s)'
                         % (exe, build_dir, suite))
            src = os.path.join(work, 'src')
            shutil.rmtree(src, ignore_errors=True)
            shutil.copytree(os.path.join(ROOT, 'model', 'cuda'), src)
            path = os.path.join(src, fname)
            with open(path) as f:
                text = f.read()
            if old not in text:
                sys.exit('mutant "%s": its text is no longer in model/cuda/%s' % (name, fname))
            with open(path, 'w') as f:
                f.write(text.replace(old, new, 1))
            so = build(src, work, cache)
            for order in ORDERS:
                env = dict(os.environ, RLCTL_CUDA_MODULE=so, CUEMU_ORDER=order)
                p = subprocess.run([exe], env=env, stdout=subprocess.PIPE,
                                   stderr=subprocess.STDOUT, timeout=900)
                out = p.stdout.decode(errors='replace')
                caught = p.returncode != 0
                rows.append((name, order, 'caught (rc %d)' % p.returncode if caught else 'MISSED',
                             first_failure(out) if caught else ''))
                print('%-55s %-9s %-16s %s' % rows[-1], flush=True)
            missed += all(r[2] == 'MISSED' for r in rows if r[0] == name)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    n = len({r[0] for r in rows})
    print('%d of %d mutants caught under some order; %d of %d runs failed as they should'
          % (n - missed, n, sum(r[2] != 'MISSED' for r in rows), len(rows)))
    return 1 if missed else 0


if __name__ == '__main__':
    sys.exit(main())
