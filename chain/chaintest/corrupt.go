package chaintest

import (
	"bytes"
	"context"
	"fmt"

	"pgregory.net/rapid"

	"github.com/ledgerworks/ledger/chain"
)

// CorruptState damages the state under prefix in one of the ways a domain
// package's Rebuild repairs, drawn by t, and says how: a stray key (an
// existing key with a byte more), a changed value, a longer value, a
// deleted key, or every key under prefix deleted. When prefix holds no key,
// it writes the stray key ghost.
func CorruptState(t *rapid.T, db *chain.DB, prefix, ghost string) string {
	ctx := context.Background()
	var keys [][]byte
	err := db.View(ctx, func(tx *chain.Tx) error {
		for kv, err := range tx.StateScan([]byte(prefix), prefixEnd([]byte(prefix)), false) {
			if err != nil {
				return err
			}
			keys = append(keys, bytes.Clone(kv.Key))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	how := rapid.SampledFrom([]string{"stray", "value", "longer", "delete", "wipe"}).Draw(t, "corruption")
	if len(keys) == 0 {
		how = "stray"
		keys = [][]byte{[]byte(ghost)}
	}
	key := keys[rapid.IntRange(0, len(keys)-1).Draw(t, "key")]
	err = db.Update(ctx, func(tx *chain.Tx) error {
		switch how {
		case "stray":
			return tx.StatePut(append(bytes.Clone(key), 'x'), []byte{1})
		case "value", "longer":
			v, err := tx.StateGet(key)
			if err != nil {
				return err
			}
			v = bytes.Clone(v)
			if how == "longer" || len(v) == 0 {
				v = append(v, 0)
			} else {
				v[len(v)-1] ^= 1
			}
			return tx.StatePut(key, v)
		case "delete":
			return tx.StateDelete(key)
		}
		_, err := tx.StateDeleteRange([]byte(prefix), prefixEnd([]byte(prefix)))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%s %q", how, key)
}

// prefixEnd is the first key after every key that starts with prefix (nil
// when there is none: a prefix of 0xff bytes only).
func prefixEnd(prefix []byte) []byte {
	end := bytes.Clone(prefix)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] < 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}
