// service.js - one service: its primary, counts by status (live), by kind and by group, its
// switches with reason, author and time, its tracked batches and live settings, and (scope
// operate) pause, resume, block and unblock of the service or of one kind. Due work that no
// live worker takes is a warning with its oldest due age, in the state and per kind.
import {api, seg} from "../api.js";
import {ago, fill, h, table, when} from "../dom.js";
import {actionButton, countCells, countsAge, dueAge, noWorkerBadge, services, stateBadge,
  takesKind, workersOf} from "./common.js";
import {kindsCard} from "./kinds.js";

// An in-page question before a switch is set (ui28b): what it stops, a warning (if any), a
// reason box (required when `needReason`) and the confirming and cancelling buttons, in `box`.
// Resolves to the reason given ("" for none) or null when cancelled.
function askSwitch(box, {question, warning, needReason, verb, initial}) {
  return new Promise((resolve) => {
    const reason = h("input", {name: "confirm-reason", size: 30, value: initial || "",
      placeholder: needReason ? "why (required, recorded)" : "why (optional, recorded)"});
    const note = h("span", {class: "confirm-note"});
    const done = (v) => {
      box.replaceChildren();
      resolve(v);
    };
    fill(box, h("div", {class: "confirm", id: "switch-confirm", role: "dialog"},
      h("p", null, question),
      warning ? h("p", {class: "warning", id: "switch-warning"}, warning) : null,
      h("label", null, "reason", reason), note,
      h("div", {class: "actions"},
        h("button", {type: "button", class: "danger", "data-action": "confirm", onclick: () => {
          if (needReason && !reason.value.trim()) {
            note.textContent = "A reason is required to stop the whole service.";
            return;
          }
          done(reason.value.trim());
        }}, verb),
        h("button", {type: "button", "data-action": "cancel-confirm", onclick: () => done(null)},
          "Cancel"))));
    reason.focus();
  });
}

function switchesTable(svc, undo) {
  const rows = [
    ...(svc.paused || []).map((s) => ({...s, which: "paused"})),
    ...(svc.blocked || []).map((s) => ({...s, which: "blocked"})),
  ];
  if (!rows.length) return h("p", null, "No switch is set: every kind runs.");
  return table([
    ["switch", (s) => s.which],
    ["kind", (s) => s.kind === "*" ? "(all kinds)" : s.kind],
    ["reason", (s) => s.reason || "-"],
    ["by", (s) => s.by || "-"],
    ["since", (s) => when(s.at)],
    ["", (s) => undo ? undo(s) : null],
  ], rows, {id: "switches"});
}

// A breakdown by kind or group: one row per value with a cell per status, the values with the
// most tasks first and at most BREAKDOWN_MAX of them (97 groups made a 3,900 px page), then a
// note of how many more there are and how many tasks they hold.
const BREAKDOWN_MAX = 20;
// The kinds read for the table and for Pause/Block's "no task has this kind" check: the API's
// maximum, so that check knows every kind unless a service has more (then it stays silent).
const KINDS_MAX = 500;
// `distinct` and `allTasks`: how many values and tasks the service has, when the server sent
// only the rows of the values with the most tasks (GET .../counts?limit=). `mark` (optional):
// what to show beside a value's name (a kind's no-worker warning).
function breakdown(by, rows, distinct, allTasks, mark) {
  if (!rows.length) return h("p", null, `No task has a ${by}.`);
  const name = (r) => r[by] === null ? "(none)" : r[by];
  const statuses = [...new Set(rows.map((r) => r.status))].sort();
  const cell = {}, total = new Map();
  for (const r of rows) {
    cell[`${name(r)}\u0000${r.status}`] = r.count;
    total.set(name(r), (total.get(name(r)) || 0) + r.count);
  }
  const keys = [...total.keys()].sort((a, b) => total.get(b) - total.get(a) || (a < b ? -1 : 1));
  const shown = keys.slice(0, BREAKDOWN_MAX);
  const sum = (list) => list.reduce((n, k) => n + total.get(k), 0);
  const cut = distinct > total.size;
  const more = cut ? distinct - shown.length : keys.length - shown.length;
  const restTasks = cut ? Math.max(0, allTasks - sum(shown)) : sum(keys.slice(BREAKDOWN_MAX));
  return [table([[by, (k) => mark ? [k, mark(k)] : k], ["total", (k) => total.get(k)],
    ...statuses.map((st) => [st, (k) => cell[`${k}\u0000${st}`] || 0])],
  shown, {class: "breakdown", "data-by": by}),
  more > 0 ? h("p", {class: "breakdown-more", "data-by": by}, `${more} more ` +
    `${by}s with ${restTasks} task(s) not shown (the ${shown.length} with the most tasks ` +
    `are); filter the task list by ${by} to see one.`) : null];
}

