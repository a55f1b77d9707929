// overview.js - every service (primary, state, counts) and every node (state, the services
// it is primary of, live workers, last ping); both refreshed live in place, rows in a fixed
// order (by name) so nothing jumps under the reader.
import {api, seg} from "../api.js";
import {ago, fill, h, table, when} from "../dom.js";
import {RANGES, serviceChart} from "./chart.js";
import {countCells, countsAge, services, stateBadge} from "./common.js";

// "12 s" since the oldest due pending task became due, from a history answer.
function oldestDue(history) {
  const at = history && history.current && history.current.oldest_due_at;
  if (!history) return "…";
  if (!at) return "none due";
  return ago(Date.parse(history.now) - Date.parse(at)).replace(" ago", "");
}

// The changes of primary seen in each service's recorded minutes, newest first. A change to
// the current epoch carries the takeover's own time (`elected` maps a service to the config
// document's elected_at, from GET .../batches), not the start of the first minute the new
// primary recorded (which may be the minute it took over, written under its epoch); older
// changes are known to the minute only (the config document keeps no earlier elections).
function primacyChanges(histories, list, elected) {
  const out = [];
  for (const s of list) {
    const minutes = (histories.get(s.name) || {minutes: []}).minutes.filter((m) => m.epoch);
    for (let i = 1; i < minutes.length; i++) {
      if (minutes[i].epoch !== minutes[i - 1].epoch) {
        const own = s.primary && minutes[i].epoch === s.primary.epoch && elected.get(s.name);
        out.push({service: s.name, at: own || minutes[i].at, exact: !!own, from: minutes[i - 1],
          to: minutes[i]});
      }
    }
    const last = minutes[minutes.length - 1];
    if (last && s.primary && s.primary.epoch !== last.epoch) {
      out.push({service: s.name, at: null, from: last,
        to: {epoch: s.primary.epoch, primary: s.primary.node_id}});
    }
  }
  return out.sort((a, b) => (b.at === null) - (a.at === null) || String(b.at).localeCompare(a.at));
}

function changesTable(changes) {
  if (!changes.length) return h("p", {id: "primacy-none"}, "No change of primary in the charted span.");
  return table([
    ["service", (c) => c.service],
    ["when", (c) => !c.at ? "since the last minute"
      : c.exact ? h("span", {class: "takeover-at"}, when(c.at))
        : h("span", {class: "muted"}, `minute of ${when(c.at)}`)],
    ["from", (c) => `${c.from.primary} (epoch ${c.from.epoch})`],
    ["to", (c) => `${c.to.primary} (epoch ${c.to.epoch})`],
  ], changes, {id: "primacy"});
}

// The live workers of each service, from the nodes' documents ({service: n} per node); a live
// external worker counts one for each service it claimed for (its document has no workers).
function liveWorkers(nodes) {
  const out = new Map();
  for (const n of nodes) {
    if (n.state === "live" && n.kind === "external") {
      for (const svc of n.services || []) out.set(svc, (out.get(svc) || 0) + 1);
    }
    if (n.state !== "live" || !n.workers || typeof n.workers !== "object") continue;
    for (const [svc, w] of Object.entries(n.workers)) {
      if (typeof w === "number") out.set(svc, (out.get(svc) || 0) + w);
    }
  }
  return out;
}

// The oldest due task's age when the service has due work and no live worker, else null.
function idleWith(s, histories, workers) {
  const hist = histories.get(s.name);
  if (!hist || !hist.current || !hist.current.oldest_due_at || workers.get(s.name)) return null;
  return oldestDue(hist);
}

function servicesTable(list, histories, workers) {
  if (!list.length) return h("p", null, "No service has run yet.");
  return table([
    ["service", (s) => h("a", {href: `#/services/${seg(s.name)}`}, s.name)],
    ["primary", (s) => s.primary
      ? h("span", {class: "primary"}, s.primary.node_id,
        h("span", {class: "muted"}, ` epoch ${s.primary.epoch}, ` +
          `active ${ago(s.primary.last_active_ms_ago)}`))
      : h("span", {class: "muted"}, "none")],
    ["state", (s) => stateBadge(s, idleWith(s, histories, workers))],
    ["oldest due", (s) => oldestDue(histories.get(s.name))],
    ["tasks", (s) => h("span", {class: "counts"}, countCells(s.name, s.counts),
      countsAge(s.counts_age_ms))],
  ], [...list].sort((a, b) => a.name.localeCompare(b.name)), {id: "services"});
}

