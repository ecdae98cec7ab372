//go:build race

package relaytest

// raceBuild reports that the tests run with the race detector; the child
// relay is then built with it too, which also reuses the race build cache.
const raceBuild = true
