#!/usr/bin/env python3
"""check_docs.py - the README and the guides in docs/ work: links resolve, examples run.

    check_docs.py --source DIR --build DIR      check DIR/README.md and DIR/docs/*.md
    check_docs.py --self-test                   prove that each kind of failure is caught

Links: every relative link `[text](path)` or `[text](path#anchor)` must name a file or folder
that exists, and an #anchor must be a heading of the Markdown file it points into (GitHub's
rule: lower case, punctuation dropped, spaces to '-', repeats numbered -1, -2...). Links to
other sites are not fetched: the check must run offline.

Examples: a ```sh block directly under the line `<!-- example: offline -->` is run, and must
exit 0; under `<!-- example: database -->` it is run only when MONGODB_URI is set (it is
skipped otherwise, and says so). Each runs with `bash -eu -o pipefail` in a fresh temporary
directory that looks like the top of a built checkout: a symlink to every top-level entry of
the source tree, `build` pointing at the build directory, and the build directory first on
PATH, so an example reads exactly as a person at the top of a clone would type it. Whatever
an example leaves running (say a node started with `&`) is killed with its process group.

Exit status: 0 when everything holds, 1 when a link is broken or an example fails.
"""
import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile

MARKER = re.compile(r"^<!--\s*example:\s*(\S+)\s*-->\s*$")
KINDS = ("offline", "database")
FENCE = re.compile(r"^(```|~~~)")
LINK = re.compile(r"(?<!!)\[(?:[^\]\\]|\\.)*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
IMAGE = re.compile(r"!\[(?:[^\]\\]|\\.)*\]\(([^)\s]+)\)")
EXAMPLE_TIMEOUT_S = 180


def documents(source):
    """README.md and every Markdown file of docs/, as absolute paths."""
    found = [os.path.join(source, "README.md")]
    docs = os.path.join(source, "docs")
    if os.path.isdir(docs):
        found += sorted(os.path.join(docs, f) for f in os.listdir(docs) if f.endswith(".md"))
    return [f for f in found if os.path.isfile(f)]


def prose_lines(text):
    """(line number, line) of the lines outside fenced code blocks."""
    fenced = False
    for number, line in enumerate(text.split("\n"), 1):
        if FENCE.match(line.strip()):
            fenced = not fenced
            continue
        if not fenced:
            yield number, line


def anchor_of(heading):
    """GitHub's anchor for a heading's text."""
    text = re.sub(r"`([^`]*)`", r"\1", heading.strip())
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)  # a link in a heading: its text
    text = text.lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path):
    """Every anchor the headings of a Markdown file define."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    seen = {}
    result = set()
    for _, line in prose_lines(text):
        m = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not m:
            continue
        base = anchor_of(m.group(1))
        n = seen.get(base, 0)
        seen[base] = n + 1
        result.add(base if n == 0 else "%s-%d" % (base, n))
    return result


def check_links(path, source):
    """Problems with the relative links of one document, as 'file:line: message' strings."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    rel = os.path.relpath(path, source)
    problems = []
    for number, line in prose_lines(text):
        line = re.sub(r"`[^`]*`", "", line)  # code spans are not links
        for m in list(LINK.finditer(line)) + list(IMAGE.finditer(line)):
            target = m.group(1)
            if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # https:, mailto:... not fetched
                continue
            file_part, _, anchor = target.partition("#")
            resolved = path if not file_part else os.path.normpath(
                os.path.join(os.path.dirname(path), file_part))
            if not os.path.exists(resolved):
                problems.append("%s:%d: link to %s: no such file" % (rel, number, target))
                continue
            if anchor:
                if not resolved.endswith(".md") or os.path.isdir(resolved):
                    problems.append("%s:%d: link to %s: an anchor into a file that is not "
                                    "Markdown" % (rel, number, target))
                elif anchor not in anchors(resolved):
                    problems.append("%s:%d: link to %s: %s has no heading with anchor #%s"
                                    % (rel, number, target,
                                       os.path.relpath(resolved, source), anchor))
    return problems


