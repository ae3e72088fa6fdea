//go:build !cgo

package xtc

import "context"

// Batch groups need the C runtime: every call returns ErrNoCgo.

type Batch struct{}

func BatchCreate(loop *Loop, opts *BatchOpts) (*Batch, error)        { return nil, ErrNoCgo }
func (b *Batch) Submit(request any, charge uint64) (uint64, error)   { return 0, ErrNoCgo }
func (b *Batch) Cancel(handle uint64) error                          { return ErrNoCgo }
func (b *Batch) Resume(handle uint64) error                          { return ErrNoCgo }
func (b *Batch) Close(mode BatchCloseMode) error                     { return ErrNoCgo }
func (b *Batch) Destroy() error                                      { return ErrNoCgo }
func (b *Batch) Stats() (BatchStats, error)                          { return BatchStats{}, ErrNoCgo }
func (b *Batch) SubmitMT(request any, charge uint64) (uint64, error) { return 0, ErrNoCgo }
func (b *Batch) CancelMT(handle uint64) error                        { return ErrNoCgo }
func (b *Batch) ResumeMT(handle uint64) error                        { return ErrNoCgo }
func (b *Batch) Do(ctx context.Context, request any) (any, error)    { return nil, ErrNoCgo }
