//go:build cgo

package csrc

import (
	"strings"
	"testing"
)

// The embed must carry the public headers and the assembly (it is what
// invalidates the build cache when a file outside the package directory
// changes).
func TestEmbedHasHeadersAndArch(t *testing.T) {
	b, err := headers.ReadFile("include/xtc_errors.h")
	if err != nil || !strings.Contains(string(b), "XTC_ERRORS") {
		t.Fatalf("include/xtc_errors.h not embedded: %v", err)
	}
	es, err := headers.ReadDir("arch")
	if err != nil || len(es) == 0 {
		t.Fatalf("arch/ not embedded: %v", err)
	}
}
