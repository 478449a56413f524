package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/ledgerworks/ledger/api"
	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/decimal"
	"github.com/ledgerworks/ledger/internal/wire"
	"github.com/ledgerworks/ledger/stockmovement"
)

// The JSON shapes of the stock commands are the HTTP API's (api, built by
// internal/wire).
type (
	stockItemJSON     = api.StockItem
	stockLocationJSON = api.StockLocation
	stockEntryJSON    = api.StockEntry
	stockResultJSON   = api.StockResult
	stockBalanceJSON  = api.StockBalance
	stockTotalJSON    = api.StockTotal
	stockHistoryJSON  = api.StockHistory
)

var (
	newStockItemJSON     = wire.StockItem
	newStockLocationJSON = wire.StockLocation
	newStockEntryJSON    = wire.StockEntry
	newStockBalanceJSON  = wire.StockBalance
)

func init() {
	registerCommand(newStockCommand)
	registerCheck("stock", stockmovement.Check)
}

// Limits of the stock commands.
const (
	// stockHistoryLimitDefault is how many movements history prints without --limit.
	stockHistoryLimitDefault = 100
	// stockHistoryLimitMax bounds --limit: history holds its page in memory.
	stockHistoryLimitMax = 100_000
)

// stockOptions are the flags the stock commands share.
type stockOptions struct {
	tenant    string
	key       string
	reference string
	note      string
}

func newStockCommand(a *app) *cobra.Command {
	opts := &stockOptions{}
	cmd := &cobra.Command{
		Use:   "stock",
		Short: "Record stock movements and read balances (items, locations, receipts, issues, transfers)",
		Long: "stock records the movements of items between locations of one tenant (--tenant) and reads\n" +
			"their balances. Quantities are exact decimals at the item's declared scale. Every movement\n" +
			"needs --key: a retry with the same key prints the original movement (replayed) and writes\n" +
			"nothing; the same key with another request is an idempotency conflict (exit 3).\n" +
			"Refused input, including negative stock, exits 2; an unknown item or location exits 4.",
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error { return cmd.Help() },
	}
	cmd.PersistentFlags().StringVar(&opts.tenant, "tenant", "", "tenant whose stock is recorded (required)")
	cmd.AddCommand(newStockItemCommand(a, opts), newStockLocationCommand(a, opts),
		newStockMovementCommand(a, opts, "receive"), newStockMovementCommand(a, opts, "issue"),
		newStockAdjustCommand(a, opts), newStockTransferCommand(a, opts), newStockReverseCommand(a, opts),
		newStockBalanceCommand(a, opts), newStockHistoryCommand(a, opts))
	return cmd
}

// requireTenant checks --tenant before anything is opened.
func (o *stockOptions) requireTenant(cmd *cobra.Command) error {
	if o.tenant == "" {
		return usageErrorf("%s: --tenant is required", cmd.CommandPath())
	}
	return nil
}

// movementFlags adds --key, --reference and --note.
func (o *stockOptions) movementFlags(cmd *cobra.Command) {
	cmd.Flags().StringVar(&o.key, "key", "", "idempotency key of the movement (required)")
	cmd.Flags().StringVar(&o.reference, "reference", "", "document number, such as a delivery note")
	cmd.Flags().StringVar(&o.note, "note", "", "free-form note")
}

// requireKey checks --tenant and --key.
func (o *stockOptions) requireKey(cmd *cobra.Command) error {
	if err := o.requireTenant(cmd); err != nil {
		return err
	}
	if o.key == "" {
		return usageErrorf("%s: --key is required (a retry with the same key replays)", cmd.CommandPath())
	}
	return nil
}

