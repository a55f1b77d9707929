// dom.js - building the DOM from data: every text goes in through text nodes (textContent),
// never parsed as markup, so a task's data or an error message cannot become HTML.

// h("a", {href: "#/", class: "x", onclick: fn}, "text", child, ...): an element. Attributes
// starting with "on" are listeners; `class` and other names are set as attributes; children
// are nodes or text (null and false are skipped, arrays are flattened).
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith("on") && typeof v === "function") el.addEventListener(k.slice(2), v);
    else if (k === "checked" || k === "disabled" || k === "value") el[k] = v;
    else el.setAttribute(k, v === true ? "" : String(v));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else if (c instanceof Node) el.appendChild(c);
    else el.appendChild(document.createTextNode(String(c)));
  }
}

// Replaces the children of `el` with `children`.
export function fill(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

// A table: `cols` are [heading, (row) => cell content] pairs.
export function table(cols, rows, attrs) {
  return h("table", attrs || {},
    h("thead", null, h("tr", null, cols.map(([name]) => h("th", {scope: "col"}, name)))),
    h("tbody", null, rows.map((r) => h("tr", null, cols.map(([, f]) => h("td", null, f(r)))))));
}

// "3 s ago", "4 min ago" from milliseconds.
export function ago(ms) {
  if (ms === null || ms === undefined) return "-";
  const s = Math.round(ms / 1000);
  if (s < 60) return `${s} s ago`;
  if (s < 3600) return `${Math.round(s / 60)} min ago`;
  if (s < 86400) return `${Math.round(s / 3600)} h ago`;
  return `${Math.round(s / 86400)} d ago`;
}

// An ISO time as local "YYYY-MM-DD HH:MM:SS", or "-".
export function when(iso) {
  if (!iso) return "-";
  const d = new Date(iso);
  if (isNaN(d)) return String(iso);
  const p = (n) => String(n).padStart(2, "0");
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())} ` +
    `${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}`;
}

// A status word in a badge whose text, not only its colour, carries the meaning.
export function badge(status) {
  return h("span", {class: `badge s-${String(status).replace(/[^a-z_]/g, "")}`}, status);
}
