// Package paging holds the one way Nimbus pages a list: a request for the items strictly after
// a position, at most Limit of them. Services take a Page and fetch up to Limit+1 items; the
// HTTP edge (backend/api: ParsePage, NewList) reads it from ?limit= and ?cursor= and writes the
// next cursor. It has no dependencies, so a service can page without importing the edge.
package paging

// Page is a cursor-paginated request: items strictly after After (the sort key of the last item
// already seen; 0 = from the start), at most Limit of them.
type Page struct {
	Limit int
	After int64
}
