// cgo compiles only the package directory: this one-line shim pulls in
// arch/switch_aarch64_aapcs_elf.S (the _arm64 suffix selects the GOARCH).

//go:build cgo

#include "arch/switch_aarch64_aapcs_elf.S"
