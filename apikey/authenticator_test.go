package apikey_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"pgregory.net/rapid"

	"github.com/ledgerworks/ledger/apikey"
	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/chain/chaintest"
	"github.com/ledgerworks/ledger/storage/postgres"
	"github.com/ledgerworks/ledger/storage/postgres/pgtest"
)

// manualClock is a clock the test moves.
type manualClock struct{ nano atomic.Int64 }

func newManualClock() *manualClock {
	c := &manualClock{}
	c.nano.Store(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	return c
}
func (c *manualClock) Now() time.Time          { return time.Unix(0, c.nano.Load()) }
func (c *manualClock) Advance(d time.Duration) { c.nano.Add(int64(d)) }

func readScope() []apikey.Scope { return []apikey.Scope{apikey.ScopeRead} }

// Without notifications, an Authenticator sees a change once its keys are
// RevocationDelay old, and not before: the bound is the delay.
func TestRevocationDelayBoundsStaleAnswers(t *testing.T) {
	chaintest.ForEachBackend(t, testOptions, func(t *testing.T, db *chain.DB) {
		ctx := context.Background()
		clock := newManualClock()
		const delay = 2 * time.Second
		auth, err := apikey.NewAuthenticator(db, apikey.AuthOptions{RevocationDelay: delay, Now: clock.Now})
		if err != nil {
			t.Fatal(err)
		}
		auth.Close() // no notifications from here on: the delay alone bounds staleness

		_, token, err := apikey.Create(ctx, db, apikey.CreateRequest{Tenant: "acme", Scopes: readScope()})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := auth.Authenticate(ctx, token); !errors.Is(err, apikey.ErrUnauthenticated) {
			t.Fatalf("a key created after the last read, within the delay: %v", err)
		}
		clock.Advance(delay)
		key, err := auth.Authenticate(ctx, token)
		if err != nil {
			t.Fatalf("a key created a delay ago: %v", err)
		}
		if _, err := apikey.Revoke(ctx, db, key.ID, "leaked"); err != nil {
			t.Fatal(err)
		}
		clock.Advance(delay - time.Nanosecond)
		if _, err := auth.Authenticate(ctx, token); err != nil {
			t.Fatalf("within the delay the cached key still answers: %v", err)
		}
		clock.Advance(time.Nanosecond)
		if _, err := auth.Authenticate(ctx, token); !errors.Is(err, apikey.ErrUnauthenticated) {
			t.Fatalf("a key revoked a delay ago: %v", err)
		}
	})
}

// Two processes sharing a PostgreSQL ledger: a key created or revoked by
// one is seen by the other's Authenticator through NOTIFY, well before the
// delay (a minute here), and in any case within it.
func TestSharedLedgerSeesOtherProcessChanges(t *testing.T) {
	one, two := chaintest.OpenShared(t)
	ctx := context.Background()
	auth, err := apikey.NewAuthenticator(two, apikey.AuthOptions{RevocationDelay: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer auth.Close()
	key, token, err := apikey.Create(ctx, one, apikey.CreateRequest{Tenant: "acme", Scopes: readScope()})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the other process's key", func() bool { _, err := auth.Authenticate(ctx, token); return err == nil })
	if _, err := apikey.Revoke(ctx, one, key.ID, "leaked"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the other process's revocation", func() bool {
		_, err := auth.Authenticate(ctx, token)
		return errors.Is(err, apikey.ErrUnauthenticated)
	})
}

// waitFor polls cond for up to 20 s (a bound on a wait, not a timing
// assertion: the notification arrives in milliseconds).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("%s not seen in 20 s", what)
}

// Concurrent authentications while keys are created and revoked (run
// with -race): every answer is right for some moment of the run.
func TestAuthenticateConcurrently(t *testing.T) {
	chaintest.ForEachBackend(t, testOptions, func(t *testing.T, db *chain.DB) {
		ctx := context.Background()
		auth, _, stable := newKeyed(t, db)
		var wg sync.WaitGroup
		stop := make(chan struct{})
		for range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					select {
					case <-stop:
						return
					default:
					}
					if _, err := auth.Authenticate(ctx, stable); err != nil {
						t.Errorf("a valid key: %v", err)
						return
					}
				}
			}()
		}
		for i := range 6 {
			key, token, err := apikey.Create(ctx, db, apikey.CreateRequest{Tenant: "acme", Name: fmt.Sprint(i), Scopes: readScope()})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := auth.Authenticate(ctx, token); err != nil {
				t.Fatalf("a key just created: %v", err)
			}
			if _, err := apikey.Revoke(ctx, db, key.ID, ""); err != nil {
				t.Fatal(err)
			}
			if _, err := auth.Authenticate(ctx, token); !errors.Is(err, apikey.ErrUnauthenticated) {
				t.Fatalf("a key just revoked: %v", err)
			}
		}
		close(stop)
		wg.Wait()
	})
}

