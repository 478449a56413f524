package main

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/ledgerworks/ledger/api"
	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/financial"
	"github.com/ledgerworks/ledger/internal/wire"
)

// The JSON shapes of the fin commands are the HTTP API's (api, built by
// internal/wire).
type (
	finAccountJSON  = api.FinAccount
	finCurrencyJSON = api.FinCurrency
	finBalanceJSON  = api.FinBalance
)

var (
	newFinAccountJSON = wire.FinAccount
	newFinPostingJSON = wire.FinPosting
	newFinBalanceJSON = wire.FinBalance
)

func init() {
	registerCommand(newFinCommand)
	registerCheck("fin", financial.Check)
}

// finBookDefault is the book the fin commands use without --book.
const finBookDefault = "main"

// finOptions are the flags the fin commands share.
type finOptions struct {
	tenant string
	book   string
}

func newFinCommand(a *app) *cobra.Command {
	opts := &finOptions{}
	cmd := &cobra.Command{
		Use:   "fin",
		Short: "Keep double-entry books: accounts, currencies, postings, reversals, balances",
		Long: "fin keeps a tenant's books (--tenant, --book): a chart of accounts, currencies with their\n" +
			"minor-unit exponent, and one hash-linked journal of postings. Every posting balances exactly\n" +
			"per currency. Amounts are decimals parsed exactly at the currency's exponent. A posting needs\n" +
			"--key: a retry with the same key prints the original posting (replayed) and writes nothing;\n" +
			"the same key with another posting is an idempotency conflict (exit 3). Refused input, including\n" +
			"an unbalanced posting or a closed account, exits 2; an unknown account or posting in a query exits 4.",
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error { return cmd.Help() },
	}
	cmd.PersistentFlags().StringVar(&opts.tenant, "tenant", "", "tenant whose books are kept (required)")
	cmd.PersistentFlags().StringVar(&opts.book, "book", finBookDefault, "book of the tenant")
	cmd.AddCommand(newFinAccountCommand(a, opts), newFinCurrencyCommand(a, opts), newFinPostCommand(a, opts),
		newFinReverseCommand(a, opts), newFinPostingCommand(a, opts), newFinBalanceCommand(a, opts),
		newFinTrialBalanceCommand(a, opts))
	return cmd
}

// withBook checks --tenant and --book, opens the ledger and runs fn.
func (o *finOptions) withBook(cmd *cobra.Command, a *app, readOnly bool, fn func(ctx context.Context, b *financial.Book) error) error {
	if o.tenant == "" {
		return usageErrorf("%s: --tenant is required", cmd.CommandPath())
	}
	if _, err := financial.NewBook(nil, o.tenant, o.book); err != nil {
		return err
	}
	return a.withDB(cmd, readOnly, func(ctx context.Context, db *chain.DB) error {
		b, err := financial.NewBook(db, o.tenant, o.book)
		if err != nil {
			return err
		}
		return fn(ctx, b)
	})
}

