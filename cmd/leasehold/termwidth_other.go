//go:build !unix

package main

import "io"

// ttyWidth is 0 (unknown) where terminals are not queried.
func ttyWidth(io.Writer) int { return 0 }
