// Type declarations of ledger.js, the JavaScript client of `ledgerctl serve`.

/** A 64-bit integer as the API writes it: a JSON string of decimal digits. Use BigInt(v) for arithmetic. */
export type Int64 = string;
/** A 64-bit integer argument: a string of digits, a bigint, or a number that is a safe integer. */
export type Int64Input = string | bigint | number;
/** A decimal amount, quantity, rate or unit cost: a string at its item's or currency's scale ("12.50"). */
export type Decimal = string;

export const VERSION: string;
export const KEY_SIZE_MAX: 255;

export const ErrorCode: Readonly<{
  NETWORK_ERROR: "NETWORK_ERROR";
  UNEXPECTED_RESPONSE: "UNEXPECTED_RESPONSE";
  ABORTED: "ABORTED";
  TIMEOUT: "TIMEOUT";
  INVALID_ARGUMENT: "INVALID_ARGUMENT";
}>;

/** The server's problem codes (docs/SERVER.md) and the client's own. */
export type ProblemCode =
  | "INVALID_INPUT" | "KEY_REQUIRED" | "KEY_INVALID" | "NO_EVENT_ID" | "UNAUTHENTICATED" | "BAD_SIGNATURE"
  | "FORBIDDEN" | "NOT_FOUND" | "METHOD_NOT_ALLOWED" | "IDEMPOTENCY_CONFLICT" | "KEY_REUSED_WITH_DIFFERENT_REQUEST"
  | "REQUEST_IN_PROGRESS" | "REQUEST_FAILED" | "EVENT_ID_REUSED" | "NOT_DEAD" | "PAYLOAD_TOO_LARGE"
  | "UNSUPPORTED_MEDIA_TYPE" | "RATE_LIMITED" | "STORAGE" | "CORRUPT" | "INCOMPLETE_OPERATION"
  | "STORE_UNAVAILABLE" | "UNAVAILABLE" | "LOCKED" | "CANCELED" | "TREE_BEHIND"
  | "NETWORK_ERROR" | "UNEXPECTED_RESPONSE" | "ABORTED" | "TIMEOUT" | "INVALID_ARGUMENT";

/** Every failure of a call. Branch on `code`, never on `title` or `detail`. */
export class LedgerError extends Error {
  name: "LedgerError";
  /** HTTP status; 0 when no answer came (network, abort, timeout, invalid argument). */
  status: number;
  code: ProblemCode | string;
  type: string;
  title: string;
  detail: string;
  /** The problem's other members, as sent (existing_seq is an Int64 string). */
  extra: Record<string, unknown>;
  /** Retry-After in milliseconds (seconds or an HTTP date, read from the answer); 0 when absent. */
  retryAfterMs: number;
  /** Retry-After in whole seconds (rounded up); 0 when absent. */
  retryAfter: number;
  /** Whether the same request may succeed if sent again with the same key. */
  retryable: boolean;
  method: string;
  path: string;
  /** The Idempotency-Key sent; "" for a read. */
  key: string;
  attempts: number;
  /** X-Request-Id of the last answer. */
  requestId: string;
  /** A server answer no retry can change: not retryable, and an answer came (status > 0). */
  readonly final: boolean;
}

/** Web Storage's three methods (sessionStorage fits); they may return promises. */
export interface IntentStorage {
  getItem(key: string): string | null | Promise<string | null>;
  setItem(key: string, value: string): void | Promise<void>;
  removeItem(key: string): void | Promise<void>;
}

export interface RetryEvent {
  /** The attempt that failed (from 1). */
  attempt: number;
  error: LedgerError;
  waitMs: number;
  key: string;
}

