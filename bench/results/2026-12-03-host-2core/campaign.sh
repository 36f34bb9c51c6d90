#!/usr/bin/env bash
# The host allReduce runs of record: 2 rank processes, 1 KB..64 MB, the library's choice (auto) and
# the TCP baseline side by side, once on the otherwise idle machine and once with hog.sh running (one
# busy loop per core at the default priority). Run from the repository root after
# `mvn -B -DskipTests package`; writes idle-N.txt/.csv and hog-N.txt/.csv next to this script, N the
# first argument (default 1).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
sweep() {
  local name=$1
  { date -u '+# %Y-%m-%d %H:%M:%S UTC'; echo "# load average before: $(cut -d' ' -f1-3 /proc/loadavg)"; } >"$here/$name.txt"
  bin/sparkcomms-bench --backend host --ranks 2 -b 1K -e 64M -f 4 --algo auto --baseline tcp \
    --target-time 0.5 --csv "$here/$name.csv" >>"$here/$name.txt" 2>&1
}
n=${1:-1}
sweep "idle-$n"
"$here/hog.sh" & hog=$!
trap 'pkill -P "$hog" 2>/dev/null; kill "$hog" 2>/dev/null' EXIT
sleep 1
sweep "hog-$n"
