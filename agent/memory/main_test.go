package memory

import (
	"testing"

	"github.com/lock-agent/lock-agent/internal/leaktest"
)

func TestMain(m *testing.M) { leaktest.Main(m) }
