package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/ledgerworks/ledger/api"
	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/internal/wire"
	"github.com/ledgerworks/ledger/outbox"
)

// The JSON shapes of the outbox commands that the HTTP API shares are its
// (api, built by internal/wire).
type (
	outboxMessageJSON = api.OutboxMessage
	outboxListJSON    = api.OutboxMessageList
	outboxStatsJSON   = api.OutboxStats
	outboxTopicJSON   = api.OutboxTopic
	outboxRequeueJSON = api.OutboxRequeueResponse
	outboxEventJSON   = api.OutboxEvent
	outboxShowJSON    = api.OutboxMessageHistory
)

var (
	newOutboxMessageJSON = wire.OutboxMessage
	newOutboxEventJSON   = wire.OutboxEvent
)

func init() {
	registerCommand(newOutboxCommand)
	registerCheck("outbox", outbox.Check)
}

// outboxOptions are the flags the outbox commands share.
type outboxOptions struct {
	tenant string
	topic  string
}

func newOutboxCommand(a *app) *cobra.Command {
	opts := &outboxOptions{}
	cmd := &cobra.Command{
		Use:   "outbox",
		Short: "Inspect and deliver a tenant's outbox: messages, dead letters, requeues, workers",
		Long: "outbox reads the messages a tenant's business transactions enqueued (--tenant) and their\n" +
			"delivery history, which is hash-chained on tenant/outbox/<topic>/deliveries: every lease,\n" +
			"outcome, dead letter and requeue. Every attempt of a message carries the idempotency key\n" +
			"outbox:<id>. An unknown message id exits 4.",
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error { return cmd.Help() },
	}
	cmd.PersistentFlags().StringVar(&opts.tenant, "tenant", "", "tenant whose outbox is read (required)")
	cmd.AddCommand(newOutboxListCommand(a, opts), newOutboxShowCommand(a, opts), newOutboxDeadCommand(a, opts),
		newOutboxRequeueCommand(a, opts), newOutboxStatsCommand(a, opts), newOutboxWorkCommand(a, opts))
	return cmd
}

func (o *outboxOptions) requireTenant(cmd *cobra.Command) error {
	if o.tenant == "" {
		return usageErrorf("%s: --tenant is required", cmd.CommandPath())
	}
	return nil
}

func writeMessagesText(w io.Writer, infos []outbox.Info) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tTOPIC\tKEY\tSTATUS\tATTEMPTS\tDUE\tORDERING")
	for _, i := range infos {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\n", i.Message.ID, i.Message.Topic, i.Message.IdempotencyKey, i.Status,
			i.Attempts, i.Due.UTC().Format(time.RFC3339Nano), i.Message.OrderingKey)
	}
	return tw.Flush()
}

func printMessages(cmd *cobra.Command, a *app, infos []outbox.Info) error {
	out := outboxListJSON{Messages: []outboxMessageJSON{}}
	for _, i := range infos {
		out.Messages = append(out.Messages, newOutboxMessageJSON(i, false))
	}
	return a.print(cmd, out, func(w io.Writer) error { return writeMessagesText(w, infos) })
}

func newOutboxListCommand(a *app, opts *outboxOptions) *cobra.Command {
	var status string
	var limit int
	cmd := &cobra.Command{
		Use:   "list [--topic T] [--status pending|leased|dead|done] [--limit N]",
		Short: "List messages (by default every one not done), in topic and enqueue order",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := opts.requireTenant(cmd); err != nil {
				return err
			}
			s, err := parseStatus(status)
			if err != nil {
				return err
			}
			if limit < 0 || limit > 100_000 {
				return usageErrorf("--limit %d: want 0..100000", limit)
			}
			return a.withDB(cmd, true, func(ctx context.Context, db *chain.DB) error {
				infos, err := outbox.List(ctx, db, opts.tenant, outbox.ListOptions{Topic: opts.topic, Status: s, Limit: limit})
				if err != nil {
					return err
				}
				return printMessages(cmd, a, infos)
			})
		},
	}
	cmd.Flags().StringVar(&opts.topic, "topic", "", "only this topic")
	cmd.Flags().StringVar(&status, "status", "", "only messages with this status: pending, leased, dead or done")
	cmd.Flags().IntVar(&limit, "limit", 0, fmt.Sprintf("at most this many rows (default %d)", outbox.ListLimitDefault))
	return cmd
}

