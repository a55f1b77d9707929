#!/usr/bin/env python3
"""Summarises gcovr's JSON summary (gcovr --json-summary) of src/ for docs/RELIABILITY.md.

    python3 tests/coverage/summary.py build-coverage/coverage/summary.json [N]

Prints the line and branch coverage of all of src/ and the N (10) least-covered files by
line coverage, as Markdown table rows. Reads the file only; writes nothing.
"""
import json
import sys


def percent(covered, total):
    return 100.0 * covered / total if total else 100.0


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__.strip())
    with open(sys.argv[1]) as f:
        summary = json.load(f)
    worst = int(sys.argv[2]) if len(sys.argv) == 3 else 10
    lines = (summary["line_covered"], summary["line_total"])
    branches = (summary["branch_covered"], summary["branch_total"])
    print(f"src/: lines {percent(*lines):.1f}% ({lines[0]:,} of {lines[1]:,}), "
          f"branches {percent(*branches):.1f}% ({branches[0]:,} of {branches[1]:,}), "
          f"{len(summary['files'])} files")
    files = sorted(summary["files"],
                   key=lambda f: (percent(f["line_covered"], f["line_total"]), -f["line_total"]))
    print(f"\nThe {worst} least-covered files (by lines):\n")
    print("| file | lines | branches |")
    print("|---|---|---|")
    for f in files[:worst]:
        print(f"| `{f['filename']}` | {percent(f['line_covered'], f['line_total']):.1f}% "
              f"({f['line_covered']} of {f['line_total']}) | "
              f"{percent(f['branch_covered'], f['branch_total']):.1f}% "
              f"({f['branch_covered']} of {f['branch_total']}) |")


if __name__ == "__main__":
    main()
