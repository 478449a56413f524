// Package jsclient holds the JavaScript client of ledgerctl serve
// (ledger.js, an ES module, and its TypeScript declarations ledger.d.ts),
// embedded so that the server can serve the very bytes this directory
// publishes, with no build step.
package jsclient

import _ "embed"

// Module is ledger.js, the ES module (Content-Type text/javascript).
//
//go:embed ledger.js
var Module []byte

// Declarations is ledger.d.ts, the module's TypeScript declarations.
//
//go:embed ledger.d.ts
var Declarations []byte

// Version is the module's version, package.json's.
const Version = "0.1.0"
