package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/mod/module"
	"golang.org/x/mod/zip"
)

// writeProxy writes, under dir, a module proxy (GOPROXY=file://dir) that
// serves each published module at its version in versions.yaml, made from
// the tree as it is now: what `go get` would fetch once the tags are pushed.
func (r *release) writeProxy(dir string) error {
	now := time.Now().UTC().Format(time.RFC3339)
	for m, v := range r.version {
		esc, err := module.EscapePath(m)
		if err != nil {
			return err
		}
		at := filepath.Join(dir, filepath.FromSlash(esc), "@v")
		if err := os.MkdirAll(at, 0o755); err != nil {
			return err
		}
		info, err := json.Marshal(struct{ Version, Time string }{v, now})
		if err != nil {
			return err
		}
		gomod, err := os.ReadFile(filepath.Join(r.dirs[m], "go.mod"))
		if err != nil {
			return err
		}
		for name, data := range map[string][]byte{"list": []byte(v + "\n"), v + ".info": info, v + ".mod": gomod} {
			if err := os.WriteFile(filepath.Join(at, name), data, 0o644); err != nil {
				return err
			}
		}
		if err := writeZip(filepath.Join(at, v+".zip"), module.Version{Path: m, Version: v}, r.dirs[m]); err != nil {
			return fmt.Errorf("zip of %s: %w", m, err)
		}
	}
	return nil
}

func writeZip(file string, mv module.Version, dir string) error {
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	if err := zip.CreateFromDir(f, mv, dir); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
