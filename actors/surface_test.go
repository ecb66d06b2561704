package actors

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The public packages of the engine keep no state anyone could change:
// messages and actors declare no package-level variable (their errors and
// defaults are constants), and what Start takes is a plain value.
func TestNoPackageVariables(t *testing.T) {
	for _, dir := range []string{".", "../messages"} {
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		fset := token.NewFileSet()
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			af, err := parser.ParseFile(fset, f, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range af.Decls {
				if g, ok := d.(*ast.GenDecl); ok && g.Tok == token.VAR {
					for _, s := range g.Specs {
						for _, n := range s.(*ast.ValueSpec).Names {
							t.Errorf("%s: package-level variable %s", fset.Position(n.Pos()), n.Name)
						}
					}
				}
			}
		}
	}
}

// Config holds settings only: Start copies it, and none of its fields is
// state the engine shares (an atomic, a lock, a channel, a map or a func).
func TestConfigIsSettingsOnly(t *testing.T) {
	if p := reflect.TypeOf(Start).In(1); p != reflect.TypeOf(Config{}) {
		t.Errorf("Start takes %v, want Config by value", p)
	}
	ct := reflect.TypeOf(Config{})
	for i := range ct.NumField() {
		f := ct.Field(i)
		if !f.IsExported() {
			t.Errorf("Config.%s: unexported field (Config is settings only)", f.Name)
			continue
		}
		typ := f.Type
		for typ.Kind() == reflect.Pointer {
			typ = typ.Elem()
		}
		switch pkg := typ.PkgPath(); {
		case pkg == "sync" || pkg == "sync/atomic":
			t.Errorf("Config.%s is a %v: state, not a setting", f.Name, f.Type)
		case typ.Kind() == reflect.Chan || typ.Kind() == reflect.Map || typ.Kind() == reflect.Func:
			t.Errorf("Config.%s is a %v: state, not a setting", f.Name, f.Type)
		}
	}
	et := reflect.TypeOf(Engine{})
	for i := range et.NumField() {
		if f := et.Field(i); f.IsExported() {
			t.Errorf("Engine.%s: exported field", f.Name)
		}
	}
}

// What the engine's public packages export is supported API, so each of its
// names says what it is for: every exported type, function, method and
// constant of actors and messages has a doc comment (a group's comment serves
// its constants; a type's, its fields).
func TestExportsAreDocumented(t *testing.T) {
	for _, dir := range []string{".", "../messages"} {
		fset := token.NewFileSet()
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			af, err := parser.ParseFile(fset, f, nil, parser.ParseComments)
			if err != nil {
				t.Fatal(err)
			}
			undocumented := func(n *ast.Ident, docs ...*ast.CommentGroup) {
				if !n.IsExported() {
					return
				}
				for _, d := range docs {
					if d != nil && strings.TrimSpace(d.Text()) != "" {
						return
					}
				}
				t.Errorf("%s: %s is exported without a doc comment", fset.Position(n.Pos()), n.Name)
			}
			// A run of one-line functions on consecutive lines shares the
			// comment above its first.
			var run *ast.CommentGroup
			runEnd := 0
			for _, d := range af.Decls {
				switch d := d.(type) {
				case *ast.FuncDecl:
					if d.Doc != nil || fset.Position(d.Pos()).Line != runEnd+1 {
						run = d.Doc
					}
					runEnd = fset.Position(d.End()).Line
					if d.Recv != nil && !exportedReceiver(d.Recv) {
						continue
					}
					undocumented(d.Name, run)
				case *ast.GenDecl:
					for _, s := range d.Specs {
						switch s := s.(type) {
						case *ast.TypeSpec:
							undocumented(s.Name, s.Doc, d.Doc)
						case *ast.ValueSpec:
							for _, n := range s.Names {
								undocumented(n, s.Doc, s.Comment, d.Doc)
							}
						}
					}
				}
			}
		}
	}
}

// exportedReceiver reports whether a method's receiver type is exported.
func exportedReceiver(recv *ast.FieldList) bool {
	typ := recv.List[0].Type
	if s, ok := typ.(*ast.StarExpr); ok {
		typ = s.X
	}
	if g, ok := typ.(*ast.IndexExpr); ok {
		typ = g.X
	}
	id, ok := typ.(*ast.Ident)
	return ok && id.IsExported()
}
