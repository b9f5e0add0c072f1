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
cp build/gpu/rlctl build/gpu/librlctl_cuda.so build/gpu/librlctl_mpi.so build/gpu/bench/bench_gpu \
  .gpu/bin/
while read -r suite; do
  cp "build/gpu/tests/test_${suite//./_}" .gpu/bin/
done < .gpu/gpu_tests.txt
strip --strip-unneeded .gpu/bin/* 2>/dev/null || true
# Open MPI, which starts a mesh's ranks (mesh.gpu): mpirun and orted, the components a run on
# one host uses (not the network fabrics': ucx, ofi, openib, psm) and the help texts, under a
# prefix of their own that gpu_check.sh names in OPAL_PREFIX; Debian's external PMIx's components
# (its zlib compression) in a folder of their own (PMIX_MCA_mca_base_component_path: PMIx does
# not relocate). Their shared libraries join the others below. Checked here with the system's Open
# MPI hidden (bind mounts in a mount namespace): mesh.gpu ran from the unpacked pack alone.
ompi_lib=$(ompi_info --path libdir --parsable 2>/dev/null | sed -n 's/^path:libdir://p')
pmix=$(dirname "$(readlink -f "$(ldconfig -p | awk '/libpmix\.so\.2 /{print $NF; exit}')")")
if [ -x "$(command -v orterun)" ] && [ -d "$ompi_lib/openmpi3" ]; then
  rel=${ompi_lib#/usr/}
  mkdir -p .gpu/ompi/bin ".gpu/ompi/$rel/openmpi3" .gpu/ompi/share
  cp -L "$(command -v orterun)" .gpu/ompi/bin/mpirun
  cp -L "$(command -v orted)" .gpu/ompi/bin/orted
  for f in "$ompi_lib"/openmpi3/*.so; do
    [[ "$(basename "$f")" =~ (ucx|ofi|openib|psm|reachable_netlink) ]] && continue
    cp -L "$f" ".gpu/ompi/$rel/openmpi3/"
  done
  cp -r /usr/share/openmpi .gpu/ompi/share/
  if [ -d "$pmix/pmix" ]; then
    mkdir -p .gpu/pmix/lib
    cp -rL "$pmix/pmix" .gpu/pmix/lib/
  fi
  strip --strip-unneeded .gpu/ompi/bin/* ".gpu/ompi/$rel"/openmpi3/*.so 2>/dev/null || true
else
  echo "gpu_pack: no Open MPI here (orterun, $ompi_lib/openmpi3): mesh.gpu will skip there" >&2
fi
# shared libraries: everything ldd resolves that a bare CUDA machine may lack
skip='^(linux-vdso|ld-linux|libc\.|libm\.|libdl\.|libpthread\.|librt\.|libutil\.|libresolv\.|libcuda\.|libcublas|libcudart|libnvidia)'
for f in .gpu/bin/* $(find .gpu/ompi .gpu/pmix -type f \( -name '*.so' -o -path '*/bin/*' \) \
                       2>/dev/null); do
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
tar -C .gpu -cJf /tmp/rlctl-gpu.tar.xz bin lib gpu_tests.txt $(cd .gpu && ls -d ompi pmix 2>/dev/null)
rm -rf .gpu && mkdir .gpu && mv /tmp/rlctl-gpu.tar.xz .gpu/pack.tar.xz
size=$(du -sm .gpu/pack.tar.xz | cut -f1)
tree=$(git ls-files -z | du -cm --files0-from=- | tail -n 1 | cut -f1)
echo "gpu_pack: $nb programs, $nl libraries in .gpu/pack.tar.xz, ${size} MiB" \
     "(the working tree: ${tree} MiB)"
[ $((size + tree)) -lt 62 ] ||
  { echo "gpu_pack: pack and working tree together pass the device tool's 64 MiB" >&2; exit 1; }
