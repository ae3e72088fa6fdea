package main

// The root package compiles the C runtime (its zz_csrc_* shims); importing
// it links those objects, which the drivers in xb_*.c call through the
// public headers.
import _ "github.com/xtc-go/xtc"
