// app.js - the dashboard's entry point: routes by the URL's #fragment to a page module.
import {api} from "./api.js";
import {fill} from "./dom.js";

const main = document.getElementById("main");

async function route() {
  try {
    const s = await api("/services");
    fill(main, `${s.services.length} services`);
  } catch (e) {
    fill(main, "Error: " + e.message);
  }
}

window.addEventListener("hashchange", route);
route();
