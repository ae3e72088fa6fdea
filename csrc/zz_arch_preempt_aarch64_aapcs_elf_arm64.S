// cgo compiles only the package directory: this one-line shim pulls in
// arch/preempt_aarch64_aapcs_elf.S (the _arm64 suffix selects the GOARCH).

//go:build cgo

#include "arch/preempt_aarch64_aapcs_elf.S"
