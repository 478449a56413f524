package pgschema

import (
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
)

func TestChoose(t *testing.T) {
	for _, c := range []struct{ url, schema, want string }{
		{"postgres://h/db", "", "fallback"},
		{"postgres://h/db", "given", "given"},
		{"postgres://h/db?search_path=tenant_a", "", "tenant_a"},
		{"postgres://h/db?search_path=tenant_a", "given", "given"},
		{"postgres://h/db?search_path=%22Quoted%22,public", "", "Quoted"},
		{"postgres://h/db?search_path=%24user,public", "", "fallback"},
	} {
		cfg, err := pgxpool.ParseConfig(c.url)
		if err != nil {
			t.Fatal(err)
		}
		if got := Choose(cfg, c.schema, "fallback"); got != c.want {
			t.Errorf("Choose(%q, %q) = %q, want %q", c.url, c.schema, got, c.want)
		}
	}
}