function nodesTable(nodes, list) {
  const primaryOf = {};
  for (const s of list) {
    if (s.primary) (primaryOf[s.primary.node_id] ||= []).push(`${s.name} (epoch ${s.primary.epoch})`);
  }
  const shown = nodes.filter((n) => n.kind !== "external" || n.state === "live");
  if (!shown.length) return h("p", null, "No node seen in the last day.");
  return table([
    ["node", (n) => n.node_id],
    ["state", (n) => h("span", {class: `badge s-${n.state === "live" ? "running" : "failed"}`},
      n.state)],
    ["role", (n) => primaryOf[n.node_id] ? "primary of " + primaryOf[n.node_id].join(", ")
      : n.kind === "external" ? "external worker" : "secondary"],
    ["services", (n) => (n.services || []).join(", ")],
    ["workers", (n) => workers(n.workers)],
    ["last ping", (n) => ago(n.last_ping_ms_ago)],
    ["host", (n) => `${n.host}${n.pid ? " pid " + n.pid : ""}`],
  ], [...shown].sort((a, b) => a.node_id.localeCompare(b.node_id)), {id: "nodes"});
}

// The node document's workers field, whatever its shape: a number or {service: n}.
function workers(w) {
  if (w === undefined || w === null) return "-";
  if (typeof w !== "object") return String(w);
  return Object.entries(w).map(([k, v]) => `${k}: ${typeof v === "object" ? JSON.stringify(v) : v}`)
    .join(", ");
}

export async function overviewPage(root, where, ctx) {
  root.dataset.title = "overview";
  const svcCard = h("section", {class: "card"}, h("h2", null, "Services"));
  const svcBody = h("div");
  const nodeCard = h("section", {class: "card"}, h("h2", null, "Nodes"));
  const nodeBody = h("div");
  svcCard.append(svcBody);
  nodeCard.append(nodeBody);
  let range = "hour";
  const rangeSelect = h("select", {id: "chart-range", onchange: async () => {
    range = rangeSelect.value;
    for (const c of charts.values()) c.setRange(range);
    await refresh().catch((e) => ctx.say("Cannot redraw the charts: " + e.message, true));
  }}, Object.entries(RANGES).map(([k, r]) => h("option", {value: k}, r.words)));
  const chartCard = h("section", {class: "card"}, h("h2", null, "Throughput and queue depth"),
    h("label", {class: "range"}, "span ", rangeSelect,
      h("span", {class: "muted"}, " (per-minute documents, kept history_retention_ms: 1 day" +
        " by default; the week: hourly rollups kept 8 days)")));
  const chartGrid = h("div", {class: "grid", id: "charts"});
  chartCard.append(chartGrid);
  const changesBody = h("div");
  const changesCard = h("section", {class: "card"}, h("h2", null, "Recent primacy changes"),
    changesBody);
  root.append(h("h1", null, "Overview"), svcCard, chartCard, nodeCard, changesCard);
  const charts = new Map(); // service -> chart, made once, then fed new data in place
  const elections = new Map(); // "service/epoch" -> elected_at: read once per epoch
  // The takeover time of each service whose current epoch began within the charted hour.
  async function electedAt(list, histories) {
    const out = new Map();
    await Promise.all(list.map(async (s) => {
      const minutes = (histories.get(s.name) || {minutes: []}).minutes;
      if (!s.primary || !minutes.some((m) => m.epoch && m.epoch !== s.primary.epoch)) return;
      const key = `${s.name}/${s.primary.epoch}`;
      if (!elections.has(key)) {
        const b = await api(`/services/${seg(s.name)}/batches`).catch(() => null);
        if (!b || !b.elected_at) return;
        elections.set(key, b.elected_at);
      }
      out.set(s.name, elections.get(key));
    }));
    return out;
  }
  async function refresh() {
    const [list, nodes] = await Promise.all([services(), api("/nodes")]);
    for (const s of [...list].sort((a, b) => a.name.localeCompare(b.name))) {
      if (!charts.has(s.name)) {
        const c = serviceChart(s.name, range);
        charts.set(s.name, c);
        chartGrid.append(c.el);
      }
    }
    const names = [...charts.keys()];
    const drawn = await Promise.all(names.map((n) => charts.get(n).refresh()));
    const histories = new Map(names.map((n, i) => [n, drawn[i]]));
    fill(svcBody, servicesTable(list, histories, liveWorkers(nodes.nodes)));
    fill(nodeBody, nodesTable(nodes.nodes, list));
    fill(changesBody, changesTable(primacyChanges(histories, list, await electedAt(list,
      histories))));
  }
  await refresh();
  return {refresh};
}
