// @ledgerworks/ledger-client: the JavaScript client of `ledgerctl serve`.
//
// One ES module, no dependencies, for browsers and Node 20+. It keeps the
// client's half of the exactly-once contract (docs/CLIENT.md): one
// Idempotency-Key per intent, the same body bytes on every retry, retries
// only of the answers that are safe to retry, with exponential backoff and
// full jitter, never sooner than Retry-After.
//
// 64-bit integers (seqs, *_unix_nano, counts) travel as JSON strings and
// stay strings here: BigInt(entry.time_unix_nano) is exact, a number is not.

/** The module's version (package.json's). */
export const VERSION = "0.1.0";

/** Limits of an Idempotency-Key (the server's): 1 to 255 printable ASCII bytes. */
export const KEY_SIZE_MAX = 255;

/** The client's own codes, for failures without a problem body. */
export const ErrorCode = Object.freeze({
  NETWORK_ERROR: "NETWORK_ERROR", // no answer: refused, reset, DNS, an attempt timed out, a body cut short
  UNEXPECTED_RESPONSE: "UNEXPECTED_RESPONSE", // neither the route's JSON nor a problem with a code
  ABORTED: "ABORTED", // the caller's AbortSignal ended the call
  TIMEOUT: "TIMEOUT", // the call's timeoutMs ended it
  INVALID_ARGUMENT: "INVALID_ARGUMENT", // refused before anything was sent
});

const DEFAULTS = Object.freeze({
  maxAttempts: 6,
  backoffBaseMs: 100,
  backoffMaxMs: 5000,
  retryAfterMaxMs: 30000,
  maxAttemptsLimit: 1000,
});

/** The Retry-After the client reads is capped here (an absurd value must not overflow a timer). */
const RETRY_AFTER_PARSED_MAX_MS = 24 * 3600 * 1000;

/**
 * LedgerError is every failure of a call: a problem the server answered
 * (status and code from its application/problem+json body), or one of the
 * client's own codes (status 0 when no answer came).
 */
export class LedgerError extends Error {
  constructor(fields) {
    const status = fields.status ?? 0;
    const what = status ? `${status} ${fields.code}` : fields.code;
    super(`ledger: ${fields.method ?? ""} ${fields.path ?? ""}: ${what}${fields.detail ? ": " + fields.detail : ""}`.replace(/ {2,}/g, " "),
      fields.cause !== undefined ? { cause: fields.cause } : undefined);
    this.name = "LedgerError";
    /** HTTP status; 0 when no answer came. */
    this.status = status;
    /** The problem's stable code (branch on it), or the client's own. */
    this.code = fields.code;
    this.type = fields.type ?? "";
    this.title = fields.title ?? "";
    this.detail = fields.detail ?? "";
    /** The problem's other members (existing_seq, ...), as sent. */
    this.extra = fields.extra ?? {};
    /** Retry-After in milliseconds; 0 when absent. */
    this.retryAfterMs = fields.retryAfterMs ?? 0;
    /** Retry-After in seconds, as the header says it (rounded up); 0 when absent. */
    this.retryAfter = Math.ceil(this.retryAfterMs / 1000);
    /** Whether the same request may succeed if sent again, with the same key. */
    this.retryable = fields.retryable ?? false;
    this.method = fields.method ?? "";
    this.path = fields.path ?? "";
    /** The Idempotency-Key sent ("" for a read). */
    this.key = fields.key ?? "";
    this.attempts = fields.attempts ?? 0;
    /** X-Request-Id of the answer, when one came. */
    this.requestId = fields.requestId ?? "";
  }

  /**
   * Whether the answer is final: no retry with this key can change it (a
   * success aside). An intent is cleared on a final error and kept on any
   * other.
   */
  get final() {
    return !this.retryable && this.status !== 0 && this.code !== ErrorCode.NETWORK_ERROR;
  }
}

/**
 * Whether an answer is worth the same request again (docs/CLIENT.md): 409
 * REQUEST_IN_PROGRESS, 429, 502, 503, 504. Every other answer is final,
 * a 500 included.
 */
export function retryableStatus(status, code) {
  if (status === 429 || status === 502 || status === 503 || status === 504) return true;
  return (status === 409 || status === 425) && code === "REQUEST_IN_PROGRESS";
}

/**
 * Parses a Retry-After value (RFC 9110 10.2.3): seconds or an HTTP date,
 * measured from nowMs. Returns milliseconds; 0 for absent, malformed or past.
 */
