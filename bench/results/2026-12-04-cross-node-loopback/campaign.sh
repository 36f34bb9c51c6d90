#!/usr/bin/env bash
# allReduce across simulated nodes on one machine, through Spark (local-cluster, 4 executor JVMs,
# one task each), float32 SUM 1 KB-16 MB, three layouts of the same 4 ranks:
#   one node     every rank shares memory (no node names: the plain host backend)
#   flat         every rank a node of its own: every byte over Spark's network library on loopback
#   two nodes    2 x 2: shared memory inside each node, the network between them
# then LoopbackCheck fits the cost model to the first two and predicts the third.
# Run from the repository root after `mvn -B -DskipTests install`: bench/results/<dir>/campaign.sh [OUT]
# (OUT: where the files go; default this script's folder).
set -euo pipefail
out="${1:-$(cd "$(dirname "$0")" && pwd)}"
mkdir -p "$out"
sweep=(--spark --master 'local-cluster[4,1,1024]' -b 1K -e 16M -w 20)
bin/sparkcomms-bench "${sweep[@]}" --csv "$out/one-node.csv" > "$out/one-node.log" 2>&1
SPARKCOMMS_SUBMIT_OPTS="--conf spark.sparkcomms.node.names=0=a,1=b,2=c,3=d" \
  bin/sparkcomms-bench "${sweep[@]}" --csv "$out/flat.csv" > "$out/flat.log" 2>&1
SPARKCOMMS_SUBMIT_OPTS="--conf spark.sparkcomms.node.names=0=n0,1=n0,2=n1,3=n1" \
  bin/sparkcomms-bench "${sweep[@]}" --csv "$out/two-nodes.csv" > "$out/two-nodes.log" 2>&1
java -cp "examples/target/sparkcomms-examples-0.1.0-SNAPSHOT.jar:examples/target/lib/*" \
  io.sparkcomms.examples.scaling.LoopbackCheck "$out/one-node.csv" "$out/flat.csv" "$out/two-nodes.csv" 2 "$out" \
  | tee "$out/loopback-check.txt"
