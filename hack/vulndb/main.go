// Command vulndb builds an offline Go vulnerability database, in the layout govulncheck
// reads with -db file://DIR (https://go.dev/security/vuln/database#api: index/db.json,
// index/modules.json, index/vulns.json, ID/<id>.json), from a directory of OSV entries:
// the data/osv folder of a pinned golang.org/x/vulndb module, the database's source, which
// the Go module proxy serves (vuln.go.dev is not reachable from CI).
//
// Usage: go run ./hack/vulndb OSV_DIR OUT_DIR VERSION
//
// VERSION is the vulndb module's pseudo-version: its commit time is the database's time
// (the OSV entries there carry none), which govulncheck reports.
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"
)

// entry is what the index needs of an OSV entry; the entry itself is copied as it is.
type entry struct {
	ID       string    `json:"id"`
	Modified time.Time `json:"modified"`
	Aliases  []string  `json:"aliases,omitempty"`
	Affected []struct {
		Package struct {
			Name string `json:"name"`
		} `json:"package"`
	} `json:"affected"`
}

// validID is the form of the Go vulnerability database's IDs.
var validID = regexp.MustCompile(`^GO-[0-9]{4}-[0-9]{4,}$`)

type moduleVuln struct {
	ID       string    `json:"id"`
	Modified time.Time `json:"modified"`
}

type module struct {
	Path  string       `json:"path"`
	Vulns []moduleVuln `json:"vulns"`
}

type vuln struct {
	ID       string    `json:"id"`
	Modified time.Time `json:"modified"`
	Aliases  []string  `json:"aliases,omitempty"`
}

func main() {
	if len(os.Args) != 4 {
		fmt.Fprintln(os.Stderr, "usage: vulndb OSV_DIR OUT_DIR VERSION")
		os.Exit(2)
	}
	if err := build(os.Args[1], os.Args[2], os.Args[3]); err != nil {
		fmt.Fprintln(os.Stderr, "vulndb:", err)
		os.Exit(1)
	}
}

// commitTime is the time in a pseudo-version (v0.0.0-20261105234957-e22db6528018).
func commitTime(version string) (time.Time, error) {
	parts := strings.Split(version, "-")
	if len(parts) < 3 {
		return time.Time{}, fmt.Errorf("version %q is not a pseudo-version", version)
	}
	return time.Parse("20060102150405", parts[len(parts)-2])
}

func build(osvDir, out, version string) error {
	at, err := commitTime(version)
	if err != nil {
		return err
	}
	files, err := filepath.Glob(filepath.Join(osvDir, "*.json"))
	if err != nil || len(files) == 0 {
		return fmt.Errorf("no OSV entries in %s: %w", osvDir, errors.Join(err, errors.New("no *.json")))
	}
	// out is the folder the Makefile names: a build tool writes where it is told.
	if err := os.MkdirAll(filepath.Join(out, "ID"), 0o750); err != nil { //nolint:gosec // see above
		return err
	}
	if err := os.MkdirAll(filepath.Join(out, "index"), 0o750); err != nil { //nolint:gosec // see above
		return err
	}
	modules := map[string]*module{}
	var vulns []vuln
	newest := at
	for _, f := range files {
		raw, err := os.ReadFile(f) //nolint:gosec // a build tool: it reads the folder it is given
		if err != nil {
			return err
		}
		var e entry
		if err := json.Unmarshal(raw, &e); err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
		if !validID.MatchString(e.ID) || filepath.Base(f) != e.ID+".json" {
			return fmt.Errorf("%s: entry %q: want an ID of the form GO-YYYY-NNNN in a file <id>.json", f, e.ID)
		}
		if err := os.WriteFile(filepath.Join(out, "ID", e.ID+".json"), raw, 0o600); err != nil { //nolint:gosec // the ID was checked above
			return err
		}
		if e.Modified.IsZero() {
			e.Modified = at
		}
		vulns = append(vulns, vuln{ID: e.ID, Modified: e.Modified, Aliases: e.Aliases})
		if e.Modified.After(newest) {
			newest = e.Modified
		}
		for _, a := range e.Affected {
			m := modules[a.Package.Name]
			if m == nil {
				m = &module{Path: a.Package.Name}
				modules[a.Package.Name] = m
			}
			if !slices.ContainsFunc(m.Vulns, func(v moduleVuln) bool { return v.ID == e.ID }) {
				m.Vulns = append(m.Vulns, moduleVuln{ID: e.ID, Modified: e.Modified})
			}
		}
	}
	index := make([]*module, 0, len(modules))
	for _, m := range modules {
		index = append(index, m)
	}
	slices.SortFunc(index, func(a, b *module) int { return strings.Compare(a.Path, b.Path) })
	slices.SortFunc(vulns, func(a, b vuln) int { return strings.Compare(a.ID, b.ID) })
	for name, v := range map[string]any{"db.json": map[string]time.Time{"modified": newest}, "modules.json": index, "vulns.json": vulns} {
		raw, err := json.Marshal(v)
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(out, "index", name), raw, 0o600); err != nil { //nolint:gosec // a fixed name
			return err
		}
	}
	fmt.Printf("vulndb: %d entries, %d modules, newest %s, in %s\n", len(vulns), len(index), newest.Format(time.RFC3339), out)
	return nil
}
