#!/usr/bin/env python3
"""Build a synthetic monorepo for the symbol index benchmark (issue 19 §3): one commit holding
FILES source files (default 120,000) spread evenly over Rust, Python, JavaScript, TypeScript, Go
and Java, under a few hundred packages, each file a handful of definitions (types, functions,
methods, interfaces) calling one another and a shared vocabulary of names, ~3 KB on average
(tokio's files average 7 KB; monorepos hold many small ones). Deterministic (seeded): the same
FILES gives the same tree id.

The commit is written with `git fast-import` (one pack, no loose objects), then checked out, so
`ctags -R` can read the same files from the work tree.

Usage: make_monorepo.py DIR [FILES]
"""
import os
import random
import subprocess
import sys

WORDS = ("alpha bravo cache delta event frame graph handle index join key ledger metric node "
         "order packet queue record stream token update value window buffer client config "
         "driver engine filter gateway header loader mapper parser reader router server "
         "signal store task timer worker writer").split()

RUST = """/// {T} keeps {u} items.
pub struct {T} {{
    inner: Vec<{U}>,
    count: usize,
}}

impl {T} {{
    pub fn {f}(&mut self, value: {U}) -> usize {{
        self.inner.push(value);
        let total = {g}(self.count, {n});
        {mod_}::{h}(total);
        tracing::debug!("{f} {{}}", total);
        total
    }}
}}

pub trait {Tr} {{
    fn {f2}(&self) -> bool;
}}

impl {Tr} for {T} {{
    fn {f2}(&self) -> bool {{
        self.count > {n} && {g}(self.count, 1) > 0
    }}
}}

fn {g}(a: usize, b: usize) -> usize {{
    a.wrapping_add(b)
}}

"""

PYTHON = """class {T}({U}):
    \"\"\"{T} keeps {u} items.\"\"\"

    def {f}(self, value):
        self.inner.append(value)
        total = {g}(self.count, {n})
        {mod_}.{h}(total)
        return total

    def {f2}(self):
        return self.count > {n} and {g}(self.count, 1) > 0


def {g}(a, b):
    return a + b


LIMIT_{N} = {n}

"""

JAVASCRIPT = """/** {T} keeps {u} items. */
export class {T} extends {U} {{
  {f}(value) {{
    this.inner.push(value);
    const total = {g}(this.count, {n});
    {mod_}.{h}(total);
    return total;
  }}

  {f2}() {{
    return this.count > {n} && {g}(this.count, 1) > 0;
  }}
}}

function {g}(a, b) {{
  return a + b;
}}

export const {h}_{N} = (x) => new {T}().{f}(x);

"""

TYPESCRIPT = """/** {T} keeps {u} items. */
export interface {Tr} {{
  {f2}(): boolean;
}}

export class {T} extends {U} implements {Tr} {{
  private inner: {U}[] = [];
  {f}(value: {U}): number {{
    this.inner.push(value);
    const total: number = {g}(this.count, {n});
    {mod_}.{h}(total);
    return total;
  }}

  {f2}(): boolean {{
    return this.count > {n} && {g}(this.count, 1) > 0;
  }}
}}

function {g}(a: number, b: number): number {{
  return a + b;
}}

"""

GO = """// {T} keeps {u} items.
type {T} struct {{
	inner []{U}
	count int
}}

// {F} adds a value.
func (t *{T}) {F}(value {U}) int {{
	t.inner = append(t.inner, value)
	total := {g}(t.count, {n})
	{mod_}.{H}(total)
	return total
}}

type {Tr} interface {{
	{F2}() bool
}}

func {g}(a int, b int) int {{
	return a + b
}}

"""

JAVA = """    /** {T} keeps {u} items. */
    public static class {T} extends {U} implements {Tr} {{
        private final java.util.List<{U}> inner = new java.util.ArrayList<>();

        public int {f}({U} value) {{
            inner.add(value);
            int total = {g}(count, {n});
            {mod_}.{h}(total);
            return total;
        }}

        public boolean {f2}() {{
            return count > {n} && {g}(count, 1) > 0;
        }}
    }}

    interface {Tr} {{
        boolean {f2}();
    }}

    static int {g}(int a, int b) {{
        return a + b;
    }}

"""

LANGS = [("rs", RUST), ("py", PYTHON), ("js", JAVASCRIPT), ("ts", TYPESCRIPT), ("go", GO),
         ("java", JAVA)]


def camel(*words):
    return "".join(w.capitalize() for w in words)


def unit(rng, template, n):
    a, b, c, d = (rng.choice(WORDS) for _ in range(4))
    names = {
        "T": camel(a, b) + str(n % 97),
        "U": camel(c, "item"),
        "u": c,
        "Tr": camel(d, "source"),
        "f": f"{a}_{c}",
        "F": camel(a, c),
        "f2": f"is_{d}",
        "F2": camel("is", d),
        "g": f"combine_{b}_{n % 13}",
        "h": f"record_{d}",
        "H": camel("record", d),
        "mod_": f"{c}_util",
        "n": n,
        "N": n,
    }
    return template.format(**names)


def file_text(rng, ext, template, index):
    units = rng.randint(2, 6)
    body = "".join(unit(rng, template, index * 8 + k) for k in range(units))
    if ext == "java":
        return f"package pkg{index % 300};\n\npublic class File{index} {{\n{body}}}\n"
    if ext == "go":
        return f"package pkg{index % 300}\n\n{body}"
    return body


def main():
    repo = sys.argv[1]
    files = int(sys.argv[2]) if len(sys.argv) > 2 else 120_000
    rng = random.Random(19)
    os.makedirs(repo)
    env = dict(os.environ, GIT_AUTHOR_NAME="bench", GIT_AUTHOR_EMAIL="bench@example.com",
               GIT_COMMITTER_NAME="bench", GIT_COMMITTER_EMAIL="bench@example.com")
    subprocess.run(["git", "init", "-q", "-b", "main", repo], check=True)
    importer = subprocess.Popen(["git", "fast-import", "--quiet"], cwd=repo, env=env,
                                stdin=subprocess.PIPE)
    out = importer.stdin
    total = 0
    paths = []
    for index in range(files):
        ext, template = LANGS[index % len(LANGS)]
        data = file_text(rng, ext, template, index).encode()
        total += len(data)
        mark = index + 1
        out.write(b"blob\nmark :%d\ndata %d\n" % (mark, len(data)))
        out.write(data)
        out.write(b"\n")
        team = index % 40
        paths.append(f"services/team{team}/pkg{index % 300}/{ext}/file{index}.{ext}")
    message = f"synthetic monorepo: {files} files".encode()
    out.write(b"commit refs/heads/main\ncommitter bench <bench@example.com> 1767225600 +0000\n")
    out.write(b"data %d\n%s\n" % (len(message), message))
    for index, path in enumerate(paths):
        out.write(b"M 100644 :%d %s\n" % (index + 1, path.encode()))
    out.write(b"\n")
    out.close()
    if importer.wait() != 0:
        sys.exit("git fast-import failed")
    subprocess.run(["git", "checkout", "-q", "-f", "main"], cwd=repo, check=True)
    print(f"{repo}: {files} files, {total / 1e6:.0f} MB of source", file=sys.stderr)


if __name__ == "__main__":
    main()
