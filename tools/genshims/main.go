// Command genshims writes the zz_csrc_* cgo shims (one per csrc/*.c and
// csrc/arch/*.S; see internal/shimgen) in the module root. With -check it
// only reports drift and exits 1. Run from the module root: `make shims`.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/xtc-go/xtc/internal/shimgen"
)

func main() {
	root := flag.String("root", ".", "module root")
	check := flag.Bool("check", false, "report drift, change nothing")
	flag.Parse()
	if *check {
		d, err := shimgen.Diff(*root)
		if err != nil {
			fatal(err)
		}
		for _, l := range d {
			fmt.Println(l)
		}
		if len(d) > 0 {
			fatal(fmt.Errorf("shims drifted from csrc/: run `make shims`"))
		}
		return
	}
	changed, err := shimgen.Write(*root)
	if err != nil {
		fatal(err)
	}
	for _, l := range changed {
		fmt.Println(l)
	}
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "genshims:", err)
	os.Exit(1)
}
