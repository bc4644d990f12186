package crd_test

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/z5labs/humus/kube/internal/crd"
)

type (
	DetailItem struct {
		Name string `json:"name"`
		Port int32  `json:"port"`
	}
	DetailSpec struct {
		Replicas  int32                `json:"replicas"`
		Big       int64                `json:"big"`
		Small     uint8                `json:"small"`
		Nullable  *int32               `json:"nullable"`
		Ratio     float64              `json:"ratio"`
		Paused    bool                 `json:"paused"`
		Name      string               `json:"name"`
		Target    intstr.IntOrString   `json:"target"`
		Labels    map[string]string    `json:"labels"`
		Items     []DetailItem         `json:"items"`
		Grid      [][]int32            `json:"grid"`
		Raw       runtime.RawExtension `json:"raw"`
		Selector  string               `json:"selector"`
		NotBefore metav1.Time          `json:"notBefore"`
		Optional  int32                `json:"optional,omitempty"`
	}
	DetailStatus struct {
		ReadyReplicas int32              `json:"readyReplicas,omitempty"`
		Replicas      int                `json:"replicas,omitempty"`
		Selector      string             `json:"selector,omitempty"`
		Started       metav1.Time        `json:"started,omitzero"`
		Conditions    []metav1.Condition `json:"conditions,omitempty"`
	}
)

// detailed names a resource whose CRD details are all right; its spec is
// a DetailSpec, and its status a DetailStatus.
var detailed = crd.Meta{
	Group: "details.example.com", Version: "v1", Kind: "Detail", Plural: "details", Scope: apiextensionsv1.NamespaceScoped,
	ShortNames: []string{"dt", "dtl"},
	Categories: []string{"example", "all"},
	Columns: []crd.Column{
		{Name: "Replicas", JSONPath: ".spec.replicas"},
		{Name: "Ratio", JSONPath: ".spec.ratio"},
		{Name: "Paused", JSONPath: ".spec.paused", Priority: 1},
		{Name: "Target", JSONPath: ".spec.target"},
		{Name: "Team", JSONPath: ".spec.labels.team"},
		{Name: "App", JSONPath: `.metadata.labels.app\.kubernetes\.io/name`},
		{Name: "First Port", JSONPath: ".spec.items[0].port", Format: "int32"},
		{Name: "HTTP", JSONPath: `.spec.items[?(@.name=="http")].port`, Type: "number"},
		{Name: "Items", JSONPath: ".spec.items"},
		{Name: "Corner", JSONPath: ".spec.grid[0][0]"},
		{Name: "Raw", JSONPath: ".spec.raw.anything.below"},
		{Name: "Not Before", JSONPath: ".spec.notBefore"},
		{Name: "Started", JSONPath: ".status.started", Type: "string", Description: "When it started."},
		{Name: "Ready", JSONPath: `.status.conditions[?(@.type=="Ready")].status`},
		{Name: "Generation", JSONPath: ".metadata.generation"},
		{Name: "Age", JSONPath: ".metadata.creationTimestamp"},
	},
	Scale: &crd.Scale{SpecReplicasPath: ".spec.replicas", StatusReplicasPath: ".status.readyReplicas", LabelSelectorPath: ".status.selector"},
}

// buildDetails returns the CRD Build returns for m, a change of detailed.
func buildDetails(m crd.Meta) (*apiextensionsv1.CustomResourceDefinition, error) {
	return crd.Build(m, reflect.TypeFor[DetailSpec](), reflect.TypeFor[DetailStatus](), nil)
}