def examples(path):
    """(line number, kind, script) of every marked example of a document, and the problems
    of markers that mark nothing runnable."""
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    found, problems = [], []
    fenced = False
    for i, line in enumerate(lines):
        if FENCE.match(line.strip()):
            fenced = not fenced
            continue
        m = None if fenced else MARKER.match(line.strip())
        if not m:
            continue
        kind = m.group(1)
        if kind not in KINDS:
            problems.append("%d: unknown example kind '%s' (known: %s)"
                            % (i + 1, kind, ", ".join(KINDS)))
            continue
        if i + 1 >= len(lines) or lines[i + 1].strip() not in ("```sh", "```bash"):
            problems.append("%d: '<!-- example: %s -->' is not directly above a ```sh block"
                            % (i + 1, kind))
            continue
        end = i + 2
        while end < len(lines) and lines[end].strip() != "```":
            end += 1
        if end >= len(lines):
            problems.append("%d: the example's code block never ends" % (i + 1))
            continue
        found.append((i + 2, kind, "\n".join(lines[i + 2:end]) + "\n"))
    return found, problems


def checkout_like(source, build, into):
    """Make `into` look like the top of a built checkout of `source`."""
    for entry in os.listdir(source):
        if entry == ".git" or entry == "build" or entry.startswith("build-"):
            continue
        os.symlink(os.path.join(source, entry), os.path.join(into, entry))
    os.symlink(build, os.path.join(into, "build"))


def run_example(script, source, build):
    """Run one example; returns None if it exit 0, else a description of the failure."""
    work = tempfile.mkdtemp(prefix="cohort-docs-")
    try:
        checkout_like(source, build, work)
        env = dict(os.environ)
        env["PATH"] = build + os.pathsep + env.get("PATH", "")
        proc = subprocess.Popen(["bash", "-eu", "-o", "pipefail", "-c", script], cwd=work,
                                env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                start_new_session=True)
        try:
            out, _ = proc.communicate(timeout=EXAMPLE_TIMEOUT_S)
            status = proc.returncode
        except subprocess.TimeoutExpired:
            status = "timed out after %d s" % EXAMPLE_TIMEOUT_S
            out = b""
        finally:
            try:
                os.killpg(proc.pid, signal.SIGKILL)  # anything the example left running
            except ProcessLookupError:
                pass
            proc.wait()
        if status == 0:
            return None
        output = out.decode("utf-8", "replace").rstrip()
        return "exit status %s; its output:\n%s" % (status, "    " + output.replace("\n", "\n    "))
    finally:
        shutil.rmtree(work, ignore_errors=True)


def check(source, build, quiet=False):
    """Every problem of the documents of `source`, examples run against `build`."""
    problems = []

    def say(message):
        if not quiet:
            print(message, flush=True)

    for doc in documents(source):
        rel = os.path.relpath(doc, source)
        problems += check_links(doc, source)
        found, marker_problems = examples(doc)
        problems += ["%s:%s" % (rel, p) for p in marker_problems]
        for line, kind, script in found:
            if kind == "database" and not os.environ.get("MONGODB_URI"):
                say("skip %s:%d (a database example; MONGODB_URI is not set)" % (rel, line))
                continue
            failure = run_example(script, source, build)
            if failure:
                problems.append("%s:%d: the %s example fails: %s" % (rel, line, kind, failure))
            else:
                say("ok   %s:%d (%s example)" % (rel, line, kind))
    return problems


