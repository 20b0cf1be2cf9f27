// statuspage_harness.js runs the status page's script under node against a
// minimal DOM, for TestStatusPageScript. Usage: node statuspage_harness.js IN.json
//
// IN.json: {"script": "...", "get": {"v1/downstreams": "<body>", "v1/history": "<body>",
// "v1/downstreams/printer/jobs": "<body>", ...}} (the real server's answers).
// The harness lets the script poll once, opens printer's "latest jobs",
// types a rate into printer's replay field and clicks replay (answered 202,
// or 400 for the rate "fast"), polls again, closes "latest jobs" and polls
// a third time, and prints one JSON object: the rows' cell texts, the open
// jobs rows, every request the script made, the confirm prompts, the
// connection line, and any error thrown.
"use strict";
const fs = require("fs");
const vm = require("vm");

const input = JSON.parse(fs.readFileSync(process.argv[2], "utf8"));
const out = { requests: [], confirms: [], errors: [], polls: [] };
process.on("unhandledRejection", e => out.errors.push("unhandled rejection: " + (e && e.stack || e)));

class Node {
  constructor() { this.childNodes = []; this.parentNode = null; }
  get textContent() { return this.childNodes.map(c => c.textContent).join(""); }
  set textContent(v) { this.replaceChildren(String(v)); }
  get lastChild() { return this.childNodes[this.childNodes.length - 1] || null; }
  get isConnected() { let n = this; while (n.parentNode) n = n.parentNode; return n === doc.documentElement; }
  append(...ns) {
    for (let n of ns) {
      if (typeof n === "string") n = new Text(n);
      if (!(n instanceof Node)) throw new TypeError("append: not a node: " + n);
      if (n.parentNode) n.parentNode.removeChild(n);
      n.parentNode = this;
      this.childNodes.push(n);
    }
  }
  remove() { if (this.parentNode) this.parentNode.removeChild(this); }
  after(n) {
    const p = this.parentNode;
    if (n.parentNode) n.parentNode.removeChild(n);
    p.childNodes.splice(p.childNodes.indexOf(this) + 1, 0, n);
    n.parentNode = p;
  }
  closest(tag) { let n = this; while (n && !(n instanceof Element && n.tagName === tag.toUpperCase())) n = n.parentNode; return n; }
  replaceChildren(...ns) { for (const c of [...this.childNodes]) this.removeChild(c); this.append(...ns); }
  removeChild(n) {
    this.childNodes.splice(this.childNodes.indexOf(n), 1);
    n.parentNode = null;
    if (doc.activeElement !== doc.body && !doc.activeElement.isConnected) doc.activeElement = doc.body; // a browser blurs a removed element
  }
}
class Text extends Node {
  constructor(t) { super(); this.data = t; }
  get textContent() { return this.data; }
  set textContent(v) { this.data = String(v); }
}
class Element extends Node {
  constructor(tag) {
    super();
    Object.assign(this, { tagName: tag.toUpperCase(), attrs: {}, listeners: {}, className: "", id: "", hidden: false, value: "", disabled: false });
  }
  // The page never parses data as HTML: these throw, and the test fails.
  set innerHTML(v) { throw new Error("innerHTML set to " + v); }
  set outerHTML(v) { throw new Error("outerHTML set to " + v); }
  insertAdjacentHTML(_, v) { throw new Error("insertAdjacentHTML " + v); }
  setAttribute(k, v) { this.attrs[k] = String(v); }
  getAttribute(k) { return k in this.attrs ? this.attrs[k] : null; }
  addEventListener(type, f) { (this.listeners[type] ||= []).push(f); }
  dispatch(type, ev) { for (const f of this.listeners[type] || []) f(Object.assign({ type, target: this }, ev)); }
  click() { if (!this.disabled) this.dispatch("click", {}); }
  focus() { if (this.isConnected) doc.activeElement = this; }
  setSelectionRange(a, b) { this.selectionStart = a; this.selectionEnd = b; }
  all(pred, acc = []) {
    for (const c of this.childNodes) if (c instanceof Element) { if (pred(c)) acc.push(c); c.all(pred, acc); }
    return acc;
  }
}

const doc = { createElement: t => new Element(t), createElementNS: (_, t) => new Element(t) };
doc.documentElement = new Element("html");
doc.body = new Element("body");
doc.documentElement.append(doc.body);
doc.activeElement = doc.body;
const byId = {};
for (const id of ["conn", "summary", "lanes", "empty", "span"]) {
  byId[id] = Object.assign(new Element(id === "lanes" ? "table" : "p"), { id });
  doc.body.append(byId[id]);
}
const tbody = new Element("tbody");
byId.lanes.append(tbody);
doc.getElementById = id => byId[id] || null;
doc.querySelector = sel => { if (sel === "#lanes tbody") return tbody; throw new Error("querySelector: unexpected selector " + sel); };

