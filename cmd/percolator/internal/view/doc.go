// Package view prints what percolator's commands show: the status and
// its tables, the index job's report, the dump of rows as the paper's
// tables, lists of locks and notifications, edges, and the bank's
// progress; as aligned text, or as JSON.
//
// Everything user data reaches the terminal through Path or Text, so a
// row key or a file name with invalid UTF-8 or control bytes prints on
// one line and can be told apart.
package view
