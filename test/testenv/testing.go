package testenv

import (
	"context"
	"fmt"
	"os"
	"testing"
)

// StartForTest starts an Env for one test (or one package via a shared
// variable) and stops it when the test finishes. It fails the test, rather
// than skipping it, when the tools are missing: silently skipped integration
// tests are worse than a red build that says `make tools`.
func StartForTest(t testing.TB) *Env {
	t.Helper()
	e, err := start(t.Context(), t.Logf)
	if err != nil {
		t.Fatalf("starting test environment: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			// The data dir (with the logs) is removed by Stop, keep the gist.
			t.Logf("kube-apiserver log before stop:%s", logTail(e.api))
		}
		e.Stop()
	})
	return e
}

// Main is for TestMain when a whole package shares one Env (startup costs a
// few seconds). It starts the Env, stores it in *env, runs the tests, stops
// the Env and exits:
//
//	var env *testenv.Env
//
//	func TestMain(m *testing.M) { testenv.Main(m, &env) }
func Main(m *testing.M, env **Env) {
	e, err := Start(context.Background())
	if err != nil {
		fmt.Fprintf(os.Stderr, "starting test environment: %v\n", err)
		os.Exit(1)
	}
	*env = e
	code := m.Run()
	e.Stop()
	os.Exit(code)
}
