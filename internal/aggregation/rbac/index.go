package rbac

import (
	"sort"
	"sync"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
)

// Index records the selectors of every aggregating role, so that a change to a role
// enqueues only the aggregators whose selectors match its old or new labels, instead of
// every aggregator in the cluster (upstream's behaviour). Keys are namespace/name; cluster
// roles have an empty namespace, and namespaced aggregators only see their namespace.
type Index struct {
	mu          sync.RWMutex
	aggregators map[string]map[string]aggregator // namespace → name → aggregator
}

// aggregator is what the index knows of an aggregating role.
type aggregator struct {
	selectors []labels.Selector
	// labels are the aggregator's own: other aggregators may select it.
	labels map[string]string
}

// NewIndex returns an empty index.
func NewIndex() *Index {
	return &Index{aggregators: map[string]map[string]aggregator{}}
}

// Set records (or replaces) an aggregator's selectors and labels. An aggregator with a
// selector that does not parse is recorded with the ones that do; it is retried on its
// own events.
func (i *Index) Set(key types.NamespacedName, selectors []labels.Selector, roleLabels map[string]string) {
	i.mu.Lock()
	defer i.mu.Unlock()
	ns := i.aggregators[key.Namespace]
	if ns == nil {
		ns = map[string]aggregator{}
		i.aggregators[key.Namespace] = ns
	}
	ns[key.Name] = aggregator{selectors: selectors, labels: roleLabels}
}

// Inputs lists, sorted, the other aggregators key's result is made of: those its
// selectors match, and theirs in turn (admin reads edit, which reads view).
func (i *Index) Inputs(key types.NamespacedName) []string {
	i.mu.RLock()
	defer i.mu.RUnlock()
	ns := i.aggregators[key.Namespace]
	seen := map[string]bool{key.Name: true}
	var out []string
	for next := []string{key.Name}; len(next) > 0; {
		a, ok := ns[next[0]]
		next = next[1:]
		if !ok {
			continue
		}
		for name, b := range ns {
			if !seen[name] && matchesAny(a.selectors, []map[string]string{b.labels}) {
				seen[name] = true
				out = append(out, name)
				next = append(next, name)
			}
		}
	}
	sort.Strings(out)
	return out
}

// Delete forgets an aggregator (deleted, or no longer aggregating).
func (i *Index) Delete(key types.NamespacedName) {
	i.mu.Lock()
	defer i.mu.Unlock()
	delete(i.aggregators[key.Namespace], key.Name)
	if len(i.aggregators[key.Namespace]) == 0 {
		delete(i.aggregators, key.Namespace)
	}
}

// Affected lists, sorted, the aggregators in namespace with a selector that matches any
// of the given label sets (a role's labels before and after a change).
func (i *Index) Affected(namespace string, labelSets ...map[string]string) []types.NamespacedName {
	i.mu.RLock()
	defer i.mu.RUnlock()
	var out []types.NamespacedName
	for name, a := range i.aggregators[namespace] {
		if matchesAny(a.selectors, labelSets) {
			out = append(out, types.NamespacedName{Namespace: namespace, Name: name})
		}
	}
	sort.Slice(out, func(a, b int) bool { return out[a].Name < out[b].Name })
	return out
}

// Len is the number of aggregators recorded.
func (i *Index) Len() int {
	i.mu.RLock()
	defer i.mu.RUnlock()
	n := 0
	for _, ns := range i.aggregators {
		n += len(ns)
	}
	return n
}

func matchesAny(selectors []labels.Selector, labelSets []map[string]string) bool {
	for _, s := range selectors {
		for _, l := range labelSets {
			if s.Matches(labels.Set(l)) {
				return true
			}
		}
	}
	return false
}
