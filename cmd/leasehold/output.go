package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/leasehold/leasehold/backend"
)

// holdingJSON is the JSON form of a live holding (list, inspect, release).
// Field names are stable.
type holdingJSON struct {
	Held bool   `json:"held"`
	Name string `json:"name"` // the key without -key-prefix
	Key  string `json:"key"`
	// Owner and Token identify the holding.
	Owner string `json:"owner"`
	Token uint64 `json:"token"`
	// ExpiresInMS is the time it had left, as the store measured it, in
	// milliseconds.
	ExpiresInMS int64 `json:"expires_in_ms"`
	// ExpiresAt is its end on the store's clock (for display only).
	ExpiresAt time.Time `json:"expires_at"`
	Metadata  string    `json:"metadata"`
}

// freeJSON is the JSON form of a name nobody holds (inspect): the name and
// key it was asked for, so that a script reading many answers knows which.
type freeJSON struct {
	Held bool   `json:"held"`
	Name string `json:"name"`
	Key  string `json:"key"`
}

func toJSON(h backend.Holder, keyPrefix string) holdingJSON {
	return holdingJSON{
		Held: true, Name: strings.TrimPrefix(h.Key, keyPrefix), Key: h.Key,
		Owner: h.Owner, Token: h.Token,
		ExpiresInMS: h.ExpiresIn.Milliseconds(), ExpiresAt: h.ExpiresAt.UTC(), Metadata: h.Metadata,
	}
}

func writeJSON(w io.Writer, v any) error {
	return json.NewEncoder(w).Encode(v)
}

// timeLeft formats a remaining duration for a table: tenths of a second
// under a minute, whole seconds above.
func timeLeft(d time.Duration) string {
	if d < time.Minute {
		return d.Round(100 * time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}

// Column widths in tables: long owners and metadata are cut so that a row
// fits a terminal (-json gives them whole).
const (
	maxNameCol  = 40
	maxOwnerCol = 32
	maxMetaCol  = 40 // when the width is unknown
	minMetaCol  = 10
	colGap      = 2
)

// cell makes s safe and short enough for a table cell.
func cell(s string, n int) string {
	if s == "" {
		return "-"
	}
	return truncate(oneLine(s), n)
}

// holdingTable writes holdings as an aligned table. width is the
// terminal's (0: unknown): the metadata column, last, gets what the others
// leave of it, at least minMetaCol runes.
func holdingTable(w io.Writer, hs []backend.Holder, keyPrefix string, width int) error {
	rows := make([][4]string, len(hs))
	widths := [4]int{len("NAME"), len("OWNER"), len("TOKEN"), len("TIME LEFT")}
	for i, h := range hs {
		rows[i] = [4]string{cell(strings.TrimPrefix(h.Key, keyPrefix), maxNameCol), cell(h.Owner, maxOwnerCol),
			strconv.FormatUint(h.Token, 10), timeLeft(h.ExpiresIn)}
		for j, c := range rows[i] {
			widths[j] = max(widths[j], utf8.RuneCountInString(c))
		}
	}
	metaCol := maxMetaCol
	if width > 0 {
		used := 4 * colGap
		for _, n := range widths {
			used += n
		}
		metaCol = max(minMetaCol, width-used)
	}
	tw := tabwriter.NewWriter(w, 0, 0, colGap, ' ', 0)
	fmt.Fprintln(tw, "NAME\tOWNER\tTOKEN\tTIME LEFT\tMETADATA")
	for i, h := range hs {
		r := rows[i]
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", r[0], r[1], r[2], r[3], cell(h.Metadata, metaCol))
	}
	return tw.Flush()
}

// holdingDetail writes one holding, one field per line, nothing cut.
func holdingDetail(w io.Writer, h backend.Holder, keyPrefix string) error {
	tw := tabwriter.NewWriter(w, 0, 0, 1, ' ', 0)
	name := strings.TrimPrefix(h.Key, keyPrefix)
	fmt.Fprintf(tw, "name:\t%s\n", oneLine(name))
	if name != h.Key {
		fmt.Fprintf(tw, "key:\t%s\n", oneLine(h.Key))
	}
	fmt.Fprintf(tw, "owner:\t%s\n", oneLine(h.Owner))
	fmt.Fprintf(tw, "token:\t%d\n", h.Token)
	fmt.Fprintf(tw, "time left:\t%s\n", timeLeft(h.ExpiresIn))
	fmt.Fprintf(tw, "expires at:\t%s (store clock)\n", h.ExpiresAt.UTC().Format(time.RFC3339Nano))
	fmt.Fprintf(tw, "metadata:\t%s\n", oneLine(h.Metadata))
	return tw.Flush()
}