func newStockItemCommand(a *app, opts *stockOptions) *cobra.Command {
	cmd := &cobra.Command{Use: "item", Short: "Define and list items", Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error { return cmd.Help() }}
	var name string
	var scale uint8
	var allowNegative bool
	add := &cobra.Command{
		Use:   "add ITEM [--name NAME] [--scale N] [--allow-negative]",
		Short: "Define an item, or record a change to its definition (its scale is fixed)",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := opts.requireTenant(cmd); err != nil {
				return err
			}
			it := stockmovement.Item{ID: args[0], Name: name, Scale: scale, AllowNegative: allowNegative}
			if err := stockmovement.ValidateItem(it); err != nil {
				return err
			}
			return a.withDB(cmd, false, func(ctx context.Context, db *chain.DB) error {
				res, err := stockmovement.DefineItem(ctx, db, opts.tenant, it)
				if err != nil {
					return err
				}
				return a.print(cmd, newStockItemJSON(opts.tenant, res), func(w io.Writer) error {
					_, err := fmt.Fprintf(w, "item %s: %s\n", res.ID, describeDefinition(res.Seq, res.Unchanged))
					return err
				})
			})
		},
	}
	add.Flags().StringVar(&name, "name", "", "display name")
	add.Flags().Uint8Var(&scale, "scale", 0, fmt.Sprintf("decimal places of quantities, 0 to %d (fixed once defined)", decimal.ScaleMax))
	add.Flags().BoolVar(&allowNegative, "allow-negative", false, "allow movements to leave a negative balance")
	list := &cobra.Command{
		Use:   "list",
		Short: "List the tenant's items",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := opts.requireTenant(cmd); err != nil {
				return err
			}
			return a.withDB(cmd, true, func(ctx context.Context, db *chain.DB) error {
				items, err := stockmovement.Items(ctx, db, opts.tenant, "", 0)
				if err != nil {
					return err
				}
				return printList(cmd, a, items, "items",
					func(it stockmovement.DefinedItem) stockItemJSON { return newStockItemJSON(opts.tenant, it) },
					"ITEM\tSCALE\tNEGATIVE\tNAME", func(it stockmovement.DefinedItem) string {
						return fmt.Sprintf("%s\t%d\t%s\t%s", it.ID, it.Scale, allowedText(it.AllowNegative), it.Name)
					})
			})
		},
	}
	cmd.AddCommand(add, list)
	return cmd
}

func newStockLocationCommand(a *app, opts *stockOptions) *cobra.Command {
	cmd := &cobra.Command{Use: "location", Short: "Define and list locations", Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error { return cmd.Help() }}
	var name string
	add := &cobra.Command{
		Use:   "add LOCATION [--name NAME]",
		Short: "Define a location, or record a new name for it",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := opts.requireTenant(cmd); err != nil {
				return err
			}
			l := stockmovement.Location{ID: args[0], Name: name}
			if err := stockmovement.ValidateLocation(l); err != nil {
				return err
			}
			return a.withDB(cmd, false, func(ctx context.Context, db *chain.DB) error {
				res, err := stockmovement.DefineLocation(ctx, db, opts.tenant, l)
				if err != nil {
					return err
				}
				return a.print(cmd, newStockLocationJSON(opts.tenant, res), func(w io.Writer) error {
					_, err := fmt.Fprintf(w, "location %s: %s\n", res.ID, describeDefinition(res.Seq, res.Unchanged))
					return err
				})
			})
		},
	}
	add.Flags().StringVar(&name, "name", "", "display name")
	list := &cobra.Command{
		Use:   "list",
		Short: "List the tenant's locations",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := opts.requireTenant(cmd); err != nil {
				return err
			}
			return a.withDB(cmd, true, func(ctx context.Context, db *chain.DB) error {
				locations, err := stockmovement.Locations(ctx, db, opts.tenant, "", 0)
				if err != nil {
					return err
				}
				return printList(cmd, a, locations, "locations",
					func(l stockmovement.DefinedLocation) stockLocationJSON { return newStockLocationJSON(opts.tenant, l) },
					"LOCATION\tNAME", func(l stockmovement.DefinedLocation) string { return l.ID + "\t" + l.Name })
			})
		},
	}
	cmd.AddCommand(add, list)
	return cmd
}

func describeDefinition(seq uint64, unchanged bool) string {
	if unchanged {
		return fmt.Sprintf("unchanged (catalog seq %d, nothing written)", seq)
	}
	return fmt.Sprintf("defined at catalog seq %d", seq)
}

func allowedText(allowed bool) string {
	if allowed {
		return "allowed"
	}
	return "refused"
}

// parseQuantity parses a quantity argument at the item's declared scale.
func parseQuantity(ctx context.Context, db *chain.DB, tenant, item, text string) (decimal.Decimal, error) {
	it, err := stockmovement.GetItem(ctx, db, tenant, item)
	if err != nil {
		return decimal.Decimal{}, err
	}
	return parseQuantityText(item, text, it.Scale)
}

// parseQuantityText parses a quantity written for item at exactly scale;
// what cannot be parsed is an input error (exit 2) that names the item.
func parseQuantityText(item, text string, scale uint8) (decimal.Decimal, error) {
	q, err := decimal.Parse(text, scale)
	if err != nil {
		return decimal.Decimal{}, invalidInputf("quantity %q for item %s (scale %d): %w", text, item, scale, err)
	}
	return q, nil
}

