// The console of ledgerctl serve. Every value from the server is rendered
// as text (text nodes and attributes set one by one, never markup built
// from data), so a chain name or a payload holding <script> stays inert;
// the Content-Security-Policy forbids inline script anyway.
import { LedgerClient, LedgerError, fromBase64 } from "./ledger.js";

const TOKEN_KEY = "ledger.console.token";

// ---- DOM helpers ----------------------------------------------------------

// h builds an element: attrs are set one by one (on* keys add listeners),
// children are nodes or strings (made text nodes).
function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs ?? {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else if (k === "class") el.className = v;
    else if (k === "text") el.textContent = v;
    else el.setAttribute(k, v === true ? "" : String(v));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children.flat()) {
    if (c === undefined || c === null || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

const SVG = "http://www.w3.org/2000/svg";
function s(tag, attrs, ...children) {
  const el = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs ?? {})) el.setAttribute(k, String(v));
  for (const c of children) el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return el;
}

function table(headers, rows, opts = {}) {
  return h("table", { class: opts.class, "data-table": opts.name },
    h("thead", {}, h("tr", {}, headers.map((x) => h("th", { class: x.num ? "num" : null }, x.label ?? x)))),
    h("tbody", {}, rows.length ? rows : h("tr", {}, h("td", { colspan: headers.length, class: "muted" }, opts.empty ?? "Nothing here."))));
}

function status(el, kind, text) {
  el.className = "status " + kind;
  el.textContent = text;
}

const main = () => document.getElementById("main");

function page(title, lead, ...body) {
  const m = main();
  m.replaceChildren();
  append(m, [h("h1", {}, title), lead ? h("p", { class: "lead" }, lead) : null, ...body]);
}

function describe(err) {
  if (err instanceof LedgerError) return `${err.code}${err.status ? " (" + err.status + ")" : ""}: ${err.detail || err.title || err.message}`;
  return String(err?.message ?? err);
}

function failed(err) {
  const box = h("div", { class: "status bad", "data-error": "" });
  box.textContent = describe(err);
  main().append(box);
}

// ---- formatting -----------------------------------------------------------

function timeOf(unixNano) {
  if (!unixNano || unixNano === "0") return "";
  return new Date(Number(BigInt(unixNano) / 1000000n)).toISOString().replace(".000Z", "Z");
}

function age(unixNano) {
  if (!unixNano || unixNano === "0") return "";
  const ms = Date.now() - Number(BigInt(unixNano) / 1000000n);
  if (ms < 0) return "0s";
  const sec = Math.floor(ms / 1000);
  if (sec < 120) return sec + "s";
  if (sec < 7200) return Math.floor(sec / 60) + "m";
  if (sec < 172800) return Math.floor(sec / 3600) + "h";
  return Math.floor(sec / 86400) + "d";
}

function short(hash) {
  return hash ? hash.slice(0, 16) + "…" : "";
}

// payloadView shows a payload as indented JSON when it is JSON, as text
// when it is UTF-8, else as its base64.
function textView(text) {
  try {
    return h("pre", { class: "payload", "data-json": "" }, JSON.stringify(JSON.parse(text), null, 2));
  } catch {
    return h("pre", { class: "payload" }, text);
  }
}

function payloadView(b64) {
  let bytes;
  try {
    bytes = fromBase64(b64 ?? "");
  } catch {
    return h("pre", { class: "payload" }, b64);
  }
  if (bytes.length === 0) return h("span", { class: "muted" }, "(empty)");
  let text;
  try {
    text = new TextDecoder("utf-8", { fatal: true }).decode(bytes);
  } catch {
    return h("pre", { class: "payload", title: bytes.length + " bytes, not UTF-8: shown as base64" }, b64);
  }
  return textView(text);
}

// ---- session --------------------------------------------------------------

const session = { client: null, key: null };

function can(scope) {
  return !!session.key?.scopes.includes(scope);
}

async function signIn(token) {
  const client = new LedgerClient({ token, maxAttempts: 4 });
  const key = await client.whoami();
  session.client = client;
  session.key = key;
  sessionStorage.setItem(TOKEN_KEY, token);
}

function signOut() {
  sessionStorage.removeItem(TOKEN_KEY);
  session.client = session.key = null;
  location.hash = "";
  render();
}

function showSignIn(message) {
  document.getElementById("nav").hidden = true;
  document.getElementById("signout").hidden = true;
  document.getElementById("identity").replaceChildren();
  const msg = h("div", { class: "status", id: "signin-status" });
  const input = h("input", { type: "password", id: "token", name: "token", autocomplete: "off", placeholder: "lwk_…", required: true });
  const form = h("form", { class: "card signin", id: "signin" },
    h("h1", {}, "Sign in"),
    h("p", { class: "lead" }, "Paste an API key. It is kept in this tab's session storage only, and sent as a bearer token to this server."),
    h("label", {}, "API key", input),
    h("p", {}, h("button", { type: "submit", id: "signin-submit" }, "Sign in")),
    msg);
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    status(msg, "info", "Checking the key…");
    try {
      await signIn(input.value.trim());
      render();
    } catch (err) {
      status(msg, "bad", describe(err));
    }
  });
  main().replaceChildren(form);
  if (message) status(msg, "bad", message);
}