// Each column's type is as given, or else the field's.
func TestColumnsTakeTheirTypeFromTheSchema(t *testing.T) {
	c, err := buildDetails(detailed)
	if err != nil {
		t.Fatal(err)
	}
	v := c.Spec.Versions[0]
	want := []apiextensionsv1.CustomResourceColumnDefinition{
		{Name: "Replicas", Type: "integer", JSONPath: ".spec.replicas"},
		{Name: "Ratio", Type: "number", JSONPath: ".spec.ratio"},
		{Name: "Paused", Type: "boolean", JSONPath: ".spec.paused", Priority: 1},
		{Name: "Target", Type: "string", JSONPath: ".spec.target"},
		{Name: "Team", Type: "string", JSONPath: ".spec.labels.team"},
		{Name: "App", Type: "string", JSONPath: `.metadata.labels.app\.kubernetes\.io/name`},
		{Name: "First Port", Type: "integer", Format: "int32", JSONPath: ".spec.items[0].port"},
		{Name: "HTTP", Type: "number", JSONPath: `.spec.items[?(@.name=="http")].port`},
		{Name: "Items", Type: "string", JSONPath: ".spec.items"},
		{Name: "Corner", Type: "integer", JSONPath: ".spec.grid[0][0]"},
		{Name: "Raw", Type: "string", JSONPath: ".spec.raw.anything.below"},
		{Name: "Not Before", Type: "date", JSONPath: ".spec.notBefore"},
		{Name: "Started", Type: "string", Description: "When it started.", JSONPath: ".status.started"},
		{Name: "Ready", Type: "string", JSONPath: `.status.conditions[?(@.type=="Ready")].status`},
		{Name: "Generation", Type: "integer", JSONPath: ".metadata.generation"},
		{Name: "Age", Type: "date", JSONPath: ".metadata.creationTimestamp"},
	}
	if !reflect.DeepEqual(v.AdditionalPrinterColumns, want) {
		t.Errorf("columns:\n%+v\nwant:\n%+v", v.AdditionalPrinterColumns, want)
	}
	wantScale := &apiextensionsv1.CustomResourceSubresourceScale{SpecReplicasPath: ".spec.replicas", StatusReplicasPath: ".status.readyReplicas", LabelSelectorPath: ptr(".status.selector")}
	if !reflect.DeepEqual(v.Subresources.Scale, wantScale) {
		t.Errorf("scale %+v, want %+v", v.Subresources.Scale, wantScale)
	}
	if n := c.Spec.Names; !slices.Equal(n.ShortNames, []string{"dt", "dtl"}) || !slices.Equal(n.Categories, []string{"example", "all"}) {
		t.Errorf("short names %v, categories %v", n.ShortNames, n.Categories)
	}
	// Meta's slices are the CRD's own copies.
	c.Spec.Names.ShortNames[0] = "changed"
	if detailed.ShortNames[0] != "dt" {
		t.Error("changing the CRD's short names changed Meta's")
	}
}

func ptr[T any](v T) *T { return &v }