func parseStatus(s string) (outbox.Status, error) {
	for _, st := range []outbox.Status{outbox.Pending, outbox.Leased, outbox.Done, outbox.Dead} {
		if s == st.String() {
			return st, nil
		}
	}
	if s == "" {
		return 0, nil
	}
	return 0, usageErrorf("--status %q: want pending, leased, dead or done", s)
}

func parseIDs(args []string) ([]outbox.ID, error) {
	ids := make([]outbox.ID, len(args))
	for i, s := range args {
		id, err := outbox.ParseID(s)
		if err != nil {
			return nil, usageErrorf("%q is not a message id (32 hex digits, or outbox:<id>)", s)
		}
		ids[i] = id
	}
	return ids, nil
}

func newOutboxShowCommand(a *app, opts *outboxOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "show ID",
		Short: "Show a message and its whole delivery history: every lease, attempt, outcome, dead letter and requeue",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := opts.requireTenant(cmd); err != nil {
				return err
			}
			ids, err := parseIDs(args)
			if err != nil {
				return err
			}
			return a.withDB(cmd, true, func(ctx context.Context, db *chain.DB) error {
				info, err := outbox.Get(ctx, db, opts.tenant, ids[0])
				if err != nil {
					return err
				}
				out := outboxShowJSON{Message: newOutboxMessageJSON(info, true), History: []outboxEventJSON{}}
				for ev, err := range outbox.History(ctx, db, opts.tenant, ids[0]) {
					if err != nil {
						return err
					}
					out.History = append(out.History, newOutboxEventJSON(ev))
				}
				return a.print(cmd, out, func(w io.Writer) error { return writeShowText(w, &out) })
			})
		},
	}
}

func formatNano(ns int64) string { return time.Unix(0, ns).UTC().Format(time.RFC3339Nano) }

func writeShowText(w io.Writer, s *outboxShowJSON) error {
	m := &s.Message
	fmt.Fprintf(w, "message %s (topic %s, key %s)\n", m.ID, m.Topic, m.Key)
	fmt.Fprintf(w, "  enqueued %s as %s, seq %d", formatNano(m.EnqueuedAt), m.IdempotencyKey, m.Seq)
	if m.OrderingKey != "" {
		fmt.Fprintf(w, ", ordering key %s", m.OrderingKey)
	}
	fmt.Fprintf(w, "\n  %s after %d attempts, due %s\n", m.Status, m.Attempts, formatNano(m.DueUnixNano))
	for _, e := range s.History {
		line := fmt.Sprintf("  seq %d %s %s", e.Seq, formatNano(e.TimeUnixNano), strings.TrimPrefix(strings.TrimSuffix(e.Type, "/v1"), "outbox."))
		switch e.Type {
		case outbox.TypeLease:
			line += fmt.Sprintf(": attempt %d leased to %s until %s", e.Attempt, e.Worker, formatNano(e.Deadline))
		case outbox.TypeHeartbeat:
			line += fmt.Sprintf(": %s extended lease %d to %s", e.Worker, e.Token, formatNano(e.Deadline))
		case outbox.TypeOutcome:
			line += fmt.Sprintf(": attempt %d by %s %s after %v", e.Attempt, e.Worker, e.Outcome, time.Duration(e.DurationNano).Round(time.Microsecond))
			if e.NextAttempt != 0 {
				line += ", retry at " + formatNano(e.NextAttempt)
			}
		case outbox.TypeDead:
			line += ": " + e.DeadReason
		case outbox.TypeRequeue:
			line += " by " + e.Worker
		}
		if e.Detail != "" {
			line += fmt.Sprintf(" (%s)", e.Detail)
		}
		if _, err := fmt.Fprintln(w, line); err != nil {
			return err
		}
	}
	return nil
}