// ---- navigation -----------------------------------------------------------

const pages = [
  { id: "chains", label: "Chains", scope: "read", render: chainsPage },
  { id: "verify", label: "Verify", scope: "admin", render: verifyPage },
  { id: "outbox", label: "Outbox", scope: "admin", render: outboxPage },
  { id: "inbox", label: "Inbox", scope: "admin", render: inboxPage },
  { id: "guard", label: "Replay guard", scope: "admin", render: guardPage },
  { id: "keys", label: "API keys", scope: "admin", render: keysPage },
  { id: "forms", label: "ERP forms", scope: "write", render: formsPage },
];
const hidden = { chain: chainPage, message: messagePage };

function route() {
  const raw = location.hash.replace(/^#\/?/, "");
  const [id, qs] = raw.split("?");
  return { id: id || "chains", params: new URLSearchParams(qs ?? "") };
}

function link(id, params, ...children) {
  const qs = params ? "?" + new URLSearchParams(params).toString() : "";
  return h("a", { href: "#/" + id + qs }, ...children);
}

function renderChrome(current) {
  const k = session.key;
  document.getElementById("identity").replaceChildren(
    "tenant ", h("strong", { id: "tenant" }, k.tenant), " · key ", h("span", { class: "mono" }, k.name || k.id), " ",
    ...k.scopes.map((sc) => h("span", { class: "tag", "data-scope": sc }, sc)));
  const so = document.getElementById("signout");
  so.hidden = false;
  so.onclick = signOut;
  const nav = document.getElementById("nav");
  nav.hidden = false;
  nav.replaceChildren(...pages.filter((p) => can(p.scope)).map((p) =>
    h("a", { href: "#/" + p.id, class: p.id === current ? "active" : null, "data-page": p.id }, p.label)));
}

// pageScope ends the window listeners a page added when another renders.
let pageScope = new AbortController();

async function render() {
  pageScope.abort();
  pageScope = new AbortController();
  if (!session.client) {
    const token = sessionStorage.getItem(TOKEN_KEY);
    if (!token) return showSignIn();
    try {
      await signIn(token);
    } catch (err) {
      if (err instanceof LedgerError && err.final) sessionStorage.removeItem(TOKEN_KEY);
      return showSignIn(describe(err));
    }
  }
  const { id, params } = route();
  const p = pages.find((x) => x.id === id);
  const fn = p ? p.render : hidden[id] ?? chainsPage;
  renderChrome(p ? p.id : id === "message" ? "outbox" : "chains");
  if (p && !can(p.scope)) {
    page(p.label, null, h("div", { class: "status warn" }, `This page needs an API key with the ${p.scope} scope.`));
    return;
  }
  main().replaceChildren(h("p", { class: "muted" }, "Loading…"));
  try {
    await fn(params);
  } catch (err) {
    if (err instanceof LedgerError && err.code === "UNAUTHENTICATED") {
      // The key was revoked while signed in: sign in again.
      sessionStorage.removeItem(TOKEN_KEY);
      session.client = session.key = null;
      return showSignIn(describe(err));
    }
    failed(err);
  }
}

// ---- Chains ---------------------------------------------------------------

async function chainsPage(params) {
  const prefix = params.get("prefix") ?? "";
  const from = params.get("from") ?? "";
  const list = await session.client.chains({ prefix, fromName: from, limit: 50 });
  const input = h("input", { type: "text", id: "prefix", value: prefix, placeholder: "orders/" });
  const form = h("form", { class: "toolbar" }, h("label", {}, "Name starts with", input), h("button", { type: "submit" }, "List"));
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    location.hash = "#/chains?" + new URLSearchParams({ prefix: input.value });
  });
  const rows = list.chains.map((c) => h("tr", { "data-chain": c.chain },
    h("td", {}, link("chain", { name: c.chain }, c.chain)),
    h("td", { class: "num" }, c.seq),
    h("td", { class: "hash" }, short(c.hash)),
    h("td", {}, timeOf(c.time_unix_nano))));
  page("Chains", "Every chain of your tenant, with its head: the newest entry's seq and hash. Open a chain to read its entries.",
    form,
    table(["Chain", { label: "Head seq", num: true }, "Head hash", "Last entry (UTC)"], rows, { name: "chains", empty: "No chain has this prefix." }),
    h("div", { class: "pager" }, list.next_from_name ? link("chains", { prefix, from: list.next_from_name }, "Next page →") : null));
}