// The kinds with due tasks that no live worker takes (from GET /nodes and GET .../due), less
// the stopped ones (a paused or blocked kind waits by design): `kinds` maps each (as the
// by-kind table names it) to its oldest due task's run_at; `all` is the oldest due age when
// the service has no live worker at all, `oldest` that of the kinds'.
function idleKinds(svc, nodes, due) {
  const out = {all: null, kinds: new Map(), now: due && due.now, oldest: null};
  if (!nodes || !due) return out;
  const stopped = new Set([...(svc.paused || []), ...(svc.blocked || [])].map((s) => s.kind));
  if (stopped.has("*")) return out;
  const workers = workersOf(nodes.nodes, svc.name);
  for (const r of due.kinds) {
    if (stopped.has(r.kind) || takesKind(workers, r.kind)) continue;
    out.kinds.set(r.kind === null ? "(none)" : r.kind, r.oldest_due_at);
    if (!out.oldest || r.oldest_due_at < out.oldest) out.oldest = r.oldest_due_at;
  }
  if (!workers.length && out.oldest) out.all = dueAge(due.now, out.oldest);
  return out;
}

// Beside a running service's state: the kinds that no live worker takes, when others run.
function kindsWithoutWorker(idle) {
  if (idle.all || !idle.kinds.size) return null;
  const names = [...idle.kinds.keys()];
  const shown = names.slice(0, 3).join(", ") + (names.length > 3 ? ` and ${names.length - 3} ` +
    "more" : "");
  return [" ", noWorkerBadge(`no worker for kind ${shown}, oldest due ` +
    dueAge(idle.now, idle.oldest), "tasks of these kinds are due and no live node's handler " +
    "or external worker takes them (the by-kind table marks each)")];
}

function batchesTable(b) {
  const last = b.last;
  return table([["", (r) => r[0]], ["", (r) => r[1]]], [
    ["primary since", when(b.elected_at)],
    ["open batch", b.open === null ? "-" : `#${b.open}`],
    ["draining", b.draining === null ? "none" : `#${b.draining}`],
    ["completed", String(b.completed)],
    ["last completed", last ? `#${last.seq}: ${last.succeeded} succeeded, ${last.failed} ` +
      `not, by ${last.completed_by} (epoch ${last.epoch}) at ${when(last.completed_at)}` : "none"],
  ], {id: "batches", class: "kv"});
}