export function parseRetryAfter(value, nowMs = Date.now()) {
  const v = (value ?? "").trim();
  if (v === "") return 0;
  if (/^[0-9]+$/.test(v)) {
    const secs = Number(v);
    return Math.min(secs * 1000, RETRY_AFTER_PARSED_MAX_MS);
  }
  if (/^[0-9]/.test(v)) return 0;
  // An IMF-fixdate ("Sun, 06 Nov 1994 08:49:37 GMT") or the obsolete forms
  // Date.parse reads; anything else is ignored.
  if (!/GMT$/.test(v)) return 0;
  const at = Date.parse(v);
  if (Number.isNaN(at)) return 0;
  return Math.max(0, Math.min(at - nowMs, RETRY_AFTER_PARSED_MAX_MS));
}

/** The ceiling of the wait before retry n (from 1): base doubled n-1 times, capped. */
export function backoffCeilingMs(n, baseMs, maxMs) {
  let c = baseMs;
  for (let i = 1; i < n && c < maxMs; i++) c *= 2;
  return Math.min(c, maxMs);
}

/** A fresh random UUID v4 (crypto.getRandomValues: also in insecure browser contexts). */
export function newKey() {
  const b = new Uint8Array(16);
  globalThis.crypto.getRandomValues(b);
  b[6] = (b[6] & 0x0f) | 0x40;
  b[8] = (b[8] & 0x3f) | 0x80;
  const h = Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}

/** checkKey throws INVALID_ARGUMENT for a key the server would refuse. */
function checkKey(key) {
  if (typeof key !== "string" || key.length === 0 || key.length > KEY_SIZE_MAX) {
    throw invalid(`an Idempotency-Key is 1 to ${KEY_SIZE_MAX} bytes`);
  }
  for (let i = 0; i < key.length; i++) {
    const c = key.charCodeAt(i);
    if (c < 0x20 || c > 0x7e) throw invalid(`Idempotency-Key byte ${i} is not printable ASCII`);
  }
  if (key[0] === " " || key[key.length - 1] === " " || key[0] === '"') {
    throw invalid("an Idempotency-Key has no surrounding spaces and does not start with a quote");
  }
}

function invalid(detail) {
  return new LedgerError({ code: ErrorCode.INVALID_ARGUMENT, detail });
}

/**
 * int64 turns a 64-bit integer argument into its wire form, a string of
 * decimal digits. It takes a string of digits, a bigint, or a number that
 * is a safe integer (a larger number has already lost digits: refused).
 */
export function int64(v, name = "value") {
  if (typeof v === "bigint") return v.toString();
  if (typeof v === "number") {
    if (!Number.isSafeInteger(v)) throw invalid(`${name} ${v} is not a safe integer: pass a string or a bigint`);
    return String(v);
  }
  if (typeof v === "string" && /^-?[0-9]{1,20}$/.test(v)) return v;
  throw invalid(`${name} ${JSON.stringify(String(v))} is not an integer`);
}

/** JSON.stringify that writes bigints as decimal strings (the API's 64-bit form). */
export function encodeJSON(value) {
  return JSON.stringify(value, (_, v) => (typeof v === "bigint" ? v.toString() : v));
}

/** toBase64 encodes bytes (or a string, as UTF-8) as standard padded base64: an entry's payload. */
export function toBase64(data) {
  const bytes = typeof data === "string" ? new TextEncoder().encode(data) : data;
  let s = "";
  for (let i = 0; i < bytes.length; i += 0x8000) s += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  return btoa(s);
}

/** fromBase64 decodes a payload to bytes. */
export function fromBase64(b64) {
  const s = atob(b64);
  const out = new Uint8Array(s.length);
  for (let i = 0; i < s.length; i++) out[i] = s.charCodeAt(i);
  return out;
}

/**
 * memoryStorage is a Storage (getItem, setItem, removeItem) in this
 * process's memory: for tests, and for Node when a crash need not be
 * survived. A browser's sessionStorage is the default where it exists.
 */
export function memoryStorage() {
  const m = new Map();
  return {
    getItem: (k) => (m.has(k) ? m.get(k) : null),
    setItem: (k, v) => void m.set(k, String(v)),
    removeItem: (k) => void m.delete(k),
  };
}

/** browserSessionStorage is the page's sessionStorage, or undefined (Node, or a sandbox that refuses it). */
function browserSessionStorage() {
  try {
    return typeof sessionStorage !== "undefined" ? sessionStorage : undefined;
  } catch {
    return undefined;
  }
}