async function chainPage(params) {
  const name = params.get("name") ?? "";
  const from = params.get("from") ?? "1";
  const target = params.get("seq");
  const [head, pageData] = await Promise.all([session.client.head(name), session.client.entries(name, { from, limit: 20 })]);
  const rows = pageData.entries.map((e) => {
    const prev = BigInt(e.seq) > 1n
      ? link("chain", { name, from: pageFrom(BigInt(e.seq) - 1n), seq: String(BigInt(e.seq) - 1n) }, "seq " + (BigInt(e.seq) - 1n))
      : h("span", { class: "muted" }, "genesis");
    return h("tr", { id: "entry-" + e.seq, "data-seq": e.seq, class: e.seq === target ? "target" : null },
      h("td", { class: "num" }, e.seq),
      h("td", {}, e.time, h("div", { class: "muted mono" }, e.type)),
      h("td", {}, h("div", { class: "hash", title: "hash" }, e.hash),
        h("div", { class: "muted" }, "prev ", h("span", { class: "hash" }, short(e.prev_hash)), " → ", prev)),
      h("td", {}, payloadView(e.payload), e.idempotency_key ? h("div", { class: "muted mono" }, "key " + e.idempotency_key) : null,
        proofButton(name, e.seq)));
  });
  const fromN = BigInt(from);
  page("Chain " + name, null,
    h("div", { class: "card" }, h("dl", { class: "kv" },
      h("dt", {}, "Chain"), h("dd", { class: "mono", id: "chain-name" }, name),
      h("dt", {}, "Head"), h("dd", {}, "seq " + head.seq + " · ", h("span", { class: "hash" }, head.hash)),
      h("dt", {}, "Last entry"), h("dd", {}, timeOf(head.time_unix_nano)))),
    table([{ label: "Seq", num: true }, "Time · type", "Hash · predecessor", "Payload"], rows, { name: "entries", empty: "No entries." }),
    h("div", { class: "pager" },
      fromN > 1n ? link("chain", { name, from: String(fromN > 20n ? fromN - 20n : 1n) }, "← Previous") : null,
      h("span", {}, `entries ${from}–${pageData.entries.length ? pageData.entries.at(-1).seq : from} of ${head.seq}`),
      pageData.next_from && pageData.next_from !== "0" ? link("chain", { name, from: pageData.next_from }, "Next →") : null));
  if (target) document.getElementById("entry-" + target)?.scrollIntoView({ block: "center" });
}

// proofButton downloads the entry's inclusion proof (the exact bytes the
// server sent: its 64-bit numbers must not go through JSON.parse) and the
// signed checkpoint it is against, for ledgerctl verify-proof.
function proofButton(name, seq) {
  const out = h("span", { class: "muted", "data-proof-status": seq });
  const btn = h("button", { type: "button", class: "quiet", "data-proof": seq }, "Proof");
  btn.addEventListener("click", async () => {
    btn.disabled = true;
    out.textContent = " …";
    try {
      const text = await session.client.proveEntry(name, seq);
      const note = JSON.parse(text).checkpoint;
      const [origin, size] = note.split("\n");
      const file = name.replaceAll("/", "_") + "-" + seq;
      download("proof-" + file + ".json", text, "application/json");
      download("checkpoint-" + file + ".note", note, "text/plain");
      out.textContent = ` against checkpoint ${origin} (${size} chains): proof and checkpoint downloaded`;
      out.dataset.ok = "1";
    } catch (err) {
      out.textContent = err instanceof LedgerError && err.code === "NOT_FOUND"
        ? " not in a checkpoint yet (" + (err.detail || err.code) + ")" : " " + describe(err);
    } finally {
      btn.disabled = false;
    }
  });
  return h("div", { class: "proof" }, btn, out);
}

function download(filename, text, type) {
  const url = URL.createObjectURL(new Blob([text], { type }));
  const a = h("a", { href: url, download: filename, hidden: true });
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10_000);
}

// pageFrom is the first seq of the page of 20 that holds seq.
function pageFrom(seq) {
  return String(((seq - 1n) / 20n) * 20n + 1n);
}

// ---- Verify ---------------------------------------------------------------

async function verifyPage() {
  const trees = h("input", { type: "checkbox", id: "trees" });
  const out = h("div", { id: "verify-result" });
  const run = h("button", { type: "button", id: "verify-run" }, "Verify every chain");
  run.addEventListener("click", async () => {
    run.disabled = true;
    out.replaceChildren(h("p", { class: "muted" }, "Verifying…"));
    try {
      const report = await session.client.verify(trees.checked ? { trees: true } : {});
      const chains = await allChains();
      out.replaceChildren(verifyReport(report, chains));
    } catch (err) {
      out.replaceChildren(h("div", { class: "status bad" }, describe(err)));
    } finally {
      run.disabled = false;
    }
  });
  page("Verify", "Recompute every entry's hash and link, and check each chain's end against its stored head. A broken chain names the first bad seq and why.",
    h("div", { class: "toolbar" }, run, h("label", { class: "inline" }, trees, "also check the Merkle trees")), out);
}

async function allChains() {
  const out = [];
  let from = "";
  for (let i = 0; i < 20; i++) {
    const list = await session.client.chains({ fromName: from, limit: 1000 });
    out.push(...list.chains);
    if (!list.next_from_name) break;
    from = list.next_from_name;
  }
  return out;
}

