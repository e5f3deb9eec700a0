//go:build !lockorder

package lockorder

import "sync"

// Mutex is sync.Mutex itself in a build without the lockorder tag: the
// rank is for the checking build alone (see on.go), and costs nothing here.
type Mutex[R Rank] = sync.Mutex

// Enabled says whether this build checks the lock order.
const Enabled = false

// Acquisitions returns how many times each rank's mutexes were taken so
// far; nil unless the build has the lockorder tag.
func Acquisitions() map[string]uint64 { return nil }
