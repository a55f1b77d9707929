// schedules.js - a service's recurring tasks (GET .../schedules): each schedule's spec, time
// zone, state, last and next slot, and its last task's status (a link to the task). Operators
// get a Pause or Resume button per schedule (POST .../schedules/{id}/pause|resume, the switch
// of `cohortctl schedules pause|resume`), asking first; the result stays as a notice.
import {api, seg} from "../api.js";
import {badge, fill, h, table, when} from "../dom.js";
import {actionButton} from "./common.js";

// "0 3 * * * @ Europe/Berlin" -> the zone after " @ ", else UTC (the series' default).
function zone(series) {
  const at = series ? series.lastIndexOf(" @ ") : -1;
  return at >= 0 ? series.slice(at + 3) : "UTC";
}

// Pause for an active schedule, Resume for a paused one; none before a primary has run it
// (the config document holds no state to switch yet).
function switchButton(ctx, name, s, after) {
  if (s.state === "not started") return h("span", {class: "muted"}, "not started yet");
  const pause = s.state !== "paused";
  const verb = pause ? "pause" : "resume";
  const ask = pause ? `Pause schedule ${s.id} of ${name}? Its slots are skipped (no task is ` +
    "created) until it is resumed; the skipped slots are not made up."
    : `Resume schedule ${s.id} of ${name}? It runs from its next slot on.`;
  const b = actionButton(ctx, pause ? "Pause" : "Resume", ask, async () => {
    const r = await api(`/services/${seg(name)}/schedules/${seg(s.id)}/${verb}`,
      {method: "POST"});
    return r.changed === false ? `Schedule ${s.id} of ${name} already was ${verb}d: no change`
      : `${pause ? "Paused" : "Resumed"} schedule ${s.id} of ${name}`;
  }, after, pause);
  b.dataset.action = `${verb}:${s.id}`;
  return b;
}

export async function schedulesPage(root, {parts}, ctx) {
  const name = parts[1];
  root.dataset.title = `${name} schedules`;
  const base = `#/services/${seg(name)}`;
  const body = h("div");
  async function draw() {
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
      ...(ctx.canOperate ? [["pause / resume", (s) => switchButton(ctx, name, s, draw)]] : []),
    ], reply.schedules, {id: "schedules"}) : h("p", {id: "schedules-empty"},
      "This service has no schedule (schedule.ID lines in its config).");
    fill(body, rows,
      h("p", null, `As of ${when(reply.now)}; the spec comes from the answering node's ` +
        "config file, the rest from the service's config document."));
  }
  root.append(
    h("h1", null, h("a", {href: base}, name), " · schedules"),
    h("section", {class: "card"}, body));
  await draw();
  return null;
}
