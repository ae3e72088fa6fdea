//go:build !race && !asan

package xtc

const underSanitizer = false
