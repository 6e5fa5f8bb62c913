package d1kv

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/store"
)

// maxParams is D1's limit of bound parameters per statement.
const maxParams = 100

// maxStmtBytes bounds the values one multi-row INSERT carries (a single
// larger value still goes alone).
const maxStmtBytes = 1 << 20

// tx is a transaction: reads cached per key, and in an Update the writes
// buffered until commit.
type tx struct {
	b       *Backend
	ctx     context.Context
	write   bool
	version int64 // the commit version an Update began at
	err     error // the first read that failed; the transaction fails

	read   [store.NumBuckets]map[string][]byte // nil value: known absent
	full   [store.NumBuckets]bool              // read holds every key of the bucket
	writes [store.NumBuckets]map[string][]byte // nil value: deleted
	// named holds the document records the current page of a BucketSeqs
	// scan names, read with the page (see page).
	named map[string][]byte
}

func (b *Backend) newTx(write bool) *tx {
	t := &tx{b: b, ctx: context.Background(), write: write}
	for i := range t.read {
		t.read[i] = map[string][]byte{}
		if write {
			t.writes[i] = map[string][]byte{}
		}
	}
	return t
}

// begin reads the commit version and the meta bucket (a few counters the
// store reads in every Update) in one statement.
func (t *tx) begin(ctx context.Context) error {
	rows, err := t.b.x.Query(ctx, `SELECT -1, NULL, version FROM livesync_head WHERE db = ?1
		UNION ALL SELECT b, k, v FROM livesync_kv WHERE db = ?1 AND b = ?2`, t.b.db, int64(store.BucketMeta))
	if err != nil {
		return fmt.Errorf("d1kv: begin: %w", err)
	}
	found := false
	for _, r := range rows {
		if len(r) != 3 {
			return fmt.Errorf("d1kv: begin: a row of %d columns", len(r))
		}
		if n, _ := asInt(r[0]); n == -1 {
			if t.version, err = asInt(r[2]); err != nil {
				return fmt.Errorf("d1kv: begin: commit version: %w", err)
			}
			found = true
			continue
		}
		k, err1 := asBytes(r[1])
		v, err2 := asBytes(r[2])
		if err := errors.Join(err1, err2); err != nil {
			return fmt.Errorf("d1kv: begin: %w", err)
		}
		t.read[store.BucketMeta][string(k)] = v
	}
	if !found {
		return fmt.Errorf("d1kv: database %q was deleted: %w", t.b.db, engine.ErrNotFound)
	}
	t.full[store.BucketMeta] = true
	return nil
}

func (t *tx) fail(err error) {
	if t.err == nil {
		t.err = err
	}
}

func (t *tx) Get(b store.Bucket, key []byte) []byte {
	if t.write {
		if v, ok := t.writes[b][string(key)]; ok {
			return v
		}
	}
	if v, ok := t.read[b][string(key)]; ok || t.full[b] || t.err != nil {
		return v
	}
	if v, ok := t.named[string(key)]; ok && b == store.BucketDocs {
		return v
	}
	rows, err := t.b.x.Query(t.ctx, `SELECT v FROM livesync_kv WHERE db = ?1 AND b = ?2 AND k = ?3`,
		t.b.db, int64(b), nonNil(key))
	if err != nil {
		t.fail(fmt.Errorf("d1kv: get: %w", err))
		return nil
	}
	var v []byte
	if len(rows) > 0 && len(rows[0]) > 0 {
		if v, err = asBytes(rows[0][0]); err != nil {
			t.fail(fmt.Errorf("d1kv: get: %w", err))
			return nil
		}
	}
	t.read[b][string(key)] = v
	return v
}

func (t *tx) Put(b store.Bucket, key, value []byte) error {
	if !t.write {
		return errors.New("d1kv: Put in a read-only transaction")
	}
	t.writes[b][string(key)] = nonNil(value)
	return nil
}

func (t *tx) Delete(b store.Bucket, key []byte) error {
	if !t.write {
		return errors.New("d1kv: Delete in a read-only transaction")
	}
	t.writes[b][string(key)] = nil
	return nil
}

// Ascend pages through the bucket's rows in key order, growing the page
// from 100 to 1000 rows (BucketSeqs: 100), and in an Update merges the buffered writes in.
func (t *tx) Ascend(b store.Bucket, from []byte, fn func(k, v []byte) bool) error {
	var over []string // buffered keys ≥ from, sorted
	for k := range t.writes[b] {
		if k >= string(from) {
			over = append(over, k)
		}
	}
	slices.Sort(over)
	// emitOver passes the buffered keys before limit (all if limit is
	// nil) to fn; false when fn stopped.
	emitOver := func(limit []byte) bool {
		for len(over) > 0 && (limit == nil || over[0] < string(limit)) {
			k := over[0]
			over = over[1:]
			if v := t.writes[b][k]; v != nil && !fn([]byte(k), v) {
				return false
			}
		}
		return true
	}
	after, inclusive := from, true
	grow := 2
	if b == store.BucketSeqs {
		grow = 1 // its pages carry whole document records
	}
	for page := 100; ; page = min(page*grow, 1000) {
		rows, err := t.page(b, after, inclusive, page)
		if err != nil {
			return fmt.Errorf("d1kv: ascend: %w", err)
		}
		for _, r := range rows {
			k, v := r[0], r[1]
			if !emitOver(k) {
				return nil
			}
			if len(over) > 0 && over[0] == string(k) {
				over = over[1:]
				if v = t.writes[b][string(k)]; v == nil {
					continue // deleted in this transaction
				}
			}
			if !fn(k, v) {
				return nil
			}
		}
		if len(rows) < page {
			break
		}
		after, inclusive = rows[len(rows)-1][0], false
	}
	emitOver(nil)
	return nil
}