/** One path segment, escaped ("/" too). */
function seg(name, v) {
  if (typeof v === "number" || typeof v === "bigint") v = int64(v, name);
  if (typeof v !== "string" || v === "") throw invalid(`${name} is empty`);
  return "/" + encodeURIComponent(v);
}

/** A chain name relative to the tenant, "/" separating its segments. */
function chainPath(name) {
  if (typeof name !== "string" || name === "" || name.startsWith("/") || name.endsWith("/") || name.includes("//")) {
    throw invalid(`chain name ${JSON.stringify(String(name))} is empty or malformed`);
  }
  return name.split("/").map((p) => "/" + encodeURIComponent(p)).join("");
}

/** Query parameters: those set (not undefined, null or "") only. */
function query(params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params ?? {})) {
    if (v === undefined || v === null || v === "") continue;
    q.set(k, typeof v === "number" || typeof v === "bigint" ? int64(v, k) : String(v));
  }
  const s = q.toString();
  return s ? "?" + s : "";
}

function sleep(ms, signal) {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const t = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(t);
      reject(signal.reason);
    };
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

/** anySignal is AbortSignal.any where the runtime lacks it (older browsers). */
function anySignal(signals) {
  const list = signals.filter(Boolean);
  if (list.length === 0) return undefined;
  if (list.length === 1) return list[0];
  if (typeof AbortSignal.any === "function") return AbortSignal.any(list);
  const c = new AbortController();
  for (const s of list) {
    if (s.aborted) {
      c.abort(s.reason);
      break;
    }
    s.addEventListener("abort", () => c.abort(s.reason), { once: true });
  }
  return c.signal;
}

/** timeoutSignal is an AbortSignal that aborts after ms (none for 0). */
function timeoutSignal(ms) {
  if (!(ms > 0)) return undefined;
  if (typeof AbortSignal.timeout === "function") return AbortSignal.timeout(ms);
  const c = new AbortController();
  setTimeout(() => c.abort(new DOMException("the attempt timed out", "TimeoutError")), ms);
  return c.signal;
}

/**
 * LedgerClient is a client of one server, with one API key. It is safe to
 * share: calls are independent, each with its own key and retries.
 */
export class LedgerClient {
  /**
   * @param {object} options see ledger.d.ts (ClientOptions): baseURL is
   * required; every other field has a documented default.
   */
  constructor(options) {
    const o = options ?? {};
    let base = o.baseURL ?? (typeof location !== "undefined" ? location.origin : "");
    if (typeof base !== "string" || !/^https?:\/\//.test(base)) {
      throw invalid(`baseURL ${JSON.stringify(String(base))}: want http:// or https://`);
    }
    this.baseURL = base.replace(/\/+$/, "");
    this.token = o.token ?? "";
    this.maxAttempts = o.maxAttempts ?? DEFAULTS.maxAttempts;
    this.backoffBaseMs = o.backoffBaseMs ?? DEFAULTS.backoffBaseMs;
    this.backoffMaxMs = o.backoffMaxMs ?? DEFAULTS.backoffMaxMs;
    this.retryAfterMaxMs = o.retryAfterMaxMs ?? DEFAULTS.retryAfterMaxMs;
    this.attemptTimeoutMs = o.attemptTimeoutMs ?? 0;
    this.timeoutMs = o.timeoutMs ?? 0;
    this.onRetry = o.onRetry ?? null;
    this.newKey = o.newKey ?? newKey;
    this.fetch = o.fetch ?? globalThis.fetch.bind(globalThis);
    this.storage = o.storage ?? browserSessionStorage() ?? memoryStorage();
    this.storagePrefix = o.storagePrefix ?? "ledger.intent.";
    this.random = o.random ?? Math.random;
    this.headers = { ...(o.headers ?? {}) };
    if (!Number.isInteger(this.maxAttempts) || this.maxAttempts < 1 || this.maxAttempts > DEFAULTS.maxAttemptsLimit) {
      throw invalid(`maxAttempts ${this.maxAttempts}: want 1 to ${DEFAULTS.maxAttemptsLimit}`);
    }
    for (const f of ["backoffBaseMs", "backoffMaxMs", "retryAfterMaxMs", "attemptTimeoutMs", "timeoutMs"]) {
      if (!(Number.isFinite(this[f]) && this[f] >= 0)) throw invalid(`${f} ${this[f]}: want a number >= 0`);
    }
    /** @type {Map<string, Intent>} */
    this._intents = new Map();
  }

