package u32

import (
	"errors"
	"fmt"
	"reflect"
	"unsafe"

	tc "github.com/florianl/go-tc"
	"github.com/mdlayher/netlink"
)

// connOf returns the rtnetlink socket inside a go-tc Tc.
//
// shaperd cannot write u32 selectors through go-tc: its U32Sel encoding
// places the pad byte of struct tc_u32_sel at the end instead of after
// nkeys, which shifts offmask, off, offoff, hoff and hmask by one byte
// (florianl/go-tc issue #14, open). Match keys survive, hash keys do not.
// So this package builds its u32 messages itself and sends them on the
// same socket, which go-tc does not export: it is read from the unexported
// field "con" (a *netlink.Conn since go-tc's first release). A go-tc
// version that changes this makes New's Classifier return an error from
// every method, and this package's tests fail, rather than misbehave.
func connOf(tcnl *tc.Tc) (*netlink.Conn, error) {
	if tcnl == nil {
		return nil, errors.New("nil *tc.Tc")
	}
	f := reflect.ValueOf(tcnl).Elem().FieldByName("con")
	if !f.IsValid() {
		return nil, errors.New("go-tc's Tc has no field con; this go-tc version is not supported, use NewConn")
	}
	v := reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem().Interface()
	c, ok := v.(*netlink.Conn)
	if !ok || c == nil {
		return nil, fmt.Errorf("go-tc's Tc.con is %T, not *netlink.Conn; use NewConn", v)
	}
	return c, nil
}