def self_test():
    """A doctored tree: a clean one passes, and each kind of breakage is reported."""
    failures = []

    def expect(condition, message):
        if not condition:
            failures.append(message)

    expect(anchor_of("Tracked batches and `on_tasks_completed` (ABI 2)")
           == "tracked-batches-and-on_tasks_completed-abi-2", "anchor of a code span")
    expect(anchor_of("Counts on 1,000,000 tasks") == "counts-on-1000000-tasks",
           "anchor with punctuation")
    with tempfile.TemporaryDirectory(prefix="cohort-docs-self-") as tree:
        build = os.path.join(tree, "bin")
        source = os.path.join(tree, "src")
        os.makedirs(os.path.join(source, "docs"))
        os.makedirs(build)
        tool = os.path.join(build, "greet")
        with open(tool, "w") as f:
            f.write("#!/bin/sh\necho hello \"$@\"\n")
        os.chmod(tool, 0o755)

        def write(name, text):
            with open(os.path.join(source, name), "w") as f:
                f.write(text)

        guide = ("# Guide\n\n## Two words\n\n## Two words\n\n<!-- example: offline -->\n"
                 "```sh\ngreet world | grep -q 'hello world'\ntest -d docs && test -d build\n```\n")
        readme = ("# Top\n\nSee [the guide](docs/GUIDE.md#two-words-1), [here](#top), "
                  "[a site](https://example.com/x) and `[not a link](nowhere.md)`.\n\n"
                  "```\n[in code](nowhere.md)\n```\n")
        originals = {"docs/GUIDE.md": guide, "README.md": readme}
        for name, text in originals.items():
            write(name, text)
        problems = check(source, build, quiet=True)
        expect(problems == [], "a clean tree passes, but got: %s" % problems)

        # (file, its broken text, what the one problem must say, what the case shows)
        cases = [
            ("README.md", readme.replace("#two-words-1", "#three-words"),
             "no heading with anchor #three-words", "a broken anchor"),
            ("README.md", readme.replace("docs/GUIDE.md", "docs/GONE.md"),
             "link to docs/GONE.md#two-words-1: no such file", "a broken link"),
            ("docs/GUIDE.md", guide.replace("hello world'", "goodbye'"),
             "GUIDE.md:8: the offline example fails", "a failing example"),
            ("docs/GUIDE.md", guide.replace("greet world |", "false; greet world |"),
             "the offline example fails", "a failing command mid-example"),
            ("docs/GUIDE.md", guide.replace("example: offline", "example: offlien"),
             "unknown example kind 'offlien'", "a misspelt marker"),
            ("docs/GUIDE.md", guide.replace("-->\n```sh", "-->\n\n```sh"),
             "is not directly above a ```sh block", "a marker away from its block"),
        ]
        for name, text, wanted, what in cases:
            write(name, text)
            problems = check(source, build, quiet=True)
            expect(len(problems) == 1 and wanted in problems[0],
                   "%s is reported as '%s': %s" % (what, wanted, problems))
            write(name, originals[name])

        saved = os.environ.pop("MONGODB_URI", None)
        try:
            write("docs/GUIDE.md", guide.replace("example: offline", "example: database")
                  .replace("hello world'", "goodbye'"))
            problems = check(source, build, quiet=True)
            expect(problems == [], "a database example is skipped without MONGODB_URI: %s"
                   % problems)
            os.environ["MONGODB_URI"] = "mongodb://127.0.0.1:1"
            problems = check(source, build, quiet=True)
            expect(len(problems) == 1 and "the database example fails" in problems[0],
                   "a database example runs with MONGODB_URI: %s" % problems)
        finally:
            os.environ.pop("MONGODB_URI", None)
            if saved is not None:
                os.environ["MONGODB_URI"] = saved
    for failure in failures:
        print("self-test FAILED: " + failure)
    if not failures:
        print("self-test: clean tree passes; broken link, broken anchor, failing example, "
              "bad marker each reported; database examples run only with MONGODB_URI")
    return 1 if failures else 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--source", help="the source tree (holds README.md and docs/)")
    parser.add_argument("--build", help="the build directory (cohortd, cohortctl, handlers/)")
    parser.add_argument("--self-test", action="store_true", help="check the checker")
    args = parser.parse_args()
    if args.self_test:
        return self_test()
    if not args.source or not args.build:
        parser.error("--source and --build are required")
    problems = check(os.path.abspath(args.source), os.path.abspath(args.build))
    for p in problems:
        print("FAIL " + p)
    if problems:
        print("%d problem(s) in README.md and docs/" % len(problems))
        return 1
    print("docs: every link resolves and every runnable example passes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
