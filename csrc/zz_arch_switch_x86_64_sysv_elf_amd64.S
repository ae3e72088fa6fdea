// cgo compiles only the package directory: this one-line shim pulls in
// arch/switch_x86_64_sysv_elf.S (the _amd64 suffix selects the GOARCH).

//go:build cgo

#include "arch/switch_x86_64_sysv_elf.S"
