// kinds.js - the service page's "Runs by kind" card (GET .../kinds): per task kind, the runs
// that finished in the last hour, day or week, their error rate and p50 / p95 durations. The
// durations come from a histogram of fixed buckets (10, 30, 100 ms ... 1,000 s), so each is a
// bucket ("100-300 ms"), never a finer figure; the card says so, and says what keeps each
// window: the per-minute history (history_retention_ms, a day by default) for the hour and the
// day, hourly rollups kept 8 days for the week.
import {api, seg} from "../api.js";
import {fill, h, table} from "../dom.js";

export const WINDOWS = {
  hour: {minutes: 60, words: "last hour", kept: "the per-minute history (kept for " +
    "history_retention_ms, a day by default) and the minute under way"},
  day: {minutes: 1440, words: "last day", kept: "the per-minute history (kept for " +
    "history_retention_ms, a day by default: a shorter setting shortens this window)"},
  week: {minutes: 10080, words: "last week", kept: "hourly rollups kept 8 days, and the " +
    "hour under way from the per-minute history"},
};

// 300 ms, 3 s, 1000 s: a bucket bound (all are 1 or 3 times a power of ten).
function dur(ms) {
  return ms < 1000 ? `${ms} ms` : `${ms / 1000} s`;
}

// A percentile's bucket: "< 10 ms", "100 ms–300 ms", "> 1000 s", or "-" without runs.
export function bucketText(b) {
  if (!b) return "-";
  if (b.to_ms === null) return `> ${dur(b.from_ms)}`;
  return b.from_ms === 0 ? `< ${dur(b.to_ms)}` : `${dur(b.from_ms)}–${dur(b.to_ms)}`;
}

// The card in a new element; returns {el, refresh}.
export function kindsCard(service) {
  let range = "hour";
  const body = h("div", {id: "kinds-stats"});
  const note = h("p", {class: "muted", id: "kinds-note"});
  const select = h("select", {id: "kinds-range", "aria-label": "window", onchange: () => {
    range = select.value;
    refresh().catch((e) => fill(body, "Cannot read the runs by kind: " + e.message));
  }}, Object.entries(WINDOWS).map(([k, w]) => h("option", {value: k}, w.words)));
  const el = h("section", {class: "card", id: "kinds-card"},
    h("h2", null, "Runs by kind ", select), body, note);
  let inFlight = null; // one request at a time: a refresh during one joins it
  function refresh() {
    if (!inFlight) inFlight = load().finally(() => { inFlight = null; });
    return inFlight;
  }
  async function load() {
    const w = WINDOWS[range];
    const r = await api(`/services/${seg(service)}/kinds?minutes=${w.minutes}`);
    if (range !== Object.keys(WINDOWS).find((k) => WINDOWS[k].minutes === r.minutes)) return r;
    const rows = [...r.kinds].sort((a, b) => b.finished - a.finished);
    fill(body, rows.length ? table([
      ["kind", (k) => k.kind === null ? "(no kind)" : k.kind],
      ["finished", (k) => String(k.finished)],
      ["failed", (k) => String(k.failed + k.timed_out)],
      ["error rate", (k) => `${+(k.error_rate * 100).toFixed(1)}%`],
      ["p50", (k) => bucketText(k.p50)],
      ["p95", (k) => bucketText(k.p95)],
    ], rows, {id: "kinds-table", "data-range": range}) :
      h("p", {id: "kinds-table", "data-range": range}, `No run finished in the ${w.words}.`));
    fill(note, `${w.words}: from ${w.kept}. Durations are claim to finish, in buckets ` +
      "(10, 30, 100, 300 ms … 1,000 s): p50 and p95 name the bucket they fall in. Error " +
      "rate: final failures and time-outs over finished runs (retries are not counted)." +
      (r.capped ? ` Only the first ${rows.length} kinds are counted.` : ""));
    el.dataset.range = range;
    return r;
  }
  return {el, refresh};
}
