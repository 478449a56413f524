package outbox_test

// childEnv, when set, makes the test binary a child process of a crash
// test (crash_test.go) instead of running tests.
const childEnv = "OUTBOX_TEST_CHILD"

func childMain() int { return 0 }
