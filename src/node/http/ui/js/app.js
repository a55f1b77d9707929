// app.js - the dashboard's entry point: who is signed in (GET /api/v1/whoami), the router
// over the URL's #fragment, the status line, and live refresh (every 2 s while the tab is
// visible and the "live" box is ticked; a page refreshes only its counts and charts, never
// the rows a reader is looking at). A navigation shows "Loading" at once, then the new page
// or an error page of its own, never the old page under the new URL. Refresh runs one round
// at a time, waits longer when replies are slow, and shows the data's age; when a round
// fails, the page is marked stale with that age and links to the other nodes' dashboards the
// user listed (docs/UI.md#when-the-node-goes-away).
import {api} from "./api.js";
import {fill, h} from "./dom.js";
import {auditPage} from "./pages/audit.js";
import {overviewPage} from "./pages/overview.js";
import {schedulesPage} from "./pages/schedules.js";
import {servicePage} from "./pages/service.js";
import {tasksPage} from "./pages/tasks.js";
import {taskPage} from "./pages/task.js";

const REFRESH_MS = 2000;
const MAX_WAIT_MS = 30000; // the longest pause between rounds when replies are slow or failing
const OTHERS_KEY = "cohort.dashboards"; // localStorage: the other nodes' dashboard URLs
const main = document.getElementById("main");
const statusLine = document.getElementById("status");
const live = document.getElementById("live");
let current = null; // the page shown: {refresh?: async function}
let generation = 0; // bumped on each navigation: late answers of an old page are dropped
let dataAt = 0; // when the page's data was last read (ms since the epoch)
let failing = null; // the last refresh error while the data is stale, else null

// Shared with the pages.
export const ctx = {
  me: null, // {name, scopes, via, can_operate}
  get canOperate() {
    return !!(this.me && this.me.can_operate);
  },
  say(text, isError) {
    statusLine.textContent = text || "";
    statusLine.className = isError ? "status error" : "status";
  },
  go(hash) {
    location.hash = hash;
  },
};

