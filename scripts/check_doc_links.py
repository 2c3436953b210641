#!/usr/bin/env python3
"""Check the documentation's links: every Markdown link `](target)` in README.md, CHANGELOG.md and
docs/**/*.md must be relative and resolve to a file in this repository (an anchor after `#` is not
checked; links inside fenced code blocks are skipped). Standard library only.

    python3 scripts/check_doc_links.py [REPO_ROOT]

Prints each bad link as FILE:LINE and a count; exits 1 if any link is bad.
"""
import glob
import os
import re
import sys

root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), ".."))
files = ["README.md", "CHANGELOG.md"] + sorted(
    os.path.relpath(path, root) for path in glob.glob(os.path.join(root, "docs", "**", "*.md"), recursive=True)
)
link = re.compile(r'\]\(([^)\s]+)(?:\s+"[^"]*")?\)')
bad = total = 0
for name in files:
    with open(os.path.join(root, name), encoding="utf-8") as handle:
        text = handle.read()
    text = re.sub(r"```.*?```", lambda block: "\n" * block.group(0).count("\n"), text, flags=re.S)
    for number, line in enumerate(text.split("\n"), 1):
        for target in link.findall(line):
            total += 1
            if re.match(r"^[A-Za-z][A-Za-z0-9+.-]*:", target) or target.startswith("//"):
                print(f"{name}:{number}: leaves the repository: {target}")
                bad += 1
                continue
            path = target.split("#", 1)[0]
            if not path:
                continue
            resolved = os.path.normpath(os.path.join(root, os.path.dirname(name), path))
            if not resolved.startswith(root + os.sep) or not os.path.isfile(resolved):
                print(f"{name}:{number}: does not resolve to a file in the repository: {target}")
                bad += 1
print(f"{total} links in {len(files)} files, {bad} bad")
sys.exit(1 if bad else 0)
