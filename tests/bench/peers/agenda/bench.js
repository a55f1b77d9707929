// Agenda 5 (Node.js, MongoDB) running no-op jobs, for tests/bench/peers.sh.
//
//   node bench.js enqueue --database DB --tasks N
//   node bench.js work --database DB --tasks N --since-ms MS [--concurrency C]
//                      [--process-every-ms P]
//   node bench.js versions
//
// enqueue: N jobs named "noop", each through agenda.now() (Agenda 5 has no bulk API; they go
// in parallel groups of 100), before any worker runs. Not timed.
// work: defines "noop" as an async no-op, starts Agenda with maxConcurrency = C, the job's
// concurrency = C (defaultConcurrency too) and processEvery = P ms (lockLimit stays 0, no
// limit: Agenda locks every due job it can in one scan), and waits for N "success" events,
// which Agenda emits after it has saved the finished job. Then it checks in the database
// that N jobs have a lastFinishedAt and prints, like tests/bench/probe:
//
//   agenda tasks=N seconds=S tasks_per_s=R active_seconds=A active_tasks_per_s=RA commands=K
//
// seconds runs from MS (this host's clock, taken by peers.sh just before it started this
// process) to the last success; active_seconds from the first job's start to the last
// success. commands counts the driver's commands from Agenda's start to the last success.
// versions: prints "agenda=X mongodb=Y" (the installed packages).
// MONGODB_URI names the server.
"use strict";

const { Agenda } = require("agenda");
const { MongoClient } = require("mongodb");

function fail(message) {
  process.stderr.write(`agenda bench: ${message}\n`);
  process.exit(1);
}

function parse(argv) {
  const opts = { concurrency: 50, processEveryMs: 1000 };
  const names = {
    "--database": "database", "--tasks": "tasks", "--since-ms": "sinceMs",
    "--concurrency": "concurrency", "--process-every-ms": "processEveryMs",
  };
  for (let i = 0; i < argv.length; i += 2) {
    const key = names[argv[i]];
    if (!key || i + 1 >= argv.length) fail(`bad argument '${argv[i]}'`);
    opts[key] = key === "database" ? argv[i + 1] : Number(argv[i + 1]);
    if (key !== "database" && !(opts[key] >= 0)) fail(`${argv[i]} needs a number`);
  }
  if (!opts.database || !opts.tasks) fail("--database and --tasks are required");
  return opts;
}

// Connects and hands Agenda the database; resolves once Agenda is ready (index created).
async function open(opts, config) {
  const client = new MongoClient(process.env.MONGODB_URI || fail("MONGODB_URI is not set"),
    { monitorCommands: true });
  await client.connect();
  const agenda = new Agenda(config);
  const ready = new Promise((resolve) => agenda.once("ready", resolve));
  agenda.on("error", (error) => fail(`agenda: ${error.message}`));
  agenda.mongo(client.db(opts.database), "agendaJobs");
  await ready;
  return { client, agenda };
}

async function enqueue(opts) {
  const { client, agenda } = await open(opts, {});
  for (let done = 0; done < opts.tasks;) {
    const group = Math.min(100, opts.tasks - done);
    await Promise.all(Array.from({ length: group }, () => agenda.now("noop", {})));
    done += group;
  }
  await client.close();
}

async function work(opts) {
  const { client, agenda } = await open(opts, {
    processEvery: opts.processEveryMs,
    maxConcurrency: opts.concurrency,
    defaultConcurrency: opts.concurrency,
  });
  let commands = 0;
  client.on("commandStarted", () => commands++);
  agenda.define("noop", { concurrency: opts.concurrency }, async () => {});
  let firstStart = 0;
  let succeeded = 0;
  const finished = new Promise((resolve) => {
    agenda.on("start", () => { firstStart = firstStart || Date.now(); });
    agenda.on("fail", (error) => fail(`a job failed: ${error.message}`));
    agenda.on("success", () => { if (++succeeded === opts.tasks) resolve(Date.now()); });
  });
  const startCommands = commands;
  await agenda.start();
  const last = await finished;
  const used = commands - startCommands;
  await agenda.stop();
  const done = await client.db(opts.database).collection("agendaJobs")
    .countDocuments({ name: "noop", lastFinishedAt: { $ne: null } });
  await client.close();
  if (done !== opts.tasks) fail(`${done} jobs finished in the database, expected ${opts.tasks}`);
  const seconds = (last - opts.sinceMs) / 1000;
  const active = (last - firstStart) / 1000;
  console.log(`agenda tasks=${opts.tasks} seconds=${seconds.toFixed(3)} ` +
    `tasks_per_s=${(opts.tasks / seconds).toFixed(1)} active_seconds=${active.toFixed(3)} ` +
    `active_tasks_per_s=${(opts.tasks / active).toFixed(1)} commands=${used}`);
}

function versions() {
  const agenda = require("agenda/package.json").version;
  const mongodb = require("mongodb/package.json").version;
  console.log(`agenda=${agenda} mongodb=${mongodb}`);
}

const [mode, ...rest] = process.argv.slice(2);
const run = { enqueue: () => enqueue(parse(rest)), work: () => work(parse(rest)), versions };
if (!run[mode]) fail("usage: bench.js enqueue|work|versions ...");
Promise.resolve(run[mode]()).catch((error) => fail(error.stack || String(error)));
