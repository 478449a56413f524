package apikey

// SetReadBatchMax sets the Authenticator's read batch for a test and
// returns the function that restores it.
func SetReadBatchMax(n int) (restore func()) {
	previous := readBatchMax
	readBatchMax = n
	return func() { readBatchMax = previous }
}
