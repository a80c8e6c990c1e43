// Package layout checks the house plan of docs/architecture.md, so that it stays true:
// one wing per system under internal/, wings and shared code kept apart, condition types
// and reasons declared in api/ only, controllers that do not import each other and keep
// no package-level mutable state, and pure packages that hold no Kubernetes client.
package layout

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/trustplane/trustplane/"

// root is the repository's root: this package is test/layout.
var root = filepath.Join("..", "..")

// wings are the five systems: each one's controllers, pure core, agent and plumbing live
// under internal/<wing>, its single-system suites under test/<wing>.
var wings = []string{"jwks", "aggregation", "checksum", "podcert", "provisioning"}

// shared are the packages of internal/ any wing may use; they import no wing.
var shared = []string{"apply", "atomicfile", "configfile", "debounce", "finalizer", "handlers", "manager", "scheme", "status", "testcerts", "testenv", "version"}

// assembly are the packages of internal/ that put wings together (the manager's
// controllers, the CLI) or run a cluster for them; they may import any wing.
var assembly = []string{"cli", "localcp", "localnode", "usercli"}

// crossSystemSuites are the suites of test/ that span systems; every other suite is a
// wing's, under test/<wing>/.
var crossSystemSuites = []string{"admission", "bench", "chaos", "cli", "e2e", "install", "k8speers", "layout", "monitoring", "node", "samples", "security", "status"}

// controllers are the packages that run a controller (their Setup adds it to a manager).
var controllers = []string{
	"jwks",
	"aggregation/clusterroleaggregation", "aggregation/roleaggregation",
	"checksum/secretchecksum",
	"podcert/podcertsigner", "podcert/tlsexpiry",
	"provisioning/cluster", "provisioning/kubeconfig", "provisioning/subscription",
}

// pure are the packages of internal/ that hold pure logic: no client of any API server.
var pure = []string{"atomicfile", "checksum", "configfile", "debounce", "jwks/jwkset", "podcert", "aggregation/rbac", "provisioning/access",
	"provisioning/credentialpool", "provisioning/shoot", "provisioning/slots", "provisioning/tenantkubeconfig", "scheme", "testcerts", "version"}

// wingOf is the wing an internal/ or test/ path (slash-separated, from the root) is in,
// or "" when it is in none.
func wingOf(path string) string {
	for _, w := range wings {
		for _, top := range []string{"internal/", "test/"} {
			if path == top+w || strings.HasPrefix(path, top+w+"/") {
				return w
			}
		}
	}
	return ""
}

// TestEveryFolderHasAPlace: each package of internal/ is in a wing, shared or assembly;
// each suite of test/ is a wing's or listed as cross-system.
func TestEveryFolderHasAPlace(t *testing.T) {
	for _, pkg := range packagesUnder(t, "internal") {
		path := strings.TrimPrefix(pkg, module)
		top := strings.Split(strings.TrimPrefix(path, "internal/"), "/")[0]
		if wingOf(path) == "" && !slices.Contains(shared, top) && !slices.Contains(assembly, top) {
			t.Errorf("%s is in no wing and is neither shared nor assembly: move it into its system's wing, or list it in test/layout and docs/architecture.md", path)
		}
	}
	entries, err := os.ReadDir(filepath.Join(root, "test"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.IsDir() && !slices.Contains(wings, e.Name()) && !slices.Contains(crossSystemSuites, e.Name()) {
			t.Errorf("test/%s is neither a wing's (test/<wing>/) nor a listed cross-system suite", e.Name())
		}
	}
}

// TestWingsStandApart: no package of a wing depends on another wing, and no shared
// package depends on any wing (go list -deps, tests included), so a system can be read,
// changed and tested alone.
func TestWingsStandApart(t *testing.T) {
	for _, pkg := range packagesUnder(t, "internal") {
		path := strings.TrimPrefix(pkg, module)
		own := wingOf(path)
		top := strings.Split(strings.TrimPrefix(path, "internal/"), "/")[0]
		if own == "" && !slices.Contains(shared, top) {
			continue // assembly
		}
		for _, dep := range deps(t, "-test", pkg) {
			other := wingOf(strings.TrimPrefix(dep, module))
			if !strings.HasPrefix(dep, module) || other == "" || other == own {
				continue
			}
			if own == "" {
				t.Errorf("shared %s depends on wing %s (%s): shared code serves every wing and knows none", path, other, dep)
			} else {
				t.Errorf("wing %s: %s depends on wing %s (%s): systems share only what is shared", own, path, other, dep)
			}
		}
	}
}

// reasonArgument is, per called function or method name, the position of its reason
// argument: status.* helpers, status.Set, and an EventRecorder's Eventf.
var reasonArgument = map[string]int{
	"Stalled": 0, "Waiting": 0, "Refused": 0, "Transient": 0,
	"MarkReady": 1, "MarkNotReady": 1, "Set": 3, "Eventf": 3,
}

// TestReasonsLiveInAPI: no production Go file outside api/ declares a Reason* or
// Condition* constant or variable, or passes a string literal where a reason goes.
func TestReasonsLiveInAPI(t *testing.T) {
	for path, file := range productionFiles(t) {
		if strings.HasPrefix(path, "api/") {
			continue
		}
		ast.Inspect(file, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.ValueSpec:
				for _, name := range n.Names {
					if strings.HasPrefix(name.Name, "Reason") || strings.HasPrefix(name.Name, "Condition") ||
						strings.HasPrefix(name.Name, "reason") || strings.HasPrefix(name.Name, "condition") {
						t.Errorf("%s: %s is declared outside api/: condition types and reasons belong in api/", path, name.Name)
					}
				}
			case *ast.CallExpr:
				if lit := literalReason(n); lit != "" {
					t.Errorf("%s: reason %s is a literal: declare it in api/", path, lit)
				}
			}
			return true
		})
	}
}

