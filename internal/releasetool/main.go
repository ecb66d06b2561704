// Command releasetool reads versions.yaml, the record of each module's
// release version, and does what a release needs from it:
//
//	releasetool check          checks versions.yaml against the tree
//	releasetool tags [-create] prints (or creates, with git) the release tags
//	releasetool proxy DIR      writes a module proxy of the published modules
//
// It is a module of its own, excluded from releases, so that its
// dependencies are no requirement of a published module. Run it from the
// repository's root (make release-tags, .ci/check-release).
package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
)

func main() {
	versions := flag.String("versions", "versions.yaml", "the versions file, at the repository's root")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: releasetool [-versions FILE] check | tags [-create] | proxy DIR")
		flag.PrintDefaults()
	}
	flag.Parse()
	if err := run(*versions, flag.Args()); err != nil {
		fmt.Fprintln(os.Stderr, "releasetool:", err)
		os.Exit(1)
	}
}

func run(versions string, args []string) error {
	if len(args) == 0 {
		flag.Usage()
		return fmt.Errorf("no command")
	}
	rel, err := load(versions)
	if err != nil {
		return err
	}
	if err := rel.check(); err != nil {
		return err
	}
	switch cmd := args[0]; {
	case cmd == "check" && len(args) == 1:
		return nil
	case cmd == "tags" && len(args) == 1:
		for _, t := range rel.tags() {
			fmt.Println(t)
		}
		return nil
	case cmd == "tags" && len(args) == 2 && args[1] == "-create":
		for _, t := range rel.tags() {
			out, err := exec.Command("git", "-C", rel.root, "tag", "-a", t, "-m", t).CombinedOutput()
			if err != nil {
				return fmt.Errorf("git tag %s: %v: %s", t, err, out)
			}
			fmt.Println(t)
		}
		return nil
	case cmd == "proxy" && len(args) == 2:
		return rel.writeProxy(args[1])
	}
	flag.Usage()
	return fmt.Errorf("unknown command %q", args)
}