function verifyReport(report, chains) {
  const byChain = new Map();
  for (const f of report.failures) if (!byChain.has(f.chain)) byChain.set(f.chain, f);
  const summary = report.ok
    ? h("div", { class: "status ok", id: "verify-summary" }, `Intact: ${report.chains} chains, ${report.entries} entries verified.`)
    : h("div", { class: "status bad", id: "verify-summary" }, `Broken: ${report.failures.length} failure(s) in ${report.chains} chains, ${report.entries} entries.`);
  const failures = report.failures.map((f) => h("tr", { "data-failure": f.chain },
    h("td", {}, link("chain", { name: f.chain, from: pageFrom(BigInt(f.seq || "1")), seq: f.seq }, f.chain)),
    h("td", { class: "num", "data-seq": "" }, f.seq),
    h("td", { "data-reason": "" }, f.reason),
    h("td", {}, f.detail, f.expected ? h("div", { class: "hash" }, "expected " + f.expected) : null,
      f.calculated ? h("div", { class: "hash" }, "calculated " + f.calculated) : null)));
  const rows = chains.map((c) => {
    const f = byChain.get(c.chain);
    return h("tr", { "data-verified": c.chain },
      h("td", {}, link("chain", { name: c.chain }, c.chain)),
      h("td", { class: "num" }, c.seq),
      h("td", {}, f ? h("span", { class: "tag bad" }, `broken at seq ${f.seq}: ${f.reason}`) : h("span", { class: "tag ok" }, "intact")));
  });
  return h("div", {}, summary,
    report.failures.length ? [h("h2", {}, "Failures"), table(["Chain", { label: "Seq", num: true }, "Reason", "Detail"], failures, { name: "failures" })] : null,
    report.truncated ? h("div", { class: "status warn" }, "The failures were truncated.") : null,
    h("h2", {}, "Chains"), table(["Chain", { label: "Entries", num: true }, "Result"], rows, { name: "verified" }));
}

// ---- Outbox ---------------------------------------------------------------

async function outboxPage(params) {
  const topic = params.get("topic") ?? "";
  const stats = await session.client.outboxStats();
  const rows = stats.topics.map((t) => h("tr", { "data-topic": t.topic },
    h("td", {}, link("outbox", { topic: t.topic }, t.topic)),
    h("td", { class: "num" }, t.pending),
    h("td", {}, age(t.oldest_pending_unix_nano)),
    h("td", { class: "num" }, t.leased),
    h("td", { class: "num" }, t.done),
    h("td", { class: "num" }, BigInt(t.dead) > 0n ? h("span", { class: "tag bad" }, t.dead) : t.dead)));
  page("Outbox", "Messages enqueued with the entries that caused them, delivered with the key outbox:<id> on every attempt.",
    table(["Topic", { label: "Pending", num: true }, "Oldest pending", { label: "In flight", num: true }, { label: "Delivered", num: true }, { label: "Dead", num: true }],
      rows, { name: "topics", empty: "No outbox topic yet." }));
  const t = topic || stats.topics[0]?.topic;
  if (!t) return;
  const [msgs, dead, activity] = await Promise.all([session.client.outboxMessages({ topic: t, limit: 50 }),
    session.client.deadMessages({ topic: t }), session.client.outboxActivity({ minutes: 60 })]);
  main().append(h("h2", {}, "Attempts over the last hour"),
    h("div", { class: "charts" }, activity.topics.map((a) => h("div", {}, h("div", { class: "chart-title" }, a.topic), deliveryChart(a)))));
  main().append(h("h2", {}, "Dead letters of " + t), deadTable(t, dead.messages));
  main().append(h("h2", {}, "Recent messages of " + t),
    table(["Message", "Status", { label: "Attempts", num: true }, "Enqueued (UTC)", "Next due"], msgs.messages.map((m) => h("tr", { "data-message": m.id },
      h("td", {}, link("message", { id: m.id }, h("span", { class: "mono" }, m.id))),
      h("td", {}, statusTag(m.status)),
      h("td", { class: "num" }, m.attempts),
      h("td", {}, timeOf(m.enqueued_unix_nano)),
      h("td", {}, m.status === "pending" ? timeOf(m.due_unix_nano) : ""))), { name: "messages", empty: "No message." }));
}

function statusTag(st) {
  return h("span", { class: "tag " + ({ done: "ok", dead: "bad", leased: "warn" }[st] ?? "") }, st);
}

