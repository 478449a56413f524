package main

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/ledgerworks/ledger/api"
	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/decimal"
	"github.com/ledgerworks/ledger/internal/wire"
	"github.com/ledgerworks/ledger/valuations"
)

// The JSON shapes of the val commands are the HTTP API's (api, built by
// internal/wire).
type (
	valItemJSON    = api.ValItem
	valResultJSON  = api.ValResult
	valBalanceJSON = api.ValBalance
	valLayerJSON   = api.ValLayer
)

var (
	newValItemJSON    = wire.ValItem
	newValResultJSON  = wire.ValResult
	newValBalanceJSON = wire.ValBalance
)

func init() {
	registerCommand(newValCommand)
	registerCheck("valuations", valuations.Check)
}

// valLayersLimitDefault is how many FIFO layers `val layers` prints without --limit.
const valLayersLimitDefault = 1000

// valOptions are the flags the val commands share.
type valOptions struct {
	tenant    string
	operation string
}

func newValCommand(a *app) *cobra.Command {
	opts := &valOptions{}
	cmd := &cobra.Command{
		Use:   "val",
		Short: "Value inventory by moving average or FIFO (items, receipts, issues, adjustments, transfers, reversals)",
		Long: "val values the stock of one tenant's items (--tenant) per location, by moving average or FIFO.\n" +
			"Every operation needs --op, its operation id: it writes the entry <op>:qty on the location's\n" +
			"quantity chain and <op>:value on its value chain, atomically. A retry with the same --op prints the\n" +
			"original entries (replayed) and writes nothing; the same --op with another request exits 3.\n" +
			"Refused input, including negative stock, exits 2; an unknown item or operation exits 4.\n" +
			"Amounts are exact decimals: quantities at the item's scale, values at the currency's minor unit,\n" +
			"unit costs and rates with up to 9 more places. docs/VALUATIONS.md explains the arithmetic.",
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error { return cmd.Help() },
	}
	cmd.PersistentFlags().StringVar(&opts.tenant, "tenant", "", "tenant whose stock is valued (required)")
	cmd.AddCommand(newValItemCommand(a, opts), newValReceiveCommand(a, opts), newValIssueCommand(a, opts),
		newValAdjustCommand(a, opts), newValTransferCommand(a, opts), newValReverseCommand(a, opts),
		newValShowCommand(a, opts), newValLayersCommand(a, opts))
	return cmd
}

func (o *valOptions) requireTenant(cmd *cobra.Command) error {
	if o.tenant == "" {
		return usageErrorf("%s: --tenant is required", cmd.CommandPath())
	}
	return nil
}

// operationFlag adds --op.
func (o *valOptions) operationFlag(cmd *cobra.Command) {
	cmd.Flags().StringVar(&o.operation, "op", "", "operation id (required; a retry with the same id replays)")
}

func (o *valOptions) requireOperation(cmd *cobra.Command) error {
	if err := o.requireTenant(cmd); err != nil {
		return err
	}
	if o.operation == "" {
		return usageErrorf("%s: --op is required (a retry with the same operation id replays)", cmd.CommandPath())
	}
	return nil
}

// valDecimal parses an amount at exactly scale.
func valDecimal(what, text string, scale uint8) (decimal.Decimal, error) {
	d, err := decimal.Parse(text, scale)
	if err != nil {
		return decimal.Decimal{}, invalidInputf("%s %q at %d decimal places: %w", what, text, scale, err)
	}
	return d, nil
}

// valRate parses a unit cost or rate at the places it is written with.
func valRate(what, text string) (*decimal.Decimal, error) {
	d, err := wire.Rate(what, text)
	if err != nil {
		return nil, invalidInputf("%w", err)
	}
	return d, nil
}

