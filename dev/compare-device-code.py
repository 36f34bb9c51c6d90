#!/usr/bin/env python3
"""Compares the device code of two builds of the library, kernel by kernel.

usage: dev/compare-device-code.py A B
  A, B: sm_90 cubins (nvcc -cubin -gencode arch=compute_90,code=sm_90 ...), PTX (nvcc -ptx), or
        AMDGPU assembly (.s, from native/build-hip.sh's device-code check).

Identical files pass at once. Otherwise PTX and AMDGPU assembly are split into kernels (PTX
`.entry`, AMDGPU `.type name,@function` .. `.Lfunc_end`; comments dropped) and each kernel's text
is compared, so that kernels which only moved within the file still pass; a cubin that differs
fails (compare the PTX then). Exit status 0 when every kernel is identical.
"""
import re, sys

def kernels(path):
    text = open(path, errors="replace").read()
    if path.endswith(".ptx"):
        parts = re.split(r"\n(?=(?:\.visible |\.weak )?\.entry )", text)
        return {re.match(r"(?:\.visible |\.weak )?\.entry (\w+)", p).group(1): p for p in parts[1:]}
    funcs = {}
    for m in re.finditer(r"\.type\s+(\S+),@function\n(.*?)\.Lfunc_end", text, re.S):
        funcs[m.group(1)] = re.sub(r"^\s*;.*$", "", m.group(2), flags=re.M)
    return funcs

def main():
    a, b = sys.argv[1], sys.argv[2]
    if open(a, "rb").read() == open(b, "rb").read():
        print(f"{a} and {b}: identical files")
        return 0
    if a.endswith(".cubin"):
        print(f"{a} and {b} differ: compare their PTX (nvcc -ptx) kernel by kernel")
        return 1
    fa, fb = kernels(a), kernels(b)
    only_a, only_b = sorted(set(fa) - set(fb)), sorted(set(fb) - set(fa))
    differ = sorted(k for k in set(fa) & set(fb) if fa[k] != fb[k])
    print(f"{a}: {len(fa)} kernels; {b}: {len(fb)} kernels")
    for k in only_a: print("only in", a, k)
    for k in only_b: print("only in", b, k)
    for k in differ: print("differs:", k)
    same = not (only_a or only_b or differ)
    print("every kernel identical" if same else "device code DIFFERS")
    return 0 if same else 1

if __name__ == "__main__":
    sys.exit(main())
