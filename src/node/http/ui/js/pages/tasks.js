// tasks.js - a service's tasks filtered by status, kind and group, a page at a time in _id
// order through the API's keyset cursor: new tasks arrive at the end, so a page never
// shifts while the reader looks at it (this page is not refreshed live). An id goes straight
// to its task.
import {api, seg} from "../api.js";
import {badge, fill, h, table, when} from "../dom.js";
import {STATUSES} from "./common.js";

// Which bulk actions apply to tasks of a status (the API's rules, docs/API.md tasks:bulk).
const BULK = {
  retry: ["failed", "timed_out", "cancelled"],
  cancel: ["pending"],
  delete: ["succeeded", "failed", "timed_out", "cancelled"],
};

// With scope operate and a status filter: one button per action that applies, each showing
// the dry run's count in a confirmation before it changes anything.
function bulkActions(ctx, service, query, after) {
  const status = query.get("status");
  if (!ctx.canOperate || !status) return null;
  const filter = {status};
  for (const k of ["kind", "group"]) if (query.get(k)) filter[k] = query.get(k);
  const words = Object.entries(filter).map(([k, v]) => `${k}=${v}`).join(", ");
  const path = `/services/${seg(service)}/tasks:bulk`;
  const buttons = Object.entries(BULK).filter(([, st]) => st.includes(status)).map(([action]) =>
    h("button", {type: "button", class: action === "delete" ? "danger" : null,
      "data-bulk": action, onclick: async (ev) => {
        ev.target.disabled = true;
        try {
          const dry = await api(path, {method: "POST", body: {action, filter, dry_run: true}});
          if (!dry.matched) {
            ctx.say(`No task matches ${words}: nothing to ${action}.`);
            return;
          }
          const more = dry.more ? " (the first of more: run it again for the rest)" : "";
          if (!window.confirm(`${action} ${dry.matched} task(s) matching ${words}${more}?`)) return;
          const done = await api(path, {method: "POST", body: {action, filter}});
          ctx.say(`${action}: ${done.changed} task(s) changed` +
            (done.changed !== dry.matched ? ` (${dry.matched} matched a moment before)` : ""));
          await after();
        } catch (e) {
          ctx.say(`${action} failed: ${e.message}` +
            (e.status === 404 || e.status === 405 ? " (this node's API lacks tasks:bulk)" : ""),
          true);
        } finally {
          ev.target.disabled = false;
        }
      }}, `${action[0].toUpperCase()}${action.slice(1)} all matching…`));
  return buttons.length ? h("div", {class: "actions", id: "bulk-actions"}, buttons) : null;
}

const LIMIT = 50;

export async function tasksPage(root, {parts, query}, ctx) {
  const name = parts[1];
  root.dataset.title = `${name} tasks`;
  const base = `#/services/${seg(name)}/tasks`;
  const status = h("select", {name: "status"}, h("option", {value: ""}, "any"),
    STATUSES.map((s) => h("option", {value: s}, s)));
  status.value = query.get("status") || "";
  const kind = h("input", {name: "kind", value: query.get("kind") || "", size: 12});
  const group = h("input", {name: "group", value: query.get("group") || "", size: 12});
  const id = h("input", {name: "id", placeholder: "24 hex digits", size: 26});
  const form = h("form", {class: "filters", id: "task-filters", onsubmit: (ev) => {
    ev.preventDefault();
    if (id.value.trim()) {
      ctx.go(`${base}/${encodeURIComponent(id.value.trim())}`);
      return;
    }
    const q = new URLSearchParams();
    if (status.value) q.set("status", status.value);
    if (kind.value.trim()) q.set("kind", kind.value.trim());
    if (group.value.trim()) q.set("group", group.value.trim());
    ctx.go(`${base}?${q}`);
  }}, h("label", null, "status", status), h("label", null, "kind", kind),
  h("label", null, "group", group), h("label", null, "or id", id),
  h("button", {type: "submit"}, "Show"));

  const q = new URLSearchParams({limit: String(LIMIT)});
  for (const k of ["status", "kind", "group", "after"]) if (query.get(k)) q.set(k, query.get(k));
  const page = await api(`/services/${seg(name)}/tasks?${q}`);
  const rows = page.items.length ? table([
    ["id", (t) => h("a", {href: `${base}/${t.id}`, class: "mono"}, t.id)],
    ["status", (t) => badge(t.status)],
    ["kind", (t) => t.kind || "-"],
    ["group", (t) => t.group || "-"],
    ["attempts", (t) => String(t.attempts ?? "-")],
    ["created", (t) => when(t.created_at)],
    ["last error", (t) => t.last_error ? String(t.last_error).slice(0, 120) : "-"],
  ], page.items, {id: "tasks"}) : h("p", {id: "tasks-empty"}, "No task matches.");
  const keep = new URLSearchParams(query);
  keep.delete("after");
  const first = keep.toString();
  let nextLink = null;
  if (page.next) {
    const n = new URLSearchParams(keep);
    n.set("after", page.next);
    nextLink = h("a", {href: `${base}?${n}`, id: "next-page"}, "Next page →");
  }
  const reload = async () => {
    const again = h("div", {class: "page"});
    await tasksPage(again, {parts, query}, ctx);
    root.replaceChildren(...again.childNodes);
  };
  fill(root,
    h("h1", null, h("a", {href: `#/services/${seg(name)}`}, name), " · tasks"),
    form,
    bulkActions(ctx, name, query, reload),
    h("section", {class: "card"}, rows,
      h("p", {class: "pager"}, query.get("after")
        ? h("a", {href: `${base}${first ? "?" + first : ""}`}, "← First page") : null,
      " ", nextLink, ` (${page.items.length} shown, oldest first)`)));
  return null; // not refreshed live: rows stay where they are
}