func newOutboxDeadCommand(a *app, opts *outboxOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "dead [--topic T]",
		Short: "List the dead messages an operator may requeue",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := opts.requireTenant(cmd); err != nil {
				return err
			}
			return a.withDB(cmd, true, func(ctx context.Context, db *chain.DB) error {
				infos, err := outbox.ListDead(ctx, db, opts.tenant, opts.topic)
				if err != nil {
					return err
				}
				return printMessages(cmd, a, infos)
			})
		},
	}
	cmd.Flags().StringVar(&opts.topic, "topic", "", "only this topic")
	return cmd
}

func newOutboxRequeueCommand(a *app, opts *outboxOptions) *cobra.Command {
	var ro outbox.RequeueOptions
	cmd := &cobra.Command{
		Use:   "requeue ID... --operator NAME [--reason TEXT]",
		Short: "Return dead messages to pending with fresh attempts; recorded with the operator and reason",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := opts.requireTenant(cmd); err != nil {
				return err
			}
			if ro.Operator == "" {
				return usageErrorf("%s: --operator is required: it is recorded on the deliveries chain", cmd.CommandPath())
			}
			ids, err := parseIDs(args)
			if err != nil {
				return err
			}
			return a.withDB(cmd, false, func(ctx context.Context, db *chain.DB) error {
				if err := outbox.Requeue(ctx, db, opts.tenant, ids, ro); err != nil {
					return err
				}
				out := outboxRequeueJSON{Operator: ro.Operator}
				for _, id := range ids {
					out.Requeued = append(out.Requeued, id.String())
				}
				return a.print(cmd, out, func(w io.Writer) error {
					_, err := fmt.Fprintf(w, "requeued %d messages by %s\n", len(ids), ro.Operator)
					return err
				})
			})
		},
	}
	cmd.Flags().StringVar(&ro.Operator, "operator", "", "who requeues (required, recorded)")
	cmd.Flags().StringVar(&ro.Reason, "reason", "", "why (recorded)")
	return cmd
}

func newOutboxStatsCommand(a *app, opts *outboxOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "stats [--topic T]",
		Short: "Count messages by status per topic, with the ordering keys a failing message blocks",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := opts.requireTenant(cmd); err != nil {
				return err
			}
			return a.withDB(cmd, true, func(ctx context.Context, db *chain.DB) error {
				stats, err := outbox.Stats(ctx, db, opts.tenant, opts.topic)
				if err != nil {
					return err
				}
				out := outboxStatsJSON{Topics: []outboxTopicJSON{}}
				for _, s := range stats {
					out.Topics = append(out.Topics, wire.OutboxTopic(s))
				}
				return a.print(cmd, out, func(w io.Writer) error { return writeStatsText(w, out.Topics) })
			})
		},
	}
	cmd.Flags().StringVar(&opts.topic, "topic", "", "only this topic")
	return cmd
}

func writeStatsText(w io.Writer, topics []outboxTopicJSON) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TOPIC\tENQUEUED\tPENDING\tWAITING\tLEASED\tDONE\tDEAD\tHISTORY")
	for _, t := range topics {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d entries\n", t.Topic, t.Enqueued, t.Pending, t.Waiting, t.Leased, t.Done, t.Dead, t.Deliveries)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, t := range topics {
		for _, b := range t.BlockedKeys {
			fmt.Fprintf(w, "blocked: %s ordering key %s: message %s %s after %d attempts, %d behind it\n", t.Topic, b.OrderingKey,
				b.Message, b.Status, b.Attempts, b.Behind)
		}
	}
	return nil
}

// outboxWorkOptions are the flags of outbox work.
type outboxWorkOptions struct {
	webhooks     []string
	secret       string
	concurrency  int
	lease        time.Duration
	timeout      time.Duration
	maxAttempts  int
	maxAge       time.Duration
	untilIdle    bool
	worker       string
	allowPrivate bool
}