export interface ClientOptions {
  /** http(s)://host:port, optionally with a path prefix; in a browser the page's origin when left out. */
  baseURL?: string;
  /** The API key, sent as Authorization: Bearer <token>; none when empty. */
  token?: string;
  /** Attempts of one call, the first included (default 6; 1 never retries; at most 1,000). */
  maxAttempts?: number;
  /** The first retry's backoff ceiling, doubled each retry (default 100). */
  backoffBaseMs?: number;
  /** The cap of the ceiling (default 5,000). */
  backoffMaxMs?: number;
  /** A longer Retry-After ends the call with its error, still retryable (default 30,000). */
  retryAfterMaxMs?: number;
  /** Bounds one attempt; a timed-out attempt is a NETWORK_ERROR, retried (default 0: none). */
  attemptTimeoutMs?: number;
  /** Bounds a whole call, retries included; ends it with TIMEOUT (default 0: none). */
  timeoutMs?: number;
  /** Called before each wait. */
  onRetry?: (e: RetryEvent) => void;
  /** Makes each key; must never repeat (default newKey: a random UUID v4). */
  newKey?: () => string;
  /** The fetch to use (default globalThis.fetch). */
  fetch?: typeof fetch;
  /** Where intents are kept (default sessionStorage in a browser, else memoryStorage()). */
  storage?: IntentStorage;
  /** Prefix of the intents' storage keys (default "ledger.intent."). */
  storagePrefix?: string;
  /** Headers sent on every request. */
  headers?: Record<string, string>;
  /** The jitter's source of [0, 1) (default Math.random). */
  random?: () => number;
}

export interface CallOptions {
  signal?: AbortSignal;
  /** This call's bound instead of ClientOptions.timeoutMs. */
  timeoutMs?: number;
  attemptTimeoutMs?: number;
  maxAttempts?: number;
  /** Send this key instead of a fresh one (a key stored with the caller's own intent). */
  idempotencyKey?: string;
  /** Learn the answer's metadata (status, replayed, key, attempts, requestId). */
  onResponse?: (res: LedgerResponse<unknown>) => void;
}

export interface RequestOptions extends CallOptions {
  /** Whether to send an Idempotency-Key (default: for every method but GET and HEAD). */
  keyed?: boolean;
  headers?: Record<string, string>;
  contentType?: string;
  /** Return the body as text, not parsed JSON. */
  raw?: boolean;
}

export interface LedgerResponse<T> {
  status: number;
  body: T;
  /** Idempotent-Replayed: true: the first attempt's answer, replayed by the server's guard. */
  replayed: boolean;
  /** The Idempotency-Key sent; "" for a read. */
  key: string;
  attempts: number;
  requestId: string;
}

export interface IntentResponse<T> extends LedgerResponse<T> {
  /** The request sent was the stored one a reload or a crash had cut off, not the submit's. */
  resumed: boolean;
}

export interface PendingIntent {
  v: 1;
  key: string;
  method: string;
  path: string;
  /** The encoded body, sent byte for byte on every attempt; null for none. */
  body: string | null;
  createdMs: number;
}

/**
 * One operation the user means to happen once. Its key is made and stored
 * (with the encoded body) before the first request and kept until the
 * answer is final: a success, or a LedgerError whose `final` is true.
 */
export class Intent {
  readonly client: LedgerClient;
  readonly name: string;
  readonly storageKey: string;
  /** A submit or resume of this intent runs (in any client over the same storage). */
  readonly busy: boolean;
  /** The stored, unfinished request, or null. */
  pending(): Promise<PendingIntent | null>;
  /**
   * fn calls one write method of its argument; the call is recorded, stored
   * with a new key, and sent. A concurrent submit returns the same promise;
   * a stored unfinished request is resumed instead of fn's (resumed: true).
   */
  submit<T>(fn: (c: LedgerClient) => Promise<T>, opts?: CallOptions): Promise<IntentResponse<T>>;
  /** Sends the stored unfinished request again; null when none is stored. */
  resume<T = unknown>(opts?: CallOptions): Promise<IntentResponse<T> | null>;
  /** Forgets the stored request: the next submit is a new intent. */
  discard(): Promise<void>;
}

// ---- the API's bodies (the api package's types) ----------------------------

export interface AppendRequest { type: string; /** bytes, or their standard base64 */ payload: Uint8Array | string }
export interface AppendResponse { chain: string; seq: Int64; hash: string; time_unix_nano: Int64 }
export interface Entry {
  chain: string; seq: Int64; time_unix_nano: Int64; /** RFC 3339, UTC */ time: string; idempotency_key: string;
  type: string; /** standard base64 */ payload: string; prev_hash: string; hash: string;
}
export interface EntryPage { chain: string; entries: Entry[]; /** "0" when there is no more */ next_seq: Int64 }
export interface Head { chain: string; seq: Int64; hash: string; time_unix_nano: Int64 }
export interface ChainList { chains: Head[]; /** absent when there is no more */ next_from_name?: string }

