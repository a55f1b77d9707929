#!/usr/bin/env python3
"""contract.py - checks docs/openapi.yaml against the OpenAPI 3.1 schema, the router and the
replies the API tests received (docs/API.md, "The OpenAPI document").

  contract.py document DOC SRC        the document: valid OpenAPI 3.1 (the official schema,
                                      tests/openapi/oas-3.1-schema.json, by python3-jsonschema),
                                      every schema a valid JSON Schema 2020-12, every example
                                      valid against its schema, every operation with an
                                      operationId and a scope, the error codes the server's
                                      sources use (SRC: src/node/http) exactly the document's,
                                      and the task options exactly API.md's generated table
  contract.py routes DOC PROBE SRC    the router (PROBE: the route_probe program) takes every
                                      documented method of every documented path and refuses
                                      the others with 405; every path built from the words the
                                      router's sources compare (SRC) that the router answers is
                                      in the document
  contract.py replies DOC DIR         every reply recorded under DIR (COHORT_API_RECORD lines,
                                      node/http/api_record.h) matches the schema of its
                                      operation and status; a path the document lacks may only
                                      have been refused; every operation was called at least
                                      once

Exit 0 when all hold, 1 with one line per fault otherwise.
"""
import glob
import json
import os
import re
import subprocess
import sys
import warnings

try:
    import jsonschema
    import yaml
except ImportError as e:  # the test set-up installs them (deploy/setup.sh, COHORT_TEST_TOOLS)
    print(f"skipped: {e} (apt-get install python3-jsonschema python3-yaml)")
    sys.exit(77)

warnings.filterwarnings("ignore", category=DeprecationWarning)

HERE = os.path.dirname(os.path.abspath(__file__))
METHODS = ["get", "post", "put", "patch", "delete"]
SCOPES = {"read", "enqueue", "operate", "work", "admin", "any", "none"}
PREFIX = "/api/v1"
SAMPLE = {  # a value the router takes for each path parameter
    "svc": "demo",
    "id": "6b04c3e17f69d9325a002a62",
    "schedule": "nightly",
    "token": "l1.demo.6b04c3e17f69d9325a002a62.1.9f3c1a7e5b2d48c6a0e1f7b3d5c9e2a4",
}

faults = []


def fault(text):
    faults.append(text)


def load(doc_path):
    with open(doc_path) as f:
        return yaml.safe_load(f)


def validator(doc, schema):
    """A 2020-12 validator for `schema`, its $refs resolved inside the document."""
    resolver = jsonschema.RefResolver.from_schema(doc)
    return jsonschema.Draft202012Validator(schema, resolver=resolver)


def operations(doc):
    for path, item in doc["paths"].items():
        for method in METHODS:
            if method in item:
                yield path, method, item[method]


def media_types(doc):
    """(where, media type object) of every request and response body, references followed."""
    comps = doc.get("components", {})
    for path, method, op in operations(doc):
        body = op.get("requestBody")
        if body and "$ref" in body:
            body = comps["requestBodies"][body["$ref"].split("/")[-1]]
        for mt, media in (body or {}).get("content", {}).items():
            yield f"{method.upper()} {path} request {mt}", media
        for status, resp in op["responses"].items():
            if "$ref" in resp:
                resp = comps["responses"][resp["$ref"].split("/")[-1]]
            for mt, media in resp.get("content", {}).items():
                yield f"{method.upper()} {path} {status} {mt}", media


