package agent

import (
	"go/ast"
	"go/parser"
	"go/token"
	"go/types"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The seam between the server and the lock manager (see the top of
// agent.go): the server's files reach the manager only through locks, and
// the manager's reach a session only through client. The files of each side
// are listed here, and every file of the package is on one side or is the
// composition root's, so a new file has to say where it stands.
var (
	serverFiles  = []string{"session.go", "order.go", "lock.go", "verbs.go"}
	managerFiles = []string{"name.go", "waiters.go", "contender.go", "hold.go", "lend.go", "cohort.go", "cache.go", "watch.go"}
	rootFiles    = []string{"agent.go", "config.go"}
)

// managerOnly are the manager's types that no server file may name or look
// into: the manager's state, and each name's record and what hangs from it.
// The server holds handles to holds and waits, and asks them through their
// methods: it reads no field of either.
var (
	managerOnly = []string{"manager", "nameRecord", "queue", "lending", "observation", "waitRecord", "wantedName"}
	handles     = []string{"hold", "waiter"}
)

func TestTheServerAndTheManagerMeetOnlyAtTheirInterfaces(t *testing.T) {
	fset := token.NewFileSet()
	paths, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	var files []*ast.File
	side := map[*ast.File]string{}
	for _, path := range paths {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
		switch {
		case slices.Contains(serverFiles, path):
			side[f] = "server"
		case slices.Contains(managerFiles, path):
			side[f] = "manager"
		case !slices.Contains(rootFiles, path):
			t.Errorf("%s is on no side of the seam: list it in seam_internal_test.go", path)
		}
	}
	// Only the package's own types matter here: its imports are left
	// empty (type-checking them from source takes half a minute), and what
	// the files take from them is left untyped.
	info := &types.Info{Uses: map[*ast.Ident]types.Object{}, Selections: map[*ast.SelectorExpr]*types.Selection{}}
	conf := types.Config{Importer: emptyImports{}, Error: func(error) {}}
	conf.Check("github.com/lock-agent/lock-agent/agent", fset, files, info)
	if len(info.Selections) == 0 {
		t.Fatal("the package's files were not type-checked")
	}
	for _, f := range files {
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.SelectorExpr:
				sel := info.Selections[n]
				if sel == nil {
					return true
				}
				recv := typeName(sel.Recv())
				switch {
				case side[f] == "server" && slices.Contains(managerOnly, recv):
					t.Errorf("%s: the server looks into the manager's %s.%s: ask through locks", fset.Position(n.Pos()), recv, n.Sel.Name)
				case side[f] == "server" && slices.Contains(handles, recv) && sel.Kind() == types.FieldVal:
					t.Errorf("%s: the server reads the field %s of a %s: ask through its methods", fset.Position(n.Pos()), n.Sel.Name, recv)
				case side[f] == "manager" && recv == "session":
					t.Errorf("%s: the manager looks into a session's %s: ask through client", fset.Position(n.Pos()), n.Sel.Name)
				}
			case *ast.Ident:
				obj, ok := info.Uses[n].(*types.TypeName)
				if !ok || obj.Pkg() == nil || obj.Pkg().Name() != "agent" {
					return true
				}
				switch {
				case side[f] == "server" && slices.Contains(managerOnly, obj.Name()):
					t.Errorf("%s: the server names the manager's %s", fset.Position(n.Pos()), obj.Name())
				case side[f] == "manager" && obj.Name() == "session":
					t.Errorf("%s: the manager names session: it knows a session as a client", fset.Position(n.Pos()))
				}
			}
			return true
		})
	}
}

// emptyImports imports every package as an empty one.
type emptyImports struct{}

func (emptyImports) Import(path string) (*types.Package, error) {
	pkg := types.NewPackage(path, filepath.Base(path))
	pkg.MarkComplete()
	return pkg, nil
}

// typeName is the name of t's named type, through a pointer.
func typeName(t types.Type) string {
	if p, ok := t.(*types.Pointer); ok {
		t = p.Elem()
	}
	if n, ok := t.(*types.Named); ok {
		return n.Obj().Name()
	}
	return ""
}
