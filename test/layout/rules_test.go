package layout

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// processes are the packages that run a process of their own besides the manager (a
// subcommand's Run): like the manager, each registers the collectors it sets when it starts.
var processes = []string{"checksum/dataplaneagent", "podcert/nodeagent", "jwks/jwksserver"}

// TestCollectorsAreRegisteredByTheManager: one metric shape for every controller. A
// controller package declares its collectors in metrics.go and hands them out through
// Collectors(); the manager registers them for the controllers it runs
// (manager.Controller.Collectors), and a process (the agents, jwks-server) registers its
// own when it starts. Nothing registers a collector when its package loads (init) or
// from a controller's Setup, where a second manager in one process would find it taken.
func TestCollectorsAreRegisteredByTheManager(t *testing.T) {
	for path, file := range productionFiles(t) {
		dir := filepath.ToSlash(filepath.Dir(path))
		pkg := strings.TrimPrefix(dir, "internal/")
		ast.Inspect(file, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.FuncDecl:
				if n.Recv == nil && n.Name.Name == "init" && (strings.HasPrefix(path, "internal/") || strings.HasPrefix(path, "pkg/")) {
					t.Errorf("%s: func init: packages of internal/ and pkg/ do nothing when they load; register or set up where the process starts", path)
				}
			case *ast.SelectorExpr: // a call, or the function handed on as a value
				if n.Sel.Name == "RegisterMetrics" && dir != "internal/manager" && !slices.Contains(processes, pkg) {
					t.Errorf("%s: registers collectors: a controller hands them out through Collectors() and the manager registers them", path)
				}
			case *ast.CallExpr:
				if called := calledName(n); (called == "MustRegister" || called == "Register" || called == "Unregister") && isPrometheusRegistry(n) && dir != "internal/manager" {
					t.Errorf("%s: %s on a Prometheus registry: only internal/manager's RegisterMetrics touches the registry", path, called)
				}
			}
			return true
		})
		if slices.Contains(controllers, pkg) && filepath.Base(path) != "metrics.go" && createsCollector(file) {
			t.Errorf("%s: creates a Prometheus collector outside metrics.go: a controller's collectors live in its metrics.go", path)
		}
	}
	for _, c := range controllers {
		metrics := filepath.Join(root, "internal", c, "metrics.go")
		file, err := parser.ParseFile(token.NewFileSet(), metrics, nil, 0)
		if err != nil {
			continue // a controller without collectors of its own
		}
		if !declaresFunc(file, "Collectors") {
			t.Errorf("internal/%s/metrics.go has no func Collectors() []prometheus.Collector: the manager registers a controller's collectors through it", c)
		}
	}
}

// calledName is the name of the function or method a call calls.
func calledName(call *ast.CallExpr) string {
	switch f := call.Fun.(type) {
	case *ast.Ident:
		return f.Name
	case *ast.SelectorExpr:
		return f.Sel.Name
	}
	return ""
}

// isPrometheusRegistry says whether a Register-like call is made on metrics.Registry,
// prometheus's default registerer or a prometheus.Registerer passed around (reg, r).
func isPrometheusRegistry(call *ast.CallExpr) bool {
	sel, ok := call.Fun.(*ast.SelectorExpr)
	if !ok {
		return false
	}
	switch x := sel.X.(type) {
	case *ast.Ident:
		return x.Name == "prometheus" || x.Name == "reg" || x.Name == "registry" || x.Name == "registerer"
	case *ast.SelectorExpr:
		return x.Sel.Name == "Registry" || x.Sel.Name == "DefaultRegisterer"
	}
	return false
}

func createsCollector(file *ast.File) bool {
	found := false
	ast.Inspect(file, func(n ast.Node) bool {
		if call, ok := n.(*ast.CallExpr); ok {
			if sel, ok := call.Fun.(*ast.SelectorExpr); ok {
				if x, ok := sel.X.(*ast.Ident); ok && x.Name == "prometheus" && strings.HasPrefix(sel.Sel.Name, "New") &&
					!strings.HasPrefix(sel.Sel.Name, "NewDesc") && sel.Sel.Name != "NewRegistry" && sel.Sel.Name != "NewPedanticRegistry" {
					found = true
				}
			}
		}
		return !found
	})
	return found
}

func declaresFunc(file *ast.File, name string) bool {
	for _, d := range file.Decls {
		if f, ok := d.(*ast.FuncDecl); ok && f.Recv == nil && f.Name.Name == name {
			return true
		}
	}
	return false
}

