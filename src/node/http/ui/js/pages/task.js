// task.js - one task: its fields and options, its data as pretty JSON (text, never markup),
// every attempt of its history, and (scope operate) retry, cancel and delete through the
// API's task actions.
import {api, seg} from "../api.js";
import {badge, fill, h, table, when} from "../dom.js";
import {actionButton} from "./common.js";

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
  const actions = ctx.canOperate ? h("div", {class: "actions", id: "task-actions"},
    actionButton(ctx, "Retry", null, async () => {
      await api(`${path}/retry`, {method: "POST", body: {}});
      return `Task ${id} queued again`;
    }, reload),
    actionButton(ctx, "Cancel", `Cancel task ${id}?`, async () => {
      await api(`${path}/cancel`, {method: "POST", body: {}});
      return `Task ${id} cancelled`;
    }, reload),
    actionButton(ctx, "Delete", `Delete task ${id}? This cannot be undone.`, async () => {
      await api(path, {method: "DELETE"});
      return `Task ${id} deleted`;
    }, gone, true)) : null;
  const history = (t.history || []).length ? table([
    ["attempt", (a) => String(a.attempt ?? "-")],
    ["node", (a) => a.node || "-"],
    ["started", (a) => when(a.started_at)],
    ["ended", (a) => when(a.ended_at)],
    ["outcome", (a) => a.outcome ? badge(a.outcome) : "-"],
    ["error", (a) => a.error || "-"],
  ], t.history, {id: "history"}) : h("p", null, "No attempt yet.");
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
