package main

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/idempotency"
	"github.com/ledgerworks/ledger/idempotency/pgstore"
)

func init() { registerCommand(newIdempotencyCommand) }

// idempotencyListMax bounds `idempotency list --limit`.
const idempotencyListMax = 10_000

// idempotencyListJSON is idempotency list -o json: one object, its list
// under a named field, as every list of the command line.
type idempotencyListJSON struct {
	Records []idempotencyRecordJSON `json:"records"`
}

// idempotencyRecordJSON is the shape of a record in `idempotency list` and
// `show -o json`.
type idempotencyRecordJSON struct {
	Operation      string    `json:"operation"`
	User           string    `json:"user"`
	Key            string    `json:"key"`
	Status         string    `json:"status"`
	Attempt        int       `json:"attempt"`
	RequestHash    string    `json:"request_hash"`
	CreatedAt      time.Time `json:"created_at"`
	UpdatedAt      time.Time `json:"updated_at"`
	LeaseExpiresAt time.Time `json:"lease_expires_at"`
	ExpiresAt      time.Time `json:"expires_at"`
	ResponseStatus int       `json:"response_status,omitempty"`
	ResponseBody   *string   `json:"response_body,omitempty"`
	Failure        string    `json:"failure,omitempty"`
}

func newIdempotencyRecordJSON(r idempotency.Record, withBody bool) idempotencyRecordJSON {
	j := idempotencyRecordJSON{Operation: r.Operation, User: r.User, Key: r.Key, Status: string(r.Status), Attempt: r.Attempt,
		RequestHash: hex.EncodeToString(r.RequestHash[:]), CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt,
		LeaseExpiresAt: r.LeaseExpiresAt, ExpiresAt: r.ExpiresAt, Failure: r.Failure}
	if r.Response != nil {
		j.ResponseStatus = r.Response.Status
		if withBody {
			b := string(r.Response.Body)
			j.ResponseBody = &b
		}
	}
	return j
}

// withIdempotencyStore opens the ledger's idempotency store (the ledger
// store of a file, the PostgreSQL store of a database) and runs fn with it.
func (a *app) withIdempotencyStore(cmd *cobra.Command, readOnly bool, fn func(ctx context.Context, s idempotency.Store) error) error {
	name := a.databaseName()
	ctx := cmd.Context()
	if isDatabaseURL(name) {
		s, err := pgstore.Open(ctx, name, pgstore.Options{MaxConns: 2})
		if err != nil {
			return fmt.Errorf("idempotency store of %s: %w", redactURL(name), err)
		}
		defer s.Close()
		return fn(ctx, s)
	}
	return a.withDB(cmd, readOnly, func(ctx context.Context, db *chain.DB) error {
		s, err := idempotency.NewLedgerStore(db)
		if err != nil {
			return err
		}
		return fn(ctx, s)
	})
}

func newIdempotencyCommand(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "idempotency",
		Short: "Inspect and maintain the HTTP replay guard's records (list, show, recover, cleanup)",
		Long: "idempotency works on the records of the HTTP replay guard (package idempotency): in the ledger\n" +
			"file's own state for a file, in idempotency_records for PostgreSQL (created by `ledgerctl migrate`).\n" +
			"On a file, PROCESSING records live in the memory of the server holding the file, so list and\n" +
			"recover see only finished records there.",
	}
	cmd.AddCommand(newIdempotencyListCommand(a), newIdempotencyShowCommand(a),
		newIdempotencyRecoverCommand(a), newIdempotencyCleanupCommand(a))
	return cmd
}

func newIdempotencyListCommand(a *app) *cobra.Command {
	var status string
	var limit int
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List live records in scope order (operation, user, key)",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			st := idempotency.Status(status)
			if st != "" && st != idempotency.StatusProcessing && st != idempotency.StatusSuccess && st != idempotency.StatusFailed {
				return usageErrorf("--status must be PROCESSING, SUCCESS or FAILED, not %q", status)
			}
			if limit <= 0 || limit > idempotencyListMax {
				return usageErrorf("--limit must be 1..%d", idempotencyListMax)
			}
			return a.withIdempotencyStore(cmd, true, func(ctx context.Context, s idempotency.Store) error {
				recs, err := s.List(ctx, idempotency.Scope{}, st, limit, time.Now())
				if err != nil {
					return err
				}
				out := idempotencyListJSON{Records: make([]idempotencyRecordJSON, 0, len(recs))}
				for _, r := range recs {
					out.Records = append(out.Records, newIdempotencyRecordJSON(r, false))
				}
				return a.print(cmd, out, func(w io.Writer) error {
					for _, r := range out.Records {
						if _, err := fmt.Fprintf(w, "%-10s attempt %d  %s  user %s  key %s  expires %s\n", r.Status, r.Attempt,
							r.Operation, r.User, r.Key, r.ExpiresAt.UTC().Format(time.RFC3339)); err != nil {
							return err
						}
					}
					return nil
				})
			})
		},
	}
	cmd.Flags().StringVar(&status, "status", "", "only records with this status (PROCESSING, SUCCESS, FAILED)")
	cmd.Flags().IntVar(&limit, "limit", 100, "the most records to list")
	return cmd
}

