#!/usr/bin/env bash
# Spark GPU discovery script for AMD and NVIDIA GPUs (sparkcomms).
#
# Prints {"name":"gpu","addresses":["0","1",...]}: the device ordinals this process sees.
#   AMD:    amd-smi list, else rocm-smi --showbus, else the KFD sysfs topology
#           (/sys/class/kfd/kfd/topology/nodes/*/properties with simd_count > 0).
#   NVIDIA: nvidia-smi --query-gpu=index,pci.bus_id (used when no AMD GPU is found).
# Visibility: ROCR_VISIBLE_DEVICES, then HIP_VISIBLE_DEVICES (or CUDA_VISIBLE_DEVICES) for AMD;
# CUDA_VISIBLE_DEVICES for NVIDIA. Entries count in order up to the first invalid or repeated one;
# an empty value hides every GPU.
#
# Usage: discover-gpus.sh [RESOURCE_NAME]   (default: gpu)
#   spark.executor.resource.gpu.discoveryScript=/path/to/discover-gpus.sh
# Overrides (tests): SPARKCOMMS_SYSFS_ROOT (prefix of /sys), SPARKCOMMS_AMD_SMI, SPARKCOMMS_ROCM_SMI,
# SPARKCOMMS_NVIDIA_SMI (tool paths; when set, PATH is not searched for that tool).
# Same logic as io.sparkcomms.spark.GpuDiscoveryPlugin.
set -u

name="${1:-gpu}"
sysfs_root="${SPARKCOMMS_SYSFS_ROOT:-}"

# tool VAR NAME: prints the executable to use for NAME, or nothing.
tool() {
  local override="${!1-__unset__}"
  if [ "$override" != "__unset__" ]; then
    [ -x "$override" ] && printf '%s' "$override"
    return 0
  fi
  command -v "$2" 2>/dev/null || true
}

# run CMD...: runs a vendor tool with a time limit where `timeout` exists (a wedged driver can hang it).
run() {
  if command -v timeout >/dev/null 2>&1; then timeout 20 "$@"; else "$@"; fi
}

# Physical GPU counts per source; the first source that finds GPUs wins.
amd_smi_count() {
  local t; t="$(tool SPARKCOMMS_AMD_SMI amd-smi)"
  [ -n "$t" ] || return 1
  local out; out="$(run "$t" list 2>/dev/null)" || return 1
  local n; n="$(printf '%s\n' "$out" | grep -Ec '^[[:space:]]*GPU:[[:space:]]*[0-9]+[[:space:]]*$')"
  [ "$n" -gt 0 ] && echo "$n"
}

rocm_smi_count() {
  local t; t="$(tool SPARKCOMMS_ROCM_SMI rocm-smi)"
  [ -n "$t" ] || return 1
  local out; out="$(run "$t" --showbus 2>/dev/null)" || return 1
  local n; n="$(printf '%s\n' "$out" | grep -Eo '^[[:space:]]*GPU\[[0-9]+\]' | tr -d ' \t' | sort -u | wc -l)"
  [ "$n" -gt 0 ] && echo "$n"
}

kfd_count() {
  local dir="$sysfs_root/sys/class/kfd/kfd/topology/nodes"
  [ -d "$dir" ] || return 1
  local n=0 props simd
  for props in "$dir"/*/properties; do
    [ -r "$props" ] || continue
    simd="$(awk '$1 == "simd_count" {print $2}' "$props")"
    [ -n "$simd" ] && [ "$simd" -gt 0 ] && n=$((n + 1))
  done
  [ "$n" -gt 0 ] && echo "$n"
}

nvidia_smi_count() {
  local t; t="$(tool SPARKCOMMS_NVIDIA_SMI nvidia-smi)"
  [ -n "$t" ] || return 1
  local out; out="$(run "$t" --query-gpu=index,pci.bus_id --format=csv,noheader 2>/dev/null)" || return 1
  local n; n="$(printf '%s\n' "$out" | grep -Ec '^[[:space:]]*[0-9]+')"
  [ "$n" -gt 0 ] && echo "$n"
}

# visible COUNT VAR: how many of COUNT devices stay visible under variable VAR (unset: all).
visible() {
  local count="$1" var="$2"
  if [ -z "${!var+x}" ]; then echo "$count"; return; fi
  local spec="${!var}" n=0 seen=" " e parts=()
  IFS=',' read -ra parts <<< "$spec"
  for e in "${parts[@]}"; do
    e="${e//[[:space:]]/}"
    [ -n "$e" ] || break
    case "$seen" in *" $e "*) break ;; esac
    seen="$seen$e "
    if [[ "$e" =~ ^[0-9]+$ ]]; then
      [ "${#e}" -le 9 ] && [ "$((10#$e))" -lt "$count" ] || break
    elif [[ "$e" == -* ]]; then
      break
    fi
    n=$((n + 1))
  done
  # An empty value hides every device.
  [ -n "$spec" ] || n=0
  echo "$n"
}

count=""
if count="$(amd_smi_count || rocm_smi_count || kfd_count)"; then
  count="$(visible "$count" ROCR_VISIBLE_DEVICES)"
  if [ -n "${HIP_VISIBLE_DEVICES+x}" ]; then
    count="$(visible "$count" HIP_VISIBLE_DEVICES)"
  else
    count="$(visible "$count" CUDA_VISIBLE_DEVICES)"
  fi
elif count="$(nvidia_smi_count)"; then
  count="$(visible "$count" CUDA_VISIBLE_DEVICES)"
else
  count=0
fi

addresses=""
for ((i = 0; i < count; i++)); do
  addresses="$addresses${addresses:+,}\"$i\""
done
printf '{"name":"%s","addresses":[%s]}\n' "$name" "$addresses"