// page reads up to n rows of bucket b with keys from after on. A page of
// BucketSeqs also reads the document records its values name (the store
// keeps sequence → document id there, engine/store/kv.go) in the same
// statement, into t.named, so a changes scan costs one query per page
// instead of one per change, and sees each change's record as of the page.
func (t *tx) page(b store.Bucket, after []byte, inclusive bool, n int) ([][2][]byte, error) {
	p, cols, join := ``, `k, v`, ``
	if b == store.BucketSeqs {
		p, cols = `s.`, `s.k, s.v, d.v`
		join = ` s LEFT JOIN livesync_kv d ON d.db = s.db AND d.b = ` + strconv.Itoa(int(store.BucketDocs)) + ` AND d.k = s.v`
	}
	where := ``
	args := []any{t.b.db, int64(b), int64(n)}
	switch {
	case inclusive && len(after) > 0:
		where = ` AND ` + p + `k >= ?4`
		args = append(args, after)
	case !inclusive:
		where = ` AND ` + p + `k > ?4`
		args = append(args, nonNil(after))
	}
	q := `SELECT ` + cols + ` FROM livesync_kv` + join + ` WHERE ` + p + `db = ?1 AND ` + p + `b = ?2` + where +
		` ORDER BY ` + p + `k LIMIT ?3`
	rows, err := t.b.x.Query(t.ctx, q, args...)
	if err != nil {
		return nil, err
	}
	if join != `` {
		t.named = make(map[string][]byte, len(rows))
	}
	out := make([][2][]byte, len(rows))
	for i, r := range rows {
		if len(r) < 2 {
			return nil, fmt.Errorf("a row of %d columns", len(r))
		}
		k, err1 := asBytes(r[0])
		v, err2 := asBytes(r[1])
		if err := errors.Join(err1, err2); err != nil {
			return nil, err
		}
		out[i] = [2][]byte{k, v}
		if join != `` && len(r) == 3 && r[2] != nil {
			d, err := asBytes(r[2])
			if err != nil {
				return nil, err
			}
			t.named[string(v)] = d
		}
	}
	return out, nil
}

// commitStmts returns the batch committing the buffered writes, nil if
// there are none. Its first statements fail (NOT NULL) unless the commit
// version is still t.version, and move it on.
func (t *tx) commitStmts() []Stmt {
	var stmts []Stmt
	for b := range t.writes {
		var puts, dels []string
		for k, v := range t.writes[b] {
			if v == nil {
				dels = append(dels, k)
			} else {
				puts = append(puts, k)
			}
		}
		slices.Sort(puts)
		slices.Sort(dels)
		stmts = append(stmts, t.putStmts(store.Bucket(b), puts)...)
		stmts = append(stmts, t.deleteStmts(store.Bucket(b), dels)...)
	}
	if len(stmts) == 0 {
		return nil
	}
	guard := []Stmt{
		{SQL: `INSERT INTO livesync_head (db, version) SELECT ?1, NULL WHERE NOT EXISTS (SELECT 1 FROM livesync_head WHERE db = ?1)`,
			Args: []any{t.b.db}},
		{SQL: `UPDATE livesync_head SET version = CASE WHEN version = ?2 THEN ?2 + 1 ELSE NULL END WHERE db = ?1`,
			Args: []any{t.b.db, t.version}},
	}
	return append(guard, stmts...)
}

// putStmts writes keys in multi-row INSERTs of at most 49 rows (99 bound
// parameters with the database name) and about maxStmtBytes of values.
func (t *tx) putStmts(b store.Bucket, keys []string) []Stmt {
	var stmts []Stmt
	bucket := strconv.Itoa(int(b))
	for len(keys) > 0 {
		var sql strings.Builder
		sql.WriteString(`INSERT OR REPLACE INTO livesync_kv (db, b, k, v) VALUES `)
		args := []any{t.b.db}
		size := 0
		n := 0
		for n < len(keys) && len(args)+2 <= maxParams && (n == 0 || size+len(t.writes[b][keys[n]]) <= maxStmtBytes) {
			v := t.writes[b][keys[n]]
			if n > 0 {
				sql.WriteString(", ")
			}
			fmt.Fprintf(&sql, "(?1, %s, ?%d, ?%d)", bucket, len(args)+1, len(args)+2)
			args = append(args, []byte(keys[n]), v)
			size += len(keys[n]) + len(v)
			n++
		}
		stmts = append(stmts, Stmt{SQL: sql.String(), Args: args})
		keys = keys[n:]
	}
	return stmts
}

