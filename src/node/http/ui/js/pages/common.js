// common.js - what several pages show alike: a service's state in words, its counts by
// status, and the buttons of an action that asks first and reports what the API said.
import {api} from "../api.js";
import {ago, h} from "../dom.js";
import {notify} from "../notices.js";

export const STATUSES = ["pending", "claimed", "succeeded", "failed", "timed_out", "cancelled"];

// "running", "paused", "blocked", "paused, blocked" or "kinds stopped", from the switches.
export function serviceState(svc) {
  const all = (list) => (list || []).some((s) => s.kind === "*");
  const words = [];
  if (all(svc.paused)) words.push("paused");
  if (all(svc.blocked)) words.push("blocked");
  if (words.length) return words.join(", ");
  if ((svc.paused || []).length || (svc.blocked || []).length) return "kinds stopped";
  return "running";
}

// The state in words, in a badge coloured by its worst part. `idle` (optional): the age of
// the oldest due task when the service has due work and no live worker for it, which turns a
// "running" service into a warning ("no worker, oldest due 5 min").
export function stateBadge(svc, idle) {
  const s = serviceState(svc);
  if (idle && s === "running") {
    return noWorkerBadge(`no worker, oldest due ${idle}`,
      "tasks are due and no live node or external worker runs this service");
  }
  const tone = s === "running" ? "running" : s.includes("blocked") ? "blocked" : "paused";
  return h("span", {class: `badge s-${tone}`}, s);
}

// The warning badge of due work that no live worker takes (a service's or a kind's).
export function noWorkerBadge(text, title) {
  return h("span", {class: "badge s-warning", "data-state": "no-worker", title}, text);
}

// The live workers of `service` in GET /nodes' list: one entry per live cohortd node running
// workers for it, with the kinds its handler declares (`kinds`; null: every kind), and one
// per live external worker that claimed for it (kinds null: its claims may name any kind).
export function workersOf(nodes, service) {
  const out = [];
  for (const n of nodes || []) {
    if (n.state !== "live") continue;
    if (n.kind === "external") {
      if ((n.services || []).includes(service)) out.push({node: n.node_id, kinds: null});
    } else if (n.workers && typeof n.workers === "object" && n.workers[service] > 0) {
      out.push({node: n.node_id, kinds: (n.kinds && n.kinds[service]) || null});
    }
  }
  return out;
}

// Whether one of `workers` (workersOf) takes tasks of `kind`; null, no kind, every one does.
export function takesKind(workers, kind) {
  return workers.some((w) => !w.kinds || kind === null || w.kinds.includes(kind));
}

// "12 s" from `at` to `now` (ISO times).
export function dueAge(now, at) {
  return ago(Date.parse(now) - Date.parse(at)).replace(" ago", "");
}

// One row of counts: each status with its number, linked to the filtered task list.
export function countCells(service, counts) {
  return STATUSES.map((st) => {
    const n = (counts && counts[st]) || 0;
    return h("a", {href: `#/services/${encodeURIComponent(service)}/tasks?status=${st}`,
      class: "count", "data-status": st}, `${st} ${n}`);
  });
}

// A button that runs `action` (an async function returning a message) after confirm(`ask`)
// (if given), shows the result as a notice that stays until dismissed (notices.js) and then
// calls `after`. `ask` may be an async function: false or null from it cancels.
export function actionButton(ctx, label, ask, action, after, danger) {
  return h("button", {type: "button", class: danger ? "danger" : null, "data-action": label,
    onclick: async (ev) => {
      if (typeof ask === "function" ? !(await ask()) : ask && !window.confirm(ask)) return;
      ev.target.disabled = true;
      try {
        const msg = await action();
        notify(msg || `${label}: done`);
        if (after) await after();
      } catch (e) {
        notify(`${label} failed: ${e.message}` +
          (e.status === 404 || e.status === 405 ? " (this node's API lacks it)" : ""), true);
      } finally {
        ev.target.disabled = false;
      }
    }}, label);
}

// All services (GET /services): a bounded list, one object per service.
export async function services() {
  return (await api("/services")).services;
}

// How old a service's counts are when the server read them from its primary's snapshot (a
// big queue is measured every few seconds, not at every call): "as of 3 s ago", or null
// when they were measured for this answer.
export function countsAge(ageMs) {
  if (ageMs === undefined || ageMs === null || ageMs < 1000) return null;
  return h("span", {class: "counts-age", title: "the queue's counts as its primary last " +
    "measured them"}, `as of ${ago(ageMs)}`);
}
