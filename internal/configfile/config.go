// Package configfile reads trustplane's versioned configuration files: ManagerConfiguration,
// NodeAgentConfiguration and DataplaneConfiguration, group config.trustplane.io, version
// v1alpha1, as `--config FILE` of `trustplane manager`, `node-agent` and `dataplane`.
//
// A file and the command line are two views of the same options: every field of a file is
// a flag, and the file's schema is made from the flags themselves. A section per
// controller (or per shared dependency, or the process's own settings) holds the flags
// that its AddFlags registers, each named by the flag without the section's prefix, in
// camelCase: --jwks-retry-base-delay is jwks.retryBaseDelay. Loading a file sets each
// field through its flag's own parser (a duration through time.ParseDuration, a list
// replaces the default), so defaults and validation stay where they are, in the Options;
// a flag given on the command line wins over the file. Unknown fields, a wrong type or a
// value the flag refuses stop the load with one line naming the field and an example.
package configfile

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"reflect"
	"slices"
	"sort"
	"strings"

	"github.com/spf13/pflag"
	"sigs.k8s.io/yaml"
)

const (
	// Group and Version are the files' apiVersion: config.trustplane.io/v1alpha1.
	Group   = "config.trustplane.io"
	Version = "v1alpha1"
	// APIVersion is what a file's apiVersion must say.
	APIVersion = Group + "/" + Version
)

// Section is one part of a file: the flags one AddFlags registers.
type Section struct {
	// Name is the section's key in the file (camelCase); "" puts its fields at the top
	// level (an agent's file has no sections).
	Name string
	// Prefix is left out of the flags' names to make the fields' names ("jwks-").
	Prefix string
	// Doc says in a line what the section configures (the reference's heading).
	Doc string
	// Flags are the section's flags.
	Flags *pflag.FlagSet
	// Object, instead of Flags, is a pointer to a struct the section is decoded into as a
	// whole (JSON field names; `doc` tags say what a field means): settings too
	// structured for a flag, such as a landscape's per-region tables. It has no flag.
	Object any
}

// Schema is a kind of configuration file: its kind and sections.
type Schema struct {
	// Kind is the file's kind, e.g. ManagerConfiguration.
	Kind string
	// Command is the subcommand that reads it, e.g. "trustplane manager".
	Command  string
	Sections []Section
}

// Field is one field of a file and the flag behind it.
type Field struct {
	// Path is the field in the file: "jwks.retryBaseDelay", or "dir" at the top level.
	Path string
	// Flag is the flag it sets; nil for a section decoded as a whole (Section.Object),
	// which is one field.
	Flag *pflag.Flag
	// Section is the section it belongs to.
	Section *Section
}

// Fields lists every field, section by section, each in its flags' order (sorted).
func (s *Schema) Fields() []Field {
	var out []Field
	for i := range s.Sections {
		sec := &s.Sections[i]
		if sec.Object != nil {
			out = append(out, Field{Path: sec.Name, Section: sec})
			continue
		}
		sec.visit(func(f *pflag.Flag) {
			out = append(out, Field{Path: sec.path(f.Name), Flag: f, Section: sec})
		})
	}
	return out
}

// visit calls fn for each of the section's fields: its flags but the hidden ones (kept
// only to refuse a removed flag with a message) and the deprecated ones.
func (sec *Section) visit(fn func(*pflag.Flag)) {
	if sec.Flags == nil {
		return
	}
	sec.Flags.VisitAll(func(f *pflag.Flag) {
		if !f.Hidden && f.Deprecated == "" {
			fn(f)
		}
	})
}

func (sec *Section) path(flag string) string {
	name := camel(strings.TrimPrefix(flag, sec.Prefix))
	if sec.Name == "" {
		return name
	}
	return sec.Name + "." + name
}

// camel turns a flag name (kebab-case) into a field name: "retry-base-delay" → "retryBaseDelay".
func camel(flag string) string {
	parts := strings.Split(flag, "-")
	for i := 1; i < len(parts); i++ {
		if parts[i] != "" {
			parts[i] = strings.ToUpper(parts[i][:1]) + parts[i][1:]
		}
	}
	return strings.Join(parts, "")
}

