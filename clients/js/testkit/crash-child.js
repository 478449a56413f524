// A process that submits one intent and is killed mid-request by the test
// (client.test.js): its storage file is what survives it.
import { LedgerClient } from "../ledger.js";
import { fileStorage } from "./harness.js";

const [baseURL, token, file, reference] = process.argv.slice(2);
const client = new LedgerClient({ baseURL, token, storage: fileStorage(file), maxAttempts: 1 });
const intent = client.intent("crash-receipt");
intent.submit((c) => c.stockReceipt({ item: "SKU-1", location: "WH-1", quantity: "3", reference })).then(
  () => process.exit(0),
  (e) => {
    console.error(String(e));
    process.exit(1);
  },
);