func newValItemCommand(a *app, opts *valOptions) *cobra.Command {
	cmd := &cobra.Command{Use: "item", Short: "Define and list valued items", Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error { return cmd.Help() }}
	var method, currency string
	var scale, minorUnit uint8
	var allowNegative bool
	add := &cobra.Command{
		Use:   "add ITEM --method moving_average|fifo --currency EUR [--minor-unit 2] [--scale N] [--allow-negative]",
		Short: "Define an item's valuation, or change its method (only at quantity zero) or negative-stock policy",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := opts.requireTenant(cmd); err != nil {
				return err
			}
			m, err := valuations.ParseMethod(method)
			if err != nil {
				return err
			}
			it := valuations.Item{Tenant: opts.tenant, ID: args[0], Method: m, QuantityScale: scale,
				Currency: currency, MinorUnit: minorUnit, AllowNegative: allowNegative}
			return a.withDB(cmd, false, func(ctx context.Context, db *chain.DB) error {
				res, err := valuations.DefineItem(ctx, db, it)
				if err != nil {
					return err
				}
				out := newValItemJSON(res.Item)
				out.Seq, out.Unchanged = res.Entry.Seq, res.Unchanged
				return a.print(cmd, out, func(w io.Writer) error {
					state := fmt.Sprintf("defined at %s seq %d", res.Entry.Chain, res.Entry.Seq)
					if res.Unchanged {
						state = fmt.Sprintf("unchanged (%s seq %d, nothing written)", res.Entry.Chain, res.Entry.Seq)
					}
					_, err := fmt.Fprintf(w, "item %s: %s, %s, %s: %s\n", it.ID, it.Method, it.Currency, negativeText(it.AllowNegative), state)
					return err
				})
			})
		},
	}
	add.Flags().StringVar(&method, "method", "", "valuation method: moving_average (ma) or fifo (required)")
	add.Flags().StringVar(&currency, "currency", "", "ISO 4217 currency code such as EUR (required)")
	add.Flags().Uint8Var(&minorUnit, "minor-unit", 2, fmt.Sprintf("decimal places of the currency, 0 to %d (fixed once defined)", valuations.MinorUnitMax))
	add.Flags().Uint8Var(&scale, "scale", 0, fmt.Sprintf("decimal places of quantities, 0 to %d (fixed once defined)", valuations.QuantityScaleMax))
	add.Flags().BoolVar(&allowNegative, "allow-negative", false, "allow issues beyond the stock, valued at an estimate settled by the next receipt")
	list := &cobra.Command{
		Use:   "list",
		Short: "List the tenant's valued items",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := opts.requireTenant(cmd); err != nil {
				return err
			}
			return a.withDB(cmd, true, func(ctx context.Context, db *chain.DB) error {
				items, err := valuations.Items(ctx, db, opts.tenant, "", 0)
				if err != nil {
					return err
				}
				return printList(cmd, a, items, "items", newValItemJSON,
					"ITEM\tMETHOD\tSCALE\tCURRENCY\tNEGATIVE", func(it valuations.Item) string {
						return fmt.Sprintf("%s\t%s\t%d\t%s/%d\t%s", it.ID, it.Method, it.QuantityScale, it.Currency, it.MinorUnit,
							negativeText(it.AllowNegative))
					})
			})
		},
	}
	cmd.AddCommand(add, list)
	return cmd
}

func negativeText(allowed bool) string {
	if allowed {
		return "negative stock allowed"
	}
	return "negative stock refused"
}

func printValResult(cmd *cobra.Command, a *app, tenant, item string, res valuations.Result) error {
	return a.print(cmd, newValResultJSON(tenant, item, res), func(w io.Writer) error {
		for _, leg := range res.Legs {
			replayed := ""
			if res.Replayed {
				replayed = " replayed=true (nothing written)"
			}
			if _, err := fmt.Fprintf(w, "%s %s at %s: quantity %s → %s, value %s → %s (seq %d/%d)%s\n", item, res.OperationID,
				leg.Location, valSigned(leg.QuantityChange), leg.Quantity, valSigned(leg.ValueChange), leg.Value,
				leg.QuantityEntry.Seq, leg.ValueEntry.Seq, replayed); err != nil {
				return err
			}
			for _, st := range leg.Settlements {
				if _, err := fmt.Fprintf(w, "  settles %s: %s estimated %s, actual %s, correction %s\n", st.OperationID,
					st.Quantity, st.Estimated, st.Actual, valSigned(st.Correction)); err != nil {
					return err
				}
			}
		}
		return nil
	})
}

func valSigned(d decimal.Decimal) string {
	if d.Sign() > 0 {
		return "+" + d.String()
	}
	return d.String()
}

// valOperation loads the item, builds and runs one operation, and prints it.
func valOperation(cmd *cobra.Command, a *app, opts *valOptions, item string,
	run func(ctx context.Context, db *chain.DB, it valuations.Item) (valuations.Result, error)) error {
	if err := opts.requireOperation(cmd); err != nil {
		return err
	}
	return a.withDB(cmd, false, func(ctx context.Context, db *chain.DB) error {
		it, err := valuations.GetItem(ctx, db, opts.tenant, item)
		if err != nil {
			return err
		}
		res, err := run(ctx, db, it)
		if err != nil {
			return err
		}
		return printValResult(cmd, a, opts.tenant, item, res)
	})
}