def check_document(doc_path, src):
    doc = load(doc_path)
    with open(os.path.join(HERE, "oas-3.1-schema.json")) as f:
        oas = json.load(f)
    for e in jsonschema.Draft202012Validator(oas).iter_errors(doc):
        fault(f"not OpenAPI 3.1: at {'/'.join(map(str, e.absolute_path))}: {e.message}")
    for name, schema in doc.get("components", {}).get("schemas", {}).items():
        try:
            jsonschema.Draft202012Validator.check_schema(schema)
        except jsonschema.SchemaError as e:
            fault(f"components/schemas/{name}: not a JSON Schema 2020-12: {e.message}")
    ids = set()
    for path, method, op in operations(doc):
        where = f"{method.upper()} {path}"
        if not op.get("operationId"):
            fault(f"{where}: no operationId")
        elif op["operationId"] in ids:
            fault(f"{where}: operationId {op['operationId']} used twice")
        ids.add(op.get("operationId"))
        if op.get("x-cohort-scope") not in SCOPES:
            fault(f"{where}: x-cohort-scope must be one of {sorted(SCOPES)}")
        if not any(s.startswith("4") for s in op["responses"]):
            fault(f"{where}: no error reply (4XX)")
    examples = 0
    for where, media in media_types(doc):
        if "schema" not in media:
            fault(f"{where}: no schema")
            continue
        for example in [media["example"]] if "example" in media else []:
            examples += 1
            for e in validator(doc, media["schema"]).iter_errors(example):
                fault(f"{where}: the example is invalid: {e.message}")
    if examples < 20:
        fault(f"only {examples} examples: every operation should show one")
    # The error codes: those the server's sources send, exactly the document's.
    used = set()
    for name in glob.glob(os.path.join(src, "*.c")):
        with open(name) as f:
            text = f.read()
        used |= set(re.findall(r"\b[1-5][0-9]{2},\s*\"([a-z_]+)\"", text))
        used |= set(re.findall(r"\bcode = \"([a-z_]+)\"", text))
        if re.search(r"\bbad_request\(", text):
            used.add("bad_request")
    documented = set(doc["components"]["schemas"]["Error"]["properties"]["error"]["properties"]
                     ["code"]["enum"])
    for code in sorted(used - documented):
        fault(f"error code '{code}' is sent by {src} but not in the document's Error schema")
    for code in sorted(documented - used):
        fault(f"error code '{code}' is in the document but no source in {src} sends it")
    # The task options: API.md's table, generated from core/taskopts.c's, names them.
    api_md = os.path.join(os.path.dirname(os.path.abspath(doc_path)), "API.md")
    with open(api_md) as f:
        text = f.read()
    table = text[text.index("<!-- task options:"):text.index("<!-- end of task options -->")]
    options = set(re.findall(r"^\| `([a-z_]+)`(?: \(alias `([a-z_]+)`\))?", table, re.M))
    names = {n for pair in options for n in pair if n} | {"data"}
    fields = set(doc["components"]["schemas"]["NewTask"]["properties"])
    for name in sorted(names - fields):
        fault(f"task option '{name}' (API.md's table) is not in the document's NewTask")
    for name in sorted(fields - names):
        fault(f"NewTask's '{name}' is not a task option (API.md's table)")
    print(f"document: {len(list(operations(doc)))} operations, {examples} examples, "
          f"{len(used)} error codes")


def instantiate(template):
    return PREFIX + re.sub(r"\{(\w+)\}", lambda m: SAMPLE[m.group(1)], template)


def template_regex(template):
    parts = re.split(r"(\{\w+\})", template)
    return re.compile("^" + PREFIX + "".join(
        "[^/]+" if p.startswith("{") else re.escape(p) for p in parts) + "$")


def probe(probe_path, requests):
    text = "".join(f"{m} {p}\n" for m, p in requests)
    out = subprocess.run([probe_path], input=text, capture_output=True, text=True, check=True)
    answers = out.stdout.splitlines()
    assert len(answers) == len(requests), "route_probe answered a different number of lines"
    return [(int(a.split(" ", 1)[0]), a.split(" ", 1)[1]) for a in answers]


def check_routes(doc_path, probe_path, src):
    doc = load(doc_path)
    asks, expect = [], []
    for template, item in doc["paths"].items():
        path = instantiate(template)
        for method in METHODS:
            asks.append((method.upper(), path))
            expect.append((template, method in item))
    for (method, path), (template, documented), (status, allow) in zip(
            asks, expect, probe(probe_path, asks)):
        if documented and status != 200:
            fault(f"the document has {method} {template} but the router answers {status}")
        if not documented and status != 405:
            fault(f"the router answers {method} {template} with {status}, which the document "
                  f"does not describe (405 expected)")
    # Paths from every word the router's sources compare, in every place a word may stand.
    words = set()
    for name in glob.glob(os.path.join(src, "api*.c")):
        with open(name) as f:
            words |= set(w.strip("/") for w in re.findall(r"\"/?([a-z][a-z_:.]*)\"", f.read()))
    for template in doc["paths"]:
        words |= set(p for p in template.split("/") if p and not p.startswith("{"))
    bases = ["", "/services/demo", "/services/demo/tasks/" + SAMPLE["id"],
             "/services/demo/schedules/" + SAMPLE["schedule"],
             "/leases/" + SAMPLE["token"]]
    candidates = sorted({PREFIX + b + "/" + w for b in bases for w in words} |
                        {PREFIX + b for b in bases})
    regexes = [template_regex(t) for t in doc["paths"]]
    asks = [(m.upper(), p) for p in candidates for m in METHODS]
    answered = 0
    for (method, path), (status, _) in zip(asks, probe(probe_path, asks)):
        if status in (200, 405):
            answered += 1
            if not any(r.match(path) for r in regexes):
                fault(f"the router answers {method} {path} ({status}), a path the document "
                      f"lacks")
    print(f"routes: {len(expect)} documented method/path pairs probed; {len(candidates)} "
          f"candidate paths from {len(words)} words, {answered} answered")