// printStockResult prints a movement's entries, one line each in text.
func printStockResult(cmd *cobra.Command, a *app, res stockmovement.Result) error {
	out := stockResultJSON{Replayed: res.Replayed, Entries: []stockEntryJSON{}}
	for _, e := range res.Entries {
		out.Entries = append(out.Entries, newStockEntryJSON(e))
	}
	return a.print(cmd, out, func(w io.Writer) error {
		for _, e := range res.Entries {
			replayed := ""
			if res.Replayed {
				replayed = " replayed=true (nothing written)"
			}
			if _, err := fmt.Fprintf(w, "%s seq %d: %s %s, balance %s, key %s%s\n", e.Chain, e.Seq, e.Kind,
				signed(e.Quantity), e.Balance, e.IdempotencyKey, replayed); err != nil {
				return err
			}
		}
		return nil
	})
}

// signed renders a quantity with an explicit sign.
func signed(q decimal.Decimal) string {
	if q.Sign() > 0 {
		return "+" + q.String()
	}
	return q.String()
}

// newStockMovementCommand builds receive and issue, which share their shape.
func newStockMovementCommand(a *app, opts *stockOptions, verb string) *cobra.Command {
	short := map[string]string{
		"receive": "Record a receipt: QUANTITY of ITEM arrives at LOCATION",
		"issue":   "Record an issue: QUANTITY of ITEM leaves LOCATION (refused if it would go negative)",
	}[verb]
	cmd := &cobra.Command{
		Use:   verb + " ITEM LOCATION QUANTITY --key KEY [--reference REF] [--note TEXT]",
		Short: short,
		Args:  exactArgs(3),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := opts.requireKey(cmd); err != nil {
				return err
			}
			return a.withDB(cmd, false, func(ctx context.Context, db *chain.DB) error {
				q, err := parseQuantity(ctx, db, opts.tenant, args[0], args[2])
				if err != nil {
					return err
				}
				var res stockmovement.Result
				if verb == "receive" {
					res, err = stockmovement.Receive(ctx, db, stockmovement.ReceiveRequest{Tenant: opts.tenant, Item: args[0],
						Location: args[1], Quantity: q, Reference: opts.reference, Note: opts.note, IdempotencyKey: opts.key})
				} else {
					res, err = stockmovement.Issue(ctx, db, stockmovement.IssueRequest{Tenant: opts.tenant, Item: args[0],
						Location: args[1], Quantity: q, Reference: opts.reference, Note: opts.note, IdempotencyKey: opts.key})
				}
				if err != nil {
					return err
				}
				return printStockResult(cmd, a, res)
			})
		},
	}
	opts.movementFlags(cmd)
	return cmd
}

func newStockAdjustCommand(a *app, opts *stockOptions) *cobra.Command {
	var by, reason string
	cmd := &cobra.Command{
		Use:   "adjust ITEM LOCATION --by ±QUANTITY --reason TEXT --key KEY [--reference REF] [--note TEXT]",
		Short: "Record an adjustment of a location's balance by a signed quantity, for a reason",
		Args:  exactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := opts.requireKey(cmd); err != nil {
				return err
			}
			if by == "" {
				return usageErrorf("%s: --by is required (such as --by -2 or --by 0.5)", cmd.CommandPath())
			}
			return a.withDB(cmd, false, func(ctx context.Context, db *chain.DB) error {
				q, err := parseQuantity(ctx, db, opts.tenant, args[0], by)
				if err != nil {
					return err
				}
				res, err := stockmovement.Adjust(ctx, db, stockmovement.AdjustRequest{Tenant: opts.tenant, Item: args[0],
					Location: args[1], Quantity: q, Reason: reason, Reference: opts.reference, Note: opts.note,
					IdempotencyKey: opts.key})
				if err != nil {
					return err
				}
				return printStockResult(cmd, a, res)
			})
		},
	}
	cmd.Flags().StringVar(&by, "by", "", "signed change, such as -2 or 0.5 (required)")
	cmd.Flags().StringVar(&reason, "reason", "", "why the balance changes, such as count or breakage (required)")
	opts.movementFlags(cmd)
	return cmd
}