// deliveryChart draws a topic's delivered and failed attempts per bucket
// of the last hour (GET /v1/outbox/activity) as inline SVG made with DOM
// calls: no markup is parsed.
function deliveryChart(activity) {
  const bucketSeconds = Number(activity.bucket_seconds);
  const bins = activity.buckets.map((b) => ({ ok: Number(b.delivered), bad: Number(b.failed) + Number(b.rejected) }));
  const n = bins.length, w = 640, hgt = 120, pad = 28, bw = (w - pad) / n;
  const peak = Math.max(1, ...bins.map((b) => Math.max(b.ok, b.bad)));
  const svg = s("svg", { class: "chart", viewBox: `0 0 ${w} ${hgt + 34}`, width: w, height: hgt + 34, role: "img",
    "aria-label": `delivered and failed attempts of ${activity.topic}, per ${bucketSeconds / 60} minutes` });
  svg.append(s("line", { class: "axis", x1: pad, y1: hgt, x2: w, y2: hgt }), s("text", { x: 0, y: 10 }, String(peak)), s("text", { x: 0, y: hgt }, "0"));
  bins.forEach((b, i) => {
    const x = pad + i * bw + 3, okH = (b.ok / peak) * (hgt - 6), badH = (b.bad / peak) * (hgt - 6);
    svg.append(s("rect", { class: "ok", x, y: hgt - okH, width: bw / 2 - 3, height: okH, "data-delivered": b.ok }, s("title", {}, `${b.ok} delivered`)));
    svg.append(s("rect", { class: "bad", x: x + bw / 2 - 3, y: hgt - badH, width: bw / 2 - 3, height: badH, "data-failed": b.bad }, s("title", {}, `${b.bad} failed`)));
    if (i % 3 === 0) svg.append(s("text", { x, y: hgt + 14 }, `−${Math.round(((n - i) * bucketSeconds) / 60)} min`));
  });
  svg.append(s("text", { x: w - 12, y: hgt + 14, "text-anchor": "end" }, "now"));
  const total = bins.reduce((t, b) => ({ ok: t.ok + b.ok, bad: t.bad + b.bad }), { ok: 0, bad: 0 });
  svg.append(s("rect", { class: "ok", x: pad, y: hgt + 22, width: 10, height: 10 }), s("text", { x: pad + 14, y: hgt + 31 }, `delivered (${total.ok})`),
    s("rect", { class: "bad", x: pad + 120, y: hgt + 22, width: 10, height: 10 }), s("text", { x: pad + 134, y: hgt + 31 }, `failed or rejected (${total.bad})`));
  return h("div", { class: "card", "data-chart": activity.topic }, svg,
    activity.truncated ? h("div", { class: "status warn" }, "The hour held more entries than one answer reads: the latest buckets are undercounted.") : null);
}

function deadTable(topic, dead) {
  const status_ = h("div", { class: "status", id: "requeue-status" });
  const checks = dead.map((m) => h("input", { type: "checkbox", value: m.id, "data-dead": m.id }));
  const rows = dead.map((m, i) => h("tr", { "data-dead-row": m.id },
    h("td", {}, checks[i]),
    h("td", {}, link("message", { id: m.id }, h("span", { class: "mono" }, m.id))),
    h("td", { class: "num" }, m.attempts),
    h("td", {}, timeOf(m.enqueued_unix_nano))));
  const box = h("div", {});
  if (!can("admin") || dead.length === 0) {
    box.append(table(["", "Message", { label: "Attempts", num: true }, "Enqueued (UTC)"], rows, { name: "dead", empty: "No dead letter." }));
    return box;
  }
  const reason = h("input", { type: "text", id: "requeue-reason", placeholder: "endpoint fixed" });
  const ask = h("button", { type: "button", id: "requeue", class: "danger", "data-write": "" }, "Requeue selected…");
  const confirmBox = h("div", { class: "confirm", hidden: true });
  ask.addEventListener("click", () => {
    const ids = checks.filter((c) => c.checked).map((c) => c.value);
    if (!ids.length) return status(status_, "warn", "Select the dead letters to requeue.");
    const yes = h("button", { type: "button", id: "requeue-confirm", class: "danger", "data-write": "" }, `Requeue ${ids.length} message(s)`);
    const no = h("button", { type: "button", class: "quiet" }, "Cancel");
    confirmBox.replaceChildren(h("p", {}, `Return ${ids.length} dead letter(s) of ${topic} to pending with fresh attempts? The requeue is recorded with your key as operator.`), yes, " ", no);
    confirmBox.hidden = false;
    no.addEventListener("click", () => { confirmBox.hidden = true; });
    yes.addEventListener("click", async () => {
      yes.disabled = true;
      try {
        const intent = session.client.intent("console.requeue." + ids.join(","));
        const res = await intent.submit((c) => c.requeue({ ids, reason: reason.value || "requeued from the console" }));
        confirmBox.hidden = true;
        status(status_, "ok", `Requeued ${res.body.requeued.length} message(s) as ${res.body.operator}.`);
      } catch (err) {
        status(status_, "bad", describe(err));
      } finally {
        yes.disabled = false;
      }
    });
  });
  box.append(table(["", "Message", { label: "Attempts", num: true }, "Enqueued (UTC)"], rows, { name: "dead" }),
    h("div", { class: "toolbar" }, h("label", {}, "Reason", reason), ask), confirmBox, status_);
  return box;
}