def response_for(doc, op, status):
    responses = op["responses"]
    resp = responses.get(str(status)) or responses.get(f"{str(status)[0]}XX") or \
        responses.get("default")
    if resp and "$ref" in resp:
        resp = doc["components"]["responses"][resp["$ref"].split("/")[-1]]
    return resp


def check_replies(doc_path, folder):
    doc = load(doc_path)
    routes = [(template_regex(t), t, item) for t, item in doc["paths"].items()]
    error_schema = {"$ref": "#/components/schemas/Error"}
    seen, lines = set(), 0
    files = sorted(glob.glob(os.path.join(folder, "*.jsonl")))
    if not files:
        fault(f"no recorded replies in {folder}: did the API tests run with COHORT_API_RECORD?")
    cache = {}
    for name in files:
        with open(name) as f:
            for n, text in enumerate(f, 1):
                lines += 1
                r = json.loads(text)
                where = f"{os.path.basename(name)}:{n}: {r['method']} {r['path']} {r['status']}"
                method = "get" if r["method"] == "HEAD" else r["method"].lower()
                match = [(t, item) for rx, t, item in routes if rx.match(r["path"])]
                if not match or method not in match[0][1]:
                    # The router refused it: only an error may answer a path the document lacks.
                    if r["status"] < 400:
                        fault(f"{where}: answered, but the document lacks it")
                        continue
                    schema = error_schema
                else:
                    template, item = match[0]
                    seen.add((template, method))
                    resp = response_for(doc, item[method], r["status"])
                    if resp is None:
                        fault(f"{where}: status {r['status']} is not documented for "
                              f"{method.upper()} {template}")
                        continue
                    content = resp.get("content", {})
                    if "content_type" in r:
                        if r["content_type"] not in content:
                            fault(f"{where}: content type {r['content_type']} not documented")
                        continue
                    if "application/json" not in content:
                        fault(f"{where}: a JSON reply where the document has none")
                        continue
                    schema = content["application/json"]["schema"]
                key = json.dumps(schema, sort_keys=True)
                if key not in cache:
                    cache[key] = validator(doc, schema)
                for e in cache[key].iter_errors(r.get("body")):
                    fault(f"{where}: at {'/'.join(map(str, e.absolute_path)) or 'the body'}: "
                          f"{e.message[:300]}")
    missed = [f"{m.upper()} {t}" for t, m, _ in operations(doc) if (t, m) not in seen]
    for op in missed:
        fault(f"no API test called {op}: its replies are unchecked")
    print(f"replies: {lines} recorded replies in {len(files)} files checked; "
          f"{len(seen)} operations called")


def main():
    if len(sys.argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    what = sys.argv[1]
    if what == "document" and len(sys.argv) == 4:
        check_document(sys.argv[2], sys.argv[3])
    elif what == "routes" and len(sys.argv) == 5:
        check_routes(sys.argv[2], sys.argv[3], sys.argv[4])
    elif what == "replies" and len(sys.argv) == 4:
        check_replies(sys.argv[2], sys.argv[3])
    else:
        print(__doc__, file=sys.stderr)
        return 2
    for f in faults[:200]:
        print("FAULT:", f)
    if len(faults) > 200:
        print(f"... and {len(faults) - 200} more")
    return 1 if faults else 0


if __name__ == "__main__":
    sys.exit(main())
