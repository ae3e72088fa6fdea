package main

// The root package imports the C runtime (package csrc); importing
// it links those objects, which the drivers in xb_*.c call through the
// public headers.
import _ "github.com/xtc-go/xtc"
