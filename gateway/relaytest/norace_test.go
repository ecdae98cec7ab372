//go:build !race

package relaytest

// raceBuild reports that the tests run with the race detector.
const raceBuild = false