func newIdempotencyShowCommand(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "show OPERATION USER KEY",
		Short: "Show one record, with its stored response",
		Args:  exactArgs(3),
		RunE: func(cmd *cobra.Command, args []string) error {
			scope := idempotency.Scope{Operation: args[0], User: args[1], Key: args[2]}
			if err := scope.Validate(); err != nil {
				return invalidInputf("%v", err)
			}
			return a.withIdempotencyStore(cmd, true, func(ctx context.Context, s idempotency.Store) error {
				rec, err := s.Get(ctx, scope, time.Now())
				if errors.Is(err, idempotency.ErrNotFound) {
					return fmt.Errorf("idempotency record (%q, %q, %q): %w", scope.Operation, scope.User, scope.Key, chain.ErrNotFound)
				}
				if err != nil {
					return err
				}
				j := newIdempotencyRecordJSON(rec, true)
				return a.print(cmd, j, func(w io.Writer) error {
					fmt.Fprintf(w, "operation %s\nuser      %s\nkey       %s\nstatus    %s\nattempt   %d\nhash      %s\ncreated   %s\nexpires   %s\n",
						j.Operation, j.User, j.Key, j.Status, j.Attempt, j.RequestHash, j.CreatedAt.UTC().Format(time.RFC3339Nano), j.ExpiresAt.UTC().Format(time.RFC3339Nano))
					if j.Failure != "" {
						fmt.Fprintf(w, "failure   %s\n", j.Failure)
					}
					if rec.Response != nil {
						fmt.Fprintf(w, "response  %d\n%s\n", rec.Response.Status, rec.Response.Body)
					}
					return nil
				})
			})
		},
	}
}

// jobCountJSON is what recover and cleanup print.
type jobCountJSON struct {
	Recovered *int `json:"recovered,omitempty"`
	Cleaned   *int `json:"cleaned,omitempty"`
}

func newIdempotencyRecoverCommand(a *app) *cobra.Command {
	var timeout time.Duration
	var limit, maxRetries int
	cmd := &cobra.Command{
		Use:   "recover",
		Short: "Release PROCESSING records whose lease ended (a dead worker's), each as a transient failure",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if limit <= 0 || maxRetries <= 0 || timeout < 0 {
				return usageErrorf("--limit and --max-retries must be positive, --timeout not negative")
			}
			return a.withIdempotencyStore(cmd, false, func(ctx context.Context, s idempotency.Store) error {
				jobs, err := idempotency.NewJobs(idempotency.JobsOptions{Store: s, MaxRetries: maxRetries, Logger: a.logger()})
				if err != nil {
					return err
				}
				n, err := jobs.RecoverStuckRecords(ctx, timeout, limit)
				if err != nil {
					return err
				}
				return a.print(cmd, jobCountJSON{Recovered: &n}, func(w io.Writer) error {
					_, err := fmt.Fprintf(w, "recovered %d stuck records\n", n)
					return err
				})
			})
		},
	}
	cmd.Flags().DurationVar(&timeout, "timeout", 0, "how long after its lease ended a record counts as stuck")
	cmd.Flags().IntVar(&limit, "limit", idempotency.JobBatchSizeDefault, "the most records to release")
	cmd.Flags().IntVar(&maxRetries, "max-retries", idempotency.MaxRetriesDefault, "the guards' MaxRetries: a release reaching it poisons the key")
	return cmd
}

func newIdempotencyCleanupCommand(a *app) *cobra.Command {
	var limit int
	cmd := &cobra.Command{
		Use:   "cleanup",
		Short: "Delete expired records (and retry counts) so that their keys become reusable",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if limit <= 0 {
				return usageErrorf("--limit must be positive")
			}
			return a.withIdempotencyStore(cmd, false, func(ctx context.Context, s idempotency.Store) error {
				jobs, err := idempotency.NewJobs(idempotency.JobsOptions{Store: s, Logger: a.logger()})
				if err != nil {
					return err
				}
				n, err := jobs.CleanupExpiredRecords(ctx, limit)
				if err != nil {
					return err
				}
				return a.print(cmd, jobCountJSON{Cleaned: &n}, func(w io.Writer) error {
					_, err := fmt.Fprintf(w, "deleted %d expired records\n", n)
					return err
				})
			})
		},
	}
	cmd.Flags().IntVar(&limit, "limit", 100_000, "the most records to delete (in batches)")
	return cmd
}
