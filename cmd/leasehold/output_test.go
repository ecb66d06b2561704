package main

import (
	"bytes"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/leasehold/leasehold/backend"
)

// TestTableFitsWidth: the metadata column takes what the others leave of the
// terminal's width, so that no row is longer; without a width it is cut at
// maxMetaCol. -json gives it whole.
func TestTableFitsWidth(t *testing.T) {
	hs := []backend.Holder{
		{Key: "app/a", Owner: "host-1:4242:abc", Token: 1796012826087607, ExpiresIn: 12 * time.Second, Metadata: strings.Repeat("m", 300)},
		{Key: "app/bb", Owner: "o", Token: 7, ExpiresIn: 90 * time.Minute, Metadata: "short"},
	}
	for _, width := range []int{80, 100} {
		var b bytes.Buffer
		if err := holdingTable(&b, hs, "app/", width); err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(strings.TrimRight(b.String(), "\n"), "\n") {
			if n := utf8.RuneCountInString(line); n > width {
				t.Errorf("width %d: line of %d runes: %q", width, n, line)
			}
		}
		if !strings.Contains(b.String(), "…") || !strings.Contains(b.String(), "short") || !strings.Contains(b.String(), "1h30m0s") {
			t.Errorf("width %d: want the long metadata cut, the short one whole, and the time left:\n%s", width, b.String())
		}
	}
	var b bytes.Buffer
	if err := holdingTable(&b, hs, "app/", 0); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), strings.Repeat("m", maxMetaCol-1)+"…") {
		t.Errorf("unknown width: want the metadata cut at %d runes:\n%s", maxMetaCol, b.String())
	}
}
