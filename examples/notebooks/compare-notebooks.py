#!/usr/bin/env python3
"""Compares a freshly executed notebook with its committed copy, structurally.

usage: compare-notebooks.py COMMITTED.ipynb EXECUTED.ipynb

Passes (exit 0) when: the committed copy has outputs (it was committed executed); both have the same
cells (count, types and sources); the fresh copy has no error output; and every code cell that had
output in the committed copy has output of the same kinds in the fresh copy, a kind being "text"
(stream text, or a text/plain, text/html or text/markdown result) or "image" (image/png). The values
themselves are not compared: timings and losses vary from run to run. Output a fresh cell has beyond
the committed kinds is reported, not failed on. Fails (exit 1) with one line per difference.
"""
import sys

import nbformat

TEXT_TYPES = ("text/plain", "text/html", "text/markdown")


def kinds(cell):
    out = set()
    for o in cell.get("outputs", []):
        t = o.get("output_type")
        if t == "stream":
            out.add("text")
        elif t in ("display_data", "execute_result"):
            data = o.get("data", {})
            if "image/png" in data:
                out.add("image")
            elif any(k in data for k in TEXT_TYPES):
                out.add("text")
        elif t == "error":
            out.add("error")
    return out


def source(cell):
    s = cell.get("source", "")
    return "".join(s) if isinstance(s, list) else s


def compare(committed, fresh, name):
    problems, notes = [], []
    code = [c for c in committed.cells if c.cell_type == "code"]
    if not any(c.get("outputs") for c in code):
        problems.append("the committed notebook has no outputs: commit it executed "
                        "(examples/notebooks/run-notebooks.sh --update)")
    if len(committed.cells) != len(fresh.cells):
        problems.append("%d cells committed, %d executed" % (len(committed.cells), len(fresh.cells)))
        return problems, notes
    for i, (a, b) in enumerate(zip(committed.cells, fresh.cells), 1):
        where = "cell %d" % i
        if a.cell_type != b.cell_type:
            problems.append("%s: %s committed, %s executed" % (where, a.cell_type, b.cell_type))
            continue
        if source(a) != source(b):
            problems.append("%s: the source differs from the committed one" % where)
        if a.cell_type != "code":
            continue
        ka, kb = kinds(a), kinds(b)
        if "error" in kb:
            err = next(o for o in b.outputs if o.get("output_type") == "error")
            problems.append("%s: error %s: %s" % (where, err.get("ename"), err.get("evalue")))
        if "error" in ka:
            problems.append("%s: the committed copy holds an error output" % where)
        missing = sorted((ka - {"error"}) - kb)
        if missing:
            problems.append("%s: committed with %s output, executed without it (executed: %s)"
                            % (where, " and ".join(missing), ", ".join(sorted(kb)) or "no output"))
        extra = sorted(kb - ka - {"error"})
        if extra:
            notes.append("%s: %s output that the committed copy lacks" % (where, " and ".join(extra)))
    return problems, notes


def main(argv):
    if len(argv) != 3:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    committed = nbformat.read(argv[1], as_version=4)
    fresh = nbformat.read(argv[2], as_version=4)
    name = argv[1].rsplit("/", 1)[-1]
    problems, notes = compare(committed, fresh, name)
    for n in notes:
        print("compare-notebooks: %s: note: %s" % (name, n))
    for p in problems:
        print("compare-notebooks: %s: %s" % (name, p), file=sys.stderr)
    if problems:
        return 1
    images = sum(1 for c in fresh.cells for o in c.get("outputs", []) if "image/png" in o.get("data", {}))
    print("compare-notebooks: %s: same structure as committed (%d cells, %d images)"
          % (name, len(fresh.cells), images))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
