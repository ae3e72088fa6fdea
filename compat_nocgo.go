//go:build !cgo

package xtc

func StackReclaimEnable(int) error { return ErrNoCgo }
func StackReclaimDisable()         {}
func StackReclaimEnabled() bool    { return false }
func StackReclaimCount() uint64    { return 0 }