// An entry of the system chain edited in the store: verify reports it, and
// an Authenticator refuses to trust the keys (ErrSystemChain), whether the
// edit keeps the stored hash or recomputes it as a forger would.
func TestEditedSystemEntryIsCaught(t *testing.T) {
	for _, s := range stores(t) {
		for _, forge := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/rehashed=%v", s.name, forge), func(t *testing.T) {
				l := s.fresh(t)
				db, err := l.open()
				if err != nil {
					t.Fatal(err)
				}
				ctx := context.Background()
				for _, tenant := range []string{"acme", "globex"} {
					if _, _, err := apikey.Create(ctx, db, apikey.CreateRequest{Tenant: tenant, Scopes: readScope()}); err != nil {
						t.Fatal(err)
					}
				}
				first, err := db.Get(ctx, apikey.SystemChain, 1)
				if err != nil {
					t.Fatal(err)
				}
				db.Close()

				// The attacker's edit: another digest in the first key's creation.
				first.Payload[len(first.Payload)-1] ^= 1
				if forge {
					first.Hash = first.ComputeHash()
				}
				l.edit(t, first)

				if db, err = l.open(); err != nil {
					t.Fatal(err)
				}
				defer db.Close()
				report, err := db.Verify(ctx, chain.VerifyOptions{})
				if err != nil || report.OK() {
					t.Fatalf("verify of an edited entry: %v %v", report.Failures, err)
				}
				if _, err := apikey.NewAuthenticator(db, apikey.AuthOptions{}); !errors.Is(err, apikey.ErrSystemChain) || !errors.Is(err, chain.ErrCorrupt) {
					t.Fatalf("Authenticator on an edited chain: %v", err)
				}
			})
		}
	}
}

// Damaged derived state (a changed, longer, deleted or stray key) is found
// by Check and repaired by Rebuild; the Authenticator, which answers from
// the chain, is not misled by it meanwhile.
func TestDamagedStateIsFoundAndRebuilt(t *testing.T) {
	for _, s := range stores(t) {
		t.Run(s.name, func(t *testing.T) {
			checks := 15
			if s.name != "bolt" {
				checks = 5
			}
			rapidCheck(t, checks, func(rt *rapid.T) {
				db, err := s.fresh(t).open()
				if err != nil {
					rt.Fatal(err)
				}
				defer db.Close()
				ctx := context.Background()
				var tokens []string
				for i, tenant := range []string{"acme", "acme", "globex"} {
					key, token, err := apikey.Create(ctx, db, apikey.CreateRequest{Tenant: tenant, Name: fmt.Sprint(i), Scopes: readScope()})
					if err != nil {
						rt.Fatal(err)
					}
					tokens = append(tokens, token)
					if i == 1 {
						if _, err := apikey.Revoke(ctx, db, key.ID, "x"); err != nil {
							rt.Fatal(err)
						}
					}
				}
				before := chaintest.TakeSnapshot(t, db).State
				how := chaintest.CorruptState(rt, db, "apikey/", "apikey/k/ghost")
				failures, err := apikey.Check(ctx, db)
				if err != nil || len(failures) == 0 {
					rt.Fatalf("check after %s: %v %v", how, failures, err)
				}
				auth, err := apikey.NewAuthenticator(db, apikey.AuthOptions{})
				if err != nil {
					rt.Fatal(err)
				}
				defer auth.Close()
				for i, token := range tokens {
					if _, err := auth.Authenticate(ctx, token); (err == nil) != (i != 1) {
						rt.Fatalf("after %s, token %d: %v", how, i, err)
					}
				}
				stats, err := apikey.Rebuild(ctx, db)
				if err != nil || len(stats.Failures) > 0 || stats.Entries != 4 {
					rt.Fatalf("rebuild: %+v %v", stats, err)
				}
				if failures, err := apikey.Check(ctx, db); err != nil || len(failures) > 0 {
					rt.Fatalf("check after rebuild: %v %v", failures, err)
				}
				after := chaintest.TakeSnapshot(t, db).State
				for k, v := range before {
					if after[k] != v {
						rt.Fatalf("rebuild left %q = %x, want %x", k, after[k], v)
					}
				}
				if len(after) != len(before) {
					rt.Fatalf("rebuild left %d state keys, want %d", len(after), len(before))
				}
			})
		})
	}
}

