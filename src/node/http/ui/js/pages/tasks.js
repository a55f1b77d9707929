// tasks.js - a service's tasks filtered by status, kind, group, task data (a bounded search)
// or a view (retrying: in backoff; scheduled: delayed), newest first unless the reader picks oldest first, a page at a
// time through the API's keyset cursor: the next page continues where this one ended whatever
// arrived meanwhile (this page is not refreshed live). The total of matching tasks heads the
// list; rows can be selected for Retry, Cancel or Delete, beside "all matching". An id goes
// straight to its task.
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
  if (!ctx.canOperate || !status || query.get("view")) return null; // a view is no bulk filter
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

// The selected rows' ids, by status: one request per task through the single-task endpoints
// (a page holds at most LIMIT), each refused task counted and its reason kept.
function selectionActions(ctx, service, picked, after) {
  if (!ctx.canOperate) return null;
  const count = h("span", {id: "selected-count"}, "0 selected");
  const run = async (action) => {
    const chosen = [...picked.entries()].filter(([, st]) => BULK[action].includes(st));
    if (!chosen.length) {
      ctx.say(`No selected task can be ${action === "retry" ? "retried" : action + "ed"}` +
        ` (${action} applies to ${BULK[action].join(", ")}).`, true);
      return;
    }
    const skipped = picked.size - chosen.length;
    if (!window.confirm(`${action} ${chosen.length} selected task(s)` +
      (skipped ? ` (${skipped} selected of another status left alone)` : "") + "?")) return;
    let done = 0;
    const refused = [];
    for (const [id] of chosen) {
      const path = `/services/${seg(service)}/tasks/${seg(id)}`;
      try {
        await api(action === "delete" ? path : `${path}/${action}`,
          {method: action === "delete" ? "DELETE" : "POST"});
        done++;
      } catch (e) {
        refused.push(`${id}: ${e.message}`);
      }
    }
    ctx.say(`${action}: ${done} of ${chosen.length} selected task(s) changed` +
      (refused.length ? `; refused: ${refused.slice(0, 3).join("; ")}` : ""), refused.length > 0);
    await after();
  };
  const buttons = Object.keys(BULK).map((action) => h("button", {type: "button",
    class: action === "delete" ? "danger" : null, "data-selected": action,
    onclick: () => run(action)}, `${action[0].toUpperCase()}${action.slice(1)} selected`));
  return {count, bar: h("div", {class: "actions", id: "selection-actions"}, count, " ", buttons)};
}

const LIMIT = 50;
const VIEWS = {retrying: "retrying (in backoff)", scheduled: "scheduled (delayed)"};

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
  const dataPath = h("input", {name: "data_path", value: query.get("data_path") || "", size: 14,
    placeholder: "customer.id"});
  const dataValue = h("input", {name: "data_value", value: query.get("data_value") || "",
    size: 10});
  const order = h("select", {name: "order"}, h("option", {value: "newest"}, "newest first"),
    h("option", {value: "oldest"}, "oldest first"));
  order.value = query.get("order") === "oldest" ? "oldest" : "newest";
  const view = h("select", {name: "view"}, h("option", {value: ""}, "all"),
    Object.entries(VIEWS).map(([v, label]) => h("option", {value: v}, label)));
  view.value = VIEWS[query.get("view")] ? query.get("view") : "";
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
    if (view.value) q.set("view", view.value);
    if (dataPath.value.trim()) q.set("data_path", dataPath.value.trim());
    if (dataValue.value) q.set("data_value", dataValue.value);
    if (order.value === "oldest") q.set("order", "oldest");
    ctx.go(`${base}?${q}`);
  }}, h("label", null, "status", status), h("label", null, "view", view),
  h("label", null, "kind", kind), h("label", null, "group", group),
  h("label", null, "data", dataPath), h("label", null, "=", dataValue),
  h("label", null, "order", order), h("label", null, "or id", id),
  h("button", {type: "submit"}, "Show"));

  const q = new URLSearchParams({limit: String(LIMIT), order: order.value});
  for (const k of ["status", "kind", "group", "after"]) if (query.get(k)) q.set(k, query.get(k));
  if (view.value) q.set("view", view.value);
  const search = query.get("data_path") && query.get("data_value");
  if (search) {
    q.set("data_path", query.get("data_path"));
    q.set("data_value", query.get("data_value"));
  } else if (!query.get("after")) {
    q.set("total", "true"); // counted once, on the first page (not with a bounded search)
  }
  const page = await api(`/services/${seg(name)}/tasks?${q}`);
  const picked = new Map(); // id -> status of the rows ticked
  const reload = async () => {
    const again = h("div", {class: "page"});
    await tasksPage(again, {parts, query}, ctx);
    root.replaceChildren(...again.childNodes);
  };
  const selection = page.items.length ? selectionActions(ctx, name, picked, reload) : null;
  const tick = (t) => h("input", {type: "checkbox", "data-id": t.id,
    "aria-label": `select ${t.id}`, onchange: (ev) => {
      if (ev.target.checked) picked.set(t.id, t.status);
      else picked.delete(t.id);
      selection.count.textContent = `${picked.size} selected`;
    }});
  const rows = page.items.length ? table([
    ["id", (t) => h("a", {href: `${base}/${t.id}`, class: "mono"}, t.id)],
    ["status", (t) => badge(t.status)],
    ["kind", (t) => t.kind || "-"],
    ["group", (t) => t.group || "-"],
    ["attempts", (t) => String(t.attempts ?? "-")],
    ["created", (t) => when(t.created_at)],
    [view.value ? "next run" : "finished", (t) => when(view.value ? t.run_at : t.finished_at)],
    ["last error", (t) => t.last_error ? String(t.last_error).slice(0, 120) : "-"],
    ...(selection ? [["select", tick]] : []),
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
  const orderWords = order.value === "oldest" ? "oldest first" : "newest first";
  const total = typeof page.total === "number"
    ? h("p", {id: "tasks-total"}, `${page.total} task(s) match, ${orderWords}` +
      (view.value ? ` (${VIEWS[view.value]}: pending tasks ` + (view.value === "retrying"
        ? "that ran before and wait for another attempt at their next run)"
        : "created with a delay that never ran)") : ""))
    : null;
  const searched = typeof page.searched_max === "number"
    ? h("p", {id: "tasks-searched"}, `Search by data: data.${query.get("data_path")} = ` +
      `${query.get("data_value")}, among the ${page.searched_max} ${orderWords.split(" ")[0]} ` +
      `tasks ${query.get("after") ? "after the previous page" : ""} matching the other ` +
      "filters (task data has no index: narrow by status, kind or group, or page on).")
    : null;
  fill(root,
    h("h1", null, h("a", {href: `#/services/${seg(name)}`}, name), " · tasks"),
    form,
    bulkActions(ctx, name, query, reload),
    selection ? selection.bar : null,
    h("section", {class: "card"}, total, searched, rows,
      h("p", {class: "pager"}, query.get("after")
        ? h("a", {href: `${base}${first ? "?" + first : ""}`}, "← First page") : null,
      " ", nextLink, ` (${page.items.length} shown, ${orderWords})`)));
  return null; // not refreshed live: rows stay where they are
}
