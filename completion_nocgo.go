//go:build !cgo

package xtc

// Stubs of completion.go for CGO_ENABLED=0 builds: every call reports
// ErrNoCgo.

import (
	"context"
	"unsafe"
)

type Future struct{}

func Submit(*Loop, unsafe.Pointer, unsafe.Pointer) (*Future, error) { return nil, ErrNoCgo }
func SubmitWait(context.Context, *Loop, unsafe.Pointer, unsafe.Pointer) (int64, error) {
	return 0, ErrNoCgo
}
func (*Future) Wait(context.Context) (int64, error) { return 0, ErrNoCgo }
func (*Future) Done() <-chan struct{}               { return nil }
func (*Future) Ready() bool                         { return false }
func (*Future) Cancel() error                       { return ErrNoCgo }
func CompletionsDelivered() uint64                  { return 0 }
func BlockingPoolSize(int) error                    { return ErrNoCgo }
func BlockingThreads() int                          { return 0 }
func BlockingShutdown()                             {}