  // ---- the generic call -------------------------------------------------

  /**
   * request sends one call and returns the whole answer: status, body,
   * replayed, key, attempts, requestId. A state-changing request (POST,
   * DELETE) carries an Idempotency-Key, opts.idempotencyKey or a fresh one,
   * the same on every retry; opts.keyed false sends none (verify, webhooks).
   */
  async request(method, path, body, opts = {}) {
    const keyed = opts.keyed ?? (method !== "GET" && method !== "HEAD");
    let key = "";
    if (keyed) {
      key = opts.idempotencyKey ?? this.newKey();
      checkKey(key);
    }
    let encoded = null;
    if (body !== undefined && body !== null) encoded = typeof body === "string" ? body : encodeJSON(body);
    return this._send({ method, path, body: encoded, key, contentType: opts.contentType, headers: opts.headers, raw: opts.raw }, opts);
  }

  /** _write is the one path of every typed state-changing call. */
  async _write(method, path, body, opts) {
    const res = await this.request(method, path, body, opts);
    opts?.onResponse?.(res);
    return res.body;
  }

  async _read(path, opts) {
    const res = await this.request("GET", path, undefined, opts);
    opts?.onResponse?.(res);
    return res.body;
  }

  /**
   * _send runs the attempts of one request: req.body is the encoded body
   * (a string, sent as is on every attempt), req.key its key.
   */
  async _send(req, opts = {}) {
    const maxAttempts = opts.maxAttempts ?? this.maxAttempts;
    const timeoutMs = opts.timeoutMs ?? this.timeoutMs;
    const attemptTimeoutMs = opts.attemptTimeoutMs ?? this.attemptTimeoutMs;
    const deadline = timeoutMs > 0 ? Date.now() + timeoutMs : Infinity;
    const callSignal = anySignal([opts.signal, timeoutSignal(timeoutMs)]);
    const ended = (last, cause) => {
      const aborted = opts.signal?.aborted;
      return new LedgerError({
        code: aborted ? ErrorCode.ABORTED : ErrorCode.TIMEOUT, method: req.method, path: req.path, key: req.key,
        attempts: last?.attempts ?? 0, retryable: true, cause: aborted ? opts.signal.reason : cause ?? last,
        detail: aborted ? "the caller aborted the call" : `the call's ${timeoutMs} ms ran out` + (last ? ` (last: ${last.message})` : ""),
      });
    };
    let last = null;
    for (let attempt = 1; ; attempt++) {
      if (callSignal?.aborted) throw ended(last);
      const outcome = await this._attempt(req, attempt, callSignal, attemptTimeoutMs);
      if (outcome.ok) return outcome.ok;
      last = outcome.err;
      if (callSignal?.aborted) throw ended(last);
      if (!last.retryable || attempt >= maxAttempts) throw last;
      if (last.retryAfterMs > this.retryAfterMaxMs) throw last;
      const wait = Math.max(Math.floor(this.random() * backoffCeilingMs(attempt, this.backoffBaseMs, this.backoffMaxMs)), last.retryAfterMs);
      if (Date.now() + wait >= deadline) throw ended(last);
      this.onRetry?.({ attempt, error: last, waitMs: wait, key: req.key });
      try {
        await sleep(wait, callSignal);
      } catch (e) {
        throw ended(last, e);
      }
    }
  }