// TestFlagsCarryTheirControllersPrefix: every flag a controller package registers starts
// with its controller's name and a dash (--jwks-workers, --kubeconfig-max-expiration), so
// one prefix tells a reader which controller a flag configures and two controllers never
// compete for a name. A flag kept under an older name is an alias: registered and marked
// deprecated (fs.MarkDeprecated) in the same function, so pflag warns once when it is used.
func TestFlagsCarryTheirControllersPrefix(t *testing.T) {
	files := productionFiles(t)
	checked := 0
	for _, c := range controllers {
		name := controllerName(t, files, c)
		for path, file := range files {
			if filepath.ToSlash(filepath.Dir(path)) != "internal/"+c {
				continue
			}
			for _, decl := range file.Decls {
				fn, ok := decl.(*ast.FuncDecl)
				if !ok || fn.Body == nil {
					continue
				}
				flags, deprecated := flagNames(fn.Body)
				for _, flag := range flags {
					checked++
					if !strings.HasPrefix(flag, name+"-") && !slices.Contains(deprecated, flag) {
						t.Errorf("%s: flag --%s of controller %s does not start with %q: rename it and keep --%s as a deprecated alias", path, flag, name, name+"-", flag)
					}
				}
			}
		}
	}
	if checked < 30 {
		t.Fatalf("found only %d controller flags: the check no longer sees how flags are registered", checked)
	}
}

// controllerName is the value of the controller package's Name constant.
func controllerName(t *testing.T, files map[string]*ast.File, pkg string) string {
	t.Helper()
	for path, file := range files {
		if filepath.ToSlash(filepath.Dir(path)) != "internal/"+pkg {
			continue
		}
		for _, decl := range file.Decls {
			gen, ok := decl.(*ast.GenDecl)
			if !ok || gen.Tok != token.CONST {
				continue
			}
			for _, spec := range gen.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, n := range vs.Names {
					if n.Name == "Name" && i < len(vs.Values) {
						if lit, ok := vs.Values[i].(*ast.BasicLit); ok {
							v, _ := strconv.Unquote(lit.Value)
							return v
						}
					}
				}
			}
		}
	}
	t.Fatalf("internal/%s declares no const Name: the controller's name (--controllers, flag prefix)", pkg)
	return ""
}

// flagNames are the flag names a function body registers on a pflag.FlagSet (the string
// literal naming it) and those it marks deprecated.
func flagNames(body *ast.BlockStmt) (flags, deprecated []string) {
	ast.Inspect(body, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		sel, ok := call.Fun.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		method := sel.Sel.Name
		switch {
		case method == "MarkDeprecated" && len(call.Args) > 0:
			deprecated = append(deprecated, stringLit(call.Args[0]))
		case isFlagDefinition(method):
			arg := 0
			if strings.HasSuffix(method, "Var") || strings.HasSuffix(method, "VarP") {
				arg = 1
			}
			if arg < len(call.Args) {
				if name := stringLit(call.Args[arg]); name != "" {
					flags = append(flags, name)
				}
			}
		}
		return true
	})
	return flags, deprecated
}

var flagDefinition = regexp.MustCompile(`^(String|Bool|Int|Int32|Int64|Uint|Uint32|Uint64|Float64|Duration|StringSlice|StringArray|StringToString|IP|IPNet)(Var)?$|^Var$`)

func isFlagDefinition(method string) bool { return flagDefinition.MatchString(method) }

func stringLit(e ast.Expr) string {
	if lit, ok := e.(*ast.BasicLit); ok && lit.Kind == token.STRING {
		v, _ := strconv.Unquote(lit.Value)
		return v
	}
	return ""
}

// TestOptionsLiveInOptionsGo: a package's Options (the struct its flags or its caller fill
// in) is declared in its options.go, and has a Validate method that the assembly runs once
// the flags and --config are read, before the manager or the process is built, so a bad
// value is a one-line error at start, not a failure after the caches sync.
func TestOptionsLiveInOptionsGo(t *testing.T) {
	validates := map[string]bool{}
	declared := map[string]string{}
	for path, file := range productionFiles(t) {
		if !strings.HasPrefix(path, "internal/") && !strings.HasPrefix(path, "pkg/") {
			continue
		}
		dir := filepath.ToSlash(filepath.Dir(path))
		for _, decl := range file.Decls {
			switch d := decl.(type) {
			case *ast.GenDecl:
				for _, spec := range d.Specs {
					if ts, ok := spec.(*ast.TypeSpec); ok && ts.Name.Name == "Options" {
						declared[dir] = path
						if filepath.Base(path) != "options.go" {
							t.Errorf("%s declares Options: a package's Options live in its options.go", path)
						}
					}
				}
			case *ast.FuncDecl:
				if d.Recv != nil && d.Name.Name == "Validate" && receiverType(d) == "Options" {
					validates[dir] = true
				}
			}
		}
	}
	if len(declared) < 10 {
		t.Fatalf("found Options in only %d packages", len(declared))
	}
	for dir, path := range declared {
		if !validates[dir] {
			t.Errorf("%s: Options has no Validate method: every option is checked before anything is built", path)
		}
	}
}