// Refused requests write nothing.
func TestBadInputWritesNothing(t *testing.T) {
	chaintest.ForEachBackend(t, testOptions, func(t *testing.T, db *chain.DB) {
		ctx := context.Background()
		key, _, err := apikey.Create(ctx, db, apikey.CreateRequest{Tenant: "acme", Scopes: readScope()})
		if err != nil {
			t.Fatal(err)
		}
		before := chaintest.TakeSnapshot(t, db)
		long := func(n int) string { return string(make([]byte, n)) }
		for _, c := range []struct {
			name string
			r    apikey.CreateRequest
			want error
		}{
			{"no tenant", apikey.CreateRequest{Scopes: readScope()}, apikey.ErrInvalidTenant},
			{"reserved tenant", apikey.CreateRequest{Tenant: apikey.SystemTenant, Scopes: readScope()}, apikey.ErrInvalidTenant},
			{"tenant with /", apikey.CreateRequest{Tenant: "a/b", Scopes: readScope()}, apikey.ErrInvalidTenant},
			{"tenant ..", apikey.CreateRequest{Tenant: "..", Scopes: readScope()}, apikey.ErrInvalidTenant},
			{"tenant too long", apikey.CreateRequest{Tenant: string(make([]rune, apikey.TenantLengthMax+1)), Scopes: readScope()}, apikey.ErrInvalidTenant},
			{"bidi control in tenant", apikey.CreateRequest{Tenant: "ac\u202eme", Scopes: readScope()}, apikey.ErrInvalidTenant},
			{"name too long", apikey.CreateRequest{Tenant: "acme", Name: "n" + long(apikey.NameLengthMax), Scopes: readScope()}, apikey.ErrInvalidName},
			{"name not UTF-8", apikey.CreateRequest{Tenant: "acme", Name: "\xff", Scopes: readScope()}, apikey.ErrInvalidName},
			{"no scope", apikey.CreateRequest{Tenant: "acme"}, apikey.ErrInvalidScope},
			{"unknown scope", apikey.CreateRequest{Tenant: "acme", Scopes: []apikey.Scope{"owner"}}, apikey.ErrInvalidScope},
			{"scope twice", apikey.CreateRequest{Tenant: "acme", Scopes: []apikey.Scope{"read", "read"}}, apikey.ErrInvalidScope},
		} {
			if _, _, err := apikey.Create(ctx, db, c.r); !errors.Is(err, c.want) || !errors.Is(err, chain.ErrInvalid) {
				t.Errorf("%s: %v, want %v", c.name, err, c.want)
			}
		}
		for _, c := range []struct {
			name, id, reason string
			want             error
		}{
			{"short id", "0123", "", apikey.ErrInvalidID},
			{"uppercase id", "0123456789ABCDEF", "", apikey.ErrInvalidID},
			{"unknown id", "ffffffffffffffff", "", apikey.ErrUnknownKey},
			{"reason too long", key.ID, long(apikey.ReasonLengthMax + 1), apikey.ErrInvalidReason},
			{"reason with a control character", key.ID, "a\nb", apikey.ErrInvalidReason},
		} {
			if _, err := apikey.Revoke(ctx, db, c.id, c.reason); !errors.Is(err, c.want) {
				t.Errorf("%s: %v, want %v", c.name, err, c.want)
			}
		}
		if _, err := apikey.RevokeIn(ctx, db, apikey.RevokeRequest{Tenant: "globex", ID: key.ID}); !errors.Is(err, apikey.ErrUnknownKey) {
			t.Errorf("revoke of another tenant's key: %v", err)
		}
		if _, err := apikey.List(ctx, db, "_system"); !errors.Is(err, apikey.ErrInvalidTenant) {
			t.Errorf("list of a reserved tenant: %v", err)
		}
		after := chaintest.TakeSnapshot(t, db)
		if fmt.Sprint(after) != fmt.Sprint(before) {
			t.Fatal("a refused request wrote to the ledger")
		}
	})
}