type outboxWorkJSON struct {
	Worker    string `json:"worker"`
	Delivered int64  `json:"delivered"`
	Failed    int64  `json:"failed"`
	Dead      int64  `json:"dead"`
}

func newOutboxWorkCommand(a *app, opts *outboxOptions) *cobra.Command {
	wo := &outboxWorkOptions{}
	cmd := &cobra.Command{
		Use:   "work --webhook TOPIC=URL... [--secret whsec_…]",
		Short: "Deliver topics to webhook URLs until interrupted (or, with --until-idle, until none is due)",
		Long: "work runs a worker that POSTs each message of the named topics to its URL, signed with the\n" +
			"Standard Webhooks secret (--secret, else $LEDGER_WEBHOOK_SECRET), with Idempotency-Key and\n" +
			"webhook-id outbox:<id>. 2xx delivers; a redirect (never followed) and 4xx other than 408/429\n" +
			"dead-letter; the rest retries with backoff. URLs that name or resolve to loopback, private or\n" +
			"link-local addresses are refused unless --allow-private-addresses. It shows a progress line on a\n" +
			"terminal and prints totals when it stops (Ctrl-C).",
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error { return runOutboxWork(cmd, a, opts, wo) },
	}
	cmd.Flags().StringArrayVar(&wo.webhooks, "webhook", nil, "TOPIC=URL to deliver the topic to (repeatable, required)")
	cmd.Flags().StringVar(&wo.secret, "secret", "", "Standard Webhooks signing secret whsec_<base64> (default $LEDGER_WEBHOOK_SECRET)")
	cmd.Flags().IntVar(&wo.concurrency, "concurrency", 0, fmt.Sprintf("requests in flight per topic (default %d)", outbox.ConcurrencyDefault))
	cmd.Flags().DurationVar(&wo.lease, "lease", 0, fmt.Sprintf("lease per attempt, extended while it runs (default %v, or 1.5 x --timeout when longer)", outbox.LeaseDurationDefault))
	cmd.Flags().DurationVar(&wo.timeout, "timeout", 0, fmt.Sprintf("timeout of one request (default %v)", outbox.WebhookTimeoutDefault))
	cmd.Flags().IntVar(&wo.maxAttempts, "max-attempts", 0, fmt.Sprintf("attempts before a message is dead (default %d)", outbox.MaxAttemptsDefault))
	cmd.Flags().DurationVar(&wo.maxAge, "max-age", 0, fmt.Sprintf("age after which a message is dead (default %v)", outbox.MaxAgeDefault))
	cmd.Flags().BoolVar(&wo.untilIdle, "until-idle", false, "stop once no message of the topics is pending or leased")
	cmd.Flags().StringVar(&wo.worker, "worker", "", "worker id recorded on leases (default host:pid:random)")
	cmd.Flags().BoolVar(&wo.allowPrivate, "allow-private-addresses", false, "let the URLs reach loopback, private and link-local addresses")
	return cmd
}

// workCounter counts outcomes for the progress line and the totals.
type workCounter struct {
	delivered, failed, dead atomic.Int64
}

func (c *workCounter) Claimed(string, int, int) {}
func (c *workCounter) Attempted(_ string, k outbox.OutcomeKind, _ time.Duration) {
	if k == outbox.Delivered {
		c.delivered.Add(1)
	} else {
		c.failed.Add(1)
	}
}
func (c *workCounter) PickedUp(string, time.Duration) {}
func (c *workCounter) DeadLettered(_ string, _ outbox.DeadReason, n int) {
	c.dead.Add(int64(n))
}
func (c *workCounter) LeaseLost(string, int)              {}
func (c *workCounter) Backlog(string, int, time.Duration) {}

