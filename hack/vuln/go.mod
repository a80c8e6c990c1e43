// Module vuln pins govulncheck, which `make vuln` (and so `make test`) runs against the
// offline database built from the pinned golang.org/x/vulndb (VULNDB_VERSION, Makefile).
module github.com/trustplane/trustplane/hack/vuln

go 1.26.0

tool golang.org/x/vuln/cmd/govulncheck

require (
	golang.org/x/mod v0.42.0 // indirect
	golang.org/x/sync v0.24.0 // indirect
	golang.org/x/sys v0.49.0 // indirect
	golang.org/x/telemetry v0.0.0-20261010193011-f71dc92da45e // indirect
	golang.org/x/tools v0.52.0 // indirect
	golang.org/x/vuln v1.9.0 // indirect
)