func newStockTransferCommand(a *app, opts *stockOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "transfer ITEM FROM TO QUANTITY --key KEY [--reference REF] [--note TEXT]",
		Short: "Move QUANTITY of ITEM from one location to another, atomically (keys KEY:out and KEY:in)",
		Args:  exactArgs(4),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := opts.requireKey(cmd); err != nil {
				return err
			}
			return a.withDB(cmd, false, func(ctx context.Context, db *chain.DB) error {
				q, err := parseQuantity(ctx, db, opts.tenant, args[0], args[3])
				if err != nil {
					return err
				}
				res, err := stockmovement.Transfer(ctx, db, stockmovement.TransferRequest{Tenant: opts.tenant, Item: args[0],
					From: args[1], To: args[2], Quantity: q, Reference: opts.reference, Note: opts.note, IdempotencyKey: opts.key})
				if err != nil {
					return err
				}
				return printStockResult(cmd, a, res)
			})
		},
	}
	opts.movementFlags(cmd)
	return cmd
}

func newStockReverseCommand(a *app, opts *stockOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use: "reverse CHAIN SEQ --key KEY [--reference REF] [--note TEXT]",
		Short: "Cancel the movement at CHAIN SEQ by appending its opposite (a transfer is reversed whole; " +
			"each movement once)",
		Args: exactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := opts.requireKey(cmd); err != nil {
				return err
			}
			seq, err := parseSeq("SEQ", args[1])
			if err != nil {
				return err
			}
			return a.withDB(cmd, false, func(ctx context.Context, db *chain.DB) error {
				res, err := stockmovement.Reverse(ctx, db, stockmovement.ReverseRequest{Tenant: opts.tenant,
					Original: stockmovement.Ref{Chain: args[0], Seq: seq}, Reference: opts.reference, Note: opts.note,
					IdempotencyKey: opts.key})
				if err != nil {
					return err
				}
				return printStockResult(cmd, a, res)
			})
		},
	}
	opts.movementFlags(cmd)
	return cmd
}

func newStockBalanceCommand(a *app, opts *stockOptions) *cobra.Command {
	var atSeq uint64
	var atTime string
	cmd := &cobra.Command{
		Use: "balance ITEM [LOCATION] [--at-seq SEQ | --at-time RFC3339]",
		Short: "Print an item's balance at a location (now, after a seq, or as recorded at a time), " +
			"or at every location with the total",
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) < 1 || len(args) > 2 {
				return usageErrorf("%s takes ITEM and optionally LOCATION (usage: %s)", cmd.CommandPath(), cmd.UseLine())
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := opts.requireTenant(cmd); err != nil {
				return err
			}
			seqSet, timeSet := cmd.Flags().Changed("at-seq"), cmd.Flags().Changed("at-time")
			if seqSet && timeSet {
				return usageErrorf("%s: give --at-seq or --at-time, not both", cmd.CommandPath())
			}
			if (seqSet || timeSet) && len(args) != 2 {
				return usageErrorf("%s: --at-seq and --at-time need a LOCATION", cmd.CommandPath())
			}
			var at time.Time
			if timeSet {
				var err error
				if at, err = time.Parse(time.RFC3339Nano, atTime); err != nil {
					return usageErrorf("--at-time %q: want RFC 3339, such as 2026-11-02T09:00:00Z", atTime)
				}
			}
			return a.withDB(cmd, true, func(ctx context.Context, db *chain.DB) error {
				if len(args) == 1 {
					return printItemBalances(ctx, cmd, a, db, opts.tenant, args[0])
				}
				var b stockmovement.Balance
				var err error
				switch {
				case seqSet:
					b, err = stockmovement.BalanceAtSeq(ctx, db, opts.tenant, args[0], args[1], atSeq)
				case timeSet:
					b, err = stockmovement.BalanceAtTime(ctx, db, opts.tenant, args[0], args[1], at)
				default:
					b, err = stockmovement.GetBalance(ctx, db, opts.tenant, args[0], args[1])
				}
				if err != nil {
					return err
				}
				return a.print(cmd, newStockBalanceJSON(b), func(w io.Writer) error {
					_, err := fmt.Fprintf(w, "%s at %s: %s (after seq %d)\n", b.Item, b.Location, b.Quantity, b.Seq)
					return err
				})
			})
		},
	}
	cmd.Flags().Uint64Var(&atSeq, "at-seq", 0, "the balance after this seq of the location's chain (0: before any)")
	cmd.Flags().StringVar(&atTime, "at-time", "", "the balance as recorded at this time (RFC 3339)")
	return cmd
}