export interface StockItemRequest { id: string; name?: string; scale: number; allow_negative: boolean }
export interface StockItem { tenant: string; id: string; name: string; scale: number; allow_negative: boolean; seq: Int64; unchanged: boolean }
export interface StockItemList { items: StockItem[] }
export interface StockLocationRequest { id: string; name?: string }
export interface StockLocation { tenant: string; id: string; name: string; seq: Int64; unchanged: boolean }
export interface StockLocationList { locations: StockLocation[] }
export interface StockMovementRequest { item: string; location: string; quantity: Decimal; reference?: string; note?: string }
export interface StockAdjustmentRequest { item: string; location: string; quantity: Decimal; reason: string; reference?: string; note?: string }
export interface StockTransferRequest { item: string; from: string; to: string; quantity: Decimal; reference?: string; note?: string }
export interface StockReversalRequest { chain: string; seq: Int64Input; reference?: string; note?: string }
export interface StockEntry {
  tenant: string; item: string; location: string; chain: string; seq: Int64; time_unix_nano: Int64;
  idempotency_key: string; kind: string; quantity: Decimal; balance: Decimal; reference?: string; note?: string;
  reason?: string; counterpart?: string; original_chain?: string; original_seq?: Int64;
}
export interface StockResult { replayed: boolean; entries: StockEntry[] }
export interface StockBalance { tenant: string; item: string; location: string; quantity: Decimal; seq: Int64; time_unix_nano: Int64 }
export interface StockTotal { tenant: string; item: string; total: Decimal; balances: StockBalance[] }
export interface StockHistory { chain: string; entries: StockEntry[]; next_seq: Int64 }

export interface FinAccountRequest { code: string; name: string; type: string; normal_side?: string }
export interface FinAccount {
  tenant: string; book: string; code: string; name: string; type: string; normal_side: string; closed: boolean;
  defined_seq: Int64; closed_seq?: Int64; seq?: Int64; replayed: boolean;
}
export interface FinAccountList { accounts: FinAccount[] }
export interface FinCurrencyRequest { code: string; exponent: number }
export interface FinCurrency { tenant: string; book: string; code: string; exponent: number; defined_seq: Int64; replayed: boolean }
export interface FinCurrencyList { currencies: FinCurrency[] }
export interface PostingLine { account: string; side: "debit" | "credit"; amount: Decimal; currency: string }
export interface FinPostingRequest { date: string; memo?: string; reference?: string; lines: PostingLine[] }
export interface FinReversalRequest { seq?: Int64Input; key?: string; date?: string; memo?: string }
export interface FinPosting {
  tenant: string; book: string; journal: string; seq: Int64; time_unix_nano: Int64; hash: string; key?: string;
  date: string; memo: string; reference: string; reverses?: Int64; lines: PostingLine[]; replayed: boolean;
}
export interface FinBalance {
  tenant: string; book: string; account: string; currency: string; amount: Decimal; normal: Decimal;
  normal_side: string; postings: Int64; seq: Int64; date?: string;
}
export interface FinBalanceList { balances: FinBalance[] }
export interface CurrencyTotal { currency: string; debit: Decimal; credit: Decimal; net: Decimal }
export interface FinTrialBalance { tenant: string; book: string; seq: Int64; rows: FinBalance[]; totals: CurrencyTotal[] }

export interface ValItemRequest {
  id: string; method: "moving_average" | "fifo"; quantity_scale: number; currency: string; minor_unit: number; allow_negative: boolean;
}
export interface ValItem {
  tenant: string; id: string; method: string; quantity_scale: number; currency: string; minor_unit: number;
  allow_negative: boolean; seq?: Int64; unchanged?: boolean;
}
export interface ValItemList { items: ValItem[] }
export interface ValReceiptRequest { item: string; location: string; quantity: Decimal; unit_cost?: Decimal; value?: Decimal }
export interface ValIssueRequest { item: string; location: string; quantity: Decimal; estimate_rate?: Decimal }
export interface ValAdjustmentRequest { item: string; location: string; amount?: Decimal; unit_cost?: Decimal }
export interface ValTransferRequest { item: string; from: string; to: string; quantity: Decimal; estimate_rate?: Decimal }
export interface ValReversalRequest { item: string; location: string; reverses: string }
export interface ValSettlement { operation: string; quantity: Decimal; estimated: Decimal; actual: Decimal; correction: Decimal }
export interface ValLeg {
  location: string; quantity_chain: string; quantity_seq: Int64; value_chain: string; value_seq: Int64;
  quantity_change: Decimal; value_change: Decimal; quantity: Decimal; value: Decimal; rate?: Decimal; settlements?: ValSettlement[];
}
export interface ValResult { tenant: string; item: string; operation: string; replayed: boolean; legs: ValLeg[] }
export interface ValPending { operation: string; quantity: Decimal; estimate: Decimal }
export interface ValBalance {
  tenant: string; item: string; location: string; method: string; quantity: Decimal; value: Decimal; rate?: Decimal;
  quantity_seq: Int64; value_seq: Int64; pending?: ValPending[];
}
export interface ValBalanceList { balances: ValBalance[] }
export interface ValLayer { number: Int64; id: Int64; quantity: Decimal; value: Decimal }
export interface ValLayerList { layers: ValLayer[] }

