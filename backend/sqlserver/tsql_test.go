package sqlserver

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// There is no SQL Server here, so the T-SQL the backend sends is checked with
// a real T-SQL grammar: the TSqlParser of the ANTLR grammars-v4 project, as
// packaged for node by antlr4ts-sql, driven by internal/tsqlcheck/check.js
// (installed by .ci/ensure-tsqlcheck). One node process parses every batch.

// tsqlCheckDir is the node checker, relative to this package.
const tsqlCheckDir = "internal/tsqlcheck"

// tsqlBatch is one batch given to the checker.
type tsqlBatch struct {
	Name string `json:"name"`
	SQL  string `json:"sql"`
}

// tsqlResult is the checker's answer for one batch.
type tsqlResult struct {
	Name   string   `json:"name"`
	Errors []string `json:"errors"`
}

// grammarNames are the table names every batch is built for: the default,
// and names made of brackets, quotes, semicolons, comment markers and
// non-ASCII text, which must all stay inside their quoted identifiers.
var grammarNames = []struct{ schema, table string }{
	{DefaultSchema, DefaultTable},
	{"s]; DROP TABLE x; --", "t'/*x*/"},
	{"le]a'se", "Le;ases--/*"},
	{"ユニコード", "テーブル 'x' [y]"},
}

// nextValueFor matches NEXT VALUE FOR and the bracket-quoted two-part name
// after it. The grammars-v4 T-SQL grammar of antlr4ts-sql 1.1.0 has no NEXT
// VALUE FOR expression (it reads NEXT as a column and fails at FOR), so the
// checker gets NEXT_VALUE_FOR(name), a function call over the same quoted
// name; TestAcquireSQLTokenOnlyFromSequenceAfterLock and
// TestNextValueForSyntax check the real text instead.
var nextValueFor = regexp.MustCompile(`NEXT VALUE FOR (\[(?:[^\]]|\]\])*\]\.\[(?:[^\]]|\]\])*\])`)

// forGrammar returns sql as the checker gets it (see nextValueFor).
func forGrammar(sql string) string {
	return nextValueFor.ReplaceAllString(sql, "NEXT_VALUE_FOR($1)")
}

// backendBatches collects every batch the backend can send, built by the
// backend's own builders: acquire (exclusive and shared) with and without
// the sweep, holders, renew, batched
// renew (one and several requests), release, the replica read, inspect, list
// and revoke (acquire, release and revoke with the waiter queue's
// statements), every
// EnsureSchema statement and query (the queue table's creation, which is
// also its upgrade path, included), and CreateScript (whole, with its GO
// separators, and for rejected names).
func backendBatches(t *testing.T) []tsqlBatch {
	t.Helper()
	var out []tsqlBatch
	add := func(name, sql string) { out = append(out, tsqlBatch{Name: name, SQL: forGrammar(sql)}) }
	for _, tn := range grammarNames {
		n := mustNames(t, tn.schema, tn.table)
		for _, sweep := range []bool{true, false} {
			q := newQueries(n, sweep)
			add(fmt.Sprintf("acquire (sweep %t) %s", sweep, n), q.acquire)
			add(fmt.Sprintf("acquire shared (sweep %t) %s", sweep, n), q.acquireShared)
			if !sweep {
				continue
			}
			add("holders "+n.String(), q.holders)
			add("renew "+n.String(), q.renew)
			add("release "+n.String(), q.release)
			add("replica read "+n.String(), q.replica)
			add("inspect "+n.String(), q.inspect)
			add("list "+n.String(), q.list)
			add("revoke "+n.String(), q.revoke)
		}
		add("batch renew of 1 "+n.String(), renewBatchSQL(n, []int{0}, []int64{30_000_000}))
		add("batch renew of 3 "+n.String(), renewBatchSQL(n, []int{0, 7, maxBatchRenewals - 1}, []int64{30_000_000, 1_500}))
		for i, stmt := range ddlStatements(n) {
			add(fmt.Sprintf("DDL %d %s", i, n), stmt)
		}
		// The keep trigger's CREATE TRIGGER, which the DDL carries as a
		// string literal.
		add("keep trigger "+n.String(), keepTrigger(n))
		add("CreateScript "+n.String(), CreateScript(tn.schema, tn.table))
	}
	add("CreateScript of a rejected name", CreateScript("lease", "bad\x00name"))
	add("durability query", durabilitySQL)
	add("object kinds query", objectsSQL)
	add("keep trigger query", keepTriggerSQL)
	add("table shape query", tableShapeSQL)
	return append(out, fenceBatches()...)
}

// brokenBatches are deliberately broken versions of real batches: the
// checker must reject each, which proves that it checks something.
func brokenBatches(t *testing.T) []tsqlBatch {
	n := mustNames(t, DefaultSchema, DefaultTable)
	q := newQueries(n, true)
	return []tsqlBatch{
		{"broken: acquire missing a parenthesis", forGrammar(strings.Replace(q.acquire, "DATALENGTH(@name),", "DATALENGTH(@name,", 1))},
		{"broken: renew with SET twice", strings.Replace(q.renew, "SET RenewedAtUtc", "SET SET RenewedAtUtc", 1)},
		{"broken: release with an unclosed identifier", strings.Replace(q.release, n.tableQ, "[lease].[Leases", 1)},
		{"broken: DDL with a stray keyword", strings.Replace(ddlStatements(n)[2], "NOT NULL,", "NOT NULL NULL WHERE,", 1)},
		{"broken: queue DDL missing a parenthesis", strings.Replace(ddlStatements(n)[5], "IDENTITY(1, 1)", "IDENTITY(1, 1", 1)},
		{"broken: hand-on without BY", forGrammar(strings.Replace(q.release, "ORDER BY Position;", "ORDER Position;", 1))},
		{"broken: fence with an unclosed IF", strings.Replace(fenceSQL(n.tableQ), "IF @highest IS NULL", "IF (@highest IS NULL", 1)},
		{"broken: enqueue with a stray comma", strings.Replace(forGrammar(q.acquire), "@poll, @now,", "@poll,, @now,", 1)},
	}
}

