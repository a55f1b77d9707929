// login.js - the sign-in page: trades a one-time code (?code=, from `cohortctl ui-link`) or a
// pasted API token for a session cookie through POST /api/v1/session, then opens /ui/. The
// code is removed from the address bar first, so it stays out of history and bookmarks.
import {api} from "./api.js";

const status = document.getElementById("login-status");

async function signIn(body) {
  status.textContent = "Signing in…";
  status.className = "";
  try {
    await api("/session", {method: "POST", body, noRedirect: true});
    location.replace("/ui/");
  } catch (e) {
    status.textContent = "Cannot sign in: " + e.message;
    status.className = "status error";
  }
}

const code = new URLSearchParams(location.search).get("code");
if (code) {
  history.replaceState(null, "", "/ui/login");
  signIn({code});
}
document.getElementById("token-form").addEventListener("submit", (ev) => {
  ev.preventDefault();
  signIn({token: document.getElementById("token").value.trim()});
});
