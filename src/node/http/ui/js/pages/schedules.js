// schedules.js - a service's recurring tasks (GET .../schedules): each schedule's spec, time
// zone, state, last and next slot, and its last task's status (a link to the task). Pausing
// and resuming a schedule is `cohortctl schedules pause|resume SERVICE ID` (the API has no
// endpoint for it yet): the page shows that command beside each schedule for operators.
import {api, seg} from "../api.js";
import {badge, h, table, when} from "../dom.js";

// "0 3 * * * @ Europe/Berlin" -> the zone after " @ ", else UTC (the series' default).
function zone(series) {
  const at = series ? series.lastIndexOf(" @ ") : -1;
  return at >= 0 ? series.slice(at + 3) : "UTC";
}

export async function schedulesPage(root, {parts}, ctx) {
  const name = parts[1];
  root.dataset.title = `${name} schedules`;
  const base = `#/services/${seg(name)}`;
  const reply = await api(`/services/${seg(name)}/schedules`);
  const rows = reply.schedules.length ? table([
    ["id", (s) => s.id],
    ["state", (s) => badge(s.state)],
    ["spec", (s) => h("span", {class: "mono"}, s.spec || s.series || "-")],
    ["time zone", (s) => zone(s.series)],
    ["last slot", (s) => when(s.last_slot)],
    ["next slot", (s) => when(s.next_slot)],
    ["last task", (s) => s.last_task ? h("span", null, badge(s.last_task.status || "deleted"),
      " ", h("a", {href: `${base}/tasks/${s.last_task.id}`, class: "mono"}, s.last_task.id))
      : "none yet"],
    ["created / skipped", (s) => `${s.created ?? 0} / ${s.skipped ?? 0}`],
    ...(ctx.canOperate ? [["pause / resume", (s) => h("code", null,
      `cohortctl schedules ${s.state === "paused" ? "resume" : "pause"} ${name} ${s.id}`)]] : []),
  ], reply.schedules, {id: "schedules"}) : h("p", {id: "schedules-empty"},
    "This service has no schedule (schedule.ID lines in its config).");
  root.append(
    h("h1", null, h("a", {href: base}, name), " · schedules"),
    h("section", {class: "card"}, rows,
      h("p", null, `As of ${when(reply.now)}; the spec comes from the answering node's ` +
        "config file, the rest from the service's config document.")));
  return null;
}
