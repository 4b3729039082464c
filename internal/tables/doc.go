// Package tables holds the owner tables of package graph: what a graph's
// nodes name, recorded per node in a table that CUDA keeps as a user object
// of the graph and releases, through the release queue, once the graph, its
// clones and executables are gone (lifetime/DESIGN.md I9). It is not part
// of purecuda's public API.
package tables
