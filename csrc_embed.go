package xtc

import "embed"

// csrcFiles exists for its side effect: go:embed makes every file under
// csrc/ an input of this package, so editing a C file (reached only through
// the zz_csrc_* #include shims, which Go's build cache does not follow)
// invalidates the cached build (golang/go#24355).
//
//go:embed csrc
var csrcFiles embed.FS
