package xtc

// Tests of the build glue: shims, the meson source list, the generated
// errors, the embed. They need no C runtime and also run with CGO_ENABLED=0.

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/xtc-go/xtc/internal/errtable"
	"github.com/xtc-go/xtc/internal/shimgen"
)

// The zz_csrc_* shims must be exactly one per csrc/*.c and csrc/arch/*.S:
// a C file without a shim is silently missing from `go build`.
func TestShimsMatchCsrc(t *testing.T) {
	diff, err := shimgen.Diff(".")
	require.NoError(t, err)
	assert.Empty(t, diff, "run `make shims` (go run ./tools/genshims)")
}

// meson.build lists its sources as a plan (files are written
// concurrently); a csrc/*.c missing from that plan is silently left out of
// the C library.
func TestMesonPlansEveryCsrcFile(t *testing.T) {
	mb, err := os.ReadFile("meson.build")
	require.NoError(t, err)
	m := regexp.MustCompile(`(?s)core_planned = \[(.*?)\]`).FindSubmatch(mb)
	require.NotNil(t, m, "core_planned not found in meson.build")
	planned := map[string]bool{}
	for _, q := range regexp.MustCompile(`'([^']+)'`).FindAllSubmatch(m[1], -1) {
		planned[string(q[1])] = true
	}
	cs, err := filepath.Glob("csrc/*.c")
	require.NoError(t, err)
	for _, c := range cs {
		assert.True(t, planned[filepath.Base(c)], "%s is not in meson.build core_planned", c)
	}
}

// errors_gen.go must be what tools/generrors writes from xtc_errors.h.
func TestErrorsGenUpToDate(t *testing.T) {
	hdr, err := os.ReadFile("csrc/include/xtc_errors.h")
	require.NoError(t, err)
	codes, err := errtable.Parse(hdr)
	require.NoError(t, err)
	want, err := errtable.GenerateGo(codes)
	require.NoError(t, err)
	have, err := os.ReadFile("errors_gen.go")
	require.NoError(t, err)
	assert.Equal(t, string(want), string(have), "run `go generate` (make generate)")

	for _, c := range codes {
		if c.Value == 0 {
			continue
		}
		e := Errno(c.Value)
		assert.Equal(t, "XTC_E_"+c.Name, e.Name())
		assert.Equal(t, "xtc: "+c.Text, e.Error())
	}
}

func TestErrnoUnknown(t *testing.T) {
	assert.Equal(t, "xtc: unknown error -999", Errno(-999).Error())
	assert.Equal(t, "XTC_E_(-999)", Errno(-999).Name())
	assert.Equal(t, "xtc: unknown error 5", Errno(5).Error())
}

func TestErrorWrapsCode(t *testing.T) {
	err := mkerr("xtc_send", int(ErrAgain))
	require.Error(t, err)
	assert.ErrorIs(t, err, ErrAgain)
	assert.NotErrorIs(t, err, ErrInval)
	var xe *Error
	require.ErrorAs(t, err, &xe)
	assert.Equal(t, "xtc_send", xe.Op)
	assert.Equal(t, ErrAgain, xe.Code)
	assert.True(t, strings.HasPrefix(err.Error(), "xtc: xtc_send: try again"), err.Error())
	assert.NoError(t, mkerr("xtc_send", 0))
}

func TestParseRejectsBadTables(t *testing.T) {
	for name, src := range map[string]string{
		"missing":  "nothing here",
		"dup":      "#define XTC_ERRORS(X) X(OK, 0, \"ok\") \\\n X(A, -1, \"a\") \\\n X(A, -2, \"b\")\n",
		"positive": "#define XTC_ERRORS(X) X(OK, 0, \"ok\") \\\n X(A, 1, \"a\")\n",
		"no ok":    "#define XTC_ERRORS(X) X(A, -1, \"a\")\n",
	} {
		_, err := errtable.Parse([]byte(src))
		assert.Error(t, err, name)
	}
}

// The embed must carry the C sources (it is what invalidates the build
// cache when they change).
func TestEmbedHasCsrc(t *testing.T) {
	b, err := csrcFiles.ReadFile("csrc/include/xtc_errors.h")
	require.NoError(t, err)
	assert.Contains(t, string(b), "XTC_ERRORS")
}
