// Package wiretest checks conversions to wire messages in tests: fill a
// domain value's every field, convert it, and Unset names any field of
// the message the conversion left empty, the usual way a field added to
// one side is lost on the other.
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
