#!/usr/bin/env bash
# Builds the HIP flavour of the sparkcomms native library.
#   ROCm >= 6 with hipcc: native/target/native/linux-x86_64/libsparkcomms_hip.so (gfx942, gfx950)
#   otherwise, with clang + HIP headers (Debian 12: clang-22 from bookworm-security, or clang-19,
#   and libamdhip64-dev): compiles the kernels as device code only (gfx942, plus gfx950 when the
#   compiler knows it: clang >= 20) down to AMDGPU assembly in native/target/native/hip-device/,
#   a compile check without a ROCm install.
# Exits 0 with a message when neither is available, so a Maven build without HIP succeeds.
# Skipped, with a one-line message, while the outputs are newer than every source (src/main/cpp,
# this script) and were built by the same compiler for the same archs.
# Env: HIPCC, CLANG_HIP (default: the newest of clang++-22 .. clang++-19 on PATH),
#      SC_HIP_ARCHS (default "gfx942 gfx950").
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
src="$here/src/main/cpp"
sources=("$src/library.cu" "$src/core/status.cc" "$src/core/param.cc")
out="$here/target/native"
lib_out="$out/linux-x86_64"
archs="${SC_HIP_ARCHS:-gfx942 gfx950}"
. "$here/build-stamp.sh"
stamp="$out/hip.stamp"
inputs=("$here/src/main/cpp" "${BASH_SOURCE[0]}" "$here/build-stamp.sh")

rocm_version() {
  local v=""
  if [[ -r /opt/rocm/.info/version ]]; then v=$(cat /opt/rocm/.info/version);
  elif command -v hipconfig >/dev/null 2>&1; then v=$(hipconfig --version 2>/dev/null || true); fi
  echo "${v%%-*}"
}

# Keeps the archs this compiler accepts ($1 = compiler, rest = extra flags).
supported_archs() {
  local cc=$1; shift
  local ok=()
  for a in $archs; do
    if echo 'extern "C" __global__ void k(){}' | "$cc" -x hip --offload-arch="$a" -nogpulib --offload-device-only \
         "$@" -S -o /dev/null - >/dev/null 2>&1; then ok+=("$a");
    else echo "[sparkcomms] $(basename "$cc") does not support $a: skipped" >&2; fi
  done
  echo "${ok[@]:-}"
}

hipcc="${HIPCC:-$(command -v hipcc 2>/dev/null || echo /opt/rocm/bin/hipcc)}"
ver="$(rocm_version)"
if [[ -x "$hipcc" && -n "$ver" && "${ver%%.*}" -ge 6 ]]; then
  mkdir -p "$lib_out"
  use=$(supported_archs "$hipcc")
  [[ -z "$use" ]] && { echo "[sparkcomms] hipcc supports none of: $archs; skipping"; exit 0; }
  flags=()
  for a in $use; do flags+=(--offload-arch="$a"); done
  config="$hipcc ROCm $ver archs=$use"
  if sc_stamp_fresh "$stamp" "$config" "$lib_out/libsparkcomms_hip.so" "${inputs[@]}"; then
    echo "[sparkcomms] HIP library up to date (no source newer than ${stamp#$here/}): hipcc skipped"
    exit 0
  fi
  sc_stamp_begin "$stamp" "$config"
  echo "[sparkcomms] ROCm $ver: building $lib_out/libsparkcomms_hip.so for $use"
  "$hipcc" -std=c++17 -O3 "${flags[@]}" -fPIC -shared -fvisibility=hidden -I"$src" \
    -o "$lib_out/libsparkcomms_hip.so" "${sources[@]}" -ldl -lpthread
  sc_stamp_commit "$stamp"
  echo "[sparkcomms] HIP build done"
  exit 0
fi

clang="${CLANG_HIP:-}"
if [[ -z "$clang" ]]; then
  for v in 22 21 20 19; do clang=$(command -v clang++-$v 2>/dev/null || true); [[ -n "$clang" ]] && break; done
fi
if [[ -n "$clang" && -r /usr/include/hip/hip_runtime.h ]]; then
  # Debian's HIP 5.x headers read __AMDGCN_WAVEFRONT_SIZE, which clang >= 21 no longer predefines;
  # every arch built here (gfx9) runs 64-wide wavefronts.
  wave=()
  predef=$(echo | "$clang" -x hip --offload-arch=gfx942 -nogpulib --offload-device-only -dM -E - 2>/dev/null || true)
  [[ $predef == *"__AMDGCN_WAVEFRONT_SIZE "* ]] || wave=(-D__AMDGCN_WAVEFRONT_SIZE=64)
  use=$(supported_archs "$clang")
  [[ -z "$use" ]] && { echo "[sparkcomms] $clang supports none of: $archs; skipping"; exit 0; }
  config="$clang $("$clang" --version | sed -n 1p) device-only archs=$use ${wave[*]}"
  dev_outputs=""
  for a in $use; do dev_outputs+=" $out/hip-device/sparkcomms-$a.s"; done
  if sc_stamp_fresh "$stamp" "$config" "$dev_outputs" "${inputs[@]}"; then
    echo "[sparkcomms] HIP device code up to date (no source newer than ${stamp#$here/}): $(basename "$clang") skipped"
    exit 0
  fi
  sc_stamp_begin "$stamp" "$config"
  mkdir -p "$out/hip-device"
  for a in $use; do
    echo "[sparkcomms] no ROCm >= 6: compiling device code only for $a with $(basename "$clang")"
    "$clang" -x hip --offload-arch="$a" -nogpulib --offload-device-only -std=c++17 -O3 -I"$src" \
      "${wave[@]}" -Wno-unused-command-line-argument -S -o "$out/hip-device/sparkcomms-$a.s" "$src/library.cu"
    n=$(grep -c '^[[:space:]]*\.amdhsa_kernel ' "$out/hip-device/sparkcomms-$a.s" || true)
    echo "[sparkcomms] $a: $n kernels compiled to AMDGPU assembly ($out/hip-device/sparkcomms-$a.s)"
  done
  sc_stamp_commit "$stamp"
  echo "[sparkcomms] HIP device-code check done (no host library without ROCm >= 6)"
  exit 0
fi

echo "[sparkcomms] neither hipcc (ROCm >= 6) nor clang++-19..22 with HIP headers found: skipping the HIP build"
echo "[sparkcomms]   (Debian 12: apt-get install clang-22 libamdhip64-dev for the device-code check)"
exit 0