func newFinAccountCommand(a *app, opts *finOptions) *cobra.Command {
	cmd := &cobra.Command{Use: "account", Short: "Define, close and list accounts", Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error { return cmd.Help() }}
	var name, typeName, normal string
	add := &cobra.Command{
		Use:   "add CODE --name NAME --type asset|liability|equity|income|expense [--normal debit|credit]",
		Short: "Define an account (a journal entry; the definition never changes)",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			accountType, err := financial.ParseAccountType(typeName)
			if err != nil {
				return err
			}
			var side financial.Side
			if normal != "" {
				if side, err = financial.ParseSide(normal); err != nil {
					return err
				}
			}
			return opts.withBook(cmd, a, false, func(ctx context.Context, b *financial.Book) error {
				res, err := b.AddAccount(ctx, financial.Account{Code: args[0], Name: name, Type: accountType, NormalSide: side})
				if err != nil {
					return err
				}
				return printFinAccount(cmd, a, b, res, "defined")
			})
		},
	}
	add.Flags().StringVar(&name, "name", "", "account name (required)")
	add.Flags().StringVar(&typeName, "type", "", "asset, liability, equity, income or expense (required)")
	add.Flags().StringVar(&normal, "normal", "", "normal balance side, debit or credit (default: from the type)")
	closeCmd := &cobra.Command{
		Use:   "close CODE",
		Short: "Close an account: it keeps its balances and takes no new postings (final)",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return opts.withBook(cmd, a, false, func(ctx context.Context, b *financial.Book) error {
				res, err := b.CloseAccount(ctx, args[0])
				if err != nil {
					return err
				}
				return printFinAccount(cmd, a, b, res, "closed")
			})
		},
	}
	list := &cobra.Command{
		Use:   "list",
		Short: "List the chart of accounts",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return opts.withBook(cmd, a, true, func(ctx context.Context, b *financial.Book) error {
				accounts, err := b.Accounts(ctx)
				if err != nil {
					return err
				}
				out := struct {
					Accounts []finAccountJSON `json:"accounts"`
				}{Accounts: []finAccountJSON{}}
				for _, acc := range accounts {
					out.Accounts = append(out.Accounts, newFinAccountJSON(b, acc))
				}
				return a.print(cmd, out, func(w io.Writer) error {
					tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
					fmt.Fprintf(tw, "CODE\tTYPE\tNORMAL\tSTATUS\tNAME\n")
					for _, acc := range accounts {
						fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", acc.Code, acc.Type, acc.NormalSide, accountStatus(acc), acc.Name)
					}
					return tw.Flush()
				})
			})
		},
	}
	cmd.AddCommand(add, closeCmd, list)
	return cmd
}

func accountStatus(acc financial.Account) string {
	if acc.Closed {
		return fmt.Sprintf("closed@%d", acc.ClosedSeq)
	}
	return "open"
}

func printFinAccount(cmd *cobra.Command, a *app, b *financial.Book, res financial.AccountResult, verb string) error {
	out := newFinAccountJSON(b, res.Account)
	out.Seq, out.Replayed = res.Seq, res.Replayed
	return a.print(cmd, out, func(w io.Writer) error {
		_, err := fmt.Fprintf(w, "account %s (%s, normal %s) %s at journal seq %d%s\n", res.Account.Code, res.Account.Type,
			res.Account.NormalSide, verb, res.Seq, replayedText(res.Replayed))
		return err
	})
}

func replayedText(replayed bool) string {
	if replayed {
		return ", replayed (nothing written)"
	}
	return ""
}

func newFinCurrencyCommand(a *app, opts *finOptions) *cobra.Command {
	cmd := &cobra.Command{Use: "currency", Short: "Define and list currencies", Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error { return cmd.Help() }}
	var exponent uint8
	add := &cobra.Command{
		Use:   "add CODE --exponent N",
		Short: "Define a currency and its minor-unit exponent (2 for cents; fixed once defined)",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !cmd.Flags().Changed("exponent") {
				return usageErrorf("%s: --exponent is required", cmd.CommandPath())
			}
			return opts.withBook(cmd, a, false, func(ctx context.Context, b *financial.Book) error {
				res, err := b.AddCurrency(ctx, financial.Currency{Code: args[0], Exponent: exponent})
				if err != nil {
					return err
				}
				out := finCurrencyJSON{Tenant: b.Tenant(), Book: b.Name(), Code: res.Currency.Code, Exponent: res.Currency.Exponent,
					DefinedSeq: res.Currency.DefinedSeq, Replayed: res.Replayed}
				return a.print(cmd, out, func(w io.Writer) error {
					_, err := fmt.Fprintf(w, "currency %s (exponent %d) defined at journal seq %d%s\n", out.Code, out.Exponent,
						out.DefinedSeq, replayedText(out.Replayed))
					return err
				})
			})
		},
	}
	add.Flags().Uint8Var(&exponent, "exponent", 0, fmt.Sprintf("minor-unit exponent, 0 to %d (required)", financial.ExponentMax))
	list := &cobra.Command{
		Use:   "list",
		Short: "List the book's currencies",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return opts.withBook(cmd, a, true, func(ctx context.Context, b *financial.Book) error {
				currencies, err := b.Currencies(ctx)
				if err != nil {
					return err
				}
				out := struct {
					Currencies []finCurrencyJSON `json:"currencies"`
				}{Currencies: []finCurrencyJSON{}}
				for _, c := range currencies {
					out.Currencies = append(out.Currencies, finCurrencyJSON{Tenant: b.Tenant(), Book: b.Name(), Code: c.Code,
						Exponent: c.Exponent, DefinedSeq: c.DefinedSeq})
				}
				return a.print(cmd, out, func(w io.Writer) error {
					tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
					fmt.Fprintf(tw, "CODE\tEXPONENT\tDEFINED\n")
					for _, c := range currencies {
						fmt.Fprintf(tw, "%s\t%d\t%d\n", c.Code, c.Exponent, c.DefinedSeq)
					}
					return tw.Flush()
				})
			})
		},
	}
	cmd.AddCommand(add, list)
	return cmd
}

