/*
 * worker.ts - the external-worker loop written against a client generated from
 * docs/openapi.yaml (openapi-typescript's types for openapi-fetch), as a user of the API
 * would write it: nothing here is hand-typed from API.md. tests/openapi/client.sh generates
 * the types, compiles this with tsc --strict (a call the document does not describe, or a
 * field it lacks, fails the build) and runs it against a real cohortd.
 *
 * node worker.js URL WORK_TOKEN ENQUEUE_TOKEN SERVICE
 *
 * A long-poll claim is held while three tasks are enqueued (the first wakes it); every task is
 * heartbeaten with progress, then succeeded with a result, or failed for good when its data
 * says so; a succeed sent twice is a replay; the tasks read back show each outcome.
 */
import createClient from "openapi-fetch";
import type { components, paths } from "./schema.js";

type ClaimedTask = components["schemas"]["ClaimedTask"];

const args = process.argv.slice(2);
if (args.length !== 4) {
    console.error("usage: node worker.js URL WORK_TOKEN ENQUEUE_TOKEN SERVICE");
    process.exit(2);
}
const [url, workToken, enqueueToken, service] = args as [string, string, string, string];
const api = (token: string) =>
    createClient<paths>({ baseUrl: `${url}/api/v1`, headers: { Authorization: `Bearer ${token}` } });
const worker = api(workToken);
const producer = api(enqueueToken);
const svc = { params: { path: { svc: service } } };

function check(ok: unknown, what: string): asserts ok {
    if (!ok) {
        console.error(`FAIL: ${what}`);
        process.exit(1);
    }
}

async function claim(max: number, waitMs: number): Promise<ClaimedTask[]> {
    const { data, error, response } = await worker.POST("/services/{svc}/claims", {
        ...svc,
        body: { worker: "generated-ts-1", max, wait_ms: waitMs, lease_ms: 10000 },
    });
    check(data, `claim answered ${response.status}: ${JSON.stringify(error)}`);
    return data.tasks;
}

async function run(task: ClaimedTask): Promise<string> {
    const token = task.lease.token;
    const path = { params: { path: { token } } };
    const beat = await worker.POST("/leases/{token}/heartbeat", {
        ...path,
        body: { lease_ms: 10000, progress: { step: 1, of: 2 } },
    });
    check(beat.data, `heartbeat answered ${beat.response.status}: ${JSON.stringify(beat.error)}`);
    check(!beat.data.cancel_requested, "nobody cancelled this task");
    const n = (task.data as { n: number; fail?: boolean }).n;
    if ((task.data as { fail?: boolean }).fail) {
        const { data, error } = await worker.POST("/leases/{token}/fail", {
            ...path,
            body: { error: `task ${n} fails on purpose`, retry: false },
        });
        check(data?.status === "failed", `fail: ${JSON.stringify(data ?? error)}`);
        return "failed";
    }
    const body = { result: { doubled: n * 2 } };
    const done = await worker.POST("/leases/{token}/succeed", { ...path, body });
    check(done.data?.status === "succeeded", `succeed: ${JSON.stringify(done.data ?? done.error)}`);
    const again = await worker.POST("/leases/{token}/succeed", { ...path, body });
    check(again.data?.replayed === true, `a second succeed is a replay: ${JSON.stringify(again)}`);
    return "succeeded";
}

async function main(): Promise<void> {
    const started = Date.now();
    const held = claim(1, 20000); /* long-poll: nothing is due yet */
    await new Promise((r) => setTimeout(r, 300));
    const ids: string[] = [];
    for (const data of [{ n: 1 }, { n: 2, fail: true }, { n: 3 }]) {
        const { data: created, error, response } = await producer.POST("/services/{svc}/tasks", {
            ...svc,
            body: { data },
        });
        check(created, `enqueue answered ${response.status}: ${JSON.stringify(error)}`);
        ids.push(created.id);
    }
    let todo = await held;
    check(todo.length === 1, `the held claim took the first task: ${JSON.stringify(todo)}`);
    console.log(`held claim answered after ${Date.now() - started} ms`);
    const outcomes = new Map<string, string>();
    while (outcomes.size < ids.length) {
        for (const task of todo) outcomes.set(task.id, await run(task));
        if (outcomes.size < ids.length) todo = await claim(2, 5000);
        check(Date.now() - started < 40000, "all three tasks ran within 40 s");
    }
    for (const [i, id] of ids.entries()) {
        const { data: task, error } = await producer.GET("/services/{svc}/tasks/{id}", {
            params: { path: { svc: service, id } },
        });
        check(task, `read task ${id}: ${JSON.stringify(error)}`);
        const want = i === 1 ? "failed" : "succeeded";
        check(task.status === want && outcomes.get(id) === want, `task ${id}: ${task.status}`);
        check(JSON.stringify(task.progress) === '{"step":1,"of":2}', `progress: ${task.progress}`);
        if (want === "succeeded")
            check((task.result as { doubled: number }).doubled === (i + 1) * 2, "the result");
        else check(task.last_error === "task 2 fails on purpose", `last_error: ${task.last_error}`);
    }
    console.log(`generated client: ${ids.length} tasks claimed, heartbeaten and reported ` +
                `(${[...outcomes.values()].join(", ")}) in ${Date.now() - started} ms`);
}

main().catch((e) => {
    console.error("FAIL:", e);
    process.exit(1);
});