// The ledger holds KeysMax keys at most; the count is checked on entry.
func TestKeysMax(t *testing.T) {
	chaintest.ForEachBackend(t, testOptions, func(t *testing.T, db *chain.DB) {
		ctx := context.Background()
		err := db.Update(ctx, func(tx *chain.Tx) error {
			return tx.StatePut([]byte("apikey/n"), binary.BigEndian.AppendUint64(nil, apikey.KeysMax))
		})
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := apikey.Create(ctx, db, apikey.CreateRequest{Tenant: "acme", Scopes: readScope()}); !errors.Is(err, apikey.ErrTooManyKeys) {
			t.Fatalf("create beyond KeysMax: %v", err)
		}
		if _, err := db.Head(ctx, apikey.SystemChain); !errors.Is(err, chain.ErrNotFound) {
			t.Fatalf("the refused creation wrote: %v", err)
		}
	})
}

func TestAuthOptionsBounds(t *testing.T) {
	db, err := chain.Open(t.TempDir()+"/ledger.db", chain.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, d := range []time.Duration{-time.Second, apikey.RevocationDelayMin - 1, apikey.RevocationDelayMax + 1} {
		if _, err := apikey.NewAuthenticator(db, apikey.AuthOptions{RevocationDelay: d}); err == nil {
			t.Errorf("RevocationDelay %v accepted", d)
		}
	}
}

// A system chain longer than a read batch is read in batches, in order.
func TestReadInBatches(t *testing.T) {
	defer apikey.SetReadBatchMax(3)()
	chaintest.ForEachBackend(t, testOptions, func(t *testing.T, db *chain.DB) {
		ctx := context.Background()
		var tokens []string
		for i := range 10 {
			key, token, err := apikey.Create(ctx, db, apikey.CreateRequest{Tenant: "acme", Name: fmt.Sprint(i), Scopes: readScope()})
			if err != nil {
				t.Fatal(err)
			}
			tokens = append(tokens, token)
			if i%4 == 0 {
				if _, err := apikey.Revoke(ctx, db, key.ID, ""); err != nil {
					t.Fatal(err)
				}
			}
		}
		auth, err := apikey.NewAuthenticator(db, apikey.AuthOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer auth.Close()
		for i, token := range tokens {
			if _, err := auth.Authenticate(ctx, token); (err == nil) != (i%4 != 0) {
				t.Fatalf("key %d: %v", i, err)
			}
		}
	})
}

// Two processes sharing a PostgreSQL ledger create keys and revoke the
// same keys at once: the system chain serializes them (a revocation locks
// its head and reads the record it replaces), so every key is created
// once, revoked once, both revokers get the one revocation, and the state
// equals the chain.
func TestSharedLedgerConcurrentChanges(t *testing.T) {
	one, two := chaintest.OpenShared(t)
	ctx := context.Background()
	const perProcess = 8
	ids := make(chan string, 2*perProcess)
	var wg sync.WaitGroup
	for _, db := range []*chain.DB{one, two} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perProcess {
				var key apikey.Key
				err := chaintest.RetryRolledBack(func() error {
					var err error
					key, _, err = apikey.Create(ctx, db, apikey.CreateRequest{Tenant: "acme", Name: fmt.Sprint(i), Scopes: readScope()})
					return err
				})
				if err != nil {
					t.Error(err)
					return
				}
				ids <- key.ID
			}
		}()
	}
	wg.Wait()
	close(ids)
	if t.Failed() {
		return
	}
	for id := range ids {
		var got [2]apikey.Key
		var revokers sync.WaitGroup
		for i, db := range []*chain.DB{one, two} {
			revokers.Add(1)
			go func() {
				defer revokers.Done()
				err := chaintest.RetryRolledBack(func() error {
					var err error
					got[i], err = apikey.Revoke(ctx, db, id, "both")
					return err
				})
				if err != nil {
					t.Error(err)
				}
			}()
		}
		revokers.Wait()
		if got[0].RevokedUnixNano == 0 || got[0].RevokedUnixNano != got[1].RevokedUnixNano {
			t.Fatalf("two revokers of %s got %d and %d", id, got[0].RevokedUnixNano, got[1].RevokedUnixNano)
		}
	}
	head, err := one.Head(ctx, apikey.SystemChain)
	if err != nil || head.Seq != 4*perProcess {
		t.Fatalf("system chain head %+v %v, want %d entries", head, err, 4*perProcess)
	}
	keys, err := apikey.List(ctx, two, "acme")
	if err != nil || len(keys) != 2*perProcess {
		t.Fatalf("list: %d keys, %v", len(keys), err)
	}
	if failures, err := apikey.Check(ctx, one); err != nil || len(failures) > 0 {
		t.Fatalf("check: %v %v", failures, err)
	}
}

