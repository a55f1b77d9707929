// app.js - the dashboard's entry point: who is signed in (GET /api/v1/whoami), the router
// over the URL's #fragment, the status line, and live refresh (every 2 s while the tab is
// visible and the "live" box is ticked; a page refreshes only its counts and charts, never
// the rows a reader is looking at).
import {api} from "./api.js";
import {fill, h} from "./dom.js";
import {auditPage} from "./pages/audit.js";
import {overviewPage} from "./pages/overview.js";
import {schedulesPage} from "./pages/schedules.js";
import {servicePage} from "./pages/service.js";
import {tasksPage} from "./pages/tasks.js";
import {taskPage} from "./pages/task.js";

const REFRESH_MS = 2000;
const main = document.getElementById("main");
const statusLine = document.getElementById("status");
const live = document.getElementById("live");
let current = null; // the page shown: {refresh?: async function}
let generation = 0; // bumped on each navigation: late answers of an old page are dropped

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
  if (!page) {
    fill(main, h("p", null, "No such page. ", h("a", {href: "#/"}, "Overview")));
    current = null;
    return;
  }
  const root = h("div", {class: "page"});
  ctx.say("");
  try {
    const shown = await page(root, {parts, query}, ctx);
    if (my !== generation) return;
    fill(main, root);
    main.dataset.route = location.hash; // which page is shown (the browser tests wait on it)
    current = shown || null;
    document.title = "Cohort - " + (root.dataset.title || "dashboard");
  } catch (e) {
    if (my !== generation) return;
    ctx.say("Cannot load the page: " + e.message, true);
  }
}

async function tick() {
  if (!current || !current.refresh || !live.checked || document.hidden) return;
  const my = generation;
  try {
    await current.refresh();
    if (my === generation) ctx.say("Updated " + new Date().toLocaleTimeString());
  } catch (e) {
    if (my === generation) ctx.say("Refresh failed: " + e.message, true);
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
  setInterval(tick, REFRESH_MS);
  document.addEventListener("visibilitychange", tick);
  await route();
}

start();
