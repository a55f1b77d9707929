#!/usr/bin/env python3
"""check_workflow.py - the GitHub Actions workflow (.github/workflows/mongodb.yml) parses and
runs what docs/OPERATING.md says it runs: `bash tests/run.sh` with MONGODB_URI naming a
replica set, once per MongoDB 6.0, 7.0 and 8.0, after a step that initiates the replica set.
It cannot run here (no MongoDB, no Actions runner): this is the light check that it is well
formed. Exits 77 (skipped) without python3-yaml.

    check_workflow.py SOURCE_DIR
"""
import sys

try:
    import yaml
except ImportError:
    print("python3-yaml is not installed: skipped")
    sys.exit(77)


def main(source):
    path = f"{source}/.github/workflows/mongodb.yml"
    with open(path) as f:
        doc = yaml.safe_load(f)
    problems = []
    # YAML 1.1 reads the key `on` as true.
    if not (doc.get("on") or doc.get(True)):
        problems.append("no `on:` triggers")
    jobs = doc.get("jobs") or {}
    if len(jobs) != 1:
        problems.append(f"expected one job, found {list(jobs)}")
    for name, job in jobs.items():
        versions = job.get("strategy", {}).get("matrix", {}).get("mongodb")
        if sorted(map(str, versions or [])) != ["6.0", "7.0", "8.0"]:
            problems.append(f"job {name}: matrix mongodb is {versions}, not 6.0, 7.0, 8.0")
        runs = [step.get("run", "") for step in job.get("steps", [])]
        if not any("rs.initiate" in run for run in runs):
            problems.append(f"job {name}: no step initiates the replica set")
        suite = [run for run in runs if "bash tests/run.sh" in run]
        if not suite:
            problems.append(f"job {name}: no step runs bash tests/run.sh")
        elif not all("MONGODB_URI=" in run and "replicaSet=" in run for run in suite):
            problems.append(f"job {name}: tests/run.sh runs without a replica set MONGODB_URI")
    for p in problems:
        print(f"{path}: {p}")
    print(f"{path}: {'FAILED' if problems else 'ok'}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "."))