function answer(status, body) {
  return { ok: status >= 200 && status < 300, status, json: async () => JSON.parse(body) };
}
async function fetch(path, init = {}) {
  out.requests.push({ path, method: init.method || "GET", credentials: init.credentials || "", headers: init.headers || {}, body: init.body || "" });
  if (!init.method || init.method === "GET") {
    if (!(path in input.get)) return answer(404, "{}");
    return answer(200, input.get[path]);
  }
  if (JSON.parse(init.body).rate === "fast") return answer(400, JSON.stringify({ error: "rate: want N/s, N/m or N/h, got \"fast\"" }));
  return answer(202, JSON.stringify({ replaying: 5 }));
}
const timers = [];
const ctx = vm.createContext({
  document: doc, fetch, console,
  window: { confirm: msg => { out.confirms.push(msg); return true; } },
  setTimeout: (f, ms) => { timers.push(f); return timers.length; },
});

const settle = async () => { for (let i = 0; i < 20; i++) await new Promise(r => setImmediate(r)); };
const lanes = () => tbody.childNodes.filter(tr => tr.className !== "jobsrow");
const cellTexts = () => lanes().map(tr => tr.childNodes.map(td => td.textContent));
// jobRows are the open "latest jobs" rows: the downstream row above each,
// its message, and its jobs' cells (header first) with their classes.
const jobRows = () => tbody.childNodes.flatMap((tr, i) => tr.className !== "jobsrow" ? [] : [{
  above: i > 0 ? tbody.childNodes[i - 1].childNodes[0].textContent : "",
  cells: tr.childNodes[0].childNodes.length,
  msg: tr.childNodes[0].childNodes[0].textContent,
  table: tr.all(e => e.tagName === "TR").map(r => r.childNodes.map(c => c.textContent)),
  classes: tr.all(e => e.tagName === "TD" || e.tagName === "SPAN").map(c => c.className),
}]);
const details = name => control(name).tr.all(e => e.tagName === "DETAILS")[0];
const toggle = async (name, open) => { const d = details(name); d.open = open; d.dispatch("toggle", {}); await settle(); };
const jobFetches = () => out.requests.filter(r => r.path.endsWith("/jobs")).map(r => r.path);
const control = name => {
  const tr = lanes().find(tr => tr.childNodes[0].textContent.startsWith(name));
  const [input] = tr ? tr.all(e => e.tagName === "INPUT") : [];
  const [button] = tr ? tr.all(e => e.tagName === "BUTTON") : [];
  return { tr, input, button };
};
const poll = async () => {
  if (timers.length) timers.shift()();
  await settle();
  out.polls.push({ rows: cellTexts(), jobs: jobRows(), conn: byId.conn.textContent, connClass: byId.conn.className });
};

(async () => {
  try {
    vm.runInContext(input.script, ctx, { filename: "status.html <script>" });
    await poll(); // the script's own first poll
    if (byId.conn.className === "err") throw new Error("the first poll failed: " + byId.conn.textContent);
    out.jobFetches = [jobFetches()]; // none: every "latest jobs" is closed
    await toggle("printer", true);
    out.jobsOpened = jobRows();
    out.jobFetches.push(jobFetches());
    let c = control("printer");
    out.placeholder = c.input && c.input.placeholder;
    out.otherControls = lanes().filter(tr => tr !== c.tr).map(tr => tr.all(e => e.tagName === "BUTTON").map(b => ({ disabled: b.disabled })));
    c.input.value = "2/s";
    c.input.focus();
    c.input.setSelectionRange(1, 3);
    c.button.click();
    await settle();
    out.afterReplay = c.tr.textContent;
    await poll(); // a redraw: the same control, value and focus
    const again = control("printer");
    out.kept = { sameInput: again.input === c.input, value: again.input.value, focused: doc.activeElement === again.input, selection: [again.input.selectionStart, again.input.selectionEnd] };
    again.input.value = "fast";
    again.input.dispatch("keydown", { key: "Enter" });
    await settle();
    out.afterBadRate = again.tr.textContent;
    out.jobFetches.push(jobFetches()); // the redraw asked again for the open one only
    await toggle("printer", false);
    await poll(); // closed: no row, no request
    out.jobFetches.push(jobFetches());
  } catch (e) {
    out.errors.push(String(e && e.stack || e));
  }
  process.stdout.write(JSON.stringify(out));
})();
