// overview.js - every service (primary, state, counts) and every node (state, the services
// it is primary of, live workers, last ping); both refreshed live in place, rows in a fixed
// order (by name) so nothing jumps under the reader.
import {api, seg} from "../api.js";
import {ago, fill, h, table} from "../dom.js";
import {serviceChart} from "./chart.js";
import {countCells, services, stateBadge} from "./common.js";

function servicesTable(list) {
  if (!list.length) return h("p", null, "No service has run yet.");
  return table([
    ["service", (s) => h("a", {href: `#/services/${seg(s.name)}`}, s.name)],
    ["primary", (s) => s.primary
      ? h("span", {class: "primary"}, s.primary.node_id,
        h("span", {class: "muted"}, ` epoch ${s.primary.epoch}, ` +
          `active ${ago(s.primary.last_active_ms_ago)}`))
      : h("span", {class: "muted"}, "none")],
    ["state", (s) => stateBadge(s)],
    ["tasks", (s) => h("span", {class: "counts"}, countCells(s.name, s.counts))],
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

export async function overviewPage(root) {
  root.dataset.title = "overview";
  const svcCard = h("section", {class: "card"}, h("h2", null, "Services"));
  const svcBody = h("div");
  const nodeCard = h("section", {class: "card"}, h("h2", null, "Nodes"));
  const nodeBody = h("div");
  svcCard.append(svcBody);
  nodeCard.append(nodeBody);
  const chartCard = h("section", {class: "card"}, h("h2", null, "Throughput and queue depth"));
  const chartGrid = h("div", {class: "grid", id: "charts"});
  chartCard.append(chartGrid);
  root.append(h("h1", null, "Overview"), svcCard, chartCard, nodeCard);
  const charts = new Map(); // service -> chart, made once, then fed new data in place
  async function refresh() {
    const [list, nodes] = await Promise.all([services(), api("/nodes")]);
    fill(svcBody, servicesTable(list));
    fill(nodeBody, nodesTable(nodes.nodes, list));
    for (const s of [...list].sort((a, b) => a.name.localeCompare(b.name))) {
      if (!charts.has(s.name)) {
        const c = serviceChart(s.name);
        charts.set(s.name, c);
        chartGrid.append(c.el);
      }
    }
    await Promise.all([...charts.values()].map((c) => c.refresh()));
  }
  await refresh();
  return {refresh};
}