func printFinPosting(cmd *cobra.Command, a *app, b *financial.Book, res financial.PostingResult) error {
	return a.print(cmd, newFinPostingJSON(b, res), func(w io.Writer) error {
		p := res.Posting
		what := "posting " + p.Key
		if p.Reverses != 0 {
			what = fmt.Sprintf("reversal of seq %d", p.Reverses)
		}
		fmt.Fprintf(w, "%s: journal seq %d, dated %s, hash %.16s…%s\n", what, res.Seq, p.Date, res.Hash, replayedText(res.Replayed))
		if p.Memo != "" || p.Reference != "" {
			fmt.Fprintf(w, "memo %q reference %q\n", p.Memo, p.Reference)
		}
		tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', tabwriter.AlignRight)
		for _, l := range p.Lines {
			debit, credit := l.Amount.String(), ""
			if l.Side == financial.Credit {
				debit, credit = "", l.Amount.String()
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t\n", l.Account, debit, credit, l.Currency)
		}
		return tw.Flush()
	})
}

func newFinPostCommand(a *app, opts *finOptions) *cobra.Command {
	var key, date, memo, reference string
	var debits, credits []string
	cmd := &cobra.Command{
		Use:   "post --key KEY --date YYYY-MM-DD --debit ACCOUNT:AMOUNT:CURRENCY… --credit ACCOUNT:AMOUNT:CURRENCY…",
		Short: "Record a balanced posting (lines are kept debits first, each side in the order given)",
		Example: "  ledgerctl fin --tenant acme post --key grn-42 --date 2026-11-02 --memo 'goods received' \\\n" +
			"    --debit 1400:1250.00:EUR --credit 2100:1250.00:EUR",
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if key == "" {
				return usageErrorf("%s: --key is required (a retry with the same key replays)", cmd.CommandPath())
			}
			if date == "" {
				return usageErrorf("%s: --date is required", cmd.CommandPath())
			}
			effective, err := financial.ParseDate(date)
			if err != nil {
				return err
			}
			return opts.withBook(cmd, a, false, func(ctx context.Context, b *financial.Book) error {
				lines, err := b.ParseLines(ctx, debits, credits)
				if err != nil {
					return err
				}
				res, err := b.Post(ctx, financial.Posting{Key: key, Date: effective, Memo: memo, Reference: reference, Lines: lines})
				if err != nil {
					return err
				}
				return printFinPosting(cmd, a, b, res)
			})
		},
	}
	cmd.Flags().StringVar(&key, "key", "", "idempotency key of the posting (required)")
	cmd.Flags().StringVar(&date, "date", "", "effective date YYYY-MM-DD (required)")
	cmd.Flags().StringVar(&memo, "memo", "", "description")
	cmd.Flags().StringVar(&reference, "reference", "", "document number, such as an invoice")
	cmd.Flags().StringArrayVar(&debits, "debit", nil, "debit line ACCOUNT:AMOUNT:CURRENCY (repeatable)")
	cmd.Flags().StringArrayVar(&credits, "credit", nil, "credit line ACCOUNT:AMOUNT:CURRENCY (repeatable)")
	return cmd
}