func literalReason(call *ast.CallExpr) string {
	sel, ok := call.Fun.(*ast.SelectorExpr)
	if !ok {
		return ""
	}
	i, ok := reasonArgument[sel.Sel.Name]
	if !ok || i >= len(call.Args) {
		return ""
	}
	if lit, ok := call.Args[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
		return lit.Value
	}
	return ""
}

// TestControllersStandAlone: no controller package depends on another (go list -deps),
// and none keeps package-level mutable state (sync.*, sync/atomic.* of any type, maps):
// what controllers
// share is built where the manager is assembled (internal/cli) and handed to each.
func TestControllersStandAlone(t *testing.T) {
	var pkgs []string
	for _, c := range controllers {
		pkgs = append(pkgs, module+"internal/"+c)
	}
	for _, pkg := range pkgs {
		for _, dep := range deps(t, pkg) {
			if dep != pkg && slices.Contains(pkgs, dep) {
				t.Errorf("%s depends on %s: controllers share through packages of internal/, never each other", pkg, dep)
			}
		}
	}
	for path, file := range productionFiles(t) {
		if !slices.Contains(controllers, strings.TrimPrefix(filepath.ToSlash(filepath.Dir(path)), "internal/")) {
			continue
		}
		for _, decl := range file.Decls {
			gen, ok := decl.(*ast.GenDecl)
			if !ok || gen.Tok != token.VAR {
				continue
			}
			for _, spec := range gen.Specs {
				if kind := mutableState(spec.(*ast.ValueSpec)); kind != "" {
					t.Errorf("%s: package-level %s: shared mutable state belongs in Options or the Reconciler", path, kind)
				}
			}
		}
	}
}

// TestPurePackagesHoldNoClient: the pure packages of internal/ reach no API server.
func TestPurePackagesHoldNoClient(t *testing.T) {
	for _, name := range pure {
		pkg := module + "internal/" + name
		for _, dep := range deps(t, pkg) {
			if strings.HasPrefix(dep, "sigs.k8s.io/controller-runtime") || dep == "k8s.io/client-go/kubernetes" || dep == "k8s.io/client-go/dynamic" {
				t.Errorf("%s depends on %s: it is listed as pure logic (docs/architecture.md)", pkg, dep)
			}
		}
	}
}

// productionFiles are the parsed non-test Go files of the module, by slash path from the
// root, without generated code and without nested modules.
func productionFiles(t *testing.T) map[string]*ast.File {
	t.Helper()
	files := map[string]*ast.File{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if rel != "." && (strings.HasPrefix(d.Name(), ".") || rel == "bin" || hasOwnModule(path)) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(rel, ".go") || strings.HasSuffix(rel, "_test.go") || strings.HasPrefix(d.Name(), "zz_generated") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		files[rel] = f
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 100 {
		t.Fatalf("found only %d production files under %s", len(files), root)
	}
	return files
}

func hasOwnModule(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, "go.mod"))
	return err == nil && filepath.Clean(dir) != filepath.Clean(root)
}

func packagesUnder(t *testing.T, dir string) []string {
	t.Helper()
	return goList(t, "./"+dir+"/...")
}

// deps are the packages pkg depends on; flags (-test) go before it.
func deps(t *testing.T, args ...string) []string {
	t.Helper()
	return goList(t, append([]string{"-deps"}, args...)...)
}

func goList(t *testing.T, args ...string) []string {
	t.Helper()
	cmd := exec.Command("go", append([]string{"list"}, args...)...)
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list %s: %v", strings.Join(args, " "), err)
	}
	lines := strings.Fields(string(out))
	if len(lines) == 0 {
		t.Fatalf("go list %s: nothing", strings.Join(args, " "))
	}
	return lines
}

// mutableState names what a package-level var declares when it is mutable state a
// controller must not keep: a sync.* or atomic.* value (atomic.Pointer[T] included) or a
// map, declared by type or by value; "" otherwise.
func mutableState(spec *ast.ValueSpec) string {
	exprs := []ast.Expr{spec.Type}
	exprs = append(exprs, spec.Values...)
	for _, e := range exprs {
		if kind := mutableExpr(e); kind != "" {
			return kind
		}
	}
	return ""
}

func mutableExpr(e ast.Expr) string {
	switch e := e.(type) {
	case nil:
		return ""
	case *ast.MapType:
		return "map"
	case *ast.CompositeLit:
		return mutableExpr(e.Type)
	case *ast.UnaryExpr:
		return mutableExpr(e.X)
	case *ast.StarExpr:
		return mutableExpr(e.X)
	case *ast.IndexExpr: // atomic.Pointer[T]
		return mutableExpr(e.X)
	case *ast.IndexListExpr:
		return mutableExpr(e.X)
	case *ast.CallExpr:
		if id, ok := e.Fun.(*ast.Ident); ok && (id.Name == "make" || id.Name == "new") && len(e.Args) > 0 {
			return mutableExpr(e.Args[0])
		}
	case *ast.SelectorExpr:
		if x, ok := e.X.(*ast.Ident); ok && (x.Name == "sync" || x.Name == "atomic") {
			return x.Name + "." + e.Sel.Name
		}
	}
	return ""
}
