package crd

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// nameErrs returns every mistake in m's ShortNames and
// Categories. Each must be a DNS-1035 label, as the API server's
// validation of a CRD's names requires (ValidateCustomResourceDefinitionNames),
// and given once. A short name mustn't be the plural or the singular: it
// would name nothing new, and the API server's naming controller holds a
// resource's plural and singular as taken, refusing (NamesAccepted false,
// ShortNamesConflict) a short name that another name of the group has.
func nameErrs(m Meta) []error {
	var errs []error
	singular := strings.ToLower(m.Kind)
	check := func(field string, names []string, taken func(string) string) {
		seen := map[string]int{}
		for i, n := range names {
			bad := func(format string, args ...any) {
				errs = append(errs, fmt.Errorf("kube: Resource.%s[%d] %q: "+format, append([]any{field, i, n}, args...)...))
			}
			if e := validation.IsDNS1035Label(n); len(e) > 0 {
				bad("%s", strings.Join(e, "; "))
			}
			if j, ok := seen[n]; ok {
				bad("is given twice, as %s[%d] too", field, j)
				continue
			}
			seen[n] = i
			if what := taken(n); what != "" {
				bad("is the resource's %s already: a short name is another name for it", what)
			}
		}
	}
	check("ShortNames", m.ShortNames, func(n string) string {
		switch {
		case n != "" && n == m.Plural:
			return "plural"
		case n != "" && n == singular:
			return "singular"
		}
		return ""
	})
	check("Categories", m.Categories, func(string) string { return "" })
	return errs
}
