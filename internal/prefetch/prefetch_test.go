package prefetch_test

import (
	"bytes"
	"testing"

	"github.com/ledgerworks/ledger/internal/prefetch"
)

// TestPrefetchChangesNothingAndNeverFaults asks for every line of a
// buffer, for its last byte, and for the nil address, which is not mapped:
// the buffer stays as it was and nothing faults.
func TestPrefetchChangesNothingAndNeverFaults(t *testing.T) {
	buffer := bytes.Repeat([]byte{0xA5}, 4096)
	want := bytes.Clone(buffer)
	for i := 0; i < len(buffer); i += 64 {
		prefetch.Line(&buffer[i])
	}
	prefetch.Line(&buffer[len(buffer)-1])
	prefetch.Line(nil)
	if !bytes.Equal(buffer, want) {
		t.Fatal("a prefetch changed the memory it named")
	}
}