// Load reads the file at path and sets the flag of every field it holds that the command
// line did not set (changed says which flags it set). Every value is first parsed into a
// scratch flag of its type: a file with one bad field changes nothing, and the error
// names the field and gives an example.
func (s *Schema) Load(path string, changed func(flag string) bool) error {
	raw, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("--config: %w", err)
	}
	values, err := s.parse(raw)
	if err != nil {
		return fmt.Errorf("--config %s: %w", path, err)
	}
	for _, v := range values {
		if v.field.Flag == nil {
			continue // decoded whole by parse already
		}
		if err := set(scratch(v.field.Flag.Value), v.value); err != nil {
			return fmt.Errorf("--config %s: %s: %w (for example %s: %s)", path, v.field.Path, err, v.field.Path, Example(v.field.Flag))
		}
	}
	for _, v := range values {
		if v.field.Flag == nil {
			reflect.ValueOf(v.field.Section.Object).Elem().Set(reflect.ValueOf(v.value).Elem())
			continue
		}
		if changed(v.field.Flag.Name) {
			continue
		}
		if err := set(v.field.Flag.Value, v.value); err != nil {
			return fmt.Errorf("--config %s: %s: %w (for example %s: %s)", path, v.field.Path, err, v.field.Path, Example(v.field.Flag))
		}
		v.field.Flag.Changed = true
	}
	return nil
}

// scratch is a new flag value of v's type to check a value with, or v itself for a type
// of trustplane's own (whose Set leaves it unchanged on error).
func scratch(v pflag.Value) pflag.Value {
	fs := pflag.NewFlagSet("scratch", pflag.ContinueOnError)
	switch v.Type() {
	case "bool":
		fs.Bool("v", false, "")
	case "int":
		fs.Int("v", 0, "")
	case "int32":
		fs.Int32("v", 0, "")
	case "int64":
		fs.Int64("v", 0, "")
	case "uint":
		fs.Uint("v", 0, "")
	case "uint32":
		fs.Uint32("v", 0, "")
	case "uint64":
		fs.Uint64("v", 0, "")
	case "float32":
		fs.Float32("v", 0, "")
	case "float64":
		fs.Float64("v", 0, "")
	case "duration":
		fs.Duration("v", 0, "")
	case "string":
		fs.String("v", "", "")
	case "stringSlice":
		fs.StringSlice("v", nil, "")
	case "stringArray":
		fs.StringArray("v", nil, "")
	case "stringToString":
		fs.StringToString("v", nil, "")
	default:
		return v
	}
	return fs.Lookup("v").Value
}

type fieldValue struct {
	field Field
	value any
}

// parse checks the file's header and keys and decodes each field's value.
func (s *Schema) parse(raw []byte) ([]fieldValue, error) {
	doc := map[string]json.RawMessage{}
	if err := strictJSON(raw, &doc); err != nil {
		return nil, err
	}
	var apiVersion, kind string
	_ = json.Unmarshal(doc["apiVersion"], &apiVersion)
	_ = json.Unmarshal(doc["kind"], &kind)
	if apiVersion != APIVersion || kind != s.Kind {
		return nil, fmt.Errorf("apiVersion %q, kind %q: want apiVersion: %s, kind: %s", apiVersion, kind, APIVersion, s.Kind)
	}
	delete(doc, "apiVersion")
	delete(doc, "kind")
	byPath := map[string]Field{}
	sections := map[string]bool{}
	for _, f := range s.Fields() {
		byPath[f.Path] = f
		if f.Section.Name != "" {
			sections[f.Section.Name] = true
		}
	}
	var out []fieldValue
	for _, key := range sortedKeys(doc) {
		if f, ok := byPath[key]; ok && f.Flag == nil {
			v, err := decodeObject(f, doc[key])
			if err != nil {
				return nil, err
			}
			out = append(out, v)
			continue
		}
		if !sections[key] {
			v, err := decodeField(byPath, key, doc[key])
			if err != nil {
				return nil, err
			}
			out = append(out, v)
			continue
		}
		inner := map[string]json.RawMessage{}
		if err := json.Unmarshal(doc[key], &inner); err != nil {
			return nil, fmt.Errorf("%s: must be a mapping of its fields", key)
		}
		for _, sub := range sortedKeys(inner) {
			v, err := decodeField(byPath, key+"."+sub, inner[sub])
			if err != nil {
				return nil, err
			}
			out = append(out, v)
		}
	}
	return out, nil
}

