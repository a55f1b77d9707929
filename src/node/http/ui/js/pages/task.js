// task.js - one task: its fields and options, its data as pretty JSON (text, never markup),
// every attempt of its history, and (scope operate) retry, cancel and delete through the
// API's task actions.
import {api, seg} from "../api.js";
import {badge, fill, h, table, when} from "../dom.js";
import {actionButton} from "./common.js";

// Which actions apply to a status (the store's rules, docs/SCHEMA.md): retry a finished task
// that did not succeed, cancel one waiting or running (running: a request to its worker),
// delete a finished one. Others are not offered.
const APPLIES = {
  Retry: ["failed", "timed_out", "cancelled"],
  Cancel: ["pending", "claimed"],
  Delete: ["succeeded", "failed", "timed_out", "cancelled"],
};
const applies = (label, status) => APPLIES[label].includes(status);

// One history entry's cells: an attempt ({attempt, node, started_at, ended_at, outcome,
// error}) or an event ({event: "retried" | "cancelled" | "cancel_requested" | "crashed", by
// or node, at, from, attempt, error}): an event shows what happened, who and when.
function historyCells(a) {
  if (!a.event) {
    return {what: a.outcome ? badge(a.outcome) : "-", who: a.node || a.token || "-",
      started: when(a.started_at), ended: when(a.ended_at), error: a.error || ""};
  }
  const words = {retried: "retried by operator", cancelled: "cancelled by operator",
    cancel_requested: "cancel requested", crashed: "crashed (back to pending)"};
  const detail = [a.from ? `was ${a.from}` : "", a.error || "",
    a.counted === false ? "not counted as an attempt" : ""].filter(Boolean).join("; ");
  return {what: h("span", {class: "badge s-event", "data-event": a.event},
    words[a.event] || a.event), who: a.by || a.node || "-", started: "",
  ended: when(a.at), error: detail};
}

const FIELDS = ["status", "kind", "group", "priority", "tracked", "attempts", "max_attempts",
  "run_at", "created_at", "finished_at", "claimed_by", "last_error"];

export async function taskPage(root, {parts}, ctx) {
  const [, name, , id] = parts;
  root.dataset.title = `task ${id}`;
  const path = `/services/${seg(name)}/tasks/${seg(id)}`;
  const t = await api(path);
  const show = (k, v) => {
    if (k === "status") return badge(v);
    if (k.endsWith("_at")) return when(v);
    if (v === null || v === undefined) return "-";
    return typeof v === "object" ? JSON.stringify(v) : String(v);
  };
  const reload = async () => {
    const again = h("div", {class: "page"});
    await taskPage(again, {parts}, ctx);
    root.replaceChildren(...again.childNodes);
  };
  const gone = async () => ctx.go(`#/services/${seg(name)}/tasks`);
  const offer = (label, ...rest) => applies(label, t.status) ? actionButton(ctx, label, ...rest)
    : null;
  const actions = ctx.canOperate ? h("div", {class: "actions", id: "task-actions"},
    offer("Retry", null, async () => {
      await api(`${path}/retry`, {method: "POST", body: {}});
      return `Task ${id} queued again`;
    }, reload),
    offer("Cancel", `Cancel task ${id}?`, async () => {
      await api(`${path}/cancel`, {method: "POST", body: {}});
      return t.status === "claimed" ? `Cancel of task ${id} requested from its worker`
        : `Task ${id} cancelled`;
    }, reload),
    offer("Delete", `Delete task ${id}? This cannot be undone.`, async () => {
      await api(path, {method: "DELETE"});
      return `Task ${id} of ${name} deleted`;
    }, gone, true)) : null;
  const cells = (t.history || []).map(historyCells);
  const history = cells.length ? table([
    ["attempt", (c) => String(t.history[cells.indexOf(c)].attempt ?? "")],
    ["what", (c) => c.what],
    ["by / node", (c) => c.who],
    ["started", (c) => c.started],
    ["ended / at", (c) => c.ended],
    ["error", (c) => h("span", {class: "error-text"}, c.error)],
  ], cells, {id: "history"}) : h("p", null, "No attempt yet.");
  fill(root,
    h("h1", null, h("a", {href: `#/services/${seg(name)}/tasks`}, name), " · task ",
      h("span", {class: "mono"}, id)),
    actions,
    h("div", {class: "grid"},
      h("section", {class: "card"}, h("h2", null, "Task"),
        table([["field", (k) => k], ["value", (k) => show(k, t[k])]], FIELDS, {id: "task"})),
      h("section", {class: "card"}, h("h2", null, "Data"),
        h("pre", {class: "json", id: "task-data"}, JSON.stringify(t.data, null, 2)))),
    h("section", {class: "card"}, h("h2", null, "History"), history));
  return null;
}
