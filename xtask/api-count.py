#!/usr/bin/env python3
"""Counts controller-runtime's public API, two ways (issue 45: a third fewer).

1. `pub` declarations: lines of controller-runtime/src that declare something
   `pub` (not `pub(crate)`, `pub(super)`, ...), tests included (they are few).
2. What a user can name, from rustdoc's HTML (run `cargo doc -p
   controller-runtime --no-deps` first, with the default features):
   - paths: one page per item per path a user can write it at (an item
     re-exported at three paths has three pages), plus the re-exports
     rustdoc lists instead of a page (`pub use` of a public item);
   - members: inherent methods, fields and variants on those pages, and
     the methods of the crate's own traits.

Usage: python3 xtask/api-count.py [TARGET_DIR]   (from the workspace root;
TARGET_DIR defaults to $CARGO_TARGET_DIR or target).
"""
import os
import re
import sys
from collections import Counter

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SRC = os.path.join(ROOT, "controller-runtime", "src")
PUB = re.compile(r"^\s*pub\s")
KINDS = ("struct", "enum", "trait", "fn", "macro", "type", "constant", "static",
         "union", "derive", "attr", "traitalias")


def pub_lines():
    n = 0
    for d, _, files in os.walk(SRC):
        for f in files:
            if f.endswith(".rs"):
                with open(os.path.join(d, f), encoding="utf-8") as fh:
                    n += sum(1 for line in fh if PUB.match(line))
    return n


def member_count(html, kind):
    # Inherent impls only: trait impls (Debug, Clone, ...) are not counted.
    start = html.find('id="implementations-list"')
    inherent = ""
    if start >= 0:
        ends = [i for i in (html.find('id="trait-implementations"', start),
                            html.find('id="synthetic-implementations"', start),
                            html.find('id="blanket-implementations"', start)) if i >= 0]
        inherent = html[start:min(ends) if ends else len(html)]
    n = len(set(re.findall(r'id="method\.([\w]+)"', inherent)))
    n += len(set(re.findall(r'id="structfield\.(\w+)"', html)))
    n += len(set(re.findall(r'id="variant\.(\w+)"', html)))
    if kind == "trait":
        n += len(set(re.findall(r'id="(?:tymethod|method|associatedtype|associatedconstant)\.(\w+)"',
                                html.split('id="implementors"')[0])))
    return n


def doc_counts(target):
    base = os.path.join(target, "doc", "controller_runtime")
    if not os.path.isdir(base):
        return None
    kinds, members = Counter(), 0
    for d, _, files in os.walk(base):
        for f in files:
            if f == "index.html":
                with open(os.path.join(d, f), encoding="utf-8") as fh:
                    kinds["reexport"] += len(set(re.findall(r'id="reexport\.(\w+)"', fh.read())))
                continue
            kind = f.split(".", 1)[0]
            if kind not in KINDS or not f.endswith(".html"):
                continue
            with open(os.path.join(d, f), encoding="utf-8") as fh:
                html = fh.read()
            if 'http-equiv="refresh"' in html:
                continue  # a redirect, not a path
            kinds[kind] += 1
            members += member_count(html, kind)
    return kinds, members


def main():
    target = sys.argv[1] if len(sys.argv) > 1 else os.environ.get(
        "CARGO_TARGET_DIR", os.path.join(ROOT, "target"))
    print(f"pub declarations in controller-runtime/src: {pub_lines()}")
    docs = doc_counts(target)
    if docs is None:
        print("rustdoc: no target/doc/controller_runtime (run cargo doc -p controller-runtime --no-deps)")
        return
    kinds, members = docs
    print(f"item paths (rustdoc pages): {sum(kinds.values())}  "
          + " ".join(f"{k}={v}" for k, v in sorted(kinds.items())))
    print(f"members (inherent methods, fields, variants, trait items): {members}")
    print(f"total public names: {sum(kinds.values()) + members}")


if __name__ == "__main__":
    main()
