package shoot

// Landscape is what a real Kyma landscape adds to every Shoot beyond Params' defaults:
// the section `landscape` of ManagerConfiguration, read from the configuration file only
// (no flags: its tables are per provider and region). The zero Landscape adds nothing.
// Each field has a `doc` tag: docs/configuration.md and the chart's values.schema.json
// are generated from them.
type Landscape struct{}

// Validate says what is wrong with the landscape, in one line naming the field.
func (l *Landscape) Validate() error { return nil }
