// Package docindex is the document half of the web-index pipeline: Parse
// turns one file into a Doc (title, terms, links, content hash), and Build
// indexes a whole corpus of them from scratch into an Index (canonical
// copies, term postings, in-link counts).
//
// Build is the reference: the incremental pipeline, which maintains the
// same four maps with observers as files change, must at every quiescent
// point equal Build over the current files (Index.Equal). So the
// definitions below are the specification; everything here is a pure
// function with no storage, clock or goroutines, and deterministic.
//
// # Documents
//
// A corpus is a set of files named by paths that are relative, clean and
// slash-separated ("a/b.html"), compared bytewise and case-sensitively.
//
//  1. A file is indexable if its extension, compared case-insensitively,
//     is .html, .htm, .txt or .md. Other files are not part of the corpus,
//     unless a Selection chooses them (its globs replace these four, or
//     exclude some: ListDir, BuildChosen); Links (step 5 below) go by
//     these four whatever the Selection. .html and .htm files are parsed
//     as HTML, every other file as plain text (Markdown included: it is
//     not rendered and has no links).
//  2. Words are the distinct terms of a document, sorted bytewise. A term
//     is a maximal run of runes for which unicode.IsLetter or
//     unicode.IsDigit holds, lowercased rune by rune with unicode.ToLower,
//     and kept only if the lowercased run is 2 to 64 bytes long; a longer
//     run is dropped whole, not truncated. Anything else, invalid UTF-8
//     included, separates terms. For text files the whole content is
//     searched. For HTML only the text tokens of golang.org/x/net/html's
//     tokenizer count, entities decoded: the text of <title> is included;
//     the content of <script> and <style>, tags, attributes, comments and
//     doctypes are not. Every tag separates terms, inline ones too:
//     "a<b>c</b>" has no term "ac". The content of the other raw-text
//     elements (<noscript>, <iframe>, <xmp>, <plaintext>, ...) counts as
//     text as the tokenizer returns it: not entity-decoded, and with any
//     tags in it read as text.
//  3. Links (HTML only) are the targets of the href attribute of every <a>
//     tag outside raw-text elements (the first href if a tag has several),
//     each mapped to a corpus path by the rules under Links below. They are
//     distinct and sorted bytewise; whether a target exists is not checked.
//  4. The title of an HTML document is the text of its first <title>
//     element, white space collapsed to single spaces and trimmed; if that
//     is empty, the text of its first <h1> element (including the text of
//     elements nested in it, without separators, and running to the end of
//     the file if it is never closed), collapsed and trimmed; if there is
//     none, "". Later <title> and <h1> elements are never used, even when
//     the first is empty. The title of a text file is the first line
//     (lines end at "\n") that is not blank, trimmed of white space.
//  5. The hash of a document is the lowercase hex SHA-256 of its raw
//     bytes. Title and Words depend on the path only through its extension
//     (HTML or text); Links depend on the whole path; the hash not at all.
//  6. Parse never panics, on any input, and leaves Words and Links nil
//     when they are empty.
//
// # Links
//
// An href is mapped to a corpus path by these steps, in order; a link
// dropped at any step is not kept.
//
//  1. ASCII tabs and newlines are removed, and leading and trailing spaces
//     and control characters trimmed, as URL parsing does.
//  2. Everything from the first "#" (fragment), then everything from the
//     first "?" (query), is removed.
//  3. An empty reference is dropped: it names the document itself. So is a
//     reference with a scheme ("http:", "mailto:", "c:"; as in RFC 3986, a
//     letter, then letters, digits, "+", "-" or ".", then ":"), and a
//     network-path reference ("//host/..."): they leave the corpus.
//  4. Percent-escapes are decoded; a malformed escape drops the link.
//  5. The last path segment must name an indexable file, so a reference to
//     a directory ("dir/", ".", "..") is dropped.
//  6. A reference starting with "/" is resolved against the corpus root,
//     any other against the directory of the document, and the result is
//     cleaned with path.Clean ("." and ".." segments and repeated slashes
//     removed).
//  7. A result that climbs above the corpus root ("../x.html") is dropped,
//     and so is the document's own path.
//
// # The index
//
// Build(files) returns the Index with:
//
//  1. Docs[p] = Parse(p, files[p]) for every indexable p.
//  2. Canonical[h] = the bytewise-smallest p with Docs[p].Hash == h, for
//     every hash h in Docs. Docs with the same hash are duplicates; only
//     the canonical one of each cluster is indexed (3, 4), and since
//     duplicates have equal bytes, the choice is invisible in Terms.
//  3. Terms[w] = the sorted canonical paths p with w in Docs[p].Words;
//     terms with no such p are absent.
//  4. InLinks[t] = the number of canonical paths p with t in
//     Docs[p].Links, for every target t with at least one; others are
//     absent. Each source counts once however many times it links to t; a
//     document's link to itself is never counted (Links, step 7). Targets are paths as
//     written after resolution: t need not exist in the corpus, and a
//     link to a non-canonical copy counts for that copy's path, not for
//     its canonical path. Links of non-canonical docs are not counted even
//     when they differ from the canonical doc's (equal bytes in another
//     directory resolve relative links differently).
//  5. Dups() lists the clusters of two or more docs with the same hash,
//     each sorted (canonical path first), clusters sorted by canonical
//     path.
//
// An Index is immutable once built; all its methods are safe to call
// concurrently. Query and Dups return slices the caller owns.
//
// # Using it as a reference
//
//  1. Read the corpus with ReadCorpus (indexable regular files under a
//     directory, hidden names and symbolic links skipped; file names are
//     bytes and need not be UTF-8), or build the files map in memory.
//  2. Build it, run the incremental pipeline over the same files, and
//     compare with want.Equal(got): nil, or an error wrapping ErrNotEqual
//     that names the first difference in a fixed order (Docs, Canonical,
//     Terms, InLinks; keys in sorted order), so a failing test reports the
//     same difference every run.
//
// # The incremental index
//
// Register installs the observers (pipeline.go) on a DB; Sync writes the
// files that changed; RunWorkers runs the observers to quiescence, where
// Export equals Build over the files Sync was given (Reference, when some
// were bad). What it stores follows DESIGN.md's rules for user data:
//
//  1. Values are binary (encode.go): titles, paths, words and links keep
//     their bytes, invalid UTF-8 included.
//  2. Row keys built from user bytes are unambiguous and bounded
//     (keys.go): a path is the tail of its keys, a term cannot hold the
//     "/" that ends it, and a link target is length-prefixed, or hashed
//     when long. Paths are limited to MaxPathSize bytes.
//  3. Sync (sync.go) takes a file list (ListDir, ScanDir, MemFiles) and
//     reads only the files whose Stat (size, modification time, inode)
//     changed since they were loaded, or all with Rehash. A file it cannot
//     read, over SyncOptions.MaxFileSize, or with a path over MaxPathSize
//     is a bad file: skipped, reported in SyncStats.Bad, and what the
//     index held for it kept (so are the documents under a directory
//     ListDir could not read); the others are synced. It refuses, before
//     writing, to delete more than half of the indexed documents unless
//     allowed.
//  4. The summary counts (documents, terms, duplicate clusters) are kept
//     exact at a cost in proportion to what changed: the observers record
//     what they changed in per-path dirty cells, and CountIndex folds them
//     into per-entity flags and the counts (counts.go).
//  5. A store holds one format of index (ErrFormat otherwise).
//
// # The job
//
// RunJob (job.go) is the whole of one run, as percolator index runs it:
// list a directory (ListDir, with JobOptions.Select; the files it did not
// choose are counted by extension), register the observers and load what
// changed (Sync), run the observers to quiescence, fold the counts
// (CountIndex) and, with JobOptions.Verify, compare the index with a
// batch build of the files loaded (BuildChosen; ErrVerify). A JobReport
// follows its phases and their progress (a monitor reads the observers'
// status every second while they run); the command draws and publishes
// what it is told, and RunJob returns what each phase did (JobSummary).
package docindex
