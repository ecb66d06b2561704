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