func newValReceiveCommand(a *app, opts *valOptions) *cobra.Command {
	var unitCost, value string
	cmd := &cobra.Command{
		Use:   "receive ITEM LOCATION QUANTITY (--unit-cost COST | --value TOTAL) --op ID",
		Short: "Record a receipt at a unit cost or for a total value",
		Args:  exactArgs(3),
		RunE: func(cmd *cobra.Command, args []string) error {
			if (unitCost == "") == (value == "") {
				return usageErrorf("%s: give exactly one of --unit-cost and --value", cmd.CommandPath())
			}
			return valOperation(cmd, a, opts, args[0], func(ctx context.Context, db *chain.DB, it valuations.Item) (valuations.Result, error) {
				q, err := valDecimal("quantity", args[2], it.QuantityScale)
				if err != nil {
					return valuations.Result{}, err
				}
				r := valuations.ReceiveRequest{Tenant: opts.tenant, Item: it.ID, Location: args[1], OperationID: opts.operation, Quantity: q}
				if r.UnitCost, err = valRate("unit cost", unitCost); err != nil {
					return valuations.Result{}, err
				}
				if value != "" {
					v, err := valDecimal("value", value, it.MinorUnit)
					if err != nil {
						return valuations.Result{}, err
					}
					r.Value = &v
				}
				return valuations.Receive(ctx, db, r)
			})
		},
	}
	cmd.Flags().StringVar(&unitCost, "unit-cost", "", "cost of one quantity unit")
	cmd.Flags().StringVar(&value, "value", "", "total value of the receipt, at the currency's minor unit")
	opts.operationFlag(cmd)
	return cmd
}

func newValIssueCommand(a *app, opts *valOptions) *cobra.Command {
	var estimate string
	cmd := &cobra.Command{
		Use:   "issue ITEM LOCATION QUANTITY --op ID [--estimate-rate RATE]",
		Short: "Record an issue; its value is computed (refused beyond the stock unless the item allows it)",
		Args:  exactArgs(3),
		RunE: func(cmd *cobra.Command, args []string) error {
			return valOperation(cmd, a, opts, args[0], func(ctx context.Context, db *chain.DB, it valuations.Item) (valuations.Result, error) {
				q, err := valDecimal("quantity", args[2], it.QuantityScale)
				if err != nil {
					return valuations.Result{}, err
				}
				r := valuations.IssueRequest{Tenant: opts.tenant, Item: it.ID, Location: args[1], OperationID: opts.operation, Quantity: q}
				if r.EstimateRate, err = valRate("estimate rate", estimate); err != nil {
					return valuations.Result{}, err
				}
				return valuations.Issue(ctx, db, r)
			})
		},
	}
	cmd.Flags().StringVar(&estimate, "estimate-rate", "", "rate for the part beyond the stock (default: the last known rate)")
	opts.operationFlag(cmd)
	return cmd
}

func newValAdjustCommand(a *app, opts *valOptions) *cobra.Command {
	var amount, unitCost string
	cmd := &cobra.Command{
		Use:   "adjust ITEM LOCATION (--amount ±VALUE | --unit-cost COST) --op ID",
		Short: "Change value without quantity: add landed cost or a correction, or revalue at a unit cost",
		Args:  exactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if (amount == "") == (unitCost == "") {
				return usageErrorf("%s: give exactly one of --amount and --unit-cost", cmd.CommandPath())
			}
			return valOperation(cmd, a, opts, args[0], func(ctx context.Context, db *chain.DB, it valuations.Item) (valuations.Result, error) {
				r := valuations.AdjustRequest{Tenant: opts.tenant, Item: it.ID, Location: args[1], OperationID: opts.operation}
				var err error
				if r.UnitCost, err = valRate("unit cost", unitCost); err != nil {
					return valuations.Result{}, err
				}
				if amount != "" {
					v, err := valDecimal("amount", amount, it.MinorUnit)
					if err != nil {
						return valuations.Result{}, err
					}
					r.Amount = &v
				}
				return valuations.Adjust(ctx, db, r)
			})
		},
	}
	cmd.Flags().StringVar(&amount, "amount", "", "signed value to add, at the currency's minor unit")
	cmd.Flags().StringVar(&unitCost, "unit-cost", "", "revalue the stock at this unit cost")
	opts.operationFlag(cmd)
	return cmd
}

func newValTransferCommand(a *app, opts *valOptions) *cobra.Command {
	var estimate string
	cmd := &cobra.Command{
		Use:   "transfer ITEM FROM TO QUANTITY --op ID [--estimate-rate RATE]",
		Short: "Move quantity between locations at the source's valuation, atomically",
		Args:  exactArgs(4),
		RunE: func(cmd *cobra.Command, args []string) error {
			return valOperation(cmd, a, opts, args[0], func(ctx context.Context, db *chain.DB, it valuations.Item) (valuations.Result, error) {
				q, err := valDecimal("quantity", args[3], it.QuantityScale)
				if err != nil {
					return valuations.Result{}, err
				}
				r := valuations.TransferRequest{Tenant: opts.tenant, Item: it.ID, From: args[1], To: args[2], OperationID: opts.operation, Quantity: q}
				if r.EstimateRate, err = valRate("estimate rate", estimate); err != nil {
					return valuations.Result{}, err
				}
				return valuations.Transfer(ctx, db, r)
			})
		},
	}
	cmd.Flags().StringVar(&estimate, "estimate-rate", "", "rate for the part beyond the source's stock")
	opts.operationFlag(cmd)
	return cmd
}