// postingSelector is the --seq/--key pair that names a posting.
type postingSelector struct {
	seq uint64
	key string
}

func (s *postingSelector) flags(cmd *cobra.Command) {
	cmd.Flags().Uint64Var(&s.seq, "seq", 0, "journal seq of the posting")
	cmd.Flags().StringVar(&s.key, "key", "", "idempotency key of the posting")
}

func (s *postingSelector) check(cmd *cobra.Command) error {
	if (s.seq == 0) == (s.key == "") {
		return usageErrorf("%s: name the posting with --seq or --key (one of them)", cmd.CommandPath())
	}
	return nil
}

func (s *postingSelector) find(ctx context.Context, b *financial.Book) (financial.PostingResult, error) {
	if s.key != "" {
		return b.PostingByKey(ctx, s.key)
	}
	return b.Posting(ctx, s.seq)
}

func newFinReverseCommand(a *app, opts *finOptions) *cobra.Command {
	var selector postingSelector
	var date, memo string
	cmd := &cobra.Command{
		Use:   "reverse (--seq N | --key KEY) [--date YYYY-MM-DD] [--memo TEXT]",
		Short: "Append the opposite of a posting (once; asking again replays the reversal)",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := selector.check(cmd); err != nil {
				return err
			}
			var effective financial.Date
			if date != "" {
				var err error
				if effective, err = financial.ParseDate(date); err != nil {
					return err
				}
			}
			return opts.withBook(cmd, a, false, func(ctx context.Context, b *financial.Book) error {
				if date == "" {
					original, err := selector.find(ctx, b)
					if err != nil {
						return err
					}
					effective = original.Posting.Date
				}
				res, err := b.Reverse(ctx, financial.Reversal{Seq: selector.seq, Key: selector.key, Date: effective, Memo: memo})
				if err != nil {
					return err
				}
				return printFinPosting(cmd, a, b, res)
			})
		},
	}
	selector.flags(cmd)
	cmd.Flags().StringVar(&date, "date", "", "effective date of the reversal (default: the original's)")
	cmd.Flags().StringVar(&memo, "memo", "", "why the posting is reversed")
	return cmd
}

func newFinPostingCommand(a *app, opts *finOptions) *cobra.Command {
	var selector postingSelector
	cmd := &cobra.Command{
		Use:   "posting (--seq N | --key KEY)",
		Short: "Show one posting of the journal",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := selector.check(cmd); err != nil {
				return err
			}
			return opts.withBook(cmd, a, true, func(ctx context.Context, b *financial.Book) error {
				res, err := selector.find(ctx, b)
				if err != nil {
					return err
				}
				return printFinPosting(cmd, a, b, res)
			})
		},
	}
	selector.flags(cmd)
	return cmd
}

