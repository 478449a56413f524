package ratelimit

import "errors"

// ErrInvalidOptions is matched by New's refusal of options out of bounds.
var ErrInvalidOptions = errors.New("ratelimit: invalid options")
