// The client's pure parts: Retry-After, backoff, keys, 64-bit arguments.

import assert from "node:assert/strict";
import { test } from "node:test";

import { KEY_SIZE_MAX, LedgerClient, backoffCeilingMs, encodeJSON, fromBase64, int64, newKey, parseRetryAfter, retryableStatus, toBase64 } from "../ledger.js";

test("Retry-After: seconds, an HTTP date, and nothing else", () => {
  const now = Date.parse("Sun, 06 Nov 1994 08:49:37 GMT");
  assert.equal(parseRetryAfter("3", now), 3000);
  assert.equal(parseRetryAfter(" 0 ", now), 0);
  assert.equal(parseRetryAfter("Sun, 06 Nov 1994 08:49:47 GMT", now), 10000);
  assert.equal(parseRetryAfter("Sun, 06 Nov 1994 08:49:27 GMT", now), 0, "a past date");
  for (const bad of ["", null, undefined, "-1", "1.5", "soon", "3s", "2026-01-01T00:00:00Z"]) assert.equal(parseRetryAfter(bad, now), 0, String(bad));
  assert.equal(parseRetryAfter("99999999999999999999", now), 24 * 3600 * 1000, "capped");
});

test("backoff: doubled from the base, capped", () => {
  assert.deepEqual([1, 2, 3, 4, 5, 6, 7].map((n) => backoffCeilingMs(n, 100, 5000)), [100, 200, 400, 800, 1600, 3200, 5000]);
  assert.equal(backoffCeilingMs(1000, 100, 5000), 5000);
});

test("retryable answers are exactly docs/CLIENT.md's", () => {
  for (const s of [429, 502, 503, 504]) assert.ok(retryableStatus(s, ""), String(s));
  assert.ok(retryableStatus(409, "REQUEST_IN_PROGRESS"));
  for (const [s, c] of [[409, "KEY_REUSED_WITH_DIFFERENT_REQUEST"], [409, "IDEMPOTENCY_CONFLICT"], [409, "REQUEST_FAILED"], [500, "STORAGE"],
    [500, "CORRUPT"], [400, "INVALID_INPUT"], [401, "UNAUTHENTICATED"], [403, "FORBIDDEN"], [404, "NOT_FOUND"], [413, "PAYLOAD_TOO_LARGE"], [415, ""]]) {
    assert.ok(!retryableStatus(s, c), `${s} ${c}`);
  }
});

test("keys: UUID v4, never repeated", () => {
  const seen = new Set();
  for (let i = 0; i < 10000; i++) {
    const k = newKey();
    assert.match(k, /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    assert.ok(k.length <= KEY_SIZE_MAX);
    seen.add(k);
  }
  assert.equal(seen.size, 10000);
});

test("64-bit arguments: strings and bigints exact, unsafe numbers refused", () => {
  assert.equal(int64("18446744073709551615"), "18446744073709551615");
  assert.equal(int64(2n ** 63n - 1n), "9223372036854775807");
  assert.equal(int64(42), "42");
  assert.throws(() => int64(2 ** 53), (e) => e.code === "INVALID_ARGUMENT");
  assert.throws(() => int64(1.5), (e) => e.code === "INVALID_ARGUMENT");
  assert.throws(() => int64("1e3"), (e) => e.code === "INVALID_ARGUMENT");
  assert.equal(encodeJSON({ seq: 1796168400516775118n }), '{"seq":"1796168400516775118"}');
  // JSON.parse of the API's string form is exact; of a number it is not.
  const wire = '{"time_unix_nano":"1796168400516775119"}';
  assert.equal(BigInt(JSON.parse(wire).time_unix_nano), 1796168400516775119n);
  assert.notEqual(BigInt(JSON.parse('{"t":1796168400516775119}').t), 1796168400516775119n);
});

test("base64 payloads round-trip bytes", () => {
  const b = new Uint8Array(70000).map((_, i) => i % 256);
  assert.deepEqual(fromBase64(toBase64(b)), b);
  assert.equal(toBase64("{}"), "e30=");
});

test("options are checked", () => {
  assert.throws(() => new LedgerClient({ baseURL: "ftp://x" }), (e) => e.code === "INVALID_ARGUMENT");
  assert.throws(() => new LedgerClient({ baseURL: "http://x", maxAttempts: 0 }), (e) => e.code === "INVALID_ARGUMENT");
  assert.throws(() => new LedgerClient({ baseURL: "http://x", timeoutMs: -1 }), (e) => e.code === "INVALID_ARGUMENT");
  assert.equal(new LedgerClient({ baseURL: "http://x/prefix/" }).baseURL, "http://x/prefix");
});

test("ledger.d.ts declares every export and every method of LedgerClient and Intent", async () => {
  const { readFile } = await import("node:fs/promises");
  const dts = await readFile(new URL("../ledger.d.ts", import.meta.url), "utf8");
  const mod = await import("../ledger.js");
  const declared = new Set([...dts.matchAll(/^export (?:const|class|function) (\w+)/gm)].map((m) => m[1]));
  assert.deepEqual([...Object.keys(mod)].sort(), [...declared].sort());
  const section = (name) => dts.slice(dts.indexOf(`export class ${name} `), dts.indexOf("\n}\n", dts.indexOf(`export class ${name} `)));
  for (const cls of [mod.LedgerClient, mod.Intent]) {
    const body = section(cls.name);
    const methods = new Set([...body.matchAll(/^\s+(\w+)(?:<[^>]*>)?\(/gm)].map((m) => m[1]));
    for (const m of Object.getOwnPropertyNames(cls.prototype)) {
      const d = Object.getOwnPropertyDescriptor(cls.prototype, m);
      if (m === "constructor" || m.startsWith("_") || d.get) continue;
      assert.ok(methods.has(m), `${cls.name}.${m} is not declared`);
    }
    for (const m of methods) {
      if (m !== "constructor") assert.equal(typeof cls.prototype[m], "function", `${cls.name}.${m} is declared but not defined`);
    }
  }
});

test("in a browser: the page's origin and sessionStorage are the defaults", async () => {
  const { memoryStorage } = await import("../ledger.js");
  const session = memoryStorage();
  globalThis.sessionStorage = session;
  globalThis.location = { origin: "https://erp.example" };
  try {
    const c = new LedgerClient({ token: "t" });
    assert.equal(c.baseURL, "https://erp.example");
    assert.equal(c.storage, session);
    assert.equal(c.intent("po").storageKey, "ledger.intent.po");
  } finally {
    delete globalThis.sessionStorage;
    delete globalThis.location;
  }
  Object.defineProperty(globalThis, "sessionStorage", { configurable: true, get() { throw new Error("SecurityError"); } });
  try {
    const c = new LedgerClient({ baseURL: "http://x" });
    assert.equal(typeof c.storage.getItem, "function", "a refused sessionStorage falls back to memory");
  } finally {
    delete globalThis.sessionStorage;
  }
});
