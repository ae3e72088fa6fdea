//go:build race || asan

package xtc

// underSanitizer: the race detector or ASan replaces the allocator (shadow
// memory, quarantine), so RSS figures measure the sanitizer, not xtc.
const underSanitizer = true