  /** One attempt: {ok: LedgerResponse} or {err: LedgerError}. */
  async _attempt(req, attempt, callSignal, attemptTimeoutMs) {
    const signal = anySignal([callSignal, timeoutSignal(attemptTimeoutMs)]);
    const headers = { Accept: "application/json, application/problem+json", ...this.headers, ...(req.headers ?? {}) };
    if (this.token) headers.Authorization = `Bearer ${this.token}`;
    if (req.key) headers["Idempotency-Key"] = req.key;
    if (req.body !== null && !Object.keys(headers).some((h) => h.toLowerCase() === "content-type")) {
      headers["Content-Type"] = req.contentType ?? "application/json";
    }
    const base = { method: req.method, path: req.path, key: req.key, attempts: attempt };
    let resp, text;
    try {
      resp = await this.fetch(this.baseURL + req.path, { method: req.method, headers, body: req.body ?? undefined, signal, cache: "no-store" });
      text = await resp.text();
    } catch (e) {
      // No answer, or one cut short: the outcome is unknown, and the key
      // makes the retry a replay if the first attempt ran.
      return { err: new LedgerError({ ...base, code: ErrorCode.NETWORK_ERROR, retryable: true, cause: e, detail: String(e?.cause?.code ?? e?.message ?? e) }) };
    }
    const requestId = resp.headers.get("X-Request-Id") ?? "";
    const ctype = (resp.headers.get("Content-Type") ?? "").split(";")[0].trim().toLowerCase();
    if (resp.status >= 200 && resp.status < 300) {
      let body = text;
      if (!req.raw) {
        try {
          body = text === "" ? null : JSON.parse(text);
        } catch {
          return { err: new LedgerError({ ...base, status: resp.status, code: ErrorCode.UNEXPECTED_RESPONSE, requestId, detail: `a ${resp.status} body that is not JSON: ${text.slice(0, 200)}` }) };
        }
      }
      return { ok: { status: resp.status, body, replayed: resp.headers.get("Idempotent-Replayed") === "true", key: req.key, attempts: attempt, requestId } };
    }
    let p = null;
    if (ctype === "application/problem+json" || ctype === "application/json") {
      try {
        p = JSON.parse(text);
      } catch {
        p = null;
      }
    }
    const retryAfterMs = parseRetryAfter(resp.headers.get("Retry-After"));
    if (!p || typeof p !== "object" || typeof p.code !== "string" || p.code === "") {
      return { err: new LedgerError({ ...base, status: resp.status, code: ErrorCode.UNEXPECTED_RESPONSE, requestId, retryAfterMs,
        retryable: retryableStatus(resp.status, ""), detail: text.slice(0, 200) }) };
    }
    const { type, title, status, code, detail, ...extra } = p;
    const str = (v) => (typeof v === "string" ? v : "");
    return { err: new LedgerError({ ...base, status: resp.status, code, type: str(type), title: str(title), detail: str(detail),
      extra, requestId, retryAfterMs, retryable: retryableStatus(resp.status, code) }) };
  }

  // ---- intents ----------------------------------------------------------

  /**
   * intent returns the Intent named name: one business operation the user
   * means to happen once (a form's submission). The same name gives the
   * same Intent object of this client.
   */
  intent(name) {
    if (typeof name !== "string" || name === "") throw invalid("an intent has a name");
    let it = this._intents.get(name);
    if (!it) {
      it = new Intent(this, name);
      this._intents.set(name, it);
    }
    return it;
  }

  // ---- raw entries ------------------------------------------------------

  /** POST /v1/chains/{name}/entries → AppendResponse. payload: bytes, or a base64 string. */
  async appendEntry(chain, { type, payload }, opts) {
    const p = typeof payload === "string" ? payload : toBase64(payload ?? new Uint8Array());
    return this._write("POST", "/v1/chains" + chainPath(chain) + "/entries", { type, payload: p }, opts);
  }
  /** GET /v1/chains/{name}/entries/{seq} → Entry. */
  async entry(chain, seq, opts) { return this._read("/v1/chains" + chainPath(chain) + "/entries" + seg("seq", int64(seq, "seq")), opts); }
  /** GET /v1/chains/{name}/entries?from=&limit= → EntryPage. */
  async entries(chain, { from, limit } = {}, opts) { return this._read("/v1/chains" + chainPath(chain) + "/entries" + query({ from, limit }), opts); }
  /** GET /v1/chains/{name}/head → Head. */
  async head(chain, opts) { return this._read("/v1/chains" + chainPath(chain) + "/head", opts); }
  /** GET /v1/chains → ChainList: the tenant's chains whose names start with prefix, with their heads. */
  async chains({ prefix, fromName, limit } = {}, opts) { return this._read("/v1/chains" + query({ prefix, from_name: fromName, limit }), opts); }

  // ---- stock ------------------------------------------------------------

