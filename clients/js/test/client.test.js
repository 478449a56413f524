// The client against a real ledgerctl serve on 127.0.0.1, through a
// fault-injecting proxy: every route, intents across reloads and a crash,
// retries, typed errors and exact 64-bit integers.

import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import path from "node:path";
import { after, before, describe, test } from "node:test";

import { LedgerClient, LedgerError, memoryStorage, toBase64, fromBase64 } from "../ledger.js";
import { Proxy, Receiver, eventually, fileStorage, githubSignature, startServer } from "../testkit/harness.js";

let server, proxy, receiver, client;

/** A client through the proxy, with fast backoff; o overrides. */
function newClient(o = {}) {
  return new LedgerClient({ baseURL: proxy.url, token: server.token, backoffBaseMs: 5, backoffMaxMs: 20, storage: memoryStorage(), ...o });
}

before(async () => {
  receiver = await new Receiver().start();
  server = await startServer({ receiverURL: receiver.url });
  proxy = await new Proxy(server.url).start();
  client = newClient();
  // What the routes name: an item in both catalogs, two locations, a book
  // with EUR and three accounts.
  await client.defineStockItem({ id: "SKU-1", name: "Valve", scale: 0, allow_negative: false });
  await client.defineStockLocation({ id: "WH-1", name: "Main" });
  await client.defineStockLocation({ id: "WH-2" });
  await client.defineValItem({ id: "SKU-1", method: "moving_average", quantity_scale: 0, currency: "EUR", minor_unit: 2, allow_negative: false });
  await client.defineCurrency("main", { code: "EUR", exponent: 2 });
  await client.defineAccount("main", { code: "1400", name: "Inventory", type: "asset" });
  await client.defineAccount("main", { code: "2100", name: "Goods received not invoiced", type: "liability" });
  await client.defineAccount("main", { code: "5000", name: "Cost of goods sold", type: "expense" });
});

after(async () => {
  await proxy?.stop();
  await server?.stop();
  await receiver?.stop();
});

/** Every seq, *_seq and *_unix_nano member of v, at any depth, is a string of digits. */
function assertInt64Strings(v, where = "body") {
  if (Array.isArray(v)) return v.forEach((x, i) => assertInt64Strings(x, `${where}[${i}]`));
  if (v === null || typeof v !== "object") return;
  for (const [k, x] of Object.entries(v)) {
    if (/(^|_)seq$|_unix_nano$|^next_from$|_nano$/.test(k)) {
      assert.equal(typeof x, "string", `${where}.${k} is ${typeof x}`);
      assert.match(x, /^-?[0-9]+$/, `${where}.${k}`);
    }
    assertInt64Strings(x, `${where}.${k}`);
  }
}

const receipt = (reference) => ({ item: "SKU-1", location: "WH-1", quantity: "10", unit_cost: "8.25", date: "2026-11-02",
  inventory_account: "1400", credit_account: "2100", reference });

