// Command crddescriptions reflows the descriptions of generated CRDs (`make manifests`,
// after controller-gen): controller-gen keeps a Go comment's line breaks, so `kubectl
// explain` and API documentation tools show sentences broken wherever the comment wrapped
// at 90 columns. Within a paragraph, lines are joined with a space; paragraphs (a blank
// line), list items ("- ", "* ", "1. ") and indented lines (examples) keep their breaks.
//
// Usage: go run ./hack/crddescriptions config/crd/bases/*.yaml
package main

import (
	"fmt"
	"os"
	"regexp"
	"strings"
)

func main() {
	for _, path := range os.Args[1:] {
		if err := reflowFile(path); err != nil {
			fmt.Fprintln(os.Stderr, "crddescriptions:", err)
			os.Exit(1)
		}
	}
}

func reflowFile(path string) error {
	raw, err := os.ReadFile(path) //nolint:gosec // a build tool: it rewrites the files the Makefile names
	if err != nil {
		return err
	}
	out := Reflow(string(raw))
	if out == string(raw) {
		return nil
	}
	return os.WriteFile(path, []byte(out), 0o600) //nolint:gosec // as above; an existing file keeps its mode
}

// blockDescription is a description written as a literal block scalar, as controller-gen
// writes every multi-line one.
var blockDescription = regexp.MustCompile(`^(\s*)description: \|-$`)

// Reflow rewrites every literal-block description of a YAML document.
func Reflow(doc string) string {
	lines := strings.Split(doc, "\n")
	var out []string
	for i := 0; i < len(lines); i++ {
		out = append(out, lines[i])
		m := blockDescription.FindStringSubmatch(lines[i])
		if m == nil {
			continue
		}
		// The block is every following line indented deeper than the key, and blank lines
		// between them.
		keyIndent := len(m[1])
		j := i + 1
		for j < len(lines) && (strings.TrimSpace(lines[j]) == "" || indentOf(lines[j]) > keyIndent) {
			j++
		}
		for j > i+1 && strings.TrimSpace(lines[j-1]) == "" {
			j-- // trailing blank lines belong to what follows
		}
		block := lines[i+1 : j]
		if len(block) == 0 {
			continue
		}
		base := indentOf(block[0])
		text := make([]string, len(block))
		for k, l := range block {
			if len(l) >= base {
				text[k] = l[base:]
			}
		}
		for _, l := range reflowText(text) {
			if l == "" {
				out = append(out, "")
			} else {
				out = append(out, strings.Repeat(" ", base)+l)
			}
		}
		i = j - 1
	}
	return strings.Join(out, "\n")
}

var listItem = regexp.MustCompile(`^([-*•]|[0-9]+[.)])\s`)

// reflowText joins the lines of each paragraph of text (lines without the block's
// indentation), keeping blank lines, list items and indented lines on lines of their own;
// an indented line right after a list item continues it, any other line ends the list.
func reflowText(text []string) []string {
	var out []string
	inList := false
	for _, l := range text {
		switch {
		case strings.TrimSpace(l) == "":
			out = append(out, "")
			inList = false
		case listItem.MatchString(l):
			out = append(out, l)
			inList = true
		case strings.HasPrefix(l, " ") && inList:
			out[len(out)-1] += " " + strings.TrimSpace(l)
		case strings.HasPrefix(l, " "), inList, len(out) == 0, out[len(out)-1] == "", strings.HasPrefix(out[len(out)-1], " "):
			out = append(out, l)
			inList = false
		default:
			out[len(out)-1] += " " + l
		}
	}
	return out
}

func indentOf(l string) int { return len(l) - len(strings.TrimLeft(l, " ")) }
