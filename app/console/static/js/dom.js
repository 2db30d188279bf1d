// DOM helpers. Everything the console shows goes through text nodes and properties, never
// through HTML parsing, so stored content (messages, keys, values) is displayed as text.

/** h("a", {href: "#/x", class: "c", onclick: fn}, "text", child) -> element */
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (name.startsWith("on") && typeof value === "function") {
      el.addEventListener(name.slice(2), value);
    } else if (name === "class") {
      el.className = value;
    } else if (name === "dataset") {
      Object.assign(el.dataset, value);
    } else if (name === "value" || name === "checked" || name === "selected") {
      el[name] = value;
    } else {
      el.setAttribute(name, value === true ? "" : String(value));
    }
  }
  append(el, children);
  return el;
}

export function append(el, children) {
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

export function clear(el) {
  el.replaceChildren();
  return el;
}

export function fmt(n) {
  return typeof n === "number" ? n.toLocaleString("en-US") : String(n ?? "–");
}

export function when(iso) {
  if (!iso) return "–";
  const d = new Date(iso);
  return isNaN(d) ? String(iso) : d.toISOString().replace("T", " ").slice(0, 19) + "Z";
}

export function bytes(n) {
  if (typeof n !== "number") return "–";
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KB`;
  return `${(n / 1024 / 1024).toFixed(1)} MB`;
}

export function json(value) {
  return JSON.stringify(value, null, 2);
}

/** A message box for an error (an ApiError shows its code and message). */
export function errorBox(err) {
  const text = err && err.code ? `${err.status} ${err.code}: ${err.message}` : String(err);
  return h("div", {class: "error", role: "alert"}, text);
}

/** A <pre> with a Copy button. */
export function copyable(text, attrs = {}) {
  const pre = h("pre", {class: "code", ...attrs}, text);
  const button = h("button", {type: "button", class: "small", onclick: async () => {
    try {
      await navigator.clipboard.writeText(pre.textContent);
      button.textContent = "Copied";
    } catch {
      const range = document.createRange();  // no clipboard access: select it instead
      range.selectNodeContents(pre);
      getSelection().removeAllRanges();
      getSelection().addRange(range);
      button.textContent = "Selected: press Ctrl+C";
    }
    setTimeout(() => { button.textContent = "Copy"; }, 2000);
  }}, "Copy");
  return h("div", {class: "copyable"}, button, pre);
}

/** A table from column titles and rows (arrays of cells: text or nodes). */
export function table(columns, rows, attrs = {}) {
  return h("table", attrs,
    h("thead", {}, h("tr", {}, columns.map((c) => h("th", {}, c)))),
    h("tbody", {}, rows));
}
