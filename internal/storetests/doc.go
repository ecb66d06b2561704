// Package storetests is a module of its own for the tests of the library's
// packages that run on a networked store (the local Redis or PostgreSQL) as
// well as on memory: the election (election), the partition fleet
// (partition), WithLimit across processes (semaphore), the fencing guards
// against a frozen holder process (frozen) and the soak (soak). Keeping
// them here keeps the store drivers out of the root module's requirements.
// Package localstore gives these tests their backends.
package storetests
