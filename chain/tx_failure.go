package chain

// failed translates an error of the store, other than not-found, and records
// the first on the transaction. On a server backend a failed statement
// aborts the whole server transaction (PostgreSQL refuses every later
// statement and the commit), so the group commit treats a request that met
// one like a request that failed after writing: it rolls the group back and
// runs it again without that request. The chain package's own refusals
// (invalid input, conflicts) are decided before the store is asked and do
// not pass through here.
func (tx *Tx) failed(err error) error {
	if err == nil {
		return nil
	}
	if tx.storageFailure == nil {
		tx.storageFailure = err
	}
	return storageError(err)
}
