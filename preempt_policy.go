package xtc

// PreemptPolicy says which code involuntary preemption may interrupt
// (xtc_preempt_set_policy, xtc_preempt(3) SAFETY). Whatever the policy, a
// fiber that holds a lock, the runtime's own code and Go code are never
// interrupted.
type PreemptPolicy int

const (
	// PreemptDeclared (the default): only code declared preemptible. In a
	// cgo preamble, mark the program's own C kernels XTC_PREEMPTIBLE
	// (with xtc's headers) or __attribute__((section("xtc_ptext"),
	// noinline)); allow whole libraries with PreemptAllowObject and JIT
	// code with PreemptDeclare. Library calls (sqlite3, OpenSSL, libxml2,
	// a malloc replacement) run to their end, and a preemption or a kill
	// that arrives inside one waits until the fiber is back in declared
	// code.
	PreemptDeclared PreemptPolicy = 0
	// PreemptProgram: also the executable's own text, which in a Go
	// program includes the C code of every cgo package it links (a
	// sqlite amalgamation, for one): protected by lock tracking then, but
	// not its thread-local state.
	PreemptProgram PreemptPolicy = 1
	// PreemptAny: every loaded object except libc, ld.so, the vDSO and
	// the other system libraries (the behaviour of earlier versions, an
	// explicit opt-in).
	PreemptAny PreemptPolicy = 2
)

// String names the policy as the XTC_PREEMPT_POLICY environment variable
// does (declared, program, any).
func (p PreemptPolicy) String() string {
	switch p {
	case PreemptDeclared:
		return "declared"
	case PreemptProgram:
		return "program"
	case PreemptAny:
		return "any"
	}
	return "PreemptPolicy(?)"
}
