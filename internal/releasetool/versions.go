package main

import (
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
	"golang.org/x/mod/modfile"
	"golang.org/x/mod/semver"
)

// versionsFile is versions.yaml, in the form OpenTelemetry-Go's multimod
// tool reads: sets of modules released together at one version, and the
// modules never released.
type versionsFile struct {
	ModuleSets      map[string]moduleSet `yaml:"module-sets"`
	ExcludedModules []string             `yaml:"excluded-modules"`
}

type moduleSet struct {
	Version string   `yaml:"version"`
	Modules []string `yaml:"modules"`
}

// release is versions.yaml read against the tree it sits in.
type release struct {
	root     string            // the repository's root directory
	rootPath string            // the root module's path
	version  map[string]string // a published module's path: its version
	excluded map[string]bool
	dirs     map[string]string // every module of the tree: its directory
}

func load(file string) (*release, error) {
	src, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var vf versionsFile
	if err := yaml.Unmarshal(src, &vf); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	r := &release{root: filepath.Dir(file), version: map[string]string{}, excluded: map[string]bool{}, dirs: map[string]string{}}
	for name, set := range vf.ModuleSets {
		if !semver.IsValid(set.Version) || semver.Canonical(set.Version) != set.Version {
			return nil, fmt.Errorf("%s: module set %s: version %q is not a canonical semantic version (vX.Y.Z)", file, name, set.Version)
		}
		for _, m := range set.Modules {
			if _, dup := r.version[m]; dup {
				return nil, fmt.Errorf("%s: %s is in two module sets", file, m)
			}
			r.version[m] = set.Version
		}
	}
	for _, m := range vf.ExcludedModules {
		r.excluded[m] = true
	}
	if err := r.findModules(); err != nil {
		return nil, err
	}
	return r, nil
}

// findModules records the directory of every go.mod under the root.
func (r *release) findModules() error {
	err := filepath.WalkDir(r.root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && p != r.root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || d.Name() != "go.mod" {
			return nil
		}
		mf, err := readModFile(p)
		if err != nil {
			return err
		}
		dir := filepath.Dir(p)
		r.dirs[mf.Module.Mod.Path] = dir
		if dir == r.root {
			r.rootPath = mf.Module.Mod.Path
		}
		return nil
	})
	if err == nil && r.rootPath == "" {
		err = fmt.Errorf("no go.mod at %s", r.root)
	}
	return err
}

func readModFile(p string) (*modfile.File, error) {
	src, err := os.ReadFile(p)
	if err != nil {
		return nil, err
	}
	return modfile.Parse(p, src, nil)
}

// check fails unless every module of the tree is either published or
// excluded, and every published module requires the tree's other modules at
// their versions in versions.yaml (a consumer's build ignores replace
// directives, so a require is what it resolves).
func (r *release) check() error {
	var errs []string
	for _, m := range slices.Sorted(mapKeys(r.dirs)) {
		_, published := r.version[m]
		if published == r.excluded[m] {
			errs = append(errs, fmt.Sprintf("module %s (%s) must be listed once in versions.yaml: in a module set if it is released, under excluded-modules if not", m, r.rel(r.dirs[m])))
		}
	}
	for m := range r.version {
		if _, ok := r.dirs[m]; !ok {
			errs = append(errs, fmt.Sprintf("versions.yaml releases %s, which no go.mod of the tree declares", m))
		}
	}
	for _, m := range slices.Sorted(mapKeys(r.version)) {
		dir, ok := r.dirs[m]
		if !ok {
			continue
		}
		mf, err := readModFile(filepath.Join(dir, "go.mod"))
		if err != nil {
			return err
		}
		for _, req := range mf.Require {
			p := req.Mod.Path
			if _, inTree := r.dirs[p]; !inTree {
				continue
			}
			want, published := r.version[p]
			switch {
			case !published:
				errs = append(errs, fmt.Sprintf("%s requires %s, a module that is not released (excluded-modules): move what needs it to a test-only module", m, p))
			case req.Mod.Version != want:
				errs = append(errs, fmt.Sprintf("%s requires %s %s; versions.yaml releases it as %s: `go mod edit -require=%s@%s` in %s", m, p, req.Mod.Version, want, p, want, r.rel(dir)))
			}
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("versions.yaml and the tree disagree:\n  %s", strings.Join(errs, "\n  "))
	}
	return nil
}

// tags returns the release tags, in the multi-module convention: the root
// module's is its version, another module's is its directory, a slash and
// its version (backend/redis/v0.1.0).
func (r *release) tags() []string {
	var out []string
	for _, m := range slices.Sorted(mapKeys(r.version)) {
		out = append(out, r.tag(m))
	}
	return out
}

func (r *release) tag(m string) string {
	if m == r.rootPath {
		return r.version[m]
	}
	return path.Join(strings.TrimPrefix(m, r.rootPath+"/"), r.version[m])
}

func (r *release) rel(dir string) string {
	p, err := filepath.Rel(r.root, dir)
	if err != nil {
		return dir
	}
	return p
}

func mapKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}
