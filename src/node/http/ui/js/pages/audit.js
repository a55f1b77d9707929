// audit.js - every operator action taken through the API or cohortctl (pause, resume, retry,
// cancel, delete...), done or refused: who, what, when, how it ended; newest first, 50 a page,
// "Older" following the API's cursor. Not refreshed live, so rows stay put.
import {api} from "../api.js";
import {badge, h, table, when} from "../dom.js";

const VIA = {session: "dashboard", token: "API token", cohortctl: "cohortctl"};

function what(e) {
  if (e.via === "cohortctl") return `cohortctl ${e.path}`;
  const body = e.body && Object.keys(e.body).length ? " " + JSON.stringify(e.body) : "";
  return `${e.method} ${e.path.replace(/^\/api\/v1/, "")}${body}`;
}

export async function auditPage(root, {query}) {
  root.dataset.title = "audit";
  const q = new URLSearchParams({limit: "50"});
  if (query.get("before")) q.set("before", query.get("before"));
  const page = await api(`/audit?${q}`);
  const rows = page.entries.length ? table([
    ["when", (e) => when(e.at)],
    ["who", (e) => `${e.who || "(unknown)"} (${VIA[e.via] || e.via})`],
    ["what", (e) => h("span", {class: "mono"}, what(e))],
    ["result", (e) => e.error ? badge("failed") : e.changed === false ? badge("no change")
      : badge("succeeded")],
    ["status", (e) => e.via === "cohortctl" ? `exit ${e.status}`
      : `${e.status}${e.error ? " " + e.error : ""}`],
  ], page.entries, {id: "audit"}) : h("p", {id: "audit-empty"}, "No action yet.");
  root.append(h("h1", null, "Audit"),
    h("section", {class: "card"}, rows,
      h("p", {class: "pager"}, query.get("before") ? h("a", {href: "#/audit"}, "← Newest") : null,
        " ", page.next ? h("a", {href: `#/audit?before=${page.next}`, id: "older"}, "Older →")
          : null)));
  return null;
}
