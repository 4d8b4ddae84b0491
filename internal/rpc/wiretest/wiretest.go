// Package wiretest checks, in tests, the conversions between domain types
// and wire messages and where they live. To the wire: fill a domain value's
// every field, convert it, and Unset names the fields of the message left
// empty. From the wire: convert a Filled message, and Zero names the fields
// of the domain value left zero. Either catches the usual fault, a field
// added to one side and forgotten in the conversion. OutsideEdge lists the
// files of a package that import the wire types outside its RPC edge, and
// OffTheWire the functions of its edge that do none of the edge's work.
package wiretest

import "google.golang.org/protobuf/reflect/protoreflect"

// Unset lists, by path, the fields of m and of the messages in it that
// hold their zero value (an empty list counts as unset; of a oneof, only
// the member set is looked into).
func Unset(m protoreflect.Message) []string {
	return unset(m, "")
}

func unset(m protoreflect.Message, prefix string) []string {
	var out []string
	fields := m.Descriptor().Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		name := prefix + string(fd.Name())
		if o := fd.ContainingOneof(); o != nil && !o.IsSynthetic() {
			if set := m.WhichOneof(o); set != nil && set != fd {
				continue
			}
		}
		if !m.Has(fd) {
			out = append(out, name)
			continue
		}
		switch {
		case fd.IsList() && fd.Message() != nil:
			l := m.Get(fd).List()
			for j := range l.Len() {
				out = append(out, unset(l.Get(j).Message(), name+"[].")...)
			}
		case fd.Message() != nil && !fd.IsMap():
			out = append(out, unset(m.Get(fd).Message(), name+".")...)
		}
	}
	return out
}
