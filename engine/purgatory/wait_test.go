package purgatory

import "testing/synctest"

// waitIdle lets every goroutine of the bubble run until all are blocked.
func waitIdle() { synctest.Wait() }
