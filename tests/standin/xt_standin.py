#!/usr/bin/env python3
"""Stand-in for the vendor tools xt-clang++ and xt-pkg-loadlib (tests only).

Invoked under either name, it records its argv as JSON in
``<output>.argv.json`` beside each file it is asked to write, and writes
small placeholder outputs, so a build with TOOLCHAIN=xtensa can run here and
its commands can be compared with the Neuron SDK's build driver, build_custom_op.py token by token.
"""
import json
import os
import sys


def _write(path, text):
    with open(path, "w") as f:
        f.write(text)
    with open(path + ".argv.json", "w") as f:
        json.dump({"tool": os.path.basename(sys.argv[0]), "argv": sys.argv[1:]}, f)


def main(argv):
    tool = os.path.basename(sys.argv[0])
    outputs = []
    for flag in ("-o", "-s"):
        if flag in argv:
            outputs.append(argv[argv.index(flag) + 1])
    if not outputs:
        sys.stderr.write(f"{tool} stand-in: no output named\n")
        return 2
    for out in outputs:
        _write(out, f"{tool} placeholder\n")
    if tool == "xt-clang++" and "-MMD" in argv and "-c" in argv:
        obj = outputs[0]
        src = argv[-1]
        with open(os.path.splitext(obj)[0] + ".d", "w") as f:
            f.write(f"{obj}: {src}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
