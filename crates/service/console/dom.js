// dom.js: builds the console's DOM from data as text nodes only (never markup from strings).

/** An element: `h("a", {href: "#/x", class: "link", onclick: fn}, "text", child, …)`. */
export function h(tag, attributes = {}, ...children) {
  const element = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (name.startsWith("on") && typeof value === "function") {
      element.addEventListener(name.slice(2), value);
    } else if (name === "class") {
      element.className = value;
    } else if (name === "dataset") {
      Object.assign(element.dataset, value);
    } else if (name === "value") {
      element.value = value;
    } else {
      element.setAttribute(name, value === true ? "" : String(value));
    }
  }
  append(element, children);
  return element;
}

/** Appends children: elements as they are, anything else as a text node. */
export function append(parent, children) {
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null || child === false) continue;
    parent.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return parent;
}

/** Replaces every child of `parent`. */
export function replace(parent, ...children) {
  parent.replaceChildren();
  return append(parent, children);
}

/** A time in seconds (or ms when `ms`) since the epoch, as local date and time. */
export function when(seconds, ms = false) {
  if (seconds === undefined || seconds === null) return "";
  const date = new Date(ms ? seconds : seconds * 1000);
  return date.toLocaleString(undefined, { dateStyle: "short", timeStyle: "medium" });
}

/** A long base64-looking run in a text is shown as a note, never as the raw data. */
export function withoutRawData(text) {
  return String(text).replace(/[A-Za-z0-9+/=]{400,}/g, (run) => `[binary data, ${run.length} characters, not shown]`);
}

/** A JSON value pretty-printed; strings longer than `fold` characters are folded (click to open). */
export function prettyJson(value, fold = 120) {
  const pre = h("pre", { class: "json" });
  const walk = (item, indent) => {
    const pad = "  ".repeat(indent);
    if (Array.isArray(item)) {
      if (item.length === 0) return append(pre, ["[]"]);
      append(pre, ["[\n"]);
      item.forEach((entry, index) => {
        append(pre, [pad + "  "]);
        walk(entry, indent + 1);
        append(pre, [index < item.length - 1 ? ",\n" : "\n"]);
      });
      return append(pre, [pad + "]"]);
    }
    if (item && typeof item === "object") {
      const keys = Object.keys(item);
      if (keys.length === 0) return append(pre, ["{}"]);
      append(pre, ["{\n"]);
      keys.forEach((key, index) => {
        append(pre, [pad + "  ", h("span", { class: "key" }, JSON.stringify(key)), ": "]);
        walk(item[key], indent + 1);
        append(pre, [index < keys.length - 1 ? ",\n" : "\n"]);
      });
      return append(pre, [pad + "}"]);
    }
    const text = JSON.stringify(item === undefined ? null : item);
    if (typeof item === "string" && text.length > fold) {
      const folded = h("details", { class: "fold" },
        h("summary", {}, withoutRawData(text.slice(0, fold)) + `… (${text.length} characters)`),
        h("span", {}, withoutRawData(text)));
      return append(pre, [folded]);
    }
    return append(pre, [h("span", { class: typeof item }, text)]);
  };
  walk(value, 0);
  return pre;
}

/** A one-line notice (`kind`: "error", "ok" or "info"). */
export function notice(kind, text) {
  return h("p", { class: `notice ${kind}`, role: kind === "error" ? "alert" : "status" }, text);
}