// detailMistakes are changes to detailed, each with the errors Build
// returns for it, one a line, in order.
var detailMistakes = []struct {
	name   string
	change func(m *crd.Meta)
	want   []string
}{
	{
		name: "short names and categories",
		change: func(m *crd.Meta) {
			m.ShortNames = []string{"MC", "details", "detail", "dt", "dt", "d.t", ""}
			m.Categories = []string{"example", "Example", "example", "-x"}
		},
		want: []string{
			`kube: Resource.ShortNames[0] "MC": a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')`,
			`kube: Resource.ShortNames[1] "details": is the resource's plural already: a short name is another name for it`,
			`kube: Resource.ShortNames[2] "detail": is the resource's singular already: a short name is another name for it`,
			`kube: Resource.ShortNames[4] "dt": is given twice, as ShortNames[3] too`,
			`kube: Resource.ShortNames[5] "d.t": a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')`,
			`kube: Resource.ShortNames[6] "": a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')`,
			`kube: Resource.Categories[1] "Example": a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')`,
			`kube: Resource.Categories[2] "example": is given twice, as Categories[0] too`,
			`kube: Resource.Categories[3] "-x": a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')`,
		},
	},
	{
		name: "column names, types and formats",
		change: func(m *crd.Meta) {
			m.Columns = []crd.Column{
				{Name: "Ready", JSONPath: ".status.readyReplicas"},
				{Name: "", JSONPath: ".spec.replicas"},
				{Name: "READY", JSONPath: ".spec.replicas"},
				{Name: "name", JSONPath: ".metadata.name"},
				{Name: "Kind", JSONPath: ".spec.replicas", Type: "int", Format: "int8"},
				{Name: "Paused", JSONPath: ".spec.paused", Type: "integer"},
				{Name: "Since", JSONPath: ".spec.replicas", Type: "date"},
				{Name: "On", JSONPath: ".spec.name", Type: "boolean"},
				{Name: "Target", JSONPath: ".spec.target", Type: "integer"},
			}
		},
		want: []string{
			`kube: Resource.Columns[1] "" (.spec.replicas): missing Name`,
			`kube: Resource.Columns[2] "READY" (.spec.replicas): Name is given twice, as Columns[0] "Ready" too: kubectl prints headings in upper case`,
			`kube: Resource.Columns[3] "name" (.metadata.name): Name is the table's first column, which kubectl always prints`,
			`kube: Resource.Columns[4] "Kind" (.spec.replicas): Type "int" isn't one of integer, number, string, boolean, date`,
			`kube: Resource.Columns[4] "Kind" (.spec.replicas): Format "int8" isn't one of int32, int64, float, double, byte, date, date-time, password`,
			`kube: Resource.Columns[5] "Paused" (.spec.paused): its Type "integer" can't show spec.paused, which is type: boolean: the cell would be empty`,
			`kube: Resource.Columns[6] "Since" (.spec.replicas): its Type "date" can't show spec.replicas, which is type: integer, format: int32: the cell would be empty`,
			`kube: Resource.Columns[7] "On" (.spec.name): its Type "boolean" can't show spec.name, which is type: string: the cell would be empty`,
			`kube: Resource.Columns[8] "Target" (.spec.target): its Type "integer" can't show spec.target, which is x-kubernetes-int-or-string: the cell would be empty`,
		},
	},
	{
		name: "column paths",
		change: func(m *crd.Meta) {
			m.Columns = []crd.Column{
				{Name: "Ready", JSONPath: ".status.readyReplica"},
				{Name: "A", JSONPath: ""},
				{Name: "B", JSONPath: "status.readyReplicas"},
				{Name: "C", JSONPath: "{.status.readyReplicas}"},
				{Name: "D", JSONPath: ".spec.items[0"},
				{Name: "E", JSONPath: ".spec.replicas.value"},
				{Name: "F", JSONPath: ".spec.name[0]"},
				{Name: "G", JSONPath: `.spec.labels[?(@.x=="y")]`},
				{Name: "H", JSONPath: `.status.conditions[?(@.typ=="Ready")].status`},
				{Name: "I", JSONPath: ".spec.items[0].nam"},
				{Name: "J", JSONPath: ".metadata.lables.app"},
				{Name: "K", JSONPath: ".spec..name"},
				{Name: "L", JSONPath: ".spec['name','replicas']"},
				{Name: "M", JSONPath: ".spec.*"},
				{Name: "N", JSONPath: ".sepc.replicas"},
				{Name: "O", JSONPath: ".metadata.labels['app.kubernetes.io/name']"},
			}
		},
		want: []string{
			`kube: Resource.Columns[0] "Ready" (.status.readyReplica): names no field of the schema: status has no field "readyReplica"`,
			`kube: Resource.Columns[1] "A" (): missing JSONPath`,
			`kube: Resource.Columns[2] "B" (status.readyReplicas): JSONPath must start with a dot, such as .spec.size`,
			`kube: Resource.Columns[3] "C" ({.status.readyReplicas}): JSONPath must start with a dot, such as .spec.size`,
			`kube: Resource.Columns[4] "D" (.spec.items[0): JSONPath doesn't parse: unterminated array`,
			`kube: Resource.Columns[5] "E" (.spec.replicas.value): names no field of the schema: spec.replicas is type: integer, format: int32, which has no field "value"`,
			`kube: Resource.Columns[6] "F" (.spec.name[0]): names no field of the schema: spec.name is type: string, not an array, so an index finds nothing`,
			`kube: Resource.Columns[7] "G" (.spec.labels[?(@.x=="y")]): names no field of the schema: spec.labels is type: object, not an array, so a filter finds nothing`,
			`kube: Resource.Columns[8] "H" (.status.conditions[?(@.typ=="Ready")].status): names no field of the schema: status.conditions[*] has no field "typ"`,
			`kube: Resource.Columns[9] "I" (.spec.items[0].nam): names no field of the schema: spec.items[*] has no field "nam"`,
			`kube: Resource.Columns[10] "J" (.metadata.lables.app): names no field of the schema: metadata has no field "lables"`,
			`kube: Resource.Columns[11] "K" (.spec..name): JSONPath has a recursive descent (..), which names no one field: write field names, array indexes and filters`,
			`kube: Resource.Columns[12] "L" (.spec['name','replicas']): JSONPath has a union ([a,b]), which names no one field: write field names, array indexes and filters`,
			`kube: Resource.Columns[13] "M" (.spec.*): names no field of the schema: spec has no field "*"`,
			`kube: Resource.Columns[14] "N" (.sepc.replicas): names no field of the schema: the object has no field "sepc"`,
			`kube: Resource.Columns[15] "O" (.metadata.labels['app.kubernetes.io/name']): names no field of the schema: metadata.labels.app is type: string, which has no field "kubernetes"`,
		},
	},
	{
		name: "scale",
		change: func(m *crd.Meta) {
			m.Scale = &crd.Scale{SpecReplicasPath: ".spec.big", StatusReplicasPath: ".spec.replicas", LabelSelectorPath: ".metadata.name"}
		},
		want: []string{
			`kube: Resource.Scale.SpecReplicasPath ".spec.big": names spec.big, which is type: integer, format: int64: a Scale's replicas are type: integer, format: int32, not nullable`,
			`kube: Resource.Scale.StatusReplicasPath ".spec.replicas": must be a field under .status, such as .status.replicas`,
			`kube: Resource.Scale.LabelSelectorPath ".metadata.name": must be a field under .spec or .status, such as .status.selector`,
		},
	},
	{
		name: "scale fields",
		change: func(m *crd.Meta) {
			m.Scale = &crd.Scale{SpecReplicasPath: ".spec.nullable", StatusReplicasPath: ".status.replicas", LabelSelectorPath: ".status.started"}
		},
		want: []string{
			`kube: Resource.Scale.SpecReplicasPath ".spec.nullable": names spec.nullable, which is type: integer, format: int32, nullable: a Scale's replicas are type: integer, format: int32, not nullable`,
			`kube: Resource.Scale.StatusReplicasPath ".status.replicas": names status.replicas, which is type: integer, format: int64: a Scale's replicas are type: integer, format: int32, not nullable`,
			`kube: Resource.Scale.LabelSelectorPath ".status.started": names status.started, which is type: string, format: date-time: a Scale's selector is type: string, not nullable`,
		},
	},
	{
		name: "scale paths",
		change: func(m *crd.Meta) {
			m.Scale = &crd.Scale{SpecReplicasPath: ".spec.items[0].port", StatusReplicasPath: ".status"}
		},
		want: []string{
			`kube: Resource.Scale.SpecReplicasPath ".spec.items[0].port": names no field of the schema: spec has no field "items[0]"`,
			`kube: Resource.Scale.StatusReplicasPath ".status": must be a field under .status, such as .status.replicas`,
		},
	},
	{
		name: "an empty scale",
		change: func(m *crd.Meta) {
			m.Scale = &crd.Scale{}
		},
		want: []string{
			`kube: Resource.Scale: missing SpecReplicasPath`,
			`kube: Resource.Scale: missing StatusReplicasPath`,
		},
	},
	{
		name: "a spec's replicas an object may lack",
		change: func(m *crd.Meta) {
			m.Scale = &crd.Scale{SpecReplicasPath: ".spec.optional", StatusReplicasPath: ".status.readyReplicas"}
		},
		want: []string{
			`kube: Resource.Scale.SpecReplicasPath ".spec.optional": names spec.optional, which an object may lack (omitempty, and no Default): the API server fails a GET of /scale then; drop omitempty or give it a Default`,
		},
	},
	{
		name: "the smallest int32s scale; a selector may be the spec's",
		change: func(m *crd.Meta) {
			m.Scale = &crd.Scale{SpecReplicasPath: ".spec.small", StatusReplicasPath: ".status.readyReplicas", LabelSelectorPath: ".spec.selector"}
		},
	},
}

