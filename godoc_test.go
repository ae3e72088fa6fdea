package xtc

// Every exported name of the package has a doc comment (the godoc the cgo
// build shows: `go doc -all`). Parses the files, so it runs in both tag
// sets.

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

func TestGodocEveryExportedName(t *testing.T) {
	ctx := build.Default
	ctx.CgoEnabled = true
	pkg, err := ctx.ImportDir(".", 0)
	require.NoError(t, err)
	files := append(append([]string{}, pkg.GoFiles...), pkg.CgoFiles...)
	fset := token.NewFileSet()
	var missing []string
	for _, f := range files {
		af, err := parser.ParseFile(fset, filepath.Join(".", f), nil, parser.ParseComments)
		require.NoError(t, err)
		for _, d := range af.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if !d.Name.IsExported() || d.Doc != nil {
					continue
				}
				if d.Recv != nil && len(d.Recv.List) == 1 {
					rt := d.Recv.List[0].Type
					if s, ok := rt.(*ast.StarExpr); ok {
						rt = s.X
					}
					if id, ok := rt.(*ast.Ident); ok && !id.IsExported() {
						continue
					}
				}
				missing = append(missing, fset.Position(d.Pos()).String()+" func "+d.Name.Name)
			case *ast.GenDecl:
				for _, sp := range d.Specs {
					switch sp := sp.(type) {
					case *ast.TypeSpec:
						if sp.Name.IsExported() && sp.Doc == nil && d.Doc == nil {
							missing = append(missing, fset.Position(sp.Pos()).String()+" type "+sp.Name.Name)
						}
					case *ast.ValueSpec:
						for _, n := range sp.Names {
							// a documented group covers its members
							if n.IsExported() && sp.Doc == nil && sp.Comment == nil && d.Doc == nil {
								missing = append(missing, fset.Position(n.Pos()).String()+" "+n.Name)
							}
						}
					}
				}
			}
		}
	}
	sort.Strings(missing)
	assert.Empty(t, missing, "exported names without a doc comment")
}
