// Package readpool keeps idle bbolt read transactions for the next reader
// of a file that changes only when a checkpoint commits (the backend with
// its write-ahead log on): a Pool hands a transaction out (Take) and takes
// it back (Give) only while it reads the file's last commit and no bbolt
// write transaction runs (BeginWrite, EndWrite), and Close empties it for
// good before the file closes.
package readpool