// decodeObject decodes a whole section into a new value of its Object's type: unknown
// fields and wrong types are errors.
func decodeObject(f Field, raw json.RawMessage) (fieldValue, error) {
	v := reflect.New(reflect.TypeOf(f.Section.Object).Elem())
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v.Interface()); err != nil {
		return fieldValue{}, fmt.Errorf("%s: %s", f.Path, strings.TrimPrefix(err.Error(), "json: "))
	}
	if validator, ok := v.Interface().(interface{ Validate() error }); ok {
		if err := validator.Validate(); err != nil {
			return fieldValue{}, fmt.Errorf("%s: %w", f.Path, err)
		}
	}
	return fieldValue{field: f, value: v.Interface()}, nil
}

func decodeField(byPath map[string]Field, path string, raw json.RawMessage) (fieldValue, error) {
	f, ok := byPath[path]
	if !ok {
		return fieldValue{}, fmt.Errorf("%s: unknown field%s", path, suggestion(byPath, path))
	}
	var value any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&value); err != nil {
		return fieldValue{}, fmt.Errorf("%s: %w", path, err)
	}
	return fieldValue{field: f, value: value}, nil
}

// suggestion names the field meant, when path's last name is a known field's in another
// section or at another level.
func suggestion(byPath map[string]Field, path string) string {
	leaf := path[strings.LastIndex(path, ".")+1:]
	var near []string
	for known := range byPath {
		if strings.EqualFold(known[strings.LastIndex(known, ".")+1:], leaf) {
			near = append(near, known)
		}
	}
	sort.Strings(near)
	if len(near) == 0 {
		return ""
	}
	return " (did you mean " + strings.Join(near, " or ") + "?)"
}

// set parses value (from JSON: bool, json.Number, string, []any, map[string]any) into v
// the way the flag parses its argument.
func set(v pflag.Value, value any) error {
	switch typ := v.Type(); {
	case typ == "bool":
		b, ok := value.(bool)
		if !ok {
			return errors.New("must be true or false")
		}
		return v.Set(fmt.Sprint(b))
	case isNumber(typ):
		n, ok := value.(json.Number)
		if !ok {
			return errors.New("must be a number")
		}
		return v.Set(n.String())
	case isList(typ):
		list, ok := stringList(value)
		if !ok {
			return errors.New("must be a list of strings")
		}
		if sv, ok := v.(pflag.SliceValue); ok {
			return sv.Replace(list)
		}
		return v.Set(strings.Join(list, ","))
	case typ == "stringToString":
		m, ok := value.(map[string]any)
		if !ok {
			return errors.New("must be a mapping of strings to strings")
		}
		return setMap(v, m)
	default: // string, duration and every custom type parse a string
		s, ok := value.(string)
		if !ok {
			return fmt.Errorf("must be a string")
		}
		if typ == "duration" && s == "" {
			return errors.New("must be a duration")
		}
		return v.Set(s)
	}
}

func isNumber(typ string) bool {
	return strings.HasPrefix(typ, "int") || strings.HasPrefix(typ, "uint") || strings.HasPrefix(typ, "float")
}

func isList(typ string) bool {
	return strings.HasSuffix(typ, "Slice") || strings.HasSuffix(typ, "Array")
}

func stringList(value any) ([]string, bool) {
	items, ok := value.([]any)
	if !ok {
		return nil, false
	}
	out := make([]string, len(items))
	for i, item := range items {
		s, ok := item.(string)
		if !ok {
			return nil, false
		}
		out[i] = s
	}
	return out, true
}

// setMap sets a stringToString flag to m: its first Set replaces the default map, and the
// pairs go in one Set, CSV-quoted as it parses them.
func setMap(v pflag.Value, m map[string]any) error {
	var pairs []string
	for _, k := range sortedKeys(m) {
		s, ok := m[k].(string)
		if !ok {
			return fmt.Errorf("%s: must be a string", k)
		}
		pairs = append(pairs, k+"="+s)
	}
	if len(pairs) == 0 {
		return errors.New("must have at least one entry (leave the field out for the default)")
	}
	var buf bytes.Buffer
	w := csv.NewWriter(&buf)
	if err := w.Write(pairs); err != nil {
		return err
	}
	w.Flush()
	return v.Set(strings.TrimSuffix(buf.String(), "\n"))
}

// strictJSON decodes YAML or JSON into out, refusing duplicate keys.
func strictJSON(raw []byte, out any) error {
	j, err := yaml.YAMLToJSONStrict(raw)
	if err != nil {
		return errors.New(strings.Join(strings.Fields(err.Error()), " ")) // one line
	}
	if string(j) == "null" {
		return nil
	}
	return json.Unmarshal(j, out)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