describe("every route", () => {
  test("raw entries: append, entry, page, head; 64-bit integers are exact strings", async () => {
    const payload = new TextEncoder().encode('{"id":42}');
    const res = await client.appendEntry("orders/2026", { type: "order.created/v1", payload });
    assertInt64Strings(res);
    assert.equal(res.seq, "1");
    const t = BigInt(res.time_unix_nano);
    assert.ok(t > 2n ** 53n, `time ${t} is beyond 2^53`);
    const e = await client.entry("orders/2026", 1n);
    assert.equal(BigInt(e.time_unix_nano), t, "the entry's time is the append's, exactly");
    assert.equal(e.time_unix_nano, res.time_unix_nano);
    assert.deepEqual(fromBase64(e.payload), payload);
    assert.equal(e.hash, res.hash);
    await client.appendEntry("orders/2026", { type: "order.created/v1", payload: toBase64('{"id":43}') });
    const page = await client.entries("orders/2026", { from: "1", limit: 1 });
    assertInt64Strings(page);
    assert.equal(page.entries.length, 1);
    assert.equal(page.next_seq, "2");
    const head = await client.head("orders/2026");
    assert.equal(head.seq, "2");
    assert.ok(BigInt(head.time_unix_nano) >= t);
    const listed = await client.chains({ prefix: "orders/", limit: 10 });
    assertInt64Strings(listed);
    assert.deepEqual(listed.chains.find((c) => c.chain === "orders/2026"), head);
    assert.equal((await client.chains({ prefix: "orders/", fromName: "orders/2027" })).chains.length, 0);
  });

  test("stock", async () => {
    assert.ok((await client.stockItems()).items.some((i) => i.id === "SKU-1"));
    assert.equal((await client.stockLocations()).locations.length, 2);
    const r = await client.stockReceipt({ item: "SKU-1", location: "WH-1", quantity: "20", reference: "grn-1" });
    assertInt64Strings(r);
    const issue = await client.stockIssue({ item: "SKU-1", location: "WH-1", quantity: "2" });
    await client.stockAdjustment({ item: "SKU-1", location: "WH-1", quantity: "-1", reason: "count" });
    const tr = await client.stockTransfer({ item: "SKU-1", from: "WH-1", to: "WH-2", quantity: "3" });
    assert.equal(tr.entries.length, 2);
    const rev = await client.stockReversal({ chain: issue.entries[0].chain, seq: BigInt(issue.entries[0].seq) });
    assert.equal(rev.entries[0].original_seq, issue.entries[0].seq);
    const total = await client.stockTotal("SKU-1");
    assertInt64Strings(total);
    assert.equal(total.total, "19"); // 20 - 2 - 1 + 2 (the issue reversed); 3 moved to WH-2
    const bal = await client.stockBalance("SKU-1", "WH-2");
    assert.equal(bal.quantity, "3");
    const atSeq = await client.stockBalance("SKU-1", "WH-1", { atSeq: r.entries[0].seq });
    assert.equal(atSeq.quantity, "20");
    const atTime = await client.stockBalance("SKU-1", "WH-1", { atTime: new Date().toISOString() });
    assert.equal(atTime.quantity, "16");
    const hist = await client.stockHistory("SKU-1", "WH-1", { from: 1, limit: 2 });
    assertInt64Strings(hist);
    assert.equal(hist.entries.length, 2);
    assert.equal(hist.next_seq, "3");
  });

  test("financial", async () => {
    assert.equal((await client.currencies("main")).currencies[0].code, "EUR");
    assert.ok((await client.accounts("main")).accounts.length >= 3);
    await client.defineAccount("main", { code: "9999", name: "Suspense", type: "asset" });
    const closed = await client.closeAccount("main", "9999");
    assert.equal(closed.closed, true);
    const p = await client.post("main", { date: "2026-11-02", memo: "goods received", lines: [
      { account: "1400", side: "debit", amount: "12.50", currency: "EUR" },
      { account: "2100", side: "credit", amount: "12.50", currency: "EUR" }] });
    assertInt64Strings(p);
    assert.deepEqual(await client.posting("main", p.seq), p);
    assert.equal((await client.postingByKey("main", p.key)).seq, p.seq);
    const rev = await client.reversePosting("main", { seq: p.seq, memo: "wrong supplier" });
    assert.equal(rev.reverses, p.seq);
    const bals = await client.accountBalances("main", "1400");
    assertInt64Strings(bals);
    const now = await client.accountBalance("main", "1400", "EUR");
    assert.equal(now.amount, "0.00");
    const then = await client.accountBalance("main", "1400", "EUR", { atSeq: p.seq });
    assert.equal(then.amount, "12.50");
    assert.equal((await client.accountBalance("main", "1400", "EUR", { asOf: "2026-11-30" })).date, "2026-11-30");
    const tb = await client.trialBalance("main");
    assertInt64Strings(tb);
    assert.ok(tb.totals.every((t) => /^0(\.0+)?$/.test(t.net)));
  });

  test("valuations", async () => {
    assert.equal((await client.valItems()).items[0].id, "SKU-1");
    const r = await client.valReceipt({ item: "SKU-1", location: "WH-1", quantity: "10", unit_cost: "8.25" });
    assertInt64Strings(r);
    const issue = await client.valIssue({ item: "SKU-1", location: "WH-1", quantity: "4" });
    await client.valAdjustment({ item: "SKU-1", location: "WH-1", amount: "1.00" });
    await client.valTransfer({ item: "SKU-1", from: "WH-1", to: "WH-2", quantity: "2" });
    const rev = await client.valReversal({ item: "SKU-1", location: "WH-1", reverses: issue.operation });
    assert.notEqual(rev.operation, issue.operation);
    assert.equal(rev.legs[0].quantity_change, "4");
    assertInt64Strings(await client.valBalances("SKU-1"));
    const b = await client.valBalance("SKU-1", "WH-2", { atSeq: 1 });
    assert.equal(b.balances.length, 1);
    const layers = await client.valLayers("SKU-1", "WH-1", { limit: 10 });
    assert.ok(Array.isArray(layers.layers));
  });

  test("business events, outbox, requeue of a dead letter, webhooks", async () => {
    const ev = await client.purchaseReceipt(receipt("po-1"));
    assertInt64Strings(ev);
    assert.equal(ev.stock.entries[0].quantity, "10");
    await client.salesIssue({ item: "SKU-1", location: "WH-1", quantity: "1", date: "2026-11-03",
      cost_account: "5000", inventory_account: "1400", reference: "so-1" });
    const pending = await client.outboxMessages({ topic: "business-events", status: "pending", limit: 10 });
    assert.ok(pending.messages.length >= 2);
    assertInt64Strings(pending);
    const hist = await client.outboxMessage(ev.message.id);
    assert.equal(hist.message.id, ev.message.id);

    // A message of the delivered topic, refused once (dead), requeued and delivered.
    receiver.script.push(400);
    const dead = await client.purchaseReceipt({ ...receipt("po-dead"), topic: "deliveries" });
    const d = await eventually(async () => (await client.deadMessages({ topic: "deliveries" })).messages.find((m) => m.id === dead.message.id));
    assert.equal(d.status, "dead");
    const stats = await client.outboxStats({ topic: "deliveries" });
    assertInt64Strings(stats);
    assert.equal(stats.topics[0].dead, "1");
    const activity = await client.outboxActivity({ topic: "deliveries", minutes: 60 });
    assertInt64Strings(activity);
    assert.equal(activity.topics[0].buckets.length, 12);
    assert.equal(activity.topics[0].buckets.reduce((n, b) => n + Number(b.rejected), 0), 1);
    const rq = await client.intent("requeue").submit((c) => c.requeue({ ids: [d.id], reason: "endpoint fixed" }));
    assert.deepEqual(rq.body.requeued, [d.id]);
    await eventually(async () => (await client.outboxMessage(d.id)).message.status === "done");
    assert.deepEqual(receiver.deliveries.map((x) => x.status), [400, 200]);
    const history = (await client.outboxMessage(d.id)).history;
    assertInt64Strings(history);
    assert.ok(history.length >= 3);

    const body = JSON.stringify({ action: "opened" });
    const headers = { "X-GitHub-Delivery": "72d3-1", "X-Hub-Signature-256": githubSignature(body) };
    const w = await client.deliverWebhook("hooks", body, headers);
    assert.equal(w.status, "received");
    assert.equal(typeof w.seq, "string");
    assert.equal((await client.deliverWebhook("hooks", body, headers)).status, "duplicate");
    const inbox = await client.inbox();
    assertInt64Strings(inbox);
    const hooks = inbox.providers.find((p) => p.name === "hooks");
    assert.equal(hooks.duplicates, "1");
    assert.equal(hooks.recent[0].event_id, "72d3-1");
  });

  test("keys, verify, health, readiness, the document", async () => {
    const created = await client.createAPIKey({ name: "reader", scopes: ["read"] });
    assert.match(created.token, /^lwk_/);
    assertInt64Strings(created);
    const keys = await client.apiKeys();
    assert.ok(keys.keys.some((k) => k.id === created.key.id));
    const reader = newClient({ token: created.token });
    assert.deepEqual((await reader.whoami()).scopes, ["read"]);
    await reader.head("orders/2026");
    await assert.rejects(reader.appendEntry("orders/2026", { type: "x/v1", payload: "" }), (e) => e.code === "FORBIDDEN" && e.status === 403 && e.final);
    const revoked = await client.revokeAPIKey(created.key.id, { reason: "test" });
    assert.ok(BigInt(revoked.revoked_unix_nano) > 0n);
    await assert.rejects(reader.head("orders/2026"), (e) => e.code === "UNAUTHENTICATED" && e.status === 401);

    const guarded = await client.request("POST", "/v1/chains/guarded/entries", { type: "t/v1", payload: "" }, { idempotencyKey: "guard-view-1" });
    const me = await client.whoami();
    const rec = await client.guardRecord({ keyId: me.id, method: "POST", path: "/v1/chains/guarded/entries", key: "guard-view-1" });
    assert.equal(rec.status, "SUCCESS");
    assert.equal(rec.response.status, guarded.status);
    assert.equal(JSON.parse(rec.response.body).hash, guarded.body.hash);

    const head = await client.head("orders/2026");
    const report = await client.verify({ chains: ["orders/2026"], trees: true, expect_heads: [{ chain: "orders/2026", seq: BigInt(head.seq), hash: head.hash }] });
    assert.equal(report.ok, true);
    assertInt64Strings(report);
    assert.equal(typeof report.entries, "string");
    assert.equal((await client.verify()).ok, true);
    assert.equal(proxy.seen("/v1/verify").at(-1).key, "", "verify sends no Idempotency-Key");
    assert.equal((await client.health()).status, "ok");
    assert.equal((await client.ready()).status, "ok");
    // This server signs no checkpoint: the proof route says so (docs/CONSOLE.md's browser test proves one).
    await assert.rejects(client.proveEntry("orders/2026", "1"), (e) => e.code === "NOT_FOUND" && e.status === 404 && e.final);
    const doc = await client.openapi();
    assert.equal(doc.components.schemas.Entry.properties.time_unix_nano.type, "string");
    assert.equal(doc.components.schemas.Entry.properties.time_unix_nano.format, "int64");
  });
});

