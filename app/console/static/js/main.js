// The console's shell: sign-in, the header (who, tenant, agent) and hash routing.

import {api, auth, ApiError} from "./api.js";
import {h, clear, errorBox} from "./dom.js";
import {sessionsPage} from "./sessions.js";
import {sessionPage} from "./session.js";
import {searchPage} from "./search.js";
import {sharedPage} from "./shared.js";
import {knowledgePage} from "./knowledge.js";
import {jobsPage} from "./jobs.js";
import {usersPage, userPage} from "./users.js";
import {contextsPage} from "./contexts.js";
import {usagePage} from "./usage.js";

const main = document.getElementById("main");
const nav = document.getElementById("nav");
const who = document.getElementById("who");

const PAGES = {
  sessions: sessionsPage,
  session: sessionPage,
  search: searchPage,
  shared: sharedPage,
  knowledge: knowledgePage,
  jobs: jobsPage,
  users: usersPage,
  user: userPage,
  contexts: contextsPage,
  usage: usagePage,
};

// A page may hold streams and timers: the router aborts this when it leaves the page.
let leaving = new AbortController();

/** "#/session/<id>?seq=5" -> {page: "session", args: ["<id>"], query: {seq: "5"}} */
function parseHash() {
  const raw = location.hash.replace(/^#\/?/, "");
  const [path, qs] = raw.split("?");
  const [page, ...args] = path.split("/").filter(Boolean).map(decodeURIComponent);
  return {page: page || "sessions", args, query: Object.fromEntries(new URLSearchParams(qs))};
}

/** The key's role and, for an agent key, its agent (GET /v1/me). */
async function whoAmI(key) {
  return api("GET", "/v1/me", {key, ctx: {}});
}

function signInPage() {
  nav.hidden = true;
  clear(who);
  const key = h("input", {type: "password", id: "key", name: "key", autocomplete: "off",
                          required: true, placeholder: "lm_…", size: 50});
  const tenant = h("input", {type: "text", id: "tenant", name: "tenant", size: 40,
                             placeholder: "tenant id (admin keys only)"});
  const status = h("div", {id: "signin-status"});
  const form = h("form", {id: "signin", class: "card", onsubmit: async (ev) => {
    ev.preventDefault();
    clear(status).append("Checking the key…");
    const secret = key.value.trim();
    try {
      const me = await whoAmI(secret);
      const ctx = {role: me.role};
      if (me.role === "admin" && tenant.value.trim()) ctx.tenant = tenant.value.trim();
      if (me.role === "agent") ctx.agent = me.agent_id;
      auth.signIn(secret, ctx);
      key.value = "";
      if (location.hash.startsWith("#/signin") || !location.hash) location.hash = "#/sessions";
      else route();
    } catch (err) {
      clear(status).append(errorBox(err.status === 401 ? "That key is not valid." : err));
    }
  }},
    h("h1", {}, "Sign in"),
    h("p", {class: "muted"}, "The key stays in this tab (sessionStorage) and is sent only as "
      + "an Authorization header to this server's API. Closing the tab forgets it."),
    h("label", {for: "key"}, "API key"), key,
    h("label", {for: "tenant"}, "Tenant (admin keys)"), tenant,
    h("div", {}, h("button", {type: "submit", id: "signin-button"}, "Sign in")),
    status);
  clear(main).append(form);
  key.focus();
}

/** An address the console has no page for: say so (not the sessions list in its place). */
function notFoundPage(view) {
  view.id = "page-not-found";
  view.append(h("div", {class: "card"},
    h("h1", {}, "Not found"),
    h("p", {}, "The console has no page at ", h("code", {id: "not-found-path"}, location.hash),
      "."),
    h("p", {}, h("a", {href: "#/sessions"}, "Go to the sessions"))));
}

function header() {
  const ctx = auth.ctx;
  nav.hidden = false;
  const items = [h("span", {class: "role", id: "role"}, ctx.role)];
  if (ctx.role === "admin") {
    const tenant = h("input", {type: "text", id: "tenant-pick", size: 36, value: ctx.tenant || "",
                               placeholder: "tenant id"});
    items.push(h("form", {class: "inline", onsubmit: (ev) => {
      ev.preventDefault();
      auth.update({tenant: tenant.value.trim() || undefined});
      route();
    }}, h("label", {for: "tenant-pick"}, "tenant"), tenant));
  }
  if (ctx.role === "agent") {
    items.push(h("span", {id: "agent"}, `agent ${ctx.agent || "(this key's)"}`));
  } else {
    const agent = h("input", {type: "text", id: "agent-pick", size: 16, value: ctx.agent || "",
                              placeholder: "all agents"});
    items.push(h("form", {class: "inline", onsubmit: (ev) => {
      ev.preventDefault();
      auth.update({agent: agent.value.trim() || undefined});
      route();
    }}, h("label", {for: "agent-pick"}, "acting as"), agent));
  }
  items.push(h("button", {type: "button", id: "signout", class: "small", onclick: () => {
    auth.signOut();
    location.hash = "#/signin";
    route();
  }}, "Sign out"));
  clear(who).append(...items);
}

async function route() {
  leaving.abort();
  leaving = new AbortController();
  if (!auth.key) {
    signInPage();
    return;
  }
  header();
  const {page, args, query} = parseHash();
  if (page === "signin") {  // signed in already (e.g. the back button after signing in)
    location.hash = "#/sessions";
    return;
  }
  const render = Object.hasOwn(PAGES, page) ? PAGES[page] : notFoundPage;
  for (const a of nav.querySelectorAll("a")) {
    a.classList.toggle("active", a.dataset.page === page);
  }
  const view = h("div", {class: "page", id: `page-${page}`});
  clear(main).append(view);
  if (auth.ctx.role === "admin" && !auth.ctx.tenant) {
    view.append(h("div", {class: "card"}, "Admin keys act in one tenant: enter its id above."));
    return;
  }
  try {
    await render(view, {args, query, signal: leaving.signal});
  } catch (err) {
    if (err.name === "AbortError") return;
    if (err instanceof ApiError && err.status === 401) {
      auth.signOut();
      signInPage();
      return;
    }
    view.append(errorBox(err));
  }
}

window.addEventListener("hashchange", route);
route();