  async defineStockItem(req, opts) { return this._write("POST", "/v1/stock/items", req, opts); }
  async stockItems(opts) { return this._read("/v1/stock/items", opts); }
  async defineStockLocation(req, opts) { return this._write("POST", "/v1/stock/locations", req, opts); }
  async stockLocations(opts) { return this._read("/v1/stock/locations", opts); }
  async stockReceipt(req, opts) { return this._write("POST", "/v1/stock/receipts", req, opts); }
  async stockIssue(req, opts) { return this._write("POST", "/v1/stock/issues", req, opts); }
  async stockAdjustment(req, opts) { return this._write("POST", "/v1/stock/adjustments", req, opts); }
  async stockTransfer(req, opts) { return this._write("POST", "/v1/stock/transfers", req, opts); }
  /** POST /v1/stock/reversals: req.seq may be a string, a bigint or a safe integer. */
  async stockReversal(req, opts) { return this._write("POST", "/v1/stock/reversals", { ...req, seq: int64(req.seq, "seq") }, opts); }
  async stockTotal(item, opts) { return this._read("/v1/stock/balances" + seg("item", item), opts); }
  /** at: {atSeq} or {atTime: RFC 3339}, or none for now. */
  async stockBalance(item, location, { atSeq, atTime } = {}, opts) {
    return this._read("/v1/stock/balances" + seg("item", item) + seg("location", location) + query({ at_seq: atSeq, at_time: atTime }), opts);
  }
  async stockHistory(item, location, { from, limit } = {}, opts) {
    return this._read("/v1/stock/history" + seg("item", item) + seg("location", location) + query({ from, limit }), opts);
  }

  // ---- financial --------------------------------------------------------

  async defineAccount(book, req, opts) { return this._write("POST", "/v1/fin/books" + seg("book", book) + "/accounts", req, opts); }
  async closeAccount(book, code, opts) { return this._write("POST", "/v1/fin/books" + seg("book", book) + "/accounts" + seg("code", code) + "/close", undefined, opts); }
  async accounts(book, opts) { return this._read("/v1/fin/books" + seg("book", book) + "/accounts", opts); }
  async defineCurrency(book, req, opts) { return this._write("POST", "/v1/fin/books" + seg("book", book) + "/currencies", req, opts); }
  async currencies(book, opts) { return this._read("/v1/fin/books" + seg("book", book) + "/currencies", opts); }
  async post(book, req, opts) { return this._write("POST", "/v1/fin/books" + seg("book", book) + "/postings", req, opts); }
  async posting(book, seq, opts) { return this._read("/v1/fin/books" + seg("book", book) + "/postings" + seg("seq", int64(seq, "seq")), opts); }
  async postingByKey(book, key, opts) {
    if (!key) throw invalid("a posting's key is empty");
    return this._read("/v1/fin/books" + seg("book", book) + "/postings" + query({ key }), opts);
  }
  /** POST …/reversals: by req.seq (string, bigint or safe integer) or req.key. */
  async reversePosting(book, req, opts) {
    const body = { ...req };
    if (body.seq !== undefined) body.seq = int64(body.seq, "seq");
    return this._write("POST", "/v1/fin/books" + seg("book", book) + "/reversals", body, opts);
  }
  async accountBalances(book, account, opts) { return this._read("/v1/fin/books" + seg("book", book) + "/balances" + seg("account", account), opts); }
  /** at: {atSeq} or {asOf: YYYY-MM-DD}, or none for now. */
  async accountBalance(book, account, currency, { atSeq, asOf } = {}, opts) {
    return this._read("/v1/fin/books" + seg("book", book) + "/balances" + seg("account", account) + seg("currency", currency) +
      query({ at_seq: atSeq, as_of: asOf }), opts);
  }
  async trialBalance(book, opts) { return this._read("/v1/fin/books" + seg("book", book) + "/trial-balance", opts); }

  // ---- valuations -------------------------------------------------------

  async defineValItem(req, opts) { return this._write("POST", "/v1/val/items", req, opts); }
  async valItems(opts) { return this._read("/v1/val/items", opts); }
  async valReceipt(req, opts) { return this._write("POST", "/v1/val/receipts", req, opts); }
  async valIssue(req, opts) { return this._write("POST", "/v1/val/issues", req, opts); }
  async valAdjustment(req, opts) { return this._write("POST", "/v1/val/adjustments", req, opts); }
  async valTransfer(req, opts) { return this._write("POST", "/v1/val/transfers", req, opts); }
  async valReversal(req, opts) { return this._write("POST", "/v1/val/reversals", req, opts); }
  async valBalances(item, opts) { return this._read("/v1/val/balances" + seg("item", item), opts); }
  async valBalance(item, location, { atSeq } = {}, opts) {
    return this._read("/v1/val/balances" + seg("item", item) + seg("location", location) + query({ at_seq: atSeq }), opts);
  }
  async valLayers(item, location, { limit } = {}, opts) {
    return this._read("/v1/val/layers" + seg("item", item) + seg("location", location) + query({ limit }), opts);
  }

  // ---- business events --------------------------------------------------

  async purchaseReceipt(req, opts) { return this._write("POST", "/v1/purchase-receipts", req, opts); }
  async salesIssue(req, opts) { return this._write("POST", "/v1/sales-issues", req, opts); }

