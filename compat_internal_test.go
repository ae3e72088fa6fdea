package xtc

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// A C error code without a call-site reason carries the table's longer
// reading as its Reason; the code's own text is xtc_strerror's (libxtc's).
func TestMkerrExplains(t *testing.T) {
	err := mkerr("xtc_send", int(ErrAgain))
	xe := err.(*Error)
	assert.Equal(t, "try again: timeout, full queue or budget exhausted", xe.Reason)
	assert.Equal(t, "xtc: xtc_send: resource temporarily unavailable (try again: timeout, full queue or budget exhausted)", err.Error())
	assert.Equal(t, "xtc: resource temporarily unavailable", ErrAgain.Error())
	assert.Equal(t, "a runtime invariant failed or the platform failed unexpectedly", ErrInternal.Explain())
	assert.Equal(t, "", ErrNomem.Explain())
	// codes without an explanation keep an empty Reason
	assert.Equal(t, "", mkerr("x", int(ErrNomem)).(*Error).Reason)
}
