package control

import (
	"strconv"

	"github.com/z5labs/humus/kube/internal/cache"

	"k8s.io/apimachinery/pkg/types"
)

// Relation is a Related or References part as the controller runs it.
type Relation struct {
	Source *Source // what it reads
	// Mapper maps a related object to the controller's keys (Related), or
	// index maps a controller's object to the related objects it names
	// (References).
	Mapper func(u *cache.Object) ([]types.NamespacedName, error)
	Index  func(u *cache.Object) ([]types.NamespacedName, error)
	name   string // References' index's name
	// Failed holds the objects its function failed for: the related
	// objects (Related), or the controller's own (References).
	Failed FailedOnce
}

// relationName is the name of the i-th References' index.
func relationName(i int) string { return "humus.kube.references." + strconv.Itoa(i) }