func runOutboxWork(cmd *cobra.Command, a *app, opts *outboxOptions, wo *outboxWorkOptions) error {
	if err := opts.requireTenant(cmd); err != nil {
		return err
	}
	if len(wo.webhooks) == 0 {
		return usageErrorf("%s: give at least one --webhook TOPIC=URL", cmd.CommandPath())
	}
	secret := wo.secret
	if secret == "" && a.environment != nil {
		secret = a.environment("LEDGER_WEBHOOK_SECRET")
	}
	if secret == "" {
		return usageErrorf("%s: --secret (or $LEDGER_WEBHOOK_SECRET) is required", cmd.CommandPath())
	}
	policy := outbox.Policy{MaxAttempts: wo.maxAttempts, MaxAge: wo.maxAge}
	topics := map[string]outbox.Topic{}
	for _, spec := range wo.webhooks {
		topic, url, ok := strings.Cut(spec, "=")
		if !ok || topic == "" {
			return usageErrorf("--webhook %q: want TOPIC=URL", spec)
		}
		deliver, err := outbox.Webhook(outbox.WebhookOptions{URL: url, Secret: secret, Timeout: wo.timeout, AllowPrivateAddresses: wo.allowPrivate})
		if err != nil {
			return usageErrorf("--webhook %q: %v", spec, err)
		}
		topics[topic] = outbox.Topic{Handler: deliver, Policy: policy, Timeout: cmp.Or(wo.timeout, outbox.WebhookTimeoutDefault)}
	}
	counter := &workCounter{}
	return a.withDB(cmd, false, func(ctx context.Context, db *chain.DB) error {
		w, err := outbox.NewWorker(db, outbox.WorkerOptions{Tenant: opts.tenant, Topics: topics, ID: wo.worker, Concurrency: wo.concurrency,
			LeaseDuration: wo.lease, Logger: a.logger(), Metrics: counter, Clock: a.clock})
		if err != nil {
			return err
		}
		if err := w.Start(ctx); err != nil {
			return err
		}
		line := newWorkLine(cmd)
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for running := true; running; {
			select {
			case <-ctx.Done():
				running = false
			case <-tick.C:
				line.show(counter)
				if wo.untilIdle {
					idle, err := outboxIdle(ctx, db, opts.tenant, topics)
					if err != nil {
						return err
					}
					running = !idle
				}
			}
		}
		stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		stopErr := w.Stop(stopCtx)
		line.finish()
		out := outboxWorkJSON{Worker: w.ID(), Delivered: counter.delivered.Load(), Failed: counter.failed.Load(), Dead: counter.dead.Load()}
		if err := a.print(cmd, out, func(w io.Writer) error {
			_, err := fmt.Fprintf(w, "worker %s: %d delivered, %d failed attempts, %d dead\n", out.Worker, out.Delivered, out.Failed, out.Dead)
			return err
		}); err != nil {
			return err
		}
		return stopErr
	})
}

// outboxIdle reports whether no message of the topics is pending or leased.
func outboxIdle(ctx context.Context, db *chain.DB, tenant string, topics map[string]outbox.Topic) (bool, error) {
	for topic := range topics {
		stats, err := outbox.Stats(ctx, db, tenant, topic)
		if err != nil {
			return false, err
		}
		for _, s := range stats {
			if s.Pending+s.Leased > 0 {
				return false, nil
			}
		}
	}
	return true, nil
}

// workLine is the progress line of outbox work: drawn on stderr when it is
// a terminal, absent otherwise.
type workLine struct{ f *os.File }

func newWorkLine(cmd *cobra.Command) *workLine {
	f, ok := cmd.ErrOrStderr().(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return &workLine{}
	}
	return &workLine{f: f}
}

func (l *workLine) show(c *workCounter) {
	if l.f != nil {
		fmt.Fprintf(l.f, "\r\033[Kdelivered %d, failed attempts %d, dead %d", c.delivered.Load(), c.failed.Load(), c.dead.Load())
	}
}

func (l *workLine) finish() {
	if l.f != nil {
		fmt.Fprint(l.f, "\r\033[K")
	}
}