export interface PurchaseReceiptRequest {
  item: string; location: string; quantity: Decimal; unit_cost: Decimal; date: string; book?: string;
  inventory_account: string; credit_account: string; reference?: string; topic?: string;
}
export interface SalesIssueRequest {
  item: string; location: string; quantity: Decimal; date: string; book?: string;
  cost_account: string; inventory_account: string; reference?: string; topic?: string;
}
export interface OutboxMessage {
  id: string; key: string; topic: string; idempotency_key: string; ordering_key?: string;
  status: "pending" | "leased" | "done" | "dead" | string; attempts: number; due_unix_nano: Int64; worker?: string;
  token?: Int64; enqueued_unix_nano: Int64; seq: Int64; headers?: Record<string, string>; payload?: string;
}
export interface BusinessEvent { operation: string; stock: StockResult; valuation: ValResult; posting: FinPosting; message: OutboxMessage }
export interface OutboxMessageList { messages: OutboxMessage[] }
export interface OutboxRequeueRequest { ids: string[]; reason?: string }
export interface OutboxRequeueResponse { requeued: string[]; operator: string }
export interface OutboxBlockedKey { ordering_key: string; message: string; status: string; attempts: number; behind: Int64 }
export interface OutboxTopic {
  topic: string; enqueued: Int64; pending: Int64; waiting: Int64; leased: Int64; done: Int64; dead: Int64;
  oldest_pending_unix_nano?: Int64; deliveries_entries: Int64; blocked_keys: OutboxBlockedKey[];
}
export interface OutboxStats { topics: OutboxTopic[] }
export interface OutboxEvent {
  seq: Int64; time_unix_nano: Int64; type: string; worker?: string; attempt?: number; token?: Int64;
  deadline_unix_nano?: Int64; outcome?: string; next_attempt_unix_nano?: Int64; duration_nano?: Int64;
  dead_reason?: string; detail?: string;
}
export interface OutboxMessageHistory { message: OutboxMessage; history: OutboxEvent[] }
export interface WebhookReceipt { status: "received" | "duplicate"; provider: string; event_id: string; chain: string; seq: Int64 }
export interface OutboxBucket { start_unix_nano: Int64; delivered: Int64; failed: Int64; rejected: Int64 }
export interface OutboxTopicActivity { topic: string; bucket_seconds: Int64; /** oldest first */ buckets: OutboxBucket[]; truncated?: boolean }
export interface OutboxActivity { topics: OutboxTopicActivity[] }
export interface InboxEvent { seq: Int64; event_id: string; time_unix_nano: Int64; body_digest: string; body_size: Int64 }
export interface InboxProvider {
  name: string; kind: string; topic?: string; chain: string; events: Int64; last_event_unix_nano?: Int64;
  /** refusals counted by this server since it started */ duplicates: Int64; event_id_reused: Int64; bad_signatures: Int64;
  /** newest first */ recent: InboxEvent[];
}
export interface InboxList { providers: InboxProvider[] }
export interface GuardResponse { status: number; headers?: Record<string, string>; body: string; body_withheld?: boolean }
export interface GuardRecord {
  operation: string; key_id: string; key: string; status: "PROCESSING" | "SUCCESS" | "FAILED"; attempt: number; request_hash: string;
  created_unix_nano: Int64; updated_unix_nano: Int64; lease_expires_unix_nano?: Int64; expires_unix_nano?: Int64;
  failure?: string; response?: GuardResponse;
}