describe("intents", () => {
  test("a double submit sends one request", async () => {
    const intent = client.intent("double");
    const before = proxy.seen("/v1/purchase-receipts").length;
    const fn = (c) => c.purchaseReceipt(receipt("po-double"));
    const [a, b] = await Promise.all([intent.submit(fn), intent.submit(fn)]);
    assert.equal(a, b);
    assert.equal(proxy.seen("/v1/purchase-receipts").length - before, 1);
    assert.equal(await intent.pending(), null, "a success clears the intent");
  });

  test("two clients over one storage (a component mounted twice) send one request", async () => {
    const storage = memoryStorage();
    const [one, two] = [newClient({ storage }), newClient({ storage })];
    const before = proxy.seen("/v1/chains/twice/entries").length;
    const fn = (c) => c.appendEntry("twice", { type: "t/v1", payload: toBase64("once") });
    const [a, b] = await Promise.all([one.intent("form").submit(fn), two.intent("form").submit(fn)]);
    assert.equal(a, b);
    assert.equal(proxy.seen("/v1/chains/twice/entries").length - before, 1);
    assert.equal(one.intent("form").busy, false);
  });

  test("a new submit is a new key; a final answer clears the intent", async () => {
    const intent = client.intent("receipt");
    const one = await intent.submit((c) => c.stockReceipt({ item: "SKU-1", location: "WH-2", quantity: "1" }));
    const two = await intent.submit((c) => c.stockReceipt({ item: "SKU-1", location: "WH-2", quantity: "1" }));
    assert.notEqual(one.key, two.key);
    assert.notEqual(one.body.entries[0].seq, two.body.entries[0].seq, "two intents, two entries");
    assert.equal(one.replayed || two.replayed, false);
    // A permanent refusal is final: the intent is cleared, nothing retried.
    const n = proxy.requests.length;
    await assert.rejects(intent.submit((c) => c.stockIssue({ item: "SKU-1", location: "WH-2", quantity: "999999" })),
      (e) => e instanceof LedgerError && e.code === "INVALID_INPUT" && e.status === 400 && e.final && e.attempts === 1);
    assert.equal(proxy.requests.length - n, 1);
    assert.equal(await intent.pending(), null);
  });

  test("a reload retries with the same key and the same body, and writes one entry", async () => {
    const storage = memoryStorage();
    const first = newClient({ storage, maxAttempts: 1 });
    // The server writes the entry; the answer is lost on the way back.
    proxy.fault({ path: "/v1/chains/reload/receipts/entries", dropAfter: true });
    await assert.rejects(first.intent("append").submit((c) => c.appendEntry("reload/receipts", { type: "receipt/v1", payload: toBase64("po-7") })),
      (e) => e.code === "NETWORK_ERROR" && !e.final);
    const stored = await first.intent("append").pending();
    assert.ok(stored, "an unfinished intent is kept");
    // The page reloads: a new client over the same storage.
    const second = newClient({ storage });
    const intent = second.intent("append");
    assert.equal((await intent.pending()).key, stored.key);
    const res = await intent.resume();
    assert.equal(res.key, stored.key);
    assert.equal(res.replayed, true, "the server replays the first attempt's answer");
    assert.equal(res.resumed, true);
    const sent = proxy.seen("/v1/chains/reload/receipts/entries", "POST");
    assert.equal(sent.length, 2);
    assert.equal(sent[0].key, sent[1].key);
    assert.equal(sent[0].body, sent[1].body, "the same bytes");
    const head = await client.head("reload/receipts");
    assert.equal(head.seq, "1", "one entry");
    assert.equal(await intent.pending(), null);
    assert.equal(await intent.resume(), null);
  });

  test("a submit after a reload finishes the stored request, not a new one", async () => {
    const storage = memoryStorage();
    proxy.fault({ path: "/v1/chains/reload2/entries", drop: true });
    await assert.rejects(newClient({ storage, maxAttempts: 1 }).intent("f").submit((c) => c.appendEntry("reload2", { type: "a/v1", payload: toBase64("1") })));
    const res = await newClient({ storage }).intent("f").submit((c) => c.appendEntry("reload2", { type: "a/v1", payload: toBase64("2") }));
    assert.equal(res.resumed, true);
    const e = await client.entry("reload2", res.body.seq);
    assert.equal(new TextDecoder().decode(fromBase64(e.payload)), "1", "the stored body was sent");
    assert.equal((await client.head("reload2")).seq, "1");
  });

  test("a process killed mid-request leaves its key; the next process writes once", async () => {
    const file = path.join(server.dir, "intents.json");
    const reference = "crash-" + Date.now();
    proxy.fault({ path: "/v1/stock/receipts", holdMs: 1500 });
    const n = proxy.seen("/v1/stock/receipts").length;
    const child = spawn(process.execPath, [new URL("../testkit/crash-child.js", import.meta.url).pathname, proxy.url, server.token, file, reference],
      { stdio: "inherit" });
    await eventually(() => proxy.seen("/v1/stock/receipts").length > n);
    const exited = new Promise((r) => child.once("exit", r));
    child.kill("SIGKILL");
    await exited;
    const storage = fileStorage(file);
    const intent = newClient({ storage }).intent("crash-receipt");
    const stored = await intent.pending();
    assert.ok(stored, "the killed process's intent is on disk");
    const res = await intent.resume();
    assert.equal(res.key, stored.key);
    const hist = await client.stockHistory("SKU-1", "WH-1", { limit: 1000 });
    assert.equal(hist.entries.filter((e) => e.reference === reference).length, 1, "one entry");
    // The held first attempt reaches the server after the resume: replayed.
    await eventually(() => proxy.seen("/v1/stock/receipts").slice(n).every((r) => r.status));
    const again = await client.stockHistory("SKU-1", "WH-1", { limit: 1000 });
    assert.equal(again.entries.filter((e) => e.reference === reference).length, 1, "still one entry");
  });
});

