#!/usr/bin/env bash
# Builds and runs param_test (the parameter table and the grammar of setting values, host C++ only)
# with a clean environment, so that settings of the calling shell cannot change its defaults.
set -euo pipefail
here="$(cd "$(dirname "$0")/../../.." && pwd)"
out="$here/target/native-test"
mkdir -p "$out"
"${CXX:-g++}" -std=c++17 -O1 -Wall -Wextra -Werror -I"$here/src/main/cpp" -o "$out/param_test" \
  "$here/src/test/cpp/param_test.cc" "$here/src/main/cpp/core/param.cc"
env -i PATH="$PATH" "$out/param_test" "$here/src/test/resources/setting-values.tsv"