export interface APIKeyRequest { name: string; scopes: Array<"read" | "write" | "admin"> }
export interface APIKey { id: string; tenant: string; name: string; scopes: string[]; created_unix_nano: Int64; revoked_unix_nano?: Int64 }
export interface APIKeyCreated { key: APIKey; /** shown in this answer only */ token: string }
export interface APIKeyList { keys: APIKey[] }
export interface VerifyHead { chain: string; seq: Int64Input; hash: string }
export interface VerifyRequest { chains?: string[]; trees?: boolean; expect_heads?: VerifyHead[] }
export interface VerifyFailure { chain: string; seq: Int64; reason: string; detail: string; expected?: string; calculated?: string }
export interface VerifyReport { ok: boolean; chains: Int64; entries: Int64; failures: VerifyFailure[]; truncated: boolean }
export interface Health { status: "ok" | "not_ready" | string; detail?: string }

// ---- the client ------------------------------------------------------------

export class LedgerClient {
  constructor(options: ClientOptions);
  readonly baseURL: string;
  /** The intent of this name (one object a name and client). */
  intent(name: string): Intent;
  /** Any route: the whole answer. body is JSON-encoded once (bigints as strings) unless a string. */
  request<T = unknown>(method: string, path: string, body?: unknown, opts?: RequestOptions): Promise<LedgerResponse<T>>;

  appendEntry(chain: string, req: AppendRequest, opts?: CallOptions): Promise<AppendResponse>;
  entry(chain: string, seq: Int64Input, opts?: CallOptions): Promise<Entry>;
  entries(chain: string, page?: { from?: Int64Input; limit?: number }, opts?: CallOptions): Promise<EntryPage>;
  head(chain: string, opts?: CallOptions): Promise<Head>;
  chains(page?: { prefix?: string; fromName?: string; limit?: number }, opts?: CallOptions): Promise<ChainList>;

  defineStockItem(req: StockItemRequest, opts?: CallOptions): Promise<StockItem>;
  stockItems(opts?: CallOptions): Promise<StockItemList>;
  defineStockLocation(req: StockLocationRequest, opts?: CallOptions): Promise<StockLocation>;
  stockLocations(opts?: CallOptions): Promise<StockLocationList>;
  stockReceipt(req: StockMovementRequest, opts?: CallOptions): Promise<StockResult>;
  stockIssue(req: StockMovementRequest, opts?: CallOptions): Promise<StockResult>;
  stockAdjustment(req: StockAdjustmentRequest, opts?: CallOptions): Promise<StockResult>;
  stockTransfer(req: StockTransferRequest, opts?: CallOptions): Promise<StockResult>;
  stockReversal(req: StockReversalRequest, opts?: CallOptions): Promise<StockResult>;
  stockTotal(item: string, opts?: CallOptions): Promise<StockTotal>;
  stockBalance(item: string, location: string, at?: { atSeq?: Int64Input; atTime?: string }, opts?: CallOptions): Promise<StockBalance>;
  stockHistory(item: string, location: string, page?: { from?: Int64Input; limit?: number }, opts?: CallOptions): Promise<StockHistory>;

  defineAccount(book: string, req: FinAccountRequest, opts?: CallOptions): Promise<FinAccount>;
  closeAccount(book: string, code: string, opts?: CallOptions): Promise<FinAccount>;
  accounts(book: string, opts?: CallOptions): Promise<FinAccountList>;
  defineCurrency(book: string, req: FinCurrencyRequest, opts?: CallOptions): Promise<FinCurrency>;
  currencies(book: string, opts?: CallOptions): Promise<FinCurrencyList>;
  post(book: string, req: FinPostingRequest, opts?: CallOptions): Promise<FinPosting>;
  posting(book: string, seq: Int64Input, opts?: CallOptions): Promise<FinPosting>;
  postingByKey(book: string, key: string, opts?: CallOptions): Promise<FinPosting>;
  reversePosting(book: string, req: FinReversalRequest, opts?: CallOptions): Promise<FinPosting>;
  accountBalances(book: string, account: string, opts?: CallOptions): Promise<FinBalanceList>;
  accountBalance(book: string, account: string, currency: string, at?: { atSeq?: Int64Input; asOf?: string }, opts?: CallOptions): Promise<FinBalance>;
  trialBalance(book: string, opts?: CallOptions): Promise<FinTrialBalance>;

