// login.js - the sign-in page: trades a one-time code (?code=, from `cohortctl ui-link`) or a
// pasted API token for a session cookie through POST /api/v1/session, then opens /ui/. The
// code is removed from the address bar first, so it stays out of history and bookmarks. A
// ?next=#/... (set by api.js when a session ran out on a page) is where the user lands after.
import {api} from "./api.js";

const status = document.getElementById("login-status");
const params = new URLSearchParams(location.search);
const wanted = params.get("next") || "";
// Only a fragment of this dashboard, never another address.
const next = /^#\/[^\s]*$/.test(wanted) ? wanted : "";

async function signIn(body) {
  status.textContent = "Signing in…";
  status.className = "";
  try {
    await api("/session", {method: "POST", body, noRedirect: true});
    location.replace("/ui/" + next);
  } catch (e) {
    status.textContent = "Cannot sign in: " + e.message;
    status.className = "status error";
  }
}

const code = params.get("code");
if (code) {
  history.replaceState(null, "", "/ui/login" + (next ? "?next=" + encodeURIComponent(next) : ""));
  signIn({code});
}
document.getElementById("token-form").addEventListener("submit", (ev) => {
  ev.preventDefault();
  signIn({token: document.getElementById("token").value.trim()});
});
