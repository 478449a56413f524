package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/ledgerworks/ledger/apikey"
	"github.com/ledgerworks/ledger/chain"
)

func init() {
	registerCommand(newAPIKeyCommand)
	registerCheck("apikey", apikey.Check)
	stateRebuilders = append(stateRebuilders, stateRebuilder{apikey.Domain, func(ctx context.Context, db *chain.DB) (rebuildJSON, error) {
		s, err := apikey.Rebuild(ctx, db)
		return newRebuildJSON(apikey.Domain, 1, s.Entries, s.Written, s.Deleted, s.Failures), err
	}})
}

func newAPIKeyCommand(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "apikey",
		Short: "Create, list and revoke the API keys of `ledgerctl serve`",
		Long: "apikey manages the keys a server accepts in Authorization: Bearer. Each key belongs to one\n" +
			"tenant and has scopes (read, write, admin; admin implies neither of the others). Creations and\n" +
			"revocations are entries of the hash-chained system chain " + apikey.SystemChain + ", which verify\n" +
			"covers; the ledger keeps only a digest of each token's secret, so the token is printed once.\n" +
			"On a ledger file these commands cannot run beside a server holding it: use the server's\n" +
			"/v1/apikeys routes then. See docs/APIKEYS.md.",
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newAPIKeyCreateCommand(a), newAPIKeyListCommand(a), newAPIKeyRevokeCommand(a))
	return cmd
}

// apikeyJSON is one key in the apikey commands' JSON; Token only from
// create.
type apikeyJSON struct {
	ID              string   `json:"id"`
	Token           string   `json:"token,omitempty"`
	Tenant          string   `json:"tenant"`
	Name            string   `json:"name"`
	Scopes          []string `json:"scopes"`
	Status          string   `json:"status"`
	CreatedUnixNano int64    `json:"created_unix_nano"`
	Created         string   `json:"created"`
	RevokedUnixNano int64    `json:"revoked_unix_nano,omitempty"`
	Revoked         string   `json:"revoked,omitempty"`
	RevokedReason   string   `json:"revoked_reason,omitempty"`
}

func newAPIKeyJSON(k apikey.Key, token string) apikeyJSON {
	out := apikeyJSON{ID: k.ID, Token: token, Tenant: k.Tenant, Name: k.Name, Scopes: apikey.ScopeStrings(k.Scopes),
		Status: keyStatus(k), CreatedUnixNano: k.CreatedUnixNano, Created: formatNano(k.CreatedUnixNano)}
	if k.Revoked() {
		out.RevokedUnixNano, out.Revoked, out.RevokedReason = k.RevokedUnixNano, formatNano(k.RevokedUnixNano), k.RevokedReason
	}
	return out
}

func keyStatus(k apikey.Key) string {
	if k.Revoked() {
		return "revoked"
	}
	return "valid"
}

type apikeyCreateOptions struct {
	tenant, name, scopes string
}

func newAPIKeyCreateCommand(a *app) *cobra.Command {
	opts := apikeyCreateOptions{}
	cmd := &cobra.Command{
		Use:   "create --tenant T --scopes read,write,admin [--name N]",
		Short: "Create a key and print its token, once (the ledger is created when missing)",
		Long: "create records a new key of the tenant with the scopes and prints its token, which is shown\n" +
			"only now: store it in a secret manager. With -o json it prints {\"id\",\"token\",\"tenant\",\n" +
			"\"scopes\",…} for scripts. Tenants beginning with \"" + apikey.ReservedPrefix + "\" are reserved.",
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if opts.tenant == "" || opts.scopes == "" {
				return usageErrorf("apikey create: --tenant and --scopes are required")
			}
			scopes, err := apikey.ParseScopes(opts.scopes)
			if err != nil {
				return err
			}
			db, _, err := a.createDB(cmd.Context())
			if err != nil {
				return err
			}
			defer db.Close()
			key, token, err := apikey.Create(cmd.Context(), db, apikey.CreateRequest{Tenant: opts.tenant, Name: opts.name, Scopes: scopes})
			if err != nil {
				return err
			}
			if err := db.Close(); err != nil {
				return err
			}
			return a.print(cmd, newAPIKeyJSON(key, token), func(w io.Writer) error {
				_, err := fmt.Fprintf(w, "created key %s of tenant %s (scopes %s)\ntoken: %s\n"+
					"The token is shown only now; the ledger keeps its digest.\n",
					key.ID, key.Tenant, strings.Join(apikey.ScopeStrings(key.Scopes), ","), token)
				return err
			})
		},
	}
	cmd.Flags().StringVar(&opts.tenant, "tenant", "", "tenant the key belongs to (required)")
	cmd.Flags().StringVar(&opts.name, "name", "", "a label for people")
	cmd.Flags().StringVar(&opts.scopes, "scopes", "", "comma-separated scopes: read, write, admin (required)")
	return cmd
}

type apikeyListJSON struct {
	Keys []apikeyJSON `json:"keys"`
}

func newAPIKeyListCommand(a *app) *cobra.Command {
	var tenant string
	cmd := &cobra.Command{
		Use:   "list [--tenant T]",
		Short: "List keys, valid and revoked, by tenant and creation time (never their tokens)",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.withDB(cmd, true, func(ctx context.Context, db *chain.DB) error {
				keys, err := apikey.List(ctx, db, tenant)
				if err != nil {
					return err
				}
				out := apikeyListJSON{Keys: []apikeyJSON{}}
				for _, k := range keys {
					out.Keys = append(out.Keys, newAPIKeyJSON(k, ""))
				}
				return a.print(cmd, out, func(w io.Writer) error { return writeKeysText(w, keys) })
			})
		},
	}
	cmd.Flags().StringVar(&tenant, "tenant", "", "list only this tenant's keys")
	return cmd
}

func writeKeysText(w io.Writer, keys []apikey.Key) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tTENANT\tNAME\tSCOPES\tCREATED\tSTATUS")
	for _, k := range keys {
		status := keyStatus(k)
		if k.Revoked() {
			status += " " + formatNano(k.RevokedUnixNano)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", k.ID, k.Tenant, k.Name, strings.Join(apikey.ScopeStrings(k.Scopes), ","),
			formatNano(k.CreatedUnixNano), status)
	}
	return tw.Flush()
}

func newAPIKeyRevokeCommand(a *app) *cobra.Command {
	var reason string
	cmd := &cobra.Command{
		Use:   "revoke ID [--reason R]",
		Short: "Revoke a key: servers refuse it within their revocation delay (exit 4 for an unknown id)",
		Long: "revoke records the revocation of the key with the id (the part of its token after \"" + apikey.TokenPrefix + "\").\n" +
			"Revoking a revoked key writes nothing and prints its first revocation.",
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.withDB(cmd, false, func(ctx context.Context, db *chain.DB) error {
				key, err := apikey.Revoke(ctx, db, args[0], reason)
				if err != nil {
					return err
				}
				return a.print(cmd, newAPIKeyJSON(key, ""), func(w io.Writer) error {
					_, err := fmt.Fprintf(w, "revoked key %s of tenant %s at %s\n", key.ID, key.Tenant, formatNano(key.RevokedUnixNano))
					return err
				})
			})
		},
	}
	cmd.Flags().StringVar(&reason, "reason", "", "why, recorded with the revocation")
	return cmd
}
