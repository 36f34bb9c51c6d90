#!/usr/bin/env bash
# Executes every notebook of examples/notebooks headlessly with the Java kernel
# (io.github.padreati:rapaio-jupyter-kernel:3.0.1 from Maven Central, installed here if missing) and
# compares each executed copy with the committed one (compare-notebooks.py: same cells, no error,
# every cell that had text or image output still has it). Executed copies go to
# examples/target/notebooks/.
#   run-notebooks.sh [NAME.ipynb...]           execute and compare (default: every notebook);
#                                              exit 1 on any difference or cell error
#   run-notebooks.sh --update [NAME.ipynb...]  execute, check for cell errors, and write the executed
#                                              notebooks over the committed ones (commit them so)
# Needs: jupyter nbconvert (Debian: jupyter-nbconvert python3-nbclient python3-nbformat
# python3-ipykernel), Java 17, Maven, and the build (mvn -B -DskipTests package: examples/target/lib
# and examples/target/sparkcomms-examples-classpath.jar, which the notebooks load).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
version=3.0.1
out="$root/examples/target/notebooks"
update=0
if [[ ${1:-} == --update ]]; then update=1; shift; fi
notebooks=()
for a in "$@"; do
  [[ -f "$here/$(basename "$a")" && $a == *.ipynb ]] || { echo "usage: $0 [--update] [NAME.ipynb...]" >&2; exit 2; }
  notebooks+=("$here/$(basename "$a")")
done
(( ${#notebooks[@]} )) || notebooks=("$here"/*.ipynb)

if [[ ! -f "$root/examples/target/sparkcomms-examples-classpath.jar" ]]; then
  echo "run-notebooks: build first: (cd $root && mvn -B -DskipTests package)" >&2
  exit 2
fi
# The Python that has nbformat (jupyter's own, Debian's /usr/bin/python3, where another python3
# comes first on PATH).
py=python3
if ! "$py" -c 'import nbformat' 2>/dev/null; then py=/usr/bin/python3; fi

kdir="${JUPYTER_DATA_DIR:-$HOME/.local/share/jupyter}/kernels/rapaio-jupyter-kernel"
jar="$kdir/rapaio-jupyter-kernel-$version.jar"
if [[ ! -f "$jar" ]]; then
  echo "run-notebooks: installing rapaio-jupyter-kernel $version"
  mvn -B -q dependency:copy -Dartifact="io.github.padreati:rapaio-jupyter-kernel:$version" \
    -DoutputDirectory="$root/examples/target/kernel"
  (cd "$root/examples/target/kernel" && java -jar "rapaio-jupyter-kernel-$version.jar" -i -auto >/dev/null)
fi
# The kernel's channel loops (shell, control, heartbeat) run in its class LoopThread, which in
# 3.0.1 can end at start-up: the thread may test its running flag before its starter sets it, and
# an early kernel_info_request (before the kernel registers its handlers) throws out of the loop.
# Either leaves the kernel bound to its ports but deaf, a stall at start-up (measured: 10 of 22
# starts on a loaded 2-core machine; in each stall jstack showed the shell or control loop thread
# gone). kernel-patch/ holds a LoopThread without both; it goes ahead of the
# kernel jar on the class path (measured: 10 of 10 starts answered, twice, in 6 to 18 s; kernel-starts.py
# repeats that check).
patch_src="$here/kernel-patch/org/rapaio/jupyter/kernel/channels/LoopThread.java"
patch_class="$kdir/patch/org/rapaio/jupyter/kernel/channels/LoopThread.class"
if [[ ! -f "$patch_class" || "$patch_src" -nt "$patch_class" ]]; then
  javac --release 17 -nowarn -cp "$jar" -d "$kdir/patch" "$patch_src"
fi
# kernel.json: the patched class path, and the flags code inside the kernel's JVM needs: the
# Java 17 --add-opens Spark needs, a headless AWT (the charts) and a larger thread stack
# (rewritten on every run: idempotent).
"$py" - "$kdir/kernel.json" "$kdir/patch:$jar" <<'PY'
import json, sys
p, cp = sys.argv[1], sys.argv[2]
k = json.load(open(p))
flags = ["-Djava.awt.headless=true", "-Xss4m"] + ["--add-opens=java.base/%s=ALL-UNNAMED" % m for m in
         ("java.lang", "java.lang.invoke", "java.io", "java.net", "java.nio", "java.util", "java.util.concurrent",
          "sun.nio.ch", "sun.nio.cs", "sun.security.action", "sun.util.calendar")]
k["argv"] = ["java"] + flags + ["-cp", cp, "org.rapaio.jupyter.kernel.MainApp", "{connection_file}"]
json.dump(k, open(p, "w"), indent=2)
PY

mkdir -p "$out"

# Executes one notebook into $out (no per-cell timing metadata: it would change on every run). The
# cell limit is generous: the training cell takes about 2 minutes on a loaded 2-core machine.
execute() {
  local nb=$1 name=$2
  jupyter nbconvert --to notebook --execute "$nb" --output-dir "$out" --output "$name" \
      --ExecutePreprocessor.kernel_name=rapaio-jupyter-kernel --ExecutePreprocessor.record_timing=False \
      --ExecutePreprocessor.timeout=600 --ExecutePreprocessor.startup_timeout=60 >"$out/$name.log" 2>&1
}

failed=0
for nb in "${notebooks[@]}"; do
  name="$(basename "$nb")"
  start=$SECONDS
  if ! execute "$nb" "$name"; then
    echo "notebook $name: FAILED to execute ($((SECONDS - start)) s); log: $out/$name.log" >&2
    tail -20 "$out/$name.log" >&2 || true
    failed=1
    continue
  fi
  if [[ $update == 1 ]]; then
    if "$py" - "$out/$name" <<'PY'
import sys, nbformat
nb = nbformat.read(sys.argv[1], as_version=4)
errors = [o for c in nb.cells for o in c.get("outputs", []) if o.get("output_type") == "error"]
if errors:
    print("cell error: %s: %s" % (errors[0].get("ename"), errors[0].get("evalue")), file=sys.stderr)
    sys.exit(1)
PY
    then
      # the committed copy names paths relative to the notebook, not this machine's checkout
      sed "s#$here/##g" "$out/$name" >"$nb"
      echo "notebook $name: executed and written back ($((SECONDS - start)) s, $(wc -c <"$nb") bytes)"
    else
      echo "notebook $name: FAILED: cell error, not written back" >&2
      failed=1
    fi
  elif "$py" "$here/compare-notebooks.py" "$nb" "$out/$name"; then
    echo "notebook $name: OK ($((SECONDS - start)) s)"
  else
    echo "notebook $name: FAILED: the executed notebook differs from the committed one ($((SECONDS - start)) s)" >&2
    failed=1
  fi
done
exit $failed