// deleteStmts deletes keys, 99 per statement.
func (t *tx) deleteStmts(b store.Bucket, keys []string) []Stmt {
	var stmts []Stmt
	for len(keys) > 0 {
		n := min(len(keys), maxParams-1)
		var sql strings.Builder
		fmt.Fprintf(&sql, `DELETE FROM livesync_kv WHERE db = ?1 AND b = %d AND k IN (`, b)
		args := []any{t.b.db}
		for i, k := range keys[:n] {
			if i > 0 {
				sql.WriteString(", ")
			}
			fmt.Fprintf(&sql, "?%d", i+2)
			args = append(args, []byte(k))
		}
		sql.WriteString(")")
		stmts = append(stmts, Stmt{SQL: sql.String(), Args: args})
		keys = keys[n:]
	}
	return stmts
}

// nonNil returns p, or an empty slice for nil (nil would bind as NULL).
func nonNil(p []byte) []byte {
	if p == nil {
		return []byte{}
	}
	return p
}

// asBytes converts a BLOB column as an Exec returns it.
func asBytes(v any) ([]byte, error) {
	switch v := v.(type) {
	case []byte:
		return nonNil(v), nil
	case string:
		return []byte(v), nil
	case []any: // an array of numbers
		out := make([]byte, len(v))
		for i, e := range v {
			n, err := asInt(e)
			if err != nil || n < 0 || n > 255 {
				return nil, fmt.Errorf("a BLOB element %v is not a byte", e)
			}
			out[i] = byte(n)
		}
		return out, nil
	}
	return nil, fmt.Errorf("a value of type %T where a BLOB was expected", v)
}

// asInt converts an INTEGER column as an Exec returns it.
func asInt(v any) (int64, error) {
	switch v := v.(type) {
	case int64:
		return v, nil
	case int:
		return int64(v), nil
	case float64:
		if v != float64(int64(v)) {
			return 0, fmt.Errorf("%v is not an integer", v)
		}
		return int64(v), nil
	}
	return 0, fmt.Errorf("a value of type %T where an INTEGER was expected", v)
}

// Prefetch reads the keys of bucket b in one statement per 98 keys, for
// the next transaction of this backend to use (store.Prefetcher).
func (b *Backend) Prefetch(bk store.Bucket, keys [][]byte) error {
	if err := b.enter(); err != nil {
		return err
	}
	defer b.leave()
	p := &prefetched{bucket: bk, rows: map[string][]byte{}, version: -2}
	seen := map[string]bool{}
	var uniq [][]byte
	for _, k := range keys {
		if !seen[string(k)] {
			seen[string(k)] = true
			uniq = append(uniq, k)
		}
	}
	for len(uniq) > 0 {
		n := min(len(uniq), maxParams-2)
		var sql strings.Builder
		sql.WriteString(`SELECT -1, NULL, version FROM livesync_head WHERE db = ?1
			UNION ALL SELECT 0, k, v FROM livesync_kv WHERE db = ?1 AND b = ?2 AND k IN (`)
		args := []any{b.db, int64(bk)}
		for i, k := range uniq[:n] {
			if i > 0 {
				sql.WriteString(", ")
			}
			fmt.Fprintf(&sql, "?%d", i+3)
			args = append(args, nonNil(k))
			p.rows[string(k)] = nil
		}
		sql.WriteString(")")
		rows, err := b.x.Query(context.Background(), sql.String(), args...)
		if err != nil {
			return fmt.Errorf("d1kv: prefetch: %w", err)
		}
		if err := p.add(rows); err != nil {
			return fmt.Errorf("d1kv: prefetch: %w", err)
		}
		uniq = uniq[n:]
	}
	b.preMu.Lock()
	b.pre = p
	b.preMu.Unlock()
	return nil
}

// prefetched holds rows Prefetch read and the commit version they were
// read at (-1: versions differed between its statements).
type prefetched struct {
	bucket  store.Bucket
	rows    map[string][]byte // nil: absent
	version int64             // -2 before the first statement
}

func (p *prefetched) add(rows []Row) error {
	for _, r := range rows {
		if len(r) != 3 {
			return fmt.Errorf("a row of %d columns", len(r))
		}
		if n, _ := asInt(r[0]); n == -1 {
			v, err := asInt(r[2])
			if err != nil {
				return err
			}
			if p.version == -2 {
				p.version = v
			} else if p.version != v {
				p.version = -1
			}
			continue
		}
		k, err1 := asBytes(r[1])
		v, err2 := asBytes(r[2])
		if err := errors.Join(err1, err2); err != nil {
			return err
		}
		p.rows[string(k)] = v
	}
	return nil
}

// adopt takes p's rows into the transaction's read cache.
func (t *tx) adopt(p *prefetched) {
	for k, v := range p.rows {
		t.read[p.bucket][k] = v
	}
}
