//go:build js && wasm

package d1kv

import (
	"context"
	"errors"
	"fmt"
	"syscall/js"

	"github.com/livesync-go/livesync-go/wasm/internal/jsawait"
)

// D1 is an Exec over a D1 database binding (env.DB in a Worker).
type D1 struct{ db js.Value }

var _ Exec = (*D1)(nil)

// NewD1 returns the Exec of the D1 binding db: env.DB in a Worker, which
// syumai/workers' cloudflare.GetBinding("DB") returns (this package does
// not import syumai/workers, whose packages need the Workers runtime to
// load, so that it also runs under Node).
func NewD1(db js.Value) (*D1, error) {
	if db.Type() != js.TypeObject || db.Get("prepare").Type() != js.TypeFunction || db.Get("batch").Type() != js.TypeFunction {
		return nil, errors.New("d1kv: the binding is not a D1 database (no prepare and batch)")
	}
	return &D1{db: db}, nil
}

var (
	uint8Array  = js.Global().Get("Uint8Array")
	arrayBuffer = js.Global().Get("ArrayBuffer")
)

// jsArg converts a bound argument: a BLOB crosses as a Uint8Array.
func jsArg(a any) (any, error) {
	switch a := a.(type) {
	case nil:
		return nil, nil
	case int64:
		if a > 1<<53 || a < -(1<<53) {
			return nil, fmt.Errorf("d1kv: integer %d is beyond what D1's binding carries exactly", a)
		}
		return float64(a), nil
	case int:
		return jsArg(int64(a))
	case string:
		return a, nil
	case []byte:
		u := uint8Array.New(len(a))
		js.CopyBytesToJS(u, a)
		return u, nil
	}
	return nil, fmt.Errorf("d1kv: cannot bind a %T", a)
}

// prepare returns the prepared statement sql bound to args.
func (d *D1) prepare(sql string, args []any) (v js.Value, err error) {
	vals := make([]any, len(args))
	for i, a := range args {
		if vals[i], err = jsArg(a); err != nil {
			return js.Value{}, err
		}
	}
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("d1kv: prepare: %v", r)
		}
	}()
	st := d.db.Call("prepare", sql)
	if len(vals) > 0 {
		st = st.Call("bind", vals...)
	}
	return st, nil
}

// await waits for a D1 promise; a rejection is an error with its message.
func await(p js.Value) (js.Value, error) {
	v, rejected := jsawait.Await(p)
	if !rejected {
		return v, nil
	}
	msg := v.Get("message")
	if msg.Type() == js.TypeString {
		return js.Value{}, errors.New("d1: " + msg.String())
	}
	return js.Value{}, errors.New("d1: " + v.Call("toString").String())
}

// call calls method on v, turning a thrown exception into an error.
func call(v js.Value, method string, args ...any) (r js.Value, err error) {
	defer func() {
		if e := recover(); e != nil {
			err = fmt.Errorf("d1kv: %s: %v", method, e)
		}
	}()
	return v.Call(method, args...), nil
}

// Query runs sql with raw(): rows as arrays, in the SELECT's order.
func (d *D1) Query(ctx context.Context, sql string, args ...any) ([]Row, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	st, err := d.prepare(sql, args)
	if err != nil {
		return nil, err
	}
	p, err := call(st, "raw")
	if err != nil {
		return nil, err
	}
	res, err := await(p)
	if err != nil {
		return nil, err
	}
	n := res.Length()
	rows := make([]Row, n)
	for i := range n {
		r := res.Index(i)
		row := make(Row, r.Length())
		for j := range row {
			if row[j], err = goValue(r.Index(j)); err != nil {
				return nil, err
			}
		}
		rows[i] = row
	}
	return rows, nil
}

// goValue converts a D1 result value: null, a number, a string, or a
// BLOB as an Array of numbers, an ArrayBuffer or a typed array.
func goValue(v js.Value) (any, error) {
	switch v.Type() {
	case js.TypeNull, js.TypeUndefined:
		return nil, nil
	case js.TypeNumber:
		f := v.Float()
		if f == float64(int64(f)) {
			return int64(f), nil
		}
		return f, nil
	case js.TypeString:
		return v.String(), nil
	case js.TypeObject:
		var u js.Value
		switch {
		case v.InstanceOf(uint8Array):
			u = v
		case v.InstanceOf(arrayBuffer), js.Global().Get("Array").Call("isArray", v).Bool():
			u = uint8Array.New(v)
		case arrayBuffer.Call("isView", v).Bool():
			u = uint8Array.New(v.Get("buffer"), v.Get("byteOffset"), v.Get("byteLength"))
		default:
			return nil, fmt.Errorf("d1kv: a result value that is not a BLOB: %s", v.Call("toString").String())
		}
		b := make([]byte, u.Length())
		js.CopyBytesToGo(b, u)
		return b, nil
	}
	return nil, fmt.Errorf("d1kv: a result value of JavaScript type %s", v.Type())
}

// Batch runs stmts with D1's batch(), one transaction.
func (d *D1) Batch(ctx context.Context, stmts []Stmt) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	list := make([]any, len(stmts))
	for i, s := range stmts {
		st, err := d.prepare(s.SQL, s.Args)
		if err != nil {
			return err
		}
		list[i] = st
	}
	p, err := call(d.db, "batch", js.ValueOf(list))
	if err != nil {
		return err
	}
	_, err = await(p)
	return err
}
