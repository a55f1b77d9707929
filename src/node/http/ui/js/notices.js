// notices.js - the results of actions (done, refused, deleted...): each stays on screen, above
// the page and across navigation, until the user dismisses it with its × button; a refresh
// never overwrites one (the status line is for refreshes, this list for what a click did).
import {h} from "./dom.js";

const MAX_SHOWN = 5; // the oldest goes when a sixth arrives

// Adds a notice: `text` in the list (an error in red, with role "alert").
export function notify(text, isError) {
  let list = document.getElementById("notices");
  if (!list) {
    list = h("div", {id: "notices", class: "notices"});
    document.getElementById("status").after(list);
  }
  const item = h("div", {class: isError ? "notice error" : "notice", role: isError ? "alert"
    : "status"}, h("span", {class: "notice-text"}, text),
  h("button", {type: "button", class: "link dismiss", "aria-label": "dismiss", title: "dismiss",
    onclick: () => item.remove()}, "×"));
  list.append(item);
  while (list.children.length > MAX_SHOWN) list.firstElementChild.remove();
  return item;
}