  defineValItem(req: ValItemRequest, opts?: CallOptions): Promise<ValItem>;
  valItems(opts?: CallOptions): Promise<ValItemList>;
  valReceipt(req: ValReceiptRequest, opts?: CallOptions): Promise<ValResult>;
  valIssue(req: ValIssueRequest, opts?: CallOptions): Promise<ValResult>;
  valAdjustment(req: ValAdjustmentRequest, opts?: CallOptions): Promise<ValResult>;
  valTransfer(req: ValTransferRequest, opts?: CallOptions): Promise<ValResult>;
  valReversal(req: ValReversalRequest, opts?: CallOptions): Promise<ValResult>;
  valBalances(item: string, opts?: CallOptions): Promise<ValBalanceList>;
  valBalance(item: string, location: string, at?: { atSeq?: Int64Input }, opts?: CallOptions): Promise<ValBalanceList>;
  valLayers(item: string, location: string, page?: { limit?: number }, opts?: CallOptions): Promise<ValLayerList>;

  purchaseReceipt(req: PurchaseReceiptRequest, opts?: CallOptions): Promise<BusinessEvent>;
  salesIssue(req: SalesIssueRequest, opts?: CallOptions): Promise<BusinessEvent>;

  outboxMessages(filter?: { topic?: string; status?: string; limit?: number }, opts?: CallOptions): Promise<OutboxMessageList>;
  outboxMessage(id: string, opts?: CallOptions): Promise<OutboxMessageHistory>;
  deadMessages(filter?: { topic?: string }, opts?: CallOptions): Promise<OutboxMessageList>;
  outboxStats(filter?: { topic?: string }, opts?: CallOptions): Promise<OutboxStats>;
  outboxActivity(q?: { topic?: string; minutes?: number }, opts?: CallOptions): Promise<OutboxActivity>;
  requeue(req: OutboxRequeueRequest, opts?: CallOptions): Promise<OutboxRequeueResponse>;
  inbox(opts?: CallOptions): Promise<InboxList>;
  guardRecord(q: { keyId: string; method: "POST" | "DELETE"; path: string; key: string }, opts?: CallOptions): Promise<GuardRecord>;
  deliverWebhook(provider: string, body: string, headers: Record<string, string>, opts?: CallOptions): Promise<WebhookReceipt>;

  createAPIKey(req: APIKeyRequest, opts?: CallOptions): Promise<APIKeyCreated>;
  apiKeys(opts?: CallOptions): Promise<APIKeyList>;
  whoami(opts?: CallOptions): Promise<APIKey>;
  revokeAPIKey(id: string, opts?: CallOptions & { reason?: string }): Promise<APIKey>;
  verify(req?: VerifyRequest, opts?: CallOptions): Promise<VerifyReport>;
  health(opts?: CallOptions): Promise<Health>;
  ready(opts?: CallOptions): Promise<Health>;
  /** the entry proof file's exact text (parse it with a 64-bit safe parser) */
  proveEntry(chain: string, seq: Int64Input, opts?: CallOptions): Promise<string>;
  openapi(opts?: CallOptions): Promise<Record<string, unknown>>;
}

/** Whether an answer is worth the same request again: 409/425 REQUEST_IN_PROGRESS, 429, 502, 503, 504. */
export function retryableStatus(status: number, code: string): boolean;
/** Retry-After (seconds or an HTTP date) in milliseconds from nowMs; 0 when absent, malformed or past. */
export function parseRetryAfter(value: string | null | undefined, nowMs?: number): number;
/** The backoff ceiling before retry n (from 1). */
export function backoffCeilingMs(n: number, baseMs: number, maxMs: number): number;
/** A random UUID v4. */
export function newKey(): string;
/** A 64-bit integer argument in its wire form; throws INVALID_ARGUMENT for an unsafe number. */
export function int64(v: Int64Input, name?: string): Int64;
/** JSON.stringify with bigints written as decimal strings. */
export function encodeJSON(value: unknown): string;
export function toBase64(data: Uint8Array | string): string;
export function fromBase64(b64: string): Uint8Array;
/** A Storage in this process's memory. */
export function memoryStorage(): IntentStorage;