func printItemBalances(ctx context.Context, cmd *cobra.Command, a *app, db *chain.DB, tenant, item string) error {
	balances, err := stockmovement.ItemBalances(ctx, db, tenant, item)
	if err != nil {
		return err
	}
	total, err := stockmovement.ItemTotal(ctx, db, tenant, item)
	if err != nil {
		return err
	}
	out := stockTotalJSON{Tenant: tenant, Item: item, Total: total.String(), Balances: []stockBalanceJSON{}}
	for _, b := range balances {
		out.Balances = append(out.Balances, newStockBalanceJSON(b))
	}
	return a.print(cmd, out, func(w io.Writer) error {
		tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintf(tw, "LOCATION\tQUANTITY\tSEQ\t\n")
		for _, b := range balances {
			fmt.Fprintf(tw, "%s\t%s\t%d\t\n", b.Location, b.Quantity, b.Seq)
		}
		fmt.Fprintf(tw, "total\t%s\t\t\n", total)
		return tw.Flush()
	})
}

func newStockHistoryCommand(a *app, opts *stockOptions) *cobra.Command {
	var from uint64
	var limit int
	cmd := &cobra.Command{
		Use:   "history ITEM LOCATION [--from SEQ] [--limit N]",
		Short: "Print the movements of an item at a location in seq order, a page at a time",
		Args:  exactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := opts.requireTenant(cmd); err != nil {
				return err
			}
			if from == 0 {
				return usageErrorf("--from 0: seqs start at 1")
			}
			if limit < 1 || limit > stockHistoryLimitMax {
				return usageErrorf("--limit %d: want 1 to %d", limit, stockHistoryLimitMax)
			}
			return a.withDB(cmd, true, func(ctx context.Context, db *chain.DB) error {
				current, err := stockmovement.GetBalance(ctx, db, opts.tenant, args[0], args[1])
				if err != nil {
					return err
				}
				name, _ := stockmovement.MovementChain(opts.tenant, args[0], args[1])
				out := stockHistoryJSON{Chain: name, Entries: []stockEntryJSON{}}
				var entries []stockmovement.Entry
				for e, err := range stockmovement.History(ctx, db, opts.tenant, args[0], args[1], from) {
					if err != nil {
						return err
					}
					if len(entries) == limit {
						break
					}
					entries = append(entries, e)
					out.Entries = append(out.Entries, newStockEntryJSON(e))
				}
				if n := len(entries); n > 0 && entries[n-1].Seq < current.Seq {
					out.NextSeq = entries[n-1].Seq + 1
				}
				return a.print(cmd, out, func(w io.Writer) error {
					return writeStockHistory(w, out, entries, opts.tenant, args, limit)
				})
			})
		},
	}
	cmd.Flags().Uint64Var(&from, "from", 1, "first seq to print")
	cmd.Flags().IntVar(&limit, "limit", stockHistoryLimitDefault, fmt.Sprintf("most movements to print (1 to %d)", stockHistoryLimitMax))
	return cmd
}

func writeStockHistory(w io.Writer, out stockHistoryJSON, entries []stockmovement.Entry, tenant string, args []string, limit int) error {
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintf(tw, "SEQ\tTIME\tKIND\tQUANTITY\tBALANCE\tKEY\tDETAIL\n")
	for _, e := range entries {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\n", e.Seq, formatTime(e.TimeUnixNano), e.Kind, signed(e.Quantity),
			e.Balance, e.IdempotencyKey, movementDetail(e.Movement))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if out.NextSeq != 0 {
		_, err := fmt.Fprintf(w, "more: ledgerctl stock history %s %s --tenant %s --from %d --limit %d\n",
			shellQuote(args[0]), shellQuote(args[1]), shellQuote(tenant), out.NextSeq, limit)
		return err
	}
	return nil
}

// movementDetail summarizes the optional fields of a movement for text output.
func movementDetail(m stockmovement.Movement) string {
	var parts []string
	switch m.Kind {
	case stockmovement.KindTransferOut:
		parts = append(parts, "to "+m.Counterpart)
	case stockmovement.KindTransferIn:
		parts = append(parts, "from "+m.Counterpart)
	case stockmovement.KindReversal:
		parts = append(parts, fmt.Sprintf("reverses seq %d", m.OriginalSeq))
	}
	for _, field := range []struct{ name, value string }{{"reason", m.Reason}, {"ref", m.Reference}, {"note", m.Note}} {
		if field.value != "" {
			parts = append(parts, field.name+" "+field.value)
		}
	}
	return strings.Join(parts, "; ")
}
