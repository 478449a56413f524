package api

// AppendRequest is the body of POST /v1/chains/{name}/entries.
type AppendRequest struct {
	Type    string `json:"type"`
	Payload []byte `json:"payload"` // standard base64
}

// AppendResponse is the answer (201) of an append.
type AppendResponse struct {
	Chain        string `json:"chain"`
	Seq          uint64 `json:"seq,string"`
	Hash         string `json:"hash"` // 64 lowercase hex digits
	TimeUnixNano int64  `json:"time_unix_nano,string"`
}

// Entry is one entry of a chain (GET …/entries/{seq}, …/entries).
type Entry struct {
	Chain          string `json:"chain"`
	Seq            uint64 `json:"seq,string"`
	TimeUnixNano   int64  `json:"time_unix_nano,string"`
	Time           string `json:"time"` // RFC 3339, UTC
	IdempotencyKey string `json:"idempotency_key"`
	Type           string `json:"type"`
	Payload        []byte `json:"payload"`
	PrevHash       string `json:"prev_hash"`
	Hash           string `json:"hash"`
}

// EntryPage is GET /v1/chains/{name}/entries?from=&limit=.
type EntryPage struct {
	Chain   string  `json:"chain"`
	Entries []Entry `json:"entries"`
	// NextSeq is the from of the next page; 0 when there is no more.
	NextSeq uint64 `json:"next_seq,string"`
}

// Head is GET /v1/chains/{name}/head: the newest entry of a chain (seq 0
// and the chain's genesis hash for an empty one).
type Head struct {
	Chain        string `json:"chain"`
	Seq          uint64 `json:"seq,string"`
	Hash         string `json:"hash"`
	TimeUnixNano int64  `json:"time_unix_nano,string"`
}

// ChainList is GET /v1/chains?prefix=&from_name=&limit=: the heads of the
// tenant's chains whose names start with the prefix, in byte order of
// their names.
type ChainList struct {
	Chains []Head `json:"chains"`
	// NextFromName is the from_name of the next page; "" when there is no
	// more.
	NextFromName string `json:"next_from_name,omitempty"`
}