async function messagePage(params) {
  const id = params.get("id") ?? "";
  const m = await session.client.outboxMessage(id);
  const msg = m.message;
  const events = m.history.map((ev) => {
    const kind = ev.type.replace(/^outbox\./, "").replace(/\/v\d+$/, "");
    const bad = kind === "dead" || (ev.outcome && ev.outcome !== "delivered");
    const good = ev.outcome === "delivered";
    return h("li", { class: good ? "ok" : bad ? "bad" : null, "data-event": kind },
      h("div", {}, h("strong", {}, kind), ev.outcome ? " · " + ev.outcome : "", ev.attempt ? ` · attempt ${ev.attempt}` : ""),
      h("div", { class: "when" }, timeOf(ev.time_unix_nano), ev.worker ? " · worker " + ev.worker : "",
        ev.duration_nano ? ` · ${(Number(BigInt(ev.duration_nano) / 1000n) / 1000).toFixed(1)} ms` : "",
        ev.next_attempt_unix_nano ? " · next " + timeOf(ev.next_attempt_unix_nano) : ""),
      ev.dead_reason || ev.detail ? h("div", { class: "muted" }, [ev.dead_reason, ev.detail].filter(Boolean).join(": ")) : null);
  });
  page("Message " + msg.id, null,
    h("div", { class: "card" }, h("dl", { class: "kv" },
      h("dt", {}, "Topic"), h("dd", {}, link("outbox", { topic: msg.topic }, msg.topic)),
      h("dt", {}, "Status"), h("dd", { id: "message-status" }, statusTag(msg.status)),
      h("dt", {}, "Attempts"), h("dd", {}, String(msg.attempts)),
      h("dt", {}, "Delivery key"), h("dd", { class: "mono" }, msg.key),
      h("dt", {}, "Enqueued"), h("dd", {}, timeOf(msg.enqueued_unix_nano)))),
    h("h2", {}, "Attempts"), h("ol", { class: "timeline", id: "timeline" }, events.length ? events : h("li", { class: "muted" }, "No attempt yet.")),
    h("h2", {}, "Payload"), textView(msg.payload));
}

// ---- Inbox ----------------------------------------------------------------

async function inboxPage() {
  const { providers } = await session.client.inbox();
  const rows = providers.map((p) => h("tr", { "data-provider": p.name },
    h("td", {}, h("strong", {}, p.name)), h("td", {}, p.kind), h("td", {}, p.topic ?? ""),
    h("td", { class: "num" }, link("chain", { name: p.chain, from: pageFrom(BigInt(p.events || "1")) }, p.events)),
    h("td", {}, timeOf(p.last_event_unix_nano)),
    h("td", { class: "num", "data-duplicates": "" }, p.duplicates),
    h("td", { class: "num" }, p.event_id_reused),
    h("td", { class: "num" }, BigInt(p.bad_signatures) > 0n ? h("span", { class: "tag warn" }, p.bad_signatures) : p.bad_signatures)));
  page("Inbox", "Webhooks received from providers, each event recorded once under its event id. Redeliveries are answered “duplicate” and applied once; the refusals are counted by this server since it started.",
    table(["Provider", "Kind", "Outbox topic", { label: "Events", num: true }, "Last event (UTC)", { label: "Duplicates refused", num: true },
      { label: "Id reused", num: true }, { label: "Bad signatures", num: true }], rows, { name: "providers", empty: "No webhook provider is configured for your tenant." }));
  for (const p of providers) {
    main().append(h("h2", {}, "Newest events of " + p.name),
      table([{ label: "Seq", num: true }, "Event id", "Received (UTC)", "Body digest (BLAKE3)", { label: "Bytes", num: true }],
        p.recent.map((e) => h("tr", { "data-event-id": e.event_id },
          h("td", { class: "num" }, link("chain", { name: p.chain, from: pageFrom(BigInt(e.seq)), seq: e.seq }, e.seq)),
          h("td", { class: "mono" }, e.event_id), h("td", {}, timeOf(e.time_unix_nano)),
          h("td", { class: "hash" }, short(e.body_digest)), h("td", { class: "num" }, e.body_size))), { empty: "No event yet." }));
  }
}

// ---- Replay guard ---------------------------------------------------------

