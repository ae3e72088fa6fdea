package xtc

// The cgo and !cgo builds export the same API (nocgo_api_test.go runs in
// both tag sets: it only parses files).

import (
	"go/ast"
	"go/build"
	"go/parser"
	"go/token"
	"path/filepath"
	"sort"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// exportedAPI lists the exported functions, methods (Recv.Name), types,
// and package-level vars and consts of the package as built with cgo on
// or off.
func exportedAPI(t *testing.T, cgo bool) map[string]bool {
	ctx := build.Default
	ctx.CgoEnabled = cgo
	pkg, err := ctx.ImportDir(".", 0)
	require.NoError(t, err)
	files := append([]string{}, pkg.GoFiles...)
	files = append(files, pkg.CgoFiles...)
	fset := token.NewFileSet()
	api := map[string]bool{}
	for _, f := range files {
		af, err := parser.ParseFile(fset, filepath.Join(".", f), nil, 0)
		require.NoError(t, err)
		for _, d := range af.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if !d.Name.IsExported() {
					continue
				}
				name := d.Name.Name
				if d.Recv != nil && len(d.Recv.List) == 1 {
					rt := d.Recv.List[0].Type
					if s, ok := rt.(*ast.StarExpr); ok {
						rt = s.X
					}
					if id, ok := rt.(*ast.Ident); ok {
						if !id.IsExported() {
							continue
						}
						name = id.Name + "." + name
					}
				}
				api["func "+name] = true
			case *ast.GenDecl:
				for _, sp := range d.Specs {
					switch sp := sp.(type) {
					case *ast.TypeSpec:
						if sp.Name.IsExported() {
							api["type "+sp.Name.Name] = true
						}
					case *ast.ValueSpec:
						for _, n := range sp.Names {
							if n.IsExported() {
								api["value "+n.Name] = true
							}
						}
					}
				}
			}
		}
	}
	return api
}

// noCgoDebt: exported with cgo and not yet stubbed for !cgo (doc.go promises
// that every call returns ErrNoCgo there, so an importing program still
// compiles). Known gaps, to be filled; a new gap fails, and so does an entry
// that is no longer missing.
var noCgoDebt = map[string]bool{
	"func CallResult.Done":         true,
	"func CallResult.Kill":         true,
	"func CallResult.Pid":          true,
	"func CallResult.Wait":         true,
	"func Class.CPU":               true,
	"func Class.Latency":           true,
	"func Class.OnLoop":            true,
	"func Class.Runs":              true,
	"func Class.Shares":            true,
	"func Exec.Close":              true,
	"func Exec.EagerRebalance":     true,
	"func Exec.Fini":               true,
	"func Exec.Go":                 true,
	"func Exec.GoAsync":            true,
	"func Exec.GoInt":              true,
	"func Exec.Loop":               true,
	"func Exec.LoopStats":          true,
	"func Exec.NLoops":             true,
	"func Exec.NewClass":           true,
	"func Exec.NewMailbox":         true,
	"func Exec.Run":                true,
	"func Exec.ServiceMode":        true,
	"func Exec.SetEagerRebalance":  true,
	"func Exec.SetPreempt":         true,
	"func Exec.SetPreemptAdaptive": true,
	"func Exec.SetServiceMode":     true,
	"func Exec.SetStallBudget":     true,
	"func Exec.SetStealBackoff":    true,
	"func Exec.Shutdown":           true,
	"func Exec.Start":              true,
	"func Exec.StealBackoff":       true,
	"func Exec.Stop":               true,
	"func Exec.Submit":             true,
	"func Exec.SubmitWithin":       true,
	"func ExecClass.CPU":           true,
	"func ExecClass.Latency":       true,
	"func ExecClass.Runs":          true,
	"func ExecClass.Shares":        true,
	"func ExecClass.VRuntime":      true,
	"func ExecClassCreate":         true,
	"func ExecInit":                true,
	"func ExecLoopID":              true,
	"func ExecRun.Done":            true,
	"func ExecRun.Wait":            true,
	"func Loop.SetStallBudget":     true,
	"func Loop.SetStallFunc":       true,
	"func Loop.StallCount":         true,
	"func Loop.StallInFlight":      true,
	"func Mailbox.Close":           true,
	"func Mailbox.Demonitor":       true,
	"func Mailbox.Done":            true,
	"func Mailbox.Link":            true,
	"func Mailbox.Monitor":         true,
	"func Mailbox.Pid":             true,
	"func Mailbox.Recv":            true,
	"func Mailbox.Unlink":          true,
	"func NewExec":                 true,
	"func ShardCount":              true,
	"func ShardID":                 true,
	"func WithClass":               true,
	"func WithLoop":                true,
	"func WithLoopClass":           true,
	"func WithName":                true,
	"type CallOption":              true,
	"type CallResult":              true,
	"type Class":                   true,
	"type Exec":                    true,
	"type ExecRun":                 true,
	"type LoopStats":               true,
	"type Mailbox":                 true,
	"type StallFunc":               true,
	"type StallReport":             true,
}

// The !cgo build (nocgo.go and the *_nocgo.go stubs) declares everything
// the cgo build exports, checked by parsing both file sets.
func TestNoCgoStubsCoverAPI(t *testing.T) {
	withCgo, without := exportedAPI(t, true), exportedAPI(t, false)
	var missing, stale []string
	for k := range withCgo {
		if !without[k] && !noCgoDebt[k] {
			missing = append(missing, k)
		}
	}
	for k := range noCgoDebt {
		if without[k] || !withCgo[k] {
			stale = append(stale, k)
		}
	}
	sort.Strings(missing)
	sort.Strings(stale)
	assert.Empty(t, missing, "exported with cgo, missing from the !cgo build (add a stub)")
	assert.Empty(t, stale, "noCgoDebt entries that are no longer missing: remove them")
}
