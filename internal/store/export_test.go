package store

// MaxLastError is maxLastError, for the tests of package store_test.
const MaxLastError = maxLastError