async function guardPage(params) {
  const { keys } = await session.client.apiKeys();
  const keySel = h("select", { id: "guard-key-id", name: "keyId" }, keys.map((k) =>
    h("option", { value: k.id, selected: k.id === (params.get("key_id") ?? session.key.id) }, `${k.name || k.id} (${k.id})`)));
  const method = h("select", { id: "guard-method", name: "method" }, ["POST", "DELETE"].map((m) => h("option", { value: m, selected: m === params.get("method") }, m)));
  const path = h("input", { type: "text", id: "guard-path", name: "path", value: params.get("path") ?? "/v1/purchase-receipts", size: 34 });
  const key = h("input", { type: "text", id: "guard-key", name: "key", value: params.get("key") ?? "", placeholder: "Idempotency-Key", size: 38 });
  const form = h("form", { class: "toolbar", id: "guard-lookup" },
    h("label", {}, "Sent by key", keySel), h("label", {}, "Method", method), h("label", {}, "Path", path), h("label", {}, "Idempotency-Key", key),
    h("button", { type: "submit" }, "Look up"));
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    location.hash = "#/guard?" + new URLSearchParams({ key_id: keySel.value, method: method.value, path: path.value, key: key.value });
  });
  page("Replay guard", "The guard stores the first answer of each (operation, API key, Idempotency-Key) and replays it to every retry. Look a request up to see where it stands.", form);
  if (!params.get("key")) return;
  let rec;
  try {
    rec = await session.client.guardRecord({ keyId: keySel.value, method: method.value, path: path.value, key: key.value });
  } catch (err) {
    if (err instanceof LedgerError && err.code === "NOT_FOUND") {
      main().append(h("div", { class: "status warn", id: "guard-result" }, "No record: the guard never saw this request, or its record expired."));
      return;
    }
    throw err;
  }
  const tagKind = { SUCCESS: "ok", FAILED: "bad", PROCESSING: "warn" }[rec.status];
  const resp = rec.response;
  main().append(h("div", { class: "card", id: "guard-result" }, h("dl", { class: "kv" },
    h("dt", {}, "State"), h("dd", {}, h("span", { class: "tag " + tagKind, id: "guard-status" }, rec.status)),
    h("dt", {}, "Attempt"), h("dd", { id: "guard-attempt" }, String(rec.attempt)),
    h("dt", {}, "Operation"), h("dd", { class: "mono" }, rec.operation),
    h("dt", {}, "Request hash"), h("dd", { class: "hash" }, rec.request_hash),
    h("dt", {}, "Created"), h("dd", {}, timeOf(rec.created_unix_nano)),
    h("dt", {}, "Updated"), h("dd", {}, timeOf(rec.updated_unix_nano)),
    rec.status === "PROCESSING" && rec.lease_expires_unix_nano ? [h("dt", {}, "Lease ends"), h("dd", {}, timeOf(rec.lease_expires_unix_nano))] : null,
    rec.expires_unix_nano ? [h("dt", {}, "Replayed until"), h("dd", {}, timeOf(rec.expires_unix_nano))] : null,
    rec.failure ? [h("dt", {}, "Failure"), h("dd", {}, rec.failure)] : null)),
    resp ? h("h2", {}, "Stored response: " + resp.status) : null,
    resp ? (resp.body_withheld ? h("div", { class: "status info" }, "The body is withheld: it holds an API key's token.") : textView(resp.body)) : null);
}

// ---- API keys -------------------------------------------------------------

async function keysPage() {
  const { keys } = await session.client.apiKeys();
  const out = h("div", { class: "status", id: "keys-status" });
  const rows = keys.map((k) => {
    const revoke = k.revoked_unix_nano || k.id === session.key.id ? null : h("button", { type: "button", class: "quiet", "data-revoke": k.id, "data-write": "" }, "Revoke…");
    revoke?.addEventListener("click", () => {
      const reason = h("input", { type: "text", placeholder: "reason", "data-revoke-reason": k.id });
      const yes = h("button", { type: "button", class: "danger", "data-revoke-confirm": k.id }, "Revoke " + (k.name || k.id));
      revoke.replaceWith(h("span", {}, reason, " ", yes));
      yes.addEventListener("click", async () => {
        yes.disabled = true;
        try {
          await session.client.revokeAPIKey(k.id, { reason: reason.value || "revoked from the console" });
          await render();
        } catch (err) {
          status(out, "bad", describe(err));
          yes.disabled = false;
        }
      });
    });
    return h("tr", { "data-key": k.id },
      h("td", { class: "mono" }, k.id), h("td", {}, k.name),
      h("td", {}, k.scopes.map((sc) => h("span", { class: "tag" }, sc))),
      h("td", {}, timeOf(k.created_unix_nano)),
      h("td", {}, k.revoked_unix_nano ? h("span", { class: "tag bad" }, "revoked " + timeOf(k.revoked_unix_nano)) : k.id === session.key.id ? h("span", { class: "tag ok" }, "this key") : revoke));
  });
  const name = h("input", { type: "text", id: "key-name", placeholder: "erp-sync", required: true });
  const scopeBoxes = session.key.scopes.map((sc) => h("label", { class: "inline" }, h("input", { type: "checkbox", value: sc, "data-new-scope": sc, checked: sc === "read" }), sc));
  const form = h("form", { class: "card", id: "key-create", "data-write": "" },
    h("div", { class: "toolbar" }, h("label", {}, "Name", name), ...scopeBoxes, h("button", { type: "submit" }, "Create key")),
    h("div", { class: "muted" }, "A new key's scopes are at most your own key's."));
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const scopes = scopeBoxes.map((l) => l.querySelector("input")).filter((c) => c.checked).map((c) => c.value);
    try {
      const intent = session.client.intent("console.apikey-create");
      const res = await intent.submit((c) => c.createAPIKey({ name: name.value, scopes }));
      out.className = "status ok";
      out.replaceChildren(`Key ${res.body.key.id} created. Its token is shown this once:`, h("div", { class: "token", id: "new-token" }, res.body.token));
    } catch (err) {
      status(out, "bad", describe(err));
    }
  });
  page("API keys", "The keys of your tenant. Secrets are stored only as digests; a revoked key is refused at once.",
    table(["Id", "Name", "Scopes", "Created (UTC)", ""], rows, { name: "keys" }),
    h("h2", {}, "Create a key"), form, out);
}

