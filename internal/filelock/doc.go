// Package filelock is the lock that the writers of a shared file take
// (the trust store, the token store), so that writers in several
// processes — the relay and the crosstalk command — never lose each
// other's changes.
package filelock
