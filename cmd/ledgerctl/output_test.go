package main

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/spf13/cobra"
)

func TestPrintList(t *testing.T) {
	type row struct {
		id    string
		count int
	}
	type rowJSON struct {
		ID    string `json:"id"`
		Count int    `json:"count"`
	}
	toJSON := func(r row) rowJSON { return rowJSON{r.id, r.count} }
	line := func(r row) string { return fmt.Sprintf("%s\t%d", r.id, r.count) }
	for _, tc := range []struct {
		name   string
		output string
		rows   []row
		want   string
	}{
		{"text", outputText, []row{{"a", 1}, {"longer", 22}}, "ID      COUNT\na       1\nlonger  22\n"},
		{"text-empty", outputText, nil, "ID  COUNT\n"},
		{"json", outputJSON, []row{{"a", 1}}, `{"things":[{"id":"a","count":1}]}` + "\n"},
		{"json-empty", outputJSON, nil, `{"things":[]}` + "\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			cmd := &cobra.Command{}
			cmd.SetOut(&out)
			if err := printList(cmd, &app{output: tc.output}, tc.rows, "things", toJSON, "ID\tCOUNT", line); err != nil {
				t.Fatal(err)
			}
			if out.String() != tc.want {
				t.Fatalf("got %q, want %q", out.String(), tc.want)
			}
		})
	}
}