// ---- ERP forms ------------------------------------------------------------

function field(label, name, value, attrs = {}) {
  return h("label", {}, label, h("input", { type: "text", name, value, ...attrs }));
}

// intentForm wires one form to one intent: a stored request left by a
// reload is resumed first; a submit while one runs shares its promise
// (and the button is disabled); a final answer clears the intent, and a
// lost one keeps it to be sent again with the same key and bytes.
function intentForm(form, button, out, intentName, path, send, shown) {
  const intent = session.client.intent(intentName);
  const finish = async (p, resumed) => {
    button.disabled = true;
    delete out.dataset.done;
    delete out.dataset.pending;
    status(out, "info", resumed ? "Sending the earlier submission again, with its key…" : "Sending…");
    try {
      const res = await p;
      if (!res) return status(out, "", "");
      status(out, "ok", `${res.resumed ? "Your earlier submission was completed" : "Recorded"}: ${shown(res.body)}` +
        (res.replayed ? " (the server had already recorded it; nothing was written twice)" : ""));
      out.dataset.key = res.key;
      out.dataset.done = "1";
      if (can("admin")) {
        out.append(" ", link("guard", { key_id: session.key.id, method: "POST", path, key: res.key }, "See its guard record"));
      }
    } catch (err) {
      if (err instanceof LedgerError && !err.final) {
        status(out, "warn", `No final answer (${err.code}). The submission is kept with its key and is sent again when the connection is back, or with “Send again”.`);
        out.dataset.pending = "1";
        retry.hidden = false;
      } else {
        status(out, "bad", "Refused: " + describe(err));
      }
    } finally {
      button.disabled = false;
    }
  };
  const retry = h("button", { type: "button", class: "quiet", hidden: true, "data-resend": intentName }, "Send again");
  retry.addEventListener("click", () => { retry.hidden = true; finish(intent.resume(), true); });
  button.after(" ", retry);
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    const body = Object.fromEntries(new FormData(form).entries());
    for (const [k, v] of Object.entries(body)) if (v === "") delete body[k];
    finish(intent.submit((c) => send(c, body)), false);
  });
  window.addEventListener("online", () => {
    intent.pending().then((rec) => { if (rec && !intent.busy) { retry.hidden = true; finish(intent.resume(), true); } });
  }, { signal: pageScope.signal });
  intent.pending().then((rec) => { if (rec) finish(intent.resume(), true); });
}

async function formsPage() {
  const today = new Date().toISOString().slice(0, 10);
  const prBtn = h("button", { type: "submit", id: "pr-submit", "data-write": "" }, "Receive goods");
  const prOut = h("div", { class: "status", id: "pr-status" });
  const pr = h("form", { class: "grid", id: "purchase-receipt" },
    field("Item", "item", "SKU-1"), field("Location", "location", "WH-1"), field("Quantity", "quantity", "10", { inputmode: "decimal" }),
    field("Unit cost", "unit_cost", "8.25", { inputmode: "decimal" }), field("Date", "date", today, { type: "date" }),
    field("Inventory account", "inventory_account", "1400"), field("Credit account (GRNI)", "credit_account", "2100"),
    field("Reference (PO)", "reference", ""), h("div", {}, prBtn));
  const srBtn = h("button", { type: "submit", id: "sr-submit", "data-write": "" }, "Record receipt");
  const srOut = h("div", { class: "status", id: "sr-status" });
  const sr = h("form", { class: "grid", id: "stock-receipt" },
    field("Item", "item", "SKU-1"), field("Location", "location", "WH-1"), field("Quantity", "quantity", "1", { inputmode: "decimal" }),
    field("Reference", "reference", ""), h("div", {}, srBtn));
  page("ERP forms", "Each submit is one intent: its Idempotency-Key is made before the first request and kept in this tab until the answer is final, so a double click, a reload or a lost connection still writes once.",
    h("div", { class: "card" }, h("h2", {}, "Purchase receipt"),
      h("p", { class: "muted" }, "Stock, valuation, the journal posting and an outbox message, in one transaction."), pr, prOut),
    h("div", { class: "card" }, h("h2", {}, "Stock receipt"), sr, srOut));
  intentForm(pr, prBtn, prOut, "console.purchase-receipt", "/v1/purchase-receipts", (c, b) => c.purchaseReceipt(b),
    (b) => `operation ${b.operation}, stock seq ${b.stock?.entries?.[0]?.seq ?? "?"}`);
  intentForm(sr, srBtn, srOut, "console.stock-receipt", "/v1/stock/receipts", (c, b) => c.stockReceipt(b),
    (b) => `${b.entries?.[0]?.chain ?? "stock"} seq ${b.entries?.[0]?.seq ?? "?"}`);
}

window.addEventListener("hashchange", () => render());
render();
