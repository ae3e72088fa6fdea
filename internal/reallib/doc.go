// Package reallib runs a real C library (sqlite3) under xtc's involuntary
// preemption from Go, through cgo: one Exec.Go call per request, results
// compared with direct cgo calls, and a ctx deadline kill followed by plain
// cgo calls that must return (xtc_preempt(3) SAFETY).
//
// The test needs sqlite3's development package, so it is behind the build
// tag xtc_reallibs (make test passes it; the Makefile's APT_PKGS installs
// libsqlite3-dev): without the tag this package is this file alone and the
// module has no link dependency on sqlite3.
package reallib
