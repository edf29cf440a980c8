#!/usr/bin/env python3
"""Rewrites the quoted examples in README.md and docs/**/*.md from the regions they name in
examples/.

A quote is a fenced block right after `<!-- snippet: examples/<file>.cpp#<name> -->`; the
region is the lines between `// [<name>]` and `// [/<name>]`. The Docs_Snippets test checks the
same rule, so run this after editing an example.
"""
import pathlib
import re

root = pathlib.Path(__file__).resolve().parent.parent


def region(path, name):
    out, inside = [], False
    for line in (root / path).read_text().splitlines():
        if line.strip() == f"// [{name}]":
            inside = True
            continue
        if line.strip() == f"// [/{name}]":
            return out
        if inside:
            out.append(line)
    raise SystemExit(f"{path} has no region [{name}]")


for doc in [root / "README.md"] + sorted((root / "docs").rglob("*.md")):
    lines = doc.read_text().splitlines()
    out, i = [], 0
    while i < len(lines):
        out.append(lines[i])
        m = re.search(r"<!-- snippet: (\S+)#(\S+) -->", lines[i])
        if m and i + 1 < len(lines) and lines[i + 1].startswith("```"):
            out.append(lines[i + 1])
            j = i + 2
            while j < len(lines) and not lines[j].startswith("```"):
                j += 1
            out.extend(region(m.group(1), m.group(2)))
            out.append(lines[j])
            i = j + 1
            continue
        i += 1
    doc.write_text("\n".join(out) + "\n")
