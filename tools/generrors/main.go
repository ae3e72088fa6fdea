// Command generrors writes errors_gen.go from the X-macro error table in
// csrc/include/xtc_errors.h, the one table the C enum and xtc_strerror are
// also generated from. Run it with `go generate` in the module root (see
// errors.go) or `make generate`; TestErrorsGenUpToDate fails when the
// checked-in file differs from what this program would write.
//
// Usage: generrors [-in csrc/include/xtc_errors.h] [-out errors_gen.go] [-check]
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"

	"github.com/xtc-go/xtc/internal/errtable"
)

func main() {
	in := flag.String("in", "csrc/include/xtc_errors.h", "error table header")
	out := flag.String("out", "errors_gen.go", "generated Go file")
	check := flag.Bool("check", false, "only report whether -out is up to date")
	flag.Parse()

	hdr, err := os.ReadFile(*in)
	if err != nil {
		fatal(err)
	}
	codes, err := errtable.Parse(hdr)
	if err != nil {
		fatal(fmt.Errorf("%s: %w", *in, err))
	}
	src, err := errtable.GenerateGo(codes)
	if err != nil {
		fatal(err)
	}
	if *check {
		old, _ := os.ReadFile(*out)
		if !bytes.Equal(old, src) {
			fatal(fmt.Errorf("%s is stale: run `go generate` (or make generate)", *out))
		}
		return
	}
	if err := os.WriteFile(*out, src, 0o644); err != nil {
		fatal(err)
	}
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "generrors:", err)
	os.Exit(1)
}
