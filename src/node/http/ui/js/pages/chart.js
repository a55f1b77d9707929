// chart.js - a service's last hour (or day) per minute (GET .../history), or its last week per
// hour (GET .../history/hours): tasks enqueued, succeeded and failed per minute (or hour), and the queue's depth (pending + claimed) on a second axis, drawn by
// the pinned uPlot (vendor/uplot). Series differ by dash as well as colour, and the legend
// names them, so the chart reads without colour. The minute in progress counts only its
// seconds so far: its rates are left out (drawn as a gap), only its queue depth is drawn.
// Axis values are compact (12k, 1.2M) so 5-6 digit numbers fit beside the plot.
import uPlot from "../../vendor/uplot/uPlot.esm.js";
import {api, seg} from "../api.js";
import {h} from "../dom.js";

const SERIES = [
  {label: "enqueued/min", stroke: "#2856c8", width: 2, value: "enqueued"},
  {label: "succeeded/min", stroke: "#1d7a3a", width: 2, dash: [6, 3], value: "succeeded"},
  {label: "failed/min", stroke: "#b3261e", width: 2, dash: [2, 2],
    value: (m) => m.failed + m.timed_out},
  {label: "queue depth", stroke: "#8a5a00", width: 1, dash: [10, 4], scale: "depth",
    value: (m) => m.counts.pending + m.counts.claimed},
];

function columns(history) {
  // A big queue's current minute is its primary's last measure (GET .../history's as_of):
  // it may still be a minute already recorded, which is drawn once.
  const last = history.minutes[history.minutes.length - 1];
  const minutes = last && last.at >= history.current.at ? [...history.minutes]
    : [...history.minutes, history.current];
  const xs = minutes.map((m) => Date.parse(m.at) / 1000);
  const ys = SERIES.map((s) => minutes.map((m) =>
    m === history.current && !s.scale ? null
      : typeof s.value === "function" ? s.value(m) : m[s.value]));
  return [xs, ...ys];
}

// 950, 12k, 1.2M: an axis value in at most 4 characters.
export function compact(n) {
  const a = Math.abs(n);
  if (a >= 1e6) return `${+(n / 1e6).toFixed(a >= 1e7 ? 0 : 1)}M`;
  if (a >= 1e3) return `${+(n / 1e3).toFixed(a >= 1e4 ? 0 : 1)}k`;
  return String(+n.toFixed(2));
}
const axisValues = (u, splits) => splits.map(compact);

// The spans a chart can show: the hour and the day from the per-minute documents
// (history_retention_ms keeps them 1 day by default), the week from the hourly rollups the
// primary keeps 8 days (GET .../history/hours; the minute under way still from .../history).
export const RANGES = {hour: {minutes: 60, words: "last hour"},
  day: {minutes: 1440, words: "last day"},
  week: {minutes: 1, hours: 168, words: "last week", per: "hour"}};

// A chart of `service` in a new element; returns {el, refresh, setRange} (refresh resolves to
// the history it drew; setRange("day") redraws it over another span of RANGES).
export function serviceChart(service, range = "hour") {
  const el = h("div", {class: "chart", "data-service": service, "data-range": range});
  let plot = null;
  const fit = () => Math.max(240, Math.min(el.clientWidth || 600, 1200));
  // Follow the card's width (the page is attached after the first draw; phones rotate).
  new ResizeObserver(() => {
    if (plot && Math.abs(plot.width - fit()) > 4) plot.setSize({width: fit(), height: 220});
  }).observe(el);
  function setRange(r) {
    if (!RANGES[r] || r === range) return;
    range = r;
    el.dataset.range = r;
    if (plot) plot.destroy();
    plot = null;
  }
  async function refresh() {
    const r = RANGES[range];
    const history = await api(`/services/${seg(service)}/history?minutes=${r.minutes}`);
    if (r.hours) { // the week: its points are the hourly rollups, then the minute under way
      const rollups = await api(`/services/${seg(service)}/history/hours?hours=${r.hours}`);
      history.minutes = rollups.hours;
    }
    const per = r.per || "minute", unit = per === "hour" ? "/hour" : "/min";
    const data = columns(history);
    // What became of the minute in progress (the browser test reads it).
    el.dataset.partial = data[1][data[1].length - 1] === null ? "left out" : "drawn";
    if (plot) {
      plot.setData(data);
      return history;
    }
    plot = new uPlot({
      title: `${service}: ${r.words}, per ${per}`,
      width: fit(), height: 220,
      series: [{}, ...SERIES.map(({value, ...s}) => ({...s, label: s.label.replace("/min", unit),
        points: {show: range === "hour", size: 4}}))],
      scales: {x: {time: true}, depth: {}},
      axes: [{}, {label: `tasks${unit}`, values: axisValues, size: 56},
        {scale: "depth", side: 1, label: "depth", values: axisValues, size: 56,
          grid: {show: false}}],
    }, data, el);
    return history;
  }
  return {el, refresh, setRange};
}
