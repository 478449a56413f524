package ratelimit

import "errors"

// ErrInvalidOptions is matched by New's refusal of options out of bounds.
var ErrInvalidOptions = errors.New("ratelimit: invalid options")

// errStoreAnswers is a Store's Take that answered for another number of
// buckets than it was given.
var errStoreAnswers = errors.New("ratelimit: the store answered for another number of buckets")