  // ---- outbox and inbox -------------------------------------------------

  /** filter: {topic, status, limit}. */
  async outboxMessages({ topic, status, limit } = {}, opts) { return this._read("/v1/outbox/messages" + query({ topic, status, limit }), opts); }
  async outboxMessage(id, opts) { return this._read("/v1/outbox/messages" + seg("id", id), opts); }
  async deadMessages({ topic } = {}, opts) { return this._read("/v1/outbox/dead" + query({ topic }), opts); }
  async outboxStats({ topic } = {}, opts) { return this._read("/v1/outbox/stats" + query({ topic }), opts); }
  async outboxActivity({ topic, minutes } = {}, opts) { return this._read("/v1/outbox/activity" + query({ topic, minutes }), opts); }
  async requeue(req, opts) { return this._write("POST", "/v1/outbox/requeue", req, opts); }
  /** GET /v1/inbox → InboxList: the tenant's webhook providers, their newest events and refusals (admin). */
  async inbox(opts) { return this._read("/v1/inbox", opts); }
  /** GET /v1/idempotency/records → GuardRecord: the replay guard's record of one request (admin). */
  async guardRecord({ keyId, method, path, key } = {}, opts) {
    return this._read("/v1/idempotency/records" + query({ key_id: keyId, method, path, key }), opts);
  }

  /**
   * POST /v1/webhooks/{provider}: a provider's delivery, for tests and
   * relays. body is sent byte for byte (a string); headers carry the
   * provider's signature. No API key and no Idempotency-Key: the inbox
   * dedupes on the provider's event id, so a retry is safe.
   */
  async deliverWebhook(provider, body, headers, opts = {}) {
    if (typeof body !== "string") throw invalid("a webhook body is the exact string the signature covers");
    const res = await this._send({ method: "POST", path: "/v1/webhooks" + seg("provider", provider), body, key: "", headers }, opts);
    opts.onResponse?.(res);
    return res.body;
  }

  // ---- keys, verify, health ---------------------------------------------

  async createAPIKey(req, opts) { return this._write("POST", "/v1/apikeys", req, opts); }
  async apiKeys(opts) { return this._read("/v1/apikeys", opts); }
  /** GET /v1/whoami → APIKey: the calling key's record (tenant, scopes). */
  async whoami(opts) { return this._read("/v1/whoami", opts); }
  /** DELETE /v1/apikeys/{id}?reason= (opts.reason). */
  async revokeAPIKey(id, opts = {}) { return this._write("DELETE", "/v1/apikeys" + seg("id", id) + query({ reason: opts.reason }), undefined, opts); }
  /** POST /v1/verify (writes nothing: no key). expect_heads[].seq may be string, bigint or safe integer. */
  async verify(req = {}, opts = {}) {
    const body = { ...req };
    if (body.expect_heads) body.expect_heads = body.expect_heads.map((h) => ({ ...h, seq: int64(h.seq, "expect_heads.seq") }));
    return this._write("POST", "/v1/verify", body, { ...opts, keyed: false });
  }
  async health(opts) { return this._read("/healthz", opts); }
  /** GET /readyz: resolves with {status: "ok"}; a server not ready is a 503 LedgerError (retried). */
  async ready(opts) { return this._read("/readyz", opts); }
  /**
   * GET /v1/proofs/entry → the entry proof file (docs/PROOFS.md) as its
   * exact text: Format v1's 64-bit numbers in it are not safe to parse
   * with JSON.parse, and an auditor checks the bytes.
   */
  async proveEntry(chain, seq, opts = {}) {
    const res = await this._send({ method: "GET", path: "/v1/proofs/entry" + query({ chain, seq: int64(seq, "seq") }), body: null, key: "", raw: true }, opts);
    opts.onResponse?.(res);
    return res.body;
  }
  /** GET /openapi.json: the OpenAPI 3.1 document. */
  async openapi(opts) { return this._read("/openapi.json", opts); }
}

/** inflight maps a storage to its intents' running submits, by storage key. */
const inflight = new WeakMap();

/**
 * Intent is one operation the user means to happen once (a form's
 * submission). submit() makes its Idempotency-Key before the first request
 * and stores key and encoded body until the answer is final, so that a
 * reload (a new page, a new client over the same storage) or a crash
 * resends the same request with the same key. A final answer clears it;
 * the next submit() is a new intent with a new key.
 */