func newFinBalanceCommand(a *app, opts *finOptions) *cobra.Command {
	var atSeq uint64
	var asOf string
	cmd := &cobra.Command{
		Use:   "balance ACCOUNT [CURRENCY] [--at-seq N | --as-of YYYY-MM-DD]",
		Short: "Print an account's balance: current, after a journal seq, or as of an effective date",
		Long: "balance prints debits minus credits (amount) and the balance on the account's normal side\n" +
			"(normal). --at-seq N gives what the books showed after journal entry N; --as-of D sums every\n" +
			"posting dated on or before D that the journal holds now, back-dated ones included. Without a\n" +
			"currency it prints the current balance in every currency the account has postings in.",
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) < 1 || len(args) > 2 {
				return usageErrorf("%s takes ACCOUNT [CURRENCY] (usage: %s)", cmd.CommandPath(), cmd.UseLine())
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			seqGiven := cmd.Flags().Changed("at-seq")
			if seqGiven && asOf != "" {
				return usageErrorf("%s: --at-seq and --as-of exclude each other", cmd.CommandPath())
			}
			if (seqGiven || asOf != "") && len(args) < 2 {
				return usageErrorf("%s: --at-seq and --as-of need a CURRENCY", cmd.CommandPath())
			}
			var date financial.Date
			if asOf != "" {
				var err error
				if date, err = financial.ParseDate(asOf); err != nil {
					return err
				}
			}
			return opts.withBook(cmd, a, true, func(ctx context.Context, b *financial.Book) error {
				if len(args) == 1 {
					balances, err := b.Balances(ctx, args[0])
					if err != nil {
						return err
					}
					out := struct {
						Balances []finBalanceJSON `json:"balances"`
					}{Balances: []finBalanceJSON{}}
					for _, bal := range balances {
						out.Balances = append(out.Balances, newFinBalanceJSON(b, bal))
					}
					return a.print(cmd, out, func(w io.Writer) error { return writeBalances(w, balances) })
				}
				var bal financial.Balance
				var err error
				switch {
				case seqGiven:
					bal, err = b.BalanceAtSeq(ctx, args[0], args[1], atSeq)
				case asOf != "":
					bal, err = b.BalanceAtDate(ctx, args[0], args[1], date)
				default:
					bal, err = b.Balance(ctx, args[0], args[1])
				}
				if err != nil {
					return err
				}
				return a.print(cmd, newFinBalanceJSON(b, bal), func(w io.Writer) error {
					return writeBalances(w, []financial.Balance{bal})
				})
			})
		},
	}
	cmd.Flags().Uint64Var(&atSeq, "at-seq", 0, "balance after this journal seq")
	cmd.Flags().StringVar(&asOf, "as-of", "", "balance of the postings dated on or before YYYY-MM-DD")
	return cmd
}

func writeBalances(w io.Writer, balances []financial.Balance) error {
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintf(tw, "ACCOUNT\tCURRENCY\tAMOUNT\tNORMAL\tPOSTINGS\tAS OF\n")
	for _, bal := range balances {
		asOf := fmt.Sprintf("seq %d", bal.Seq)
		if bal.Date != nil {
			asOf = fmt.Sprintf("%s (journal seq %d)", bal.Date, bal.Seq)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s %s\t%d\t%s\n", bal.Account, bal.Currency, bal.Amount, bal.Normal,
			bal.NormalSide, bal.Postings, asOf)
	}
	return tw.Flush()
}

func newFinTrialBalanceCommand(a *app, opts *finOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "trial-balance",
		Short: "List every balance with debit and credit totals per currency (their difference is zero)",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return opts.withBook(cmd, a, true, func(ctx context.Context, b *financial.Book) error {
				tb, err := b.TrialBalance(ctx)
				if err != nil {
					return err
				}
				out := wire.FinTrialBalance(b, tb)
				return a.print(cmd, out, func(w io.Writer) error { return writeTrialBalance(w, &tb) })
			})
		},
	}
}

func writeTrialBalance(w io.Writer, tb *financial.TrialBalance) error {
	fmt.Fprintf(w, "trial balance at journal seq %d\n", tb.Seq)
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "ACCOUNT\tCURRENCY\tDEBIT\tCREDIT\t\n")
	for _, bal := range tb.Rows {
		debit, credit := bal.Amount.String(), ""
		if bal.Amount.Sign() < 0 {
			negated, err := bal.Amount.Neg()
			if err != nil {
				return err
			}
			debit, credit = "", negated.String()
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t\n", bal.Account, bal.Currency, debit, credit)
	}
	for _, total := range tb.Totals {
		fmt.Fprintf(tw, "total\t%s\t%s\t%s\t\n", total.Currency, total.Debit, total.Credit)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, total := range tb.Totals {
		fmt.Fprintf(w, "%s: debits - credits = %s\n", total.Currency, total.Net)
	}
	return nil
}
