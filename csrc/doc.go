// Package csrc is the C runtime of xtc, compiled by cgo: every csrc/*.c
// of this directory and, through the zz_arch_*.S shims, the assembly of
// csrc/arch/ for the build's GOARCH. Package xtc (the module root) imports
// it for its side effect; nothing else is to be imported from it. With
// CGO_ENABLED=0 it is an empty package, so the root still builds.
//
// Maintainers: csrc/HACKING.md (layers, where a request goes, where to
// start). The public headers are in csrc/include.
package csrc
