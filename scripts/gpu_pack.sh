#!/usr/bin/env bash
# Packs what scripts/gpu_check.sh runs on a GPU machine, built HERE: the GPU machines have CUDA
# but no package registry and none of our Debian libraries, so the gpu test programs, rlctl, the
# CUDA module and every shared library they need (from ldd; not glibc's, not CUDA's) go into
# .gpu/ (bin/, lib/), which git ignores and the device tool carries (`carry: [".gpu"]`).
# Usage: bash scripts/gpu_pack.sh   (then, on the GPU machine: bash scripts/gpu_check.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
root="$(pwd)"
grep -qx '/.gpu/' .git/info/exclude 2>/dev/null || echo '/.gpu/' >> .git/info/exclude
bash scripts/setup.sh --tests >/dev/null
cmake -S . -B build/gpu -DCMAKE_BUILD_TYPE=Release -DRL_WERROR=ON >build/gpu.configure.log 2>&1 ||
  { cat build/gpu.configure.log; exit 1; }
grep -q "building the CUDA module" build/gpu.configure.log ||
  { echo "gpu_pack: CMake found no CUDA toolkit: nothing to pack" >&2; exit 1; }
cmake --build build/gpu -j "${RL_JOBS:-$(nproc)}" 2>&1 | tail -n 5
rm -rf .gpu && mkdir -p .gpu/bin .gpu/lib
ctest --test-dir build/gpu -L gpu -N 2>/dev/null | sed -nE 's/^ *Test +#[0-9]+: (.*)$/\1/p' \
  > .gpu/gpu_tests.txt
cp build/gpu/rlctl build/gpu/librlctl_cuda.so build/gpu/bench/bench_gpu .gpu/bin/
while read -r suite; do
  cp "build/gpu/tests/test_${suite//./_}" .gpu/bin/
done < .gpu/gpu_tests.txt
strip --strip-unneeded .gpu/bin/* 2>/dev/null || true
# shared libraries: everything ldd resolves that a bare CUDA machine may lack
skip='^(linux-vdso|ld-linux|libc\.|libm\.|libdl\.|libpthread\.|librt\.|libutil\.|libresolv\.|libcuda\.|libcublas|libcudart|libnvidia)'
for f in .gpu/bin/*; do
  ldd "$f" 2>/dev/null | awk '/=> \// {print $1, $3}'
done | sort -u | while read -r lib path; do
  [[ "$lib" =~ $skip ]] && continue
  cp -L "$path" .gpu/lib/ 2>/dev/null || true
done
strip --strip-unneeded .gpu/lib/* 2>/dev/null || true
# the device tool carries at most 64 MiB with the working tree (~28 MiB of tracked files): the
# pack travels as one .tar.xz in .gpu/ (gpu_check.sh unpacks it)
nb=$(ls .gpu/bin | wc -l)
nl=$(ls .gpu/lib | wc -l)
tar -C .gpu -cJf /tmp/rlctl-gpu.tar.xz bin lib gpu_tests.txt
rm -rf .gpu && mkdir .gpu && mv /tmp/rlctl-gpu.tar.xz .gpu/pack.tar.xz
size=$(du -sm .gpu/pack.tar.xz | cut -f1)
tree=$(git ls-files -z | du -cm --files0-from=- | tail -n 1 | cut -f1)
echo "gpu_pack: $nb programs, $nl libraries in .gpu/pack.tar.xz, ${size} MiB" \
     "(the working tree: ${tree} MiB)"
[ $((size + tree)) -lt 62 ] ||
  { echo "gpu_pack: pack and working tree together pass the device tool's 64 MiB" >&2; exit 1; }