func receiverType(fn *ast.FuncDecl) string {
	typ := fn.Recv.List[0].Type
	if star, ok := typ.(*ast.StarExpr); ok {
		typ = star.X
	}
	if id, ok := typ.(*ast.Ident); ok {
		return id.Name
	}
	return ""
}

// labelKey is a Kubernetes label or annotation key with a prefix: domain/name.
var labelKey = regexp.MustCompile(`^([a-z0-9]([-a-z0-9]*[a-z0-9])?\.)+[a-z]{2,}/[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$`)

// TestLabelsAndAnnotationsLiveInAPI: every label and annotation key trustplane reads or
// writes (a constant named *Label or *Annotation, or Label*/Annotation*, holding a
// domain/name key) is declared in api/: users set them, select on them and read them on
// their objects, so they are part of the public contract, documented where the kinds are.
// A package may name one again (const X = api.X); only api/ spells it out. Keys that
// never reach an API server, and test fixtures', are the exceptions.
func TestLabelsAndAnnotationsLiveInAPI(t *testing.T) {
	seen := 0
	for path, file := range productionFiles(t) {
		for _, decl := range file.Decls {
			gen, ok := decl.(*ast.GenDecl)
			if !ok || (gen.Tok != token.CONST && gen.Tok != token.VAR) {
				continue
			}
			for _, spec := range gen.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, n := range vs.Names {
					if i >= len(vs.Values) || !namesAKey(n.Name) || !labelKey.MatchString(stringLit(vs.Values[i])) {
						continue
					}
					seen++
					key := stringLit(vs.Values[i])
					if _, ok := internalKeys[key]; !ok && !strings.HasPrefix(path, "api/") && !isTestFixture(path) {
						t.Errorf("%s: %s = %s is a label or annotation key declared outside api/", path, n.Name, stringLit(vs.Values[i]))
					}
				}
			}
		}
	}
	if seen < 30 {
		t.Fatalf("found only %d label and annotation keys: the check no longer sees them", seen)
	}
}

// internalKeys are annotation keys that never reach an API server, with the reason.
var internalKeys = map[string]string{
	"tls-expiry.trustplane.io/certificate": "set by the tls-expiry controller's cache transform on its cached copy only",
	"tls-expiry.trustplane.io/mac":         "set by the tls-expiry controller's cache transform on its cached copy only",
}

// isTestFixture says whether path is test code that ships nowhere: a key it declares is
// the tests' own (testenv's rollout switch, chaos's markers), not one a user sets.
func isTestFixture(path string) bool {
	return strings.HasPrefix(path, "test/") || strings.HasPrefix(path, "internal/testenv/")
}

func namesAKey(name string) bool {
	lower := strings.ToLower(name)
	return strings.HasSuffix(lower, "label") || strings.HasSuffix(lower, "annotation") ||
		strings.HasPrefix(lower, "label") || strings.HasPrefix(lower, "annotation")
}

// apiVersion is the name of an API version package (v1, v1alpha1, v2beta3): several
// groups have one, and each is imported under an alias (jwksv1alpha1), as in Kubernetes.
var apiVersion = regexp.MustCompile(`^v[0-9]+((alpha|beta)[0-9]+)?$`)

// TestPackageNamesAreUnique: no two packages of the module declare the same name — the
// name a file's package clause gives, test-only suites included — so a name says which
// one is meant: internal/kubeconfig beside internal/provisioning/kubeconfig needed an
// alias in every file that used both, and `config` meant two things. Commands (main) and
// API versions (v1alpha1, imported under aliases) are the exceptions.
func TestPackageNamesAreUnique(t *testing.T) {
	names := map[string]map[string]bool{} // name → directories declaring it
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			if rel != "." && (strings.HasPrefix(d.Name(), ".") || rel == "bin" || d.Name() == "testdata" || hasOwnModule(path)) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.PackageClauseOnly)
		if err != nil {
			return err
		}
		name := f.Name.Name
		if strings.HasSuffix(name, "_test") && strings.HasSuffix(path, "_test.go") && hasNonTestFile(filepath.Dir(path)) {
			return nil // the external tests of a package that has its own name
		}
		if name == "main" || apiVersion.MatchString(name) {
			return nil
		}
		if names[name] == nil {
			names[name] = map[string]bool{}
		}
		names[name][filepath.ToSlash(filepath.Dir(rel))] = true
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(names) < 50 {
		t.Fatalf("found only %d package names", len(names))
	}
	for name, dirs := range names {
		if len(dirs) > 1 {
			var list []string
			for d := range dirs {
				list = append(list, d)
			}
			slices.Sort(list)
			t.Errorf("package name %s is declared in %s: give each package a name of its own", name, strings.Join(list, ", "))
		}
	}
}

func hasNonTestFile(dir string) bool {
	matches, _ := filepath.Glob(filepath.Join(dir, "*.go"))
	for _, m := range matches {
		if !strings.HasSuffix(m, "_test.go") {
			return true
		}
	}
	return false
}