// TestDetailsMistakes checks that Build names each mistake in ShortNames,
// Categories, Columns and Scale, each in an error of its own, all at once.
func TestDetailsMistakes(t *testing.T) {
	for _, tt := range detailMistakes {
		t.Run(tt.name, func(t *testing.T) {
			m := detailed
			tt.change(&m)
			_, err := buildDetails(m)
			if got := errorLines(err); !slices.Equal(got, tt.want) {
				t.Errorf("Build errors:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
		})
	}
}

// The mistakes in the details come with every other mistake, in one error.
func TestDetailsMistakesComeWithTheRest(t *testing.T) {
	m := detailed
	m.Group = ""
	m.ShortNames = []string{"details"}
	m.Columns = []crd.Column{{Name: "Ready", JSONPath: ".status.readyReplica"}}
	m.Scale = &crd.Scale{SpecReplicasPath: ".spec.replicas"}
	_, err := buildDetails(m)
	want := strings.Join([]string{
		`kube: Resource[crd_test.DetailSpec, crd_test.DetailStatus]: missing Group`,
		`kube: Resource.ShortNames[0] "details": is the resource's plural already: a short name is another name for it`,
		`kube: Resource.Columns[0] "Ready" (.status.readyReplica): names no field of the schema: status has no field "readyReplica"`,
		`kube: Resource.Scale: missing StatusReplicasPath`,
	}, "\n")
	if err == nil || err.Error() != want {
		t.Errorf("Build = %v\nwant:\n%s", err, want)
	}
}
