// Package prefetch asks the processor to load memory ahead of need.
//
// A batch of lookups whose reads miss the caches (records and entries of
// a file map spread over hundreds of megabytes) names every line it will
// read before it reads the first: the misses are then in flight together
// instead of one after another. A load whose value is kept in a variable
// does the same only while the processor's window of instructions holds
// it; a prefetch leaves the window at once.
package prefetch
