// The tests' real parts: a ledgerctl serve started as a child process on
// 127.0.0.1, a fault-injecting proxy in front of it, a webhook receiver
// for the outbox, and a file-backed intent storage that survives a process.

import { execFileSync, spawn } from "node:child_process";
import { createHmac } from "node:crypto";
import { existsSync, mkdtempSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import http from "node:http";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
export const repoRoot = path.resolve(here, "../../..");

/**
 * ledgerctl returns the executable: LEDGER_BIN when set (the Go test that
 * runs these builds it once), else one built with `go build -o` into dir.
 */
export function ledgerctl(dir) {
  if (process.env.LEDGER_BIN) return process.env.LEDGER_BIN;
  const bin = path.join(dir, "ledgerctl");
  execFileSync("go", ["build", "-o", bin, "./cmd/ledgerctl"], { cwd: repoRoot, stdio: ["ignore", "inherit", "inherit"] });
  return bin;
}

export const webhookSecret = "s3cret";
export const deliverySecret = "whsec_MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=";

/**
 * startServer initialises a ledger in a temporary directory, creates an
 * admin key of tenant acme through the CLI, and starts serve on a free
 * port with a GitHub-style provider "hooks" and a delivery of topic
 * "deliveries" to receiverURL. It returns {url, token, stop, dir, bin}.
 */
export async function startServer({ receiverURL }) {
  const dir = mkdtempSync(path.join(tmpdir(), "ledger-js-"));
  const bin = ledgerctl(dir);
  const db = path.join(dir, "ledger.db");
  const run = (...args) => execFileSync(bin, ["--db", db, ...args], { encoding: "utf8" });
  run("init");
  const key = JSON.parse(run("-o", "json", "apikey", "create", "--tenant", "acme", "--scopes", "read,write,admin", "--name", "js-test"));
  const config = path.join(dir, "serve.json");
  writeFileSync(config, JSON.stringify({
    providers: [{ name: "hooks", kind: "github", tenant: "acme", secrets: [webhookSecret] }],
    deliveries: [{ tenant: "acme", topic: "deliveries", url: receiverURL, secret: deliverySecret, max_attempts: 1, timeout: "5s", allow_private_addresses: true }],
  }));
  const child = spawn(bin, ["--db", db, "serve", "--addr", "127.0.0.1:0", "--config", config], { stdio: ["ignore", "pipe", "pipe"] });
  let stderr = "";
  child.stderr.on("data", (d) => { stderr = (stderr + d).slice(-8192); });
  const url = await new Promise((resolve, reject) => {
    let out = "";
    const fail = (why) => reject(new Error(`serve did not start (${why}): ${stderr}`));
    child.on("exit", (code) => fail(`exit ${code}`));
    child.stdout.on("data", (d) => {
      out += d;
      const m = /listening on (http:\/\/\S+)/.exec(out);
      if (m) resolve(m[1]);
    });
    setTimeout(() => fail("timeout"), 60000).unref();
  });
  const stop = async () => {
    if (child.exitCode === null) {
      const exited = new Promise((r) => child.once("exit", r));
      child.kill("SIGTERM");
      await exited;
    }
    rmSync(dir, { recursive: true, force: true });
  };
  return { url, token: key.token, stop, dir, bin, db };
}

/** githubSignature is X-Hub-Signature-256 of body under the provider's secret. */
export function githubSignature(body) {
  return "sha256=" + createHmac("sha256", webhookSecret).update(body).digest("hex");
}

/**
 * Proxy forwards to target and records every request. A queued fault
 * applies to the next request that matches its filter:
 *   {status, code, retryAfter}  answer a problem instead of forwarding
 *   {..., retryAfterDateMs}     with Retry-After an HTTP date that many ms ahead
 *   {drop: true}                close the connection without an answer, nothing forwarded
 *   {dropAfter: true}           forward, let the server answer, then close without passing it on
 *   {holdMs}                    forward after holdMs
 */
export class Proxy {
  constructor(target) {
    this.target = new URL(target);
    this.requests = [];
    this.faults = [];
    this.server = http.createServer((req, res) => this.handle(req, res));
  }

  async start() {
    await new Promise((r) => this.server.listen(0, "127.0.0.1", r));
    this.url = `http://127.0.0.1:${this.server.address().port}`;
    return this;
  }

  stop() {
    this.server.closeAllConnections();
    return new Promise((r) => this.server.close(r));
  }

  /** fault queues f for the next request whose path includes f.path (every request when absent). */
  fault(f) {
    this.faults.push(f);
  }

  /** requests whose path includes part, in order. */
  seen(part, method) {
    return this.requests.filter((r) => r.path.includes(part) && (!method || r.method === method));
  }

  async handle(req, res) {
    const chunks = [];
    for await (const c of req) chunks.push(c);
    const body = Buffer.concat(chunks);
    const rec = { method: req.method, path: req.url, key: req.headers["idempotency-key"] ?? "", body: body.toString("utf8"), atMs: Date.now() };
    this.requests.push(rec);
    const i = this.faults.findIndex((f) => !f.path || req.url.includes(f.path));
    const f = i >= 0 ? this.faults.splice(i, 1)[0] : null;
    rec.fault = f;
    if (f?.drop) {
      req.socket.destroy();
      return;
    }
    if (f?.status) {
      const headers = { "Content-Type": "application/problem+json" };
      if (f.retryAfter !== undefined) headers["Retry-After"] = String(f.retryAfter);
      if (f.retryAfterDateMs !== undefined) headers["Retry-After"] = new Date(Date.now() + f.retryAfterDateMs).toUTCString();
      res.writeHead(f.status, headers);
      res.end(JSON.stringify({ type: "urn:ledgerworks:problem:" + f.code, title: "injected", status: f.status, code: f.code, detail: "injected by the test" }));
      return;
    }
    if (f?.holdMs) await new Promise((r) => setTimeout(r, f.holdMs));
    const headers = { ...req.headers, host: this.target.host };
    delete headers["content-length"];
    const up = http.request({ host: this.target.hostname, port: this.target.port, method: req.method, path: req.url,
      headers: { ...headers, "content-length": body.length } }, (upRes) => {
      const parts = [];
      upRes.on("data", (c) => parts.push(c));
      upRes.on("end", () => {
        rec.status = upRes.statusCode;
        rec.answer = Buffer.concat(parts).toString("utf8");
        if (f?.dropAfter) {
          req.socket.destroy();
          return;
        }
        res.writeHead(upRes.statusCode, upRes.headers);
        res.end(Buffer.concat(parts));
      });
    });
    up.on("error", () => req.socket.destroy());
    up.end(body);
  }
}

/** Receiver is the outbox's webhook endpoint: it answers each delivery with the next status of a script (200 after it). */
export class Receiver {
  constructor() {
    this.script = [];
    this.deliveries = [];
    this.server = http.createServer(async (req, res) => {
      const chunks = [];
      for await (const c of req) chunks.push(c);
      const status = this.script.length ? this.script.shift() : 200;
      this.deliveries.push({ key: req.headers["idempotency-key"], body: Buffer.concat(chunks).toString("utf8"), status });
      res.writeHead(status);
      res.end();
    });
  }

  async start() {
    await new Promise((r) => this.server.listen(0, "127.0.0.1", r));
    this.url = `http://127.0.0.1:${this.server.address().port}/hook`;
    return this;
  }

  stop() {
    this.server.closeAllConnections();
    return new Promise((r) => this.server.close(r));
  }
}

/** fileStorage is an intent storage in a JSON file, written by rename: it survives the process. */
export function fileStorage(file) {
  const read = () => (existsSync(file) ? JSON.parse(readFileSync(file, "utf8")) : {});
  const write = (m) => {
    writeFileSync(file + ".tmp", JSON.stringify(m));
    renameSync(file + ".tmp", file);
  };
  return {
    getItem: (k) => read()[k] ?? null,
    setItem: (k, v) => write({ ...read(), [k]: String(v) }),
    removeItem: (k) => {
      const m = read();
      delete m[k];
      write(m);
    },
  };
}

/** eventually polls fn until it returns a truthy value, up to ms. */
export async function eventually(fn, ms = 20000) {
  const end = Date.now() + ms;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > end) throw new Error("condition not met in time");
    await new Promise((r) => setTimeout(r, 50));
  }
}
