package tests

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
)

// parallelDefault is how many tests marked t.Parallel run at once unless
// -parallel says otherwise: these tests wait on servers, child processes
// and rate windows far more than they compute, so twice GOMAXPROCS on a
// 2-core machine. The tests whose assertions measure time (the linear
// cost checks, the timeouts, the login limits, the load test) are not
// parallel: Go runs them first, before the parallel ones start.
const parallelDefault = 4

// TestMain runs the tests with parallelDefault (unless -parallel is
// given) and removes the binaries they built (goBuildOnce) when they are
// done.
func TestMain(m *testing.M) {
	flag.Parse()
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.parallel" })
	if !given {
		flag.Set("test.parallel", strconv.Itoa(parallelDefault))
	}
	code := m.Run()
	builtBins.mu.Lock()
	if builtBins.dir != "" {
		os.RemoveAll(builtBins.dir)
	}
	builtBins.mu.Unlock()
	os.Exit(code)
}

// builtBins are the commands go build made for this test binary, one
// each: linking one takes seconds of CPU, and forty tests run the same
// two.
var builtBins struct {
	mu   sync.Mutex
	dir  string
	bins map[string]*builtBin
}

type builtBin struct {
	once sync.Once
	path string
	err  error
}

// goBuildOnce builds the command in pkg (relative to tests/) into a
// folder shared by the tests of this binary, the first time a test asks
// for it, and returns its path. Tests only run it; none changes it.
func goBuildOnce(t *testing.T, pkg string) string {
	t.Helper()
	builtBins.mu.Lock()
	if builtBins.dir == "" {
		dir, err := os.MkdirTemp("", "lsgo-tests-bin-")
		if err != nil {
			builtBins.mu.Unlock()
			t.Fatal(err)
		}
		builtBins.dir, builtBins.bins = dir, map[string]*builtBin{}
	}
	b := builtBins.bins[pkg]
	if b == nil {
		b = &builtBin{}
		builtBins.bins[pkg] = b
	}
	dir := builtBins.dir
	builtBins.mu.Unlock()
	b.once.Do(func() {
		path := filepath.Join(dir, filepath.Base(pkg))
		if out, err := exec.Command("go", "build", "-o", path, pkg).CombinedOutput(); err != nil {
			b.err = fmt.Errorf("go build %s: %v\n%s", pkg, err, out)
			return
		}
		b.path = path
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.path
}
