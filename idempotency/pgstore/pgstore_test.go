package pgstore_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ledgerworks/ledger/idempotency"
	"github.com/ledgerworks/ledger/idempotency/idempotencytest"
	"github.com/ledgerworks/ledger/idempotency/pgstore"
	"github.com/ledgerworks/ledger/storage/postgres/pgtest"
)

func TestMain(m *testing.M) {
	flag.Parse()
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "rapid.checks" })
	if !set {
		flag.Set("rapid.checks", "20") // every check creates a schema
	}
	os.Exit(m.Run())
}

// open returns a store on a fresh schema, migrated, dropped after the test.
func open(t *testing.T) *pgstore.Store {
	t.Helper()
	url := pgtest.URL(t)
	schema := pgtest.NewSchema(t, url)
	ctx := context.Background()
	if _, err := pgstore.Open(ctx, url, pgstore.Options{Schema: schema}); err != pgstore.ErrSchema {
		t.Fatalf("Open of an unmigrated schema: %v, want ErrSchema", err)
	}
	if err := pgstore.Migrate(ctx, url, schema); err != nil {
		t.Fatal(err)
	}
	if err := pgstore.Migrate(ctx, url, schema); err != nil {
		t.Fatalf("second Migrate: %v", err)
	}
	s, err := pgstore.Open(ctx, url, pgstore.Options{Schema: schema, MaxConns: 8})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

func harness() idempotencytest.Harness {
	return idempotencytest.Harness{
		Open: func(t *testing.T) idempotency.Store { return open(t) },
		Unreachable: func(t *testing.T) idempotency.Store {
			pool, err := pgxpool.New(context.Background(), "postgres://nobody:x@127.0.0.1:1/none?connect_timeout=1")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(pool.Close)
			return pgstore.New(pool, "ledger")
		},
	}
}

func TestPostgresStore(t *testing.T) { idempotencytest.Run(t, harness()) }

// TestPostgresStoreOnCallersPool runs the suite on New's store, which
// claims each key in a transaction of its own on the caller's pool.
func TestPostgresStoreOnCallersPool(t *testing.T) {
	h := harness()
	h.Open = func(t *testing.T) idempotency.Store {
		url := pgtest.URL(t)
		schema := pgtest.NewSchema(t, url)
		pool, err := pgxpool.New(context.Background(), url)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pool.Close)
		if err := pgstore.MigratePool(context.Background(), pool, schema); err != nil {
			t.Fatal(err)
		}
		s := pgstore.New(pool, schema)
		t.Cleanup(s.Close)
		return s
	}
	idempotencytest.Run(t, h)
}

func TestPostgresStoreMachine(t *testing.T) { idempotencytest.StateMachine(t, harness()) }

func TestPostgresStoreLeaseMachine(t *testing.T) { idempotencytest.LeaseMachine(t, harness()) }

// TestPostgresCreateRaceAcrossProcesses starts several processes that
// create one scope at the same moment: exactly one gets CREATED.
func TestPostgresCreateRaceAcrossProcesses(t *testing.T) {
	if os.Getenv("PGSTORE_RACE_SCHEMA") != "" {
		raceChild(t)
		return
	}
	url := pgtest.URL(t)
	schema := pgtest.NewSchema(t, url)
	if err := pgstore.Migrate(context.Background(), url, schema); err != nil {
		t.Fatal(err)
	}
	const procs = 6
	for round := range 3 {
		start := time.Now().Add(1500 * time.Millisecond)
		outs := make([]string, procs)
		var wg sync.WaitGroup
		for i := range procs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				cmd := exec.Command(os.Args[0], "-test.run=^TestPostgresCreateRaceAcrossProcesses$")
				cmd.Env = append(os.Environ(), "PGSTORE_RACE_SCHEMA="+schema, fmt.Sprintf("PGSTORE_RACE_KEY=race-%d", round),
					fmt.Sprintf("PGSTORE_RACE_START=%d", start.UnixNano()), fmt.Sprintf("PGSTORE_RACE_TOKEN=p%d", i))
				out, err := cmd.CombinedOutput()
				if err != nil {
					t.Errorf("child %d: %v\n%s", i, err, out)
				}
				outs[i] = string(out)
			}()
		}
		wg.Wait()
		created := 0
		for _, o := range outs {
			created += strings.Count(o, "RESULT CREATED")
			if !strings.Contains(o, "RESULT ") {
				t.Fatalf("a child printed no result: %s", o)
			}
		}
		if created != 1 {
			t.Fatalf("round %d: %d processes got CREATED, want exactly 1:\n%s", round, created, strings.Join(outs, "\n"))
		}
	}
}

func raceChild(t *testing.T) {
	ctx := context.Background()
	s, err := pgstore.Open(ctx, os.Getenv(pgtest.EnvURL), pgstore.Options{Schema: os.Getenv("PGSTORE_RACE_SCHEMA"), MaxConns: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.List(ctx, idempotency.Scope{}, "", 1, time.Now()); err != nil { // connect before the start
		t.Fatal(err)
	}
	var startNs int64
	fmt.Sscan(os.Getenv("PGSTORE_RACE_START"), &startNs)
	time.Sleep(time.Until(time.Unix(0, startNs)))
	now := time.Now()
	res, err := s.Create(ctx, idempotency.Claim{
		Scope:       idempotency.Scope{Operation: "POST /payments", User: "alice", Key: os.Getenv("PGSTORE_RACE_KEY")},
		RequestHash: [32]byte{1}, Token: os.Getenv("PGSTORE_RACE_TOKEN"), Now: now,
		LeaseExpiresAt: now.Add(time.Minute), ExpiresAt: now.Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if res.Created {
		fmt.Println("RESULT CREATED")
	} else {
		fmt.Println("RESULT DUPLICATE", res.Record.Token)
	}
}
