package configfile

import (
	"encoding/json"
	"fmt"
	"io"
	"reflect"
	"sort"
	"strings"

	"github.com/spf13/pflag"
)

// Example is a value of the flag's type as a file writes it, for error messages and the
// reference.
func Example(f *pflag.Flag) string {
	switch typ := f.Value.Type(); {
	case typ == "bool":
		return "true"
	case typ == "duration":
		return `"30s"`
	case strings.HasPrefix(typ, "float"):
		return "0.5"
	case isNumber(typ):
		return "4"
	case isList(typ):
		return `["a", "b"]`
	case typ == "stringToString":
		return `{key: value}`
	default:
		return `"text"`
	}
}

// yamlType is how the reference names a flag's type.
func yamlType(f *pflag.Flag) string {
	switch typ := f.Value.Type(); {
	case typ == "bool":
		return "boolean"
	case typ == "duration":
		return "duration (string, Go syntax: 30s, 5m, 1h30m)"
	case strings.HasPrefix(typ, "float"):
		return "number"
	case isNumber(typ):
		return "integer"
	case isList(typ):
		return "list of strings"
	case typ == "stringToString":
		return "mapping of strings"
	default:
		return "string"
	}
}

// WriteReference writes the Markdown reference of the schemas: every field, its flag, its
// type, its default and what it means.
func WriteReference(w io.Writer, schemas ...*Schema) {
	for _, s := range schemas {
		fmt.Fprintf(w, "## %s\n\n", s.Kind)
		fmt.Fprintf(w, "`%s --config FILE` reads it:\n\n```yaml\napiVersion: %s\nkind: %s\n", s.Command, APIVersion, s.Kind)
		for _, sec := range s.Sections {
			if sec.Name != "" {
				fmt.Fprintf(w, "%s: {}  # %s\n", sec.Name, sec.Doc)
			}
		}
		fmt.Fprint(w, "```\n\n")
		for i := range s.Sections {
			sec := &s.Sections[i]
			if sec.Name != "" {
				fmt.Fprintf(w, "### `%s`\n\n%s\n\n", sec.Name, sec.Doc)
			}
			if sec.Object != nil {
				fmt.Fprint(w, "No flags: this section is read from the file only.\n\n| field | type | meaning |\n|---|---|---|\n")
				objectRows(w, sec.Name, reflect.TypeOf(sec.Object).Elem())
				fmt.Fprintln(w)
				continue
			}
			fmt.Fprint(w, "| field | flag | type | default | meaning |\n|---|---|---|---|---|\n")
			sec.visit(func(f *pflag.Flag) {
				fmt.Fprintf(w, "| `%s` | `--%s` | %s | %s | %s |\n", sec.path(f.Name), f.Name, yamlType(f), defaultOf(f), cell(f.Usage))
			})
			fmt.Fprintln(w)
		}
	}
}

func defaultOf(f *pflag.Flag) string {
	d := f.DefValue
	if d == "" || d == "[]" {
		return "—"
	}
	return "`" + d + "`"
}

func cell(s string) string {
	return strings.NewReplacer("|", `\|`, "\n", " ").Replace(s)
}

// JSONSchema is a JSON Schema (draft-07) of the file's fields below its apiVersion and
// kind: what a chart's values.schema.json says of the config a chart value renders.
// Unknown fields are refused, as Load refuses them.
func (s *Schema) JSONSchema() map[string]any {
	root := object()
	for i := range s.Sections {
		sec := &s.Sections[i]
		props := root
		if sec.Object != nil {
			inner := typeSchema(reflect.TypeOf(sec.Object).Elem())
			inner["description"] = sec.Doc
			root["properties"].(map[string]any)[sec.Name] = inner
			continue
		}
		if sec.Name != "" {
			inner := object()
			inner["description"] = sec.Doc
			root["properties"].(map[string]any)[sec.Name] = inner
			props = inner
		}
		sec.visit(func(f *pflag.Flag) {
			name := sec.path(f.Name)
			name = name[strings.LastIndex(name, ".")+1:]
			props["properties"].(map[string]any)[name] = fieldSchema(f)
		})
	}
	return root
}

func object() map[string]any {
	return map[string]any{"type": "object", "additionalProperties": false, "properties": map[string]any{}}
}

func fieldSchema(f *pflag.Flag) map[string]any {
	out := map[string]any{"description": f.Usage + " (--" + f.Name + ")"}
	switch typ := f.Value.Type(); {
	case typ == "bool":
		out["type"] = "boolean"
	case typ == "duration":
		out["type"] = "string"
		out["pattern"] = `^(0|[-+]?([0-9]*(\.[0-9]*)?(ns|us|µs|μs|ms|s|m|h))+)$`
	case strings.HasPrefix(typ, "float"):
		out["type"] = "number"
	case isNumber(typ):
		out["type"] = "integer"
	case isList(typ):
		out["type"] = "array"
		out["items"] = map[string]any{"type": "string"}
	case typ == "stringToString":
		out["type"] = "object"
		out["additionalProperties"] = map[string]any{"type": "string"}
		out["minProperties"] = 1
	default:
		out["type"] = "string"
	}
	if values := f.Annotations[enumAnnotation]; len(values) > 0 {
		out["enum"] = values
	}
	return out
}

