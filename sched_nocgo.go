//go:build !cgo

package xtc

func SchedPolicySet(*Loop, *SchedPolicy) error { return ErrNoCgo }
func SchedContinuousSet(*Loop, int) error      { return ErrNoCgo }
func SchedGetStats(*Loop) (SchedStats, error)  { return SchedStats{}, ErrNoCgo }
func SchedLaneOf(*ExecClass) (int, error)      { return 0, ErrNoCgo }
