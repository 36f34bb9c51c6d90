#!/usr/bin/env bash
# Builds the CUDA flavour of the sparkcomms native library and its GPU test program.
#   native/target/native/linux-x86_64/libsparkcomms_cuda.so        (static cudart, sm_90; the product)
#   native/target/native/test/linux-x86_64/libsparkcomms_cuda.so   (the same with the sc_debug_* test
#                                                                    hooks, SC_DEBUG_HOOKS=1)
#   native/target/native/test/sc_gpu_test                           (C-level test + benchmark, linked
#                                                                    against the test build)
# The two libraries compile in parallel (one translation unit each: src/main/cpp/library.cu).
# Exits 0 with a message when nvcc is absent, so a Maven build without CUDA still succeeds.
# Skipped, with a one-line message, while the outputs are newer than every source (src/main/cpp,
# the GPU test program's sc_gpu_test.cpp and *.inc, this script) and were built with the same nvcc,
# archs and verbosity.
# Env: NVCC (default: nvcc on PATH or /usr/local/cuda/bin/nvcc), SC_CUDA_ARCHS (default "90"),
#      SC_GPU_VERBOSE=true (Maven: -Dsc.gpuVerbose=true): ptxas resource usage and spill warnings
#      of every kernel, printed (the rebuild it forces, and later skipped builds, show them).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
src="$here/src/main/cpp"
out="$here/target/native"
lib_out="$out/linux-x86_64"

nvcc="${NVCC:-}"
if [[ -z "$nvcc" ]]; then
  if command -v nvcc >/dev/null 2>&1; then nvcc="$(command -v nvcc)";
  elif [[ -x /usr/local/cuda/bin/nvcc ]]; then nvcc=/usr/local/cuda/bin/nvcc; fi
fi
if [[ -z "$nvcc" ]]; then
  echo "[sparkcomms] nvcc not found: skipping the CUDA library (set NVCC=... to build it)"
  exit 0
fi

archs="${SC_CUDA_ARCHS:-90}"
gencode=()
for a in $archs; do gencode+=(-gencode "arch=compute_${a},code=sm_${a}"); done

verbose=false
case "${SC_GPU_VERBOSE:-false}" in true|1|on|yes) verbose=true ;; esac

sources=("$src/library.cu" "$src/core/status.cc" "$src/core/param.cc")
flags=(-std=c++17 -O3 "${gencode[@]}" -cudart static -Xcompiler -fPIC -Xcompiler -fvisibility=hidden
  -Xcompiler -Wall -I"$src" -shared)
# ptxas' per-kernel report (registers, spills; mangled kernel names) only on request
[[ $verbose == true ]] && flags+=(-Xptxas -v,-warn-spills)
test_out="$out/test"
test_src="$here/src/test/cpp/sc_gpu_test.cpp"

. "$here/build-stamp.sh"
stamp="$out/cuda.stamp"
nvcc_version="$("$nvcc" --version | tail -1)"
config="$nvcc $nvcc_version archs=$archs verbose=$verbose"
outputs="$lib_out/libsparkcomms_cuda.so $test_out/linux-x86_64/libsparkcomms_cuda.so"
[[ -f "$test_src" ]] && outputs+=" $test_out/sc_gpu_test"
inputs=("$here/src/main/cpp" "$here"/src/test/cpp/sc_gpu_test.cpp "$here"/src/test/cpp/*.inc "${BASH_SOURCE[0]}" "$here/build-stamp.sh")
if sc_stamp_fresh "$stamp" "$config" "$outputs" "${inputs[@]}"; then
  echo "[sparkcomms] CUDA library up to date (no source newer than ${stamp#$here/}): nvcc skipped"
  [[ $verbose == true ]] && cat "$out/build-cuda.log"
  exit 0
fi
sc_stamp_begin "$stamp" "$config"

mkdir -p "$lib_out" "$test_out/linux-x86_64"
echo "[sparkcomms] $nvcc_version"
echo "[sparkcomms] building $lib_out/libsparkcomms_cuda.so and its test build for sm_${archs// /,sm_}"
"$nvcc" "${flags[@]}" -o "$lib_out/libsparkcomms_cuda.so" "${sources[@]}" \
  -Xlinker --exclude-libs=ALL -ldl -lpthread -lrt > "$out/build-cuda.log" 2>&1 &
product=$!
"$nvcc" "${flags[@]}" -DSC_DEBUG_HOOKS=1 -o "$test_out/linux-x86_64/libsparkcomms_cuda.so" "${sources[@]}" \
  -Xlinker --exclude-libs=ALL -ldl -lpthread -lrt > "$out/build-cuda-test.log" 2>&1 &
testlib=$!
rc=0
wait $product || rc=1
wait $testlib || rc=1
cat "$out/build-cuda.log"
[[ $rc -eq 0 ]] || { cat "$out/build-cuda-test.log"; echo "[sparkcomms] CUDA build failed"; exit 1; }
# Keep only the C ABI exported.
if command -v nm >/dev/null 2>&1; then
  bad=$(nm -D --defined-only "$lib_out/libsparkcomms_cuda.so" | awk '{print $3}' | grep -v '^sc_' | grep -v '^_' || true)
  [[ -n "$bad" ]] && echo "[sparkcomms] note: extra exported symbols: $(echo $bad | head -c 300)"
  if nm -D --defined-only "$lib_out/libsparkcomms_cuda.so" | grep -q ' sc_debug_'; then
    echo "[sparkcomms] the product library exports sc_debug_* test hooks"; exit 1
  fi
fi

if [[ -f "$test_src" ]]; then
  echo "[sparkcomms] building $test_out/sc_gpu_test"
  g++ -std=c++17 -O2 -Wall -Wextra -I"$src/include" -o "$test_out/sc_gpu_test" "$test_src" \
    -L"$test_out/linux-x86_64" -lsparkcomms_cuda -Wl,-rpath,'$ORIGIN/linux-x86_64' -Wl,-rpath,'$ORIGIN' -lpthread -ldl
fi
sc_stamp_commit "$stamp"
echo "[sparkcomms] CUDA build done"