var (
	tsqlOnce    sync.Once
	tsqlResults map[string][]string
	tsqlSkip    string
	tsqlErr     error
)

// runTSQLCheck runs the checker once, over the backend's batches and the
// broken ones, and keeps the results for both grammar tests.
func runTSQLCheck(t *testing.T) map[string][]string {
	t.Helper()
	tsqlOnce.Do(func() {
		node, err := exec.LookPath("node")
		if err != nil {
			tsqlSkip = "node is not installed"
			return
		}
		if _, err := os.Stat(filepath.Join(tsqlCheckDir, "node_modules", "antlr4ts-sql")); err != nil {
			tsqlSkip = "the T-SQL checker's packages are not installed in " + tsqlCheckDir
			return
		}
		batches := append(backendBatches(t), brokenBatches(t)...)
		input, err := json.Marshal(batches)
		if err != nil {
			tsqlErr = err
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, node, "check.js")
		cmd.Dir = tsqlCheckDir
		cmd.Stdin = bytes.NewReader(input)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		output, err := cmd.Output()
		if err != nil {
			tsqlErr = fmt.Errorf("node check.js: %w\n%s", err, stderr.String())
			return
		}
		var results []tsqlResult
		if err := json.Unmarshal(output, &results); err != nil {
			tsqlErr = fmt.Errorf("reading the checker's answer: %w\n%s", err, output)
			return
		}
		if len(results) != len(batches) {
			tsqlErr = fmt.Errorf("the checker answered %d batches, want %d", len(results), len(batches))
			return
		}
		tsqlResults = map[string][]string{}
		for i, r := range results {
			if r.Name != batches[i].Name {
				tsqlErr = fmt.Errorf("answer %d is for %q, want %q", i, r.Name, batches[i].Name)
				return
			}
			tsqlResults[r.Name] = r.Errors
		}
	})
	switch {
	case tsqlErr != nil:
		t.Fatal(tsqlErr)
	case tsqlSkip != "":
		msg := tsqlSkip + ": the T-SQL grammar check cannot run (run .ci/ensure-tsqlcheck, or `npm ci` in backend/sqlserver/" + tsqlCheckDir + ")"
		if os.Getenv("LEASEHOLD_REQUIRE_SERVICES") == "1" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return tsqlResults
}

// TestTSQLGrammar parses every batch the backend can send with the T-SQL
// grammar and fails on any syntax error, showing the batch and the parser's
// message.
func TestTSQLGrammar(t *testing.T) {
	results := runTSQLCheck(t)
	batches := backendBatches(t)
	for _, b := range batches {
		errs, ok := results[b.Name]
		if !ok {
			t.Errorf("%s: not checked", b.Name)
			continue
		}
		if len(errs) > 0 {
			t.Errorf("%s: T-SQL syntax errors:\n%s\n--- batch as parsed ---\n%s", b.Name, strings.Join(errs, "\n"), numbered(b.SQL))
		}
	}
	if len(batches) < 40 {
		t.Errorf("only %d batches checked", len(batches))
	}
}

// TestTSQLGrammarRejectsBrokenBatches proves the check can fail: each
// deliberately broken batch gets at least one syntax error.
func TestTSQLGrammarRejectsBrokenBatches(t *testing.T) {
	results := runTSQLCheck(t)
	for _, b := range brokenBatches(t) {
		if len(results[b.Name]) == 0 {
			t.Errorf("%s: the checker found no error in:\n%s", b.Name, numbered(b.SQL))
		}
	}
}

// TestNextValueForSyntax checks, without the grammar, the one construct the
// grammar lacks: every NEXT VALUE FOR in the acquire batch is the whole
// right-hand side of SET @token = ... ; and names the table's sequence,
// quoted, for every table name, so that the substitution in forGrammar
// covers all of them.
func TestNextValueForSyntax(t *testing.T) {
	for _, tn := range grammarNames {
		n := mustNames(t, tn.schema, tn.table)
		q := newQueries(n, true).acquire
		want := "SET @token = NEXT VALUE FOR " + n.sequenceQ + ";"
		if got := strings.Count(q, want); got != 2 || strings.Count(q, "NEXT VALUE FOR") != 2 {
			t.Errorf("%s: %d of %d NEXT VALUE FOR are %q", n, got, strings.Count(q, "NEXT VALUE FOR"), want)
		}
		if g := forGrammar(q); strings.Contains(g, "NEXT VALUE FOR") || strings.Count(g, "NEXT_VALUE_FOR("+n.sequenceQ+")") != 2 {
			t.Errorf("%s: the grammar substitution missed a NEXT VALUE FOR", n)
		}
	}
}

// numbered returns sql with line numbers, to read a parser's line:column.
func numbered(sql string) string {
	var b strings.Builder
	for i, line := range strings.Split(sql, "\n") {
		fmt.Fprintf(&b, "%3d  %s\n", i+1, line)
	}
	return b.String()
}
