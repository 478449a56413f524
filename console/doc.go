// Package console is the browser console of ledgerctl serve, for operators
// and auditors: chains and their entries, verify, the outbox, API keys and
// two ERP forms, over the server's own API through the JavaScript client
// (clients/js). Its pages are plain ES modules, HTML and CSS embedded in
// the binary; nothing is fetched from elsewhere and there is no build step.
//
// Handler serves them under Prefix with a strict Content-Security-Policy:
// every script and style comes from the server's origin, none is inline,
// and the pages render every value as text.
package console