// "#/services/web/tasks?status=failed" -> {parts: ["services", "web", "tasks"], query}
function parseHash() {
  const raw = location.hash.replace(/^#\/?/, "");
  const [path, q] = raw.split("?");
  const parts = path.split("/").filter(Boolean).map(decodeURIComponent);
  return {parts, query: new URLSearchParams(q || "")};
}

async function route() {
  const my = ++generation;
  const {parts, query} = parseHash();
  let page;
  if (parts.length === 0) page = overviewPage;
  else if (parts[0] === "audit" && parts.length === 1) page = auditPage;
  else if (parts[0] === "services" && parts.length === 2) page = servicePage;
  else if (parts[0] === "services" && parts.length === 3 && parts[2] === "tasks") page = tasksPage;
  else if (parts[0] === "services" && parts.length === 3 && parts[2] === "schedules") {
    page = schedulesPage;
  }
  else if (parts[0] === "services" && parts.length === 4 && parts[2] === "tasks") page = taskPage;
  current = null;
  ctx.say("");
  if (!page) {
    show(h("div", {class: "page error-page", id: "no-page"}, h("h1", null, "No such page"),
      h("p", null, `Nothing lives at ${location.hash}. `, h("a", {href: "#/"}, "Overview"))),
    "no such page");
    return;
  }
  fill(main, h("p", {id: "loading"}, "Loading…"));
  delete main.dataset.route;
  liveState();
  const root = h("div", {class: "page"});
  try {
    const shown = await page(root, {parts, query}, ctx);
    if (my !== generation) return;
    current = shown || null;
    dataAt = Date.now();
    failing = null;
    show(root, root.dataset.title || "dashboard");
  } catch (e) {
    if (my !== generation) return;
    show(h("div", {class: "page error-page", id: "load-error"}, h("h1", null, "Cannot load"),
      h("p", null, `${location.hash || "#/"}: ${e.message}`),
      h("p", null, h("a", {href: location.hash || "#/"}, "Try again"), " · ",
        h("a", {href: "#/"}, "Overview")), othersLinks()), "cannot load");
    ctx.say("Cannot load the page: " + e.message, true);
  }
}

// Puts `el` on screen as the page of the current URL.
function show(el, title) {
  fill(main, el);
  main.classList.remove("stale");
  main.dataset.route = location.hash; // which page is shown (the browser tests wait on it)
  document.title = "Cohort - " + title;
  liveState();
}

// The "live" box applies only to a page that refreshes.
function liveState() {
  const refreshes = !!(current && current.refresh);
  live.disabled = !refreshes;
  live.parentElement.classList.toggle("off", !refreshes);
  live.parentElement.title = refreshes ? "refresh this page every 2 s" : "this page does not refresh";
}

// The other nodes' dashboards the user listed (one URL each), as links.
function othersLinks() {
  let urls = [];
  try {
    urls = JSON.parse(localStorage.getItem(OTHERS_KEY) || "[]").filter((u) => /^https?:\/\//.test(u));
  } catch (e) {
    urls = [];
  }
  const set = h("button", {type: "button", class: "link", id: "set-others", onclick: () => {
    const got = window.prompt("Other nodes' dashboard URLs (space separated):", urls.join(" "));
    if (got === null) return;
    localStorage.setItem(OTHERS_KEY, JSON.stringify(got.split(/\s+/).filter(Boolean)));
  }}, "set other nodes…");
  return h("p", {class: "others"}, urls.length ? "Other nodes: " : "No other node listed. ",
    urls.map((u) => [h("a", {href: u.replace(/\/+$/, "") + "/ui/" + location.hash}, u), " "]),
    set);
}

// "data 3 s old", from the last good round.
function age() {
  return `${Math.max(0, Math.round((Date.now() - dataAt) / 1000))} s old`;
}

// One round of live refresh; resolves to the pause before the next one: 2 s, or twice the
// round's own time when replies are slow, doubling while rounds fail (at most 30 s).
let lastWait = REFRESH_MS;
async function tick() {
  if (!current || !current.refresh || !live.checked || document.hidden) return REFRESH_MS;
  const my = generation;
  const started = Date.now();
  try {
    await current.refresh();
    if (my !== generation) return REFRESH_MS;
    dataAt = Date.now();
    failing = null;
    main.classList.remove("stale");
    const took = dataAt - started;
    ctx.say(`Updated ${new Date(dataAt).toLocaleTimeString()} (data 0 s old` +
      (took > REFRESH_MS / 2 ? `, replies slow: ${took} ms` : "") + ")");
    lastWait = Math.min(MAX_WAIT_MS, Math.max(REFRESH_MS, 2 * took));
  } catch (e) {
    if (my !== generation) return REFRESH_MS;
    failing = e;
    lastWait = Math.min(MAX_WAIT_MS, lastWait * 2);
    markStale();
  }
  return lastWait;
}

// Every figure on screen is dimmed and the status line says how old it is and why.
function markStale() {
  main.classList.add("stale");
  ctx.say(`STALE: the data on screen is ${age()} (last read ` +
    `${new Date(dataAt).toLocaleTimeString()}); refresh failed: ${failing.message}`, true);
  statusLine.append(". ", othersLinks());
}

// The refresh loop: one round at a time, the next one started only after the last ended.
async function loop() {
  let wait = REFRESH_MS;
  for (;;) {
    await new Promise((r) => setTimeout(r, wait));
    wait = await tick();
    if (failing && main.classList.contains("stale")) markStale(); // the age keeps counting
  }
}

async function start() {
  try {
    ctx.me = await api("/whoami");
  } catch (e) {
    ctx.say("Cannot reach the API: " + e.message, true);
    return;
  }
  const who = document.getElementById("who");
  who.textContent = `${ctx.me.name} (${ctx.canOperate ? "operate" : "read-only"})`;
  document.body.classList.toggle("read-only", !ctx.canOperate);
  document.getElementById("logout").addEventListener("click", async () => {
    try {
      await api("/session", {method: "DELETE", noRedirect: true});
    } finally {
      location.assign("/ui/login");
    }
  });
  window.addEventListener("hashchange", route);
  loop();
  await route();
}

start();