/** mulberry32 is a small seeded PRNG, so that a failing sequence can be replayed with its seed. */
function mulberry32(seed) {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

describe("intents against a model", () => {
  // Random sequences of submits whose answers are lost, dropped, refused
  // for a while or for good, reloads and double submits, checked step by
  // step against a plain model: the stored key, and the keys the server
  // has processed (one entry each).
  const seed = Number(process.env.INTENT_PROPERTY_SEED ?? Math.floor(Math.random() * 2 ** 31));
  const steps = Number(process.env.INTENT_PROPERTY_STEPS ?? 40);
  test(`a random sequence of ${steps} steps (INTENT_PROPERTY_SEED=${seed})`, async () => {
    const rand = mulberry32(seed);
    const storage = memoryStorage();
    const chain = "prop/" + seed;
    const route = `/v1/chains/${chain}/entries`;
    let page = newClient({ storage });
    const model = { pending: null, written: new Set() };
    const bodies = new Map(); // key -> the body of its first request
    const actions = ["ok", "ok", "lostAnswer", "dropped", "busy", "refused", "reload", "double"];
    const log = [];
    for (let step = 0; step < steps; step++) {
      const action = actions[Math.floor(rand() * actions.length)];
      log.push(action);
      const where = `step ${step} (${log.join(" ")}), seed ${seed}`;
      const intent = page.intent("form");
      const fn = (c) => c.appendEntry(chain, { type: "p/v1", payload: toBase64("step " + step) });
      const before = proxy.seen(route, "POST").length;
      const had = model.pending;
      if (action === "reload") {
        page = newClient({ storage });
      } else if (action === "ok" || action === "double") {
        const runs = action === "double" ? [intent.submit(fn), intent.submit(fn)] : [intent.submit(fn)];
        const [res, other] = await Promise.all(runs);
        if (other) assert.equal(other, res, where);
        assert.equal(proxy.seen(route, "POST").length - before, 1, `one request: ${where}`);
        if (had) assert.equal(res.key, had, where);
        assert.equal(res.resumed, had !== null, where);
        assert.equal(res.replayed, model.written.has(res.key), where);
        model.written.add(res.key);
        model.pending = null;
      } else {
        if (action === "lostAnswer") proxy.fault({ path: route, dropAfter: true });
        if (action === "dropped") proxy.fault({ path: route, drop: true });
        if (action === "busy") for (let i = 0; i < 2; i++) proxy.fault({ path: route, status: 503, code: "STORE_UNAVAILABLE" });
        if (action === "refused") proxy.fault({ path: route, status: 400, code: "INVALID_INPUT" });
        const err = await intent.submit(fn, { maxAttempts: action === "busy" ? 2 : 1 }).then(() => null, (e) => e);
        assert.ok(err instanceof LedgerError, `${action} must fail: ${where}`);
        if (had) assert.equal(err.key, had, where);
        if (action === "lostAnswer") model.written.add(err.key);
        assert.equal(err.final, action === "refused", where);
        model.pending = action === "refused" ? null : err.key;
      }
      const stored = await page.intent("form").pending();
      assert.equal(stored?.key ?? null, model.pending, `stored key: ${where}`);
      for (const r of proxy.seen(route, "POST").slice(before)) {
        if (!bodies.has(r.key)) bodies.set(r.key, r.body);
        assert.equal(r.body, bodies.get(r.key), `one body for key ${r.key}: ${where}`);
      }
    }
    const head = await client.head(chain).catch((e) => (e.code === "NOT_FOUND" ? { seq: "0" } : Promise.reject(e)));
    assert.equal(head.seq, String(model.written.size), `one entry a processed key (${log.join(" ")}), seed ${seed}`);
  });
});

describe("retries", () => {
  test("503 and 429 are retried after Retry-After (seconds, then an HTTP date), with one key and one body", async () => {
    const waits = [];
    const c = newClient({ onRetry: (e) => waits.push(e) });
    proxy.fault({ path: "/v1/chains/retry/entries", status: 503, code: "STORE_UNAVAILABLE", retryAfter: 1 });
    proxy.fault({ path: "/v1/chains/retry/entries", status: 429, code: "RATE_LIMITED", retryAfterDateMs: 2000 });
    proxy.fault({ path: "/v1/chains/retry/entries", drop: true });
    const res = await c.appendEntry("retry", { type: "r/v1", payload: toBase64("x") }, { onResponse: (r) => assert.equal(r.attempts, 4) });
    assert.equal(res.seq, "1");
    const sent = proxy.seen("/v1/chains/retry/entries");
    assert.equal(sent.length, 4);
    assert.equal(new Set(sent.map((r) => r.key)).size, 1, "one key");
    assert.equal(new Set(sent.map((r) => r.body)).size, 1, "one body");
    assert.deepEqual(waits.map((w) => w.error.code), ["STORE_UNAVAILABLE", "RATE_LIMITED", "NETWORK_ERROR"]);
    assert.ok(waits[0].waitMs >= 1000, `waited ${waits[0].waitMs} ms after Retry-After: 1`);
    // An HTTP date has whole seconds: 2 s ahead is at least 1 s ahead.
    assert.ok(waits[1].waitMs >= 900, `waited ${waits[1].waitMs} ms after an HTTP date 2 s ahead`);
    assert.ok(sent[1].atMs - sent[0].atMs >= 1000);
    assert.equal((await client.head("retry")).seq, "1", "one entry");
  });

  test("backoff is full jitter under a doubling ceiling", async () => {
    const waits = [];
    const c = newClient({ backoffBaseMs: 40, backoffMaxMs: 100, random: () => 0.5, onRetry: (e) => waits.push(e.waitMs) });
    for (let i = 0; i < 4; i++) proxy.fault({ path: "/v1/chains/jitter/entries", status: 503, code: "STORE_UNAVAILABLE" });
    await c.appendEntry("jitter", { type: "j/v1", payload: "" });
    assert.deepEqual(waits, [20, 40, 50, 50], "half of 40, 80, then the cap of 100");
    const edges = [];
    const d = newClient({ backoffBaseMs: 40, backoffMaxMs: 100, random: () => edges.length % 2 ? 0.999999 : 0, onRetry: (e) => edges.push(e.waitMs) });
    for (let i = 0; i < 2; i++) proxy.fault({ path: "/v1/chains/jitter/entries", status: 503, code: "STORE_UNAVAILABLE" });
    await d.appendEntry("jitter", { type: "j/v1", payload: "" });
    assert.deepEqual(edges, [0, 79], "drawn from [0, ceiling)");
  });

  test("409 REQUEST_IN_PROGRESS, 502 and 504 are retried; 500 and other 4xx are not", async () => {
    const c = newClient();
    proxy.fault({ path: "/v1/chains/retry2/entries", status: 409, code: "REQUEST_IN_PROGRESS", retryAfter: 0 });
    proxy.fault({ path: "/v1/chains/retry2/entries", status: 502, code: "BAD_GATEWAY" });
    proxy.fault({ path: "/v1/chains/retry2/entries", status: 504, code: "GATEWAY_TIMEOUT" });
    await c.appendEntry("retry2", { type: "r/v1", payload: "" });
    assert.equal(proxy.seen("/v1/chains/retry2/entries").length, 4);
    for (const [status, code] of [[500, "STORAGE"], [409, "KEY_REUSED_WITH_DIFFERENT_REQUEST"], [409, "REQUEST_FAILED"], [400, "INVALID_INPUT"]]) {
      proxy.fault({ path: "/v1/chains/retry3/entries", status, code });
      const n = proxy.seen("/v1/chains/retry3/entries").length;
      await assert.rejects(c.appendEntry("retry3", { type: "r/v1", payload: "" }), (e) => e.status === status && e.code === code && !e.retryable && e.final);
      assert.equal(proxy.seen("/v1/chains/retry3/entries").length - n, 1, `${status} ${code} is not retried`);
    }
  });

  test("attempts, Retry-After beyond the maximum, the call's timeout and an abort end the call; the intent stays", async () => {
    const storage = memoryStorage();
    const c = newClient({ storage, maxAttempts: 2 });
    proxy.fault({ path: "/v1/chains/bounds/entries", status: 503, code: "STORE_UNAVAILABLE" });
    proxy.fault({ path: "/v1/chains/bounds/entries", status: 503, code: "STORE_UNAVAILABLE" });
    const intent = c.intent("bounds");
    await assert.rejects(intent.submit((x) => x.appendEntry("bounds", { type: "b/v1", payload: "" })),
      (e) => e.code === "STORE_UNAVAILABLE" && e.attempts === 2 && e.retryable && !e.final);
    assert.ok(await intent.pending(), "an unknown outcome keeps the intent");

    proxy.fault({ path: "/v1/chains/bounds/entries", status: 429, code: "RATE_LIMITED", retryAfter: 120 });
    await assert.rejects(intent.resume(), (e) => e.code === "RATE_LIMITED" && e.retryAfter === 120 && e.attempts === 1);
    assert.ok(await intent.pending());

    proxy.fault({ path: "/v1/chains/bounds/entries", holdMs: 3000 });
    await assert.rejects(intent.resume({ timeoutMs: 200 }), (e) => e.code === "TIMEOUT" && !e.final);
    const ac = new AbortController();
    proxy.fault({ path: "/v1/chains/bounds/entries", holdMs: 3000 });
    setTimeout(() => ac.abort(), 100);
    await assert.rejects(intent.resume({ signal: ac.signal }), (e) => e.code === "ABORTED" && e.status === 0);
    const key = (await intent.pending()).key;
    await eventually(() => proxy.seen("/v1/chains/bounds/entries").every((r) => r.status || r.fault?.status || r.fault?.drop));
    const res = await intent.resume();
    assert.equal(res.key, key);
    assert.equal((await client.head("bounds")).seq, "1", "every attempt of the intent, one entry");
  });
});

describe("errors", () => {
  test("refusals carry the problem's code, status, title and detail", async () => {
    await assert.rejects(client.entry("orders/2026", "999"), (e) =>
      e instanceof LedgerError && e.code === "NOT_FOUND" && e.status === 404 && e.title !== "" && e.requestId !== "");
    const bad = newClient({ token: "lwk_nope" });
    await assert.rejects(bad.head("orders/2026"), (e) => e.code === "UNAUTHENTICATED" && e.status === 401);
    const key = "reuse-" + Date.now();
    await client.appendEntry("errors", { type: "e/v1", payload: toBase64("a") }, { idempotencyKey: key });
    await assert.rejects(client.appendEntry("errors", { type: "e/v1", payload: toBase64("b") }, { idempotencyKey: key }),
      (e) => e.code === "KEY_REUSED_WITH_DIFFERENT_REQUEST" && e.status === 409 && e.key === key);
    // A number where a 64-bit integer belongs is refused by the server.
    const chain = (await client.stockHistory("SKU-1", "WH-1", { limit: 1 })).chain;
    await assert.rejects(client.request("POST", "/v1/stock/reversals", `{"chain":"${chain}","seq":1}`),
      (e) => e.code === "INVALID_INPUT" && /JSON string/.test(e.detail));
    // existing_seq of a conflict is a string.
    const p = await client.post("main", { date: "2026-11-04", lines: [
      { account: "1400", side: "debit", amount: "1.00", currency: "EUR" }, { account: "2100", side: "credit", amount: "1.00", currency: "EUR" }] });
    const r = await client.reversePosting("main", { seq: p.seq, memo: "a" });
    await assert.rejects(client.reversePosting("main", { seq: p.seq, memo: "b" }),
      (e) => e.code === "IDEMPOTENCY_CONFLICT" && e.extra.existing_seq === r.seq);
    // Arguments the client refuses before sending: nothing is sent.
    const sentBefore = proxy.requests.length;
    await assert.rejects(client.entry("orders/2026", 2 ** 60), (e) => e.code === "INVALID_ARGUMENT" && e.status === 0 && !e.final);
    await assert.rejects(client.head("/bad"), (e) => e.code === "INVALID_ARGUMENT");
    await assert.rejects(client.appendEntry("x", { type: "t", payload: "" }, { idempotencyKey: " bad" }), (e) => e.code === "INVALID_ARGUMENT");
    assert.equal(proxy.requests.length, sentBefore);
  });
});

describe("coverage", () => {
  test("every operation of /openapi.json was called at least once", async () => {
    const doc = await client.openapi();
    const missing = [];
    for (const [p, item] of Object.entries(doc.paths)) {
      const re = new RegExp("^" + p.replace(/\{name\}/g, ".+").replace(/\{[^}]+\}/g, "[^/]+") + "(\\?.*)?$");
      for (const method of Object.keys(item)) {
        if (!proxy.requests.some((r) => r.method === method.toUpperCase() && re.test(r.path))) missing.push(`${method.toUpperCase()} ${p}`);
      }
    }
    assert.deepEqual(missing, []);
  });
});