export async function servicePage(root, {parts}, ctx) {
  const name = parts[1];
  root.dataset.title = name;
  const head = h("div");
  const switches = h("div");
  const batchBody = h("div");
  const settingsBody = h("div", {id: "settings"});
  const byKind = h("div");
  const byGroup = h("div");
  const runs = kindsCard(name);
  let svcNow = null; // the service as last read (its switches)
  let knownKinds = new Set(); // the kinds some task has (counts by kind); null: not all known
  let drawKinds = null; // draws By kind from GET .../counts?by=kind, once read
  let idle = idleKinds({}, null, null); // the kinds without a live worker (idleKinds)
  const kindMark = (k) => idle.kinds.has(k) ? [" ", noWorkerBadge("no worker, oldest due " +
    dueAge(idle.now, idle.kinds.get(k)), "tasks of this kind are due and no live worker " +
    "takes them")] : null;
  const confirmBox = h("div");
  root.append(
    h("h1", null, "Service ", name),
    h("p", null, h("a", {href: `#/services/${seg(name)}/tasks`}, "Tasks"), " · ",
      h("a", {href: `#/services/${seg(name)}/tasks?status=failed`}, "Failed tasks"), " · ",
      h("a", {href: `#/services/${seg(name)}/schedules`}, "Schedules")),
    h("section", {class: "card"}, h("h2", null, "State"), head),
    h("section", {class: "card"}, h("h2", null, "Switches"), switches, controls()),
    h("section", {class: "card"}, h("h2", null, "Tracked batches"), batchBody),
    h("section", {class: "card"}, h("h2", null, "Live settings"), settingsBody),
    h("div", {class: "grid"},
      h("section", {class: "card"}, h("h2", null, "By kind"), byKind),
      h("section", {class: "card"}, h("h2", null, "By group"), byGroup)),
    runs.el);


  // Pause or block, after the question: the whole service needs a reason; a kind no task has
  // gets a warning first (a typo would otherwise stop nothing and look done).
  function stopButton(label, verb, path, kind, reason) {
    let said = "";
    return actionButton(ctx, label, async () => {
      const k = kind.value.trim();
      const warning = k && knownKinds && !knownKinds.has(k) ? `No task of ${name} has kind '${k}' (check ` +
        "the spelling): the switch would stop nothing today." : null;
      const r = await askSwitch(confirmBox, {
        question: k ? `${verb} kind ${k} of ${name}?` : `${verb} the whole service ${name}? ` +
          "No kind runs until it is undone.",
        warning, needReason: !k, verb: `${verb} ${k ? k : name}`, initial: reason.value.trim()});
      if (r === null) return false;
      said = r;
      return true;
    }, async () => {
      const b = {};
      if (kind.value.trim()) b.kind = kind.value.trim();
      if (said) b.reason = said;
      await api(`/services/${seg(name)}/${path}`, {method: "POST", body: b});
      return `${verb === "Pause" ? "Paused" : "Blocked"} ` +
        (b.kind ? `kind ${b.kind} of ${name}` : name);
    }, refresh, true);
  }

  // Resume or unblock of the kind box; an empty box undoes only the whole-service switch, and
  // says so (never "Resumed") when only kinds are stopped: their own buttons undo them.
  function undoButton(label, path, which, kind) {
    const list = () => (svcNow && svcNow[which]) || [];
    return actionButton(ctx, label, null, async () => {
      const k = kind.value.trim() || "*";
      if (!list().some((s) => s.kind === k)) {
        const others = list().map((s) => s.kind).filter((x) => x !== "*");
        const e = new Error(k === "*" ? `${name} as a whole is not ${which}` +
          (others.length ? `; kind(s) ${others.join(", ")} stay ${which}: use the ${label} ` +
            "button beside each switch" : "") : `kind ${k} of ${name} is not ${which}`);
        throw e;
      }
      return undoSwitch(label, path, k);
    }, refresh);
  }

  async function undoSwitch(label, path, k) {
    await api(`/services/${seg(name)}/${path}`, {method: "POST", body: k === "*" ? {} : {kind: k}});
    return `${label === "Resume" ? "Resumed" : "Unblocked"} ` +
      (k === "*" ? name : `kind ${k} of ${name}`);
  }

  // The Resume or Unblock button beside one switch of the table.
  function undoOne(s) {
    if (!ctx.canOperate) return null;
    const [label, path] = s.which === "paused" ? ["Resume", "resume"] : ["Unblock", "unblock"];
    const b = actionButton(ctx, label, null, () => undoSwitch(label, path, s.kind), refresh);
    b.dataset.action = `${path}:${s.kind}`;
    return b;
  }

  function controls() {
    if (!ctx.canOperate) return null;
    const kind = h("input", {name: "kind", placeholder: "all kinds", size: 12});
    const reason = h("input", {name: "reason", placeholder: "why (recorded)", size: 24});
    return h("div", null, h("div", {class: "filters", id: "switch-controls"},
      h("label", null, "kind", kind), h("label", null, "reason", reason),
      stopButton("Pause", "Pause", "pause", kind, reason),
      undoButton("Resume", "resume", "paused", kind),
      stopButton("Block", "Block", "block", kind, reason),
      undoButton("Unblock", "unblock", "blocked", kind)), confirmBox);
  }

  async function refresh() {
    // Beside the rest, never holding it up (its own request, one at a time).
    runs.refresh().catch((e) => fill(runs.el.querySelector("#kinds-stats"),
      "Cannot read the runs by kind: " + e.message));
    const [list, batches, nodes, due] = await Promise.all([services(),
      api(`/services/${seg(name)}/batches`).catch(() => null),
      api("/nodes").catch(() => null), api(`/services/${seg(name)}/due`).catch(() => null)]);
    const svc = list.find((s) => s.name === name);
    if (!svc) throw new Error(`no service '${name}'`);
    idle = idleKinds(svc, nodes, due);
    fill(head, table([
      ["primary", (s) => s.primary ? `${s.primary.node_id} (epoch ${s.primary.epoch}, active ` +
        `${ago(s.primary.last_active_ms_ago)})` : "none"],
      ["state", (s) => [stateBadge(s, idle.all), kindsWithoutWorker(idle)]],
      ["tasks", (s) => h("span", {class: "counts"}, countCells(name, s.counts),
        countsAge(s.counts_age_ms))],
    ], [svc], {id: "service-state"}));
    svcNow = svc;
    fill(switches, switchesTable(svc, undoOne));
    fill(batchBody, batches ? batchesTable(batches) : "No service document yet.");
    if (drawKinds) drawKinds();
  }
  await refresh();
  const [kinds, groups] = await Promise.all([
    api(`/services/${seg(name)}/counts?by=kind&limit=${KINDS_MAX}`),
    api(`/services/${seg(name)}/counts?by=group&limit=${BREAKDOWN_MAX}`),
  ]);
  try { // GET .../settings: the values in effect and where each comes from
    const s = await api(`/services/${seg(name)}/settings`);
    fill(settingsBody, table([
      ["setting", ([k]) => k],
      ["value", ([, v]) => String(v)],
      ["from", ([k]) => (s.source && s.source[k]) || "-"],
    ], Object.entries(s.settings || {}), {id: "settings-table"}));
  } catch (e) {
    fill(settingsBody, e.status === 404 || e.status === 400 || e.status === 405
      ? "This node's API does not serve the live settings (GET .../settings) yet."
      : "Cannot read the live settings: " + e.message);
  }
  const kindNames = new Set(kinds.rows.map((r) => r.kind));
  knownKinds = kinds.distinct > kindNames.size ? null
    : new Set([...kindNames].filter((k) => k !== null));
  const allTasks = Object.values(svcNow.counts || {}).reduce((n, c) => n + c, 0);
  drawKinds = () => fill(byKind, breakdown("kind", kinds.rows, kinds.distinct, allTasks,
    kindMark), countsAge(kinds.age_ms));
  drawKinds();
  fill(byGroup, breakdown("group", groups.rows, groups.distinct, allTasks),
    countsAge(groups.age_ms));
  return {refresh};
}
