#!/usr/bin/env python3
"""The README's and the docs pages' C++ code compiles: every ```cpp block of
README.md and docs/*.md must be preceded by a line `<!-- snippet: NAME -->`
and equal, line for line, the region between `// [START NAME]` and
`// [END NAME]` of examples/readme_snippets.cc (which every build
compiles), with the region's common indentation removed.

  python3 check_snippets.py ROOT            # check (ctest)
  python3 check_snippets.py ROOT --update   # rewrite the README's blocks
                                            # from the compiled code
"""
import glob
import re
import sys
import textwrap


def regions(code):
    out = {}
    for m in re.finditer(r"^[ \t]*// \[START (\w+)\]\n(.*?)^[ \t]*// \[END \1\]\n", code,
                         re.M | re.S):
        out[m.group(1)] = textwrap.dedent(m.group(2))
    return out


def blocks(readme):
    """(name or None, text) of every ```cpp block."""
    lines = readme.split("\n")
    out = []
    i = 0
    while i < len(lines):
        if lines[i] == "```cpp":
            name = None
            j = i - 1
            m = re.fullmatch(r"<!-- snippet: (\w+) -->", lines[j]) if j >= 0 else None
            if m:
                name = m.group(1)
            end = lines.index("```", i + 1)
            out.append((name, "\n".join(lines[i + 1:end]) + "\n"))
            i = end
        i += 1
    return out


def update(path, readme, code):
    """Replaces every named block whose region exists with the region."""
    lines = readme.split("\n")
    out = []
    i = 0
    while i < len(lines):
        out.append(lines[i])
        m = re.fullmatch(r"<!-- snippet: (\w+) -->", lines[i])
        if m and i + 1 < len(lines) and lines[i + 1] == "```cpp" and m.group(1) in code:
            end = lines.index("```", i + 2)
            out.append("```cpp")
            out.extend(code[m.group(1)].rstrip("\n").split("\n"))
            out.append("```")
            i = end
        i += 1
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(out))


def main():
    root = sys.argv[1]
    code = regions(open(f"{root}/examples/readme_snippets.cc", encoding="utf-8").read())
    pages = [f"{root}/README.md"] + sorted(glob.glob(f"{root}/docs/*.md"))
    errors = []
    total = 0
    for path in pages:
        page = path[len(root) + 1:]
        text = open(path, encoding="utf-8").read()
        if len(sys.argv) > 2 and sys.argv[2] == "--update":
            update(path, text, code)
            text = open(path, encoding="utf-8").read()
        found = blocks(text)
        total += len(found)
        for name, block in found:
            if name is None:
                errors.append(f"{page}: a ```cpp block without <!-- snippet: NAME --> right "
                              f"before it:\n{block}")
            elif name not in code:
                errors.append(f"{page}: snippet '{name}': examples/readme_snippets.cc has no "
                              "such region")
            elif block != code[name]:
                errors.append(f"{page}: snippet '{name}' differs from examples/readme_snippets.cc\n"
                              f"--- {page}\n{block}--- compiled code\n{code[name]}")
        if page == "README.md" and not found:
            errors.append("no ```cpp block in README.md")
    for e in errors:
        print(e, file=sys.stderr)
    print(f"{total - len(errors)} of {total} C++ snippets of {len(pages)} pages match the "
          "compiled code")
    print(f"{total - len(errors)} passed, {len(errors)} failed")
    sys.exit(1 if errors else 0)


if __name__ == "__main__":
    main()
