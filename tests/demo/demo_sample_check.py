#!/usr/bin/env python3
"""The demo sample of docs/demo.md is what the demo prints: every label in it
(the first column of a table row, a scenario's title and setup, its `why:`
line, each check) must be text that chainctl (its demo command,
client/chainctl/demo_command.cc, and the commands it runs) prints
today. Numbers vary from run to run and are not compared; a label that no
source prints any more (the sample went stale) fails with its line.

    demo_sample_check.py REPO_ROOT
"""
import re
import sys
from pathlib import Path

root = Path(sys.argv[1])
page = (root / "docs/demo.md").read_text()
start = page.index("pasted as printed (`[...]` marks lines left out; times vary):\n\n")
sample = page[start:page.index("\nThe other scenarios:", start)].split("\n")[2:]

sources = sorted((root / "client/chainctl").glob("*.cc"))
text = "\n".join(p.read_text() for p in sources)
# Adjacent C++ string literals are one string.
text = re.sub(r'"\s*\n\s*"', "", text)

NUMBER = re.compile(r"\d+(?:\.\d+)?")
# Names the demo fills in at run time.
FILLED = re.compile(r"\b(?:gateway|orders|ledger|baseline|hopbudget|chainctl|[a-d])\b")


def fragments(cell):
    for part in FILLED.split(NUMBER.sub("\0", cell)):
        for piece in part.split("\0"):
            piece = piece.strip(" ()=:,;.x")
            if len(re.sub(r"[^A-Za-z]", "", piece)) >= 3:
                yield piece


missing = []
for line in sample:
    body = line.strip()
    if not body or body == "[...]":
        continue
    if body.startswith(("ok ", "!! ")):
        cells = [body[3:].strip()]
    elif body.startswith(("why:", "==", "(")) or not re.search(r"\S {2,}\S", body):
        cells = [body]  # a line of text, not a table row
    else:
        cells = [re.split(r" {2,}", body)[0]]  # a row: its label
    for cell in cells:
        for piece in fragments(cell):
            if piece not in text:
                missing.append(f"  {piece!r}\n    in: {body}")

if missing:
    print("docs/demo.md demo sample: text that no demo source prints (regenerate the sample from "
          "a run of ./scripts/demo.sh --once):")
    print("\n".join(missing))
    sys.exit(1)
print(f"ok: {sum(1 for l in sample if l.strip() and l.strip() != '[...]')} sample lines, "
      "every label printed by the demo")