export class Intent {
  constructor(client, name) {
    this.client = client;
    this.name = name;
  }

  get storageKey() {
    return this.client.storagePrefix + this.name;
  }

  /** Whether a submit or resume of this intent runs (in any client over the same storage). */
  get busy() {
    return this._inflight !== null;
  }

  // The running submit is shared by every Intent over the same storage and
  // storage key, so that two clients of one page (a component mounted
  // twice) still send one request.
  get _inflight() {
    return inflight.get(this.client.storage)?.get(this.storageKey) ?? null;
  }

  set _inflight(run) {
    let m = inflight.get(this.client.storage);
    if (!m) inflight.set(this.client.storage, (m = new Map()));
    if (run) m.set(this.storageKey, run);
    else m.delete(this.storageKey);
  }

  /**
   * pending returns the stored, unfinished request ({key, method, path,
   * body, createdMs}) or null: what a reload finds and resume() sends.
   */
  async pending() {
    const raw = await this.client.storage.getItem(this.storageKey);
    if (raw === null || raw === undefined) return null;
    try {
      const rec = JSON.parse(raw);
      if (rec && rec.v === 1 && typeof rec.key === "string" && typeof rec.method === "string" && typeof rec.path === "string") return rec;
    } catch {
      // A damaged record is no request: dropped below.
    }
    await this.client.storage.removeItem(this.storageKey);
    return null;
  }

  /**
   * submit sends the request fn describes, once: fn(c) calls one write
   * method of c (a view of the client), such as
   * `intent.submit((c) => c.purchaseReceipt(form))`. It resolves with the
   * whole answer (LedgerResponse: body, replayed, key, attempts, resumed).
   *
   * - While a submit of this intent runs, another returns the same promise
   *   (a double click sends one request).
   * - When an unfinished request is stored (a reload or a crash cut it
   *   off), that request is sent again, with its key and its exact body,
   *   and fn is not called: `resumed` is true. discard() first to give it up.
   * - Else a new key is made and stored with the encoded body before the
   *   first attempt.
   */
  submit(fn, opts = {}) {
    if (this._inflight) return this._inflight;
    const run = (async () => {
      try {
        let rec = await this.pending();
        let resumed = true;
        if (!rec) {
          resumed = false;
          rec = { v: 1, ...(await this._capture(fn)), createdMs: Date.now() };
          rec.key = opts.idempotencyKey ?? this.client.newKey();
          checkKey(rec.key);
          await this.client.storage.setItem(this.storageKey, JSON.stringify(rec));
        }
        return await this._finish(rec, resumed, opts);
      } finally {
        this._inflight = null;
      }
    })();
    this._inflight = run;
    return run;
  }

  /**
   * resume sends the stored, unfinished request again (same key, same
   * bytes) and resolves with its answer; null when nothing is stored. Call
   * it when a page loads to finish what a reload interrupted.
   */
  resume(opts = {}) {
    if (this._inflight) return this._inflight;
    const run = (async () => {
      try {
        const rec = await this.pending();
        return rec ? await this._finish(rec, true, opts) : null;
      } finally {
        this._inflight = null;
      }
    })();
    this._inflight = run;
    return run;
  }

  /** discard forgets the stored request: the next submit is a new intent. */
  async discard() {
    await this.client.storage.removeItem(this.storageKey);
  }

  /** _capture runs fn against a view of the client that records the write instead of sending it. */
  async _capture(fn) {
    let captured = null;
    const view = Object.create(this.client);
    view._write = async (method, path, body, o) => {
      if (captured) throw invalid("an intent's submit makes one request");
      if (o && o.keyed === false) throw invalid("an intent is for a state-changing request with an Idempotency-Key");
      captured = { method, path, body: body === undefined || body === null ? null : typeof body === "string" ? body : encodeJSON(body) };
      return undefined;
    };
    view._send = async () => {
      throw invalid("an intent's submit takes a write method of the client (appendEntry, purchaseReceipt, ...)");
    };
    view.intent = () => {
      throw invalid("an intent's submit makes one request");
    };
    await fn(view);
    if (!captured) throw invalid("the submit function made no write request");
    return captured;
  }

  async _finish(rec, resumed, opts) {
    try {
      const res = await this.client._send({ method: rec.method, path: rec.path, body: rec.body, key: rec.key }, opts);
      await this.discard();
      return { ...res, resumed };
    } catch (e) {
      if (e instanceof LedgerError && e.final) await this.discard();
      throw e;
    }
  }
}
