package leasehold_test

import (
	"bufio"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

// TestReadmeGoBlocksAreExamples keeps the Go code of README.md and of every
// Markdown file under docs/ from drifting: every ```go block must appear,
// line for line, in the body of some Example function of the repository's
// *_test.go files (all modules of the tree), so that it is compiled, vetted
// and, where the Example has an Output, run. A block edited without its
// Example, or an Example without its block, fails.
//
// A block that is a whole program (package main) is matched, the same way,
// against the main.go files of the tree's commands instead, which every
// module's build compiles.
//
// Lines are compared without their indentation (the docs indent with
// spaces, gofmt with tabs, and the block may sit in a closure) and with every
// run of blanks inside a line taken as one (gofmt re-aligns trailing
// comments); leading and trailing blank lines of a block do not count.
func TestReadmeGoBlocksAreExamples(t *testing.T) {
	bodies := exampleBodies(t, ".")
	for _, path := range docFiles(t) {
		blocks := readmeGoBlocks(t, path)
		if path == "README.md" && len(blocks) == 0 {
			t.Fatal("README.md has no ```go block; is the fence spelled differently?")
		}
		for _, b := range blocks {
			want := "\n" + strings.Join(b.lines, "\n") + "\n"
			found := false
			for _, body := range bodies {
				if strings.Contains(body, want) {
					found = true
					break
				}
			}
			if !found {
				t.Errorf("%s:%d: the Go block starting %q is in no Example function's body; "+
					"change the Example with it (see example_readme_test.go files)", path, b.line, b.lines[0])
			}
		}
	}
}

// docFiles returns README.md and every Markdown file under docs/, in a
// stable order.
func docFiles(t *testing.T) []string {
	t.Helper()
	files := []string{"README.md"}
	err := filepath.WalkDir("docs", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(path, ".md") {
			files = append(files, filepath.ToSlash(path))
		}
		return nil
	})
	if err != nil {
		t.Fatalf("list docs/: %v", err)
	}
	return files
}

// readmeBlock is one ```go block of a Markdown file: its normalised lines and
// the file's line of its first one.
type readmeBlock struct {
	line  int
	lines []string
}

func readmeGoBlocks(t *testing.T, path string) []readmeBlock {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("open %s: %v", path, err)
	}
	defer f.Close()
	var (
		blocks []readmeBlock
		cur    *readmeBlock
		n      int
	)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		n++
		line := sc.Text()
		switch {
		case cur == nil && strings.TrimSpace(line) == "```go":
			cur = &readmeBlock{}
		case cur != nil && strings.TrimSpace(line) == "```":
			if lines := trimBlank(cur.lines); len(lines) > 0 {
				cur.lines = lines
				blocks = append(blocks, *cur)
			}
			cur = nil
		case cur != nil:
			norm := normLine(line)
			if cur.line == 0 && norm != "" {
				cur.line = n
			}
			cur.lines = append(cur.lines, norm)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	if cur != nil {
		t.Fatalf("%s: a ```go block is not closed", path)
	}
	return blocks
}

// exampleBodies returns the normalised bodies of every Example function in
// the *_test.go files under root, and the whole of every main.go of package
// main, each between newlines.
func exampleBodies(t *testing.T, root string) []string {
	t.Helper()
	var bodies []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "vendor") {
				return filepath.SkipDir
			}
			return nil
		}
		program := d.Name() == "main.go"
		if !strings.HasSuffix(path, "_test.go") && !program {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, path, src, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		if program {
			if f.Name.Name == "main" {
				bodies = append(bodies, normBody(src))
			}
			return nil
		}
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Recv != nil || fn.Body == nil || !strings.HasPrefix(fn.Name.Name, "Example") {
				continue
			}
			bodies = append(bodies, normBody(src[fset.Position(fn.Body.Lbrace).Offset+1:fset.Position(fn.Body.Rbrace).Offset]))
		}
		return nil
	})
	if err != nil {
		t.Fatalf("read the Examples: %v", err)
	}
	return bodies
}

// normBody is src's lines, normalised, between newlines.
func normBody(src []byte) string {
	var lines []string
	for line := range strings.Lines(string(src)) {
		lines = append(lines, normLine(line))
	}
	return "\n" + strings.Join(lines, "\n") + "\n"
}

// normLine drops a line's indentation and trailing blanks and makes every
// inner run of blanks one space.
func normLine(line string) string { return strings.Join(strings.Fields(line), " ") }

// trimBlank drops leading and trailing empty lines.
func trimBlank(lines []string) []string {
	for len(lines) > 0 && lines[0] == "" {
		lines = lines[1:]
	}
	for len(lines) > 0 && lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	return lines
}

// TestDocsLinksResolve keeps the cross-references of the docs true as text
// moves between files: every relative link (and image) in README.md,
// BENCHMARKS.md, CHANGELOG.md and docs/ must name a file or directory of the
// tree, and a #fragment must name a heading of the Markdown file it points
// into (as GitHub derives the anchor from the heading's text).
func TestDocsLinksResolve(t *testing.T) {
	files := append(docFiles(t), "BENCHMARKS.md", "CHANGELOG.md")
	anchors := map[string]map[string]bool{}
	anchorsOf := func(path string) map[string]bool {
		if a, ok := anchors[path]; ok {
			return a
		}
		a := headingAnchors(t, path)
		anchors[path] = a
		return a
	}
	for _, path := range files {
		src, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("read %s: %v", path, err)
		}
		for n, line := range markdownProse(string(src)) {
			for _, m := range mdLink.FindAllStringSubmatch(line, -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				file, frag, _ := strings.Cut(target, "#")
				dest := path
				if file != "" {
					dest = filepath.ToSlash(filepath.Join(filepath.Dir(path), file))
					if _, err := os.Stat(dest); err != nil {
						t.Errorf("%s:%d: link %q: %v", path, n+1, target, err)
						continue
					}
				}
				if frag != "" && strings.HasSuffix(dest, ".md") && !anchorsOf(dest)[frag] {
					t.Errorf("%s:%d: link %q: %s has no heading with anchor #%s", path, n+1, target, dest, frag)
				}
			}
		}
	}
}

// mdLink matches the target of an inline Markdown link or image.
var mdLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// markdownProse returns the lines of a Markdown text, with the lines of
// fenced code blocks and inline code spans blanked (links there are not
// links).
func markdownProse(src string) []string {
	lines := strings.Split(src, "\n")
	fenced := false
	for i, line := range lines {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			lines[i] = ""
			continue
		}
		if fenced {
			lines[i] = ""
			continue
		}
		lines[i] = codeSpan.ReplaceAllString(line, "``")
	}
	return lines
}

var codeSpan = regexp.MustCompile("`[^`]*`")

// headingAnchors returns the anchors GitHub gives the headings of a
// Markdown file: the heading's text lowercased, code marks and punctuation
// dropped, spaces made hyphens; a repeated anchor gets -1, -2, ….
func headingAnchors(t *testing.T, path string) map[string]bool {
	t.Helper()
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	anchors := map[string]bool{}
	seen := map[string]int{}
	fenced := false
	for _, line := range strings.Split(string(src), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if fenced || !strings.HasPrefix(line, "#") {
			continue
		}
		text := strings.TrimSpace(strings.TrimLeft(line, "#"))
		var b strings.Builder
		for _, r := range strings.ToLower(text) {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
				b.WriteRune(r)
			}
		}
		a := b.String()
		if k := seen[a]; k > 0 {
			anchors[fmt.Sprintf("%s-%d", a, k)] = true
		} else {
			anchors[a] = true
		}
		seen[a]++
	}
	return anchors
}
