package d1kv

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/livesync-go/livesync-go/engine/store"
)

// ReadLocals reads _local documents of database db straight from its
// rows, one query per 98 ids, each as committed when its query ran: a
// store's own reads (store.LocalsReader through Prefetch and a View)
// also read the database's counters first, which a caller that only
// wants _local documents does not need. Absent ids are left out.
func ReadLocals(ctx context.Context, x Exec, db string, ids []string) (map[string]json.RawMessage, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	out := make(map[string]json.RawMessage, len(ids))
	asked := make(map[string]bool, len(ids))
	for len(ids) > 0 {
		n := min(len(ids), maxParams-2)
		var q strings.Builder
		q.WriteString(`SELECT k, v FROM livesync_kv WHERE db = ?1 AND b = ?2 AND k IN (`)
		args := []any{db, int64(store.BucketLocal)}
		for i, id := range ids[:n] {
			if i > 0 {
				q.WriteString(", ")
			}
			fmt.Fprintf(&q, "?%d", i+3)
			args = append(args, []byte(id))
			asked[id] = true
		}
		q.WriteString(")")
		rows, err := x.Query(ctx, q.String(), args...)
		if err != nil {
			return nil, fmt.Errorf("d1kv: reading _local documents: %w", err)
		}
		for _, r := range rows {
			if len(r) != 2 {
				return nil, errors.New("d1kv: reading _local documents: a row of the wrong shape")
			}
			k, err := asBytes(r[0])
			if err != nil {
				return nil, fmt.Errorf("d1kv: reading _local documents: %w", err)
			}
			v, err := asBytes(r[1])
			if err != nil {
				return nil, fmt.Errorf("d1kv: reading _local documents: %w", err)
			}
			if asked[string(k)] {
				out[string(k)] = v
			}
		}
		ids = ids[n:]
	}
	return out, nil
}
