package bolt

// SetSyncHook makes every later fdatasync of the backend's log call fn
// first and fail with its error, if any (nil: sync normally again).
func SetSyncHook(b *Backend, fn func() error) { b.log.SetSyncHook(fn) }
