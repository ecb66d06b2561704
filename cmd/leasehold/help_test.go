package main

import (
	"strings"
	"testing"
)

// TestHelpNamesEveryCommonFlag: the top-level help names the flags that
// every command takes and release's -token, not only each command's -h.
func TestHelpNamesEveryCommonFlag(t *testing.T) {
	for _, flag := range []string{"-json", "-timeout", "-key-prefix", "-token"} {
		if !strings.Contains(synopsis, flag+" ") {
			t.Errorf("the top-level help does not name %s", flag)
		}
	}
}
