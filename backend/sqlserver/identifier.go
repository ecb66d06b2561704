package sqlserver

import (
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// ErrInvalidIdentifier is returned (wrapped) for a schema or table name that
// cannot be used: empty, longer than SQL Server allows, or containing NUL,
// control characters or surrounding white space.
var ErrInvalidIdentifier = errors.New("sqlserver: invalid identifier")

// maxIdentifierUnits is the length of sysname, NVARCHAR(128), in UTF-16 units.
const maxIdentifierUnits = 128

// objectNames holds the bracket-quoted names of every object of one lease
// table. Names derived from the table (sequence, constraints, index) must fit
// in sysname too, which is why the table name may be shorter than 128 units.
type objectNames struct {
	schema, table string // raw names, for catalog look-ups
	schemaQ       string // [schema]
	tableQ        string // [schema].[table]
	sequenceQ     string // [schema].[table_FencingToken]
	pk            string // [PK_table]
	ckBytes       string // [CK_table_LeaseNameBytes]
	ckToken       string // [CK_table_FencingToken]
	dfAttempt     string // [DF_table_AttemptId]
	ixExpires     string // [IX_table_ExpiresAtUtc], unquoted in indexName
	indexName     string

	// The waiter queue's table and its constraints (see queueTableDDL).
	// Every derived name is at most as long as CK_table_LeaseNameBytes, so
	// the queue does not shorten the longest table name allowed.
	queueQ         string // [schema].[table_Queue]
	pkQueue        string // [PK_table_Queue]
	uqQueueAttempt string // [UQ_table_QueueAttempt]
	ckQueueBytes   string // [CK_table_QueueBytes]
	ixQueueExpires string // [IX_table_QueueExpires], unquoted in queueIndexName
	queueIndexName string

	// The holding limit's columns and the holds table of the names with
	// several holders (shared.go), named within the same length.
	dfLimit        string // [DF_table_HolderLimit]
	dfQueueLimit   string // [DF_table_QueueLimit]
	holdsQ         string // [schema].[table_Holds]
	pkHolds        string // [PK_table_Holds]
	uqHoldsAttempt string // [UQ_table_HoldsAttempt]
	ckHoldsBytes   string // [CK_table_HoldsBytes]
	ixHoldsExpires string // [IX_table_HoldsExpires], unquoted in holdsIndexName
	holdsIndexName string
	keepQ          string // [schema].[TR_table_KeepShared]
}

// ValidateTable reports whether schema and table can name a lease table, as
// New and EnsureSchema check them: each 1..128 UTF-16 units of valid UTF-8
// without NUL or other control characters and without leading or trailing
// white space, and the table short enough that the derived names
// (table_FencingToken, CK_table_LeaseNameBytes, table_Queue, ...) fit in 128
// units.
// Brackets, quotes, semicolons and comment markers are allowed: every
// identifier is bracket-quoted. Errors wrap ErrInvalidIdentifier.
func ValidateTable(schema, table string) error {
	_, err := newObjectNames(schema, table)
	return err
}

func newObjectNames(schema, table string) (objectNames, error) {
	if err := checkIdentifier("schema", schema); err != nil {
		return objectNames{}, err
	}
	if err := checkIdentifier("table", table); err != nil {
		return objectNames{}, err
	}
	n := objectNames{
		schema:    schema,
		table:     table,
		schemaQ:   quoteIdent(schema),
		indexName: "IX_" + table + "_ExpiresAtUtc",

		queueIndexName: "IX_" + table + "_QueueExpires",
		holdsIndexName: "IX_" + table + "_HoldsExpires",
	}
	derived := []struct {
		dst  *string
		name string
	}{
		{&n.sequenceQ, table + "_FencingToken"},
		{&n.pk, "PK_" + table},
		{&n.ckBytes, "CK_" + table + "_LeaseNameBytes"},
		{&n.ckToken, "CK_" + table + "_FencingToken"},
		{&n.dfAttempt, "DF_" + table + "_AttemptId"},
		{&n.ixExpires, n.indexName},
		{&n.queueQ, table + "_Queue"},
		{&n.pkQueue, "PK_" + table + "_Queue"},
		{&n.uqQueueAttempt, "UQ_" + table + "_QueueAttempt"},
		{&n.ckQueueBytes, "CK_" + table + "_QueueBytes"},
		{&n.ixQueueExpires, n.queueIndexName},
		{&n.dfLimit, "DF_" + table + "_HolderLimit"},
		{&n.dfQueueLimit, "DF_" + table + "_QueueLimit"},
		{&n.holdsQ, table + "_Holds"},
		{&n.pkHolds, "PK_" + table + "_Holds"},
		{&n.uqHoldsAttempt, "UQ_" + table + "_HoldsAttempt"},
		{&n.ckHoldsBytes, "CK_" + table + "_HoldsBytes"},
		{&n.ixHoldsExpires, n.holdsIndexName},
		{&n.keepQ, "TR_" + table + "_KeepShared"},
	}
	for _, d := range derived {
		if units := utf16Len(d.name); units > maxIdentifierUnits {
			return objectNames{}, fmt.Errorf("%w: table name %q is too long: the derived name %q has %d UTF-16 units, more than %d",
				ErrInvalidIdentifier, table, d.name, units, maxIdentifierUnits)
		}
		*d.dst = quoteIdent(d.name)
	}
	n.sequenceQ = n.schemaQ + "." + n.sequenceQ
	n.queueQ = n.schemaQ + "." + n.queueQ
	n.holdsQ = n.schemaQ + "." + n.holdsQ
	n.keepQ = n.schemaQ + "." + n.keepQ
	n.tableQ = n.schemaQ + "." + quoteIdent(table)
	return n, nil
}

func checkIdentifier(what, s string) error {
	switch {
	case s == "":
		return fmt.Errorf("%w: %s name is empty", ErrInvalidIdentifier, what)
	case !utf8.ValidString(s):
		return fmt.Errorf("%w: %s name is not valid UTF-8", ErrInvalidIdentifier, what)
	case strings.TrimSpace(s) != s:
		// SQL Server trims trailing blanks of identifiers, so "[t ]" would
		// silently name "t".
		return fmt.Errorf("%w: %s name %q has leading or trailing white space", ErrInvalidIdentifier, what, s)
	case strings.ContainsFunc(s, unicode.IsControl):
		return fmt.Errorf("%w: %s name %q contains NUL or another control character", ErrInvalidIdentifier, what, s)
	case utf16Len(s) > maxIdentifierUnits:
		return fmt.Errorf("%w: %s name is longer than %d UTF-16 units", ErrInvalidIdentifier, what, maxIdentifierUnits)
	}
	return nil
}

// quoteIdent bracket-quotes an identifier, doubling any closing bracket, as
// QUOTENAME does.
func quoteIdent(s string) string {
	return "[" + strings.ReplaceAll(s, "]", "]]") + "]"
}

// quoteLiteral makes an N'...' string literal, doubling single quotes. It is
// used only for DDL, where parameters cannot name objects.
func quoteLiteral(s string) string {
	return "N'" + strings.ReplaceAll(s, "'", "''") + "'"
}

func utf16Len(s string) int {
	n := 0
	for _, r := range s {
		n += utf16.RuneLen(r)
	}
	return n
}

// String returns the quoted table name, for logs and errors.
func (n objectNames) String() string { return n.tableQ }
