package main

import (
	"crypto/sha256"
	"debug/buildinfo"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"time"

	cdx "github.com/CycloneDX/cyclonedx-go"
)

// writeSBOM writes a CycloneDX (JSON) bill of materials of img to w: the Go modules built
// into its binaries (from their build information) and the Debian packages its other
// files come from (from dpkg's database). Serial number and time stamp derive from the
// image, so the same image gives the same SBOM.
func writeSBOM(w io.Writer, img image, ref, digest string, created time.Time) error {
	components, err := goComponents(img.goBinaries)
	if err != nil {
		return err
	}
	debs, err := debianComponents(img.debianFiles)
	if err != nil {
		return err
	}
	components = append(components, debs...)
	bom := cdx.NewBOM()
	bom.SerialNumber = serialNumber(digest)
	bom.Metadata = &cdx.Metadata{
		Timestamp: created.UTC().Format(time.RFC3339),
		Tools: &cdx.ToolsChoice{Components: &[]cdx.Component{{
			Type: cdx.ComponentTypeApplication, Name: "trustplane hack/images", Description: "make images",
		}}},
		Component: &cdx.Component{
			BOMRef: ref, Type: cdx.ComponentTypeContainer, Name: ref, Version: digest, Description: img.description,
		},
	}
	bom.Components = &components
	return cdx.NewBOMEncoder(w, cdx.BOMFileFormatJSON).SetPretty(true).Encode(bom)
}

// serialNumber is a version-5-shaped UUID URN named by the image digest.
func serialNumber(digest string) string {
	h := sha256.Sum256([]byte("trustplane-sbom:" + digest))
	h[6] = h[6]&0x0f | 0x50
	h[8] = h[8]&0x3f | 0x80
	return fmt.Sprintf("urn:uuid:%x-%x-%x-%x-%x", h[0:4], h[4:6], h[6:8], h[8:10], h[10:16])
}

func goComponents(binaries []string) ([]cdx.Component, error) {
	var out []cdx.Component
	seen := map[string]bool{}
	add := func(c cdx.Component) {
		if !seen[c.BOMRef] {
			seen[c.BOMRef] = true
			out = append(out, c)
		}
	}
	for _, bin := range binaries {
		info, err := buildinfo.ReadFile(bin)
		if err != nil {
			return nil, fmt.Errorf("reading the Go build information of %s: %w", bin, err)
		}
		add(goModule("stdlib", info.GoVersion, "", cdx.ComponentTypeLibrary))
		add(goModule(info.Main.Path, info.Main.Version, info.Main.Sum, cdx.ComponentTypeApplication))
		for _, dep := range info.Deps {
			if dep.Replace != nil {
				dep = dep.Replace
			}
			add(goModule(dep.Path, dep.Version, dep.Sum, cdx.ComponentTypeLibrary))
		}
	}
	return out, nil
}

func goModule(path, version, sum string, kind cdx.ComponentType) cdx.Component {
	purl := fmt.Sprintf("pkg:golang/%s@%s", path, version)
	c := cdx.Component{BOMRef: purl, Type: kind, Name: path, Version: version, PackageURL: purl}
	if sum != "" {
		c.Properties = &[]cdx.Property{{Name: "go:module:sum", Value: sum}}
	}
	return c
}

// debianComponents are the Debian packages that own files, with their installed versions.
func debianComponents(files []string) ([]cdx.Component, error) {
	packages := map[string]bool{}
	for _, f := range files {
		pkg, err := owningPackage(f)
		if err != nil {
			return nil, err
		}
		packages[pkg] = true
	}
	names := make([]string, 0, len(packages))
	for p := range packages {
		names = append(names, p)
	}
	sort.Strings(names)
	var out []cdx.Component
	for _, name := range names {
		version, err := exec.Command("dpkg-query", "-W", "-f=${Version}", name).Output()
		if err != nil {
			return nil, fmt.Errorf("dpkg-query -W %s: %w", name, err)
		}
		purl := fmt.Sprintf("pkg:deb/debian/%s@%s?arch=%s", strings.SplitN(name, ":", 2)[0], version, runtime.GOARCH)
		out = append(out, cdx.Component{
			BOMRef: purl, Type: cdx.ComponentTypeLibrary, Name: strings.SplitN(name, ":", 2)[0],
			Version: string(version), PackageURL: purl, Supplier: &cdx.OrganizationalEntity{Name: "Debian"},
		})
	}
	return out, nil
}

// generatedBy names the package whose maintainer script writes a file dpkg does not list.
var generatedBy = map[string]string{"/etc/ssl/certs/ca-certificates.crt": "ca-certificates"}

// owningPackage asks dpkg which package installed file, under the name given or, on a
// merged-/usr system, the name its real path has.
func owningPackage(file string) (string, error) {
	candidates := []string{file}
	if resolved, err := filepath.EvalSymlinks(file); err == nil && resolved != file {
		candidates = append(candidates, resolved)
	}
	for _, c := range candidates {
		out, err := exec.Command("dpkg-query", "-S", c).Output()
		if err != nil {
			continue
		}
		// "libc6:amd64: /lib/x86_64-linux-gnu/libc.so.6"
		if pkg, _, ok := strings.Cut(strings.SplitN(string(out), "\n", 2)[0], ": "); ok {
			return strings.TrimSuffix(strings.Split(pkg, ",")[0], ":"+runtime.GOARCH), nil
		}
	}
	if pkg, ok := generatedBy[file]; ok {
		return pkg, nil
	}
	return "", fmt.Errorf("no Debian package owns %s (dpkg-query -S)", file)
}
