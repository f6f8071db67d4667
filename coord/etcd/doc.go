// Package etcd is the coordination service on etcd, for the distributed
// deployment (Cloud Bigtable as the store): the paper's Chubby.
//
// StartEmbedded runs a single etcd member in the process, for tests and
// `percolator devcluster`.
package etcd