func newValReverseCommand(a *app, opts *valOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "reverse ITEM LOCATION ORIGINAL_OP --op ID",
		Short: "Append the opposite of an earlier operation (a transfer: name its source location)",
		Args:  exactArgs(3),
		RunE: func(cmd *cobra.Command, args []string) error {
			return valOperation(cmd, a, opts, args[0], func(ctx context.Context, db *chain.DB, it valuations.Item) (valuations.Result, error) {
				return valuations.Reverse(ctx, db, valuations.ReverseRequest{Tenant: opts.tenant, Item: it.ID, Location: args[1],
					OperationID: opts.operation, Reverses: args[2]})
			})
		},
	}
	opts.operationFlag(cmd)
	return cmd
}

func newValShowCommand(a *app, opts *valOptions) *cobra.Command {
	var atSeq uint64
	cmd := &cobra.Command{
		Use:   "show ITEM [LOCATION] [--at-seq N]",
		Short: "Show quantity, value and rate per location, now or as of a seq of the location's value chain",
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) < 1 || len(args) > 2 {
				return usageErrorf("%s takes ITEM and optionally LOCATION, got %d argument(s)", cmd.CommandPath(), len(args))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := opts.requireTenant(cmd); err != nil {
				return err
			}
			if cmd.Flags().Changed("at-seq") && len(args) != 2 {
				return usageErrorf("%s: --at-seq needs a LOCATION", cmd.CommandPath())
			}
			return a.withDB(cmd, true, func(ctx context.Context, db *chain.DB) error {
				var balances []valuations.Balance
				switch {
				case cmd.Flags().Changed("at-seq"):
					b, err := valuations.BalanceAt(ctx, db, opts.tenant, args[0], args[1], atSeq)
					if err != nil {
						return err
					}
					balances = append(balances, b)
				case len(args) == 2:
					b, err := valuations.GetBalance(ctx, db, opts.tenant, args[0], args[1])
					if err != nil {
						return err
					}
					balances = append(balances, b)
				default:
					var err error
					if balances, err = valuations.Balances(ctx, db, opts.tenant, args[0]); err != nil {
						return err
					}
				}
				out := struct {
					Balances []valBalanceJSON `json:"balances"`
				}{Balances: []valBalanceJSON{}}
				for _, b := range balances {
					out.Balances = append(out.Balances, newValBalanceJSON(b))
				}
				return a.print(cmd, out, func(w io.Writer) error {
					tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
					fmt.Fprintf(tw, "LOCATION\tMETHOD\tQUANTITY\tVALUE\tRATE\tSEQ qty/value\t\n")
					for _, b := range out.Balances {
						fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d/%d\t\n", b.Location, b.Method, b.Quantity, b.Value, b.Rate, b.QuantitySeq, b.ValueSeq)
						for _, p := range b.Pending {
							fmt.Fprintf(tw, "  pending %s\t\t%s\t-%s\t\t\t\n", p.Operation, p.Quantity, p.Estimate)
						}
					}
					return tw.Flush()
				})
			})
		},
	}
	cmd.Flags().Uint64Var(&atSeq, "at-seq", 0, "the balance after this seq of the location's value chain (0: before the first)")
	return cmd
}

func newValLayersCommand(a *app, opts *valOptions) *cobra.Command {
	var limit int
	cmd := &cobra.Command{
		Use:   "layers ITEM LOCATION [--limit N]",
		Short: "List the open FIFO layers of a location, oldest (consumed first) first",
		Args:  exactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := opts.requireTenant(cmd); err != nil {
				return err
			}
			if limit < 1 || limit > valuations.LayersMax {
				return usageErrorf("%s: --limit %d: want 1 to %d", cmd.CommandPath(), limit, valuations.LayersMax)
			}
			return a.withDB(cmd, true, func(ctx context.Context, db *chain.DB) error {
				layers, err := valuations.Layers(ctx, db, opts.tenant, args[0], args[1], limit)
				if err != nil {
					return err
				}
				return printList(cmd, a, layers, "layers", func(l valuations.Layer) valLayerJSON {
					return valLayerJSON{Number: l.Number, ID: l.ID, Quantity: l.Quantity.String(), Value: l.Value.String()}
				}, "LAYER\tQUANTITY\tVALUE\t", func(l valuations.Layer) string {
					return fmt.Sprintf("%d\t%s\t%s\t", l.Number, l.Quantity, l.Value)
				})
			})
		},
	}
	cmd.Flags().IntVar(&limit, "limit", valLayersLimitDefault, "the most layers to list")
	return cmd
}