// A revocation cut from the end of the system chain (its row deleted and
// the head set back, as an attacker with the database's password could)
// is not seen by verify without a saved head; a running Authenticator
// refuses the head that went back instead of taking the key for valid.
func TestHeadGoingBackIsRefused(t *testing.T) {
	if !pgtest.Available(t) {
		return
	}
	url := pgtest.URL(t)
	schema := pgtest.NewSchema(t, url)
	ctx := context.Background()
	b, err := postgres.Open(ctx, url, postgres.Options{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	db, err := chain.OpenBackend(b, chain.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	clock := newManualClock()
	auth, err := apikey.NewAuthenticator(db, apikey.AuthOptions{Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	defer auth.Close()
	key, token, err := apikey.Create(ctx, db, apikey.CreateRequest{Tenant: "acme", Scopes: readScope()})
	if err != nil {
		t.Fatal(err)
	}
	created, err := db.Head(ctx, apikey.SystemChain)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := apikey.Revoke(ctx, db, key.ID, "leaked"); err != nil {
		t.Fatal(err)
	}
	revoked, err := db.Head(ctx, apikey.SystemChain)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := auth.Authenticate(ctx, token); !errors.Is(err, apikey.ErrUnauthenticated) {
		t.Fatalf("revoked key: %v", err)
	}

	conn, err := pgtest.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	for _, sql := range []string{
		"DELETE FROM " + pgx.Identifier{schema, "entries"}.Sanitize() + " WHERE chain_id = $1 AND seq = $2",
		"UPDATE " + pgx.Identifier{schema, "chains"}.Sanitize() + " SET head_seq = $2 - 1, head_hash = $3, head_time = $4 WHERE chain_id = $1",
	} {
		args := []any{apikey.SystemChain, int64(created.Seq + 1)}
		if strings.HasPrefix(sql, "UPDATE") {
			args = append(args, created.Hash[:], created.TimeUnixNano)
		}
		if _, err := conn.Exec(ctx, sql, args...); err != nil {
			t.Fatal(err)
		}
	}
	clock.Advance(apikey.RevocationDelayDefault)
	if _, err := auth.Authenticate(ctx, token); !errors.Is(err, apikey.ErrSystemChain) {
		t.Fatalf("after the revocation was cut: %v", err)
	}
	report, err := db.Verify(ctx, chain.VerifyOptions{ExpectHeads: []chain.Head{revoked}})
	if err != nil || report.OK() {
		t.Fatalf("verify against the saved head: %v %v", report.Failures, err)
	}
	plain, err := db.Verify(ctx, chain.VerifyOptions{})
	t.Logf("verify without a saved head: %d failures %v", len(plain.Failures), err)
}
