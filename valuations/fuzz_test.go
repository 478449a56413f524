package valuations

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/ledgerworks/ledger/chain"
)

// Every decoder of persisted bytes is strict and canonical: whatever it
// accepts re-encodes to exactly the input, and it never panics. Seed corpora
// live in testdata/fuzz/<FuzzName>/ (regenerate with
// VALUATIONS_WRITE_SEEDS=1 go test -run TestWriteFuzzSeeds).

func FuzzDecodeItem(f *testing.F) {
	f.Add(encodeItem(item(FIFO)))
	f.Add([]byte(`{"tenant":"t","item":"i","method":"fifo","quantityScale":0,"currency":"EUR","minorUnit":2,"negativeStock":"allow"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		it, err := decodeItem(data)
		if err != nil {
			return
		}
		if again := encodeItem(it); !bytes.Equal(again, data) {
			t.Fatalf("accepted %q, re-encodes as %q", data, again)
		}
	})
}

func FuzzDecodeQuantity(f *testing.F) {
	f.Add([]byte(`{"request":{"kind":"issue","tenant":"t","item":"i","location":"l","operation":"o","quantity":"1.5"},"quantityChange":"-1.5","quantityAfter":"0.0"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		d, err := decodeQuantity(data)
		if err != nil {
			return
		}
		if again := mustMarshal(d.payload); !bytes.Equal(again, data) {
			t.Fatalf("accepted %q, re-encodes as %q", data, again)
		}
		if p(d.after, d.scale) != d.payload.QuantityAfter {
			t.Fatalf("quantity after %q decodes to %d", d.payload.QuantityAfter, d.after)
		}
	})
}

func FuzzDecodeValue(f *testing.F) {
	f.Add([]byte(`{"request":{"kind":"receipt","tenant":"t","item":"i","location":"l","operation":"o","quantity":"2","value":"3.00"},"method":"fifo","effect":{"kind":"inflow","quantity":"2","value":"3.00","layer":9223372036854775808},"valueChange":"3.00","quantityAfter":"2","valueAfter":"3.00","rateAfter":"1.50000000000"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		d, err := decodeValue(data)
		if err != nil {
			return
		}
		if again := mustMarshal(d.payload); !bytes.Equal(again, data) {
			t.Fatalf("accepted %q, re-encodes as %q", data, again)
		}
		if d.scales.formatValue(d.value) != d.payload.ValueAfter || d.scales.formatValue(d.change) != d.payload.ValueChange {
			t.Fatalf("amounts of %q do not round-trip", data)
		}
		// Re-applying a decoded effect never panics, whatever it holds.
		store := &memoryLayers{}
		applyEffect(newPosition(), d.method, d.scales, store, d.effect, d.payload.Request.Operation, true)
	})
}

func FuzzDecodePosition(f *testing.F) {
	p := newPosition()
	f.Add(encodePosition(&p))
	p = position{Quantity: -3, Value: -3300, Rate: 11 * 1e11, RateKnown: true, QuantitySeq: 7, ValueSeq: 8,
		LayerLow: layerOrigin - 1, LayerHigh: layerOrigin + 4, Pending: []pending{{Operation: "i1", Quantity: 3, Estimate: 3300}}}
	f.Add(encodePosition(&p))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := decodePosition(data)
		if err != nil {
			return
		}
		if again := encodePosition(&p); !bytes.Equal(again, data) {
			t.Fatalf("accepted %x, re-encodes as %x", data, again)
		}
	})
}

// TestWriteFuzzSeeds writes the seed corpora from payloads of real
// operations (the vectors' ledgers). It only runs when asked to.
func TestWriteFuzzSeeds(t *testing.T) {
	if os.Getenv("VALUATIONS_WRITE_SEEDS") == "" {
		t.Skip("set VALUATIONS_WRITE_SEEDS=1 to regenerate testdata/fuzz")
	}
	paths, _ := filepath.Glob(filepath.Join("..", "testdata", "valuations", "*.json"))
	seeds := map[string][][]byte{}
	for i, path := range paths {
		db, err := chain.Open(filepath.Join(t.TempDir(), "seeds.db"), chain.Options{Clock: testClock()})
		if err != nil {
			t.Fatal(err)
		}
		var v vector
		data, _ := os.ReadFile(path)
		if err := decodeStrictTest(data, &v); err != nil {
			t.Fatal(err)
		}
		t.Run(strconv.Itoa(i), func(t *testing.T) { runVector(t, db, v) })
		for h, err := range db.Chains(context.Background(), "") {
			if err != nil {
				t.Fatal(err)
			}
			for e, err := range db.Entries(context.Background(), h.Chain, 1) {
				if err != nil {
					t.Fatal(err)
				}
				name := map[string]string{TypeItem: "FuzzDecodeItem", TypeQuantity: "FuzzDecodeQuantity", TypeValue: "FuzzDecodeValue"}[e.Type]
				seeds[name] = append(seeds[name], e.Payload)
			}
		}
		db.View(context.Background(), func(tx *chain.Tx) error {
			prefix := []byte(statePrefix + "acme/pos/")
			for kv, err := range tx.StateScan(prefix, prefixEnd(prefix), false) {
				if err == nil {
					seeds["FuzzDecodePosition"] = append(seeds["FuzzDecodePosition"], append([]byte(nil), kv.Value...))
				}
			}
			return nil
		})
		db.Close()
	}
	for name, list := range seeds {
		dir := filepath.Join("testdata", "fuzz", name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		seen := map[string]bool{}
		for _, data := range list {
			if seen[string(data)] || len(seen) >= 40 {
				continue
			}
			seen[string(data)] = true
			body := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", data)
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("seed-%02d", len(seen))), []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// FuzzDecodeLayer: a FIFO layer is its key (prefix and 8-byte id) and a
// 16-byte value; an accepted record is rebuilt exactly by layerKey and
// encodeLayer, and a refusal is chain.ErrCorrupt.
func FuzzDecodeLayer(f *testing.F) {
	prefix := layerPrefix("acme", "SKU-1", "WH-1")
	f.Add(layerKey(prefix, layerOrigin), encodeLayer(layer{Quantity: 10, Value: 10000}))
	f.Add(layerKey(prefix, 1), encodeLayer(layer{Quantity: -1, Value: -9223372036854775808}))
	f.Add(prefix, []byte{1, 2})
	f.Fuzz(func(t *testing.T, key, value []byte) {
		if !bytes.HasPrefix(key, prefix) {
			key = append(append([]byte(nil), prefix...), key...)
		}
		l, err := decodeLayer(prefix, key, value)
		if err != nil {
			if !errors.Is(err, chain.ErrCorrupt) {
				t.Fatalf("untyped refusal: %v", err)
			}
			return
		}
		if again := layerKey(prefix, l.ID); !bytes.Equal(again, key) {
			t.Fatalf("key %x rebuilds as %x", key, again)
		}
		if again := encodeLayer(l); !bytes.Equal(again, value) {
			t.Fatalf("value %x re-encodes as %x", value, again)
		}
	})
}

// FuzzParseCanonical: every amount in a payload has one spelling, the
// String of its value at the field's scale.
func FuzzParseCanonical(f *testing.F) {
	for _, seed := range []struct {
		text  string
		scale uint8
	}{{"10.00", 2}, {"-0.001", 3}, {"0", 0}, {"1.0", 2}, {"+1", 0}, {"-0", 0}, {"9223372036854775807", 0}} {
		f.Add(seed.text, seed.scale)
	}
	f.Fuzz(func(t *testing.T, text string, scale uint8) {
		units, err := parseCanonical("amount", text, scale)
		if err != nil {
			if !errors.Is(err, ErrInvalidPayload) {
				t.Fatalf("untyped refusal: %v", err)
			}
			return
		}
		if again := (scales{quantity: scale}).formatQuantity(units); again != text {
			t.Fatalf("%q at scale %d reads %d units, which print as %q", text, scale, units, again)
		}
	})
}

// FuzzParseMethod: the names a definition accepts; String of the result
// parses back to it.
func FuzzParseMethod(f *testing.F) {
	for _, s := range []string{"moving_average", "ma", "fifo", "FIFO", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		m, err := ParseMethod(text)
		if err != nil {
			if !errors.Is(err, ErrInvalidItem) || !errors.Is(err, chain.ErrInvalid) {
				t.Fatalf("untyped refusal: %v", err)
			}
			return
		}
		if again, err := ParseMethod(m.String()); err != nil || again != m {
			t.Fatalf("%q parsed as %v, whose name parses as %v, %v", text, m, again, err)
		}
	})
}
