package reliability

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/ledgerworks/ledger/api"
	"github.com/ledgerworks/ledger/apikey"
	"github.com/ledgerworks/ledger/server"
	"github.com/ledgerworks/ledger/server/servertest"
	"github.com/ledgerworks/ledger/storage/bolt"
)

// diskServerRetries is how often the request that met the full disk is
// sent again while the disk stays full: more than the guard's three
// retries, which would poison a key whose failures counted.
const diskServerRetries = 6

// A server whose ledger's disk is full answers 503 with Retry-After, as
// often as the disk stays full, and never poisons the key: once space is
// freed the same request with the same key is written, once, and replayed.
func TestDiskFullServerNeverPoisonsAKey(t *testing.T) {
	disk := mountSmallDisk(t)
	filler := filepath.Join(disk, "filler")
	db := mustOpenDiskLedger(t, filepath.Join(disk, "ledger.db"), bolt.Options{Log: bolt.LogOff})
	token := servertest.Key(t, db, "acme", apikey.ScopeRead, apikey.ScopeWrite)
	url := servertest.Start(t, server.Options{DB: db, IdempotencyCacheSize: -1}).URL
	post := func(key string, n int) (int, string, []byte) {
		t.Helper()
		body, _ := json.Marshal(api.AppendRequest{Type: "raw/v1", Payload: diskPayload(n)})
		req, _ := http.NewRequest(http.MethodPost, url+"/v1/chains/disk/entries", bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", api.MediaJSON)
		req.Header.Set(api.HeaderIdempotencyKey, key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		answer, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header.Get("Retry-After"), answer
	}
	fillDisk(t, filler)
	full := ""
	for n := range diskAppendsMax {
		key := fmt.Sprint("fill-", n)
		status, retryAfter, answer := post(key, n)
		if status == http.StatusCreated {
			continue // free pages of the file still held it
		}
		if status != http.StatusServiceUnavailable || retryAfter == "" || !bytes.Contains(answer, []byte(api.CodeStorage)) {
			t.Fatalf("append %d on a full disk: %d Retry-After %q %s; want 503 STORAGE with Retry-After", n, status, retryAfter, answer)
		}
		full = key
		for range diskServerRetries {
			status, _, answer = post(key, n)
			if status != http.StatusServiceUnavailable && status != http.StatusCreated {
				t.Fatalf("retry of %s on the full disk: %d %s; want 503, never a poisoned key", key, status, answer)
			}
		}
		if err := os.Remove(filler); err != nil {
			t.Fatal(err)
		}
		status, _, first := post(key, n)
		if status != http.StatusCreated {
			t.Fatalf("retry of %s once space is freed: %d %s; want it written", key, status, first)
		}
		status, _, again := post(key, n)
		if status != http.StatusCreated || !bytes.Equal(again, first) {
			t.Fatalf("replay of %s: %d %s; want %s", key, status, again, first)
		}
		break
	}
	if full == "" {
		t.Fatalf("%d appends fit on a %s disk", diskAppendsMax, diskSize)
	}
	assertVerifies(t, db)
}
