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
// compiles). Empty: a new gap fails (add a stub, or list it here as debt),
// and so does an entry that is no longer missing.
var noCgoDebt = map[string]bool{}

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