// FieldSchema is the JSON Schema of the field behind flag, and whether s has it: for a
// chart value that is passed as that flag rather than in the file.
func (s *Schema) FieldSchema(flag string) (map[string]any, bool) {
	for _, f := range s.Fields() {
		if f.Flag != nil && f.Flag.Name == flag {
			return fieldSchema(f.Flag), true
		}
	}
	return nil, false
}

// enumAnnotation is the pflag annotation of a string flag's only values (Enum).
const enumAnnotation = "configfile_enum" // pflag's key, as cobra's "cobra_annotation_..."

// Enum declares the only values of fs's string flag name: the JSON Schema of its field
// (and of a chart value passed as it) lists them, so a chart given another value fails
// helm template instead of a pod at start. The command still checks the value itself.
// It panics when fs has no such flag, as pflag does for a flag defined twice: a
// programming error.
func Enum(fs *pflag.FlagSet, name string, values ...string) {
	if err := fs.SetAnnotation(name, enumAnnotation, values); err != nil {
		panic(fmt.Sprintf("configfile.Enum: %v", err))
	}
}

// Effective is every field's value as its flag holds it now (after the command line and
// the file), by field path: what a process reports at start.
func (s *Schema) Effective() map[string]string {
	out := map[string]string{}
	for _, f := range s.Fields() {
		if f.Flag == nil {
			j, _ := json.Marshal(f.Section.Object)
			out[f.Path] = string(j)
			continue
		}
		out[f.Path] = f.Flag.Value.String()
	}
	return out
}

// Paths are the fields' paths, sorted.
func (s *Schema) Paths() []string {
	var out []string
	for _, f := range s.Fields() {
		out = append(out, f.Path)
	}
	sort.Strings(out)
	return out
}

// objectRows writes a reference row per field of t (recursively), named by JSON name.
func objectRows(w io.Writer, prefix string, t reflect.Type) {
	for i := range t.NumField() {
		f := t.Field(i)
		name := jsonName(f)
		if name == "" {
			continue
		}
		path := prefix + "." + name
		ft := f.Type
		if ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		fmt.Fprintf(w, "| `%s` | %s | %s |\n", path, typeName(ft), cell(f.Tag.Get("doc")))
		switch {
		case ft.Kind() == reflect.Struct:
			objectRows(w, path, ft)
		case (ft.Kind() == reflect.Map || ft.Kind() == reflect.Slice) && ft.Elem().Kind() == reflect.Struct:
			objectRows(w, path+"[*]", ft.Elem())
		case ft.Kind() == reflect.Map && ft.Elem().Kind() == reflect.Map && ft.Elem().Elem().Kind() == reflect.Struct:
			objectRows(w, path+"[*][*]", ft.Elem().Elem())
		}
	}
}

func jsonName(f reflect.StructField) string {
	if !f.IsExported() {
		return ""
	}
	name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
	if name == "-" {
		return ""
	}
	if name == "" {
		return f.Name
	}
	return name
}

func typeName(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Struct:
		return "object"
	case reflect.Map:
		return "mapping of " + typeName(t.Elem())
	case reflect.Slice:
		return "list of " + typeName(t.Elem())
	case reflect.Bool:
		return "boolean"
	case reflect.Int, reflect.Int32, reflect.Int64:
		return "integer"
	case reflect.Float32, reflect.Float64:
		return "number"
	default:
		return "string"
	}
}

// typeSchema is a JSON Schema of t as encoding/json reads it; unknown fields refused.
func typeSchema(t reflect.Type) map[string]any {
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Struct:
		props := map[string]any{}
		for i := range t.NumField() {
			f := t.Field(i)
			if name := jsonName(f); name != "" {
				p := typeSchema(f.Type)
				if d := f.Tag.Get("doc"); d != "" {
					p["description"] = d
				}
				props[name] = p
			}
		}
		return map[string]any{"type": "object", "additionalProperties": false, "properties": props}
	case reflect.Map:
		return map[string]any{"type": "object", "additionalProperties": typeSchema(t.Elem())}
	case reflect.Slice:
		return map[string]any{"type": "array", "items": typeSchema(t.Elem())}
	case reflect.Bool:
		return map[string]any{"type": "boolean"}
	case reflect.Int, reflect.Int32, reflect.Int64:
		return map[string]any{"type": "integer"}
	case reflect.Float32, reflect.Float64:
		return map[string]any{"type": "number"}
	default:
		return map[string]any{"type": "string"}
	}
}
