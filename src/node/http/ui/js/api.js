// api.js - the dashboard's one way to reach the node: fetch /api/v1 JSON with the session
// cookie (same origin only). A 401 sends the browser to the sign-in page, which comes back to
// the page the user was on (?next=#/...); any other error
// becomes an ApiError carrying the API's code and message.

export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

export async function api(path, options = {}) {
  const init = {method: options.method || "GET", credentials: "same-origin", headers: {}};
  if (options.body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(options.body);
  }
  const r = await fetch("/api/v1" + path, init);
  let body = null;
  try {
    body = await r.json();
  } catch (e) {
    body = null;
  }
  if (r.status === 401 && !options.noRedirect) {
    location.assign(signInUrl());
  }
  if (!r.ok) {
    const err = (body && body.error) || {};
    throw new ApiError(r.status, err.code || "http_" + r.status, err.message || r.statusText);
  }
  return body;
}

// A path segment, encoded.
export const seg = encodeURIComponent;

// The sign-in page's address, carrying the page to come back to.
export function signInUrl() {
  return "/ui/login" + (location.hash.startsWith("#/") ? "?next=" + seg(location.hash) : "");
}
